"""How far past its deadline a CPU DGS solve ends when every core is busy: one Python busy loop per
core in other processes while GEOM benefit n = 1000 is solved with 50 and 100 ms deadlines
(kernels loaded), ``--repeat`` times each; ``--guard`` sets ``dlap.dgs.switching.DEADLINE_GUARD``
and ``--chunk`` the matrix entries of one evaluation or proposal call, between two reads of the
deadline (``CPUSwitching.evaluation_chunk``).

    python workflows/dgs_cpu_busy_deadline.py --repeat 200 --guard 0 0.002
    python workflows/dgs_cpu_busy_deadline.py --repeat 100 --chunk 1048576 262144
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings

import numpy as np

import dlap
from dlap import generate
from dlap.backends.cpu.dgs import CPUSwitching
from dlap.dgs import switching


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--guard", type=float, nargs="+", default=[switching.DEADLINE_GUARD])
    ap.add_argument("--chunk", type=int, nargs="+", default=[CPUSwitching.evaluation_chunk])
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    dlap.load_dgs_kernels()
    cost = generate.geometric(1000, seed=3, same_points=True)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(len(os.sched_getaffinity(0)))]
    try:
        for guard, chunk in ((g, c) for g in args.guard for c in args.chunk):
            switching.DEADLINE_GUARD, CPUSwitching.evaluation_chunk = guard, chunk
            over = []
            for _ in range(args.repeat):
                for limit in (0.05, 0.1):
                    start = time.perf_counter()
                    dlap.solve(cost, maximize=True, method="dgs", time_limit=limit)
                    over.append((time.perf_counter() - start - limit) * 1000)
            over = np.array(over)
            print(f"guard {guard * 1000:g} ms, chunk {chunk}, {len(over)} solves on busy cores: past the deadline by median "
                  f"{np.median(over):.2f} ms, p90 {np.percentile(over, 90):.2f}, p99 {np.percentile(over, 99):.2f}, "
                  f"max {over.max():.2f}; over 10 ms: {(over > 10).sum()}", flush=True)
    finally:
        for p in burners:
            p.kill()


if __name__ == "__main__":
    main()
