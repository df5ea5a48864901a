"""Placement: the cost matrix as one slab per rank, in its worker's memory, never through the client.

The input is a dask array (NumPy or CuPy chunks, e.g. from :func:`dlap.generate.uniform_dask`,
whose chunks are generated on the workers), a Zarr array, or the path of a Zarr store. Rank r's
slab (rows for the classical variant, columns for the tree variant, section 5 of Date & Nagi) is
computed by tasks pinned to rank r's worker, so its chunks are generated or read where they will
live (a Zarr slab is read straight into GPU memory through Zarr's GPU buffers on a GPU worker),
then normalised there (:func:`dlap.distributed.engine.prepare_slab`) and kept as one future.

A dask array the caller has persisted already lives on the cluster. Then the ranks follow the
data: :func:`plan_ranks` gives rank r to the worker that holds most of slab r's bytes (a small
assignment problem, solved by dlap itself), and each chunk's share of a slab is cut where the chunk
lives, so only that share crosses the network (over NVLink with ``protocol="ucx"``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..problem import MSG_NOT_2D, offset_for_range, working_dtype
from .engine import prepare_slab


@dataclass(frozen=True)
class Source:
    """Where the matrix comes from: a dask array, or a Zarr array read region by region."""

    shape: tuple[int, int]
    dtype: np.dtype
    array: object  # dask.array.Array or zarr.Array
    is_zarr: bool


def as_source(cost) -> Source:
    """Accept a dask array, a Zarr array or a Zarr path, with scipy's errors for bad input."""
    import dask.array as da

    if isinstance(cost, (str, os.PathLike)):
        from ..files import open_store

        cost = open_store(os.fspath(cost))
    if type(cost).__module__.split(".")[0] == "zarr":
        array, is_zarr = cost, True
    elif isinstance(cost, da.Array):
        array, is_zarr = cost, False
    else:
        raise TypeError(
            "dlap.distributed.solve takes a dask array, a Zarr array or a Zarr path; "
            f"got {type(cost).__name__} (use dlap.solve for in-memory matrices)"
        )
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(
            f"Cannot cast array data from dtype({str(dtype)!r}) to dtype('float64') according to the rule 'safe'"
        )
    if len(array.shape) != 2:
        raise ValueError(MSG_NOT_2D.format(ndim=len(array.shape)))
    if any(math.isnan(extent) for extent in array.shape):
        raise ValueError(
            f"the dask array's chunk sizes are unknown (shape {array.shape}, e.g. after boolean "
            "indexing); call cost.compute_chunk_sizes() first"
        )
    return Source(shape=tuple(int(s) for s in array.shape), dtype=dtype, array=array, is_zarr=is_zarr)


def source_offset(client, source: Source, maximize: bool) -> int:
    """:func:`dlap.problem.integer_offset` of the whole matrix (ValueError outside the integer
    range solved exactly): for 8-byte integers only, from its minimum and maximum computed on the
    workers (one pass over the matrix; no other dtype can leave the range)."""
    if source.dtype.kind not in "iu" or source.dtype.itemsize < 8:
        return 0
    lo, hi = source_range(client, source)
    return offset_for_range(int(lo), int(hi), maximize)


def source_range(client, source: Source) -> tuple:
    """The matrix's smallest and largest entries, computed on the workers (one pass)."""
    import dask.array as da

    array = da.from_zarr(source.array) if source.is_zarr else source.array
    lo, hi = client.compute([array.min(), array.max()], sync=True)
    return lo, hi


def slab_bounds(source: Source, axis: int, n_ranks: int) -> tuple[int, ...]:
    """Slab boundaries along ``axis`` of the caller's matrix: the dask array's own chunk
    boundaries when it has one chunk per rank there (no data moves), else an even split."""
    extent = source.shape[axis]
    if not source.is_zarr:
        chunks = source.array.chunks
        if len(chunks[axis]) == n_ranks and len(chunks[1 - axis]) == 1:
            return tuple(int(b) for b in chunk_edges(source)[axis])
    return tuple(int(b) for b in np.linspace(0, extent, n_ranks + 1).round().astype(int))


