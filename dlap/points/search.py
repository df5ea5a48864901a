"""Each row's nearest columns and the pricing of every pair, for the sparse-core engine: through
k-d trees on the host (:mod:`dlap.backends.cpu.kdtree`) where the points have a few coordinates,
whichever device holds them (but a GPU prices up to ``GPU_PRICING_PAIRS`` pairs itself, and any
number of points of ``GPU_PRICING_MIN_DIM`` or more coordinates); else,
for host points and a metric of dot products, through matrix products (:mod:`.screen`); else by
the device's kernels, which scan every pair. All give the same answers (the GPU's costs are the
CPU's to the bit)."""

from __future__ import annotations

import numpy as np

from ..device import array_module, is_device_array, to_host
from .metrics import METRIC_IDS
from .screen import SCREEN_MIN_DIM, SCREENED, Screen

#: k-d trees answer the queries up to this many coordinates; above it most boxes are near every
#: point and the kernels' scan of every pair is faster
TREE_MAX_DIM = 8
#: points on a GPU are priced by its scan of every pair (a warp a row) up to this many pairs,
#: beyond it through the host's trees (one H200, a round: 5-D image pixels 43520 x 49152 0.13 s
#: against 0.60 s, 2-D shifted clouds of 20000 0.06 against 0.23, uniform 3-D 50000 even, uniform
#: 2-D 100000 0.21 against 0.15: docs/benchmarks.md, "Pricing on the GPU")
GPU_PRICING_PAIRS = 4 * 10**9
#: points of at least this many coordinates are priced by the GPU's scan at any size: the trees
#: prune little there (docs/benchmarks.md, "lap-solver's large images")
GPU_PRICING_MIN_DIM = 5


def listed(count, k: int):
    """Which of each row's ``k`` slots of :meth:`PairSearch.price`'s lists hold a violator: the
    row's first ``min(count, k)`` (a row's count may pass what its list holds)."""
    return np.arange(k)[None, :] < count[:, None]


def take_rows(x, rows):
    """The rows ``rows`` of ``x`` (points, or norms: empty where the metric needs none), on
    ``x``'s device; ``x`` itself where ``rows`` is None."""
    if rows is None or not x.size:
        return x
    return x[array_module(x).asarray(rows)] if is_device_array(x) else x[rows]


def price_in_part(price, rows, u, index, reduced, count) -> None:
    """A pricing of the ``rows`` only: ``price(rows, u[rows], index, reduced, count)`` into lists
    of those rows, the lists of those with violators copied into the whole outputs, every other
    row's count 0."""
    part_index, part_reduced = np.empty((rows.shape[0], index.shape[1]), dtype=index.dtype), np.empty(
        (rows.shape[0], index.shape[1]))
    part_count = np.empty(rows.shape[0], dtype=count.dtype)
    price(rows, to_host(u)[rows], part_index, part_reduced, part_count)
    count[:] = 0
    found = part_count > 0
    with_violators = rows[found]
    count[with_violators], index[with_violators], reduced[with_violators] = (part_count[found], part_index[found],
                                                                             part_reduced[found])


