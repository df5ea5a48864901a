"""Numba kernels of the ε-scaling engine (:mod:`dlap.hungarian.scaling`) on the CPU.

Shortest augmenting paths with ε-scaled prices, after Jonker & Volgenant (1987) and the
ε-scaling of Bertsekas' auction as Guthe & Thuerck use it for dense LAPs (ACM TOMS 47, 2021,
"Algorithm 1015"). Only the column prices ``v`` are kept; a row's dual is implicit,
``u_i = min_j (C[i, j] - v[j])``, and an assigned pair is tight when its column attains that minimum.

A phase assigns every row from an empty assignment: rounds of bids by every free row first where
the backend bids in parallel (:func:`bidding_round`, the GPU's rule; the CPU engine itself skips
them), then one single-root Dijkstra search per free row (Lawler's tree, as the tree variant's
``roots="one"``): ``dist[j]`` is the length of the shortest
alternating path from the root to column j in reduced costs ``C - v``; the search stops at the
first free column it reaches and augments along the path. Afterwards every column the search
completed is lowered by ``dist_end - dist[j]`` (the Hungarian dual update, which keeps every
assigned pair tight) and, in an ε-phase, by at least ε: the columns a row fought for become dearer
by ε, as an auction bid would make them. With ε > 0 this leaves an ε-optimal assignment and prices
that are close to optimal duals; the final phase, with ε = 0, is an exact shortest augmenting path
algorithm from those prices, whatever they are (every row starts free, so the invariant "every
assigned pair is tight" holds trivially at its start). Its speed comes from the prices: the better
they are, the sooner each search reaches a free column.

Arrays keep the names of the solver state: ``row_match``/``col_match`` (A_r/A_c), ``v`` (D_c),
``col_pred`` (P_c). ``dist`` is the state's ``slack`` array, ``v_open`` holds ``v`` for the columns
a search has not completed and -inf for those it has (so their candidate distance is +inf and the
scan needs no mask), ``done``/``done_dist`` list the completed columns and their distances.
Entries are widened to float64 before any arithmetic, as in :mod:`dlap.backends.cpu.hungarian`.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .hungarian import COLUMN_BLOCK, min_slack, optimality_check, row_reduction
from .numba_setup import njit, prange_kernel

INF = np.inf


# --------------------------------------------------------------------------------------------
# Price initialisation
# --------------------------------------------------------------------------------------------


def competition_prices(C, row_low, v) -> bool:
    """``v[j]`` = the second-smallest row-reduced cost in column j, shifted so ``max v = 0``.

    Column reduction (Algorithm 1) prices a column at what its keenest row would pay; one row can
    hold only one column, so the second-keenest row's price is the better guess of a column's
    worth when many rows want the same columns (benefit matrices, Machol-Wien). A column with a
    single finite entry falls back to that entry; one with none is priced at the maximum.
    Returns False when a row has no finite entry (the matrix is infeasible).
    """
    row_reduction(C, row_low)
    if (row_low == INF).any():
        return False
    column_competition(C, row_low, v)
    finite = v < INF
    top = v[finite].max() if finite.any() else 0.0
    v[:] = np.where(finite, v - top, 0.0)
    return True


@prange_kernel(nogil=True)
def column_competition(C, row_low, v):
    """``v[j]`` = column j's second-smallest row-reduced cost ``C[i, j] - row_low[i]`` (its
    smallest with one finite entry, inf with none): :func:`competition_prices` before the shift."""
    n_rows, n_cols = C.shape
    n_blocks = (n_cols + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    for b in prange(n_blocks):
        lo = b * COLUMN_BLOCK
        hi = min(n_cols, lo + COLUMN_BLOCK)
        first = np.full(hi - lo, INF)
        second = np.full(hi - lo, INF)
        for i in range(n_rows):
            ri = row_low[i]
            for j in range(lo, hi):
                r = np.float64(C[i, j]) - ri
                if r < second[j - lo]:
                    if r < first[j - lo]:
                        second[j - lo] = first[j - lo]
                        first[j - lo] = r
                    else:
                        second[j - lo] = r
        for j in range(lo, hi):
            v[j] = second[j - lo] if second[j - lo] < INF else first[j - lo]


@njit(cache=True, nogil=True, inline="always")
def _row_minima(C, i, v, col_match):
    """Row i's smallest reduced cost ``C[i, j] - v[j]`` and its first column, its second-smallest
    (a tie with the smallest counts), and the smallest over the free columns (``col_match < 0``)
    with its first column: ``(u1, j1, u2, uf, jf)``, columns -1 where there is none."""
    u1 = INF
    u2 = INF
    uf = INF
    j1 = -1
    jf = -1
    for j in range(C.shape[1]):
        h = np.float64(C[i, j]) - v[j]
        if h < u2:
            if h < u1:
                u2 = u1
                u1 = h
                j1 = j
            else:
                u2 = h
        if col_match[j] < 0 and h < uf:
            uf = h
            jf = j
    return u1, j1, u2, uf, jf


@prange_kernel(nogil=True)
def row_minima_terms(C, v, col_match, rows, terms):
    """:func:`_row_minima` of each row of ``rows``, into ``terms[q] = (u1, j1, u2, uf, jf)``."""
    for q in prange(rows.shape[0]):
        u1, j1, u2, uf, jf = _row_minima(C, rows[q], v, col_match)
        terms[q, 0] = u1
        terms[q, 1] = j1
        terms[q, 2] = u2
        terms[q, 3] = uf
        terms[q, 4] = jf


@prange_kernel(nogil=True)
def row_regrets(C, v, regret):
    """``regret[i]`` = second-smallest minus smallest reduced cost of row i (0 with one finite
    entry): how much row i loses if it does not get its best column."""
    none_free = np.zeros(C.shape[1], dtype=np.int64)  # every column "assigned": no free minimum wanted
    for i in prange(C.shape[0]):
        a, _, b, _, _ = _row_minima(C, i, v, none_free)
        regret[i] = b - a if b < INF else 0.0


@njit(cache=True, nogil=True)
def greedy_prices(C, v, order, picked, taken, fit):
    """A greedy assignment, rows in ``order`` (largest regret first), each taking its cheapest
    column still untaken (``picked[q]`` for row ``order[q]``, -1 when no finite one is left);
    then, with ``fit``, the prices are fitted to it, last row first: each row lowers the price of
    every column taken before it that it would rather have, to its own column's reduced cost.
    When the greedy assignment is optimal (Machol-Wien) this makes every greedy pair tight, and
    the exact phase then only confirms it; otherwise the fitted prices start the ε-phases closer
    to the optimum. ``taken`` is scratch (zeros in, zeros out)."""
    n_rows = C.shape[0]
    for q in range(n_rows):
        _, jb = cheapest_untaken(C, order[q], v, taken)
        picked[q] = jb
        if jb >= 0:
            taken[jb] = True
    for q in range(n_rows - 1, -1, -1):
        jq = picked[q]
        if jq < 0:
            continue
        taken[jq] = False
        if fit:
            lower_taken_prices(C, order[q], v, taken, np.float64(C[order[q], jq]) - v[jq])


@njit(cache=True, nogil=True)
def cheapest_untaken(C, i, v, taken):
    """Row i's smallest reduced cost over the columns not ``taken`` and its first column (-1
    where none is finite): a step of the greedy start."""
    best = INF
    jb = -1
    for j in range(C.shape[1]):
        if not taken[j]:
            h = np.float64(C[i, j]) - v[j]
            if h < best:
                best = h
                jb = j
    return best, jb


@njit(cache=True, nogil=True)
def lower_taken_prices(C, i, v, taken, own):
    """A step of the price fit: every ``taken`` column row i would rather have than its own
    (reduced cost below ``own``) is lowered to ``own``."""
    for j in range(C.shape[1]):
        if taken[j]:
            h = np.float64(C[i, j]) - v[j]
            if h < own:
                v[j] -= own - h


@njit(cache=True, nogil=True)
def greedy_excess(C, v, u, order, picked, excess):
    """``excess[q]``: the greedy pair of row ``order[q]``'s reduced cost above the row's minimum
    ``u`` (0 where the row got no column). Their sum is 0 when the greedy assignment is tight
    under ``v`` (hence optimal), otherwise it sets the first ε. Summed with ``math.fsum`` by the
    backend, so the CPU and the GPU agree on it to the last bit."""
    for q in range(order.shape[0]):
        j = picked[q]
        excess[q] = (np.float64(C[order[q], j]) - v[j]) - u[order[q]] if j >= 0 else 0.0


@prange_kernel(nogil=True)
def narrow_copy(C, out, limit, beyond):
    """``out[:] = C`` in ``out``'s narrower dtype (the ε-phases' copy, ``Backend.narrowed``);
    ``beyond[i]``: row i's finite entries beyond ``±limit``, which ``out`` cannot hold."""
    n_rows, n_cols = C.shape
    for i in prange(n_rows):
        count = 0
        for j in range(n_cols):
            x = C[i, j]
            out[i, j] = x
            if (x > limit or x < -limit) and x != INF and x != -INF:
                count += 1
        beyond[i] = count