def chunk_holders(client, source: Source) -> dict[tuple[int, int], str] | None:
    """For a dask array the caller has persisted (its graph holds a future for every chunk): the
    worker that holds each chunk, by chunk index. None for any other input (generated, derived or
    Zarr), even where its chunks' keys are in memory: held by futures the caller may be dropping
    (a persisted copy of the same array going out of scope), they can be forgotten while the
    solve reads them, which cancelled the solve (issue 14)."""
    if source.is_zarr:
        return None
    from dask.core import flatten
    from distributed import Future

    keys = list(flatten(source.array.__dask_keys__()))
    graph = source.array.__dask_graph__()
    if not all(isinstance(graph.get(key), Future) for key in keys):
        return None
    who = client.sync(client.scheduler.who_has, keys=keys)
    if not all(who.get(key) for key in keys):
        return None
    return {tuple(key[1:]): who[key][0] for key in keys}


def local_bytes(source: Source, holders, axis: int, bounds, candidates) -> np.ndarray:
    """``held[r, w]``: the bytes of rank r's slab (``bounds[r]:bounds[r+1]`` along ``axis``) that
    candidate worker w already holds."""
    column = {w: k for k, w in enumerate(candidates)}
    held = np.zeros((len(bounds) - 1, len(candidates)), dtype=np.int64)
    edges = chunk_edges(source)
    itemsize = source.dtype.itemsize
    for index, worker in holders.items():
        if worker not in column:
            continue
        lo, hi = edges[axis][index[axis]], edges[axis][index[axis] + 1]
        across = source.array.chunks[1 - axis][index[1 - axis]]
        for r in range(len(bounds) - 1):
            overlap = min(hi, bounds[r + 1]) - max(lo, bounds[r])
            if overlap > 0:
                held[r, column[worker]] += int(overlap) * int(across) * itemsize
    return held


@dataclass(frozen=True)
class RankPlan:
    """Which worker runs each rank, and what placement must move to get the slabs there."""

    workers: list[str]
    holders: dict[tuple[int, int], str] | None  # a persisted input's chunk -> worker, else None
    moved_bytes: int | None  # bytes that cross between workers (None: not known, e.g. generated)


def plan_ranks(client, source: Source, axis: int, bounds, candidates, keep_order: bool) -> RankPlan:
    """Rank r runs on ``candidates[r]`` unless the input is persisted and ``keep_order`` is off:
    then the ranks go to the workers that maximise the bytes already in place (an assignment of
    ranks to workers, solved exactly by :func:`dlap.linear_sum_assignment`)."""
    n_ranks = len(bounds) - 1
    holders = chunk_holders(client, source)
    if holders is None:
        return RankPlan(list(candidates[:n_ranks]), holders=None, moved_bytes=None)
    held = local_bytes(source, holders, axis, bounds, candidates)
    if keep_order:
        chosen = np.arange(n_ranks)
    else:
        from ..api import linear_sum_assignment

        _, chosen = linear_sum_assignment(held, maximize=True)
    total = int(np.prod(source.shape)) * source.dtype.itemsize
    return RankPlan([candidates[w] for w in chosen], holders=holders,
                    moved_bytes=total - int(held[np.arange(n_ranks), chosen].sum()))


def chunk_edges(source: Source) -> list[np.ndarray]:
    """The dask array's chunk boundaries along each axis."""
    return [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in source.array.chunks]


def cut(chunk, region: tuple[slice, slice]):
    """Piece task: a held chunk's share of one rank's slab, cut on the worker that holds it."""
    return chunk[region]


