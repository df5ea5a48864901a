"""CPU backend: the phase primitives on NumPy arrays, run by the Numba kernels of backends/cpu/hungarian.py and scaling.py."""

from __future__ import annotations

import math

import numpy as np

from ...hungarian.state import HungarianState
from ...problem import Problem
from ..base import FLOAT_TOL_SCALE, DeviceBackend, bidding_loop, compression_plan, install_assignment
from ..constants import SCAN_ROW
from . import hungarian as k
from . import scaling as ks
from .numba_setup import read_only


def available_memory() -> int:
    """Bytes of host memory available to a new allocation (Linux's MemAvailable; 0 where unknown)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


#: the previous CSR of a first compression, which scans every row and reads none
_NO_EDGES = np.zeros(1, dtype=np.int64)
#: augmenting row reduction: passes (as JV) and row visits per pass, in multiples of n
ARR_PASSES = 2
ARR_BUDGET_PER_ROW = 4
#: ε-scaling reads a half-width copy (Backend.narrowed) of matrices of at least this many entries:
#: a smaller one is read from the caches, where the copy saved at most 5% (geometric n = 1000)
#: and cost a first solve the compilation of every ε-phase kernel for the narrow dtype
NARROW_MIN_ENTRIES = 1 << 21


class CPUBackend(DeviceBackend):
    """Date & Nagi's primitives on the host, in the paper's OpenMP style (Numba ``prange``)."""

    device = "cpu"

    def allocate(self, problem: Problem) -> HungarianState:
        return HungarianState.allocate(
            read_only(problem.matrix), np, np.int64, np.bool_, 0.0 if problem.is_integer else FLOAT_TOL_SCALE
        )

    def allocate_graph(self, shape, dtype, tol_scale):
        cost = np.broadcast_to(np.zeros((), dtype=dtype), shape)
        return HungarianState.allocate(cost, np, np.int64, np.bool_, tol_scale)

    def initial_reduction(self, state, columns):
        k.row_reduction(state.cost, state.u)
        if not np.isfinite(state.u).all():
            return False  # a row of forbidden entries only
        if columns:
            self.column_reduction(state)
            return bool(np.isfinite(state.v).all())
        return True

    def column_reduction(self, state):
        k.column_reduction(state.cost, state.u, state.v, np.empty(state.n_cols, dtype=np.int64))

    def column_minima(self, state):
        argmin = np.empty(state.n_cols, dtype=np.int64)
        k.column_reduction(state.cost, np.zeros(state.n_rows), state.v, argmin)
        return argmin

    def row_duals(self, state):
        k.row_duals_from_columns(state.cost, state.v, state.u)

    def row_minima_terms(self, state, rows):
        terms = np.empty((rows.shape[0], 5))
        ks.row_minima_terms(state.cost, state.v, state.col_match, rows, terms)
        return terms

    def search_offer(self, state, match, row, shift):
        offer = np.empty(5)
        ks.search_offer(state.cost, state.v, state.v_open, state.slack, state.col_pred, match, row, shift, offer)
        return offer

    def column_competition(self, state, row_low):
        out = np.empty(state.n_cols)
        ks.column_competition(state.cost, row_low, out)
        return out

    def cheapest_untaken(self, state, row, taken):
        value, col = ks.cheapest_untaken(state.cost, row, state.v, taken)
        return float(value), int(col)

    def lower_taken_prices(self, state, row, own, taken):
        ks.lower_taken_prices(state.cost, row, state.v, taken, float(own))

    def bids_of_terms(self, terms, eps):
        cols, dec = np.empty(terms.shape[0], dtype=np.int64), np.empty(terms.shape[0])
        ks.bids_of_terms(np.ascontiguousarray(terms), float(eps), cols, dec)
        return cols, dec

    def award_bids(self, state, rows, cols, dec):
        _, _, col_best, col_winner = self._bid_buffers(state)
        ks.award_bids(np.ascontiguousarray(rows, dtype=np.int64), rows.shape[0], cols, dec, state.row_match,
                      state.col_match, state.v, col_best, col_winner)
        return k.optimality_check(state.row_match, state.free_rows)

    def jv_initialisation(self, state):
        n_rows, n_cols = state.cost.shape
        if n_rows == n_cols:
            argmin = self.column_minima(state)
            if not np.isfinite(state.v).all():
                return False  # a column of forbidden entries only
            k.jv_assignment_from_minima(state.cost, state.v, argmin, state.row_match, state.col_match,
                                        np.zeros(n_rows, dtype=np.int64))
        n_free = k.optimality_check(state.row_match, state.free_rows)
        k.augmenting_row_reduction(
            state.cost, state.v, state.row_match, state.col_match, state.free_rows, n_free,
            ARR_PASSES, ARR_BUDGET_PER_ROW * max(n_rows, 1),
        )
        self.row_duals(state)
        return bool(np.isfinite(state.u).all())

    def initial_assignment(self, state):
        return k.initial_assignment(
            state.cost, state.u, state.v, state.row_match, state.col_match, state.tol_scale
        )

    def optimality_check(self, state):
        state.n_free = k.optimality_check(state.row_match, state.free_rows)
        return state.n_free

    def compress(self, state):
        return self._compress(state, np.full(state.n_rows, SCAN_ROW, dtype=np.int8))

    def recompress(self, state, theta):
        return self._compress(state, compression_plan(state, theta))

    @staticmethod
    def _compress(state, how) -> int:
        """The CSR with each row's edges made as ``how`` says (the previous CSR: only read for
        rows it does not scan)."""
        old_ptr, old_idx = (state.row_ptr, state.col_idx) if state.row_ptr is not None else (_NO_EDGES, _NO_EDGES)
        geometry = (state.cost, state.u, state.v, state.tol_scale, how, old_ptr, old_idx, state.col_seen)
        row_ptr = np.zeros(state.n_rows + 1, dtype=np.int64)
        k.count_edges(*geometry, row_ptr[1:])
        np.cumsum(row_ptr, out=row_ptr)
        col_idx = np.empty(int(row_ptr[-1]), dtype=np.int64)
        k.scatter_edges(*geometry, row_ptr, col_idx)
        state.row_ptr, state.col_idx = row_ptr, col_idx
        return int(row_ptr[-1])

    def classical_forward_pass(self, state, resume=False):
        state.n_reverse, state.n_forest_rows = k.classical_forward_pass(
            state.row_ptr, state.col_idx, state.col_match, state.free_rows, state.n_free,
            state.col_pred, state.row_pred, state.row_seen, state.col_seen, state.rows_q,
            state.reverse, state.counters, state.n_forest_rows if resume else 0,
        )
        return state.n_reverse

    def classical_theta(self, state):
        if state.forest_low is None:
            state.forest_low = np.empty(state.n_rows)
        return k.classical_theta(state.cost, state.u, state.v, state.rows_q, state.n_forest_rows, state.col_seen,
                                 state.tol_scale, state.forest_low, np.empty(state.n_forest_rows))

    def classical_shift(self, state, theta):
        k.classical_shift(state.u, state.v, state.rows_q, state.n_forest_rows, state.col_seen, theta)

    def tree_forward_pass(self, state, n_roots, collect_ties):
        state.n_reverse, state.n_forest_rows, state.n_forest_cols, state.level = k.tree_forward_pass(
            state.cost, state.u, state.v, state.col_match, state.free_rows, n_roots, collect_ties,
            state.slack, state.col_pred, state.row_pred, state.row_level, state.col_level,
            state.v_open, state.forest_cols, state.rows_q, state.reverse, state.counters,
        )
        return state.n_reverse

    def tree_scan(self, state, rows, shift, n):
        k.tree_scan(state.cost, rows, shift, n, state.v_open, state.slack, state.col_pred)

    def tree_offer(self, state, level, lo, out):
        k.tree_offer(state.slack, state.col_pred, lo, level, out)

    def tree_join(self, state, slab, offered, level, lo, shift, wave, first):
        k.tree_join(
            offered, level, lo, slab.slack, slab.v_open, state.col_pred, state.col_level, state.forest_cols,
            state.col_match, state.reverse, state.row_level, state.row_pred, state.rows_q, state.u, shift, wave,
            first,
        )

    def load_reverse(self, state, n_reverse):
        state.n_reverse = n_reverse

    def tree_dual_update(self, state):
        k.tree_dual_update(
            state.u, state.v, state.rows_q, state.n_forest_rows, state.row_level,
            state.forest_cols, state.n_forest_cols, state.col_level, state.level,
        )

    def reverse_pass(self, state):
        state.n_paths = k.reverse_pass(
            state.reverse, state.n_reverse, state.col_pred, state.row_pred, state.succ_row,
            state.claimed, state.aug_roots,
        )
        return state.n_paths

    def augment(self, state):
        k.augment(state.aug_roots, state.n_paths, state.succ_row, state.row_match, state.col_match)

    # ------------------------------------------------------------ ε-scaling (hungarian/scaling.py)

    def price_initialisation(self, state):
        n_rows, n_cols = state.cost.shape
        square = n_rows == n_cols
        state.v[:] = 0.0
        if square and not ks.competition_prices(state.cost, state.u, state.v):
            return None
        regret = np.empty(n_rows)
        ks.row_regrets(state.cost, state.v, regret)
        order = np.argsort(-regret, kind="stable")  # largest regret first, ties in row order
        picked = np.empty(n_rows, dtype=np.int64)
        ks.greedy_prices(state.cost, state.v, order, picked, np.zeros(n_cols, dtype=np.bool_), square)
        self.row_duals(state)
        if not np.isfinite(state.u).all():
            return None
        excess = np.empty(n_rows)
        ks.greedy_excess(state.cost, state.v, state.u, order, picked, excess)
        kept = picked >= 0
        install_assignment(state, order[kept], picked[kept])
        return math.fsum(excess.tolist())

    def narrow_copy(self, cost, dtype):
        if cost.size < NARROW_MIN_ENTRIES or 2 * cost.size * dtype.itemsize > available_memory():
            return None
        copy = np.empty(cost.shape, dtype=dtype)
        limit = float(np.finfo(dtype).max if dtype.kind == "f" else np.iinfo(dtype).max)
        beyond = np.empty(cost.shape[0], dtype=np.int64)
        ks.narrow_copy(cost, copy, limit, beyond)
        return None if beyond.any() else read_only(copy)

    def bidding_rounds(self, state, eps, tail, max_rounds, stall, keep_share):
        self._bid_buffers(state)

        def one_round():
            return ks.bidding_round(state.cost, state.v, eps, state.free_rows, state.n_free, state.row_match,
                                    state.col_match, *state.bids)

        return bidding_loop(state, one_round, tail, max_rounds, stall, keep_share)

    @staticmethod
    def _bid_buffers(state):
        """The bids' scratch, made once: per free row the column and the decrement; per column
        the best bid and its row (-1 between rounds)."""
        if state.bids is None:
            state.bids = (np.empty(state.n_rows, dtype=np.int64), np.empty(state.n_rows),
                          np.empty(state.n_cols), np.full(state.n_cols, -1, dtype=np.int64))
        return state.bids

    def assign_free_rows(self, state, eps, reverse, virtual):
        rows = state.free_rows[: state.n_free]
        return ks.assign_free_rows(
            state.cost, state.v, eps, rows[::-1].copy() if reverse else rows,
            np.full(state.n_cols - state.n_rows if virtual else 0, -1, dtype=np.int64), state.row_match, state.col_match,
            state.slack, state.col_pred, state.v_open, state.forest_cols, state.col_level, state.counters,
        )

    def exact_duals(self, state):
        ks.tight_duals(state.cost, state.v, state.row_match, state.u)

    def counters(self, state):
        return int(state.counters[0]), int(state.counters[1])

    def to_host(self, state):
        return state.row_match, state.u, state.v

    to_device = to_host  # (the CPU's device is the host)

    def placed_matrix(self, state):
        return state.cost, 0
