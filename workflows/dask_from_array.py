"""Placement of an in-memory matrix handed over as ``da.from_array``, by its number of chunks.

Each chunk's ``Delayed`` carries the array's whole graph, and ``da.from_array`` puts every
chunk's data in that graph: a piece computed from it ships the matrix. Placement now culls each
piece's graph to its chunk (``dlap.distributed.placement.chunk_pieces``). This times, on a
2-worker CPU ``LocalCluster``, ``dlap.distributed.solve`` of one uniform float64 matrix in row
chunks of several heights (two solves each): wall time, placement, the ranks' solve.

    python workflows/dask_from_array.py --n 3000 --rows 3000 1500 300 100
"""

from __future__ import annotations

import argparse
import time
import warnings


def main() -> None:
    import dask.array as da
    import distributed
    import numpy as np

    import dlap.distributed as dd

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rows", type=int, nargs="+", default=[3000, 1500, 300, 100])
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the large-graph warnings the old placement caused
    cost = np.random.default_rng(0).integers(0, 10 * args.n, (args.n, args.n)).astype(np.float64)
    print("| n | chunk rows | chunks | solve # | wall s | placement s | ranks' solve s |\n|---|---|---|---|---|---|---|")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for rows in args.rows:
            arr = da.from_array(cost, chunks=(rows, args.n))
            for k in range(2):
                start = time.perf_counter()
                r = dd.solve(arr, client, method="classical")
                s = r.stats.phase_seconds
                print(f"| {args.n} | {rows} | {arr.numblocks[0]} | {k} | {time.perf_counter() - start:.3f} | "
                      f"{s['placement']:.3f} | {s['rank_solve']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
