"""The ``dlap`` command: solve, generate, demo, bench.

Exit status: 0 done (and, for an exact method, proved optimal); 1 a solve whose certificate does
not prove it optimal; 2 an error, reported on one line (``DLAP_TRACEBACK=1`` shows the
traceback); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from . import __version__, generate
from .api import solve
from .device import choose_device, gpus_visible
from .files import (
    MATRIX_FORMATS,
    SOLUTION_FORMATS,
    check_writable,
    read_matrix,
    write_file,
    write_matrix,
    write_solution,
)
from .options import METHODS, STARTS, SWITCHINGS

DEMO_N = 2000
#: the top-left corner of a matrix the commands solve before the timed solve: large enough that
#: every phase runs, so the timed solve compiles and loads no kernel
WARM_CORNER = 100
#: ``dlap bench``'s timed runs of each case where ``--repeat`` is not given (the points suite: 1)
REPEAT = 3
#: the errors the command reports on one line: bad input, a missing device or extra, a file,
#: a cluster that cannot be reached or lost a worker
USER_ERRORS = (ValueError, TypeError, RuntimeError, MemoryError, OSError, ImportError)


#: what ``solve``'s options that describe a generated instance default to
GENERATED_DEFAULTS = {"family": "uniform", "n": 1000, "m": None, "f": None, "seed": 0}


def _generated(args) -> None:
    """Fill in the options of a generated instance, refusing them next to an input file (issue
    37: ``dlap solve m.npy --n 5000 --family geometric`` ignored both)."""
    given = [name for name in GENERATED_DEFAULTS if getattr(args, name) is not None]
    if args.input and given:
        flags = ", ".join("--" + name for name in given)
        raise ValueError(f"{flags} describe a generated instance; they do not apply to the input file {args.input}")
    for name, default in GENERATED_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def _instance(args) -> tuple:
    """The matrix, its label, and whether to maximise (``--maximize``, or a generated family
    whose question is a maximum: GEOM benefit)."""
    if args.input:
        return read_matrix(args.input), args.input, args.maximize
    cost = generate.family(args.family, args.n, args.f, seed=args.seed, m=args.m)
    label = f"{args.family}" + (f" f={args.f:g}" if args.f is not None else "")
    size = f"n={args.n}" + (f" m={args.m}" if args.m is not None else "")
    maximize = args.maximize or args.family in generate.MAXIMIZE
    return cost, f"{label} {size} seed={args.seed}" + (", maximised" if maximize else ""), maximize


def _report(result, label: str, seconds: float, as_json: bool, cost=None) -> dict:
    """Print the solve's summary and certificate (checked against ``cost``, or, for a Dask solve,
    the ranks' certificate); return it as a dict."""
    cert = result.verify(cost)
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


def _dgs_options(args) -> dict:
    """``--time-limit``, ``--start``, ``--switching``: options of method dgs, refused with another."""
    given = {k: v for k, v in (("time_limit", args.time_limit), ("start", args.start), ("switching", args.switching))
             if v is not None}
    if args.method != "dgs":
        if given:
            flags = " and ".join("--" + k.replace("_", "-") for k in given)
            verb = "is an option" if len(given) == 1 else "are options"
            raise ValueError(f"{flags} {verb} of --method dgs (the exact methods run to the optimum)")
        return {}
    return {"start": "greedy", "switching": "parallel", **given}


def cmd_solve(args) -> int:
    _generated(args)
    if args.out:
        check_writable(args.out, SOLUTION_FORMATS, "--out")
    dgs = _dgs_options(args)
    if args.scheduler or args.workers:
        return _solve_distributed(args)
    cost, label, maximize = _instance(args)
    if dgs.get("time_limit") is not None:
        _load_dgs_kernels(cost, args)
    elif not dgs:
        _load_kernels(cost, args.json, maximize=maximize, method=args.method, device=args.device)
    start = time.perf_counter()
    result = solve(cost, maximize=maximize, method=args.method, device=args.device, progress=True, **dgs)
    seconds = time.perf_counter() - start
    info = _report(result, label, seconds, args.json, cost)
    if args.out:
        write_solution(args.out, result)
    return 0 if info["optimal"] or result.heuristic else 1  # a heuristic claims no optimality


