"""One large uniform instance solved on one GPU, with its optimality certificate.

The matrix is generated on the GPU (CuPy's generator, seeded; n = 100000 int32 is 40 GB, which
NumPy would take minutes to draw), solved where it is (``timing = "device"``), then copied to the
host and solved again from there (``timing = "host"``: host matrix in, assignment out).

    python workflows/gpu_large.py --n 100000 --f 1 --json out.jsonl
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


def timed_solve(cost, method):
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    result = dlap.solve(cost, method=method)
    return result, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--f", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--host", action="store_true", help="also time the solve from a host copy")
    ap.add_argument("--json", help="append the records to this file")
    args = ap.parse_args()
    dlap.solve(cupy.asarray(generate.uniform(300, args.f, seed=1)), method=args.method)  # compile
    high = max(1, int(round(args.f * args.n)))
    cost = cupy.random.RandomState(args.seed).randint(0, high, size=(args.n, args.n), dtype=np.int32)
    records = []
    result, seconds = timed_solve(cost, args.method)
    start = time.perf_counter()
    cert = result.verify()
    check_seconds = time.perf_counter() - start
    base = {
        "solver": f"dlap-gpu-{args.method}", "method": result.stats.method, "device": "gpu",
        "family": "uniform (cupy generator)", "n": args.n, "f": args.f, "dtype": "int32",
        "objective": result.objective, "optimal": cert.optimal, "gap": cert.gap,
        "host": platform.node(), "gpu": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
    }
    records.append({**base, "timing": "device", "seconds": seconds, "verify_seconds": check_seconds,
                    "iterations": result.stats.iterations, "dual_updates": result.stats.dual_updates,
                    "phase_seconds": result.stats.phase_seconds})
    print(f"n={args.n} f={args.f:g} on the GPU: {seconds:.3f} s, objective {result.objective}, "
          f"certificate {cert} ({check_seconds:.1f} s)", flush=True)
    print(f"  phases: {result.stats.phase_seconds}", flush=True)
    if args.host:
        host = cost.get()
        del cost, result
        cupy.get_default_memory_pool().free_all_blocks()
        again, seconds = timed_solve(host, args.method)
        records.append({**base, "timing": "host", "seconds": seconds, "objective": again.objective,
                        "agrees": again.objective == base["objective"]})
        print(f"n={args.n} from the host: {seconds:.3f} s, objective {again.objective}", flush=True)
    if args.json:
        with open(args.json, "a") as sink:
            for r in records:
                sink.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
