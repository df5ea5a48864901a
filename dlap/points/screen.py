"""Each row's nearest columns and the pricing of every pair through matrix products, for host
points of many coordinates under a metric of dot products (euclidean, sqeuclidean, cosine).

A scan of every pair reads the coordinates once per pair; a matrix product (BLAS) gives every
pair's cost of a block of rows at once, to within a bound of its rounding (:func:`_block`). The
pairs that bound cannot settle are computed exactly (the kernels' ``pair_costs``), so the answers
are the scan's to the bit: the same columns, the same costs, the same violators in the same
order (docs/benchmarks.md, "Point sets").
"""

from __future__ import annotations

import numpy as np

from ..certificate import rounding_errors
from .metrics import METRIC_IDS

#: the metrics a matrix product computes
SCREENED = frozenset({METRIC_IDS["euclidean"], METRIC_IDS["sqeuclidean"], METRIC_IDS["cosine"]})
#: points of at least this many coordinates are screened (2 cores, n = 6000: 24-D 0.99 s against
#: the scan's 0.93 s, 32-D 0.88 against 1.25, 48-D 1.12 against 2.12)
SCREEN_MIN_DIM = 32
#: a block of rows has at most this many pairs (its float64 costs: 64 MB)
BLOCK_PAIRS = 1 << 23
#: a row's columns within reach of its k cheapest are gathered up to this many times k (more: its
#: every column is computed exactly)
REACH_WIDTH = 4
#: float64's unit roundoff
_U = 2.0**-53


