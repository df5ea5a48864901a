"""``dlap.solve_points``: the exact assignment of two point sets, the matrix never formed."""

from __future__ import annotations

import time

import numpy as np

from ..arrays import adopt
from ..device import device_for, is_device_array, to_host
from ..options import DEVICES, Device, check_choice
from ..progress import ProgressBar
from ..result import Assignment, Stats
from .metrics import Metric, check_metric, check_points, check_range


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
        :func:`dlap.points.core.candidates_for` the shorter set's size: 32 up to 10^4 points, 48
        from 10^5); pricing adds whatever the optimum needs.
    progress : callable or bool, optional
        ``callback(update)`` with a :class:`dlap.SolveProgress` at each stage (candidates, the
        core solve, each pricing round), or True for a progress bar after a second.

    Returns
    -------
    Assignment
        ``row_ind``, ``col_ind`` (rows sorted), ``objective`` (the metric's values summed exactly),
        the duals, ``stats`` (``phase_counts``: ``pricing_rounds``, ``violators`` (a row with more
        than the pricing keeps counts at least that many), ``rows_priced``, ``core_edges``,
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
    from .core import solve_core
    from .search import PairSearch

    started = time.perf_counter()
    problem = PointsProblem(a, b, metric, p, device, candidates)
    stats = problem.stats()
    solution = None
    if problem.rows:
        side = problem.rows_side
        with solve_threads(side.size) as threads, ProgressBar(progress, "dlap solve_points") as callback:
            stats.threads = threads
            search = PairSearch(side.kernels, side.a, side.b, side.a_norms, side.b_norms, problem.metric,
                                problem.exponent, problem.sign(maximize), problem.trees)
            solution = solve_core(search, stats, problem.candidates, callback, coarse=problem.coarse_pairs(maximize))
    return problem.answer(solution, maximize, stats, started)


class PointsProblem:
    """Two point sets checked and laid out for the sparse-core engine: on the device ``device``
    picks, their costs (:class:`~dlap.points.costs.PointCosts`), and the shorter set as the rows
    (``rows_side``: the costs, transposed where ``a`` is the longer); :meth:`answer` turns the
    core's solution back into the caller's :class:`~dlap.Assignment`."""

    def __init__(self, a, b, metric: str, p: float | None, device: str, candidates: int | None):
        from .core import candidates_for
        from .costs import PointCosts

        check_choice("device", device, DEVICES)
        self.exponent = check_metric(metric, p)
        if candidates is not None and (isinstance(candidates, bool) or not isinstance(candidates, (int, np.integer))
                                       or candidates < 1):
            raise ValueError(f"candidates must be a positive integer; got {candidates!r}")
        (a, self.give_back), (b, _) = adopt(a), adopt(b)
        self.on_gpu = is_device_array(a) or is_device_array(b)
        pairs = int(np.shape(a)[0]) * int(np.shape(b)[0]) if np.ndim(a) == 2 and np.ndim(b) == 2 else 0
        self.device = device_for(device, self.on_gpu, pairs)  # the GPU for "auto" as dlap.solve's rule, by pairs
        self.xp = array_module_for(self.device)
        if self.device == "cpu":
            a, b = to_host(a), to_host(b)
        a, b = check_points(a, b, self.xp)
        check_range(a, b, metric, self.exponent)
        self.metric = metric
        self.costs = PointCosts(a, b, metric, self.exponent, self.device)
        n, m = self.costs.shape
        self.transposed = n > m
        side = self.costs.T if self.transposed else self.costs
        (self.row_order, row_tree), (self.col_order, col_tree) = spatial_order(side.a), spatial_order(side.b)
        self.trees = (row_tree, col_tree) if row_tree is not None and col_tree is not None else None
        rows, cols = self.row_order, self.col_order
        self.rows_side = PointCosts(self._in_order(side.a, rows), self._in_order(side.b, cols), metric, self.exponent,
                                    self.device, self._in_order(side.a_norms, rows), self._in_order(side.b_norms, cols))
        self.rows = min(n, m)
        self.candidates = candidates_for(self.rows) if candidates is None else int(candidates)

    def _in_order(self, x, order):
        """``x`` (points, or their norms: empty unless the metric needs them) renumbered by
        ``order``; ``x`` itself where that is its own order (no copy)."""
        if not x.size or np.array_equal(order, np.arange(order.shape[0])):
            return x
        return x[self.xp.asarray(order)]

    def coarse_pairs(self, maximize: bool):
        """:func:`coarse_pairs` of the rows' side; None where there is no k-d order (points of
        more than ``TREE_MAX_DIM`` coordinates)."""
        if self.trees is None:
            return None
        return coarse_pairs(self.rows_side.a, self.rows_side.b, self.metric, self.exponent, maximize)

    @staticmethod
    def sign(maximize: bool) -> float:
        return -1.0 if maximize else 1.0

    def stats(self) -> Stats:
        stats = Stats(device=self.device)
        stats.method = "sparse-core"
        return stats

    def answer(self, solution, maximize: bool, stats: Stats, started: float) -> Assignment:
        """The caller's assignment from the core's ``solution`` (None where a set is empty)."""
        from .core import objective

        costs = self.costs
        n, m = costs.shape
        if solution is None:
            row_ind = col_ind = np.empty(0, dtype=np.int64)
            u, v = np.zeros(n), np.zeros(m)
            total = 0.0
        else:
            sign = self.sign(maximize)
            short, long_ = self.row_order, self.col_order[solution.col4row]
            row_ind, col_ind = (long_, short) if self.transposed else (short, long_)
            order = np.argsort(row_ind, kind="stable")
            row_ind, col_ind = row_ind[order], col_ind[order]
            u_short, v_long = np.empty_like(solution.u), np.empty_like(solution.v)
            u_short[self.row_order], v_long[self.col_order] = sign * solution.u, sign * solution.v
            u, v = (v_long, u_short) if self.transposed else (u_short, v_long)
            total = objective(costs.kernels, costs.a, costs.b, costs.a_norms, costs.b_norms, self.metric,
                              self.exponent, row_ind, col_ind)
        stats.seconds = time.perf_counter() - started
        if self.on_gpu:  # CuPy points: the answers on the GPU too, as dlap.solve gives them
            row_ind, col_ind, u, v = (self.xp.asarray(x) for x in (row_ind, col_ind, u, v))
        give_back = self.give_back
        return Assignment(give_back(row_ind), give_back(col_ind), total, give_back(u), give_back(v), stats,
                          maximize=maximize, matrix_ref=CostsReference(costs))


def coarse_pairs(a, b, metric: str, exponent: float, maximize: bool):
    """A callable giving the coarse problem's :class:`~dlap.points.coarse.Transport` for rows
    ``a`` and columns ``b`` in k-d order (the first core's coarse transport candidates, and
    whether to price early; :mod:`dlap.points.coarse`, the cells' centroids assigned by
    :func:`solve_points` on the CPU, whichever device holds the points: a problem
    ``CELL_POINTS`` times smaller), or None where there are fewer than ``MIN_ROWS`` rows or the
    metric is cosine (whose order is not over the normalised points)."""
    from . import coarse

    if metric == "cosine" or min(a.shape[0], b.shape[0]) < coarse.MIN_ROWS:
        return None
    p = exponent if metric == "minkowski" else None

    def assign(row_centroids, col_centroids):
        cells = solve_points(row_centroids, col_centroids, metric, p=p, maximize=maximize, device="cpu")
        partner = np.empty(row_centroids.shape[0], dtype=np.int64)
        partner[cells.row_ind] = cells.col_ind
        return partner, cells.stats.phase_counts.get("violators", 0)

    return lambda: coarse.transport_pairs(to_host(a).astype(np.float64), to_host(b).astype(np.float64), assign,
                                          metric in coarse.ALWAYS_METRICS)


def spatial_order(points) -> tuple[np.ndarray, tuple | None]:
    """An order of ``points`` in which near points come close together (the leaves of a k-d tree
    over them, :func:`dlap.backends.cpu.kdtree.build`), and that tree over the points so
    numbered (its ``perm`` the identity), for points of at most ``TREE_MAX_DIM`` coordinates;
    else their own order and None. The engine numbers the points so: the core's edges, rows and
    prices that a bid or a search visits one after another are then near in memory too
    (docs/benchmarks.md, "Point sets"), and its queries reuse the tree."""
    from .search import TREE_MAX_DIM

    n, d = points.shape
    if d > TREE_MAX_DIM or n < 2:
        return np.arange(n, dtype=np.int64), None
    from ..backends.cpu import kdtree

    order, *boxes = kdtree.build(np.ascontiguousarray(to_host(points), dtype=np.float64), kdtree.LEAF_SIZE)
    return order, (np.arange(n, dtype=np.int64), *boxes)


def array_module_for(device: str):
    if device == "gpu":
        import cupy

        return cupy
    return np
