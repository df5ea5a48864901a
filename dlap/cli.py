"""The ``dlap`` command: solve, generate, demo, bench."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import generate
from .api import METHODS, solve
from .dgs import STARTS, SWITCHINGS

DEMO_N = 2000
#: the demo's warm-up instance: large enough that every phase runs, so all kernels are compiled
DEMO_WARMUP_N = 100


def read_matrix(path: str) -> np.ndarray:
    """A cost matrix from ``.npy``, ``.csv`` or a Zarr store (directory)."""
    p = Path(path)
    if not p.exists():
        raise SystemExit(f"dlap: no such file: {path}")
    if p.is_dir() or p.suffix == ".zarr":
        try:
            import zarr
        except ImportError:
            raise SystemExit("dlap: reading Zarr needs zarr: pip install 'dlap[distributed]'") from None
        return np.asarray(zarr.open_array(str(p), mode="r")[...])
    if p.suffix == ".npy":
        return np.load(p, mmap_mode="r")
    if p.suffix == ".csv":
        return np.loadtxt(p, delimiter=",", ndmin=2)
    raise SystemExit(f"dlap: unsupported matrix format {p.suffix!r} (use .npy, .csv or .zarr)")


def write_atomically(path: str, write) -> None:
    """Call ``write(tmp_path)`` then move the file into place, so a failure leaves nothing half-written."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=target.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_matrix(path: str, matrix: np.ndarray) -> None:
    p = Path(path)
    if p.suffix == ".npy":
        write_atomically(path, lambda tmp: np.save(tmp, matrix))
    elif p.suffix == ".csv":
        fmt = "%d" if matrix.dtype.kind in "iub" else "%.17g"
        write_atomically(path, lambda tmp: np.savetxt(tmp, matrix, delimiter=",", fmt=fmt))
    elif p.suffix == ".zarr":
        try:
            import zarr
        except ImportError:
            raise SystemExit("dlap: writing Zarr needs zarr: pip install 'dlap[distributed]'") from None
        chunk = (max(1, min(matrix.shape[0], 4096)), max(1, min(matrix.shape[1], 4096)))
        z = zarr.open_array(str(p), mode="w", shape=matrix.shape, chunks=chunk, dtype=matrix.dtype)
        z[...] = matrix
    else:
        raise SystemExit(f"dlap: unsupported output format {p.suffix!r} (use .npy, .csv or .zarr)")


def _instance(args) -> tuple[np.ndarray, str, bool]:
    """The matrix, its label, and whether to maximise (``--maximize``, or a generated family
    whose question is a maximum: GEOM benefit)."""
    if args.input:
        return read_matrix(args.input), args.input, args.maximize
    cost = generate.family(args.family, args.n, args.f, seed=args.seed)
    label = f"{args.family}" + (f" f={args.f:g}" if args.f is not None else "")
    maximize = args.maximize or args.family in generate.MAXIMIZE
    return cost, f"{label} n={args.n} seed={args.seed}" + (", maximised" if maximize else ""), maximize


def _report(result, label: str, seconds: float, as_json: bool) -> dict:
    cert = result.verify()
    info = {
        "instance": label,
        "shape": [len(result.row_duals), len(result.col_duals)],
        "method": result.stats.method,
        "device": result.stats.device,
        "objective": result.objective,
        "seconds": seconds,
        "optimal": cert.optimal,
        "gap": cert.gap,
        "iterations": result.stats.iterations,
        "initial_assignments": result.stats.initial_assignments,
    }
    if result.heuristic:
        info.update(heuristic=True, lower_bound=result.lower_bound, switches=result.stats.switches,
                    time_limit_reached=result.stats.time_limit_reached)
    if as_json:
        print(json.dumps(info))
    else:
        print(f"instance   {label}  ({info['shape'][0]} x {info['shape'][1]})")
        print(f"solver     dlap {info['method']} on {info['device']}")
        print(f"objective  {result.objective}")
        print(f"time       {seconds:.3f} s")
        print(f"check      {cert}")
        if result.heuristic:
            stop = "time limit" if result.stats.time_limit_reached else "no improving 2-exchange left"
            print(f"heuristic  {result.stats.switches} switches, stopped by: {stop}; "
                  f"reduction bound {result.lower_bound:.12g}")
    return info


