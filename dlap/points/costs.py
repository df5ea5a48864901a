"""The cost matrix of two point sets, computed on demand: what the engine prices and the certificate
checks, without ever holding the n x m matrix."""

from __future__ import annotations

import numpy as np

from ..device import array_module
from .metrics import METRIC_IDS, norms


class PointCosts:
    """``c[i, j] = metric(a[i], b[j])`` (:mod:`dlap.points.metrics`) as a read-only matrix of
    float64 computed on demand: ``shape``, ``dtype``, ``T``, ``c[start:stop]`` (a dense block of
    rows) and ``c[rows, cols]`` (the entries of given pairs). :func:`dlap.certificate.certify`
    checks an assignment against it block by block, so its memory is one block's."""

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

    def __repr__(self) -> str:
        return f"PointCosts({self.shape[0]} x {self.shape[1]}, {self.metric}, d = {self.a.shape[1]})"