# --------------------------------------------------------------------------------------------
# One phase: a shortest augmenting path search per row, from an empty assignment
# --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _first_at(dist, col_match, best):
    """The column to complete next: the first free column at distance ``best`` (a search that
    can end does), else the first column at ``best``."""
    first = -1
    for j in range(dist.shape[0]):
        if dist[j] == best:
            if col_match[j] < 0:
                return j
            if first < 0:
                first = j
    return first


@njit(cache=True, nogil=True)
def _search(C, i0, virtual, extra_match, v, v_open, col_match, dist, col_pred, done, done_dist, counters):
    """Dijkstra from row ``i0`` until a free column is completed. Returns ``(free column, path
    length, columns completed)``, or ``(-1, inf, n)`` when no finite path leaves the tree
    (infeasible). Distances are in reduced costs ``C - v`` plus a constant (the root's dual).

    Rows from ``virtual`` on are virtual rows of zero costs, identical to one another: a search
    from one takes the columns the others hold as completed at the start (each is at the root's
    own distance, ``-v[j]``, since it is tight for its virtual row), and never scans another
    virtual row, which would add nothing. ``extra_match`` holds the virtual rows' columns.

    The first scan writes every ``dist[j]``, so the array needs no reset between searches. In an
    ε-phase reduced costs can be as low as -ε, so a column completed later can be nearer than
    one completed earlier: the search keeps its running ``level`` (the largest distance completed
    so far) as the distance the next scan adds to, and as the path length, so every completed
    column's update ``level - done_dist`` is >= 0."""
    n_cols = v.shape[0]
    n_done = 0
    level = -INF
    if i0 < virtual:
        row = C[i0]
        for j in range(n_cols):
            dist[j] = np.float64(row[j]) - v_open[j]
            col_pred[j] = i0
    else:
        for j in range(n_cols):
            dist[j] = -v_open[j]
            col_pred[j] = i0
        for r in range(extra_match.shape[0]):
            j = extra_match[r]
            if j >= 0:
                done[n_done] = j
                done_dist[n_done] = dist[j]
                n_done += 1
                level = max(level, dist[j])
                dist[j] = INF
                v_open[j] = -INF
    counters[1] += 1
    while True:
        best = min_slack(dist)  # completed columns hold +inf
        if best == INF:
            return -1, INF, n_done
        j = _first_at(dist, col_match, best)
        done[n_done] = j
        done_dist[n_done] = best
        n_done += 1
        dist[j] = INF
        v_open[j] = -INF
        level = max(level, best)
        if col_match[j] < 0:
            return j, level, n_done
        # scan the row assigned to j, whose reduced cost there is its dual u_i
        i = col_match[j]
        row = C[i]
        shift = level - (np.float64(row[j]) - v[j])
        counters[1] += 1
        for j in range(n_cols):
            x = (np.float64(row[j]) - v_open[j]) + shift
            if x < dist[j]:
                dist[j] = x
                col_pred[j] = i


