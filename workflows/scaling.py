"""Weak and strong scaling of the Dask engine, next to Date & Nagi (2016), Tables 4 and 5.

Strong scaling: one matrix (uniform integers in [0, f*n), the paper's cost range [0, 10n] with
f = 10), solved on 1, 2, 4 ... ranks. Weak scaling: n = base * sqrt(p), so each rank holds the
same number of entries (the paper: 1e8 per GPU, n = 10000 at one GPU).

Each rank count gets its own local cluster (``LocalCUDACluster`` on the first p GPUs, or a
``LocalCluster`` of p CPU workers with ``--cpu``). The matrix is generated on the workers
(``dlap.generate.uniform_dask``, one chunk per rank along the split axis), a small untimed solve
compiles the kernels, then each solve is timed. ``solve_s`` is the ranks' own time (from the
first reduction to the certificate, the paper's timing); ``wall_s`` adds placement (generation)
and the client's overhead; with ``--persist`` the matrix is generated and persisted on the
workers before the timed solves, so ``wall_s`` is the client's call alone, as the single-GPU
engine's time is its call on a matrix already on its GPU. Efficiency: strong t_1 / (p t_p), weak
t_1 / t_p.

    python workflows/scaling.py strong --n 40000 --f 10 --ranks 1 2 --out scaling.jsonl
    python workflows/scaling.py weak --n 10000 --f 10 --ranks 1 2 4
    python workflows/scaling.py strong --n 100000 --ranks 2 --methods classical --persist --repeat 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

#: the paper's Tables 4 and 5 (K20X GPUs, MPI): overall seconds and efficiency per GPU count
PAPER = {
    "weak": {"classical": {1: (10.42, 1.00), 2: (12.48, 0.83), 4: (15.03, 0.69), 8: (18.58, 0.56), 16: (23.59, 0.44)},
             "tree": {1: (16.28, 1.00), 2: (20.26, 0.80), 4: (26.51, 0.61), 8: (37.03, 0.44), 16: (58.32, 0.28)}},
    "strong": {"classical": {1: (28.50, 1.00), 2: (19.47, 0.73), 4: (15.07, 0.47), 8: (13.00, 0.27), 16: (12.03, 0.15)},
               "tree": {1: (38.30, 1.00), 2: (29.21, 0.66), 4: (26.22, 0.37), 8: (27.47, 0.17), 16: (30.21, 0.08)}},
}


def cluster(p: int, gpu: bool, protocol: str):
    from dlap.distributed import start_cluster

    if gpu:
        return start_cluster(p, protocol=protocol, CUDA_VISIBLE_DEVICES=",".join(map(str, range(p))),
                             dashboard_address=":0")
    return start_cluster(p, protocol=protocol, gpu=False, threads_per_worker=max(1, (os.cpu_count() or 2) // p))


def matrix(n: int, f: float, p: int, method: str, gpu: bool, seed: int):
    from dlap.generate import uniform_dask

    split = -(-n // p)
    chunks = (split, n) if method == "classical" else (n, split)
    return uniform_dask(n, f, seed=seed, chunks=chunks, gpu=gpu)


def single_gpu(args) -> list[dict]:
    """The single-GPU engine (dlap.solve, method auto) on each size's matrix, built on GPU 0: the
    reference optimum and time."""
    import cupy

    import dlap
    from dlap.generate import uniform_block

    records = []
    for n in sorted({args.n if args.mode == "strong" else int(round(args.n * math.sqrt(p))) for p in args.ranks}):
        cost = uniform_block((0, n), (0, n), n, max(1, int(round(args.f * n))), args.seed, cupy)
        dlap.solve(cost[:2000, :2000])  # compile
        for rep in range(args.repeat):
            start = time.perf_counter()
            result = dlap.solve(cost)
            seconds = time.perf_counter() - start
            record = {"mode": args.mode, "method": "single-gpu", "ranks": 1, "n": n, "f": args.f, "seed": args.seed,
                      "repeat": rep, "objective": result.objective, "optimal": result.verify().optimal,
                      "solve_s": seconds, "wall_s": seconds}
            records.append(record)
            print(json.dumps(record), flush=True)
            del result
        del cost
        cupy.get_default_memory_pool().free_all_blocks()
    return records


def run(args) -> list[dict]:
    from distributed import Client, wait

    import dlap.distributed as dd

    records = []
    if not args.cpu and not args.no_single:
        records += single_gpu(args)
    for p in args.ranks:
        n = args.n if args.mode == "strong" else int(round(args.n * math.sqrt(p)))
        with cluster(p, not args.cpu, args.protocol) as c, Client(c) as client:
            for method in args.methods:
                dd.solve(matrix(min(n, 2000), args.f, p, method, not args.cpu, 1), client, method=method)  # compile
                persisted = None
                if args.persist:
                    persisted = client.persist(matrix(n, args.f, p, method, not args.cpu, args.seed))
                    wait(persisted)
                for rep in range(args.repeat):
                    start = time.perf_counter()
                    cost = matrix(n, args.f, p, method, not args.cpu, args.seed) if persisted is None else persisted
                    result = dd.solve(cost, client, method=method)
                    wall = time.perf_counter() - start
                    cert = result.verify()
                    record = {
                        "mode": args.mode, "method": method, "ranks": p, "n": n, "f": args.f, "seed": args.seed,
                        "protocol": args.protocol, "device": "cpu" if args.cpu else "gpu", "repeat": rep,
                        "persisted": persisted is not None,
                        "objective": result.objective, "optimal": cert.optimal, "gap": cert.gap,
                        "solve_s": result.stats.phase_seconds["rank_solve"], "wall_s": wall,
                        "phase_seconds": result.stats.phase_seconds, "iterations": result.stats.iterations,
                        "dual_updates": result.stats.dual_updates, "phase_counts": {
                            k: v for k, v in result.stats.phase_counts.items() if not isinstance(v, list)},
                        "communication_per_rank": result.stats.phase_counts["communication_per_rank"],
                    }
                    records.append(record)
                    print(json.dumps(record), flush=True)
    return records


def best_runs(records: list[dict], fields: tuple[str, ...], timing: str) -> dict[tuple, dict]:
    """The fastest record (by ``timing``) of each combination of ``fields``."""
    best = {}
    for r in records:
        key = tuple(r[f] for f in fields)
        if key not in best or r[timing] < best[key][timing]:
            best[key] = r
    return best


def table(records: list[dict], mode: str) -> str:
    """Markdown: best time per (method, ranks), efficiency, and the paper's row for that count."""
    best = best_runs(records, ("method", "ranks", "n"), "solve_s")
    lines = ["| method | ranks | n | solve s | wall s | efficiency | optimal | paper s (K20X) | paper efficiency |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (method, p, _), r in sorted(best.items()):
        if method == "single-gpu":
            lines.append(f"| single-GPU engine (dlap.solve) | 1 | {r['n']} | {r['solve_s']:.3f} | | | {r['optimal']} | | |")
            continue
        t1 = min((v for (m, q, _), v in best.items() if m == method), key=lambda v: v["ranks"])
        base_p = t1["ranks"]
        if mode == "strong":
            eff = t1["solve_s"] * base_p / (p * r["solve_s"])
        else:
            eff = t1["solve_s"] / r["solve_s"]
        paper = PAPER[mode][method].get(p, (float("nan"), float("nan")))
        lines.append(f"| {method} | {p} | {r['n']} | {r['solve_s']:.3f} | {r['wall_s']:.2f} | {eff:.2f} | "
                     f"{r['optimal']} | {paper[0]:.2f} | {paper[1]:.2f} |")
    return "\n".join(lines)


def common_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every Dask-engine workflow takes: repeats, seed, CPU workers, output file."""
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", action="store_true", help="CPU workers (LocalCluster) instead of GPUs")
    parser.add_argument("--out", help="append the records (JSON lines) and the table (.md) here")
    return parser


def report(records: list[dict], text: str, out: str | None, title: str) -> None:
    """Print the table; with ``out``, append the records (JSON lines) there and the titled table
    to its ``.md`` sibling."""
    print(text)
    if not out:
        return
    with open(out, "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    with open(os.path.splitext(out)[0] + ".md", "a") as fh:
        fh.write(f"\n{title}\n\n{text}\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("strong", "weak"))
    parser.add_argument("--n", type=int, default=40000, help="strong: the size; weak: the size at one rank")
    parser.add_argument("--f", type=float, default=10.0)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--methods", nargs="+", default=["classical", "tree"])
    parser.add_argument("--protocol", default="tcp")
    parser.add_argument("--no-single", action="store_true", help="skip the single-GPU reference (too large for one GPU)")
    parser.add_argument("--persist", action="store_true",
                        help="persist the matrix on the workers before the timed solves (wall_s: the solve call)")
    args = common_arguments(parser).parse_args(argv)
    records = run(args)
    report(records, table(records, args.mode), args.out, f"{args.mode} scaling, f = {args.f}, protocol {args.protocol}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
