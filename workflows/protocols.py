"""Dask's protocols side by side on GPUs: tcp, and ucx (distributed-ucxx: UCX, over NVLink).

The ranks exchange their per-iteration vectors through NCCL whatever the protocol, so the
protocol carries Dask's own traffic: task, event and progress messages, and placement's data
when the matrix's chunks are not where the ranks need them. Three cases per protocol, on p GPUs,
one matrix (uniform integers in [0, f n), int32), classical variant (rows split):

- ``generated``: chunks generated on their rank's worker (nothing moves): the strong-scaling solve;
- ``persisted-rows``: the matrix persisted on the GPUs in one row chunk per rank; the ranks
  follow the data, nothing moves;
- ``persisted-columns``: the same matrix persisted in column chunks: each rank gathers
  (p - 1)/p of its row slab from the other GPUs (``placement_moved_bytes``), over the protocol.

``placement_s`` is from the call to the slabs being in place (the persisted matrix's generation
is excluded); ``solve_s`` is the ranks' own time; ``wall_s`` the whole call.

    python workflows/protocols.py --n 40000 --f 10 --ranks 2 --protocols tcp ucx --out workflows/results/protocols.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from scaling import best_runs, cluster, common_arguments, matrix, report  # noqa: E402  (run as a script from workflows/)

CASES = ("generated", "persisted-rows", "persisted-columns")


def instance(case: str, n: int, f: float, p: int, seed: int, gpu: bool):
    """The case's dask array (persisted ones are computed on the workers before the timer starts)."""
    from distributed import wait

    from dlap.generate import uniform_dask

    if case == "generated":
        return matrix(n, f, p, "classical", gpu, seed)
    split = -(-n // p)
    chunks = (split, n) if case == "persisted-rows" else (n, split)
    arr = uniform_dask(n, f, seed=seed, chunks=chunks, gpu=gpu).persist()
    wait(arr)
    return arr


def run(args) -> list[dict]:
    from distributed import Client

    import dlap.distributed as dd
    from dlap.distributed.cluster import worker_addresses

    records = []
    for protocol in args.protocols:
        for p in args.ranks:
            with cluster(p, not args.cpu, protocol) as c, Client(c) as client:
                addresses = worker_addresses(client)
                for case in CASES:  # compile the kernels and the placement plan's solver
                    dd.solve(instance(case, 2000, args.f, p, 1, not args.cpu), client)
                for case in CASES:
                    for rep in range(args.repeat):
                        arr = instance(case, args.n, args.f, p, args.seed, not args.cpu)
                        start = time.perf_counter()
                        result = dd.solve(arr, client, method="classical")
                        wall = time.perf_counter() - start
                        del arr
                        stats = result.stats
                        moved = stats.phase_counts.get("placement_moved_bytes", 0)
                        placement = stats.phase_seconds["placement"]
                        record = {
                            "protocol": protocol, "device": "cpu" if args.cpu else "gpu", "workers": addresses, "case": case, "ranks": p, "n": args.n,
                            "f": args.f, "seed": args.seed, "repeat": rep, "objective": result.objective,
                            "optimal": result.verify().optimal, "placement_s": placement,
                            "placement_moved_bytes": moved, "placement_gb_per_s": moved / placement / 1e9,
                            "comm_setup_s": stats.phase_seconds.get("comm_setup"),
                            "communication_s": stats.phase_seconds.get("communication"),
                            "solve_s": stats.phase_seconds["rank_solve"], "wall_s": wall,
                            "phase_seconds": stats.phase_seconds, "iterations": stats.iterations,
                            "ucx_environment": {k: v for k, v in os.environ.items() if k.startswith("UCX")},
                        }
                        records.append(record)
                        print(json.dumps(record), flush=True)
    return records


def table(records: list[dict]) -> str:
    """Markdown: the best run of each (case, ranks, protocol)."""
    best = best_runs(records, ("case", "ranks", "protocol"), "wall_s")
    lines = ["| case | ranks | protocol | moved GB | placement s | GB/s | solve s | wall s | objective | optimal |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (case, p, protocol), r in sorted(best.items(), key=lambda kv: (CASES.index(kv[0][0]), kv[0][1], kv[0][2])):
        lines.append(f"| {case} | {p} | {protocol} | {r['placement_moved_bytes'] / 1e9:.2f} | {r['placement_s']:.2f} | "
                     f"{r['placement_gb_per_s']:.1f} | {r['solve_s']:.3f} | {r['wall_s']:.2f} | {r['objective']} | "
                     f"{r['optimal']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=40000)
    parser.add_argument("--f", type=float, default=10.0)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2])
    parser.add_argument("--protocols", nargs="+", default=["tcp", "ucx"])
    args = common_arguments(parser).parse_args(argv)
    records = run(args)
    report(records, table(records), args.out, f"protocols, n = {args.n}, f = {args.f}, classical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
