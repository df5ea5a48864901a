"""Where the placement of a generated matrix spends its time: for each chunking, a distributed
solve of ``uniform_dask`` (not persisted) on the GPUs of this host, with Dask's task stream
recorded during it. Printed per chunking: the placement's wall time, and per task kind (the
prefix of its key) the tasks, their summed compute time, and per worker the busy time against
the placement's wall (a worker busy for most of it is bound by its tasks; one idle for most of
it waits for the client or the scheduler).

    python workflows/dask_gpu_placement.py --n 100000 --chunks auto 1GiB rank
    python workflows/dask_gpu_placement.py --cpu 2 --n 4000 --chunks 250KiB --buffer 2MiB

``--cpu N``: a LocalCluster of N single-threaded workers and NumPy chunks instead; ``--buffer``
sets ``placement.BUFFER_BYTES`` (with small chunks on CPUs, 2 MiB keeps 8 pieces in flight per
rank, as 1 GiB does with the 128 MiB chunks of a GPU matrix).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict


def chunking(spec: str, n: int, ranks: int):
    """``auto`` (dask's 128 MiB blocks), ``rank`` (one row band per rank) or a size of row bands."""
    if spec == "auto":
        return None
    if spec == "rank":
        return (-(-n // ranks), n)
    import dask

    rows = max(1, dask.utils.parse_bytes(spec) // (4 * n))
    return (rows, n)


def main() -> None:
    import distributed

    import dlap.distributed as dd
    from dlap.generate import uniform_dask

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--f", type=float, default=1.0)
    ap.add_argument("--chunks", nargs="+", default=["auto", "1GiB", "rank"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cpu", type=int, default=0, help="workers of a CPU LocalCluster instead of the GPUs")
    ap.add_argument("--buffer", help="placement.BUFFER_BYTES, e.g. 2MiB")
    args = ap.parse_args()
    gpu = not args.cpu
    if args.buffer:
        import dask

        from dlap.distributed import placement

        placement.BUFFER_BYTES = dask.utils.parse_bytes(args.buffer)
    if gpu:
        cluster = dd.start_cluster(dashboard_address=None)
    else:
        cluster = distributed.LocalCluster(n_workers=args.cpu, threads_per_worker=1, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        ranks = len(client.scheduler_info()["workers"])
        dd.solve(uniform_dask(2000, 10, gpu=gpu), client, method="classical")  # compile, communicator
        for spec in args.chunks * args.repeat:
            matrix = uniform_dask(args.n, args.f, gpu=gpu, chunks=chunking(spec, args.n, ranks))
            start = time.perf_counter()
            with distributed.get_task_stream(client) as stream:
                r = dd.solve(matrix, client, method="classical")
            wall = time.perf_counter() - start
            placement = r.stats.phase_seconds["placement"]
            kinds, busy = defaultdict(lambda: [0, 0.0]), defaultdict(float)
            for t in stream.data:
                kind = "-".join(str(t["key"]).strip("('").split("-")[:2])
                if kind == "dlap-solve":  # the ranks, after the placement
                    continue
                for s in t["startstops"]:
                    if s["action"] == "compute":
                        kinds[kind][0] += 1
                        kinds[kind][1] += s["stop"] - s["start"]
                        busy[t["worker"]] += s["stop"] - s["start"]
            print(f"{spec}: {matrix.npartitions} chunks, wall {wall:.3f} s, placement {placement:.3f} s, "
                  f"rank_solve {r.stats.phase_seconds['rank_solve']:.3f} s, ranks {r.stats.phase_counts['ranks']}; "
                  + ", ".join(f"{k} {c} tasks {s:.3f} s" for k, (c, s) in sorted(kinds.items())) + "; busy "
                  + ", ".join(f"{b:.3f}" for b in sorted(busy.values())), flush=True)


if __name__ == "__main__":
    main()
