"""What the CPU's shortest augmenting path solvers share (the batch solver and the sparse core)."""

from __future__ import annotations

from .numba_setup import njit  # first: cache folder and wait policy before any kernel compiles


@njit(cache=True, nogil=True, inline="always")
def flip_path(pred, col4row, row4col, sink, start):
    """Augment along a search's predecessors (``pred[j]``: the row that reached column ``j``),
    from the free column ``sink`` back to the row ``start`` the search began from."""
    j = sink
    while True:
        i = pred[j]
        row4col[j] = i
        col4row[i], j = j, col4row[i]
        if i == start:
            break
