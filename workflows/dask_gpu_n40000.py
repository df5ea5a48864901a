"""Issue 16's first target: n = 40000, f = 10, device-resident, on the GPUs of this host (each
variant forced to split over every GPU, and ``method="auto"``) against the single-GPU engine
(``dlap.solve`` on a CuPy matrix) on the same matrix, in one run.

    python workflows/dask_gpu_n40000.py --n 40000 --methods classical classical classical:jv hybrid auto

The single GPU solves the same matrix three times with ``method="auto"`` (dlap.solve's default)
and three times with ``"classical"``.

A method may name its initialisation after a colon (``classical:jv``; default ``init="auto"``)
and the persisted input's layout after an @ (``auto@rows``: one row chunk per GPU; default rows
for classical, column chunks otherwise).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    import cupy
    import distributed

    import dlap
    import dlap.distributed as dd
    from dlap.generate import uniform_counter, uniform_dask

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40000)
    ap.add_argument("--methods", nargs="+", default=["classical", "classical", "tree", "hybrid", "auto"])
    args = ap.parse_args()
    n = args.n
    with dd.start_cluster(dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        ranks = len(client.scheduler_info()["workers"])
        rows = uniform_dask(n, 10, gpu=True, chunks=(-(-n // ranks), n)).persist()
        cols = uniform_dask(n, 10, gpu=True, chunks=(n, -(-n // ranks))).persist()
        distributed.wait([rows, cols])
        for choice in args.methods:
            method, _, layout = choice.partition("@")
            method, _, init = method.partition(":")
            layout = layout or ("rows" if method == "classical" else "cols")
            start = time.perf_counter()
            r = dd.solve(rows if layout == "rows" else cols, client, method=method, init=init or "auto")
            s = r.stats
            print(f"{ranks} GPUs {choice}: wall {time.perf_counter() - start:.3f} s, ranks {s.phase_counts.get('ranks')}, "
                  f"init {s.init}, free after init {n - s.initial_assignments}, optimal {r.verify().optimal}, "
                  f"objective {r.objective}, collectives {s.phase_counts.get('communication')}, "
                  f"tree waves {s.phase_counts.get('waves', 0)}, "
                  f"one rank would move {s.phase_counts.get('one_rank_moved_bytes', 0)} B, "
                  + ", ".join(f"{k} {v:.3f}" for k, v in s.phase_seconds.items() if v > 0.01), flush=True)
    matrix = cupy.asarray(uniform_counter(n, 10))
    for method in ("auto", "auto", "auto", "classical", "classical", "classical"):
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        r = dlap.solve(matrix, method=method)
        print(f"1 GPU ({method}, CuPy matrix): {time.perf_counter() - start:.3f} s, objective {r.objective}, "
              f"method {r.stats.method}", flush=True)


if __name__ == "__main__":
    main()
