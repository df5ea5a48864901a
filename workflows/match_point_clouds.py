"""Match two point clouds exactly from a Dask client: the clouds are made on the workers (or read
from a Zarr store), ``dlap.distributed.solve_points`` splits the nearest-neighbour searches and
the pricing of every pair over the workers, and the matching, its duals and the certificate's
verdict are written to a Zarr store.

    python workflows/match_point_clouds.py --n 1000000 --workers 2 --out match.zarr     # local cluster
    python workflows/match_point_clouds.py --scheduler tcp://host:8786 --points clouds.zarr --out match.zarr

``--points STORE`` reads the arrays ``STORE/a`` and ``STORE/b`` (points as rows); else two clouds of
``dlap.generate.points``' family ``--family`` are made by one task on the cluster. The client
gathers the points once (n x d values) and sends them to the workers; one of them solves the
sparse core between the pricing rounds;
the dashboard's ``dlap`` page shows the rounds and violators. One JSON line goes to stdout: the
sizes, the objective, the seconds of each step, the pricing rounds, the workers, the threads of the
core solve and the verdict.
"""

from __future__ import annotations

import argparse
import json
import time


def clouds(args):
    """The two clouds as dask arrays: read from ``args.points``, else made by one task."""
    import dask
    import dask.array as da
    import numpy as np

    from dlap import generate

    if args.points:
        return da.from_zarr(f"{args.points}/a"), da.from_zarr(f"{args.points}/b")
    m = args.n if args.m is None else args.m
    dim = generate.POINT_FAMILIES[args.family] if args.dim is None else args.dim
    pair = dask.delayed(generate.points, nout=2)(args.family, args.n, m, dim=dim, seed=args.seed)
    return (da.from_delayed(pair[0], shape=(args.n, dim), dtype=np.float64),
            da.from_delayed(pair[1], shape=(m, dim), dtype=np.float64))


def main(argv=None) -> int:
    from dlap import generate
    from dlap.points.metrics import METRIC_IDS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100000, help="points of the first cloud")
    parser.add_argument("--m", type=int, help="points of the second cloud (default n)")
    parser.add_argument("--family", default="uniform", choices=sorted(generate.POINT_FAMILIES))
    parser.add_argument("--dim", type=int, help="coordinates (default the family's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--points", help="a Zarr store with arrays a and b to match instead")
    parser.add_argument("--metric", default="euclidean", choices=sorted(METRIC_IDS))
    parser.add_argument("--out", help="Zarr store for row_ind, col_ind and the duals (attributes: objective, verdict)")
    parser.add_argument("--scheduler", help="an existing cluster (default: a local one)")
    parser.add_argument("--workers", type=int, help="local cluster size")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"), help="where each worker searches")
    args = parser.parse_args(argv)

    from distributed import Client, wait

    import dlap.distributed as dd

    cluster = None if args.scheduler else dd.start_cluster(args.workers, dashboard_address=":8787")
    try:
        with Client(args.scheduler or cluster) as client:
            print(f"dashboard: {client.dashboard_link}", flush=True)
            a, b = clouds(args)
            started = time.perf_counter()
            a, b = client.persist([a, b])  # made (or read) on the cluster before the solve's clock
            wait([a, b])
            made = time.perf_counter() - started
            result = dd.solve_points(a, b, args.metric, client, device=args.device, progress=True)
            solved = time.perf_counter() - started - made
    finally:
        if cluster is not None:
            cluster.close()
    started = time.perf_counter()
    certificate = result.verify()
    verified = time.perf_counter() - started
    if args.out:
        import zarr

        out = zarr.open_group(args.out, mode="w")
        for name in ("row_ind", "col_ind", "row_duals", "col_duals"):
            out.create_array(name, data=getattr(result, name), overwrite=True)
        out.attrs.update(objective=result.objective, optimal=bool(certificate.optimal), gap=certificate.gap,
                         metric=args.metric)
    counts = result.stats.phase_counts
    print(json.dumps({"n": int(a.shape[0]), "m": int(b.shape[0]), "d": int(a.shape[1]), "metric": args.metric,
                      "objective": result.objective, "optimal": bool(certificate.optimal), "made_s": round(made, 3),
                      "solve_s": round(solved, 3), "verify_s": round(verified, 3),
                      "pricing_rounds": counts.get("pricing_rounds"), "workers": counts.get("workers"),
                      "threads": result.stats.threads,
                      "phase_seconds": {k: round(v, 3) for k, v in result.stats.phase_seconds.items()},
                      "out": args.out}))
    return 0 if certificate.optimal else 1


if __name__ == "__main__":
    raise SystemExit(main())
