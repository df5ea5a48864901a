"""Batched assignment on the CPU: many small problems, one single-threaded solve per problem, the
problems spread over the cores by one Numba parallel loop (no GIL, no Python per problem).

Each problem is solved by shortest augmenting paths, one free row at a time (the
Jonker-Volgenant / Crouse form that scipy uses, a Dijkstra search per row over reduced costs that
the duals keep non-negative), after Jonker-Volgenant's initialisation: column reduction for a
square problem, then augmenting row reduction. The GPU's batch kernel (``backends/gpu/cuda/batch.cu``)
runs the same searches after the column reduction only (a row reduction is one row at a time,
where the GPU's block would wait). The problems come packed in
one flat buffer (:mod:`dlap.batch`): problem ``b`` starts at ``start[b]``, has ``rows[b] <= cols[b]``
working rows and columns, and its entry ``(i, j)`` is ``flat[start + i * cols + j]``, or
``flat[start + j * rows + i]`` when the caller's matrix is transposed. Costs are read in their
dtype and widened to float64 after the integer shift ``sign * c - offset`` (exact for the integer
range of :mod:`dlap.problem`).
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, prange

from .numba_setup import njit, prange_kernel  # first: cache folder and thread wait policy, before any kernel
from .paths import flip_path

INFEASIBLE = 1


@njit(cache=True, inline="always")
def entry(flat, start, i, j, rows, cols, transposed, sign, offset):
    if transposed:
        x = flat[start + j * rows + i]
    else:
        x = flat[start + i * cols + j]
    return np.float64(sign * x - offset)


@njit(cache=True, nogil=True)
def column_reduction(flat, start, rows, cols, transposed, sign, offset, v, col4row, row4col, lowest_row):
    """Square problems: each column's dual is its minimum, and each column goes to its minimum's
    row while that row is free (Jonker-Volgenant's column reduction; ``u = 0`` with these ``v``
    is feasible and tight on the pairs made, so the searches start from there). A rectangular
    problem keeps ``v = 0``: its longer side's duals must end <= 0. ``lowest_row``: scratch,
    ``cols`` entries."""
    for j in range(cols):
        lowest, lowest_row[j] = np.inf, -1
        for i in range(rows):
            x = entry(flat, start, i, j, rows, cols, transposed, sign, offset)
            if x < lowest:
                lowest, lowest_row[j] = x, i
        v[j] = lowest if lowest < np.inf else 0.0
    for j in range(cols):
        i = lowest_row[j]
        if i >= 0 and col4row[i] < 0:
            col4row[i], row4col[j] = j, i


@njit(cache=True, nogil=True)
def augmenting_row_reduction(flat, start, rows, cols, transposed, sign, offset, v, col4row, row4col, free):
    """Jonker-Volgenant's augmenting row reduction, two passes over the free rows: a free row takes
    the column of its lowest reduced cost ``c_ij - v_j``, whose price drops by the gap to the row's
    second lowest (so the row sits at a minimum, tied), and the row it displaces is free again:
    at once when the price dropped, in the next pass otherwise. Prices only drop and the columns
    taken stay taken, so the longer side of a rectangular problem keeps ``v <= 0``, 0 where free;
    every assigned row stays at a minimum of its reduced costs. (On uniform costs this leaves a
    few free rows, as lapx's LAPJV does; the searches then finish.) ``free``: scratch, ``rows``
    entries."""
    n_free = 0
    for i in range(rows):
        if col4row[i] < 0:
            free[n_free] = i
            n_free += 1
    for _ in range(2):
        k, n_next, steps = 0, 0, 0
        while k < n_free:
            i = free[k]
            k += 1
            steps += 1
            u1, u2, j1, j2 = np.inf, np.inf, -1, -1
            for j in range(cols):
                h = entry(flat, start, i, j, rows, cols, transposed, sign, offset) - v[j]
                if h < u2:
                    if h < u1:
                        u2, j2, u1, j1 = u1, j1, h, j
                    else:
                        u2, j2 = h, j
            if j1 < 0:  # no finite entry: left to the search, which reports it infeasible
                free[n_next] = i
                n_next += 1
                continue
            i0 = row4col[j1]
            lowered = u1 < u2 < np.inf
            if lowered:
                v[j1] -= u2 - u1
            elif i0 >= 0 and j2 >= 0 and u1 == u2:  # a tie, and j1 is taken: the other column
                j1, i0 = j2, row4col[j2]
            if i0 >= 0:
                col4row[i0] = -1
            row4col[j1], col4row[i] = i, j1
            if i0 >= 0:
                if lowered and steps < 8 * rows:  # (bounded: floats could cycle)
                    k -= 1
                    free[k] = i0
                else:
                    free[n_next] = i0
                    n_next += 1
        n_free = n_next


@njit(cache=True, nogil=True)
def augmenting_paths(flat, start, rows, cols, transposed, sign, offset, u, v, col4row, row4col, path, free, spc,
                     in_sr, in_sc):
    """Solve one problem: ``col4row``, ``u`` (rows) and ``v`` (columns) in its working form.
    Returns 0, or INFEASIBLE when a row cannot reach a free column through finite costs.
    ``row4col``, ``path``, ``spc``, ``in_sc`` (``cols`` entries at least), ``free`` and ``in_sr``
    (``rows``) are the thread's scratch: no kernel allocates (an allocation compiles NumPy's
    allocators into a first call)."""
    inf = np.inf
    for j in range(cols):
        row4col[j] = -1
    u[:rows] = 0.0
    v[:cols] = 0.0
    if rows == cols:
        column_reduction(flat, start, rows, cols, transposed, sign, offset, v, col4row, row4col, path)
    augmenting_row_reduction(flat, start, rows, cols, transposed, sign, offset, v, col4row, row4col, free)
    for i in range(rows):  # each assigned row sits at a minimum of its reduced costs: u makes it tight
        if col4row[i] >= 0:
            u[i] = entry(flat, start, i, col4row[i], rows, cols, transposed, sign, offset) - v[col4row[i]]
    for cur in range(rows):
        if col4row[cur] >= 0:
            continue
        spc[:cols] = inf
        in_sr[:rows] = False
        in_sc[:cols] = False
        i, min_val, sink = cur, 0.0, -1
        while sink < 0:
            in_sr[i] = True
            lowest, best, best_free = inf, -1, False
            ui = u[i]
            for j in range(cols):
                if in_sc[j]:
                    continue
                r = min_val + entry(flat, start, i, j, rows, cols, transposed, sign, offset) - ui - v[j]
                if r < spc[j]:
                    path[j] = i
                    spc[j] = r
                free = row4col[j] < 0
                # the lowest distance; on a tie, a free column ends the search
                if spc[j] < lowest or (spc[j] == lowest and free and not best_free):
                    lowest, best, best_free = spc[j], j, free
            if lowest == inf:
                return INFEASIBLE
            min_val = lowest
            in_sc[best] = True
            if best_free:
                sink = best
            else:
                i = row4col[best]
        # dual update: the rows and columns the search settled
        u[cur] += min_val
        for k in range(rows):
            if in_sr[k] and k != cur:
                u[k] += min_val - spc[col4row[k]]
        for j in range(cols):
            if in_sc[j]:
                v[j] -= min_val - spc[j]
        flip_path(path, col4row, row4col, sink, cur)
    return 0


@prange_kernel
def solve_all(flat, start, rows, cols, transposed, sign, offset, u, v, col4row, status, ints, spc, flags):
    """Every problem of the batch, spread over the threads (one problem per thread at a time),
    each thread with its row of the scratch ``ints`` (three rows: ``row4col``, ``path``,
    ``free``), ``spc`` and ``flags`` (two rows: ``in_sr``, ``in_sc``) for
    :func:`augmenting_paths`."""
    for b in prange(start.shape[0]):
        if rows[b] > 0:
            t = get_thread_id()
            status[b] = augmenting_paths(flat, start[b], rows[b], cols[b], transposed[b], sign, offset[b],
                                         u[b], v[b], col4row[b], ints[t, 0], ints[t, 1], ints[t, 2], spc[t],
                                         flags[t, 0], flags[t, 1])
