"""A k-d tree over a point set for the sparse-core engine (dlap/points/core.py): each row's nearest
columns and the pricing of every pair, visiting only the boxes of points where the answer can be.

The tree splits the points at the median of their widest coordinate until a box holds at most
``leaf_size``; every node keeps its points' bounding box. A box's distance bounds (the gaps to its
faces, combined by the metric) are lower than every point's cost in float64 (each gap is at most the
point's own difference, and rounding is monotone), shrunk by ``BOUND_SLACK`` for the operations whose
rounding is not (powers, cosine's normalisation). So a query that skips a box whose bound already
rules its points out gives exactly the brute-force answer: the same nearest columns, and every pair
whose reduced cost ``c_ij - u_i - v_j`` is negative (a box is skipped when its lowest cost, less
``u_i`` and the box's largest ``v_j``, is at least 0), ties broken by the lower column as there.

Cosine boxes are made over the normalised points, where ``1 - cos = |x - y|**2 / 2``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from .numba_setup import njit, prange_kernel  # first: cache folder and thread wait policy, before any kernel
from .points import insert_sorted, pair_cost, precedes

#: a box's cost bound is shrunk by this relative (and, for cosine, absolute) margin, far above the
#: rounding of the costs it bounds
BOUND_SLACK = 1e-12
#: points per leaf
LEAF_SIZE = 16
#: rows a thread takes at a time in the parallel queries
QUERY_CHUNK = 64
_ULP = 2.0**-52


@njit(cache=True)
def build(points, leaf_size):
    """The tree over ``points`` (m x d, float64): ``perm`` (the points in tree order), per node
    its range ``[start[k], stop[k])`` of ``perm``, its children (-1 for a leaf; a child comes
    after its parent) and its box ``low[k]``, ``high[k]``. A node's points are split at the median
    of their widest coordinate (:func:`split_at`); a leaf's are in the order of its parent's
    split coordinate."""
    m, d = points.shape
    capacity = 2 * (2 * m // max(leaf_size, 1) + 2)
    perm = np.arange(m)
    start = np.empty(capacity, dtype=np.int64)
    stop = np.empty(capacity, dtype=np.int64)
    left = np.full(capacity, -1, dtype=np.int64)
    right = np.full(capacity, -1, dtype=np.int64)
    axis = np.full(capacity, -1, dtype=np.int64)  # the coordinate a node's parent split at
    low = np.empty((capacity, d))
    high = np.empty((capacity, d))
    stack = np.empty(capacity, dtype=np.int64)
    keys = np.empty(m)
    start[0], stop[0] = 0, m
    n_nodes, depth = 1, 1
    stack[0] = 0
    while depth:
        depth -= 1
        k = stack[depth]
        lo, hi = start[k], stop[k]
        for c in range(d):
            low[k, c] = np.inf
            high[k, c] = -np.inf
        for t in range(lo, hi):
            for c in range(d):
                x = points[perm[t], c]
                low[k, c] = min(low[k, c], x)
                high[k, c] = max(high[k, c], x)
        widest, extent = 0, -1.0
        for c in range(d):
            if high[k, c] - low[k, c] > extent:
                widest, extent = c, high[k, c] - low[k, c]
        if hi - lo <= leaf_size or extent <= 0:  # (no extent: identical points, one leaf)
            if axis[k] >= 0:
                for t in range(lo, hi):
                    keys[t] = points[perm[t], axis[k]]
                _insertion_sort(keys, perm, lo, hi)
            continue
        for t in range(lo, hi):
            keys[t] = points[perm[t], widest]
        mid = (lo + hi) // 2
        split_at(keys, perm, lo, hi, mid)
        for child, a, b in ((0, lo, mid), (1, mid, hi)):
            start[n_nodes], stop[n_nodes], axis[n_nodes] = a, b, widest
            if child == 0:
                left[k] = n_nodes
            else:
                right[k] = n_nodes
            stack[depth] = n_nodes
            depth += 1
            n_nodes += 1
    return perm, start[:n_nodes], stop[:n_nodes], left[:n_nodes], right[:n_nodes], low[:n_nodes], high[:n_nodes]


@njit(cache=True)
def split_at(keys, items, lo, hi, kth):
    """``keys[lo:hi]`` (and ``items`` with them) reordered so that none before ``kth`` is larger
    than ``keys[kth]`` and none after it smaller (Hoare's selection, median-of-three pivots):
    linear time, where a sort of every node cost the tree its n log^2 n."""
    hi -= 1
    while hi > lo:
        mid = (lo + hi) >> 1
        if keys[mid] < keys[lo]:
            _swap(keys, items, lo, mid)
        if keys[hi] < keys[lo]:
            _swap(keys, items, lo, hi)
        if keys[hi] < keys[mid]:
            _swap(keys, items, mid, hi)
        pivot = keys[mid]
        i, j = lo, hi
        while i <= j:
            while keys[i] < pivot:
                i += 1
            while keys[j] > pivot:
                j -= 1
            if i <= j:
                _swap(keys, items, i, j)
                i += 1
                j -= 1
        if kth <= j:
            hi = j
        elif kth >= i:
            lo = i
        else:
            break


@njit(cache=True, inline="always")
def _swap(keys, items, i, j):
    keys[i], keys[j] = keys[j], keys[i]
    items[i], items[j] = items[j], items[i]


@njit(cache=True)
def _insertion_sort(keys, items, lo, hi):
    """``keys[lo:hi]`` ascending, ``items`` with them, equal keys in their order (a leaf's few)."""
    for t in range(lo + 1, hi):
        key, item = keys[t], items[t]
        at = t
        while at > lo and keys[at - 1] > key:
            keys[at], items[at] = keys[at - 1], items[at - 1]
            at -= 1
        keys[at], items[at] = key, item


@njit(cache=True, inline="always")
def box_cost_bound(x, low, high, k, metric, p, sign):
    """A lower bound on ``sign * metric(x, y)`` over the points y of box ``k``, in the tree's
    coordinates (normalised for cosine)."""
    s = 0.0
    for c in range(x.shape[0]):
        if sign > 0:
            g = max(low[k, c] - x[c], x[c] - high[k, c], 0.0)
        else:
            g = max(abs(x[c] - low[k, c]), abs(x[c] - high[k, c]))
        if metric == 2:
            s += g
        elif metric == 3:
            s += g**p
        else:
            s += g * g
    if metric == 0:
        s = math.sqrt(s)
    elif metric == 3:
        s = s ** (1.0 / p)
    elif metric == 4:
        s = 0.5 * s
    if sign > 0:
        s = s * (1.0 - BOUND_SLACK) - (BOUND_SLACK if metric == 4 else 0.0)
        return s
    s = s * (1.0 + BOUND_SLACK) + (BOUND_SLACK if metric == 4 else 0.0)
    return -s


@njit(cache=True)
def _query_point(a, i, norms, metric):
    """Row i of ``a`` in the tree's coordinates (float64; normalised for cosine)."""
    x = np.empty(a.shape[1])
    for c in range(a.shape[1]):
        x[c] = np.float64(a[i, c])
        if metric == 4:
            x[c] /= norms[i]
    return x


@njit(cache=True, inline="always")
def _push_children(stack, bound, depth, first, second, first_bound, second_bound):
    """Push a node's two children with their bounds, the one with the lower bound last (popped
    first: the best-first descent of the queries); returns the new depth."""
    if second_bound < first_bound:
        first, second, first_bound, second_bound = second, first, second_bound, first_bound
    stack[depth], bound[depth] = second, second_bound
    stack[depth + 1], bound[depth + 1] = first, first_bound
    return depth + 2


@prange_kernel
def nearest_columns(tree, a, b, na, nb, metric, p, sign, k, index, cost):
    """``index[i]``, ``cost[i]``: row i's ``k`` cheapest columns of ``b``, cheapest first (ties: the
    lower column): :func:`dlap.backends.cpu.points.nearest_columns` through ``tree`` (over ``b``)."""
    perm, start, stop, left, right, low, high = tree
    n = a.shape[0]
    for chunk in prange((n + QUERY_CHUNK - 1) // QUERY_CHUNK):
        stack = np.empty(2 * 64 + 2, dtype=np.int64)
        bound = np.empty(2 * 64 + 2)
        for i in range(chunk * QUERY_CHUNK, min(n, (chunk + 1) * QUERY_CHUNK)):
            x = _query_point(a, i, na, metric)
            for t in range(k):
                cost[i, t] = np.inf
                index[i, t] = -1
            stack[0], bound[0], depth = 0, -np.inf, 1
            while depth:
                depth -= 1
                node, lb = stack[depth], bound[depth]
                if lb > cost[i, k - 1]:
                    continue
                if left[node] < 0:
                    for t in range(start[node], stop[node]):
                        j = perm[t]
                        c = pair_cost(a, b, na, nb, i, j, metric, p, sign)
                        if precedes(c, j, cost[i, k - 1], index[i, k - 1]):
                            insert_sorted(cost[i], index[i], k - 1, c, j)
                    continue
                near, far = left[node], right[node]
                near_bound = box_cost_bound(x, low, high, near, metric, p, sign)
                far_bound = box_cost_bound(x, low, high, far, metric, p, sign)
                depth = _push_children(stack, bound, depth, near, far, near_bound, far_bound)


@njit(cache=True)
def column_ceilings(tree, v, out):
    """``out[k]``: the largest ``v`` over the points of node ``k`` (children after parents, so a
    reverse sweep fills the leaves first)."""
    perm, start, stop, left, right, _, _ = tree
    for node in range(start.shape[0] - 1, -1, -1):
        if left[node] < 0:
            top = -np.inf
            for t in range(start[node], stop[node]):
                top = max(top, v[perm[t]])
            out[node] = top
        else:
            out[node] = max(out[left[node]], out[right[node]])


@njit(cache=True, inline="always")
def _pricing_bound(x, low, high, node, metric, p, sign, ui, ceilings):
    """A lower bound on the reduced costs ``c - u_i - v_j`` of the pairs of box ``node``: its
    lowest cost less ``u_i`` and its largest ``v_j`` (``ceilings``)."""
    return box_cost_bound(x, low, high, node, metric, p, sign) - ui - ceilings[node]


@prange_kernel
def price(tree, ceilings, a, b, na, nb, metric, p, sign, u, v, rtol, atol, index, reduced, count):
    """:func:`dlap.backends.cpu.points.price` through ``tree`` (over ``b``, with ``ceilings`` from
    :func:`column_ceilings` of ``v``): a box's lowest cost less ``u_i`` and its largest ``v_j`` bounds
    its pairs' reduced costs from below; a box is skipped where that bound is at least 0 (no pair
    of it can violate) or, once the row's list is full, above its last violator (none of it can
    enter the list), the nearer child first. The same lists (ties: the lower column) and, for
    rows of fewer violators than the list holds, the same counts; a row of more counts at least
    as many as its list holds."""
    perm, start, stop, left, right, low, high = tree
    n, cap = a.shape[0], index.shape[1]
    for chunk in prange((n + QUERY_CHUNK - 1) // QUERY_CHUNK):
        stack, bounds = np.empty(2 * 64 + 2, dtype=np.int64), np.empty(2 * 64 + 2)
        for i in range(chunk * QUERY_CHUNK, min(n, (chunk + 1) * QUERY_CHUNK)):
            x = _query_point(a, i, na, metric)
            found = 0
            stack[0], bounds[0], depth = 0, _pricing_bound(x, low, high, 0, metric, p, sign, u[i], ceilings), 1
            while depth:
                depth -= 1
                node, bound = stack[depth], bounds[depth]
                if bound >= 0 or (0 < cap <= found and bound > reduced[i, cap - 1]):
                    continue
                if left[node] >= 0:
                    depth = _push_children(stack, bounds, depth, left[node], right[node],
                                           _pricing_bound(x, low, high, left[node], metric, p, sign, u[i], ceilings),
                                           _pricing_bound(x, low, high, right[node], metric, p, sign, u[i], ceilings))
                    continue
                for t in range(start[node], stop[node]):
                    j = perm[t]
                    c = pair_cost(a, b, na, nb, i, j, metric, p, sign)
                    r = c - u[i] - v[j]
                    if r < -(rtol * (abs(c) + abs(u[i]) + abs(v[j])) + atol):
                        if found < cap:
                            insert_sorted(reduced[i], index[i], found, r, j)
                        elif precedes(r, j, reduced[i, cap - 1], index[i, cap - 1]):
                            insert_sorted(reduced[i], index[i], cap - 1, r, j)
                        found += 1
            count[i] = found


@prange_kernel
def reduced_minima(tree, ceilings, a, b, na, nb, metric, p, sign, scale, w, low, error):
    """``low[i]``: the least ``d_ij - w_j`` over every column ``j`` of ``tree`` (over ``b``, with
    ``ceilings`` from :func:`column_ceilings` of ``w``), ``d_ij = sign * metric * scale`` as
    :func:`dlap.backends.cpu.points.block_costs` computes it, ``-`` rounded as NumPy rounds it;
    ``error[i]``: the least rounding error (TwoSum) among the columns attaining it, so ``low +
    error`` is the exact minimum (:func:`dlap.certificate.float_scan`). A box is skipped only where
    its bound less its largest ``w``, two roundings down, is above the minimum found two roundings
    up: no column of it can attain the exact minimum."""
    perm, start, stop, left, right, box_low, box_high = tree
    n = a.shape[0]
    for chunk in prange((n + QUERY_CHUNK - 1) // QUERY_CHUNK):
        stack = np.empty(2 * 64 + 2, dtype=np.int64)
        bound = np.empty(2 * 64 + 2)
        for i in range(chunk * QUERY_CHUNK, min(n, (chunk + 1) * QUERY_CHUNK)):
            x = _query_point(a, i, na, metric)
            best, best_error = np.inf, 0.0
            stack[0], bound[0], depth = 0, -np.inf, 1
            while depth:
                depth -= 1
                node = stack[depth]
                if bound[depth] > best + 4 * _ULP * abs(best):
                    continue
                if left[node] < 0:
                    for t in range(start[node], stop[node]):
                        j = perm[t]
                        d = pair_cost(a, b, na, nb, i, j, metric, p, sign) * scale
                        r = d - w[j]
                        if r <= best:
                            back = r - d
                            e = (d - (r - back)) + (-w[j] - back)
                            if r < best or e < best_error:
                                best, best_error = r, e
                    continue
                near, far = left[node], right[node]
                near_bound = _reduced_bound(x, box_low, box_high, near, metric, p, sign, scale, ceilings)
                far_bound = _reduced_bound(x, box_low, box_high, far, metric, p, sign, scale, ceilings)
                depth = _push_children(stack, bound, depth, near, far, near_bound, far_bound)
            low[i] = best
            error[i] = best_error if np.isfinite(best) else 0.0


@njit(cache=True, inline="always")
def _reduced_bound(x, box_low, box_high, node, metric, p, sign, scale, ceilings):
    """A lower bound on ``d - w`` over box ``node``: its cost bound scaled, less its largest
    ``w``, two roundings down."""
    r = box_cost_bound(x, box_low, box_high, node, metric, p, sign) * scale - ceilings[node]
    return r - 4 * _ULP * abs(r) - 1e-300
