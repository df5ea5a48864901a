"""The sparse-core engine: an exact assignment of two point sets without the n x m matrix.

Lee & Orlin's sparse core with pricing, as in column generation:

1. **candidates**: each row's ``k`` cheapest columns (its nearest points in the metric);
2. **core solve**: the exact assignment of that sparse graph by shortest augmenting paths, from
   the row reductions and a greedy matching; a row no path leaves from gets edges to its nearest
   free columns, and the search runs again;
3. **pricing**: every one of the n x m pairs' reduced cost ``c_ij - u_i - v_j`` against the core's
   duals; pairs below zero join the core, and it is solved again, warm where the matrix is square;
4. stop when pricing finds none: the duals are then feasible for every pair and the assignment is
   optimal for the whole matrix. :func:`dlap.certificate.certify` proves it again, block by block.

The rows are the shorter side (a tall problem is solved transposed), so every row is assigned and
the columns' duals stay at most 0, and 0 where unassigned (a rectangular matrix's dual).
"""

from __future__ import annotations

import math

import numpy as np

from ..device import array_module
from ..result import Stats
from ..timing import PhaseTimer
from .metrics import METRIC_IDS

#: each row's candidates to start from, and the most violators of a row one pricing pass adds
DEFAULT_CANDIDATES = 32
#: pricing's tolerance: a pair is a violator when its reduced cost is below -PRICING_RTOL times
#: the magnitudes it is computed from (smaller ones are the duals' rounding)
PRICING_RTOL = 1e-12
#: bids of the augmenting row reduction per free row before the shortest paths take over
ARR_STEPS_PER_ROW = 8
#: the most pricing rounds before the engine gives up (a bound the tests never reach)
MAX_ROUNDS = 1000


class SparseCore:
    """The core's edges (row, column, cost), kept unique, and its CSR for the solver."""

    def __init__(self, n_rows: int, n_cols: int):
        self.n_rows, self.n_cols = n_rows, n_cols
        self.rows = np.empty(0, dtype=np.int64)
        self.cols = np.empty(0, dtype=np.int64)
        self.costs = np.empty(0)
        self.keys = np.empty(0, dtype=np.int64)  # row * n_cols + col, sorted

    def add(self, rows, cols, costs) -> int:
        """Add the edges not in the core yet; returns how many were new."""
        keep = cols >= 0
        rows, cols, costs = rows[keep], cols[keep], costs[keep]
        keys = rows * self.n_cols + cols
        keys, first = np.unique(keys, return_index=True)
        new = ~np.isin(keys, self.keys, assume_unique=True)
        rows, cols, costs, keys = rows[first][new], cols[first][new], costs[first][new], keys[new]
        if keys.size:
            self.rows = np.concatenate((self.rows, rows))
            self.cols = np.concatenate((self.cols, cols))
            self.costs = np.concatenate((self.costs, costs))
            self.keys = np.sort(np.concatenate((self.keys, keys)))
        return int(keys.size)

    def csr(self):
        order = np.lexsort((self.cols, self.rows))
        indptr = np.zeros(self.n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.rows, minlength=self.n_rows), out=indptr[1:])
        return indptr, self.cols[order], self.costs[order]

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])


