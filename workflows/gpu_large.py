"""Large instances solved on one GPU, each with its optimality certificate.

The matrix is generated on the GPU (n = 100000 int32 is 40 GB, which NumPy would take minutes to
draw; n = 150000 float32 distances are 90 GB): uniform integers from CuPy's seeded generator, or
:func:`dlap.generate.geometric` computed there from its points (``xp=cupy``). It is solved where
it is (``timing = "device"``), and optionally copied to the host and solved again from there
(``timing = "host"``: host matrix in, assignment out).

    python workflows/gpu_large.py --n 100000 --f 1 --json out.jsonl
    python workflows/gpu_large.py --family geometric --dtype float32 --n 40000 80000 150000 --budget 450

Several ``--n`` run in order, smallest first; with ``--budget`` a size whose time, extrapolated
from the last one as n^2.2, would pass the budget is skipped (and every larger one).
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import cupy
import numpy as np

import dlap
from dlap import generate

#: the growth of a solve's time with n that ``--budget`` assumes (geometric 10000 -> 20000 on an
#: H200 took 4x: workflows/results/scaling-gpu-20261123-final-hard-large.md)
GROWTH = 2.2


def timed_solve(cost, method, maximize):
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    result = dlap.solve(cost, method=method, maximize=maximize)
    return result, time.perf_counter() - start


def make(family: str, n: int, f: float, seed: int, dtype: str):
    """The matrix on the GPU, and whether it is maximised."""
    if family == "uniform":
        high = max(1, int(round(f * n)))
        return cupy.random.RandomState(seed).randint(0, high, size=(n, n), dtype=np.dtype(dtype)), False
    shape = generate.GEOMETRIC_FAMILIES[family]
    return generate.geometric(n, seed=seed, dtype=dtype, xp=cupy, **shape), family == "geometric-benefit"


def run(args, n: int) -> list[dict]:
    start = time.perf_counter()
    cost, maximize = make(args.family, n, args.f, args.seed, args.dtype)
    cupy.cuda.Device().synchronize()
    made = time.perf_counter() - start
    result, seconds = timed_solve(cost, args.method, maximize)
    start = time.perf_counter()
    cert = result.verify()
    check_seconds = time.perf_counter() - start
    base = {
        "solver": f"dlap-gpu-{args.method}", "method": result.stats.method, "device": "gpu",
        "family": args.family if args.family != "uniform" else "uniform (cupy generator)", "n": n,
        "f": args.f if args.family == "uniform" else None, "dtype": str(cost.dtype), "maximize": maximize,
        "objective": result.objective, "optimal": cert.optimal, "gap": cert.gap,
        "host": platform.node(), "gpu": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
    }
    records = [{**base, "timing": "device", "seconds": seconds, "generate_seconds": made,
                "verify_seconds": check_seconds, "iterations": result.stats.iterations,
                "dual_updates": result.stats.dual_updates, "phase_seconds": result.stats.phase_seconds,
                "phase_counts": result.stats.phase_counts}]
    print(f"{args.family} n={n} {cost.dtype} ({cost.nbytes / 1e9:.1f} GB, generated in {made:.1f} s) on the GPU: "
          f"{seconds:.3f} s, method {result.stats.method}, objective {result.objective!r}, "
          f"certificate {cert} ({check_seconds:.1f} s)", flush=True)
    print(f"  phases: {result.stats.phase_seconds}", flush=True)
    print(f"  counts: {result.stats.phase_counts}", flush=True)
    if args.host:
        host = cost.get()
        del cost, result
        cupy.get_default_memory_pool().free_all_blocks()
        again, seconds = timed_solve(host, args.method, maximize)
        records.append({**base, "timing": "host", "seconds": seconds, "objective": again.objective,
                        "agrees": again.objective == base["objective"]})
        print(f"n={n} from the host: {seconds:.3f} s, objective {again.objective!r}", flush=True)
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="uniform", choices=["uniform", *generate.GEOMETRIC_FAMILIES])
    ap.add_argument("--n", type=int, nargs="+", default=[100000])
    ap.add_argument("--f", type=float, default=1.0, help="uniform: integers in [0, f n)")
    ap.add_argument("--dtype", default=None, help="default: int32 for uniform, float64 for the geometric families")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--host", action="store_true", help="also time the solve from a host copy")
    ap.add_argument("--budget", type=float, default=None, help="skip sizes extrapolated to take longer (s)")
    ap.add_argument("--json", help="append the records to this file")
    args = ap.parse_args()
    args.dtype = args.dtype or ("int32" if args.family == "uniform" else "float64")
    warm, maximize = make(args.family, 300, args.f, 1, args.dtype)
    dlap.solve(warm, method=args.method, maximize=maximize)  # compile
    last = None
    for n in sorted(args.n):
        if args.budget is not None and last is not None and last[1] * (n / last[0]) ** GROWTH > args.budget:
            print(f"n={n} skipped: extrapolated {last[1] * (n / last[0]) ** GROWTH:.0f} s > budget {args.budget:g} s",
                  flush=True)
            break
        records = run(args, n)
        last = (n, records[0]["seconds"])
        cupy.get_default_memory_pool().free_all_blocks()
        if args.json:
            with open(args.json, "a") as sink:
                for r in records:
                    sink.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
