"""The cost matrix a distributed solve reads, and which worker each rank runs on.

The input is a dask array (NumPy or CuPy chunks, e.g. from :func:`dlap.generate.uniform_dask`,
whose chunks are generated on the workers), a Zarr array, or the path of a Zarr store
(:func:`as_source`). How each rank's slab gets to its worker is :mod:`~.placement`'s.

A dask array the caller has persisted already lives on the cluster. Then the ranks follow the
data: :func:`plan_ranks` gives rank r to the worker that holds most of slab r's bytes (a small
assignment problem, solved by dlap itself).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..problem import MSG_NOT_2D, offset_for_range


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


def graph_limit() -> int:
    """The data a graph dlap sends may carry: half of what Dask warns of (as slow to send and to
    schedule), for pickle's overhead."""
    import dask
    from dask.utils import parse_bytes

    return parse_bytes(dask.config.get("distributed.admin.large-graph-warning-threshold")) // 2


def source_range(client, source: Source) -> tuple:
    """The matrix's smallest and largest entries, computed on the workers (one pass), or here
    where the array's graph holds its data (an in-memory array: sending it would be a large graph)."""
    import dask
    import dask.array as da
    from dask.sizeof import sizeof

    array = da.from_zarr(source.array) if source.is_zarr else source.array
    if sizeof(dict(array.__dask_graph__())) > graph_limit():
        return dask.compute(array.min(), array.max(), scheduler="threads")
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
    return even_bounds(extent, n_ranks)


def even_bounds(extent: int, parts: int) -> tuple[int, ...]:
    """Boundaries of ``parts`` blocks of ``[0, extent)`` as even as can be: block r is
    ``[bounds[r], bounds[r + 1])``."""
    return tuple(int(b) for b in np.linspace(0, extent, parts + 1).round().astype(int))


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


def made_bytes(source: Source, axis: int, bounds) -> np.ndarray:
    """The bytes of a matrix that is not persisted that placement computes or reads on each
    rank's worker for slabs ``bounds`` along ``axis``: a chunk of a dask array (generated,
    derived) or of a Zarr array (decoded whole) is made by each rank whose slab it overlaps,
    which keeps its share; so with column chunks of a row split every rank makes the whole
    matrix. (A persisted chunk is only cut: :func:`plan_ranks` counts what moves.)"""
    edges, bounds = chunk_edges(source)[axis], np.asarray(bounds)
    # (chunk band along `axis`, rank): whether the band overlaps the rank's slab
    overlaps = np.minimum(edges[1:, None], bounds[None, 1:]) > np.maximum(edges[:-1, None], bounds[None, :-1])
    return (overlaps * np.diff(edges)[:, None]).sum(axis=0) * source.shape[1 - axis] * source.dtype.itemsize


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
    return assign_ranks(chunk_holders(client, source), source, axis, bounds, candidates, keep_order)


def assign_ranks(holders, source: Source, axis: int, bounds, candidates, keep_order: bool) -> RankPlan:
    """:func:`plan_ranks` given the input's ``holders`` (:func:`chunk_holders`), so that plans
    for several splits of one input ask the scheduler once."""
    n_ranks = len(bounds) - 1
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
    """The chunk boundaries along each axis (of a Zarr array: of its chunks, which a read
    decodes whole)."""
    chunks = source.array.chunks
    if source.is_zarr:
        import dask.array as da

        chunks = da.core.normalize_chunks(tuple(chunks), source.shape)
    return [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in chunks]
