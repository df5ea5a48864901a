"""``method="auto"`` on the GPUs of this host for integer matrices that fit one GPU: from
``dlap.distributed.solve.SPLIT_MIN_ENTRIES`` entries it splits them (classical, row slabs over
every GPU), below it solves on one rank. Each size and cost range is solved by auto, by one rank
(``n_workers=1``, what auto did before at every size), and by ``dlap.solve`` on one GPU with the
matrix already there; the Dask solves make the matrix on the workers (``uniform_dask``'s default
chunks, not persisted), so their wall time includes making it.

    python workflows/dask_gpu_auto_split.py --n 60000 80000 100000 --f 1 10
    CUDA_VISIBLE_DEVICES=0,1 python workflows/dask_gpu_auto_split.py ...     (two GPUs)
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    import cupy
    import distributed

    import dlap
    import dlap.distributed as dd
    from dlap.distributed.solve import SPLIT_MIN_ENTRIES
    from dlap.generate import uniform_block, uniform_dask

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[60000, 80000, 100000])
    ap.add_argument("--f", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    cases = [(n, f) for n in args.n for f in args.f]
    with dd.start_cluster(dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        gpus = len(client.scheduler_info()["workers"])
        print(f"{gpus} GPU workers, SPLIT_MIN_ENTRIES {SPLIT_MIN_ENTRIES}", flush=True)
        for method in ("classical", "auto"):  # compile both paths, and make the split's communicator
            dd.solve(uniform_dask(2000, 10, gpu=True), client, method=method)
        for n, f in cases:
            for label, kwargs in [("auto", {}), ("one rank", {"n_workers": 1})] * args.repeat:
                start = time.perf_counter()
                r = dd.solve(uniform_dask(n, f, gpu=True), client, **kwargs)
                s = r.stats
                print(f"n {n} f {f:g} {label}: wall {time.perf_counter() - start:.3f} s, ranks {s.phase_counts['ranks']}, "
                      f"method {s.method}, objective {r.objective}, certified {r.verify().optimal}, "
                      f"rank_solve {s.phase_seconds['rank_solve']:.3f}, placement {s.phase_seconds['placement']:.3f}",
                      flush=True)
    for n, f in cases:
        matrix = uniform_block((0, n), (0, n), n, max(1, int(round(f * n))), 0, cupy)
        for _ in range(args.repeat):
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            r = dlap.solve(matrix)
            print(f"n {n} f {f:g} 1 GPU (dlap.solve, matrix on the GPU): {time.perf_counter() - start:.3f} s, "
                  f"method {r.stats.method}, objective {r.objective}", flush=True)
        del matrix
        cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
