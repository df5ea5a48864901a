"""Where the GPU solve's time goes: seconds per phase, iterations and paths per iteration (the
paper's Fig. 3 and Table 2) for each method on the uniform instances of ANCHORS.md or on other
families, each solve checked by its dual certificate.

    python workflows/gpu_phases.py --n 5000 10000 20000 --f 0.1 1 10 --json out.jsonl
    python workflows/gpu_phases.py --n 2000 10000 --families geometric geometric-benefit --methods auto scaling
"""

from __future__ import annotations

import argparse
import json
import time

import cupy
import numpy as np

import dlap
from dlap import bench, generate


def measure(cost: cupy.ndarray, method: str, label: dict, maximize: bool = False) -> dict:
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    result = dlap.solve(cost, method=method, maximize=maximize)
    seconds = time.perf_counter() - start
    cert = result.verify()
    s = result.stats
    paths = s.paths_per_iteration
    return {
        **label, "method": s.method, "seconds": seconds, "objective": result.objective,
        "optimal": cert.optimal, "gap": cert.gap, "iterations": s.iterations,
        "initial_assignments": s.initial_assignments, "dual_updates": s.dual_updates,
        "paths_first": paths[:5], "paths_last": paths[-5:], "phase_seconds": s.phase_seconds,
        "phase_counts": s.phase_counts,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--f", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--families", nargs="+", help="family[:f] specs (default: uniform at each --f)")
    ap.add_argument("--methods", nargs="+", default=["hybrid", "tree", "classical"])
    ap.add_argument("--json", help="append one JSON line per solve to this file")
    args = ap.parse_args()
    cases = [bench.parse_family(spec) for spec in args.families] if args.families else [("uniform", f) for f in args.f]
    for family, f in dict.fromkeys(cases):  # compile every kernel the methods use on these dtypes
        warm = cupy.asarray(generate.family(family, 300, f, seed=1))
        for method in args.methods:
            dlap.solve(warm, method=method)
    for n in args.n:
        for family, f in cases:
            cost = cupy.asarray(generate.family(family, n, f, seed=0))
            maximize = family in generate.MAXIMIZE
            for method in args.methods:
                label = {"family": family, "n": n, "f": f, "dtype": str(cost.dtype), "maximize": maximize}
                row = measure(cost, method, label, maximize)
                phases = " ".join(f"{k}={v:.3f}" for k, v in sorted(row["phase_seconds"].items(), key=lambda kv: -kv[1]))
                print(f"{family} n={n} f={f} {row['method']:9s} {row['seconds']:.3f} s optimal={row['optimal']} "
                      f"it={row['iterations']} init={row['initial_assignments']} duals={row['dual_updates']} "
                      f"counts={row['phase_counts']} | {phases}", flush=True)
                if args.json:
                    with open(args.json, "a") as sink:
                        sink.write(json.dumps(row, default=float) + "\n")
            del cost
            cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