def _load_kernels(cost, as_json: bool, device: str, handover: bool = True, **options) -> None:
    """Before the clock of the timed solve: the same solve of the matrix's top-left corner (on a
    GPU one of up to ``GPU_WARM_UP_N`` rows; its dtype, device and options; for
    ``method="auto"`` the variant auto picks for the whole matrix, and where it may hand the
    matrix over (``handover``) ε-scaling too for a square one, the sparse engine for a float one
    it may take); where a CPU thread team will solve the matrix, the
    team's twins of the kernels that compiled. A process's first solve compiles or loads its
    kernels here, not in the time it reports."""
    from .backends import backend
    from .backends.cpu.numba_setup import compile_team_twins
    from .dgs.loading import GPU_WARM_UP_N
    from .hungarian import device_variant
    from .hungarian.auto import SPARSE_MIN_ROWS
    from .threads import threads_for

    if not cost.size:
        return
    start = time.perf_counter()
    device = choose_device(cost, device)
    side = GPU_WARM_UP_N if device == "gpu" else WARM_CORNER  # CuPy compiles some kernels per size
    corner = cost[:side, :side]
    methods = [options.pop("method", "auto")]
    if methods == ["auto"]:
        methods = [device_variant(backend(device), cost)]
        if handover and cost.shape[0] == cost.shape[1]:
            methods.append("scaling")
        if handover and cost.dtype.kind == "f" and min(cost.shape) >= SPARSE_MIN_ROWS:
            methods.append("sparse")
    # the sparse engine's rectangular auction compiles on a corner of the matrix's shape
    wide, tall = cost.shape[1] > cost.shape[0], cost.shape[0] > cost.shape[1]
    for method in methods:
        shaped = cost[: side + tall, : side + wide] if method == "sparse" else corner
        try:
            solve(shaped, device=device, method=method, **options)
        except ValueError:  # a corner without a full assignment (forbidden pairs): the solve loads them
            pass
    if device == "cpu" and threads_for(cost.size) > 1:
        compile_team_twins()
    if not as_json and time.perf_counter() - start > 0.5:
        print(f"(compiled or loaded the kernels in {time.perf_counter() - start:.1f} s; cached for later runs)",
              file=sys.stderr)


def _load_dgs_kernels(cost, args) -> None:
    """Before the clock of a solve with a deadline starts: DGS's kernels for this matrix (a fresh
    process would otherwise spend the deadline loading them and answer with its start)."""
    from . import load_dgs_kernels
    start = time.perf_counter()
    load_dgs_kernels(cost.dtype, choose_device(cost, args.device))
    if not args.json and time.perf_counter() - start > 0.5:
        print(f"(loaded the DGS kernels in {time.perf_counter() - start:.1f} s, before the deadline's clock)",
              file=sys.stderr)


def _solve_distributed(args) -> int:
    """``dlap solve --scheduler ADDRESS`` / ``--workers N``: the Dask engine, on the matrix the
    same arguments solve without them. A Zarr input is read by the workers; the families of
    ``generate.WORKER_FAMILIES`` are generated on them; other inputs are made here and scattered."""
    try:
        import dask
        import dask.array as da

        from . import distributed as dd
    except ImportError:
        raise ImportError("--scheduler/--workers need the Dask engine: pip install 'dlap[distributed]'") from None
    method = args.method
    if method not in dd.METHODS:
        raise ValueError(f"the Dask engine runs --method {', '.join(dd.METHODS)}, not {args.method!r}")
    maximize = args.maximize
    if args.input and Path(args.input).suffix == ".zarr":
        cost, label = args.input, args.input
    elif not args.input and args.family in generate.WORKER_FAMILIES:
        gpu = args.device == "gpu" or (args.device == "auto" and not args.scheduler and gpus_visible() > 0)
        cost = generate.family_dask(args.family, args.n, args.f, seed=args.seed, m=args.m, gpu=gpu)
        f = f" f={1.0 if args.f is None else args.f:g}" if args.family == "uniform-counter" else ""
        maximize = maximize or args.family in generate.MAXIMIZE
        label = (f"{args.family}{f} n={args.n} seed={args.seed} (generated on the workers)"
                 + (", maximised" if maximize else ""))
    else:
        matrix, label, maximize = _instance(args)
        cost = da.from_array(matrix)
    start = time.perf_counter()
    from .distributed import config

    with dask.config.set({"distributed.comm.timeouts.connect": config.seconds("connect-timeout")}):
        result = dd.solve(cost, method=method, maximize=maximize, scheduler=args.scheduler, n_workers=args.workers,
                          protocol=args.protocol, progress=True, device=args.device)
    info = _report(result, label, time.perf_counter() - start, args.json)
    if args.out:
        write_solution(args.out, result)
    return 0 if info["optimal"] else 1