def _blocks(n_rows: int, n_cols: int):
    step = max(1, BLOCK_PAIRS // max(1, n_cols))
    for lo in range(0, n_rows, step):
        yield lo, min(n_rows, lo + step)


def _first_of_each_row(lo: int, rows, cols, keys, index, values) -> None:
    """Row ``lo + r``'s pairs ``(cols, keys)`` sorted by key, then column (the kernels' order:
    :func:`dlap.backends.cpu.points.insert_sorted`), as many as ``index`` has columns, into
    ``index`` and ``values``."""
    order = np.lexsort((cols, keys, rows))
    rows, cols, keys = rows[order], cols[order], keys[order]
    rank = np.arange(rows.shape[0]) - np.searchsorted(rows, rows)
    kept = rank < index.shape[1]
    index[lo + rows[kept], rank[kept]] = cols[kept]
    values[lo + rows[kept], rank[kept]] = keys[kept]


def _reached(reach, found, m: int):
    """The pairs :func:`dlap.backends.cpu.points.within_reach` found: each row's listed columns,
    or every column where more were within reach than it lists (rows of many near-ties)."""
    width = reach.shape[1]
    whole = found > width
    rows = np.concatenate((np.repeat(np.flatnonzero(~whole), found[~whole]), np.repeat(np.flatnonzero(whole), m)))
    listed = (np.arange(width)[None, :] < found[:, None]) & ~whole[:, None]
    cols = np.concatenate((reach[listed], np.tile(np.arange(m), int(whole.sum()))))
    return rows, cols


class Screen:
    """The products' view of rows ``a`` and columns ``b`` (host float64) under ``metric``."""

    def __init__(self, kernels, a, b, a_norms, b_norms, metric: int, p: float, sign: float):
        self.kernels, self.metric, self.p, self.sign = kernels, metric, p, sign
        self.a, self.b, self.a_norms, self.b_norms = a, b, a_norms, b_norms
        self.a64, self.b64 = a.astype(np.float64), b.astype(np.float64)
        self.a_len = np.sqrt((self.a64**2).sum(axis=1))  # the points' lengths, for the bounds
        self.b_len = np.sqrt((self.b64**2).sum(axis=1))
        self.d = a.shape[1]

    def _block(self, lo: int, hi: int):
        """Rows ``lo:hi``'s costs ``sign * metric`` from a matrix product, and for each row a
        bound on their distance to the kernels' costs (both rounded: a dot product of d terms
        errs by at most d u |x| |y| in any order of summation; a square root of a value known
        to within e, by at most sqrt(e))."""
        d, b_len, a_len = self.d, self.b_len, self.a_len[lo:hi]
        block = self.a64[lo:hi] @ self.b64.T
        self.kernels.dot_costs(block, self.a_len, b_len, self.a_norms, self.b_norms, lo, self.metric, self.sign)
        if self.metric == METRIC_IDS["cosine"]:
            bound = (2 * d + 8) * _U * (1.0 + a_len * b_len.max() / (self.a_norms[lo:hi] * self.b_norms.min()))
        else:
            bound = (2 * d + 16) * _U * (a_len + b_len.max()) ** 2
            if self.metric == METRIC_IDS["euclidean"]:
                bound = np.sqrt(bound) + 4 * _U * (a_len + b_len.max())
        return block, bound

    def _exact(self, rows, cols):
        out = np.empty(rows.shape[0])
        if out.size:
            self.kernels.pair_costs(self.a, self.b, self.a_norms, self.b_norms, self.metric, self.p, self.sign,
                                    rows, cols, out)
        return out

    def nearest_columns(self, k: int, index, cost) -> None:
        """Each row's ``k`` cheapest columns (ties: the lower column) and their costs, cheapest
        first: the columns within twice the bound of its k-th cheapest, computed exactly."""
        m = self.b.shape[0]
        k = min(k, m)
        width = REACH_WIDTH * k
        for lo, hi in _blocks(self.a.shape[0], m):
            approx, bound = self._block(lo, hi)
            reach, found = np.empty((hi - lo, width), dtype=np.int64), np.empty(hi - lo, dtype=np.int64)
            self.kernels.within_reach(approx, bound, k, reach, found)
            rows, cols = _reached(reach, found, m)
            index[lo:hi].fill(-1)
            cost[lo:hi].fill(np.inf)
            _first_of_each_row(lo, rows, cols, self._exact(rows + lo, cols), index, cost)

    def price(self, u, v, rtol: float, atol: float, index, reduced, count) -> None:
        """The kernels' pricing (:func:`dlap.backends.cpu.points.price`): the pairs whose reduced
        cost the products cannot show to be at least 0 are computed exactly, and tested as the
        scan tests them."""
        for lo, hi in _blocks(self.a.shape[0], self.b.shape[0]):
            approx, bound = self._block(lo, hi)
            flagged = np.empty(approx.shape, dtype=np.bool_)
            self.kernels.unsettled(approx, u, v, lo, bound, 8 * _U, flagged)
            rows, cols = np.nonzero(flagged)
            exact = self._exact(rows + lo, cols)
            r = exact - u[rows + lo] - v[cols]
            violated = r < -(rtol * (np.abs(exact) + np.abs(u[rows + lo]) + np.abs(v[cols])) + atol)
            count[lo:hi] = np.bincount(rows[violated], minlength=hi - lo)
            _first_of_each_row(lo, rows[violated], cols[violated], r[violated], index, reduced)

    def reduced_minima(self, scale: float, ws) -> list:
        """For each ``w`` of ``ws``: each row's least ``d_ij - w_j``, ``d_ij = sign * metric *
        scale`` (``scale`` a power of 2), and its rounding error, as
        :func:`dlap.backends.cpu.kdtree.reduced_minima` and the certificate's scan find them: the
        pairs the products cannot show to be above a row's least are computed exactly, and the
        least of their ``(reduced, error)`` is the row's. One product per block serves every ``w``."""
        n, m = self.a.shape[0], self.b.shape[0]
        found = [(np.full(n, np.inf), np.zeros(n)) for _ in ws]
        if not m:
            return found
        for lo, hi in _blocks(n, m):
            approx, bound = self._block(lo, hi)
            approx *= scale
            # each reduced cost's distance to the exact one: the products' bound, and two
            # roundings of a difference no larger than the magnitudes it is made of
            spread = bound * scale + 4 * _U * np.abs(approx).max(axis=1)
            reach, count = np.empty((hi - lo, REACH_WIDTH), dtype=np.int64), np.empty(hi - lo, dtype=np.int64)
            for w, (low, error) in zip(ws, found, strict=True):
                # the columns within twice the slack of the row's least
                self.kernels.within_reach(approx - w, spread + 4 * _U * float(np.abs(w).max()), 1, reach, count)
                rows, cols = _reached(reach, count, m)
                d = self._exact(rows + lo, cols) * scale
                exact = d - w[cols]
                errors = rounding_errors(exact, d, w[cols])
                order = np.lexsort((errors, exact, rows))
                first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
                low[lo + rows[first]] = exact[first]
                error[lo + rows[first]] = np.where(np.isfinite(exact[first]), errors[first], 0.0)
        return found
