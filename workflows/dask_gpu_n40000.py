"""Issue 16's first target: n = 40000, f = 10, device-resident, on the GPUs of this host (each
variant forced to split over every GPU, and ``method="auto"``) against the single-GPU engine
(``dlap.solve`` on a CuPy matrix) on the same matrix, in one run.

    python workflows/dask_gpu_n40000.py --n 40000 --methods classical classical classical:jv hybrid auto

The single GPU solves the same matrix three times with ``method="auto"`` (dlap.solve's default)
and three times with ``"classical"``. From the single GPU's classical phases the run prints the
bound that perfect division gives k GPUs (Amdahl): the phases that run on a replica of the
O(n) search state on every rank (the BFS forward pass, the reverse pass, the augmentation, the
optimality check) take as long on k GPUs as on one; the phases that read the matrix
(initialisation, compression, the dual update) are counted as if k GPUs took 1/k of their time,
with no collective. The measured ratio is the median ranks' solve against the median single-GPU
``auto`` time.

A method may name its initialisation after a colon (``classical:jv``; default ``init="auto"``)
and the persisted input's layout after an @ (``auto@rows``: one row chunk per GPU; default rows
for classical, column chunks otherwise).
"""

from __future__ import annotations

import argparse
import statistics
import time

#: the phases that run on every rank's replica of the search state: a split does not shorten them
REPLICATED = ("forward_pass", "reverse_pass", "augment", "optimality_check")
#: the phases that read the matrix: a split over k GPUs divides them by k at best
DIVIDED = ("initial_reduction", "compress", "dual_update")


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
        split = []  # ranks' solve of the solves split over every GPU
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
            if s.phase_counts.get("ranks") == ranks and s.phase_seconds.get("comm_setup", 0.0) < 0.1:
                split.append(s.phase_seconds["rank_solve"])  # (not the solve that makes the communicator)
    matrix = cupy.asarray(uniform_counter(n, 10))
    one, phases = [], []
    for method in ("auto", "auto", "auto", "auto", "classical", "classical", "classical"):
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        r = dlap.solve(matrix, method=method)
        seconds = time.perf_counter() - start
        print(f"1 GPU ({method}, CuPy matrix): {seconds:.3f} s, objective {r.objective}, "
              f"method {r.stats.method}, "
              + ", ".join(f"{k} {v:.3f}" for k, v in r.stats.phase_seconds.items() if v > 0.001), flush=True)
        if method == "auto":
            one.append(seconds)  # (the first includes the kernels' loading)
        else:
            phases.append(r.stats.phase_seconds)
    print_bound(one[1:], phases, split, ranks)


def print_bound(one: list, phases: list, split: list, ranks: int) -> None:
    """The measured ratio of the split to one GPU, and the bound perfect division gives."""
    t1 = statistics.median(one)
    replicated = statistics.median(sum(p.get(k, 0.0) for k in REPLICATED) for p in phases)
    divided = statistics.median(sum(p.get(k, 0.0) for k in DIVIDED) for p in phases)
    total = replicated + divided
    print(f"one GPU, auto: median {t1:.3f} s; classical phases: replicated {replicated:.3f} s "
          f"({', '.join(REPLICATED)}), divided {divided:.3f} s ({', '.join(DIVIDED)})", flush=True)
    for k in sorted({2, 4, ranks}):
        print(f"  bound for {k} GPUs, perfect division, no collective: "
              f"{(replicated + divided / k) / total:.2f}x one GPU", flush=True)
    if split:
        print(f"measured: {ranks} GPUs' ranks' solve median {statistics.median(split):.3f} s "
              f"({len(split)} solves) = {statistics.median(split) / t1:.2f}x one GPU's auto", flush=True)


if __name__ == "__main__":
    main()