def cmd_generate(args) -> int:
    check_writable(args.out, MATRIX_FORMATS, "--out")
    matrix = generate.family(args.family, args.n, args.f, seed=args.seed, m=args.m)
    write_matrix(args.out, matrix)
    print(f"wrote {args.family} {matrix.shape[0]} x {matrix.shape[1]} ({matrix.dtype}) to {args.out}")
    return 0


def cmd_demo(args) -> int:
    cost = generate.uniform(args.n, 1.0, seed=args.seed)
    if not args.json:
        print(f"dlap demo: uniform integer costs in [0, {args.n}), {args.n} x {args.n}")
    device = choose_device(cost, "auto")  # the embedded default: the GPU when one is visible
    _load_kernels(cost, args.json, device, handover=False)  # (uniform costs stay with the variants)
    start = time.perf_counter()
    result = solve(cost, device=device, progress=True)
    seconds = time.perf_counter() - start
    info = _report(result, f"uniform f=1 n={args.n} seed={args.seed}", seconds, args.json, cost)
    return 0 if info["optimal"] else 1


def cmd_warmup(args) -> int:
    import numba

    from .backends.cpu import numba_setup  # noqa: F401 - sets the cache folder reported below
    from .warmup import warmup

    seconds = warmup(args.device, echo=None if args.quiet else print, jobs=args.jobs)
    if not args.quiet:
        print(f"dlap's kernels compiled or loaded in {seconds:.1f} s; Numba's cache: {numba.config.CACHE_DIR}")
    return 0


def _check_bench_outputs(args) -> None:
    """Before a benchmark runs (minutes to hours): its output files can be written, and
    matplotlib is there for ``--plot``."""
    if args.json:
        check_writable(args.json, (".jsonl", ".json"), "--json")
    if args.markdown:
        check_writable(args.markdown, (".md", ".txt"), "--markdown")
    if getattr(args, "plot", None):
        check_writable(args.plot, (".png",), "--plot")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError("--plot needs matplotlib: pip install 'dlap[plot]'") from None


def _write_text(path: str, text: str) -> None:
    write_file(path, lambda f: f.write((text + "\n").encode()))


def cmd_bench(args) -> int:
    _check_bench_outputs(args)
    suite = {"batch": _bench_batch, "dgs": _bench_dgs, "deadlines": _bench_deadlines,
             "points": _bench_points, "first-calls": _bench_first_calls, "progress": _bench_progress}.get(
                 args.suite, _bench_grid)
    return suite(args)


def _bench_grid(args) -> int:
    from .bench import grid as bench

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
        cases, solvers, repeat=args.repeat or REPEAT, seed=args.seed, out=args.json,
        timings=("host", "device") if gpu else ("host",), peer_budget=args.peer_budget, m_ratio=args.m_ratio,
    )
    _print_table(args, bench.table(records))
    if args.plot:
        write_file(args.plot, lambda f: bench.plot(records, f))
    return 0 if all(r["agrees"] for r in records) else 1


def _print_table(args, text: str) -> None:
    print()
    print(text)
    if args.markdown:
        _write_text(args.markdown, text)
    if args.json:
        print(f"\nJSON records appended to {args.json}")


def _bench_first_calls(args) -> int:
    from .bench import first_calls

    records = first_calls.run(repeat=args.repeat or REPEAT, out=args.json)
    _print_table(args, first_calls.table(records))
    return 0


def _bench_progress(args) -> int:
    from .bench import progress

    records = progress.run(device=args.device, out=args.json)
    _print_table(args, progress.table(records))
    return 0


def _bench_batch(args) -> int:
    from .bench import batch

    records = batch.run(args.solvers or batch.SOLVERS[args.device], repeat=args.repeat or REPEAT, seed=args.seed, out=args.json)
    _print_table(args, batch.table(records))
    return 0 if all(r["agrees"] for r in records) else 1


def _bench_dgs(args) -> int:
    from .bench import dgs

    records = dgs.run(sizes=args.n, families=args.families, device=args.device, seed=args.seed, out=args.json)
    _print_table(args, dgs.table(records))
    return 0


