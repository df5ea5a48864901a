"""The Dask engine on a CPU LocalCluster of two single-threaded workers against one process.

    python workflows/dask_cpu.py --n 1500 4000 6000 --f 10
    python workflows/dask_cpu.py --n 2000 --families machol-wien geometric geometric-benefit

Uniform costs (the first form), for each n: ``dlap.solve`` in this process (``method="auto"``, median of 3), then
``dlap.distributed.solve`` of the same matrix generated on the workers (``uniform_dask``, one
chunk per rank) with each method, median of 3 after a first solve: wall time, the ranks' solve
(``stats.phase_seconds["rank_solve"]``, the certificate included), the time inside collectives
and their number, the ranks used (``auto`` solves on one where the matrix fits a worker).

Structured costs (``--families``): the workers get ``--worker-memory`` each (Dask's memory
management off, so they live), so ``method="auto"`` splits a matrix that takes more than 40% of
one, and the ranks hand structured costs over to the ε-scaling engine across their column slabs
(dlap/distributed/scaling.py). For each family: ``dlap.solve`` in this process (second of two
runs), then the distributed solve of the same persisted matrix (second of two): wall time, the
ranks' solve, searches, row scans, collectives and the time inside them, and the time per phase.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1500, 4000, 6000])
    parser.add_argument("--f", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--families", nargs="+", help="structured families, split over small workers")
    parser.add_argument("--worker-memory", default="20MB")
    args = parser.parse_args()
    if args.families:
        structured(args)
    else:
        uniform(args)


def uniform(args) -> None:
    import distributed

    import dlap
    import dlap.distributed as dd
    from dlap.generate import uniform_counter, uniform_dask

    print("| n | f | one process (auto) | method | ranks | cluster wall | ranks' solve | in collectives | collectives | ranks' solve / one process |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for n in args.n:
            cost = uniform_counter(n, args.f)
            dlap.solve(cost, device="cpu")
            alone = statistics.median(_timed(dlap.solve, cost, device="cpu")[0] for _ in range(args.repeat))
            array = uniform_dask(n, args.f, chunks=(n // 2, n)).persist()
            distributed.wait(array)
            for method in ("auto", "classical", "hybrid", "tree"):
                dd.solve(array, client, method=method)
                runs = [_timed(dd.solve, array, client, method=method) for _ in range(args.repeat)]
                wall = statistics.median(seconds for seconds, _ in runs)
                stats = sorted((r.stats for _, r in runs), key=lambda s: s.phase_seconds["rank_solve"])[len(runs) // 2]
                solve = stats.phase_seconds["rank_solve"]
                print(f"| {n} | {args.f:g} | {alone:.3f} | {stats.method} | {stats.phase_counts['ranks']} | {wall:.3f} | {solve:.3f} | "
                      f"{stats.phase_seconds.get('communication', 0.0):.3f} | {stats.phase_counts.get('communication')} | "
                      f"{solve / alone:.1f} |", flush=True)
            del array


def structured(args) -> None:
    import dask
    import dask.array as da
    import distributed

    import dlap
    import dlap.distributed as dd
    from dlap import generate

    print("| family | n | one process | method | ranks | cluster wall | ranks' solve | searches | rows scanned | collectives | in collectives | phases |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    config = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")}
    with dask.config.set(config), distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit=args.worker_memory, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for family in args.families:
            n = args.n[0]
            cost = generate.family(family, n, seed=1)
            maximize = family in generate.MAXIMIZE
            alone = [_timed(dlap.solve, cost, maximize=maximize, device="cpu") for _ in range(2)][-1][0]
            array = da.from_array(cost, chunks=(n, n // 2)).persist()
            seconds, result = [_timed(dd.solve, array, client, maximize=maximize, device="cpu") for _ in range(2)][-1]
            assert result.verify().optimal
            s = result.stats
            phases = ", ".join(f"{k} {v:.2f}" for k, v in s.phase_seconds.items()
                               if k in ("initial_reduction", "forward_pass", "price_initialisation", "scaling_phase", "exact_phase"))
            print(f"| {family} | {n} | {alone:.3f} | {s.method} | {s.phase_counts['ranks']} | {seconds:.2f} | "
                  f"{s.phase_seconds['rank_solve']:.2f} | {s.iterations} | {s.phase_counts.get('rows_scanned', 0)} | "
                  f"{s.phase_counts.get('communication')} | {s.phase_seconds.get('communication', 0.0):.2f} | {phases} |", flush=True)
            del array


def _timed(run, *args, **kwargs):
    """Seconds that ``run(*args, **kwargs)`` took, and what it returned."""
    start = time.perf_counter()
    result = run(*args, **kwargs)
    return time.perf_counter() - start, result


if __name__ == "__main__":
    main()
