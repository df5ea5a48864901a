"""CPU kernels of the sparse-core engine (dlap/points/core.py): the metric between two points, each
row's nearest columns, pricing every pair against the duals, dense blocks for the certificate, and
the exact solve of the sparse core by shortest augmenting paths.

Costs are ``sign * metric(a_i, b_j)`` in float64 (dlap/points/metrics.py defines the metrics), so
the engine always minimises; ``sign`` is -1 when the caller maximises.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .numba_setup import prange_kernel  # first: cache folder and thread wait policy, before any kernel
from .paths import flip_path


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
    m, cap = b.shape[0], index.shape[1]
    for i in prange(a.shape[0]):
        found = 0
        worst = 0.0  # the least negative kept, once the buffer is full
        for j in range(m):
            c = pair_cost(a, b, na, nb, i, j, metric, p, sign)
            r = c - u[i] - v[j]
            if r < -(rtol * (abs(c) + abs(u[i]) + abs(v[j])) + atol):
                if found < cap:
                    t = found
                elif r < worst:
                    t = cap - 1
                else:
                    found += 1
                    continue
                insert_sorted(reduced[i], index[i], t, r, j)
                found += 1
                worst = reduced[i, min(found, cap) - 1]
        count[i] = found


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


@njit(cache=True)
def _sift_up(keys, items, t):
    while t > 0:
        parent = (t - 1) >> 1
        if keys[parent] <= keys[t]:
            break
        keys[parent], keys[t] = keys[t], keys[parent]
        items[parent], items[t] = items[t], items[parent]
        t = parent


@njit(cache=True)
def _pop(keys, items, size):
    """Remove the heap's smallest (returned) from a heap of ``size`` entries."""
    key, item = keys[0], items[0]
    size -= 1
    keys[0], items[0] = keys[size], items[size]
    t = 0
    while True:
        left = 2 * t + 1
        if left >= size:
            break
        child = left + 1 if left + 1 < size and keys[left + 1] < keys[left] else left
        if keys[t] <= keys[child]:
            break
        keys[t], keys[child] = keys[child], keys[t]
        items[t], items[child] = items[child], items[t]
        t = child
    return key, item


@njit(cache=True)
def match_rows(indptr, indices, col4row, row4col, rows, scanned, counters):
    """A matching of each row of ``rows`` in turn over the graph's edges, costs ignored: a
    breadth-first search of alternating paths from the row to the first free column it sees.
    Returns -1, or the position in ``rows`` of a row no path leaves from; ``scanned[:counters[2]]``
    then lists the rows its search reached. ``counters``: [0] searches, [1] columns reached, [2]
    rows in the failed search."""
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
                j = indices[e]
                if seen[j]:
                    continue
                seen[j] = True
                touched[n_touched] = j
                n_touched += 1
                pred[j] = i
                if row4col[j] < 0:
                    sink = j
                    break
                queue[tail] = row4col[j]
                tail += 1
        counters[1] += n_touched
        for t in range(n_touched):
            seen[touched[t]] = False
        if sink < 0:
            scanned[:tail] = queue[:tail]
            counters[2] = tail
            return position
        flip_path(pred, col4row, row4col, sink, start)
    return -1


@njit(cache=True)
def augment_rows(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters):
    """Shortest augmenting paths on a sparse graph (CSR rows ``indptr``/``indices``/``costs``,
    absent pairs forbidden), one per row of ``rows`` in order, from feasible duals ``u``, ``v``
    and a matching of tight pairs (Crouse's rectangular algorithm, IEEE TAES 2016, on a heap:
    columns never reached cost nothing). Each search ends at the nearest unmatched column; the
    duals stay feasible, matched pairs tight, and unmatched columns' duals are never changed.

    Returns -1, or the position in ``rows`` of a row no path leaves from; ``scanned[:counters[2]]``
    then lists the rows its search reached (the engine adds edges from them and asks again).
    ``counters``: [0] searches, [1] columns reached, [2] rows in the failed search."""
    m = v.shape[0]
    dist = np.full(m, np.inf)
    pred = np.empty(m, dtype=np.int64)
    done = np.zeros(m, dtype=np.bool_)
    touched = np.empty(m, dtype=np.int64)
    keys = np.empty(16, dtype=np.float64)
    items = np.empty(16, dtype=np.int64)
    tree_rows = np.empty(u.shape[0], dtype=np.int64)
    for position in range(rows.shape[0]):
        start = rows[position]
        if col4row[start] >= 0:
            continue
        counters[0] += 1
        n_touched, n_tree, size = 0, 0, 0
        i, base, sink = start, 0.0, -1
        while True:
            tree_rows[n_tree] = i
            n_tree += 1
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                if done[j]:
                    continue
                r = base + costs[e] - u[i] - v[j]
                if r < dist[j]:
                    if dist[j] == np.inf:
                        touched[n_touched] = j
                        n_touched += 1
                    dist[j] = r
                    pred[j] = i
                    if size == keys.shape[0]:
                        keys = np.concatenate((keys, np.empty(size, dtype=np.float64)))
                        items = np.concatenate((items, np.empty(size, dtype=np.int64)))
                    keys[size], items[size] = r, j
                    _sift_up(keys, items, size)
                    size += 1
            j = -1
            while size > 0:
                key, candidate = _pop(keys, items, size)
                size -= 1
                if not done[candidate] and key == dist[candidate]:
                    j = candidate
                    break
            if j < 0:
                break
            done[j] = True
            base = dist[j]
            if row4col[j] < 0:
                sink = j
                break
            i = row4col[j]
        counters[1] += n_touched
        if sink < 0:
            for t in range(n_tree):
                scanned[t] = tree_rows[t]
            counters[2] = n_tree
            for t in range(n_touched):
                dist[touched[t]] = np.inf
                done[touched[t]] = False
            return position
        # dual update: the search's rows and completed columns, as in Crouse's step 5
        u[start] += base
        for t in range(1, n_tree):
            r = tree_rows[t]
            u[r] += base - dist[col4row[r]]
        for t in range(n_touched):
            j = touched[t]
            if done[j]:
                v[j] -= base - dist[j]
        flip_path(pred, col4row, row4col, sink, start)
        for t in range(n_touched):
            dist[touched[t]] = np.inf
            done[touched[t]] = False
    return -1