class CoreSolution:
    """The core's duals and matching (minimisation form)."""

    def __init__(self, n_rows: int, n_cols: int):
        self.u = np.zeros(n_rows)
        self.v = np.zeros(n_cols)
        self.col4row = np.full(n_rows, -1, dtype=np.int64)
        self.row4col = np.full(n_cols, -1, dtype=np.int64)

    def start(self, core: SparseCore) -> None:
        """Cold start: ``v = 0``, each row's dual its cheapest core edge, and a greedy matching of
        the rows' cheapest edges (all tight)."""
        self.v[:] = 0.0
        self.col4row[:] = -1
        self.row4col[:] = -1
        self.u[:] = np.inf
        np.minimum.at(self.u, core.rows, core.costs)
        cheapest = core.costs == self.u[core.rows]
        for r, c in zip(core.rows[cheapest].tolist(), core.cols[cheapest].tolist(), strict=True):
            if self.col4row[r] < 0 and self.row4col[c] < 0:
                self.col4row[r], self.row4col[c] = c, r

    def repair(self, rows, cols, costs) -> int:
        """Warm start after new edges (square matrices): the duals are lowered until the new edges
        are feasible too, and the rows whose matched pair is no longer tight are let go (returned:
        how many). Each violated pair lowers its column's dual where more violated pairs share
        the column than the row (one row let go covers them all), else its row's."""
        violated = costs - self.u[rows] - self.v[cols] < 0
        rows, cols, costs = rows[violated], cols[violated], costs[violated]
        by_column = np.bincount(cols, minlength=self.v.shape[0])[cols] > np.bincount(rows, minlength=self.u.shape[0])[rows]
        lowest = np.full(self.v.shape[0], np.inf)
        np.minimum.at(lowest, cols[by_column], costs[by_column] - self.u[rows[by_column]])
        columns = np.flatnonzero(lowest < self.v)
        self.v[columns] = lowest[columns]
        let_go = self.row4col[columns]
        still = costs - self.u[rows] - self.v[cols] < 0
        lowest = np.full(self.u.shape[0], np.inf)
        np.minimum.at(lowest, rows[still], costs[still] - self.v[cols[still]])
        lowered = np.flatnonzero(lowest < self.u)
        self.u[lowered] = lowest[lowered]
        let_go = np.unique(np.concatenate((let_go[let_go >= 0], lowered)))
        let_go = let_go[self.col4row[let_go] >= 0]
        self.row4col[self.col4row[let_go]] = -1
        self.col4row[let_go] = -1
        return int(let_go.shape[0])


def solve_core(kernels, a, b, a_norms, b_norms, metric: str, p: float, sign: float, stats: Stats,
               candidates: int = DEFAULT_CANDIDATES) -> CoreSolution:
    """The exact assignment of every row of ``a`` (n <= m) to the columns of ``b``; see the module
    docstring. ``kernels`` compute the costs on a device (:mod:`dlap.backends.cpu.points` or
    :mod:`dlap.backends.gpu.points`)."""
    n, m = a.shape[0], b.shape[0]
    args = (a, b, a_norms, b_norms, METRIC_IDS[metric], p, sign)
    square = n == m
    k = max(1, min(candidates, m))
    core, solution = SparseCore(n, m), CoreSolution(n, m)
    counts, _timed = stats.phase_counts, PhaseTimer(stats)

    with _timed("candidates"):
        index, cost = np.empty((n, k), dtype=np.int64), np.empty((n, k))
        kernels.nearest_columns(*args, k, index, cost)
        core.add(np.repeat(np.arange(n, dtype=np.int64), k), index.ravel(), cost.ravel())
        k_rows = max(1, min(k, n))
        back_index, back_cost = np.empty((m, k_rows), dtype=np.int64), np.empty((m, k_rows))
        kernels.nearest_columns(b, a, b_norms, a_norms, METRIC_IDS[metric], p, sign, k_rows, back_index, back_cost)
        core.add(back_index.ravel(), np.repeat(np.arange(m, dtype=np.int64), k_rows), back_cost.ravel())
    with _timed("core_solve"):
        solution.start(core)
        _assign_all(kernels, core, solution, args, square, counts)
    violators_index, violators_reduced = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    violators_count = np.empty(n, dtype=np.int64)
    for round_ in range(1, MAX_ROUNDS + 1):
        with _timed("pricing"):
            kernels.price(*args, solution.u, solution.v, PRICING_RTOL, violators_index, violators_reduced,
                          violators_count)
            counts["violators"] = counts.get("violators", 0) + int(violators_count.sum())
            rows = np.repeat(np.arange(n, dtype=np.int64), np.minimum(violators_count, k))
            cols = violators_index[np.arange(k)[None, :] < violators_count[:, None]]
            costs = _exact_costs(kernels, args, rows, cols)
            added = core.add(rows, cols, costs)
        counts["pricing_rounds"] = round_
        if not added:
            break
        with _timed("core_solve"):
            _resume(kernels, core, solution, args, square, counts, rows, cols, costs)
    else:
        raise RuntimeError(f"dlap internal error: the sparse core did not settle in {MAX_ROUNDS} pricing rounds")
    counts["core_edges"] = core.size
    counts["candidates"] = k
    return solution


