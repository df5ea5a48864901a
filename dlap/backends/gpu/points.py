"""GPU kernels of the sparse-core engine (cuda/points.cu), with the CPU kernels' signatures
(dlap/backends/cpu/points.py): points, norms and block outputs on the GPU; the O(n k) results
the engine's host side works on (candidates, violators, pair costs for the core) copied back
into the host arrays it passes."""

from __future__ import annotations

import cupy
import numpy as np

from ..constants import ROW_LANES
from .kernels import BLOCK, blocks, kernel


def _device(x, dtype=None):
    return cupy.asarray(x, dtype=dtype)


def _back(host, device) -> None:
    """Copy a device result into ``host`` where the caller passed a host array."""
    if isinstance(host, np.ndarray):
        host[...] = device.get()


def _launch(name, a, count, args) -> None:
    if count:
        kernel("points", name, a.dtype)((blocks(count),), (BLOCK,), args)


def _geometry(a, b, na, nb, metric, p, sign):
    return (a, b, _device(na, np.float64), _device(nb, np.float64)), (np.int32(a.shape[1]), np.int32(metric),
                                                                      np.float64(p), np.float64(sign))


def nearest_columns(a, b, na, nb, metric, p, sign, k, index, cost) -> None:
    points, (d, metric, p, sign) = _geometry(a, b, na, nb, metric, p, sign)
    n, m = a.shape[0], b.shape[0]
    index_d, cost_d = cupy.empty((n, k), dtype=np.int64), cupy.empty((n, k))
    _launch("nearest_columns", a, n * ROW_LANES, (*points, np.int64(n), np.int64(m), d, metric, p, sign, np.int32(k),
                                      index_d, cost_d))
    _back(index, index_d)
    _back(cost, cost_d)


def price(a, b, na, nb, metric, p, sign, u, v, rtol, atol, index, reduced, count) -> None:
    points, (d, metric, p, sign) = _geometry(a, b, na, nb, metric, p, sign)
    n, m, cap = a.shape[0], b.shape[0], index.shape[1]
    index_d, reduced_d = cupy.empty((n, cap), dtype=np.int64), cupy.empty((n, cap))
    count_d = cupy.empty(n, dtype=np.int64)
    _launch("price", a, n * ROW_LANES, (*points, np.int64(n), np.int64(m), d, metric, p, sign, _device(u, np.float64),
                            _device(v, np.float64), np.float64(rtol), np.float64(atol), np.int32(cap), index_d, reduced_d, count_d))
    _back(index, index_d)
    _back(reduced, reduced_d)
    _back(count, count_d)


def cheapest_among(c, rows, columns, k, index, cost) -> None:
    """A given matrix ``c``'s ``k`` cheapest entries of each of ``rows`` among ``columns``
    (ascending): their columns (-1 where forbidden) and costs, as the CPU's
    :func:`dlap.backends.cpu.matrix_core.cheapest_among`."""
    c = cupy.ascontiguousarray(c)
    n_rows, columns_d = rows.shape[0], _device(columns, np.int64)
    at_d, cost_d = cupy.empty((n_rows, k), dtype=np.int64), cupy.empty((n_rows, k))
    _launch("cheapest_among", c, n_rows * ROW_LANES, (c, np.int64(c.shape[1]), _device(rows, np.int64),
                                                     np.int64(n_rows), columns_d, np.int64(columns_d.shape[0]),
                                                     np.int32(k), at_d, cost_d))
    _back(index, cupy.where(at_d >= 0, columns_d[cupy.maximum(at_d, 0)], -1))
    _back(cost, cost_d)


def block_costs(a, b, na, nb, metric, p, sign, start, out) -> None:
    points, (d, metric, p, sign) = _geometry(a, b, na, nb, metric, p, sign)
    rows, m = out.shape
    out_d = out if isinstance(out, cupy.ndarray) else cupy.empty(out.shape)
    _launch("block_costs", a, rows * m, (*points, np.int64(rows), np.int64(m), d, metric, p, sign,
                                         np.int64(start), out_d))
    _back(out, out_d)


def pair_costs(a, b, na, nb, metric, p, sign, rows, cols, out) -> None:
    points, (d, metric, p, sign) = _geometry(a, b, na, nb, metric, p, sign)
    out_d = out if isinstance(out, cupy.ndarray) else cupy.empty(out.shape)
    _launch("pair_costs", a, out.shape[0], (*points, np.int64(out.shape[0]), d, metric, p, sign,
                                            _device(rows, np.int64), _device(cols, np.int64), out_d))
    _back(out, out_d)
