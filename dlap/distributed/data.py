"""Placement: the cost matrix as one slab per rank, in its worker's memory, never through the client.

The input is a dask array (NumPy or CuPy chunks, e.g. from :func:`dlap.generate.uniform_dask`,
whose chunks are generated on the workers), a Zarr array, or the path of a Zarr store. Rank r's
slab (rows for the classical variant, columns for the tree variant, section 5 of Date & Nagi) is
computed by tasks pinned to rank r's worker, so its chunks are generated or read where they will
live (a Zarr slab is read straight into GPU memory through Zarr's GPU buffers on a GPU worker),
then normalised there (:func:`dlap.distributed.engine.prepare_slab`) and kept as one future.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..problem import MSG_NOT_2D, working_dtype
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
        import zarr

        cost = zarr.open_array(os.fspath(cost), mode="r")
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
    if dtype.kind not in "biuf":
        raise TypeError(
            f"Cannot cast array data from dtype({str(dtype)!r}) to dtype('float64') according to the rule 'safe'"
        )
    if len(array.shape) != 2:
        raise ValueError(MSG_NOT_2D.format(ndim=len(array.shape)))
    return Source(shape=tuple(int(s) for s in array.shape), dtype=dtype, array=array, is_zarr=is_zarr)


def slab_bounds(source: Source, axis: int, n_ranks: int) -> tuple[int, ...]:
    """Slab boundaries along ``axis`` of the caller's matrix: the dask array's own chunk
    boundaries when it has one chunk per rank there (no data moves), else an even split."""
    extent = source.shape[axis]
    if not source.is_zarr:
        chunks = source.array.chunks
        if len(chunks[axis]) == n_ranks and len(chunks[1 - axis]) == 1:
            return tuple(int(b) for b in np.concatenate([[0], np.cumsum(chunks[axis])]))
    return tuple(int(b) for b in np.linspace(0, extent, n_ranks + 1).round().astype(int))


def read_zarr_region(array, region: tuple[slice, slice], gpu: bool):
    """Rank task: read one region of a Zarr array, into GPU memory on a GPU worker."""
    if not gpu:
        return array[region]
    import cupy
    import zarr

    with zarr.config.enable_gpu():
        block = array[region]
    return block if isinstance(block, cupy.ndarray) else cupy.asarray(block)


def to_device(block, gpu: bool):
    """A NumPy chunk moved to the worker's GPU when the solve runs on GPUs."""
    if gpu and isinstance(block, np.ndarray):
        import cupy

        return cupy.asarray(block)
    return block


def place_slabs(client, source: Source, workers, *, axis: int, bounds, transposed: bool, maximize: bool,
                gpu: bool, solve_id: str):
    """One future per rank: its slab in the solved form, on its worker (pinned, computed there)."""
    dtype = working_dtype(source.dtype, maximize)
    slabs = []
    for rank, worker in enumerate(workers):
        lo, hi = bounds[rank], bounds[rank + 1]
        region = (slice(lo, hi), slice(None)) if axis == 0 else (slice(None), slice(lo, hi))
        pin = {"workers": [worker], "allow_other_workers": False}
        if source.is_zarr:
            block = client.submit(read_zarr_region, source.array, region, gpu, key=f"dlap-read-zarr-{solve_id}-{rank}", **pin)
        else:
            pieces = source.array[region].to_delayed().ravel()
            part = pieces[0] if len(pieces) == 1 else source.array[region]
            block = client.compute(part, **pin)
        block = client.submit(to_device, block, gpu, key=f"dlap-to-device-{solve_id}-{rank}", **pin)
        slabs.append(client.submit(
            prepare_slab, block, maximize, transposed, dtype, key=f"dlap-slab-{solve_id}-{rank}", **pin
        ))
    return slabs
