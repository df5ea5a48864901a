"""Batched assignment on a GPU: the whole batch in one launch of ``batch.cu``'s kernel, one thread
block per problem, the problems' search state in device workspaces; no host round trip per
problem or per iteration. The packing is :mod:`dlap.batch`'s (see :mod:`dlap.backends.cpu.batch`)."""

from __future__ import annotations

import cupy
import numpy as np

from .kernels import kernel


def block_size(cols: int) -> int:
    """Threads per block: the columns a step scans, rounded up to whole warps, at most 256."""
    return int(min(256, max(32, -(-cols // 32) * 32)))


def solve_all(flat, start, rows, cols, transposed, sign: int, offset):
    """Solve every packed problem; returns (u, v, col4row, status) as CuPy arrays, padded to the
    largest working shape (``u``, ``col4row``: rows; ``v``: columns)."""
    n_problems = int(start.shape[0])
    row_stride = max(1, int(rows.max()) if n_problems else 1)
    col_stride = max(1, int(cols.max()) if n_problems else 1)
    u = cupy.zeros((n_problems, row_stride))  # an empty problem (no rows) keeps its duals at 0
    v = cupy.zeros((n_problems, col_stride))
    col4row = cupy.empty((n_problems, row_stride), dtype=np.int32)
    row4col = cupy.empty((n_problems, col_stride), dtype=np.int32)
    path = cupy.empty((n_problems, col_stride), dtype=np.int32)
    spc = cupy.empty((n_problems, col_stride))
    in_sr = cupy.empty((n_problems, row_stride), dtype=np.uint8)
    in_sc = cupy.empty((n_problems, col_stride), dtype=np.uint8)
    status = cupy.zeros(n_problems, dtype=np.int32)
    if n_problems:
        launch = kernel("batch", "batch_augmenting_paths", flat.dtype)
        launch((n_problems,), (block_size(col_stride),), (
            flat, cupy.asarray(start, dtype=np.int64), cupy.asarray(rows, dtype=np.int32),
            cupy.asarray(cols, dtype=np.int32), cupy.asarray(transposed, dtype=np.uint8), np.int64(sign),
            cupy.asarray(offset, dtype=np.int64), np.int32(row_stride), np.int32(col_stride),
            u, v, col4row, row4col, path, spc, in_sr, in_sc, status,
        ))
    return u, v, col4row, status
