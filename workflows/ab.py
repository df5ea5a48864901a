"""Before and after on one device: the solve of each case and method, median of ``--repeat``,
with whichever dlap is first on ``PYTHONPATH``; run it once per checkout, in one session, and
compare the JSON lines (``--label`` names the checkout).

    PYTHONPATH=$PWD python workflows/ab.py --label after --cases uniform:40000:10 float:10000
    PYTHONPATH=/tmp/before python workflows/ab.py --label before --cases uniform:40000:10 float:10000
    PYTHONPATH=$PWD python workflows/ab.py --device cpu --label after --cases uniform:4000:10

Cases are FAMILY:N or FAMILY:N:F (``dlap.generate.family``); the matrix is generated on the host
and, with ``--device gpu`` (the default), copied to the GPU: each solve is timed from the matrix
where it is and checked by its certificate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import dlap
from dlap import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--cases", nargs="+", default=["uniform:40000:10"])
    ap.add_argument("--methods", nargs="+", default=["classical", "auto"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    args = ap.parse_args()
    print("dlap from", dlap.__file__, flush=True)
    if args.device == "gpu":
        import cupy

        where, synchronize = cupy.asarray, cupy.cuda.Device().synchronize
    else:
        where, synchronize = np.asarray, lambda: None
    for case in args.cases:
        family, n, *f = case.split(":")
        f = float(f[0]) if f else None
        cost = where(generate.family(family, int(n), f, seed=0))
        for method in args.methods:
            dlap.solve(where(generate.family(family, 300, f, seed=1)), method=method, device=args.device)  # compiled
            times = []
            for _ in range(args.repeat):
                synchronize()
                start = time.perf_counter()
                result = dlap.solve(cost, method=method, device=args.device)
                times.append(time.perf_counter() - start)
            s = result.stats
            print(json.dumps({
                "code": args.label, "device": args.device, "family": family, "n": int(n), "f": f,
                "method": method, "ran": s.method,
                "median_s": round(statistics.median(times), 4), "all_s": sorted(round(t, 4) for t in times),
                "objective": float(result.objective), "optimal": bool(result.verify().optimal),
                "dual_updates": s.dual_updates, "iterations": s.iterations,
                "phases": {k: round(v, 4) for k, v in sorted(s.phase_seconds.items(), key=lambda kv: -kv[1])},
            }), flush=True)


if __name__ == "__main__":
    main()
