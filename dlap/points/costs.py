"""The cost matrix of two point sets, computed on demand: what the engine prices and the certificate
checks, without ever holding the n x m matrix."""

from __future__ import annotations

import math

import numpy as np

from ..certificate import FloatScan
from ..device import array_module
from ..problem import FLOAT_HEADROOM
from .metrics import METRIC_IDS, norms
from .search import PairSearch


class PointCosts:
    """``c[i, j] = metric(a[i], b[j])`` (:mod:`dlap.points.metrics`) as a read-only matrix of
    float64 computed on demand: ``shape``, ``dtype``, ``T``, ``c[start:stop]`` (a dense block of
    rows) and ``c[rows, cols]`` (the entries of given pairs). :func:`dlap.certificate.certify`
    checks an assignment against it block by block, so its memory is one block's; where k-d trees
    serve the points (NumPy points of at most ``TREE_MAX_DIM`` coordinates) or matrix products do
    (:mod:`.screen`) it asks them instead (``certificate_scan``, ``certificate_reductions``,
    ``largest_cost``), which find the same minima over every pair while computing only the pairs
    that can attain them."""

    ndim = 2
    dtype = np.dtype(np.float64)
    on_demand = True  # what dlap.certificate.certify asks of a matrix it must not convert

    def __init__(self, a, b, metric: str, p: float, device: str, a_norms=None, b_norms=None):
        self.a, self.b, self.metric, self.p, self.device = a, b, metric, p, device
        self.a_norms = norms(a, metric, self.xp) if a_norms is None else a_norms
        self.b_norms = norms(b, metric, self.xp) if b_norms is None else b_norms
        self.shape = (a.shape[0], b.shape[0])
        self.size = self.shape[0] * self.shape[1]

    @property
    def xp(self):
        return array_module(self.a)

    @property
    def kernels(self):
        """The device's kernels (a module: looked up, not stored, so the costs pickle)."""
        if self.device == "gpu":
            from ..backends.gpu import points
        else:
            from ..backends.cpu import points
        return points

    @property
    def T(self) -> PointCosts:  # noqa: N802 - the array attribute's name
        return PointCosts(self.b, self.a, self.metric, self.p, self.device, self.b_norms, self.a_norms)

    def _args(self, sign: float = 1.0) -> tuple:
        return self.a, self.b, self.a_norms, self.b_norms, METRIC_IDS[self.metric], self.p, sign

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                raise IndexError("PointCosts takes contiguous blocks of rows")
            out = self.xp.empty((max(stop - start, 0), self.shape[1]))
            if out.size:
                self.kernels.block_costs(*self._args(), start, out)
            return out
        rows, cols = (self.xp.asarray(x, dtype=np.int64).ravel() for x in key)
        out = self.xp.empty(rows.shape[0])
        if out.size:
            self.kernels.pair_costs(*self._args(), rows, cols, out)
        return out

    def _search(self, sign: float) -> PairSearch | None:
        """The queries over every pair of k-d trees (on the host, whichever device holds the
        points: faster than a GPU's scan of every pair, docs/benchmarks.md, "A million points")
        or matrix products, or None where neither serves these points, or where the GPU's costs
        are not the host's to the bit (minkowski's pow: its certificate scans the GPU's own costs)."""
        if not math.isfinite(self.largest_cost()) or (self.xp is not np and self.metric == "minkowski"):
            return None
        search = PairSearch(self.kernels, self.a, self.b, self.a_norms, self.b_norms, self.metric, self.p, sign)
        return search if search.searches_every_pair else None

    def certificate_scan(self, sign: float, u, v, vb, exponent: int):
        """:func:`dlap.certificate.float_scan` of these costs through the trees or the products
        (NotImplemented where neither serves the points): each row's least ``d - vb`` and its
        rounding error, its least ``d``, the worst ``u + v - d`` (from each row's least ``d - v``),
        and :meth:`largest_cost` for the largest cost."""
        search = self._search(sign)
        if search is None:
            return NotImplemented
        largest = self.largest_cost()
        if not exponent and largest > FLOAT_HEADROOM:
            return None
        f = math.ldexp(1.0, -exponent)
        (row_minima, row_errors), (cost_minima, _), (least, _) = self._reduced_minima(
            search, f, (vb, np.zeros(self.shape[1]), v * f))
        violation = float((u * f - least).max()) if least.size else -math.inf
        return FloatScan(row_minima, row_errors, cost_minima, math.ldexp(violation, exponent), largest)

    def certificate_reductions(self, sign: float, exponent: int, row_duals) -> list:
        """:func:`dlap.certificate.column_reductions` through the trees or the products (over the
        rows): each column's least ``d - u`` and its rounding error, for each array of row duals."""
        search = self.T._search(sign)
        if search is None:
            return NotImplemented
        return self._reduced_minima(search, math.ldexp(1.0, -exponent), row_duals)

    def _reduced_minima(self, search: PairSearch, scale: float, duals) -> list:
        """``search.reduced_minima`` (host arrays: the trees' or the products') on these costs'
        device, as the certificate's other scans give them; on as many threads as a solve of
        their size (one below ``dlap.threads.SERIAL_MAX_ENTRIES``: a small ``verify()`` compiles
        no thread team's kernel)."""
        from ..threads import solve_threads

        with solve_threads(self.size):
            minima = search.reduced_minima(scale, duals)
        return [(self.xp.asarray(low), self.xp.asarray(error)) for low, error in minima]

    def largest_cost(self) -> float:
        """An upper bound on every ``|c_ij|``: the metric of the widest gaps between the two sets'
        bounding boxes, coordinate by coordinate (cosine's: 2), rounded up."""
        if self.metric == "cosine":
            return 2.0 + 1e-9
        if not (self.shape[0] and self.shape[1]):
            return 0.0
        a, b = (np.asarray(self.xp.asnumpy(x) if self.xp is not np else x, dtype=np.float64) for x in (self.a, self.b))
        with np.errstate(over="ignore"):
            gaps = np.maximum(np.abs(a.max(axis=0) - b.min(axis=0)), np.abs(b.max(axis=0) - a.min(axis=0)))
            if self.metric == "cityblock":
                value = gaps.sum()
            elif self.metric == "minkowski":
                value = (gaps**self.p).sum() ** (1.0 / self.p)
            else:
                value = (gaps * gaps).sum()
                value = math.sqrt(value) if self.metric == "euclidean" else value
        return float(value) * (1.0 + 1e-9)

    def __repr__(self) -> str:
        return f"PointCosts({self.shape[0]} x {self.shape[1]}, {self.metric}, d = {self.a.shape[1]})"
