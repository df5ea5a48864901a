"""End to end on a Dask cluster: generate a matrix into a Zarr store on the workers, solve it from
the store, write the assignment and duals back to Zarr, and check the certificate.

    python workflows/solve_zarr.py --n 20000 --f 10 --store /tmp/lap.zarr            # local cluster
    python workflows/solve_zarr.py --scheduler tcp://host:8786 --n 100000 --store /data/lap.zarr

The matrix is written chunk by chunk by the workers (``dlap.generate.uniform_dask(...).to_zarr``),
each rank reads its own slab back (into GPU memory on GPU workers), and only the assignment and
the duals (O(n)) reach the client.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--f", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", required=True, help="Zarr store for the matrix; the solution goes to STORE/solution")
    parser.add_argument("--method", default="classical", choices=("classical", "tree"))
    parser.add_argument("--scheduler", help="an existing cluster (default: a local one)")
    parser.add_argument("--workers", type=int, help="local cluster size")
    args = parser.parse_args(argv)

    import zarr
    from distributed import Client

    import dlap.distributed as dd
    from dlap.generate import uniform_dask

    cluster = None if args.scheduler else dd.start_cluster(args.workers, dashboard_address=":8787")
    with Client(args.scheduler or cluster) as client:
        print(f"dashboard: {client.dashboard_link}", flush=True)
        start = time.perf_counter()
        chunk = max(1, min(args.n, (64 << 20) // (4 * args.n)))  # ~64 MiB row blocks
        uniform_dask(args.n, args.f, seed=args.seed, chunks=(chunk, args.n)).to_zarr(
            f"{args.store}/cost", overwrite=True, compute=True)
        generated = time.perf_counter() - start
        result = dd.solve(f"{args.store}/cost", client, method=args.method, progress=True)
        solved = time.perf_counter() - start - generated
        out = zarr.open_group(f"{args.store}/solution", mode="w")
        for name in ("row_ind", "col_ind", "row_duals", "col_duals"):
            out.create_array(name, data=getattr(result, name), overwrite=True)
        cert = result.verify()
        out.attrs.update(objective=result.objective, optimal=cert.optimal, gap=cert.gap, method=result.stats.method)
    if cluster is not None:
        cluster.close()
    print(json.dumps({"n": args.n, "f": args.f, "method": result.stats.method, "device": result.stats.device,
                      "objective": result.objective, "optimal": cert.optimal, "generate_s": generated,
                      "solve_s": solved, "store": args.store}))
    return 0 if cert.optimal else 1


if __name__ == "__main__":
    sys.exit(main())
