"""Where a distributed GPU solve spends its time, primitive by primitive, against the single-GPU
engine on the same matrix (issue 16's n = 40000, f = 10 target).

    python workflows/dask_gpu_profile.py --n 40000 --solves 4

On every worker (``client.run``) and in this process, the methods named in ``TIMED`` are wrapped
with a device synchronisation on both sides, so each call's time is its own; a wrapped call made
inside another is counted in both. Then: ``--solves`` distributed solves of the same row-split
matrix (classical, JV init; the first one makes the NCCL communicator, the others reuse it), the
client's phases of each, and rank 0's per-method totals of the last; then ``dlap.solve`` on a
CuPy copy on one GPU, classical with JV and auto, with the same totals. One more distributed
solve runs under cProfile in this process, to show where the client's part of the wall time goes.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

#: (module, class, methods) wrapped with synchronised timers
TIMED = (
    ("dlap.backends.gpu", "GPUBackend", (
        "compress", "recompress", "classical_forward_pass", "classical_theta", "classical_shift", "reverse_pass",
        "augment", "optimality_check", "row_minima_terms", "row_duals", "column_minima", "jv_initialisation",
        "bidding_rounds")),
    ("dlap.distributed.rank.backend", "DistributedBackend", (
        "compress", "recompress", "_gather_edges", "classical_theta", "augment", "jv_initialisation",
        "_bidding_round", "_row_minima_terms", "_row_minima")),
    ("dlap.distributed.rank.comm", "NCCLComm", ("allgather", "allreduce", "bcast")),
    ("dlap.distributed.rank.engine", "DistributedSolver", ("solve", "certificate_terms")),
)
TIMES: dict[str, list] = defaultdict(lambda: [0.0, 0])  # this process's


def _times(dask_worker) -> dict:
    """The totals of this process: on a worker kept on the worker object (this module's globals
    travel by value with each function ``client.run`` sends)."""
    if dask_worker is None:
        return TIMES
    if not hasattr(dask_worker, "dlap_profile"):
        dask_worker.dlap_profile = defaultdict(lambda: [0.0, 0])
    return dask_worker.dlap_profile


def install(timed=TIMED, dask_worker=None) -> None:
    """Wrap every method of ``timed`` (once per process)."""
    import importlib

    import cupy

    times = _times(dask_worker)
    for module, cls, names in timed:
        owner = getattr(importlib.import_module(module), cls)
        for name in names:
            method = getattr(owner, name)
            if getattr(method, "profiled", False):
                continue

            def wrapper(self, *args, _method=method, _key=f"{cls}.{name}", **kwargs):
                cupy.cuda.get_current_stream().synchronize()
                start = time.perf_counter()
                out = _method(self, *args, **kwargs)
                cupy.cuda.get_current_stream().synchronize()
                entry = times[_key]
                entry[0] += time.perf_counter() - start
                entry[1] += 1
                return out

            wrapper.profiled = True
            setattr(owner, name, wrapper)


def collect(dask_worker=None) -> dict:
    """This process's totals since the last call."""
    times = _times(dask_worker)
    out = {k: tuple(v) for k, v in times.items()}
    times.clear()
    return out


def table(times: dict) -> str:
    return "\n".join(f"    {k:45s} {s:8.4f} s {c:6d} calls" for k, (s, c) in sorted(times.items(), key=lambda kv: -kv[1][0]))


def client_side(solve) -> None:
    """One more solve under cProfile in this process: where the client's time goes (placement,
    the scheduler's round trips, waiting for the ranks)."""
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    solve()
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats("dlap/distributed", 30)
    print(f"client side of one solve ({time.perf_counter() - start:.3f} s, profiled):\n{out.getvalue()}", flush=True)


def main() -> None:
    import cupy
    import distributed

    import dlap
    import dlap.distributed as dd
    from dlap.generate import uniform_counter, uniform_dask

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40000)
    ap.add_argument("--solves", type=int, default=4)
    args = ap.parse_args()
    n = args.n
    with dd.start_cluster(dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        ranks = len(client.scheduler_info()["workers"])
        rows = uniform_dask(n, 10, gpu=True, chunks=(-(-n // ranks), n)).persist()
        distributed.wait([rows])
        client.run(install)
        for k in range(args.solves):
            client.run(collect)
            start = time.perf_counter()
            r = dd.solve(rows, client, method="classical", init="jv")
            wall = time.perf_counter() - start
            s = r.stats
            print(f"{ranks} GPUs classical:jv #{k}: wall {wall:.3f} s, optimal {r.verify().optimal}, "
                  f"objective {r.objective}, iterations {s.iterations}, dual updates {s.dual_updates}, "
                  f"collectives {s.phase_counts.get('communication')}, "
                  + ", ".join(f"{k} {v:.4f}" for k, v in s.phase_seconds.items()), flush=True)
        for worker, times in sorted(client.run(collect).items()):
            print(f"  {worker} (last solve):\n{table(times)}", flush=True)
        client_side(lambda: dd.solve(rows, client, method="classical", init="jv"))
    install()
    matrix = cupy.asarray(uniform_counter(n, 10))
    for method in ("classical", "classical", "auto", "auto"):
        collect()
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        r = dlap.solve(matrix, method=method, init="jv")
        s = r.stats
        print(f"1 GPU {method}: {time.perf_counter() - start:.3f} s, objective {r.objective}, method {s.method}, "
              f"iterations {s.iterations}, dual updates {s.dual_updates}, "
              + ", ".join(f"{k} {v:.4f}" for k, v in s.phase_seconds.items()), flush=True)
    print(f"  this process (last solve):\n{table(collect())}", flush=True)


if __name__ == "__main__":
    main()