def cut_where_held(client, source: Source, holders, axis: int, lo: int, hi: int, name: str) -> list[list]:
    """Futures of the pieces of the slab ``lo:hi`` along ``axis`` of a persisted array, as rows
    of pieces. Each ``cut`` task is pinned to the worker holding its chunk (left free, the
    scheduler moves a whole chunk to an idle worker rather than wait for a busy holder). The keys
    are this solve's own: keys derived from the caller's collection (dask's ``getitem-...``)
    could meet an earlier task of the same key and inherit its worker restrictions."""
    from distributed import Future

    edges = chunk_edges(source)[axis]
    grid = []
    for k in range(len(edges) - 1):
        if edges[k] >= hi or edges[k + 1] <= lo:
            continue
        local = slice(max(lo, edges[k]) - edges[k], min(hi, edges[k + 1]) - edges[k])
        region = (local, slice(None)) if axis == 0 else (slice(None), local)
        line = []
        for m in range(len(source.array.chunks[1 - axis])):
            index = (k, m) if axis == 0 else (m, k)
            line.append(client.submit(cut, Future((source.array.name, *index), client), region,
                                      key=f"{name}-{index[0]}-{index[1]}", workers=[holders[index]],
                                      allow_other_workers=False))
        grid.append(line)
    return grid if axis == 0 else [list(row) for row in zip(*grid, strict=True)]


def assemble(grid, gpu: bool):
    """Rank task: one slab from the pieces of the chunks it overlaps (a nested list, rows of
    pieces), each cut where its chunk lives and moved here."""
    if len(grid) == 1 and len(grid[0]) == 1:
        return grid[0][0]
    xp = np
    if gpu or any(type(p).__module__.split(".")[0] == "cupy" for row in grid for p in row):
        import cupy as xp
    return xp.concatenate([xp.concatenate([xp.asarray(p) for p in row], axis=1) for row in grid], axis=0)


def read_zarr_region(array, region: tuple[slice, slice], gpu: bool):
    """Rank task: read one region of a Zarr array, into GPU memory on a GPU worker."""
    if not gpu:
        return array[region]
    import cupy
    import zarr

    with zarr.config.enable_gpu():
        block = array[region]
    return block if isinstance(block, cupy.ndarray) else cupy.asarray(block)


def make_slab(block, gpu: bool, maximize: bool, transposed: bool, dtype, offset: int):
    """Rank task: the block on the worker's GPU when the solve runs on GPUs (a NumPy chunk is
    copied there), in host memory when it runs on CPUs (a CuPy chunk is copied here), in the
    solved form (:func:`~dlap.distributed.engine.prepare_slab`)."""
    if gpu and isinstance(block, np.ndarray):
        import cupy

        block = cupy.asarray(block)
    elif not gpu and not isinstance(block, np.ndarray):
        block = block.get()
    return prepare_slab(block, maximize, transposed, dtype, offset)


def place_slabs(client, source: Source, plan: RankPlan, *, axis: int, bounds, transposed: bool, maximize: bool,
                gpu: bool, solve_id: str, offset: int):
    """One future per rank: its slab in the solved form, on its worker (pinned, computed there;
    for a persisted input, the pieces are cut where their chunks live and gathered there)."""
    dtype = working_dtype(source.dtype, maximize)
    slabs = []
    for rank, worker in enumerate(plan.workers):
        lo, hi = bounds[rank], bounds[rank + 1]
        region = (slice(lo, hi), slice(None)) if axis == 0 else (slice(None), slice(lo, hi))
        pin = {"workers": [worker], "allow_other_workers": False}
        if source.is_zarr:
            block = client.submit(read_zarr_region, source.array, region, gpu, key=f"dlap-read-zarr-{solve_id}-{rank}", **pin)
        elif plan.holders is not None:
            grid = cut_where_held(client, source, plan.holders, axis, lo, hi, f"dlap-cut-{solve_id}-{rank}")
            block = client.submit(assemble, grid, gpu, key=f"dlap-gather-{solve_id}-{rank}", **pin)
        else:
            pieces = source.array[region].to_delayed().ravel()
            part = pieces[0] if len(pieces) == 1 else source.array[region]
            block = client.compute(part, **pin)
        slabs.append(client.submit(
            make_slab, block, gpu, maximize, transposed, dtype, offset, key=f"dlap-slab-{solve_id}-{rank}", **pin
        ))
    return slabs