def _bench_points(args) -> int:
    from .bench import points

    records = points.run(sizes=args.n, device=args.device, seed=args.seed, out=args.json,
                         families=args.families or ("uniform",), m_ratio=args.m_ratio, repeat=args.repeat or 1)
    _print_table(args, points.table(records))
    return 0 if all(r.get("optimal", True) and r.get("same_optimum", True) for r in records) else 1


def _bench_deadlines(args) -> int:
    from .bench import deadlines

    records = deadlines.run(repeat=args.repeat or REPEAT, out=args.json)
    _print_table(args, deadlines.table(records))
    return 0


def parser() -> argparse.ArgumentParser:
    # no abbreviations: "--m" must not be taken for --method or --maximize
    top = argparse.ArgumentParser(prog="dlap", description="Exact linear assignment (Date & Nagi 2016).",
                                  allow_abbrev=False)
    top.add_argument("--version", action="version", version=f"dlap {__version__}")
    sub = top.add_subparsers(dest="command", required=True)

    def command(name: str, text: str):
        return sub.add_parser(name, help=text, description=text, allow_abbrev=False)

    def generated_options(p, n_required=False):
        # (solve's defaults are filled in by _generated, which refuses them beside an input file)
        p.add_argument("--family", default=None if not n_required else "uniform", choices=list(generate.FAMILIES),
                       help="uniform-counter: uniform's costs from a counter-based hash; it, geometric, "
                            "geometric-3d and geometric-benefit are generated on the workers under "
                            "--workers/--scheduler (default uniform)")
        p.add_argument("--n", type=int, required=n_required, default=None, help="rows (default 1000)")
        p.add_argument("--m", type=int, default=None, help="columns (default: n)")
        p.add_argument("--f", type=float, default=None,
                       help="uniform: costs in [0, f * n) (default 1); ties: the number of values (default 3)")
        p.add_argument("--seed", type=int, default=None if not n_required else 0, help="(default 0)")

    p = command("solve", "solve a matrix from a file or a generated one")
    p.add_argument("input", nargs="?", help=".npy, .csv or .zarr matrix (default: generate one)")
    generated_options(p)
    p.add_argument("--method", default="auto", choices=METHODS)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    p.add_argument("--maximize", action="store_true")
    p.add_argument("--time-limit", type=float, help="method dgs: stop after this many seconds")
    p.add_argument("--start", choices=STARTS, help="method dgs: start assignment (default greedy)")
    p.add_argument("--switching", choices=SWITCHINGS, help="method dgs (default parallel)")
    p.add_argument("--out", help="write the assignment and duals: .npz, .csv (row,col) or .json")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.add_argument("--scheduler", help="solve on this Dask cluster (the Dask engine; method auto, classical, hybrid, scaling or tree)")
    p.add_argument("--workers", type=int, help="ranks: that many workers (starts a local cluster without --scheduler)")
    p.add_argument("--protocol", default="tcp", help="local cluster's protocol: tcp, or ucx (distributed-ucxx)")
    p.set_defaults(run=cmd_solve)

    p = command("generate", "write a generated instance to .npy, .csv or .zarr")
    generated_options(p, n_required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_generate)

    p = command("demo", "generate and solve a LAP, print objective, time, check")
    p.add_argument("--n", type=int, default=DEMO_N)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_demo)

    p = command("warmup", "compile every solver's kernels into the disk caches (for images, CI and clusters)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"),
                   help="auto: the CPU's, and the GPU's where one is visible")
    p.add_argument("--quiet", action="store_true", help="print nothing")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="processes that compile the CPU's kernels side by side, each kernel once (default 1)")
    p.set_defaults(run=cmd_warmup)

    p = command("bench", "dlap and its peers side by side on the same instances")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: the anchors grid plus geometric and float instances, GPU solvers "
                        "timed from the host and from the GPU, against lap and scipy")
    p.add_argument("--suite", choices=("grid", "hard", "batch", "dgs", "deadlines", "points", "first-calls",
                                       "progress"),
                   default="grid",
                   help="grid: families x sizes against lap and scipy; hard: structured costs (geometric, "
                        "geometric-int, -3d, -disjoint, -benefit, machol-wien, ties:4) at n = 500 to 4000 on the "
                        "CPU, 1000 to 20000 on the GPU, against scipy, lap and lapx; batch: dlap.solve_batch "
                        "against scipy (loop and thread pool), lapx and fastlap on five batches; dgs: Deep Greedy "
                        "Switching against dlap's exact solver (gaps, deadlines); deadlines: how far past their "
                        "deadlines DGS solves end, and the thread team, idle and on busy cores; points: "
                        "dlap.solve_points on point sets (--families: uniform, uniform-3d, clustered, shifted, "
                        "embeddings, each with :metric if not its default, e.g. uniform:sqeuclidean; default "
                        "uniform, n = 10000 100000) beside the dense engine; "
                        "first-calls: a fresh process's first solves on the CPU (cached and empty kernel cache) "
                        "against scipy's; progress: how far the progress estimate and its ETA stray from the "
                        "share of the solve's time gone by (five solves of seconds each)")
    p.add_argument("--n", type=int, nargs="+", help="sizes (default 1000 2000 4000; dgs: 1000 to 20000)")
    p.add_argument("--families", nargs="+",
                   help="family[:f], e.g. uniform:0.1 geometric machol-wien ties (default uniform:1 uniform:10 float); "
                        "dgs: geometric-benefit geometric uniform")
    p.add_argument("--m-ratio", type=float, default=1.0, metavar="RATIO",
                   help="points: the second set has round(n * RATIO) points; grid, hard: the matrices have "
                        "round(n * RATIO) columns (default 1: square)")
    p.add_argument("--solvers", nargs="+",
                   help="dlap, dlap-tree, dlap-classical, dlap-hybrid, dlap-scaling, dlap-gpu, dlap-gpu-tree, "
                        "dlap-gpu-classical, dlap-gpu-hybrid, dlap-gpu-scaling, scipy, lap, lapx "
                        "(lapx from the folder DLAP_LAPX_DIR when lap is installed too)")
    p.add_argument("--repeat", type=int, default=None,
                   help="timed runs of each case, their median reported (default 3; points: 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peer-budget", type=float, default=60.0,
                   help="skip a CPU solver where its extrapolated time passes this many seconds")
    p.add_argument("--json", help="append JSON records to this file")
    p.add_argument("--markdown", help="write the summary table to this file")
    p.add_argument("--plot", help="write a PNG plot of the times to this file")
    p.set_defaults(run=cmd_bench)
    return top