class PairSearch:
    """The engine's queries over the rows ``a`` and columns ``b`` (costs ``sign * metric``)."""

    def __init__(self, kernels, a, b, a_norms, b_norms, metric: str, p: float, sign: float, trees=None):
        """``trees``: k-d trees over ``a`` and ``b`` as numbered (:func:`dlap.points.solve.spatial_order`'s;
        None for either: made where a query needs it), to reuse where the queries' trees are over
        the points themselves (every metric but cosine)."""
        self.kernels = kernels
        self.metric, self.p, self.sign = METRIC_IDS[metric], p, sign
        self.shape = (a.shape[0], b.shape[0])
        self._on_device = (a, b, a_norms, b_norms)  # for the kernels: pair costs, nearest columns, pricing
        self.trees = a.shape[1] <= TREE_MAX_DIM
        self.gpu_prices = is_device_array(a) and (self.shape[0] * self.shape[1] <= GPU_PRICING_PAIRS
                                                  or a.shape[1] >= GPU_PRICING_MIN_DIM)
        if self.trees:  # the points on the host in float64 (n x d: small beside the work of the
            # queries; the costs widen every coordinate to float64 first, so they are the same)
            a, b, a_norms, b_norms = (to_host(x).astype(np.float64) for x in (a, b, a_norms, b_norms))
        self.a, self.b, self.a_norms, self.b_norms = a, b, a_norms, b_norms
        self._built = {}
        if self.trees and trees is not None and self.metric != METRIC_IDS["cosine"]:
            for points, tree in zip((a, b), trees, strict=True):
                if tree is not None:
                    self._built[id(points)] = tree
        self.screened = (a.shape[1] >= SCREEN_MIN_DIM and self.metric in SCREENED
                         and isinstance(a, np.ndarray))  # host points: a GPU scans them faster

    def _screen(self, a, b, a_norms, b_norms) -> Screen:
        """The matrix products' view of ``a`` against ``b`` (made once: pricing asks every round)."""
        key = ("screen", id(a))
        if key not in self._built:
            self._built[key] = Screen(self.kernels, a, b, a_norms, b_norms, self.metric, self.p, self.sign)
        return self._built[key]

    def _tree(self, points, point_norms):
        """The k-d tree over ``points`` (made once), in its coordinates: float64, normalised for cosine."""
        key = id(points)
        if key not in self._built:
            from ..backends.cpu import kdtree

            coordinates = points.copy()
            if self.metric == METRIC_IDS["cosine"]:
                coordinates /= point_norms[:, None]
            self._built[key] = kdtree.build(np.ascontiguousarray(coordinates), kdtree.LEAF_SIZE)
        return self._built[key]

    def nearest_columns(self, k: int):
        """Each row's ``k`` cheapest columns and their costs (host arrays, cheapest first)."""
        return self._nearest(self.a, self.b, self.a_norms, self.b_norms, k)

    def nearest_rows(self, k: int):
        """Each column's ``k`` cheapest rows and their costs."""
        return self._nearest(self.b, self.a, self.b_norms, self.a_norms, k)

    def _nearest(self, a, b, a_norms, b_norms, k):
        index, cost = np.empty((a.shape[0], k), dtype=np.int64), np.empty((a.shape[0], k))
        args = (a, b, a_norms, b_norms, self.metric, self.p, self.sign, k, index, cost)
        if self.trees:
            from ..backends.cpu import kdtree

            kdtree.nearest_columns(self._tree(b, b_norms), *args)
        elif self.screened:
            self._screen(a, b, a_norms, b_norms).nearest_columns(k, index, cost)
        else:
            self.kernels.nearest_columns(*args)
        return index, cost

    def price(self, u, v, rtol: float, atol: float, index, reduced, count, rows=None) -> None:
        """Every pair's reduced cost ``c_ij - u_i - v_j``; each row's most negative ones below
        ``-(rtol * (|c_ij| + |u_i| + |v_j|) + atol)`` into ``index``, ``reduced``, their number into ``count``
        (:func:`dlap.backends.cpu.points.price`). ``rows`` (ascending): only those need pricing
        (:class:`dlap.points.core.PricedDuals`); the others' counts are 0 (or their own, where
        the screen prices every row anyway)."""
        if rows is None or self.screened:
            self._price(None, u, v, rtol, atol, index, reduced, count)
            return
        price_in_part(lambda part, u_part, *out: self._price(part, u_part, v, rtol, atol, *out), rows, u, index,
                      reduced, count)

    def _price(self, rows, u, v, rtol, atol, index, reduced, count) -> None:
        """:meth:`price` of the points' ``rows`` (every row where None), into outputs of as many rows."""
        if self.trees and not self.gpu_prices:
            from ..backends.cpu import kdtree

            u, v = to_host(u), to_host(v)
            tree = self._tree(self.b, self.b_norms)
            ceilings = np.empty(tree[1].shape[0])
            kdtree.column_ceilings(tree, v, ceilings)
            kdtree.price(tree, ceilings, take_rows(self.a, rows), self.b, take_rows(self.a_norms, rows), self.b_norms,
                         self.metric, self.p, self.sign, u, v, rtol, atol, index, reduced, count)
        elif self.screened:
            self._screen(self.a, self.b, self.a_norms, self.b_norms).price(u, v, rtol, atol, index, reduced, count)
        else:
            a, b, a_norms, b_norms = self._on_device
            self.kernels.price(take_rows(a, rows), b, take_rows(a_norms, rows), b_norms, self.metric, self.p,
                               self.sign, u, v, rtol, atol, index, reduced, count)

    def pair_costs(self, rows, cols):
        """The pairs' costs (host float64), as the metric defines them."""
        out = np.empty(rows.shape[0])
        if out.size:
            self.kernels.pair_costs(*self._on_device, self.metric, self.p, self.sign, rows, cols, out)
        return out

    def nearest_among(self, rows, columns, k: int):
        """The ``k`` cheapest of ``columns`` for each of ``rows``: edges (rows, columns, costs)."""
        a, b, a_norms, b_norms = self._on_device
        xp = array_module(a)
        on_device_rows, on_device_columns = xp.asarray(rows), xp.asarray(columns)
        sub_a = xp.ascontiguousarray(a[on_device_rows])
        sub_b = xp.ascontiguousarray(b[on_device_columns])
        sub_na = a_norms[on_device_rows] if a_norms.size else a_norms
        sub_nb = b_norms[on_device_columns] if b_norms.size else b_norms
        index, cost = np.empty((rows.shape[0], k), dtype=np.int64), np.empty((rows.shape[0], k))
        self.kernels.nearest_columns(sub_a, sub_b, sub_na, sub_nb, self.metric, self.p, self.sign, k, index, cost)
        return np.repeat(rows, k), columns[index.ravel()], cost.ravel()

    @property
    def searches_every_pair(self) -> bool:
        """Whether :meth:`reduced_minima` serves these points (trees or matrix products)."""
        return self.trees or self.screened

    def reduced_minima(self, scale: float, ws) -> list:
        """For each ``w`` of ``ws``: each row's least ``sign * metric * scale - w_j`` over every
        column and its rounding error (:func:`dlap.backends.cpu.kdtree.reduced_minima`: what the
        certificate's scan of every pair finds). Through the trees or the matrix products only."""
        from ..backends.cpu import kdtree

        ws = [np.ascontiguousarray(to_host(w), dtype=np.float64) for w in ws]
        if not self.trees:
            return self._screen(self.a, self.b, self.a_norms, self.b_norms).reduced_minima(scale, ws)
        tree = self._tree(self.b, self.b_norms)
        found = []
        for w in ws:
            ceilings = np.empty(tree[1].shape[0])
            kdtree.column_ceilings(tree, w, ceilings)
            low, error = np.empty(self.a.shape[0]), np.empty(self.a.shape[0])
            kdtree.reduced_minima(tree, ceilings, self.a, self.b, self.a_norms, self.b_norms, self.metric, self.p,
                                  self.sign, scale, w, low, error)
            found.append((low, error))
        return found