@njit(cache=True)
def augmenting_row_reduction(indptr, indices, costs, u, v, col4row, row4col, rows, steps):
    """Jonker & Volgenant's augmenting row reduction on a sparse graph: each free row of ``rows``
    takes its cheapest column ``c - v``, lowering that column's dual to its second cheapest (so
    both tie) and displacing the holder, who bids next; at most ``steps`` bids. Columns' duals
    only go down, so unmatched columns keep theirs. Afterwards every row's dual is its cheapest
    ``c - v``, feasible on every edge and tight on its matched pair."""
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
        holder = row4col[j1]
        if first < second and second < np.inf:
            v[j1] -= second - first
        elif holder >= 0:
            if j2 < 0 or second == np.inf:
                continue
            j1, holder = j2, row4col[j2]
        if holder >= 0:
            col4row[holder] = -1
            queue[tail] = holder
            tail = (tail + 1) % size
            n_queue += 1
        col4row[i], row4col[j1] = j1, i
    row_duals(indptr, indices, costs, v, u)


@njit(cache=True)
def row_duals(indptr, indices, costs, v, u):
    """``u[i] = min_j (c_ij - v_j)`` over row i's edges: the largest row duals ``v`` allows."""
    for i in range(u.shape[0]):
        lowest = np.inf
        for e in range(indptr[i], indptr[i + 1]):
            lowest = min(lowest, costs[e] - v[indices[e]])
        u[i] = lowest



@njit(cache=True)
def release_loose_rows(indptr, indices, costs, v, col4row, row4col, eps):
    """Unassign every row whose column's ``c - v`` is more than ``eps`` above its cheapest (the
    rows that break ε-complementary slackness; with ``eps = 0``, every row not tight). Returns
    how many rows are free afterwards."""
    free = 0
    for i in range(indptr.shape[0] - 1):
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


@njit(cache=True)
def scaled_auction(indptr, indices, costs, v, col4row, row4col, eps, eps_end, factor, lone_gap, bid_limit, counters):
    """Bertsekas' auction with ε-scaling on a sparse graph (Gauss-Seidel: one free row bids at a
    time), from prices ``v`` and a matching: each phase frees the rows that break
    ε-complementary slackness (:func:`release_loose_rows`), and each free row takes its cheapest
    column ``c - v``, lowering its price by the gap to its second cheapest plus ε and displacing
    its holder (a row with one edge bids ``lone_gap`` plus ε, at least the spread of the costs);
    then ε is divided by ``factor`` until it reaches ``eps_end``. Leaves every row assigned
    within ``eps_end`` of its cheapest column. Returns False where the rows in sight have no
    perfect matching (more than ``bid_limit`` bids in a phase, or a row without edges).
    ``counters``: [0] bids, [1] phases."""
    n = indptr.shape[0] - 1
    size = n + 1
    queue = np.empty(size, dtype=np.int64)
    while True:
        release_loose_rows(indptr, indices, costs, v, col4row, row4col, eps)
        waiting = 0
        for i in range(n):
            if col4row[i] < 0:
                queue[waiting] = i
                waiting += 1
        head, tail = 0, waiting
        bids = 0
        while waiting:
            i = queue[head]
            head = head + 1 if head + 1 < size else 0
            waiting -= 1
            w1, w2, j1 = np.inf, np.inf, -1
            for e in range(indptr[i], indptr[i + 1]):
                h = costs[e] - v[indices[e]]
                if h < w2:
                    if h < w1:
                        w2, w1, j1 = w1, h, indices[e]
                    else:
                        w2 = h
            if j1 < 0 or bids >= bid_limit:
                return False
            bids += 1
            v[j1] -= (w2 - w1 if w2 < np.inf else lone_gap) + eps
            holder = row4col[j1]
            if holder >= 0:
                col4row[holder] = -1
                queue[tail] = holder
                tail = tail + 1 if tail + 1 < size else 0
                waiting += 1
            row4col[j1] = i
            col4row[i] = j1
        counters[0] += bids
        counters[1] += 1
        if eps <= eps_end:
            return True
        eps = max(eps / factor, eps_end)