def cmd_solve(args) -> int:
    if args.scheduler or args.workers:
        return _solve_distributed(args)
    cost, label, maximize = _instance(args)
    start = time.perf_counter()
    dgs = {"time_limit": args.time_limit, "start": args.start, "switching": args.switching} if args.method == "dgs" else {}
    result = solve(cost, maximize=maximize, method=args.method, device=args.device, progress=True, **dgs)
    seconds = time.perf_counter() - start
    info = _report(result, label, seconds, args.json)
    if args.out:
        write_atomically(
            args.out,
            lambda tmp: np.savez(
                tmp, row_ind=result.row_ind, col_ind=result.col_ind,
                row_duals=result.row_duals, col_duals=result.col_duals,
            ),
        )
    return 0 if info["optimal"] or result.heuristic else 1  # a heuristic claims no optimality


def _solve_distributed(args) -> int:
    """``dlap solve --scheduler ADDRESS`` / ``--workers N``: the Dask engine. A Zarr input is read
    by the workers; a generated uniform instance is generated on them; other inputs are loaded
    here and scattered."""
    try:
        import dask.array as da

        from . import distributed as dd
    except ImportError:
        raise SystemExit("dlap: --scheduler/--workers need the Dask engine: pip install 'dlap[distributed]'") from None
    method = "classical" if args.method == "auto" else args.method
    if method not in dd.METHODS:
        raise SystemExit(f"dlap: the Dask engine runs {' or '.join(dd.METHODS)}, not {args.method!r}")
    maximize = args.maximize
    if args.input and args.input.endswith(".zarr"):
        cost, label = args.input, args.input
    elif not args.input and args.family == "uniform":
        f = 1.0 if args.f is None else args.f
        cost = generate.uniform_dask(args.n, f, seed=args.seed, gpu=dd.cluster.gpus_visible() > 0 and not args.scheduler)
        label = f"uniform f={f:g} n={args.n} seed={args.seed} (counter-based, generated on the workers)"
    else:
        matrix, label, maximize = _instance(args)
        cost = da.from_array(matrix)
    start = time.perf_counter()
    result = dd.solve(cost, method=method, maximize=maximize, scheduler=args.scheduler,
                      n_workers=args.workers, protocol=args.protocol, progress=True)
    info = _report(result, label, time.perf_counter() - start, args.json)
    if args.out:
        write_atomically(args.out, lambda tmp: np.savez(
            tmp, row_ind=result.row_ind, col_ind=result.col_ind, row_duals=result.row_duals, col_duals=result.col_duals))
    return 0 if info["optimal"] else 1


def cmd_generate(args) -> int:
    matrix = generate.family(args.family, args.n, args.f, seed=args.seed)
    write_matrix(args.out, matrix)
    print(f"wrote {args.family} n={args.n} ({matrix.dtype}) to {args.out}")
    return 0


def cmd_demo(args) -> int:
    cost = generate.uniform(args.n, 1.0, seed=args.seed)
    print(f"dlap demo: uniform integer costs in [0, {args.n}), {args.n} x {args.n}")
    from .api import choose_device

    device = choose_device(cost, "auto")  # the embedded default: the GPU when one is visible
    start = time.perf_counter()
    solve(generate.uniform(DEMO_WARMUP_N, 1.0), device=device)  # same method, dtype and device: compiles the kernels
    warmup = time.perf_counter() - start
    if not args.json and warmup > 0.5:
        print(f"(compiled the kernels in {warmup:.1f} s; cached for later runs)")
    start = time.perf_counter()
    result = solve(cost, device=device, progress=True)
    seconds = time.perf_counter() - start
    info = _report(result, f"uniform f=1 n={args.n} seed={args.seed}", seconds, args.json)
    return 0 if info["optimal"] else 1


def cmd_bench(args) -> int:
    if args.method == "dgs":
        return _bench_dgs(args)
    from . import bench

    gpu = args.device == "gpu"
    if args.suite == "hard":
        cases = bench.grid(args.n or bench.HARD_SIZES[args.device], args.families or bench.HARD_FAMILIES)
        solvers = args.solvers or bench.HARD_SOLVERS[args.device]
    elif args.n is None and args.families is None and gpu:
        cases, solvers = bench.GPU_CASES, args.solvers or bench.GPU_SOLVERS
    else:
        cases = bench.grid(args.n or [1000, 2000, 4000], args.families or ["uniform:1", "uniform:10", "float"])
        solvers = args.solvers or (bench.GPU_SOLVERS if gpu else ["dlap", "lap", "scipy"])
    records = bench.run(
        cases, solvers, repeat=args.repeat, seed=args.seed, out=args.json,
        timings=("host", "device") if gpu else ("host",), peer_budget=args.peer_budget,
    )
    print()
    text = bench.table(records)
    print(text)
    if args.markdown:
        write_atomically(args.markdown, lambda tmp: Path(tmp).write_text(text + "\n"))
    if args.plot:
        write_atomically(args.plot, lambda tmp: bench.plot(records, tmp))
    if args.json:
        print(f"\nJSON records appended to {args.json}")
    return 0 if all(r["agrees"] for r in records) else 1