@njit(cache=True, nogil=True)
def search_offer(C, v, v_open, dist, pred, match, row, shift, offer):
    """One step of :func:`_search` on a slab of columns (the Dask engine's searches): row ``row``
    (unless -1) lowers ``dist`` to ``(C[row] - v_open) + shift``, then ``offer`` gets the slab's
    nearest column (:func:`_first_at`): (distance, column, 1.0 if free, the reduced cost
    ``C[match[j], j] - v[j]`` of its row there, its predecessor); distance inf when every column
    is completed."""
    if row >= 0:
        for j in range(dist.shape[0]):
            x = (np.float64(C[row, j]) - v_open[j]) + shift
            if x < dist[j]:
                dist[j] = x
                pred[j] = row
    best = min_slack(dist)
    offer[0] = best
    offer[1] = -1.0
    offer[2] = 0.0
    offer[3] = 0.0
    offer[4] = -1.0
    if best == INF:
        return
    j = _first_at(dist, match, best)
    i = match[j]
    offer[1] = j
    offer[2] = 1.0 if i < 0 else 0.0
    offer[3] = np.float64(C[i, j]) - v[j] if i >= 0 else 0.0
    offer[4] = pred[j]


@njit(cache=True, nogil=True)
def assign_free_rows(C, v, eps, rows, extra_match, row_match, col_match, dist, col_pred, v_open,
                     done, done_dist, counters):
    """Assign each row of ``rows`` (free, in that order), then ``extra_match.shape[0]`` rows of
    zero costs (virtual rows; ``extra_match``, their ``row_match``, -1s in):
    one shortest augmenting path search each (ε = 0: exact; ε > 0: completed columns lowered by
    at least ε), from the partial assignment in ``row_match``/``col_match``. Returns False when a
    row finds no finite path (infeasible). ``counters[1]`` counts rows scanned, ``counters[0]``
    searches.

    Virtual rows make a rectangular problem square for the exact phase: a column a virtual row
    holds is unassigned in the caller's problem, and the optimality conditions of the square
    problem give every such column the largest price, which is what the rectangular problem's
    dual asks of its unassigned columns (shift the prices so that it is 0)."""
    n_rows, n_cols = C.shape
    n_virtual = extra_match.shape[0]
    for j in range(n_cols):
        v_open[j] = v[j]
    for q in range(rows.shape[0] + n_virtual):
        i0 = rows[q] if q < rows.shape[0] else n_rows + q - rows.shape[0]
        counters[0] += 1
        end, length, n_done = _search(C, i0, n_rows, extra_match, v, v_open, col_match, dist,
                                      col_pred, done, done_dist, counters)
        # dual update (Hungarian), plus ε: lower every completed column
        for q2 in range(n_done):
            j = done[q2]
            delta = length - done_dist[q2]
            if delta < eps:
                delta = eps
            v[j] -= delta
            v_open[j] = v[j]
        if end < 0:
            return False
        # augment: flip the path from the free column back to the root
        j = end
        while True:
            i = col_pred[j]
            col_match[j] = i
            if i < n_rows:
                nxt = row_match[i]
                row_match[i] = j
            else:
                nxt = extra_match[i - n_rows]
                extra_match[i - n_rows] = j
            if i == i0:
                break
            j = nxt
    for j in range(n_cols):
        if col_match[j] >= n_rows:
            col_match[j] = -1  # held by a virtual row: unassigned in the caller's problem
    return True


