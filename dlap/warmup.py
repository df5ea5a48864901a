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


def _matrix_paths(device: str, dtype) -> list[tuple[str, Callable[[], object]]]:
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
    for method in (m for m in METHODS if m != "dgs"):
        for k, variant in enumerate(variants):
            if method == "sparse" and ("init" in variant or "roots" in variant):
                continue  # options of the Hungarian methods
            options = {key: value for key, value in variant.items() if key != "shape"}
            cost = _structured(dtype, *variant["shape"], seed=k)
            paths.append((f"{method} {cost.shape[0]}x{cost.shape[1]} {options}", solved(cost, method=method, **options)))
    stacked = np.stack([_structured(dtype, SIDE // 4, SIDE // 4, seed) for seed in range(4)])
    ragged = [_structured(dtype, *shape, seed=3) for shape in ((8, 12), (12, 8), (10, 10))]
    paths.append(("batch", lambda: solve_batch(stacked, device=device, duals=True).verify(0, stacked[0])))
    paths.append(("batch ragged, maximised", lambda: solve_batch(ragged, device=device, maximize=True)))
    paths.append(("dgs", lambda: load_dgs_kernels(dtype, device)))
    cost = _structured(dtype, SIDE, SIDE, seed=5)
    paths += [(f"dgs {start} {switching}", solved(cost, method="dgs", start=start, switching=switching))
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


def warmup(device: Device = "auto", echo: Callable[[str], None] | None = None) -> float:
    """Compile (or load from the disk cache) the kernels of every solver on ``device`` ("cpu",
    "gpu", or "auto": the CPU, and the GPU too when one is visible); returns the seconds taken.
    ``echo`` receives a line per path."""
    from .device import gpu_available

    check_choice("device", device, DEVICES)
    devices = ["cpu", "gpu"] if device == "auto" and gpu_available() else ["cpu" if device == "auto" else device]
    start = time.perf_counter()
    for where in devices:
        paths = [path for dtype in WORKING_DTYPES for path in _matrix_paths(where, dtype)] + _point_paths(where)
        if where == "cpu":
            paths += _dask_rank_paths()
        paths.append(("large solves", lambda where=where: for_large_solves(where)))
        for name, run in paths:
            began = time.perf_counter()
            run()
            if echo:
                echo(f"{where} {name}: {time.perf_counter() - began:.2f} s")
    return time.perf_counter() - start


def for_large_solves(device: str = "cpu", largest: int | None = None) -> None:
    """What solves of small problems leave for large ones to compile: the thread team's twins of
    the CPU kernels compiled so far (small solves run on one thread; the GPU's solves of points
    search on the host too), the sparse core's auction and searches on the team, and on the CPU
    ε-scaling's half-width copies of float64 and int64 matrices (made from 2**21 entries). The
    benchmarks call it after their small warm-ups, with ``largest``, the most entries (or pairs
    of points) of a problem they will solve: below :data:`dlap.threads.SERIAL_MAX_ENTRIES` every
    solve runs on one thread and nothing is left to compile."""
    from .api import solve
    from .backends.base import NARROWER
    from .backends.cpu.backend import NARROW_MIN_ENTRIES
    from .backends.cpu.numba_setup import compile_team_twins
    from .backends.cpu.points import compile_team_kernels
    from .threads import SERIAL_MAX_ENTRIES

    if largest is not None and largest < SERIAL_MAX_ENTRIES:
        return
    if device == "cpu":
        side = math.isqrt(NARROW_MIN_ENTRIES - 1) + 1
        for dtype in NARROWER:
            solve(_structured(dtype, side, side, seed=6), method="scaling", device="cpu")
    compile_team_twins()
    compile_team_kernels()
