"""When the GPU's hybrid should hand the classical variant over to the tree variant: each case
solved with ``method="auto"`` (CuPy matrix in) under several fixed limits on the classical
variant's dual updates (``dlap.hungarian.hybrid.classical_dual_update_limit`` replaced; a very
large value is the classical variant throughout; 0 is dlap's own rule), median of 3, in one
process.

    python workflows/hybrid_switch_sweep.py --limits 0 8 16 32 64 1000000 \\
        --cases uniform:5000:1 uniform:20000:10 float:10000 geometric:5000

Cases are FAMILY:N or FAMILY:N:F. Prints, per case, each limit's median time, the method auto
ran and the dual updates, and checks that the objectives agree.
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy

import dlap
from dlap import generate
from dlap.hungarian import hybrid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", type=int, nargs="+", default=[8, 16, 32, 64, 10**6])
    ap.add_argument("--cases", nargs="+", default=["uniform:20000:10"])
    args = ap.parse_args()
    rule = hybrid.classical_dual_update_limit
    dlap.solve(cupy.asarray(generate.family("uniform", 300, f=10)))  # compiled
    for case in args.cases:
        parts = case.split(":")
        family, n, f = parts[0], int(parts[1]), float(parts[2]) if len(parts) > 2 else None
        cost = cupy.asarray(generate.family(family, n, f=f))
        maximize = family in generate.MAXIMIZE
        cells, objectives = [], set()
        for limit in args.limits:
            hybrid.classical_dual_update_limit = rule if limit == 0 else lambda n_cols, limit=limit: limit
            dlap.solve(cost, maximize=maximize)  # CuPy's own kernels for this size
            times = []
            for _ in range(3):
                cupy.cuda.Device().synchronize()
                start = time.perf_counter()
                result = dlap.solve(cost, maximize=maximize)
                times.append(time.perf_counter() - start)
                objectives.add(result.objective)
            s = result.stats
            name = f"rule ({rule(cost.shape[1])})" if limit == 0 else str(limit)
            cells.append(f"{name}: {statistics.median(times):.4f} s {s.method} du={s.dual_updates}")
        print(case, " | ".join(cells), "| objectives agree:", len(objectives) == 1, flush=True)
        del cost


if __name__ == "__main__":
    main()