def _exact_costs(kernels, args, rows, cols):
    """The pairs' costs as the metric defines them (not rebuilt from reduced costs and duals)."""
    out = np.empty(rows.shape[0])
    if out.size:
        kernels.pair_costs(*args, rows, cols, out)
    return out


def _resume(kernels, core, solution, args, square, counts, rows, cols, costs) -> None:
    """Solve the grown core: warm from the duals on a square matrix, else again from the start."""
    _restart(core, solution, square, counts, rows, cols, costs)
    _assign_all(kernels, core, solution, args, square, counts)


def _restart(core, solution, square, counts, rows, cols, costs) -> None:
    if square:
        counts["rows_let_go"] = counts.get("rows_let_go", 0) + solution.repair(rows, cols, costs)
    else:
        solution.start(core)


def _assign_all(kernels, core, solution, args, square, counts) -> None:
    """Augment every free row; where a search finds no free column, join the rows it reached to
    their nearest free columns and go on. The core is solved on the host, whichever device
    computes the costs."""
    from ..backends.cpu import points as core_kernels

    counters = np.zeros(3, dtype=np.int64)
    scanned = np.empty(core.n_rows, dtype=np.int64)
    while True:
        free = np.flatnonzero(solution.col4row < 0)
        if not free.size:
            break
        indptr, indices, costs = core.csr()
        core_kernels.augmenting_row_reduction(indptr, indices, costs, solution.u, solution.v, solution.col4row,
                                         solution.row4col, free, ARR_STEPS_PER_ROW * free.shape[0])
        free = np.flatnonzero(solution.col4row < 0)
        stuck = core_kernels.augment_rows(indptr, indices, costs, solution.u, solution.v, solution.col4row,
                                     solution.row4col, free, scanned, counters)
        if stuck < 0:
            break
        rows, cols, new_costs = _to_free_columns(kernels, args, scanned[: counters[2]], solution.row4col)
        core.add(rows, cols, new_costs)
        counts["dead_ends"] = counts.get("dead_ends", 0) + 1
        _restart(core, solution, square, counts, rows, cols, new_costs)
    counts["searches"] = counts.get("searches", 0) + int(counters[0])
    counts["columns_reached"] = counts.get("columns_reached", 0) + int(counters[1])


def _to_free_columns(kernels, args, rows, row4col):
    """Edges from ``rows`` to their nearest free columns (as many as there are rows, at least 8)."""
    a, b, a_norms, b_norms, metric, p, sign = args
    xp = array_module(a)
    free = np.flatnonzero(row4col < 0)
    k = min(free.shape[0], max(8, rows.shape[0]))
    on_device_rows, on_device_free = xp.asarray(rows), xp.asarray(free)
    sub_a = xp.ascontiguousarray(a[on_device_rows])
    sub_b = xp.ascontiguousarray(b[on_device_free])
    sub_na = a_norms[on_device_rows] if a_norms.size else a_norms
    sub_nb = b_norms[on_device_free] if b_norms.size else b_norms
    index, cost = np.empty((rows.shape[0], k), dtype=np.int64), np.empty((rows.shape[0], k))
    kernels.nearest_columns(sub_a, sub_b, sub_na, sub_nb, metric, p, sign, k, index, cost)
    return np.repeat(rows, k), free[index.ravel()], cost.ravel()


def objective(kernels, a, b, a_norms, b_norms, metric: str, p: float, rows, cols) -> float:
    """The assignment's total cost: the metric's values summed correctly rounded."""
    out = np.empty(rows.shape[0])
    if out.size:
        kernels.pair_costs(a, b, a_norms, b_norms, METRIC_IDS[metric], p, 1.0, rows, cols, out)
    return math.fsum(out.tolist())
