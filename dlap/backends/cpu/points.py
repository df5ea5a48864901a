"""CPU kernels of the sparse-core engine (dlap/points/core.py): the metric between two points, each
row's nearest columns, pricing every pair against the duals, dense blocks for the certificate, and
the exact solve of the sparse core by shortest augmenting paths.

Costs are ``sign * metric(a_i, b_j)`` in float64 (dlap/points/metrics.py defines the metrics), so
the engine always minimises; ``sign`` is -1 when the caller maximises.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from .atomics import compare_and_swap, fetch_add, lock, unlock
from .numba_setup import njit, prange_kernel  # cache folder and wait policy, before any kernel compiles
from .paths import flip_path

#: the fewest rows for which an auction's phases start on the thread team (:func:`bid_in_parallel`;
#: uniform points on 2 cores: n = 10000 even, n = 100000 core solve 3.9 -> 2.6 s: docs/benchmarks.md)
TEAM_AUCTION_ROWS = 10000
#: the bids a thread of :func:`bid_in_parallel` claims at a time
SHARED_BIDS = 256
#: the fewest displaced rows for which the team bids in another sweep (:func:`bid_on_the_team`)
TEAM_SWEEP_ROWS = 1000
#: the fewest rows of a square core whose row reduction and searches for augmenting paths run on
#: the thread team (:func:`reduce_free_rows`, :func:`augment_free_rows`)
TEAM_SEARCH_ROWS = 10000
#: the most threads the searches run on (:func:`search_on_the_team`: each holds arrays of the
#: columns' size)
TEAM_SEARCHES = 16
#: a rectangular core's searches go on in rounds while each augments at least this share of the
#: free rows it started from (:func:`augment_in_rounds`), then one row at a time: a round passes
#: over most of the core, which pays only while it augments many rows (docs/benchmarks.md,
#: "Rounds through the implicit rows")
ROUND_YIELD = 0.5
#: after the team's bids of a row reduction, the serial bids for the rows it left get at most this
#: many times the bids a row the whole reduction had (:func:`reduce_free_rows`)
SERIAL_REDUCTION_SHARE = 1.0


@njit(cache=True, inline="always")
def pair_cost(a, b, na, nb, i, j, metric, p, sign):
    """``sign * metric(a[i], b[j])`` (metric numbers as in ``dlap.points.metrics.METRIC_IDS``)."""
    d = a.shape[1]
    s = 0.0
    if metric == 0 or metric == 1:  # euclidean, sqeuclidean
        for k in range(d):
            t = np.float64(a[i, k]) - np.float64(b[j, k])
            s += t * t
        if metric == 0:
            s = math.sqrt(s)
    elif metric == 2:  # cityblock
        for k in range(d):
            s += abs(np.float64(a[i, k]) - np.float64(b[j, k]))
    elif metric == 3:  # minkowski
        for k in range(d):
            s += abs(np.float64(a[i, k]) - np.float64(b[j, k])) ** p
        s = s ** (1.0 / p)
    else:  # cosine
        for k in range(d):
            s += np.float64(a[i, k]) * np.float64(b[j, k])
        s = 1.0 - s / (na[i] * nb[j])
    return sign * s


@njit(cache=True, inline="always")
def precedes(key, item, other_key, other_item):
    """Whether (key, item) comes before (other_key, other_item): by key, then item."""
    return key < other_key or (key == other_key and item < other_item)


@njit(cache=True, inline="always")
def insert_sorted(keys, items, t, key, item):
    """Put (key, item) into the ascending ``keys[:t + 1]``, whose slot ``t`` is free or its
    largest, to be overwritten; order by key, then item (:func:`precedes`)."""
    while t > 0 and precedes(key, item, keys[t - 1], items[t - 1]):
        keys[t] = keys[t - 1]
        items[t] = items[t - 1]
        t -= 1
    keys[t] = key
    items[t] = item


@prange_kernel
def nearest_columns(a, b, na, nb, metric, p, sign, k, index, cost):
    """``index[i]``, ``cost[i]``: row i's ``k`` cheapest columns, cheapest first (ties: the lower
    column)."""
    m = b.shape[0]
    for i in prange(a.shape[0]):
        for t in range(k):
            cost[i, t] = np.inf
            index[i, t] = -1
        worst = np.inf
        for j in range(m):
            c = pair_cost(a, b, na, nb, i, j, metric, p, sign)
            if c < worst:
                insert_sorted(cost[i], index[i], k - 1, c, j)
                worst = cost[i, k - 1]


@prange_kernel
def price(a, b, na, nb, metric, p, sign, u, v, rtol, atol, index, reduced, count):
    """Pricing: every pair's reduced cost ``c_ij - u_i - v_j``. Row i's most negative ones below
    ``-(rtol * (|c_ij| + |u_i| + |v_j|) + atol)`` go to ``index[i]``, ``reduced[i]`` (as many as fit, most
    negative first), and ``count[i]`` says how many there were."""
    m = b.shape[0]
    for i in prange(a.shape[0]):
        found = 0
        for j in range(m):
            c = pair_cost(a, b, na, nb, i, j, metric, p, sign)
            r = c - u[i] - v[j]
            if r < -(rtol * (abs(c) + abs(u[i]) + abs(v[j])) + atol):
                found = keep_most_negative(reduced[i], index[i], found, r, j)
        count[i] = found


@njit(cache=True, inline="always")
def keep_most_negative(keys, items, found, key, item):
    """Keep (key, item) among the ascending ``keys``/``items`` if it is one of the ``len(keys)``
    most negative of the ``found + 1`` seen (:func:`insert_sorted`); returns ``found + 1``."""
    cap = keys.shape[0]
    if found < cap:
        insert_sorted(keys, items, found, key, item)
    elif key < keys[cap - 1]:
        insert_sorted(keys, items, cap - 1, key, item)
    return found + 1


@prange_kernel
def dot_costs(dots, a_len, b_len, na, nb, lo, metric, sign):
    """In place: ``dots[r, j]`` (row ``lo + r``'s dot product with column j, from a matrix product)
    becomes ``sign * metric`` computed from it and the points' lengths (cosine: their norms) --
    :mod:`dlap.points.screen`'s approximate costs."""
    for r in prange(dots.shape[0]):
        i = lo + r
        for j in range(dots.shape[1]):
            if metric == 4:  # cosine
                c = 1.0 - dots[r, j] / (na[i] * nb[j])
            else:
                c = max(a_len[i] * a_len[i] + b_len[j] * b_len[j] - 2.0 * dots[r, j], 0.0)
                if metric == 0:
                    c = math.sqrt(c)
            dots[r, j] = sign * c


@prange_kernel
def within_reach(approx, bound, k, index, count):
    """Row r's columns whose approximate cost is within ``2 * bound[r]`` of its k-th smallest
    (the columns its exact k cheapest can be): the first ``index.shape[1]`` into ``index[r]``,
    their number into ``count[r]`` (more than fit: the caller computes the row whole)."""
    width = index.shape[1]
    for r in prange(approx.shape[0]):
        best, best_columns = np.full(k, np.inf), np.full(k, -1)
        for j in range(approx.shape[1]):
            if approx[r, j] < best[k - 1]:
                insert_sorted(best, best_columns, k - 1, approx[r, j], j)
        reach = best[k - 1] + 2.0 * bound[r]
        found = 0
        for j in range(approx.shape[1]):
            if approx[r, j] <= reach:
                if found < width:
                    index[r, found] = j
                found += 1
        count[r] = found


@prange_kernel
def unsettled(approx, u, v, lo, bound, rounding, out):
    """``out[r, j]``: whether pair (lo + r, j)'s reduced cost from its approximate cost could be
    below 0 (within ``bound[r]``, and ``rounding`` of the terms for the subtraction) -- the pairs
    :mod:`dlap.points.screen`'s pricing computes exactly."""
    for r in prange(approx.shape[0]):
        ui = u[lo + r]
        for j in range(approx.shape[1]):
            c = approx[r, j]
            out[r, j] = c - ui - v[j] < bound[r] + rounding * (abs(c) + abs(ui) + abs(v[j]))


@prange_kernel
def block_costs(a, b, na, nb, metric, p, sign, start, out):
    """``out[r, j] = c[start + r, j]`` for the rows of ``out``."""
    for r in prange(out.shape[0]):
        for j in range(b.shape[0]):
            out[r, j] = pair_cost(a, b, na, nb, start + r, j, metric, p, sign)


@prange_kernel
def pair_costs(a, b, na, nb, metric, p, sign, rows, cols, out):
    """``out[t] = c[rows[t], cols[t]]``."""
    for t in prange(rows.shape[0]):
        out[t] = pair_cost(a, b, na, nb, rows[t], cols[t], metric, p, sign)


@prange_kernel
def sort_rows(index, cost, cols, costs, counts):
    """Row i's columns ``index[i]`` (costs ``cost[i]``), each once with its first cost (-1: none),
    ascending into ``cols[i, :counts[i]]``, ``costs[i]``: an insertion sort of each row (a core's
    first edges, :func:`rows_to_csr`)."""
    k = index.shape[1]
    for i in prange(index.shape[0]):
        size = 0
        for t in range(k):
            j = index[i, t]
            if j < 0:
                continue
            at = size
            while at > 0 and cols[i, at - 1] > j:
                at -= 1
            if at > 0 and cols[i, at - 1] == j:
                continue
            for s in range(size, at, -1):
                cols[i, s], costs[i, s] = cols[i, s - 1], costs[i, s - 1]
            cols[i, at], costs[i, at] = j, cost[i, t]
            size += 1
        counts[i] = size


def rows_to_csr(index, cost, index_dtype):
    """The CSR (``indptr``, column indices of ``index_dtype``, costs) of row i's edges to the
    columns ``index[i]`` with costs ``cost[i]`` (-1: none; a repeated column once, its first cost)."""
    n = index.shape[0]
    cols, costs, indptr = np.empty_like(index), np.empty(index.shape), np.zeros(n + 1, dtype=np.int64)
    sort_rows(index, cost, cols, costs, indptr[1:])
    np.cumsum(indptr, out=indptr)
    indices, edge_costs = np.empty(indptr[n], dtype=index_dtype), np.empty(indptr[n])
    first_columns(cols, costs, indptr, indices, edge_costs)
    return indptr, indices, edge_costs


@prange_kernel
def first_columns(cols, costs, indptr, indices, edge_costs):
    """Each row's first ``indptr[i + 1] - indptr[i]`` entries of ``cols[i]``, ``costs[i]`` into the CSR."""
    for i in prange(indptr.shape[0] - 1):
        for t in range(indptr[i + 1] - indptr[i]):
            indices[indptr[i] + t], edge_costs[indptr[i] + t] = cols[i, t], costs[i, t]


@prange_kernel
def merge_edges(indptr, indices, costs, rows, cols, new_costs):
    """The CSR ``indptr``, ``indices`` (each row's columns ascending, unique), ``costs`` with the
    edges ``rows``, ``cols`` (costs ``new_costs``; those with a row or column -1 skipped) merged
    in: those already there, and repeats among them, keep their first cost. The new edges are
    bucketed by row (a counting sort on the team), each row's sorted by column, then merged with
    the row's edges already there, twice: to count each row's edges, then (where any is new) to
    write them where the counts say; a row without new edges is counted and copied whole.
    Returns the CSR (the same arrays where no edge is new) and how many edges were new."""
    n_rows = indptr.shape[0] - 1
    first = np.zeros(n_rows + 1, dtype=np.int64)  # each row's first new edge in ``order``
    for e in prange(rows.shape[0]):
        if rows[e] >= 0 and cols[e] >= 0:
            fetch_add(first, rows[e] + 1, 1)
    for r in range(n_rows):
        first[r + 1] += first[r]
    cursor = first[:-1].copy()
    order, order_cols = np.empty(first[n_rows], dtype=np.int64), np.empty(first[n_rows], dtype=np.int64)
    for e in prange(rows.shape[0]):
        if rows[e] >= 0 and cols[e] >= 0:
            at = fetch_add(cursor, rows[e], 1)
            order[at], order_cols[at] = e, cols[e]
    out = np.zeros(n_rows + 1, dtype=np.int64)
    for r in prange(n_rows):
        if first[r] == first[r + 1]:
            out[r + 1] = indptr[r + 1] - indptr[r]
            continue
        _by_column(order, order_cols, first[r], first[r + 1], rows.shape[0])
        out[r + 1] = _merge_row(indices, costs, indptr[r], indptr[r + 1], order, order_cols, first[r], first[r + 1],
                                new_costs, indices, costs, -1)
    for r in range(n_rows):
        out[r + 1] += out[r]
    added = out[n_rows] - indices.shape[0]
    if added == 0:
        return indptr, indices, costs, 0
    out_indices, out_costs = np.empty(out[n_rows], dtype=indices.dtype), np.empty(out[n_rows])
    for r in prange(n_rows):
        if first[r] == first[r + 1]:
            out_indices[out[r] : out[r + 1]] = indices[indptr[r] : indptr[r + 1]]
            out_costs[out[r] : out[r + 1]] = costs[indptr[r] : indptr[r + 1]]
        else:
            _merge_row(indices, costs, indptr[r], indptr[r + 1], order, order_cols, first[r], first[r + 1], new_costs,
                       out_indices, out_costs, out[r])
    return out, out_indices, out_costs, added


@njit(cache=True)
def _by_column(order, order_cols, lo, hi, positions):
    """One row's new edges ``order[lo:hi]`` (their columns ``order_cols[lo:hi]``, their positions
    below ``positions``) sorted by column, then by position (the first of repeats first): an
    insertion sort where they are few, else a merge sort."""
    if hi - lo > 32:
        ranked = order_cols[lo:hi] * positions + order[lo:hi]
        sorted_ = np.argsort(ranked, kind="mergesort")
        order[lo:hi], order_cols[lo:hi] = order[lo:hi][sorted_], order_cols[lo:hi][sorted_]
        return
    cols, items = order_cols[lo:hi], order[lo:hi]
    for t in range(1, hi - lo):
        insert_sorted(cols, items, t, cols[t], items[t])


@njit(cache=True, inline="always")
def _merge_row(indices, costs, a, a_end, order, order_cols, lo, hi, new_costs, out_indices, out_costs, o):
    """One row's edges ``indices[a:a_end]`` and its new ones ``order[lo:hi]`` (sorted by
    :func:`_by_column`), merged into ``out_indices``/``out_costs`` from ``o`` (``o = -1``: only
    counted); returns how many there are."""
    count, last = 0, -1
    for t in range(lo, hi):
        col = order_cols[t]
        while a < a_end and indices[a] < col:
            if o >= 0:
                out_indices[o + count], out_costs[o + count] = indices[a], costs[a]
            count += 1
            a += 1
        if col == last or (a < a_end and indices[a] == col):
            continue
        if o >= 0:
            out_indices[o + count], out_costs[o + count] = col, new_costs[order[t]]
        count += 1
        last = col
    if o >= 0:
        for t in range(a_end - a):
            out_indices[o + count + t], out_costs[o + count + t] = indices[a + t], costs[a + t]
    return count + a_end - a


def by_column(indptr, indices, costs, n_cols):
    """The CSR graph's edges by column, rows ascending in each: ``indptr``, row indices, costs
    (:func:`transpose`, the rows in a block a thread, at most one per ``4 * n_cols`` edges: the
    blocks' counts then take at most twice the edges' bytes)."""
    blocks = max(1, min(numba.get_num_threads(), indices.shape[0] // max(4 * n_cols, 1), indptr.shape[0] - 1))
    return transpose(indptr, indices, costs, n_cols, blocks)


@prange_kernel
def transpose(indptr, indices, costs, n_cols, blocks):
    """:func:`by_column`'s counting sort: the rows in ``blocks`` consecutive blocks, each block's
    count of each column, then each block's edges written from its own offsets."""
    n_rows, n_edges = indptr.shape[0] - 1, indices.shape[0]
    at = np.zeros((blocks, n_cols + 1), dtype=np.int64)
    for b in prange(blocks):
        for e in range(indptr[n_rows * b // blocks], indptr[n_rows * (b + 1) // blocks]):
            at[b, indices[e] + 1] += 1
    col_indptr = np.zeros(n_cols + 1, dtype=np.int64)
    for j in range(n_cols):
        start = col_indptr[j]
        for b in range(blocks):
            count = at[b, j + 1]
            at[b, j] = start
            start += count
        col_indptr[j + 1] = start
    rows, col_costs = np.empty_like(indices), np.empty(n_edges)
    for b in prange(blocks):
        for i in range(n_rows * b // blocks, n_rows * (b + 1) // blocks):
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                rows[at[b, j]], col_costs[at[b, j]] = i, costs[e]
                at[b, j] += 1
    return col_indptr, rows, col_costs


@njit(cache=True)
def match_rows(indptr, indices, col4row, row4col, rows, scanned, counters, more_first, more_next, more_cols):
    """A matching of each row of ``rows`` in turn over the graph's edges, costs ignored: a
    breadth-first search of alternating paths from the row to the first free column it sees.
    Edges not in the CSR yet are lists: row ``i``'s columns ``more_cols[e]`` for ``e =
    more_first[i]``, then ``more_next[e]``, until -1 (``more_first`` empty: none). Returns -1,
    or the position in ``rows`` of a row no path leaves from; ``scanned[:counters[2]]`` then
    lists the rows its search reached. ``counters``: [0] searches, [1] columns reached, [2] rows
    in the failed search."""
    m = row4col.shape[0]
    pred = np.empty(m, dtype=np.int64)
    seen = np.zeros(m, dtype=np.bool_)
    touched = np.empty(m, dtype=np.int64)
    queue = np.empty(col4row.shape[0], dtype=np.int64)
    for position in range(rows.shape[0]):
        start = rows[position]
        if col4row[start] >= 0:
            continue
        counters[0] += 1
        queue[0] = start
        head, tail, n_touched, sink = 0, 1, 0, -1
        while head < tail and sink < 0:
            i = queue[head]
            head += 1
            for e in range(indptr[i], indptr[i + 1]):
                n_touched, tail, sink = _reach(indices[e], i, row4col, seen, touched, n_touched, pred, queue, tail)
                if sink >= 0:
                    break
            more = more_first[i] if more_first.shape[0] and sink < 0 else -1
            while more >= 0:
                n_touched, tail, sink = _reach(more_cols[more], i, row4col, seen, touched, n_touched, pred, queue, tail)
                more = more_next[more] if sink < 0 else -1
        counters[1] += n_touched
        for t in range(n_touched):
            seen[touched[t]] = False
        if sink < 0:
            scanned[:tail] = queue[:tail]
            counters[2] = tail
            return position
        flip_path(pred, col4row, row4col, sink, start)
    return -1


@njit(cache=True, inline="always")
def _reach(j, i, row4col, seen, touched, n_touched, pred, queue, tail):
    """:func:`match_rows`' step from row ``i`` to column ``j``: a column not seen yet is reached
    (its row queued); returns the columns touched, the queue's tail and ``j`` where it is free, else -1."""
    if seen[j]:
        return n_touched, tail, -1
    seen[j] = True
    touched[n_touched] = j
    pred[j] = i
    if row4col[j] < 0:
        return n_touched + 1, tail, j
    queue[tail] = row4col[j]
    return n_touched + 1, tail + 1, -1


@njit(cache=True)
def augment_rows(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters, budget):
    """Shortest augmenting paths on a sparse graph (CSR rows ``indptr``/``indices``/``costs``,
    absent pairs forbidden), one per row of ``rows`` in order, from feasible duals ``u``, ``v``
    and a matching of tight pairs (:func:`shortest_path`, then Crouse's dual update). Each search
    ends at the nearest free column; the duals stay feasible and matched pairs tight.

    With more columns than rows, the square problem of the same optimum is solved: ``m - n``
    implicit rows of cost 0 to every column hold that many unmatched columns at the highest
    price (:func:`implicit_rows`); an unmatched column below it, or any unmatched column while
    more than ``m - n`` are at it, is free. A search that reaches a held column goes on from the
    implicit rows to every column ``k`` at ``top - v[k]`` more. At the end every price is lowered
    by the highest, so unmatched columns are at 0, the rectangular dual.

    With more columns than rows, the searches go in rounds first (:func:`search_forest`), each one
    search from every free row at once whose dual update serves many disjoint augmenting paths:
    nearly every search of such a graph passes the implicit rows, and one at a time each settled
    again the columns priced near the top (docs/benchmarks.md, "Rounds through the implicit
    rows"); the rows they leave (once a round augments under ``ROUND_YIELD`` of its rows, or where
    the core matches them not) are searched for one at a time.

    Returns -1, or the position in ``rows`` of a row no path leaves from; ``scanned[:counters[2]]``
    then lists the rows its search reached (the engine adds edges from them and asks again); or
    :data:`OVER_BUDGET` where a search would start with more than ``budget`` columns reached.
    ``counters``: [0] searches (a round counts its paths), [1] columns reached, [2] rows in the
    failed search."""
    n, m = u.shape[0], v.shape[0]
    top, at_top = implicit_rows(v, row4col)
    spare = m - n
    dist = np.full(m, np.inf)
    pred = np.empty(m, dtype=np.int64)
    done = np.zeros(m, dtype=np.bool_)
    touched = np.empty(m, dtype=np.int64)
    keys, items = np.empty(m, dtype=np.float64), np.empty(m, dtype=np.int64)
    at = np.full(m, -1, dtype=np.int64)  # a column's place in the heap, -1 where it is not there
    tree_rows = np.empty(n, dtype=np.int64)
    if spare > 0:
        top = augment_in_rounds(indptr, indices, costs, u, v, col4row, row4col, rows, counters, budget, top, dist,
                                pred, done, touched, keys, items, at, tree_rows)
        at_top = _held(v, row4col, top)
    stopped = -1
    for position in range(rows.shape[0]):
        start = rows[position]
        if col4row[start] >= 0:
            continue
        if counters[1] > budget:
            stopped = OVER_BUDGET
            break
        counters[0] += 1
        sink, through, base, n_touched, n_tree = shortest_path(indptr, indices, costs, u, v, row4col, start, top,
                                                               at_top, spare, dist, pred, done, touched, keys, items,
                                                               at, tree_rows)
        counters[1] += n_touched
        if sink < 0:
            scanned[:n_tree] = tree_rows[:n_tree]
            counters[2] = n_tree
            forget_search(dist, done, touched, n_touched)
            return position
        update_duals(u, v, col4row, start, base, dist, done, touched, n_touched, tree_rows, n_tree)
        if through >= 0:
            top -= base - dist[through]
        elif v[sink] >= top:
            at_top -= 1
        _flip_through(pred, col4row, row4col, sink, start, through, v, top)
        if through >= 0:
            at_top = _held(v, row4col, top)
        forget_search(dist, done, touched, n_touched)
    if spare > 0:  # the rectangular dual: unmatched columns at 0, the others at most 0
        u += top
        v[:] = np.minimum(v - top, 0.0)
    return stopped


@njit(cache=True)
def shortest_path(indptr, indices, costs, u, v, row4col, start, top, at_top, spare, dist, pred, done, touched, keys,
                  items, at, tree_rows):
    """Dijkstra from the free row ``start`` to the nearest free column over reduced costs
    ``c - u - v`` (a heap whose keys are lowered in place, as in Crouse's rectangular algorithm,
    IEEE TAES 2016: columns never reached cost nothing); the implicit rows of a rectangular
    graph as :func:`augment_rows` says (``top``, ``at_top``, ``spare``; ``top = inf``: none).
    Reads the duals and matching only; its own arrays (``dist`` at +inf, ``done`` False, ``at``
    -1 where no search left them otherwise: :func:`forget_search`) hold the search. Returns the
    sink (-1: no free column reached), the held column the path passes the implicit rows through
    (-1: none), the sink's distance, how many columns were reached (``touched``; ``done``: those
    completed) and how many rows the search tree has (``tree_rows``, ``start`` first)."""
    m = v.shape[0]
    n_touched, n_tree, size = 0, 0, 0
    i, base, sink, through = start, 0.0, -1, -1
    nearest_free = np.inf  # the shortest distance to a free column seen: nothing beyond it is settled
    while True:
        if i >= 0:
            tree_rows[n_tree] = i
            n_tree += 1
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                if done[j]:
                    continue
                r = base + max(costs[e] - u[i] - v[j], 0.0)  # below 0 only by rounding
                if r < dist[j] and r < nearest_free:
                    if dist[j] == np.inf:
                        touched[n_touched] = j
                        n_touched += 1
                    dist[j], pred[j] = r, i
                    size = _lower_key(keys, items, at, size, r, j)
                    if row4col[j] < 0 and (v[j] < top or at_top > spare):
                        nearest_free = r
        j = -1
        while size > 0:
            j = _pop_nearest(keys, items, at, size)
            size -= 1
            if not done[j]:  # (a column the implicit rows hold is done without leaving the heap)
                break
            j = -1
        if j < 0:
            break
        done[j] = True
        base = dist[j]
        if row4col[j] >= 0:
            i = row4col[j]
            continue
        if v[j] < top or at_top > spare:
            sink = j
            break
        # j is held by an implicit row; those beyond the nearest free column that way can never
        # precede it (left unreached)
        through, i = j, -1
        for k in range(m):
            if not done[k] and row4col[k] < 0 and v[k] < top:
                nearest_free = min(nearest_free, base + max(top - v[k], 0.0))
        n_touched, size = _enter_implicit_rows(v, row4col, top, base, nearest_free, dist, pred, done, touched,
                                               n_touched, keys, items, at, size)
    for t in range(size):
        at[items[t]] = -1
    return sink, through, base, n_touched, n_tree


@njit(cache=True)
def _enter_implicit_rows(v, row4col, top, base, bound, dist, pred, done, touched, n_touched, keys, items, at, size):
    """A search reaches the implicit rows at distance ``base``: every column they hold is completed
    at ``base`` (without entering the heap), every other column not completed is reached at
    ``base + top - v`` where that is at most ``bound``. Returns the columns touched and the heap's size."""
    for k in range(v.shape[0]):
        if done[k]:
            continue
        held = row4col[k] < 0 and v[k] >= top
        r = base if held else base + max(top - v[k], 0.0)
        if (r < dist[k] and r <= bound) or held:
            if dist[k] == np.inf:
                touched[n_touched] = k
                n_touched += 1
            dist[k], pred[k], done[k] = r, IMPLICIT_ROW, held
            if not held:
                size = _lower_key(keys, items, at, size, r, k)
    return n_touched, size


@njit(cache=True)
def augment_in_rounds(indptr, indices, costs, u, v, col4row, row4col, rows, counters, budget, top, dist, pred, done,
                      touched, keys, items, at, tree_rows):
    """:func:`augment_rows`' rounds on a rectangular graph (the implicit rows at ``top``; the search
    arrays as :func:`shortest_path` leaves them): while the last round augmented at least
    ``ROUND_YIELD`` of its free rows and the columns reached stay below ``budget``, one search
    from all the free ``rows`` (:func:`search_forest`), a maximal set of vertex-disjoint
    augmenting paths among the pairs it made tight (:func:`augment_disjoint_paths`), then its dual
    update (:func:`update_forest_duals`). Returns the implicit rows' price after the rounds."""
    n, m = u.shape[0], v.shape[0]
    row_dist = np.full(n, np.inf)
    seen = np.zeros(m, dtype=np.bool_)
    exits = np.empty(m, dtype=np.int64)
    new_held = np.empty(m, dtype=np.int64)
    frames = np.empty((3, 2 * n + 2), dtype=np.int64)  # a path's rows (-1: the implicit rows), edges, columns
    while counters[1] < budget:
        free = rows[col4row[rows] < 0]
        if free.shape[0] == 0:
            break
        excess = _held(v, row4col, top) - (m - n)  # unmatched columns at the top beyond those the implicit rows hold
        radius, implicit, n_touched, n_tree = search_forest(indptr, indices, costs, u, v, row4col, free, top, excess,
                                                            dist, row_dist, pred, done, touched, keys, items, at,
                                                            tree_rows)
        counters[1] += n_touched
        n_exits = 0
        for t in range(n_touched):  # the columns the implicit rows reach tightly, which they can take over
            k = touched[t]
            if done[k] and not (row4col[k] < 0 and v[k] >= top) and dist[k] == implicit + max(top - v[k], 0.0):
                exits[n_exits] = k
                n_exits += 1
        found, n_held = augment_disjoint_paths(indptr, indices, costs, u, v, col4row, row4col, free, top, excess,
                                               implicit, dist, row_dist, done, seen, exits[:n_exits], new_held,
                                               frames[0], frames[1], frames[2])
        counters[0] += found
        if implicit < radius:
            top -= radius - implicit
        update_forest_duals(u, v, radius, dist, row_dist, done, seen, touched, n_touched, tree_rows, n_tree)
        for t in range(n_held):
            v[new_held[t]] = top
        if found < ROUND_YIELD * free.shape[0]:
            break
    return top


@njit(cache=True)
def search_forest(indptr, indices, costs, u, v, row4col, free, top, excess, dist, row_dist, pred, done, touched, keys,
                  items, at, tree_rows):
    """Dijkstra from all the ``free`` rows at once (each at distance 0) over reduced costs, the
    implicit rows at ``top`` as in :func:`shortest_path`, until it has completed as many free
    columns as there are free rows, or every column it can reach. The ``excess`` unmatched
    columns at the top beyond those the implicit rows hold are free, but are reached with them: a
    column at the top is completed with every other there (all stay at the top after the dual
    update). Returns the radius (the distance completed last), the distance the implicit rows were
    reached at (+inf: not within the radius), how many columns were reached (``touched``;
    ``done``: those completed) and how many rows the forest has (``tree_rows``; ``row_dist``:
    their distances)."""
    n_touched, n_tree, size = 0, 0, 0
    for t in range(free.shape[0]):
        i = free[t]
        row_dist[i] = 0.0
        tree_rows[n_tree] = i
        n_tree += 1
        n_touched, size = _scan_row(indptr, indices, costs, u, v, i, 0.0, dist, done, touched, n_touched, keys,
                                    items, at, size)
    sinks, radius, implicit, entered = 0, 0.0, np.inf, False
    while True:
        if not entered and implicit < np.inf and (size == 0 or implicit <= keys[0]):
            entered, radius = True, implicit
            bound = _nth_smallest_gap(v, row4col, done, top, free.shape[0] - sinks)
            n_touched, size = _enter_implicit_rows(v, row4col, top, implicit, implicit + bound, dist, pred, done,
                                                   touched, n_touched, keys, items, at, size)
            continue
        if size == 0:
            break
        j = _pop_nearest(keys, items, at, size)
        size -= 1
        if done[j]:
            continue
        done[j] = True
        radius = dist[j]
        if row4col[j] < 0:
            if v[j] < top:
                sinks += 1
            else:  # the first column at the top: the implicit rows are reached, with the excess ones free
                implicit = dist[j]
                sinks += max(excess, 0)
            if sinks >= free.shape[0]:
                break
            continue
        i = row4col[j]
        row_dist[i] = radius
        tree_rows[n_tree] = i
        n_tree += 1
        n_touched, size = _scan_row(indptr, indices, costs, u, v, i, radius, dist, done, touched, n_touched, keys,
                                    items, at, size)
    for t in range(size):
        at[items[t]] = -1
    return radius, implicit if entered else np.inf, n_touched, n_tree


@njit(cache=True, inline="always")
def _scan_row(indptr, indices, costs, u, v, i, base, dist, done, touched, n_touched, keys, items, at, size):
    """:func:`search_forest`'s step from row ``i`` at distance ``base``: each column not completed
    reached at ``base`` plus its reduced cost, where that is nearer (the sum
    :func:`augment_disjoint_paths` checks). Returns the columns touched and the heap's size."""
    for e in range(indptr[i], indptr[i + 1]):
        k = indices[e]
        if done[k]:
            continue
        r = base + max(costs[e] - u[i] - v[k], 0.0)
        if r < dist[k]:
            if dist[k] == np.inf:
                touched[n_touched] = k
                n_touched += 1
            dist[k] = r
            size = _lower_key(keys, items, at, size, r, k)
    return n_touched, size


@njit(cache=True)
def _nth_smallest_gap(v, row4col, done, top, count):
    """The ``count``-th smallest ``top - v`` of the unmatched columns below ``top`` not completed
    yet (+inf: fewer): as many free columns as that are no farther through the implicit rows, so
    a search that needs that many more completes them within it."""
    gaps = np.empty(v.shape[0])
    n_gaps = 0
    for k in range(v.shape[0]):
        if row4col[k] < 0 and v[k] < top and not done[k]:
            gaps[n_gaps] = top - v[k]
            n_gaps += 1
    if count < 1 or n_gaps < count:
        return np.inf
    return np.partition(gaps[:n_gaps], count - 1)[count - 1]


@njit(cache=True)
def augment_disjoint_paths(indptr, indices, costs, u, v, col4row, row4col, free, top, excess, implicit, dist, row_dist,
                           done, seen, exits, new_held, frame_rows, frame_edges, frame_cols):
    """Augment along vertex-disjoint paths from the ``free`` rows to free columns, each pair on them
    tight after :func:`search_forest`'s dual update (its distances add up exactly along the pair:
    the same sums in the same order), found depth first, each column visited once a round (as in
    Hopcroft & Karp's phases). A path may pass the implicit rows, reached at ``implicit``: in by a
    column they hold, which the row before takes, out by one of the ``exits`` (the columns they
    reach tightly), which they take (listed in ``new_held``), its row going on; at most ``excess``
    paths end at an unmatched column at the top. Returns the paths and the columns the implicit
    rows took."""
    found, n_held, next_exit = 0, 0, 0
    for t in range(free.shape[0]):
        depth, sink = 0, -1
        frame_rows[0], frame_edges[0] = free[t], indptr[free[t]]
        while depth >= 0:
            i, j = frame_rows[depth], -1
            if i >= 0:
                while frame_edges[depth] < indptr[i + 1] and j < 0:
                    e = frame_edges[depth]
                    frame_edges[depth] += 1
                    k = indices[e]
                    if not seen[k] and done[k] and row_dist[i] + max(costs[e] - u[i] - v[k], 0.0) == dist[k]:
                        j = k
            else:  # the implicit rows: their next exit not seen yet
                while next_exit < exits.shape[0] and j < 0:
                    if not seen[exits[next_exit]]:
                        j = exits[next_exit]
                    next_exit += 1
            if j < 0:
                depth -= 1
                continue
            seen[j] = True
            frame_cols[depth] = j
            if row4col[j] >= 0:
                depth += 1
                frame_rows[depth], frame_edges[depth] = row4col[j], indptr[row4col[j]]
            elif v[j] < top or excess > 0:
                if v[j] >= top:
                    excess -= 1
                sink = j
                break
            elif i >= 0 and dist[j] == implicit:
                depth += 1
                frame_rows[depth] = -1
        if sink < 0:
            continue
        found += 1
        for d in range(depth + 1):
            i, j = frame_rows[d], frame_cols[d]
            if i >= 0:
                row4col[j], col4row[i] = i, j
            else:
                row4col[j] = -1
                new_held[n_held] = j
                n_held += 1
    return found, n_held


@njit(cache=True)
def update_forest_duals(u, v, radius, dist, row_dist, done, seen, touched, n_touched, tree_rows, n_tree):
    """:func:`search_forest`'s dual update, potentials ``min(distance, radius)``: its rows up and its
    completed columns down by ``radius`` less their distance, so every pair on a shortest path
    within the radius is tight and every pair stays feasible; then the search arrays as
    :func:`shortest_path` needs them."""
    for t in range(n_tree):
        r = tree_rows[t]
        if row_dist[r] < radius:
            u[r] += radius - row_dist[r]
        row_dist[r] = np.inf
    for t in range(n_touched):
        k = touched[t]
        if done[k] and dist[k] < radius:
            v[k] -= radius - dist[k]
        dist[k], done[k], seen[k] = np.inf, False, False


@njit(cache=True)
def update_duals(u, v, col4row, start, base, dist, done, touched, n_touched, tree_rows, n_tree):
    """The dual update after a search that reached a free column at distance ``base`` (Crouse's
    step 5): the tree's rows up, its completed columns down, so the path is tight and every edge
    stays feasible."""
    u[start] += base
    for t in range(1, n_tree):
        r = tree_rows[t]
        u[r] += base - dist[col4row[r]]
    for t in range(n_touched):
        j = touched[t]
        if done[j]:
            v[j] -= base - dist[j]


@njit(cache=True)
def forget_search(dist, done, touched, n_touched):
    """A search's arrays as :func:`shortest_path` needs them for the next."""
    for t in range(n_touched):
        dist[touched[t]] = np.inf
        done[touched[t]] = False


def augment_free_rows(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters, budget) -> int:
    """:func:`augment_rows` (its arguments and answer); on a thread team and a square graph of at
    least ``TEAM_SEARCH_ROWS`` rows, the searches run on the team (:func:`augment_on_the_team`),
    of at most one thread a row (each thread's search arrays have the columns' size)."""
    if _on_the_team(u, v) and rows.shape[0] > 1:
        return augment_on_the_team(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters, budget,
                                   min(numba.get_num_threads(), TEAM_SEARCHES, rows.shape[0]))
    return augment_rows(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters, budget)


def augment_on_the_team(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters, budget,
                        threads) -> int:
    """:func:`augment_rows` on a square graph, on a team of ``threads`` (:func:`search_on_the_team`),
    the rows taken in a fixed shuffled order: rows numbered along a k-d tree are neighbours, whose
    searches would meet."""
    m, n = v.shape[0], u.shape[0]
    dist = np.full((threads, m), np.inf)
    pred = np.empty((threads, m), dtype=np.int64)
    done = np.zeros((threads, m), dtype=np.bool_)
    touched, items = np.empty((threads, m), dtype=np.int64), np.empty((threads, m), dtype=np.int64)
    keys = np.empty((threads, m))
    at = np.full((threads, m), -1, dtype=np.int64)
    tree_rows = np.empty((threads, n), dtype=np.int64)
    completed = np.zeros(m, dtype=np.int64)
    shared = np.zeros(5, dtype=np.int64)
    order = np.random.default_rng(0).permutation(rows.shape[0])
    search_on_the_team(indptr, indices, costs, u, v, col4row, row4col, rows[order], dist, pred, done, touched, keys,
                       items, at, tree_rows, completed, shared, scanned, counters, budget, threads)
    if shared[3] == 1:
        return int(order[shared[4]])
    return OVER_BUDGET if shared[3] == 2 else -1


@prange_kernel
def search_on_the_team(indptr, indices, costs, u, v, col4row, row4col, rows, dist, pred, done, touched, keys, items,
                       at, tree_rows, completed, shared, scanned, counters, budget, threads):
    """The searches of :func:`augment_rows` on a square graph, asynchronously: each of the
    ``threads`` takes the next of the free ``rows`` (``shared[0]``: how many were taken) and
    searches from the duals and matching as they are (:func:`shortest_path`, in its own row of
    the search arrays), then, holding the lock ``shared[1]``, augments, unless another thread
    augmented meanwhile through a column this search completed (``completed[j]``: the count of
    augmentations, ``shared[2]``, when one last passed ``j``): then the search is made again.
    Where no augmentation passed them, the completed columns' duals and the rows matched to them
    are those the search read; other columns' duals can only have fallen (their reduced costs
    risen), so it is the search one thread would make now: the same optimum. Stops taking rows at
    a search that reaches no free column and met no augmentation (``shared[3] = 1``, its position
    in ``shared[4]``, its tree's rows in ``scanned[:counters[2]]``) or once the columns reached
    pass ``budget`` (``shared[3] = 2``). ``counters`` as :func:`augment_rows`' (columns reached
    count every search made). Which of equally short paths a row gets depends on the threads'
    timing."""
    for s in prange(threads):
        while shared[3] == 0:
            position = fetch_add(shared, 0, 1)
            if position >= rows.shape[0]:
                break
            start = rows[position]
            if col4row[start] >= 0:
                continue
            while shared[3] == 0:
                if counters[1] > budget:
                    compare_and_swap(shared, 3, 0, 2)
                    break
                seen = fetch_add(shared, 2, 0)
                sink, _, base, n_touched, n_tree = shortest_path(indptr, indices, costs, u, v, row4col, start,
                                                                 np.inf, 0, 0, dist[s], pred[s], done[s], touched[s],
                                                                 keys[s], items[s], at[s], tree_rows[s])
                fetch_add(counters, 1, n_touched)
                lock(shared, 1)
                met = False
                for t in range(n_touched):
                    j = touched[s, t]
                    if done[s, j] and completed[j] > seen:
                        met = True
                        break
                if not met and sink < 0 and shared[3] == 0:
                    scanned[:n_tree] = tree_rows[s, :n_tree]
                    counters[2], shared[4] = n_tree, position
                    shared[3] = 1
                elif not met and sink >= 0:
                    now = shared[2] + 1
                    for t in range(n_touched):
                        j = touched[s, t]
                        if done[s, j]:
                            completed[j] = now
                    update_duals(u, v, col4row, start, base, dist[s], done[s], touched[s], n_touched, tree_rows[s],
                                 n_tree)
                    flip_path(pred[s], col4row, row4col, sink, start)
                    counters[0] += 1
                    fetch_add(shared, 2, 1)  # (after the writes: a search that reads the new count sees them)
                unlock(shared, 1)
                forget_search(dist[s], done[s], touched[s], n_touched)
                if not met:
                    break


@njit(cache=True, inline="always")
def _put(keys, items, at, t, key, item):
    """Place ``item`` with ``key`` at ``t`` of the heap of :func:`_lower_key`."""
    keys[t], items[t] = key, item
    at[item] = t


@njit(cache=True, inline="always")
def _lower_key(keys, items, at, size, key, item):
    """Give ``item`` the smaller ``key`` in the heap ``keys``/``items`` of ``size`` entries (adding
    it where ``at[item]`` is -1); ``at`` follows each item's place. Returns the heap's size."""
    t = at[item]
    if t < 0:
        t, size = size, size + 1
    while t > 0:
        parent = (t - 1) >> 1
        if keys[parent] <= key:
            break
        _put(keys, items, at, t, keys[parent], items[parent])
        t = parent
    _put(keys, items, at, t, key, item)
    return size


@njit(cache=True)
def _pop_nearest(keys, items, at, size):
    """Remove and return the item of the smallest key from the heap of :func:`_lower_key`."""
    nearest = items[0]
    at[nearest] = -1
    size -= 1
    if size == 0:
        return nearest
    key, item = keys[size], items[size]
    t = 0
    while 2 * t + 1 < size:
        child = 2 * t + 1
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if key <= keys[child]:
            break
        _put(keys, items, at, t, keys[child], items[child])
        t = child
    _put(keys, items, at, t, key, item)
    return nearest


#: ``pred`` of a column reached from the implicit rows
IMPLICIT_ROW = -2
#: :func:`augment_rows` stopped at its budget of columns reached
OVER_BUDGET = -2


@njit(cache=True)
def implicit_rows(v, row4col):
    """The highest price, at which the implicit rows of a rectangular problem hold unmatched
    columns (:func:`augment_rows`), and how many unmatched columns are at it."""
    top = -np.inf
    for j in range(v.shape[0]):
        top = max(top, v[j])
    return top, _held(v, row4col, top)


@njit(cache=True)
def _held(v, row4col, top):
    """How many unmatched columns are priced at ``top`` or above (above only by rounding)."""
    count = 0
    for j in range(v.shape[0]):
        if row4col[j] < 0 and v[j] >= top:
            count += 1
    return count


@njit(cache=True)
def _flip_through(pred, col4row, row4col, sink, start, through, v, top):
    """Augment from ``sink`` back to ``start``; where the path passes the implicit rows, the
    column they reached is left to them, at the highest price ``top``, and the path goes on from
    ``through``, the held column the search reached them by."""
    j = sink
    while True:
        i = pred[j]
        if i == IMPLICIT_ROW:
            row4col[j] = -1
            v[j] = top
            j = through
            continue
        row4col[j] = i
        col4row[i], j = j, col4row[i]
        if i == start:
            break


def reduce_free_rows(indptr, indices, costs, u, v, col4row, row4col, rows, steps) -> None:
    """:func:`augmenting_row_reduction` (its arguments), then every row's dual its cheapest
    ``c - v`` (:func:`row_duals`: feasible on every edge, tight on the matched pairs); on a thread
    team and a square graph of at least ``TEAM_SEARCH_ROWS`` rows, its bids start on the team: the
    auction's asynchronous bids (:func:`bid_on_the_team`) at ε = 0, each free row lowering its
    cheapest column's dual to its second cheapest, which leaves it tight, in sweeps (chasing
    displaced rows made price wars of two rows: most rows were still free after the budget's
    bids), then one thread's for the rows left, with at most ``SERIAL_REDUCTION_SHARE`` times as
    many bids a row as the reduction had (the rest went to one thread's price wars at ε = 0 among
    the fewer than ``TEAM_SWEEP_ROWS`` rows the sweeps left, which the searches on the team settle
    faster: docs/benchmarks.md, "The row reduction's serial tail")."""
    if _on_the_team(u, v):
        per_row = steps // max(rows.shape[0], 1)
        steps -= bid_on_the_team(indptr, indices, costs, v, col4row, row4col, 0.0, 0.0,
                                 np.zeros(v.shape[0], dtype=np.int64), steps, False)
        rows = np.flatnonzero(col4row < 0)
        steps = min(steps, int(SERIAL_REDUCTION_SHARE * per_row * rows.shape[0]))
    augmenting_row_reduction(indptr, indices, costs, u, v, col4row, row4col, rows, steps)
    row_duals(indptr, indices, costs, v, u)


def _on_the_team(u, v) -> bool:
    """Whether the searches (and their row reduction) of a graph of duals ``u``, ``v`` run on the
    thread team: a square graph of at least ``TEAM_SEARCH_ROWS`` rows, and a team."""
    return numba.get_num_threads() > 1 and u.shape[0] == v.shape[0] >= TEAM_SEARCH_ROWS


@njit(cache=True)
def augmenting_row_reduction(indptr, indices, costs, u, v, col4row, row4col, rows, steps):
    """Jonker & Volgenant's augmenting row reduction on a sparse graph: each free row of ``rows``
    takes its cheapest column ``c - v``, lowering that column's dual to its second cheapest (so
    both tie) and displacing the holder, who bids next; at most ``steps`` bids. Columns' duals
    only go down; a column the implicit rows of a rectangular problem hold (:func:`augment_rows`)
    is left to the searches. The rows' duals are left to the caller (:func:`reduce_free_rows`)."""
    top, at_top = implicit_rows(v, row4col)
    spare = v.shape[0] - u.shape[0]
    queue = rows.copy()
    head, tail, n_queue = 0, rows.shape[0], rows.shape[0]
    queue = np.concatenate((queue, np.empty(rows.shape[0] + 1, dtype=np.int64)))
    size = queue.shape[0]
    for _ in range(steps):
        if n_queue == 0:
            break
        i = queue[head]
        head = (head + 1) % size
        n_queue -= 1
        if col4row[i] >= 0:
            continue
        first, second, j1, j2 = np.inf, np.inf, -1, -1
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            h = costs[e] - v[j]
            if h < second:
                if h < first:
                    second, j2 = first, j1
                    first, j1 = h, j
                else:
                    second, j2 = h, j
        if j1 < 0:
            continue
        if first < second and second < np.inf:
            lowered = second - first
        elif row4col[j1] >= 0:
            if j2 < 0 or second == np.inf:
                continue
            j1, lowered = j2, 0.0
        else:
            lowered = 0.0
        holder = row4col[j1]
        if holder < 0 and v[j1] >= top:
            if at_top <= spare:
                continue  # held by an implicit row (augment_rows): a search takes it over
            at_top -= 1
        v[j1] -= lowered
        if holder >= 0:
            col4row[holder] = -1
            queue[tail] = holder
            tail = (tail + 1) % size
            n_queue += 1
        col4row[i], row4col[j1] = j1, i


@njit(cache=True)
def match_cheapest(indptr, indices, costs, u, col4row, row4col):
    """A greedy matching of tight edges: each row in order takes the first of its edges (columns
    ascending) that costs its dual ``u`` and whose column is still free."""
    for i in range(u.shape[0]):
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if costs[e] == u[i] and row4col[j] < 0:
                col4row[i], row4col[j] = j, i
                break


@prange_kernel
def row_duals(indptr, indices, costs, v, u):
    """``u[i] = min_j (c_ij - v_j)`` over row i's edges (+inf for none): the largest row duals ``v`` allows."""
    for i in prange(u.shape[0]):
        lowest = np.inf
        for e in range(indptr[i], indptr[i + 1]):
            lowest = min(lowest, costs[e] - v[indices[e]])
        u[i] = lowest


@njit(cache=True, inline="always")
def own_edge(indptr, indices, i, j):
    """Row ``i``'s edge to its column ``j``, found by bisection (a row's columns ascend)."""
    return indptr[i] + np.searchsorted(indices[indptr[i] : indptr[i + 1]], j)


def tighten_by_column_duals(indptr, indices, costs, col_indptr, col_rows, col_costs, v, col4row, top) -> None:
    """Before the rows not tight are let go: each assigned row whose column's ``c - v`` is above its
    cheapest by ``g`` gets that column's dual raised by ``g`` (tight then), where the raise keeps
    the dual at most ``top`` and every other row's edge to the column at least that row's cheapest
    ``c - v``: every row's cheapest stays what it was, so the duals ``u = min (c - v)`` stay
    feasible. On a rectangular core the let-go rows' columns become free below the highest price,
    and each search from a row whose cheapest column is unassigned then passes the implicit rows
    (:func:`augment_rows`), visiting every column priced above the nearest free one."""
    lowest = np.empty(indptr.shape[0] - 1)
    row_duals(indptr, indices, costs, v, lowest)
    raise_column_duals(indptr, indices, costs, col_indptr, col_rows, col_costs, v, col4row, lowest, top)


@prange_kernel
def raise_column_duals(indptr, indices, costs, col_indptr, col_rows, col_costs, v, col4row, lowest, top):
    """:func:`tighten_by_column_duals`' raises, each row's cheapest ``c - v`` given (``lowest``)."""
    for i in prange(indptr.shape[0] - 1):
        j = col4row[i]
        if j < 0:
            continue
        e = own_edge(indptr, indices, i, j)
        raised = v[j] + ((costs[e] - v[j]) - lowest[i])
        if not raised > v[j] or raised > top:
            continue
        for f in range(col_indptr[j], col_indptr[j + 1]):
            k = col_rows[f]
            if k != i and col_costs[f] - raised < lowest[k]:
                raised = v[j]
                break
        v[j] = raised


@prange_kernel
def release_loose_rows(indptr, indices, costs, v, col4row, row4col, eps):
    """Unassign every row whose column's ``c - v`` is more than ``eps`` above its cheapest (the
    rows that break ε-complementary slackness; with ``eps = 0``, every row not tight). Returns
    how many rows are free afterwards."""
    free = 0
    for i in prange(indptr.shape[0] - 1):
        j = col4row[i]
        if j < 0:
            free += 1
            continue
        lowest, own = np.inf, np.inf
        for e in range(indptr[i], indptr[i + 1]):
            h = costs[e] - v[indices[e]]
            lowest = min(lowest, h)
            if indices[e] == j:
                own = h
        if own > lowest + eps:
            col4row[i] = -1
            row4col[j] = -1
            free += 1
    return free


@njit(cache=True, inline="always")
def two_cheapest(indptr, indices, costs, prices, i):
    """Row ``i``'s cheapest ``costs - prices[indices]`` (its edge ``e1``; -1 where it has none)
    and the second cheapest (+inf where it has one edge), without branches on the values: a
    bid's scan, the auction's inner loop."""
    w1, w2, e1 = np.inf, np.inf, -1
    for e in range(indptr[i], indptr[i + 1]):
        h = costs[e] - prices[indices[e]]
        lower = h < w1
        w2 = min(w2, max(w1, h))
        w1 = h if lower else w1
        e1 = e if lower else e1
    return w1, w2, e1


@njit(cache=True, inline="always")
def _other_cheapest(indptr, indices, costs, prices, i, e1, w):
    """Row ``i``'s first edge other than ``e1`` whose ``costs - prices[indices]`` is ``w``."""
    for e in range(indptr[i], indptr[i + 1]):
        if e != e1 and costs[e] - prices[indices[e]] == w:
            return e
    return e1


@njit(cache=True, inline="always")
def outbid(v, col4row, row4col, i, j1, w1, w2, lone_gap, eps):
    """Row ``i``'s bid for its cheapest column ``j1`` (``c - v``: ``w1``; the second cheapest
    ``w2``): the price drops by the gap plus ε (by ``lone_gap`` plus ε where the row has one
    edge), ``j1`` goes to ``i``; returns the row it held (-1: none), now free."""
    v[j1] -= (w2 - w1 if w2 < np.inf else lone_gap) + eps
    holder = row4col[j1]
    if holder >= 0:
        col4row[holder] = -1
    row4col[j1], col4row[i] = i, j1
    return holder


@njit(cache=True, inline="always")
def claim_bids(shared, budget):
    """A thread's next ``SHARED_BIDS`` bids of the team's ``budget`` (``shared[1]``: those claimed),
    fewer where the budget ends; none, and ``shared[2]`` set (every thread stops), past it or
    once another thread stopped. A guard rather than a count: the claims can pass the budget up
    to ``SHARED_BIDS`` bids a thread before the bids made do (the team's budgets are at least
    ``TEAM_AUCTION_ROWS`` times as many bids a row)."""
    allowed = min(SHARED_BIDS, budget - fetch_add(shared, 1, SHARED_BIDS))
    if allowed <= 0 or shared[2] != 0:
        shared[2] = 1
        return 0
    return allowed


@prange_kernel
def bid_in_parallel(indptr, indices, costs, v, col4row, row4col, eps, lone_gap, rows, locks, budget, shared, threads,
                    chase, displaced):
    """One ε-phase's bids on the thread team, asynchronously (Bertsekas & Castañon, "Parallel
    synchronous and asynchronous implementations of the auction algorithm", 1991): each of the
    ``threads`` takes the next of the free ``rows`` (``shared[0]``: how many were taken) and bids
    as :func:`auction_phase` does, until none is left to take: where ``chase``, the row it displaces
    bids next, else that row is listed in ``displaced`` (``shared[4]``: how many) for the next
    sweep (as :func:`auction_phase` queues it before every row has been matched once). A bid
    locks its column (``locks``, 0 where free) and goes through only where the column's price is
    still the one the bid was computed from; the other prices it read may be older, hence higher
    (prices only fall within a phase), so its second cheapest is at most the true one and the row
    keeps ε-complementary slackness. The threads claim bids ``SHARED_BIDS`` at a time
    (``shared[1]``), at most ``budget`` in all; past it, or at a row without edges, they stop
    (``shared[2]`` set), leaving rows free for the serial bids that follow. ``shared[3]``: the
    bids made. Which of several equally good columns a row gets depends on the threads' timing.
    At ``eps = 0`` (the augmenting row reduction, :func:`reduce_free_rows`) a row whose two
    cheapest tie takes the other of them where the first is held, and a row with one edge leaves
    it to its holder, as :func:`augmenting_row_reduction` does: else two rows would trade a column
    back and forth at no cost."""
    for _ in prange(threads):
        made, allowed = 0, 0
        while shared[2] == 0:
            at = fetch_add(shared, 0, 1)
            if at >= rows.shape[0]:
                break
            i = rows[at]
            while i >= 0:
                if allowed == 0:
                    allowed = claim_bids(shared, budget)
                    if allowed == 0:
                        break
                w1, w2, e1 = two_cheapest(indptr, indices, costs, v, i)
                if e1 < 0:
                    shared[2] = 1
                    break
                if eps == 0.0 and w2 == w1 and row4col[indices[e1]] >= 0:
                    e1 = _other_cheapest(indptr, indices, costs, v, i, e1, w1)  # a tie: the other column
                elif eps == 0.0 and w2 == np.inf and row4col[indices[e1]] >= 0:
                    break  # a lone edge to a held column: left to the searches
                j1 = indices[e1]
                lock(locks, j1)
                if costs[e1] - v[j1] != w1:  # outbid meanwhile: bid again
                    unlock(locks, j1)
                    continue
                holder = outbid(v, col4row, row4col, i, j1, w1, w2, lone_gap, eps)
                unlock(locks, j1)
                if holder >= 0 and not chase:
                    displaced[fetch_add(shared, 4, 1)] = holder
                    holder = -1
                i = holder
                made += 1
                allowed -= 1
        fetch_add(shared, 3, made)


def compile_team_kernels() -> None:
    """Compile (or load from the cache) the team's twins of :func:`bid_in_parallel`,
    :func:`reverse_bids_in_parallel` and :func:`search_on_the_team`, for both column index types
    of a core: small solves never run them (what :func:`dlap.warmup.for_large_solves` leaves
    compiled)."""
    for index_dtype in (np.int32, np.int64):
        one, none, edge = np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64), np.zeros(1, dtype=index_dtype)
        bid_in_parallel.parallel(np.array([0, 1]), edge, np.zeros(1), np.zeros(1), np.full(1, -1), np.full(1, -1), 1.0,
                                 1.0, one, one.copy(), 1, np.zeros(5, dtype=np.int64), 1, True, none)
        reverse_bids_in_parallel.parallel(np.array([0, 1]), edge, np.zeros(1), np.zeros(1), np.zeros(1), np.full(1, -1),
                                          np.full(1, -1), 1.0, 1.0, none, one.copy(), 1, np.zeros(4, dtype=np.int64), 1)
        search_on_the_team.parallel(np.array([0, 1]), edge, np.zeros(1), np.zeros(1), np.zeros(1), np.full(1, -1),
                                    np.full(1, -1), one, np.full((1, 1), np.inf), np.empty((1, 1), dtype=np.int64),
                                    np.zeros((1, 1), dtype=np.bool_), np.empty((1, 1), dtype=np.int64), np.empty((1, 1)),
                                    np.empty((1, 1), dtype=np.int64), np.full((1, 1), -1), np.empty((1, 1), dtype=np.int64),
                                    np.zeros(1, dtype=np.int64), np.zeros(5, dtype=np.int64), np.empty(1, dtype=np.int64),
                                    np.zeros(3, dtype=np.int64), 1, 1)


def scaled_auction(indptr, indices, costs, col_indptr, col_rows, col_costs, v, col4row, row4col, eps, eps_end,
                   factor, lone_gap, check_after, bid_limit, reached, counters, matchable: bool = False,
                   between_phases=None) -> bool:
    """Bertsekas' auction with ε-scaling on a sparse graph, from prices ``v`` and a matching: each
    phase frees the rows that break ε-complementary slackness (:func:`release_loose_rows`), and
    each free row takes its cheapest column ``c - v``, lowering its price by the gap to its second
    cheapest plus ε and displacing its holder (a row with one edge bids ``lone_gap`` plus ε, at
    least the spread of the costs); on a thread team and a graph of at least ``TEAM_AUCTION_ROWS``
    rows the team bids first (:func:`bid_in_parallel`: chasing displaced rows once every row has
    been matched, and on a square graph from the first phase on, where the sweeps left the last
    free rows' price wars to one thread; the chase of a Hall violator's war ends at the phase's
    ``check_after`` bids; a rectangular graph's first phase sweeps, which measured faster there:
    docs/benchmarks.md, "Chasing from the first phase"), then one thread bids for the rows left
    (:func:`auction_phase`: Gauss-Seidel, one free row at a time); on a rectangular graph (fewer
    rows than columns, each row's columns ascending) the unassigned columns then bid in reverse
    (:func:`reverse_auction`, on the team where the forward bids start there; the graph's columns
    ``col_indptr``/``col_rows``/``col_costs``); then ε is divided by ``factor``
    until it reaches ``eps_end``. Leaves every row assigned within ``eps_end`` of its cheapest
    column, and unassigned columns at price 0, the highest. Returns False where the rows in sight
    have no perfect matching: a row without edges, or a free row with no augmenting path at all
    (:func:`auction_phase`), ``reached[:counters[2]]`` then listing rows the core gives fewer
    columns than themselves; or more than ``bid_limit`` bids in a phase (a guard;
    ``counters[2] = 0``). ``counters``: [0] bids, [1] phases, [2] as said. ``matchable``: the
    graph is known to match every row (fewer of its edges did); else that is known once every row
    has been matched. ``between_phases``: called before each phase (it may raise to end the solve)."""
    team = numba.get_num_threads() > 1 and indptr.shape[0] - 1 >= TEAM_AUCTION_ROWS
    locks = np.zeros(v.shape[0], dtype=np.int64) if team else None  # the columns' (the rows' in reverse: n <= m)
    square = indptr.shape[0] - 1 == v.shape[0]
    matchable = matchable or bool(np.all(col4row >= 0))
    while True:
        if between_phases is not None:
            between_phases()
        release_loose_rows(indptr, indices, costs, v, col4row, row4col, eps)
        bids = bid_on_the_team(indptr, indices, costs, v, col4row, row4col, eps, lone_gap, locks,
                               bid_limit if matchable else min(check_after, bid_limit), matchable or square) if team else 0
        if not auction_phase(indptr, indices, costs, v, col4row, row4col, eps, lone_gap, check_after, bid_limit,
                             matchable, bids, reached, counters):
            return False
        if not square:
            reversed_bids = reverse_auction(indptr, indices, costs, col_indptr, col_rows, col_costs, v, col4row,
                                            row4col, eps, bid_limit, locks)
            if reversed_bids < 0:
                counters[2] = 0
                return False
            counters[0] += reversed_bids
        matchable = True
        if eps <= eps_end:
            return True
        eps = max(eps / factor, eps_end)


def bid_on_the_team(indptr, indices, costs, v, col4row, row4col, eps, lone_gap, locks, budget, chase) -> int:
    """The free rows' bids of one ε-phase on the thread team (:func:`bid_in_parallel`), at most
    ``budget``: chasing the rows they displace, or in sweeps, each of the rows the one before
    displaced, down to ``TEAM_SWEEP_ROWS`` of them. Returns how many bids were made; the rows
    left free are the serial bids' (:func:`auction_phase`)."""
    rows = np.flatnonzero(col4row < 0)
    displaced = np.empty(0 if chase else rows.shape[0], dtype=np.int64)
    shared = np.zeros(5, dtype=np.int64)
    while True:
        bid_in_parallel(indptr, indices, costs, v, col4row, row4col, eps, lone_gap, rows, locks, budget, shared,
                        numba.get_num_threads(), chase, displaced)
        if chase or shared[2] or shared[4] < TEAM_SWEEP_ROWS:
            return int(shared[3])
        rows = displaced[: shared[4]].copy()
        shared[0] = shared[4] = 0


@njit(cache=True)
def auction_phase(indptr, indices, costs, v, col4row, row4col, eps, lone_gap, check_after, bid_limit, matchable, bids,
                  reached, counters):
    """The rest of one ε-phase's forward bids of :func:`scaled_auction` after ``bids`` bids, on one
    thread (Gauss-Seidel): the free rows bid one at a time, each displaced holder bidding next once
    every row has been matched (``matchable``: its edges and the columns it bids for are the
    bidder's neighbours, still in the caches; until then it queues behind the free rows: chasing
    it would follow the price war of a core without a perfect matching for longer). Returns False
    where the rows in sight have no perfect matching (a row without edges, or a free row with no
    augmenting path at all, costs ignored: :func:`dead_end`; the next row to bid, asked once the
    phase's bids reach ``check_after`` and after each ``check_after`` more, until every row has
    been matched once: the price war of a Hall violator goes on among its own free rows), or past
    ``bid_limit`` bids (see :func:`scaled_auction`)."""
    n = indptr.shape[0] - 1
    size = n + 1
    queue = np.empty(size, dtype=np.int64)
    waiting = 0
    for i in range(n):
        if col4row[i] < 0:
            queue[waiting] = i
            waiting += 1
    head, tail = 0, waiting
    check = check_after
    chase = -1
    while waiting or chase >= 0:
        if bids >= check and not matchable:
            counters[2] = dead_end(indptr, indices, col4row, row4col, queue[head], reached)
            if counters[2]:
                counters[0] += bids
                return False
            check += check_after
        if chase >= 0:
            i, chase = chase, -1
        else:
            i = queue[head]
            head = head + 1 if head + 1 < size else 0
            waiting -= 1
        w1, w2, e1 = two_cheapest(indptr, indices, costs, v, i)
        if e1 < 0 or bids >= bid_limit:
            reached[0] = i
            counters[0], counters[2] = counters[0] + bids, 1 if e1 < 0 else 0
            return False
        bids += 1
        holder = outbid(v, col4row, row4col, i, indices[e1], w1, w2, lone_gap, eps)
        if holder >= 0:
            if matchable:
                chase = holder
            else:
                queue[tail] = holder
                tail = tail + 1 if tail + 1 < size else 0
                waiting += 1
    counters[0] += bids
    counters[1] += 1
    return True


@njit(cache=True)
def dead_end(indptr, indices, col4row, row4col, row, reached):
    """0 where a path alternating between the graph's edges and the matching leads from the free
    ``row`` to a free column (costs ignored: :func:`match_rows` on copies); else how many rows
    its search reached, listed in ``reached``: they and the columns they reach, all matched among
    them, are a set of rows with fewer columns than rows, which no matching of every row has."""
    counters = np.zeros(3, dtype=np.int64)
    rows = np.full(1, row, dtype=np.int64)
    none = np.empty(0, dtype=np.int64)
    if match_rows(indptr, indices, col4row.copy(), row4col.copy(), rows, reached, counters, none, none, none) < 0:
        return 0
    return counters[2]


def reverse_auction(indptr, indices, costs, col_indptr, col_rows, col_costs, v, col4row, row4col, eps, bid_limit,
                    locks) -> int:
    """Reverse iterations for a rectangular graph, every row assigned (Bertsekas & Castañon,
    "A forward/reverse auction algorithm for asymmetric assignment problems", 1992): with the
    level ``λ``, the highest price of an assigned column, each unassigned column priced below it
    takes the row with its cheapest ``c - u`` (``u`` a row's value of its own column), raising
    its price to the second cheapest plus ε (at most ``λ``), and the column that row leaves bids
    next; a column no row prefers by more than ε is raised to ``λ``. ε-complementary slackness
    is kept. Then the unassigned columns are set to ``λ`` and every price lowered by ``λ``:
    unassigned columns at 0, assigned ones at most 0 (a rectangular matrix's dual). The bids run
    on the thread team where ``locks`` (zeros, one a row at least) is given
    (:func:`reverse_bids_in_parallel`), else on one thread (:func:`reverse_bids`). Returns the
    bids, or -1 past ``bid_limit``."""
    u = np.empty(col4row.shape[0])
    level = reverse_level(indptr, indices, costs, v, col4row, row4col, u)
    if level == -np.inf:
        return 0
    if locks is None:
        bids = reverse_bids(col_indptr, col_rows, col_costs, u, v, col4row, row4col, eps, level, bid_limit)
    else:
        columns = np.flatnonzero((row4col < 0) & (v < level))
        shared = np.zeros(4, dtype=np.int64)
        reverse_bids_in_parallel(col_indptr, col_rows, col_costs, u, v, col4row, row4col, eps, level, columns, locks,
                                 bid_limit, shared, numba.get_num_threads())
        bids = -1 if shared[2] else int(shared[3])
    if bids >= 0:
        lower_to_level(v, row4col, level)
    return bids


@prange_kernel
def reverse_level(indptr, indices, costs, v, col4row, row4col, u):
    """The reverse bids' level ``λ`` (the highest price of an assigned column; -inf: none), and
    each row's value of its own column, ``u = c - v`` (its edge found by bisection: a row's
    columns ascend)."""
    for i in prange(col4row.shape[0]):
        j = col4row[i]
        e = own_edge(indptr, indices, i, j)
        u[i] = costs[e] - v[j]
    level = -np.inf
    for j in prange(v.shape[0]):
        if row4col[j] >= 0:
            level = max(level, v[j])
    return level


@njit(cache=True, inline="always")
def take_row(u, v, col4row, row4col, j, i, cost, w2, level, eps):
    """Column ``j``'s reverse bid for row ``i`` (their cost ``cost``; the column's second cheapest
    ``c - u``: ``w2``): its price rises to ``w2`` plus ε, at most ``λ``, ``i`` goes to ``j``;
    returns the column ``i`` held, now free."""
    v[j] = min(level, w2 + eps)
    left = col4row[i]
    row4col[left] = -1
    col4row[i], row4col[j] = j, i
    u[i] = cost - v[j]
    return left


@njit(cache=True)
def reverse_bids(col_indptr, col_rows, col_costs, u, v, col4row, row4col, eps, level, bid_limit):
    """:func:`reverse_auction`'s bids on one thread: the unassigned columns below ``level`` in a
    queue, each column a bid leaves free queued behind them. Returns the bids, or -1 past ``bid_limit``."""
    m = v.shape[0]
    size = m + 1
    queue = np.empty(size, dtype=np.int64)
    waiting = 0
    for j in range(m):
        if row4col[j] < 0 and v[j] < level:
            queue[waiting] = j
            waiting += 1
    head, tail, bids = 0, waiting, 0
    while waiting:
        j = queue[head]
        head = head + 1 if head + 1 < size else 0
        waiting -= 1
        w1, w2, e1 = two_cheapest(col_indptr, col_rows, col_costs, u, j)
        if level <= w1 + eps:
            v[j] = level
            continue
        if bids >= bid_limit:
            return -1
        bids += 1
        left = take_row(u, v, col4row, row4col, j, col_rows[e1], col_costs[e1], w2, level, eps)
        if v[left] < level:
            queue[tail] = left
            tail = tail + 1 if tail + 1 < size else 0
            waiting += 1
    return bids


@prange_kernel
def reverse_bids_in_parallel(col_indptr, col_rows, col_costs, u, v, col4row, row4col, eps, level, columns, locks,
                             budget, shared, threads):
    """:func:`reverse_auction`'s bids on the thread team, asynchronously, as :func:`bid_in_parallel`
    bids forward: each of the ``threads`` takes the next of the unassigned ``columns``
    (``shared[0]``: how many were taken) and bids, then bids for the column its bid left free, until
    that column needs no bid. A bid locks its row (``locks``, 0 where free) and goes through only
    where the row's value ``u`` is still the one the bid was computed from; the other values it
    read may be older, hence higher (a reverse bid only lowers its row's value), so its second
    cheapest is at most the true one and ε-complementary slackness is kept. Bids are claimed
    ``SHARED_BIDS`` at a time (``shared[1]``), at most ``budget`` in all; past it ``shared[2]`` is
    set and the threads stop. ``shared[3]``: the bids made."""
    for _ in prange(threads):
        made, allowed = 0, 0
        while shared[2] == 0:
            at = fetch_add(shared, 0, 1)
            if at >= columns.shape[0]:
                break
            j = columns[at]
            while j >= 0:
                w1, w2, e1 = two_cheapest(col_indptr, col_rows, col_costs, u, j)
                if level <= w1 + eps:
                    v[j] = level
                    break
                if allowed == 0:
                    allowed = claim_bids(shared, budget)
                    if allowed == 0:
                        break
                i = col_rows[e1]
                lock(locks, i)
                if col_costs[e1] - u[i] != w1:  # taken meanwhile: bid again
                    unlock(locks, i)
                    continue
                left = take_row(u, v, col4row, row4col, j, i, col_costs[e1], w2, level, eps)
                unlock(locks, i)
                made += 1
                allowed -= 1
                j = left if v[left] < level else -1
        fetch_add(shared, 3, made)


@prange_kernel
def lower_to_level(v, row4col, level):
    """The unassigned columns' prices set to ``level``, then every price lowered by it."""
    for j in prange(v.shape[0]):
        v[j] = 0.0 if row4col[j] < 0 else v[j] - level


def largest_duals(indptr, indices, costs, u, v, col4row, row4col) -> None:
    """The largest column duals ``v <= 0`` that keep the core's edges feasible and every row's
    matched pair tight (the duals nearest 0, so the least rounding beside a small objective), from
    feasible ones: shortest paths from a source joined to every column at ``-v``, along each
    row's edges at their reduced costs (Johnson's reweighting), ``v`` the distances plus the old
    ``v``. Every row must be matched; unmatched columns stay at 0. ``u`` is then each row's
    cheapest ``c - v``."""
    largest_column_duals(indptr, indices, costs, u, v, row4col)
    row_duals(indptr, indices, costs, v, u)


@njit(cache=True)
def largest_column_duals(indptr, indices, costs, u, v, row4col):
    """The column duals of :func:`largest_duals`."""
    m = v.shape[0]
    dist = np.empty(m)
    done = np.zeros(m, dtype=np.bool_)
    keys, items = np.empty(m, dtype=np.float64), np.empty(m, dtype=np.int64)
    at = np.full(m, -1, dtype=np.int64)
    size = 0
    for j in range(m):
        dist[j] = max(-v[j], 0.0)
        size = _lower_key(keys, items, at, size, dist[j], j)
    while size > 0:
        k = _pop_nearest(keys, items, at, size)
        size -= 1
        done[k] = True
        i = row4col[k]
        if i < 0:
            continue
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            r = dist[k] + max(costs[e] - u[i] - v[j], 0.0)
            if not done[j] and r < dist[j]:
                dist[j] = r
                size = _lower_key(keys, items, at, size, r, j)
    for j in range(m):
        v[j] = min(dist[j] + v[j], 0.0) if row4col[j] >= 0 else 0.0
