"""``dlap.solve_points``: the exact assignment of two point sets, the matrix never formed."""

from __future__ import annotations

import time

import numpy as np

from ..arrays import adopt
from ..device import device_for, is_device_array, to_host
from ..options import DEVICES, Device, check_choice
from ..progress import ProgressBar
from ..result import Assignment, Stats
from .metrics import Metric, check_metric, check_points


class CostsReference:
    """A result's reference to its :class:`~dlap.points.costs.PointCosts` (held, unlike a matrix:
    it is the points, O(n + m) memory), for :meth:`Assignment.verify`."""

    __slots__ = ("costs",)

    def __init__(self, costs):
        self.costs = costs

    def __call__(self):
        return self.costs


def solve_points(a, b, metric: Metric = "euclidean", *, p: float | None = None, maximize: bool = False,
                 device: Device = "auto", candidates: int | None = None, progress=None) -> Assignment:
    """Assign the points of ``a`` to those of ``b`` at the least total distance, exactly, without
    forming the ``n x m`` matrix of their distances.

    Parameters
    ----------
    a, b : arrays of shape (n, d) and (m, d)
        Points as rows: NumPy, PyTorch or any DLPack array; float32 or float64 (other real types
        are read as float64). ``n`` and ``m`` may differ: the smaller set is assigned whole.
    metric : {"euclidean", "sqeuclidean", "cityblock", "minkowski", "cosine"}
        The cost of a pair, as :mod:`dlap.points.metrics` defines it (``scipy.spatial.distance.cdist``'s
        values to within float64 rounding).
    p : float, optional
        ``metric="minkowski"``'s exponent (default 2, at least 1).
    maximize : bool
        Maximise the total instead.
    device : {"auto", "cpu", "gpu"}
        Where the candidates, pricing and the certificate's blocks are computed (the core is
        solved on the host either way). ``"auto"``: the GPU for CuPy points, or where CuPy sees
        a GPU and the sets have at least 512 x 512 pairs; else the CPU.
    candidates : int, optional
        Each row's nearest columns the first core holds (default
        :data:`dlap.points.core.DEFAULT_CANDIDATES`); pricing adds whatever the optimum needs.
    progress : callable or bool, optional
        ``callback(update)`` with a :class:`dlap.SolveProgress` at each stage (candidates, the
        core solve, each pricing round), or True for a progress bar after a second.

    Returns
    -------
    Assignment
        ``row_ind``, ``col_ind`` (rows sorted), ``objective`` (the metric's values summed exactly),
        the duals, ``stats`` (``phase_counts``: ``pricing_rounds``, ``violators``, ``core_edges``,
        ``searches``...) and ``verify()``, which checks the duals against every one of the
        ``n * m`` pairs, block by block.

    Raises
    ------
    ValueError
        points that are not 2-D, of different dimensions, with NaN or infinite coordinates, an
        unknown metric, a bad ``p``, a zero point under ``cosine``.
    TypeError
        points that are not real numbers.
    """
    from ..threads import solve_threads
    from .core import DEFAULT_CANDIDATES, objective, solve_core
    from .costs import PointCosts
    from .search import PairSearch

    started = time.perf_counter()
    check_choice("device", device, DEVICES)
    exponent = check_metric(metric, p)
    candidates = DEFAULT_CANDIDATES if candidates is None else candidates
    if isinstance(candidates, bool) or not isinstance(candidates, (int, np.integer)) or candidates < 1:
        raise ValueError(f"candidates must be a positive integer; got {candidates!r}")
    (a, give_back), (b, _) = adopt(a), adopt(b)
    on_gpu = is_device_array(a) or is_device_array(b)
    pairs = int(np.shape(a)[0]) * int(np.shape(b)[0]) if np.ndim(a) == 2 and np.ndim(b) == 2 else 0
    device = device_for(device, on_gpu, pairs)  # the GPU for ``"auto"`` as dlap.solve's rule, by pairs
    xp = array_module_for(device)
    if device == "cpu":
        a, b = to_host(a), to_host(b)
    a, b = check_points(a, b, xp)
    costs = PointCosts(a, b, metric, exponent, device)
    kernels = costs.kernels
    n, m = costs.shape
    stats = Stats(device=device)
    stats.method = "sparse-core"
    transposed = n > m
    rows_side = costs.T if transposed else costs
    if min(n, m) == 0:
        row_ind = col_ind = np.empty(0, dtype=np.int64)
        u, v = np.zeros(n), np.zeros(m)
        total = 0.0
    else:
        sign = -1.0 if maximize else 1.0
        with solve_threads(n * m) as threads, ProgressBar(progress, "dlap solve_points") as callback:
            stats.threads = threads
            search = PairSearch(kernels, rows_side.a, rows_side.b, rows_side.a_norms, rows_side.b_norms, metric,
                                exponent, sign)
            solution = solve_core(search, stats, candidates, callback)
        k = min(n, m)
        short, long_ = np.arange(k, dtype=np.int64), solution.col4row
        row_ind, col_ind = (long_, short) if transposed else (short, long_)
        order = np.argsort(row_ind, kind="stable")
        row_ind, col_ind = row_ind[order], col_ind[order]
        u_short, v_long = sign * solution.u, sign * solution.v
        u, v = (v_long, u_short) if transposed else (u_short, v_long)
        total = objective(kernels, a, b, costs.a_norms, costs.b_norms, metric, exponent, row_ind, col_ind)
    stats.seconds = time.perf_counter() - started
    if on_gpu:  # CuPy points: the answers on the GPU too, as dlap.solve gives them
        row_ind, col_ind, u, v = (xp.asarray(x) for x in (row_ind, col_ind, u, v))
    return Assignment(give_back(row_ind), give_back(col_ind), total, give_back(u), give_back(v), stats,
                      maximize=maximize, matrix_ref=CostsReference(costs))


def array_module_for(device: str):
    if device == "gpu":
        import cupy

        return cupy
    return np
