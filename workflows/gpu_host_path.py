"""Where a GPU solve of a host matrix spends its time: ``prepare`` on the host, the upload
(``GPUBackend.allocate``), the engine's rounds of bids and searches, JV, the price initialisation,
the copy back; then the same matrix from the GPU (CuPy in), and the bare upload. Each backend
method is wrapped with a device synchronisation on both sides, so its time is its own.

    python workflows/gpu_host_path.py machol-wien:2000 geometric:10000 geometric-benefit:10000

Prints one line per solve (three host-in, then three CuPy-in); ``prepare`` is timed apart from the
solve, as the solve itself calls it (a GPU solve defers a float matrix's checks and negation to
the upload, ``Problem.deferred``).
"""

from __future__ import annotations

import sys
import time

import cupy

import dlap
from dlap import generate
from dlap.backends.gpu import GPUBackend
from dlap.problem import prepare

TIMES: dict[str, float] = {}
TIMED = ("allocate", "jv_initialisation", "bidding_rounds", "assign_free_rows", "price_initialisation", "to_host")


def timed(name: str, times: dict[str, float]) -> None:
    """Wrap ``GPUBackend.<name>`` so that each call adds its time, between device synchronisations,
    to ``times[name]`` (also used by gpu_kernel_ab.py)."""
    method = getattr(GPUBackend, name)

    def wrapper(self, *args, **kwargs):
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        out = method(self, *args, **kwargs)
        cupy.cuda.Device().synchronize()
        times[name] = times.get(name, 0.0) + time.perf_counter() - start
        return out

    setattr(GPUBackend, name, wrapper)


def line(result) -> str:
    stats = result.stats
    counts = {k: v for k, v in stats.phase_counts.items()
              if k in ("rows_scanned", "bidding_rounds", "bids", "handover_iteration", "jv_free_rows")}
    phases = {k: round(v, 4) for k, v in stats.phase_seconds.items()}
    return (" ".join(f"{k} {v:.4f}" for k, v in TIMES.items())
            + f" method={stats.method} searches={stats.iterations} counts={counts} phases={phases}")


def main() -> None:
    for name in TIMED:
        timed(name, TIMES)
    dlap.solve(generate.family("geometric", 300), device="gpu")
    for case in sys.argv[1:]:
        family, n = case.split(":")
        cost = generate.family(family, int(n))
        maximize = family in generate.MAXIMIZE
        dlap.solve(cost, maximize=maximize, device="gpu")  # CuPy's own kernels for this size
        for rep in range(3):
            start = time.perf_counter()
            prepare(cost, maximize, deferred=True)
            prepared = time.perf_counter() - start
            TIMES.clear()
            start = time.perf_counter()
            result = dlap.solve(cost, maximize=maximize, device="gpu")
            total = time.perf_counter() - start
            print(f"{case} host in #{rep}: total {total:.4f} prepare {prepared:.4f} {line(result)}", flush=True)
        on_gpu = cupy.asarray(cost)
        for rep in range(3):
            TIMES.clear()
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            result = dlap.solve(on_gpu, maximize=maximize)
            cupy.cuda.Device().synchronize()
            print(f"{case} CuPy in #{rep}: total {time.perf_counter() - start:.4f} {line(result)}", flush=True)
        del on_gpu


if __name__ == "__main__":
    main()
