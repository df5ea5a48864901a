"""Where a GPU ε-scaling search's time goes: clock cycles per part of a step, from scaling.cu built
with -DDLAP_PROFILE (block 0's thread 0 adds up clock64() deltas in registers), for each cluster
size, next to the solve's own phase times. This is how the search layout was chosen (README,
"Hard instances").

    python workflows/gpu_scaling_profile.py --cases geometric:2000 geometric:10000 --clusters 0 1 4 8
    python workflows/gpu_scaling_profile.py --cases geometric:20000:float32 --clusters 8 --wide off on

A case is FAMILY:N or FAMILY:N:DTYPE; the matrix is made on the GPU where the family is geometric.
"""

from __future__ import annotations

import argparse
import time

import cupy

import dlap
from dlap import generate
from dlap.backends import gpu
from dlap.backends.gpu import kernels as gpu_kernels as gk

PARTS = {0: "first_scan", 1: "rescan", 4: "agree", 5: "end_of_search"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["geometric:2000", "geometric:10000", "geometric-benefit:10000"])
    ap.add_argument("--clusters", type=int, nargs="+", default=[0], help="blocks per search (0: dlap's choice)")
    ap.add_argument("--wide", nargs="+", default=["auto"], choices=["auto", "on", "off"],
                    help="wide search blocks (auto: dlap's choice)")
    args = ap.parse_args()
    module = gk.build_module("scaling", ("-DDLAP_PROFILE",))  # with the profile counters
    plain = gk._module
    gk._module = lambda name: module if name == "scaling" else plain(name)
    counters = cupy.ndarray((8,), cupy.int64, module.get_global("dlap_profile"))
    for case in args.cases:
        family, n, *dtype = case.split(":")
        n = int(n)
        if family in generate.GEOMETRIC_FAMILIES:
            cost = generate.geometric(n, seed=0, xp=cupy, dtype=dtype[0] if dtype else "float64",
                                      **generate.GEOMETRIC_FAMILIES[family])
        else:
            cost = cupy.asarray(generate.family(family, n, seed=0))
        maximize = family in generate.MAXIMIZE
        for cluster, wide in ((c, w) for c in args.clusters for w in args.wide):
            gpu.SCALING_CLUSTER = cluster or None
            gpu.SCALING_WIDE = {"auto": None, "on": True, "off": False}[wide]
            dlap.solve(cost[:300, :300], method="scaling")  # compiled, and the buffers of a small solve
            counters[:] = 0
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            result = dlap.solve(cost, method="scaling", maximize=maximize)
            seconds = time.perf_counter() - start
            cycles, stats = counters.get(), result.stats
            scans, searches = stats.phase_counts["rows_scanned"], stats.iterations
            _, used, threads, shared = gpu._search_kernel(n, cost.dtype, cupy.cuda.runtime.getDevice())
            search_seconds = stats.phase_seconds.get("scaling_phase", 0.0) + stats.phase_seconds["exact_phase"]
            print(f"{family} n={n} {cost.dtype} cluster={used} threads={threads} "
                  f"{'shared' if shared else 'device-memory'} total={seconds:.3f}s "
                  f"us/row-scan={search_seconds / scans * 1e6:.2f} scans={scans} searches={searches} "
                  f"optimal={result.verify().optimal} phases={ {k: round(v, 3) for k, v in stats.phase_seconds.items()} }")
            per = {0: searches, 1: scans - searches, 4: scans, 5: searches}
            total = sum(cycles[k] for k in PARTS)
            print("   " + "  ".join(f"{name}={cycles[k] / total:.0%} ({cycles[k] / max(per[k], 1):.0f} cycles each)"
                                    for k, name in PARTS.items()), flush=True)
        gpu.SCALING_CLUSTER, gpu.SCALING_WIDE = None, None
        del cost


if __name__ == "__main__":
    main()