def _log_to_stderr() -> None:
    """The ``dlap`` log's warnings on stderr as ``dlap: ...`` lines (a library leaves that to its
    caller; the command is the caller)."""
    log = logging.getLogger("dlap")
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("dlap: %(message)s"))
        log.addHandler(handler)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (not when it was made)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


class Terminated(BaseException):
    """SIGTERM, raised where the command runs so that what it was writing is removed."""


#: set by the SIGINT and SIGTERM handlers of :func:`main`: the command ends as interrupted or
#: terminated, whatever error it then ended in (a library can put an error of its own in the place
#: of the handler's exception: numpy's ndarray.tofile, where the signal came during its check of
#: the file, a TypeError)
_ARRIVED = {signal.SIGINT: threading.Event(), signal.SIGTERM: threading.Event()}


def _interrupt(signum, frame):
    _ARRIVED[signal.SIGINT].set()
    raise KeyboardInterrupt


def _terminate(signum, frame):
    _ARRIVED[signal.SIGTERM].set()
    raise Terminated()


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    _log_to_stderr()
    for arrived in _ARRIVED.values():  # (before the handlers: a signal that comes next is kept)
        arrived.clear()
    handlers = {signal.SIGINT: _interrupt, signal.SIGTERM: _terminate}
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        return args.run(args)
    except (KeyboardInterrupt, Terminated, Exception) as e:
        if isinstance(e, Terminated) or _ARRIVED[signal.SIGTERM].is_set():
            print("dlap: terminated", file=sys.stderr)
            return 128 + signal.SIGTERM
        if isinstance(e, KeyboardInterrupt) or _ARRIVED[signal.SIGINT].is_set():
            print("dlap: interrupted", file=sys.stderr)
            return 130
        if not isinstance(e, USER_ERRORS) or os.environ.get("DLAP_TRACEBACK"):
            raise
        print(f"dlap: {_one_line(e)}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # (None: a handler not set from Python, which cannot be restored)
                signal.signal(sig, handler)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
