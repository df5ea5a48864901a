"""A/B of compile-time variants of one CUDA source of the GPU backend, in one process: each variant
is the source built with its own -D options; solves alternate between them (CuPy matrix in,
median of 3) and the time of one backend method is taken apart (device synchronised around it).

    python workflows/gpu_kernel_ab.py bidding "b4=-DBID_BATCH=4;b6=-DBID_BATCH=6" bidding_rounds \\
        geometric:10000 geometric-benefit:10000 uniform:10000:10

Cases are FAMILY:N, FAMILY:N:F or FAMILY:N:F:METHOD (dlap.solve's method; default auto). The objectives of the variants are checked to agree.
"""

from __future__ import annotations

import statistics
import sys
import time

import cupy
from gpu_host_path import timed  # this folder (run as a script)

import dlap
from dlap import generate
from dlap.backends.gpu import kernels as gpu_kernels as gk


def main() -> None:
    source, spec, method, cases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    variants = {}
    for item in spec.split(";"):
        name, _, options = item.partition("=")
        variants[name] = gk.build_module(source, tuple(o for o in options.split(",") if o))
    plain, current = gk._module, [next(iter(variants))]
    gk._module = lambda name: variants[current[0]] if name == source else plain(name)
    seconds: dict[str, float] = {}
    timed(method, seconds)
    for case in cases:
        parts = case.split(":")
        family, n, f = parts[0], int(parts[1]), float(parts[2]) if len(parts) > 2 and parts[2] else None
        solve_method = parts[3] if len(parts) > 3 else "auto"
        cost = cupy.asarray(generate.family(family, n, f=f))
        maximize = family in generate.MAXIMIZE
        runs: dict[str, tuple[list, list]] = {name: ([], []) for name in variants}
        objectives = set()
        for name in variants:  # compiled, and CuPy's own kernels for this size
            current[0] = name
            dlap.solve(cost, maximize=maximize, method=solve_method)
        for _ in range(3):
            for name in variants:
                current[0] = name
                seconds.clear()
                cupy.cuda.Device().synchronize()
                start = time.perf_counter()
                result = dlap.solve(cost, maximize=maximize, method=solve_method)
                cupy.cuda.Device().synchronize()
                runs[name][0].append(time.perf_counter() - start)
                runs[name][1].append(seconds.get(method, 0.0))
                objectives.add(result.objective)
        print(case, " | ".join(f"{name}: solve {statistics.median(a):.4f} {method} {statistics.median(b):.4f}"
                               for name, (a, b) in runs.items()), "| objectives agree:", len(objectives) == 1, flush=True)
        del cost


if __name__ == "__main__":
    main()