def _bench_dgs(args) -> int:
    from . import bench_dgs

    records = bench_dgs.run(sizes=args.n, families=args.families, device=args.device, seed=args.seed, out=args.json)
    text = bench_dgs.table(records)
    print()
    print(text)
    if args.markdown:
        write_atomically(args.markdown, lambda tmp: Path(tmp).write_text(text + "\n"))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="dlap", description="Exact linear assignment (Date & Nagi 2016).")
    sub = top.add_subparsers(dest="command", required=True)

    def instance_options(p):
        p.add_argument("input", nargs="?", help=".npy, .csv or .zarr matrix (default: generate one)")
        p.add_argument("--family", default="uniform", choices=list(generate.FAMILIES))
        p.add_argument("--n", type=int, default=1000)
        p.add_argument("--f", type=float, default=None, help="cost range factor (uniform)")
        p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("solve", help="solve a matrix from a file or a generated one")
    instance_options(p)
    p.add_argument("--method", default="auto", choices=METHODS)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    p.add_argument("--maximize", action="store_true")
    p.add_argument("--time-limit", type=float, help="method dgs: stop after this many seconds")
    p.add_argument("--start", default="greedy", choices=STARTS, help="method dgs: start assignment")
    p.add_argument("--switching", default="parallel", choices=SWITCHINGS, help="method dgs")
    p.add_argument("--out", help="write row_ind, col_ind and duals to this .npz")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.add_argument("--scheduler", help="solve on this Dask cluster (the Dask engine; method classical or tree)")
    p.add_argument("--workers", type=int, help="ranks: that many workers (starts a local cluster without --scheduler)")
    p.add_argument("--protocol", default="tcp", help="local cluster's protocol: tcp, or ucx (distributed-ucxx)")
    p.set_defaults(run=cmd_solve)

    p = sub.add_parser("generate", help="write a generated instance to .npy, .csv or .zarr")
    p.add_argument("--family", default="uniform", choices=list(generate.FAMILIES))
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--f", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("demo", help="generate and solve a LAP, print objective, time, check")
    p.add_argument("--n", type=int, default=DEMO_N)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_demo)

    p = sub.add_parser("bench", help="dlap and its peers side by side on the same instances")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: the ANCHORS.md grid plus geometric and float instances, GPU solvers "
                        "timed from the host and from the GPU, against lap and scipy")
    p.add_argument("--method", choices=("exact", "dgs"), default="exact",
                   help="dgs: Deep Greedy Switching against dlap's exact solver (gaps, deadlines)")
    p.add_argument("--suite", choices=("grid", "hard"), default="grid",
                   help="hard: structured costs (geometric, geometric-int, -3d, -disjoint, -benefit, "
                        "machol-wien, ties:4) at n = 500 to 4000 on the CPU, 1000 to 20000 on the GPU, "
                        "against scipy, lap and lapx")
    p.add_argument("--n", type=int, nargs="+", help="sizes (default 1000 2000 4000; dgs: 1000 to 20000)")
    p.add_argument("--families", nargs="+",
                   help="family[:f], e.g. uniform:0.1 geometric machol-wien ties (default uniform:1 uniform:10 float); "
                        "dgs: geometric-benefit geometric uniform")
    p.add_argument("--solvers", nargs="+",
                   help="dlap, dlap-tree, dlap-classical, dlap-hybrid, dlap-scaling, dlap-gpu, dlap-gpu-tree, "
                        "dlap-gpu-classical, dlap-gpu-hybrid, dlap-gpu-scaling, scipy, lap, lapx "
                        "(lapx from the folder DLAP_LAPX_DIR when lap is installed too)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peer-budget", type=float, default=60.0,
                   help="skip a CPU solver where its extrapolated time passes this many seconds")
    p.add_argument("--json", help="append JSON records to this file")
    p.add_argument("--markdown", help="write the summary table to this file")
    p.add_argument("--plot", help="write a PNG plot of the times to this file")
    p.set_defaults(run=cmd_bench)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as e:  # bad input: scipy's message, no traceback
        print(f"dlap: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
