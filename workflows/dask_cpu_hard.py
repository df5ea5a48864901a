"""Structured costs split over a CPU LocalCluster whose workers cannot hold them, against one process.

    python workflows/dask_cpu_hard.py --n 2000 --families machol-wien geometric geometric-benefit

Two single-threaded workers with ``--worker-memory`` each (Dask's memory management off, so they
live): ``dlap.distributed.solve(method="auto")`` splits a matrix that takes more than 40% of a
worker's memory, and the ranks hand structured costs over to the ε-scaling engine across their
column slabs (dlap/distributed/scaling.py). For each family: ``dlap.solve`` in this process
(second of two runs), then the distributed solve of the same persisted matrix (second of two):
wall time, the ranks' solve, searches, row scans, collectives and the time inside them, and the
time per phase.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--families", nargs="+", default=["machol-wien", "geometric", "geometric-benefit"])
    parser.add_argument("--worker-memory", default="20MB")
    args = parser.parse_args()

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
            cost = generate.family(family, args.n, seed=1)
            maximize = family in generate.MAXIMIZE
            alone = [_timed(lambda: dlap.solve(cost, maximize=maximize, device="cpu")) for _ in range(2)][-1][0]
            array = da.from_array(cost, chunks=(args.n, args.n // 2)).persist()
            seconds, result = [_timed(lambda: dd.solve(array, client, maximize=maximize, device="cpu")) for _ in range(2)][-1]
            assert result.verify().optimal
            s = result.stats
            phases = ", ".join(f"{k} {v:.2f}" for k, v in s.phase_seconds.items()
                               if k in ("initial_reduction", "forward_pass", "price_initialisation", "scaling_phase", "exact_phase"))
            print(f"| {family} | {args.n} | {alone:.3f} | {s.method} | {s.phase_counts['ranks']} | {seconds:.2f} | "
                  f"{s.phase_seconds['rank_solve']:.2f} | {s.iterations} | {s.phase_counts.get('rows_scanned', 0)} | "
                  f"{s.phase_counts.get('communication')} | {s.phase_seconds.get('communication', 0.0):.2f} | {phases} |", flush=True)
            del array


def _timed(run):
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


if __name__ == "__main__":
    main()
