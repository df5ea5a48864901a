"""Issue 16's structured-costs target: points in the plane (float32 by default), the matrix
computed on the GPU workers chunk by chunk (``dlap.generate.geometric_dask``, column chunks of
``--chunk`` columns), solved across the GPUs of this host with the ranks' certificate (computed
over their slabs, in the wall time); optionally the same matrix solved by ``dlap.solve`` on one
GPU (``--alone``, where it fits one).

    python workflows/dask_gpu_geometric.py --n 150000 --dtype float32 --methods auto
    python workflows/dask_gpu_geometric.py --n 3000 --cpu 2      (a CPU LocalCluster, for a try)

``auto`` splits only a matrix that fits no worker; ``scaling`` always splits (column slabs).
Without ``--persist`` each solve makes the matrix on the workers as it places the slabs (its
time is the ``placement`` phase): a matrix that one GPU holds is then made on that GPU alone,
chunk after chunk into its slab. With ``--persist`` it is made first, spread over the workers,
and the solves read it from there (a rank then gathers the other workers' chunks).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    import distributed

    import dlap
    import dlap.distributed as dd
    from dlap import generate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=150000)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--dim", type=int, default=2)
    ap.add_argument("--benefit", action="store_true", help="the distances within one set, maximised")
    ap.add_argument("--methods", nargs="+", default=["scaling"])
    ap.add_argument("--cpu", type=int, default=0, help="workers of a CPU LocalCluster instead of the GPUs")
    ap.add_argument("--chunk", type=int, default=10000, help="columns of a chunk (default: 10000)")
    ap.add_argument("--persist", action="store_true", help="make the matrix on the workers before the solves")
    ap.add_argument("--alone", action="store_true", help="also dlap.solve on one device")
    args = ap.parse_args()
    n, gpu = args.n, not args.cpu
    if gpu:
        cluster = dd.start_cluster(dashboard_address=None)
    else:
        cluster = distributed.LocalCluster(n_workers=args.cpu, threads_per_worker=1, dashboard_address=None)
    kwargs = dict(seed=0, dim=args.dim, same_points=args.benefit, dtype=args.dtype)
    with cluster, distributed.Client(cluster) as client:
        ranks = len(client.scheduler_info()["workers"])
        start = time.perf_counter()
        matrix = generate.geometric_dask(n, chunks=(n, min(n, args.chunk)), gpu=gpu, **kwargs)
        if args.persist:
            matrix = matrix.persist()
            distributed.wait(matrix)
            print(f"{ranks} {'GPU' if gpu else 'CPU'} workers: generated {n} x {n} {args.dtype} "
                  f"({matrix.nbytes / 1e9:.1f} GB) in {time.perf_counter() - start:.1f} s", flush=True)
        else:
            print(f"{ranks} {'GPU' if gpu else 'CPU'} workers; {n} x {n} {args.dtype} ({matrix.nbytes / 1e9:.1f} GB) "
                  f"made by each solve's placement, {args.chunk} columns a chunk", flush=True)
        for method in args.methods:
            start = time.perf_counter()
            r = dd.solve(matrix, client, method=method, maximize=args.benefit)
            wall = time.perf_counter() - start
            s = r.stats
            print(f"{method}: wall {wall:.2f} s, ranks {s.phase_counts.get('ranks')} of {s.phase_counts.get('ranks_offered')}, method {s.method}, "
                  f"objective {r.objective!r}, certified optimal by the ranks {r.verify().optimal}, "
                  f"searches {s.iterations}, "
                  f"rows scanned {s.phase_counts.get('rows_scanned')}, collectives {s.phase_counts.get('communication')}, "
                  + ", ".join(f"{k} {v:.2f}" for k, v in s.phase_seconds.items() if v > 0.01), flush=True)
        del matrix
    if args.alone:
        if gpu:
            import cupy as xp
        else:
            import numpy as xp
        cost = generate.geometric(n, xp=xp, **kwargs)
        start = time.perf_counter()
        r = dlap.solve(cost, maximize=args.benefit)
        print(f"1 {'GPU' if gpu else 'process'}: {time.perf_counter() - start:.2f} s, method {r.stats.method}, "
              f"objective {r.objective!r}, optimal {r.verify().optimal}", flush=True)


if __name__ == "__main__":
    main()
