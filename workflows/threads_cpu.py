"""CPU solves on an idle machine and on one whose cores other processes keep busy: dlap's thread
policy (one thread below dlap.threads.SERIAL_MAX_ENTRIES, a passive team above) against one thread
and against a team of every core, the median of 7 solves each in a fresh process.

    python workflows/threads_cpu.py --n 200 1000 2000 --families uniform geometric

Each cell runs in its own process because OMP_WAIT_POLICY is read once, when the OpenMP runtime
starts: "spinning team" is every core with OMP_WAIT_POLICY=ACTIVE (Numba's default before dlap set
a passive policy). "busy" starts one process per core running a Python busy loop.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CELL = """
import json, sys, time, numba, numpy as np, dlap
from dlap import generate
family, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cost = generate.family(family, n, None, seed=0)
if mode != "dlap":
    dlap.threads.SERIAL_MAX_ENTRIES = 0  # the team decides, not the size rule
    dlap.set_num_threads(1 if mode == "one thread" else numba.config.NUMBA_NUM_THREADS)
result = dlap.solve(cost, device="cpu")  # compiles or loads the kernels
times = []
for _ in range(7):
    start = time.perf_counter()
    result = dlap.solve(cost, device="cpu")
    times.append(time.perf_counter() - start)
print(json.dumps({"seconds": float(np.median(times)), "threads": result.stats.threads,
                  "optimal": result.verify().optimal}))
"""

MODES = {"dlap": {}, "one thread": {}, "spinning team": {"OMP_WAIT_POLICY": "ACTIVE"},
         "passive team": {"OMP_WAIT_POLICY": "PASSIVE"}}


def cell(family: str, n: int, mode: str) -> dict:
    env = {**os.environ, **MODES[mode]}
    out = subprocess.run([sys.executable, "-c", CELL, family, str(n), mode], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout)


def busy_processes(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[200, 1000, 2000])
    ap.add_argument("--families", nargs="+", default=["uniform", "geometric"])
    ap.add_argument("--json", help="append one JSON record per cell to this file")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; median of 7 solves (ms); threads the policy chose in brackets")
    print(f"{'load':6} {'family':10} {'n':>6} " + " ".join(f"{m:>15}" for m in MODES))
    for load in ("idle", "busy"):
        busy = busy_processes(cores) if load == "busy" else []
        time.sleep(0.5 if busy else 0)
        try:
            for family in args.families:
                for n in args.n:
                    cells = {mode: cell(family, n, mode) for mode in MODES}
                    row = " ".join(f"{c['seconds'] * 1e3:>15.2f}" for c in cells.values())
                    print(f"{load:6} {family:10} {n:>6} {row}   [{cells['dlap']['threads']}]", flush=True)
                    assert all(c["optimal"] for c in cells.values())
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps({"load": load, "family": family, "n": n, "cores": cores,
                                                **{m: c["seconds"] for m, c in cells.items()},
                                                "dlap_threads": cells["dlap"]["threads"]}) + "\n")
        finally:
            for p in busy:
                p.kill()


if __name__ == "__main__":
    main()
