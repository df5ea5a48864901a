"""The sparse-core engine's queries over a given matrix (``dlap.solve(cost, method="sparse")``): each
row's and column's cheapest entries, and the pricing of every entry against the duals, a block of
rows at a time (so the work beside the matrix is one block's), on the host or the GPU that holds it.

Forbidden (+inf) entries are never candidates and never violators; a core that no finite entry can
complete is the matrix's infeasibility (:class:`dlap.problem.InfeasibleError`)."""

from __future__ import annotations

import numpy as np

from ..certificate import BLOCK_ELEMENTS, widened
from ..device import array_module, to_host
from .search import price_in_part


class MatrixSearch:
    """:class:`dlap.points.search.PairSearch`'s queries, answered from ``matrix`` (minimisation
    form, ``n <= m``; float or integer entries, read as float64)."""

    def __init__(self, matrix):
        self.xp = array_module(matrix)
        if self.xp is np:  # as every CPU kernel receives a cost matrix (one compiled signature)
            from ..backends.cpu.numba_setup import read_only

            matrix = read_only(matrix)
        self.matrix = matrix
        self.shape = matrix.shape

    def _blocks(self, rows=None):
        """(start, block as float64) over the rows (or over ``rows``: ``start`` a place in it), a
        block at most ``BLOCK_ELEMENTS`` entries."""
        n, m = self.shape
        step = max(1, BLOCK_ELEMENTS // max(m, 1))
        for start in range(0, n if rows is None else rows.shape[0], step):
            block = self.matrix[start : start + step] if rows is None else \
                self.matrix[self.xp.asarray(rows[start : start + step])]
            yield start, widened(block)  # exact: CuPy's astype flushes float32 subnormals

    def _cheapest(self, block, k: int, axis: int):
        """Each line's ``k`` cheapest entries of ``block`` along ``axis`` (indices, costs; cheapest
        first), index -1 where the entry is forbidden."""
        xp = self.xp
        if k < block.shape[axis]:
            index = xp.argpartition(block, k - 1, axis=axis)
            index = index[:k] if axis == 0 else index[:, :k]
        else:
            line = xp.arange(block.shape[axis])
            index = xp.broadcast_to(line[:, None] if axis == 0 else line[None, :], block.shape)
        cost = xp.take_along_axis(block, index, axis=axis)
        order = xp.argsort(cost, axis=axis)
        index, cost = xp.take_along_axis(index, order, axis=axis), xp.take_along_axis(cost, order, axis=axis)
        return xp.where(xp.isinf(cost), -1, index), cost

    @property
    def _host(self):
        """The CPU's kernels where the matrix is on the host (one pass each), else None."""
        if self.xp is not np:
            return None
        from ..backends.cpu import matrix_core

        return matrix_core

    def nearest_columns(self, k: int):
        if self._host:
            index, cost = np.empty((self.shape[0], k), dtype=np.int64), np.empty((self.shape[0], k))
            self._host.cheapest_in_rows(self.matrix, k, index, cost)
            return index, cost
        found = [self._cheapest(block, k, 1) for _, block in self._blocks()]
        return tuple(to_host(self.xp.concatenate(part)) for part in zip(*found, strict=True))

    def nearest_rows(self, k: int):
        """Each column's ``k`` cheapest rows (on the GPU: the blocks' cheapest, merged block by block)."""
        if self._host:
            index, cost = np.empty((self.shape[1], k), dtype=np.int64), np.empty((self.shape[1], k))
            self._host.cheapest_in_columns(self.matrix, k, index, cost)
            return index, cost
        xp = self.xp
        best_index = best_cost = None
        for start, block in self._blocks():
            index, cost = self._cheapest(block, min(k, block.shape[0]), 0)
            index = xp.where(index >= 0, index + start, -1)
            if best_index is not None:
                index, cost = xp.concatenate((best_index, index)), xp.concatenate((best_cost, cost))
                keep = min(k, index.shape[0])
                pick = xp.argsort(cost, axis=0, kind="stable")[:keep]
                index, cost = xp.take_along_axis(index, pick, axis=0), xp.take_along_axis(cost, pick, axis=0)
            best_index, best_cost = index, cost
        return np.ascontiguousarray(to_host(best_index.T)), np.ascontiguousarray(to_host(best_cost.T))

    def price(self, u, v, rtol: float, atol: float, index, reduced, count, rows=None) -> None:
        """Every entry's reduced cost ``c_ij - u_i - v_j``; each row's most negative ones below
        ``-(rtol * (|c_ij| + |u_i| + |v_j|) + atol)`` into ``index``, ``reduced`` (cheapest first),
        their number into ``count`` (as :func:`dlap.backends.cpu.points.price`); ``rows``: only
        those (:meth:`dlap.points.search.PairSearch.price`)."""
        if rows is not None:
            price_in_part(lambda part, u_part, *out: self._price(self._rows(part), u_part, v, rtol, atol, *out),
                          rows, u, index, reduced, count)
            return
        self._price(self._blocks() if not self._host else self.matrix, u, v, rtol, atol, index, reduced, count)

    def _rows(self, rows):
        """The matrix's ``rows`` as :meth:`_price` reads them: blocks on the GPU, rows on the host."""
        if self._host:
            from ..backends.cpu.numba_setup import read_only

            return read_only(self.matrix[rows])
        return self._blocks(rows)

    def _price(self, blocks, u, v, rtol, atol, index, reduced, count) -> None:
        if self._host:
            self._host.price_entries(blocks, u, v, rtol, atol, index, reduced, count)
            return
        xp = self.xp
        k = index.shape[1]
        u, v = xp.asarray(u), xp.asarray(v)
        for start, block in blocks:
            stop = start + block.shape[0]
            rows_u = u[start:stop, None]
            slack = block - rows_u - v[None, :]
            below = slack < -(rtol * (xp.abs(block) + xp.abs(rows_u) + xp.abs(v)[None, :]) + atol)
            count[start:stop] = to_host(below.sum(axis=1))
            worst, cost = self._cheapest(xp.where(below, slack, xp.inf), min(k, block.shape[1]), 1)
            index[start:stop, : worst.shape[1]] = to_host(worst)
            reduced[start:stop, : cost.shape[1]] = to_host(cost)

    def reduced_minima(self, v):
        """Each row's least ``c_ij - v_j`` (host float64)."""
        if self._host:
            out = np.empty(self.shape[0])
            self._host.reduced_minima(self.matrix, np.asarray(v, dtype=np.float64), out)
            return out
        v = self.xp.asarray(v)
        return np.concatenate([to_host((block - v[None, :]).min(axis=1)) for _, block in self._blocks()])

    def pair_costs(self, rows, cols):
        xp = self.xp
        return to_host(widened(self.matrix[xp.asarray(rows), xp.asarray(cols)]))

    def nearest_among(self, rows, columns, k: int):
        """The ``k`` cheapest of ``columns`` (ascending) for each of ``rows`` (edges; column -1
        where forbidden), reading only those entries."""
        if self.xp is np:
            from ..backends.cpu import matrix_core as kernels
        else:
            from ..backends.gpu import points as kernels
        cols, cost = np.empty((rows.shape[0], k), dtype=np.int64), np.empty((rows.shape[0], k))
        kernels.cheapest_among(self.matrix, rows, columns, k, cols, cost)
        return np.repeat(rows, k), cols.ravel(), cost.ravel()