# --------------------------------------------------------------------------------------------
# Bids: every free row at once (Jacobi rounds of Bertsekas' auction)
# --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _bid(u1, j1, u2, uf, jf, eps):
    """A row's bid from its terms (:func:`_row_minima`), bidding.cu's ``bid_rule``: a free
    column at the minimum is taken at no price change; otherwise the row bids for j1, lowering
    its price by ``u2 - u1 + ε`` (by ε alone when j1 is the row's only finite entry; with ε = 0,
    JV's augmenting row reduction, it makes no bid when ``u1 == u2`` or u2 is infinite).
    Returns (column or -1, decrement)."""
    if u1 < INF:
        if uf == u1:
            return jf, 0.0
        if u1 < u2 and u2 < INF:
            return j1, (u2 - u1) + eps
        if eps > 0:
            return j1, ((u2 - u1) if u2 < INF else 0.0) + eps
    return -1, 0.0


@prange_kernel(nogil=True)
def _bids(C, v, eps, free_rows, n_free, col_match, bid_col, bid_dec):
    """Each free row's bid (:func:`_bid`), all from the same prices."""
    for q in prange(n_free):
        u1, j1, u2, uf, jf = _row_minima(C, free_rows[q], v, col_match)
        bid_col[q], bid_dec[q] = _bid(u1, j1, u2, uf, jf, eps)


