"""Compile every solver's kernels ahead of the first real solve: for images, CI and clusters.

A fresh install compiles dlap's CPU kernels (Numba) on their first call, about 2 to 5 s a path
on a 2-core machine, and the GPU's (NVRTC) likewise; both land in a disk cache (Numba's:
:func:`dlap.backends.cpu.numba_setup.cache_dir`; CuPy's: ``~/.cupy/kernel_cache``), so later
processes only load them. :func:`warmup` runs tiny solves that reach every phase of every
method, for each matrix dtype a solver reads, plus batches, DGS, point sets, the certificate and
a Dask rank's solve of each method (where the ``distributed`` extra is installed), then what
large solves add (:func:`for_large_solves`), so that the cache holds them all; ``dlap warmup``
runs it from the command line. Run it once where an image is built, or before a test suite.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable

import numpy as np

from .options import DEVICES, INITS, METHODS, ROOTS, STARTS, SWITCHINGS, Device, check_choice

#: the matrix dtypes a solver reads (:func:`dlap.problem.working_dtype`), widest first
WORKING_DTYPES = ("float64", "int64", "float32", "int32")
#: the tiny problems' size: large enough that no start solves them, so every phase runs
SIDE = 48


def _structured(dtype, rows: int, cols: int, seed: int) -> np.ndarray:
    """Squared distances between two point sets, scaled to integers for integer dtypes: the
    costs on which the scaling engine runs several ε phases."""
    rng = np.random.default_rng(seed)
    a, b = rng.random((rows, 2)), rng.random((cols, 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return (cost * 1000).astype(dtype) if np.dtype(dtype).kind == "i" else cost.astype(dtype)


def _crowded(dtype, n: int) -> np.ndarray:
    """Every row's cheapest columns the same ones (column j costs about 4 j in every row): the
    sparse engine's searches reach rows the core gives too few columns, which it joins to free
    columns (``dlap.points.core._to_free_columns``)."""
    rng = np.random.default_rng(0)
    return (np.arange(n)[None, :] * 4 + rng.integers(0, 3, (n, 1))).astype(dtype)


def _matrix_paths(device: str, dtype, dense: bool = True, sparse: bool = True) -> list[tuple[str, Callable[[], object]]]:
    """The paths of matrices of ``dtype``: the dense methods', batches' and DGS's (``dense``), the
    sparse engine's (``sparse``)."""
    from .api import solve
    from .batch import solve_batch
    from .dgs.loading import load_dgs_kernels

    def solved(cost, **options):
        return lambda: solve(cost, device=device, **options).verify(cost)

    square, wide, tall = (SIDE, SIDE), (SIDE - 8, SIDE), (SIDE, SIDE - 8)
    variants = [{"shape": shape} for shape in (square, wide, tall)]
    variants += [{"shape": square, "maximize": True}]
    variants += [{"shape": shape, "init": init} for init in INITS for shape in (square, wide)]
    variants += [{"shape": square, "roots": roots} for roots in ROOTS]
    paths = []
    for method in (m for m in METHODS if m != "dgs" and (dense if m != "sparse" else sparse)):
        for k, variant in enumerate(variants):
            if method == "sparse" and ("init" in variant or "roots" in variant):
                continue  # options of the Hungarian methods
            options = {key: value for key, value in variant.items() if key != "shape"}
            cost = _structured(dtype, *variant["shape"], seed=k)
            paths.append((f"{dtype} {method} {cost.shape[0]}x{cost.shape[1]} {options}",
                          solved(cost, method=method, **options)))
    if sparse:
        crowded = _crowded(dtype, 4 * SIDE)
        paths.append((f"{dtype} sparse crowded {crowded.shape[0]}x{crowded.shape[1]}", solved(crowded, method="sparse")))
    if not dense:
        return paths
    stacked = np.stack([_structured(dtype, SIDE // 4, SIDE // 4, seed) for seed in range(4)])
    ragged = [_structured(dtype, *shape, seed=3) for shape in ((8, 12), (12, 8), (10, 10))]
    paths.append((f"{dtype} batch", lambda: solve_batch(stacked, device=device, duals=True).verify(0, stacked[0])))
    paths.append((f"{dtype} batch ragged, maximised", lambda: solve_batch(ragged, device=device, maximize=True)))
    paths.append((f"{dtype} dgs", lambda: load_dgs_kernels(dtype, device)))
    cost = _structured(dtype, SIDE, SIDE, seed=5)
    paths += [(f"{dtype} dgs {start} {switching}", solved(cost, method="dgs", start=start, switching=switching))
              for start in STARTS for switching in SWITCHINGS
              if device == "cpu" or switching == "parallel"]  # (sequential switching: the CPU's only)
    return paths


#: the Dask engine's rank methods (``auto``: auto's split, the method its variant)
RANK_METHODS = (("classical", False), ("tree", False), ("hybrid", False), ("scaling", False), ("tree", True))


def _dask_rank_paths() -> list[tuple[str, Callable[[], object]]]:
    """A CPU rank's solve of each method and dtype, alone in this process (where the
    ``distributed`` extra is installed): its kernels beyond dlap.solve's (rounds of bids, slab
    offers, the certificate over slabs)."""
    if importlib.util.find_spec("distributed") is None:
        return []

    def solved(dtype, method, auto):
        from .distributed.rank.engine import solve_alone_here

        return lambda: solve_alone_here(_structured(dtype, SIDE, SIDE, seed=7), method, auto)

    return [(f"dask rank {'auto ' if auto else ''}{method} {dtype}", solved(dtype, method, auto))
            for dtype in WORKING_DTYPES for method, auto in RANK_METHODS]


def _point_paths(device: str) -> list[tuple[str, Callable[[], object]]]:
    from .points import solve_points
    from .points.screen import SCREEN_MIN_DIM
    from .points.search import TREE_MAX_DIM

    rng = np.random.default_rng(0)
    paths = []
    for dims in (2, TREE_MAX_DIM + 1, SCREEN_MIN_DIM):  # k-d trees, a scan of every pair, matrix products
        a, b = rng.random((4 * SIDE, dims)), rng.random((3 * SIDE, dims))
        for x, y in ((a, a[::-1]), (a, b), (b, a), (a.astype(np.float32), b.astype(np.float32))):
            paths.append((f"points d={dims} {len(x)}x{len(y)} {x.dtype}",
                          lambda x=x, y=y: solve_points(x, y, device=device).verify()))
    return paths


#: the paths in groups, in the order one process runs them and ``jobs`` processes take them in
#: turn on the CPU (:func:`warmup`): the widest dtype's matrix paths first (they compile the sparse
#: core), the other dtypes' dense paths beside them, then what loads the core (point sets, the
#: other dtypes' sparse paths, the core's thread-team kernels) and the ranks' paths (the CPU's)
PATH_GROUPS = (*WORKING_DTYPES, "points", "sparse", "core team", "ranks")


def _group_paths(group: str, device: str) -> list[tuple[str, Callable[[], object]]]:
    """The paths of one of :data:`PATH_GROUPS` (on ``device``; the ranks' are the CPU's)."""
    if group == "core team":
        from .backends.cpu.points import compile_team_kernels

        return [("sparse core on a thread team", compile_team_kernels)]
    if group == "points":
        return _point_paths(device)
    if group == "ranks":
        return _dask_rank_paths() if device == "cpu" else []
    if group == "sparse":
        return [path for dtype in WORKING_DTYPES[1:] for path in _matrix_paths(device, dtype, dense=False)]
    return _matrix_paths(device, group, sparse=group == WORKING_DTYPES[0])


def _run(device: str, paths) -> list[str]:
    """Run ``paths``; a line for each (its name and seconds)."""
    lines = []
    for name, run in paths:
        began = time.perf_counter()
        run()
        lines.append(f"{device} {name}: {time.perf_counter() - began:.2f} s")
    return lines


def _run_group(device: str, group: str) -> list[str]:
    return _run(device, _group_paths(group, device))


def _run_share_of_large_solves(device: str, share: int, shares: int) -> list[str]:
    """Load every small path's kernels (compiled by then: this process's signatures), then
    compile share ``share`` of ``shares`` of what large solves add (:func:`for_large_solves`)."""
    _run(device, [path for group in PATH_GROUPS for path in _group_paths(group, device)])
    return _run(device, [(f"large solves {share + 1}/{shares}",
                          lambda: for_large_solves(device, share=(share, shares)))])


def warmup(device: Device = "auto", echo: Callable[[str], None] | None = None, jobs: int = 1) -> float:
    """Compile (or load from the disk cache) the kernels of every solver on ``device`` ("cpu",
    "gpu", or "auto": the CPU, and the GPU too when one is visible); returns the seconds taken.
    ``echo`` receives a line per path. ``jobs`` processes compile the CPU's kernels side by side
    (spawned; each kernel in one of them): the groups of :data:`PATH_GROUPS` in turn, then each a
    share of what large solves add; the GPU's compile in this process."""
    from .device import gpu_available

    check_choice("device", device, DEVICES)
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    devices = ["cpu", "gpu"] if device == "auto" and gpu_available() else ["cpu" if device == "auto" else device]
    echo = echo or (lambda line: None)
    start = time.perf_counter()
    for where in devices:
        if where == "cpu" and jobs > 1:
            _warm_in_processes(where, jobs, echo)
            continue
        for group in PATH_GROUPS:
            for line in _run_group(where, group):
                echo(line)
        for line in _run(where, [("large solves", lambda where=where: for_large_solves(where))]):
            echo(line)
    return time.perf_counter() - start


def _warm_in_processes(device: str, jobs: int, echo: Callable[[str], None]) -> None:
    """:func:`warmup`'s paths on ``device`` in ``jobs`` spawned processes (a process that has
    started Numba's thread team cannot fork safely)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for lines in pool.map(_run_group, [device] * len(PATH_GROUPS), PATH_GROUPS):
            for line in lines:
                echo(line)
        # submitted only once every group has run: each share loads the groups' kernels, compiled by then
        for lines in pool.map(_run_share_of_large_solves, [device] * jobs, range(jobs), [jobs] * jobs):
            for line in lines:
                echo(line)


def for_large_solves(device: str = "cpu", largest: int | None = None, share: tuple[int, int] = (0, 1)) -> None:
    """What solves of small problems leave for large ones to compile: the thread team's twins of
    the CPU kernels compiled so far (small solves run on one thread; the GPU's solves of points
    search on the host too), the sparse core's auction and searches on the team, and on the CPU
    ε-scaling's half-width copies of float64 and int64 matrices (made from 2**21 entries). The
    benchmarks call it after their small warm-ups, with ``largest``, the most entries (or pairs
    of points) of a problem they will solve: below :data:`dlap.threads.SERIAL_MAX_ENTRIES` every
    solve runs on one thread and nothing is left to compile. ``share`` ``(i, n)``: the i-th of n
    disjoint parts of it (for n processes, :func:`warmup`'s ``jobs``)."""
    from .api import solve
    from .backends.base import NARROWER
    from .backends.cpu.backend import NARROW_MIN_ENTRIES
    from .backends.cpu.numba_setup import compile_team_twins
    from .backends.cpu.points import compile_team_kernels
    from .threads import SERIAL_MAX_ENTRIES

    if largest is not None and largest < SERIAL_MAX_ENTRIES:
        return
    part, parts = share
    compile_team_twins(share=share)
    if part == parts - 1:
        compile_team_kernels()
    if device == "cpu" and part == 0:  # after the twins, so that these solves load those compiled
        side = math.isqrt(NARROW_MIN_ENTRIES - 1) + 1
        for dtype in NARROWER:
            solve(_structured(dtype, side, side, seed=6), method="scaling", device="cpu")
