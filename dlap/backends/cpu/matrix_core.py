"""CPU kernels of the sparse-core engine on a given matrix (dlap/points/matrix.py): each row's and
each column's cheapest entries, and the pricing of every entry against the duals, in one pass over
the matrix each (forbidden +inf entries are never candidates and never violators)."""

from __future__ import annotations

import numpy as np
from numba import prange

from .numba_setup import njit, prange_kernel  # first: cache folder and thread wait policy, before any kernel
from .points import insert_sorted, keep_most_negative

#: columns a thread takes at a time in :func:`cheapest_in_columns` (a cache line of float64 and more)
COLUMN_CHUNK = 64


@njit(cache=True, inline="always")
def _cheapest_of_row(c, i, columns, k, keys, items):
    """``keys``, ``items``: row i's ``k`` cheapest entries among ``columns`` (ascending),
    cheapest first (ties: the lower column), -1 and inf past its allowed ones."""
    for t in range(k):
        keys[t] = np.inf
        items[t] = -1
    worst = np.inf
    for j in columns:
        x = np.float64(c[i, j])
        if x < worst:
            insert_sorted(keys, items, k - 1, x, j)
            worst = keys[k - 1]


@prange_kernel
def cheapest_in_rows(c, k, index, cost):
    """``index[i]``, ``cost[i]``: row i's ``k`` cheapest entries, cheapest first (ties: the lower
    column), -1 and inf past its allowed ones."""
    for i in prange(c.shape[0]):
        _cheapest_of_row(c, i, range(c.shape[1]), k, cost[i], index[i])


@prange_kernel
def cheapest_among(c, rows, columns, k, index, cost):
    """``index[r]``, ``cost[r]``: the ``k`` cheapest entries of row ``rows[r]`` among ``columns``
    (ascending), as :func:`cheapest_in_rows`: only those entries are read."""
    for r in prange(rows.shape[0]):
        _cheapest_of_row(c, rows[r], columns, k, cost[r], index[r])


@prange_kernel
def cheapest_in_columns(c, k, index, cost):
    """``index[j]``, ``cost[j]``: column j's ``k`` cheapest entries (rows), as
    :func:`cheapest_in_rows`; each thread reads a chunk of columns row by row."""
    n, m = c.shape
    for chunk in prange((m + COLUMN_CHUNK - 1) // COLUMN_CHUNK):
        first, last = chunk * COLUMN_CHUNK, min(m, (chunk + 1) * COLUMN_CHUNK)
        for j in range(first, last):
            for t in range(k):
                cost[j, t] = np.inf
                index[j, t] = -1
        for i in range(n):
            for j in range(first, last):
                x = np.float64(c[i, j])
                if x < cost[j, k - 1]:
                    insert_sorted(cost[j], index[j], k - 1, x, i)


@prange_kernel
def price_entries(c, u, v, rtol, atol, index, reduced, count):
    """Every entry's reduced cost ``c_ij - u_i - v_j``; row i's most negative ones below
    ``-(rtol * (|c_ij| + |u_i| + |v_j|) + atol)`` into ``index[i]``, ``reduced[i]`` (as many as fit,
    most negative first), their number into ``count[i]`` (as :func:`dlap.backends.cpu.points.price`)."""
    for i in prange(c.shape[0]):
        found = 0
        for j in range(c.shape[1]):
            x = np.float64(c[i, j])
            r = x - u[i] - v[j]
            if r < -(rtol * (abs(x) + abs(u[i]) + abs(v[j])) + atol):
                found = keep_most_negative(reduced[i], index[i], found, r, j)
        count[i] = found


@prange_kernel
def reduced_minima(c, v, out):
    """``out[i] = min_j (c_ij - v_j)``: each row's least reduced cost."""
    for i in prange(c.shape[0]):
        low = np.inf
        for j in range(c.shape[1]):
            low = min(low, np.float64(c[i, j]) - v[j])
        out[i] = low