@prange_kernel(nogil=True)
def bids_of_terms(terms, eps, bid_col, bid_dec):
    """:func:`_bid` of each row of ``terms`` (rows of (u1, j1, u2, uf, jf), as
    :func:`row_minima_terms` makes them)."""
    for q in prange(terms.shape[0]):
        bid_col[q], bid_dec[q] = _bid(terms[q, 0], np.int64(terms[q, 1]), terms[q, 2], terms[q, 3],
                                      np.int64(terms[q, 4]), eps)


def bidding_round(C, v, eps, free_rows, n_free, row_match, col_match, bid_col, bid_dec, col_best, col_winner):
    """One round: every free row bids (:func:`_bids`), then :func:`award_bids`. Returns the free
    rows left, listed in ``free_rows`` in ascending order."""
    _bids(C, v, eps, free_rows, n_free, col_match, bid_col, bid_dec)
    award_bids(free_rows, n_free, bid_col, bid_dec, row_match, col_match, v, col_best, col_winner)
    return optimality_check(row_match, free_rows)


@njit(cache=True, nogil=True)
def award_bids(rows, n, bid_col, bid_dec, row_match, col_match, v, col_best, col_winner):
    """The bids of ``rows[:n]`` (free rows) resolved: the largest decrement wins a column (equal
    ones: the lowest row), winners take their column and lower its price by their bid,
    displacing its row. ``col_winner`` is scratch (-1 in, -1 out); ``col_best[j]``, the winning
    bid so far, is read only where ``col_winner[j]`` names a row."""
    for q in range(n):
        j = bid_col[q]
        if j < 0:
            continue
        i = rows[q]
        w = col_winner[j]
        if w < 0 or bid_dec[q] > col_best[j] or (bid_dec[q] == col_best[j] and i < w):
            col_best[j] = bid_dec[q]
            col_winner[j] = i
    for q in range(n):
        j = bid_col[q]
        if j < 0 or col_winner[j] != rows[q]:
            continue
        i = rows[q]
        previous = col_match[j]
        if previous >= 0:
            row_match[previous] = -1
        col_match[j] = i
        row_match[i] = j
        v[j] -= bid_dec[q]
        col_winner[j] = -1


@njit(cache=True, nogil=True)
def tight_duals(C, v, row_match, u):
    """``u[i] = C[i, row_match[i]] - v[row_match[i]]``: the row duals of the exact phase (each
    assigned pair is tight, and its column attains the row's minimum reduced cost)."""
    for i in range(row_match.shape[0]):
        j = row_match[i]
        u[i] = np.float64(C[i, j]) - v[j]
