"""The primitive set every backend implements: the phases of Date & Nagi (2016), by name.

The drivers in :mod:`dlap.hungarian` are written once against this interface. Each primitive
mutates the :class:`~dlap.hungarian.state.HungarianState` in place and returns at most a few
scalars, which is all the host loop reads per iteration (docs/design.md, "Rules").
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod

import numpy as np

from ..certificate import widened
from ..device import array_module
from ..hungarian.state import HungarianState
from ..problem import Problem
from ..result import row_minima
from .constants import KEEP_ROW, KEEP_UNCOVERED, SCAN_ROW

#: ε-scaling's ε-phases read a copy of the matrix in the narrower dtype (Backend.narrowed)
NARROWER = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}
#: Jonker & Volgenant's augmenting row reduction as rounds of bids (the GPU's and the Dask engine's):
#: at most this many rounds, and stop once a round frees fewer than this fraction of the free rows
#: (ties on assigned columns stall it; the searches take over)
ARR_MAX_ROUNDS = 32
ARR_MIN_PROGRESS = 0.02
#: zero-slack tolerance factor for float costs in the classical variant: a few ulps of
#: |c| + |u| + |v|, a bound on the rounding error of c - u - v (no fixed epsilon)
FLOAT_TOL_SCALE = 8 * np.finfo(np.float64).eps


def compression_plan(state: HungarianState, theta: float) -> np.ndarray:
    """How the compression after the dual update by ``theta`` makes each row's edges (int8 array
    of :data:`SCAN_ROW` and the others), from the forest that update left (section 4.4).

    Algorithm 8 changes the slack of two kinds of entry only: a row outside the forest loses
    ``theta`` on its edges to covered columns (they are no longer tight), and a forest row gains
    it on its uncovered columns (those at slack ``theta`` become tight). A forest row's previous
    edges all reach covered columns (the fruitless BFS covered every column they reach), so they
    stay; a row outside the forest keeps its edges to uncovered columns. Only the forest rows
    whose smallest uncovered slack, less twice its tolerance (``forest_low``, left by
    ``classical_theta``), is within ``theta`` (and its tolerance) are scanned again: exactly the
    rows at slack ``theta`` for integer costs; for float costs, every row where the zero-slack
    test (a few ulps) can pass after the shift. One read of those rows instead of the matrix.
    Host arrays (the CPU backend's); the GPU applies the same rule in one kernel
    (``compression_plan`` in cuda/classical.cu)."""
    how = np.full(state.n_rows, KEEP_UNCOVERED, dtype=np.int8)
    n_q = state.n_forest_rows
    if n_q:  # (a Dask rank's slab may hold none of the forest's rows)
        within = state.forest_low[:n_q] <= rescan_bound(theta, state.tol_scale)
        how[state.rows_q[:n_q]] = np.where(within, SCAN_ROW, KEEP_ROW).astype(np.int8)
    return how


def rescan_bound(theta: float, tol_scale: float) -> float:
    """:func:`compression_plan`'s test: a forest row is scanned again where its ``forest_low``
    is at most this (theta itself for integer costs; theta > 0 after a fruitless search)."""
    return theta * (1 + 2 * tol_scale)


def install_assignment(state: HungarianState, rows, cols) -> None:
    """Make ``rows[k]`` -> ``cols[k]`` the assignment in ``state`` (NumPy or CuPy arrays), every
    other row and column unassigned. ε-scaling's step 1 leaves its greedy assignment so (where
    the fitted prices prove it optimal, every pair tight: Machol-Wien, the exact phase keeps it
    and searches for no row); the Dask engine's ranks so adopt a merged or broadcast one."""
    state.row_match.fill(-1)
    state.col_match.fill(-1)
    state.row_match[rows] = cols.astype(state.row_match.dtype)
    state.col_match[cols] = rows.astype(state.col_match.dtype)


def bidding_loop(state: HungarianState, one_round, tail: int, max_rounds: int, stall: int,
                 keep_share: float) -> tuple[int, int, int]:
    """:meth:`Backend.bidding_rounds` for a backend whose host drives the rounds:
    ``one_round()`` makes one round of bids from ``state.free_rows[:state.n_free]`` and returns
    the free rows left (listed as free). Stops as that method says; returns (free rows, rounds,
    bids)."""
    n_free, rounds, bids, stalled = state.n_free, 0, 0, 0
    while n_free > tail and rounds < max_rounds:
        previous = n_free
        n_free = state.n_free = one_round()
        rounds, bids = rounds + 1, bids + previous
        stalled = stalled + 1 if n_free == previous else 0
        if (keep_share > 0 and n_free > previous * keep_share) or stalled >= stall:
            break
    return n_free, rounds, bids


class Backend(ABC):
    """The phase primitives the drivers of :mod:`dlap.hungarian` call (both variants, the hybrid,
    the ε-scaling engine), on one device or, for the Dask engine, over the ranks' slabs
    (:class:`dlap.distributed.rank.backend.DistributedBackend`). docs/design.md maps each phase to its
    driver, its CPU kernel, its CUDA kernel and its distributed step."""

    #: device name reported in ``Assignment.stats.device``
    device: str = ""
    #: ε-scaling: whether the phases start with rounds of bids by every free row at once (a GPU
    #: scans thousands of rows in the time one search step takes; a CPU's few cores do not gain)
    parallel_bidding: bool = False

    @abstractmethod
    def initial_reduction(self, state: HungarianState, columns: bool) -> bool:
        """Section 4.1: row reduction, then column reduction if ``columns``; False if infeasible."""

    @abstractmethod
    def jv_initialisation(self, state: HungarianState) -> bool:
        """Jonker-Volgenant column reduction, reduction transfer and augmenting row reduction."""

    @abstractmethod
    def initial_assignment(self, state: HungarianState) -> int:
        """Greedy matching on zero-slack edges; returns the number of rows assigned."""

    @abstractmethod
    def optimality_check(self, state: HungarianState) -> int:
        """Section 4.2: collect the unassigned rows; returns how many there are."""

    @abstractmethod
    def compress(self, state: HungarianState) -> int:
        """Section 3.3: the zero-slack edges as CSR; returns their number."""

    @abstractmethod
    def recompress(self, state: HungarianState, theta: float) -> int:
        """Section 3.3 after the dual update by ``theta`` (:meth:`classical_shift`): the CSR
        made from the previous one as :func:`compression_plan` says, the same edges as
        :meth:`compress` would find (to the zero-slack test's rounding for float costs); returns
        their number."""

    @abstractmethod
    def classical_forward_pass(self, state: HungarianState, resume: bool = False) -> int:
        """Section 4.3.1, classical: BFS over the CSR from all free rows; returns reverse columns.

        ``resume``: the previous pass reached no free column and a dual update followed
        (section 4.4), so its forest still holds: every edge of it stayed tight and only edges
        from its rows to uncovered columns were made. The pass keeps the forest's marks and
        predecessors and goes on from its rows (Munkres' step 6 returns to step 4 with the
        covers and primes kept) instead of searching the whole forest again."""

    @abstractmethod
    def classical_theta(self, state: HungarianState) -> float:
        """Section 4.4, Algorithm 7: theta = min slack over the forest rows
        ``rows_q[:n_forest_rows]`` x the uncovered columns (inf: no finite edge leaves them).
        Leaves each forest row's ``forest_low`` for :meth:`recompress`."""

    @abstractmethod
    def classical_shift(self, state: HungarianState, theta: float) -> None:
        """Section 4.4, Algorithm 8: forest rows gain ``theta``, covered columns lose it."""

    @abstractmethod
    def tree_forward_pass(self, state: HungarianState, n_roots: int, collect_ties: bool) -> int:
        """Section 4.3.1, tree: grow trees from the first ``n_roots`` free rows; -1: infeasible."""

    @abstractmethod
    def tree_dual_update(self, state: HungarianState) -> None:
        """Section 4.4, tree: apply the dual level reached by the forward pass."""

    @abstractmethod
    def reverse_pass(self, state: HungarianState) -> int:
        """Section 4.3.2: keep vertex-disjoint paths; returns their number."""

    @abstractmethod
    def augment(self, state: HungarianState) -> None:
        """Section 4.3.3: flip the edges along the kept paths."""

    @abstractmethod
    def price_initialisation(self, state: HungarianState) -> float | None:
        """ε-scaling, step 1 (:mod:`dlap.hungarian.scaling`): column prices ``v`` from the
        second-keenest rows, fitted to a greedy assignment by decreasing regret (square
        matrices; a rectangular one starts from ``v = 0``), which is left as the state's
        assignment (:func:`install_assignment`). Returns the greedy assignment's total
        excess over the rows' minimum reduced costs (0: the prices already prove it optimal), or
        None when a row has no finite entry (infeasible)."""

    def matched_costs(self, state: HungarianState):
        """The assigned entries ``C[i, row_match[i]]`` in float64 (every row assigned)."""
        xp = array_module(state.cost)
        return widened(state.cost[xp.arange(state.n_rows), state.row_match])

    def reduced_row_minima(self, state: HungarianState, v):
        """``min_j (C[i, j] - v[j])`` for every row, in float64, into a new array."""
        return row_minima(state.cost, v)

    def narrowed(self, state: HungarianState) -> HungarianState | None:
        """ε-scaling's ε-phases on a half-width copy of the matrix: the same state (every array
        shared) with float64 costs rounded to float32, or int64 costs in int32 where they all fit
        (exact). A search step scans a whole row, and on rows that do not fit the caches it waits
        for memory: on a CPU a float32 row scans in half the time of a float64 one (0.63 against
        1.34 us at n = 2000). The exact phase and the proof read the matrix itself, so the
        rounding only changes the prices the exact phase starts from, never its answer. None
        where the matrix is already narrow, a finite entry would not fit (float64 beyond
        float32's range), the copy would not fit in free memory twice over, or the backend makes
        no copy of this matrix (:meth:`narrow_copy`; the GPU's searches wait on latency, not on
        memory: with the copy they took 1.1x to 2x longer)."""
        narrow = NARROWER.get(np.dtype(state.cost.dtype))
        copy = None if narrow is None else self.narrow_copy(state.cost, narrow)
        return None if copy is None else dataclasses.replace(state, cost=copy)

    def narrow_copy(self, cost, dtype):
        """``cost`` in ``dtype`` (see :meth:`narrowed`), or None where a finite entry does not fit,
        the copy would not fit in free memory twice over, or the backend makes no copy of it (the
        default: none; the CPU's: none of a small matrix)."""
        return None

    def empty_assignment(self, state: HungarianState) -> None:
        """ε-scaling, start of a phase: every row unassigned, and listed as free."""
        state.row_match.fill(-1)
        state.col_match.fill(-1)
        self.optimality_check(state)

    @abstractmethod
    def bidding_rounds(self, state: HungarianState, eps: float, tail: int, max_rounds: int, stall: int,
                       keep_share: float) -> tuple[int, int, int]:
        """ε-scaling: Jacobi rounds of bids by every free row against the same prices (a free
        column at the row's minimum taken as it is; otherwise the cheapest column, its price
        lowered by the row's second-smallest reduced cost minus its smallest, plus ``eps``; the
        largest decrement wins a column, ties to the lowest row), while more than ``tail`` rows
        are free, at most ``max_rounds``, stopping after ``stall`` rounds in a row that assign
        no more rows or (``keep_share`` > 0) after a round that leaves more than ``keep_share``
        of its rows free. ``eps = 0`` is Jonker & Volgenant's augmenting row reduction, which
        keeps every assigned pair tight. Returns (free rows left, listed as free; rounds; bids)."""

    @abstractmethod
    def assign_free_rows(self, state: HungarianState, eps: float, reverse: bool, virtual: bool) -> bool:
        """ε-scaling: assign every free row (in ascending order, descending with ``reverse``)
        by a shortest augmenting path search that lowers the prices of the columns it completed
        by at least ``eps``; then, with ``virtual``, one virtual row of zero costs per column
        beyond the rows (the exact phase of a rectangular matrix). False: a row reaches no free
        column (infeasible)."""

    @abstractmethod
    def exact_duals(self, state: HungarianState) -> None:
        """ε-scaling, end of the exact phase: the row duals ``u`` of the tight assignment
        (``C[i, row_match[i]] - v[row_match[i]]``)."""

    def synchronize(self, state: HungarianState) -> None:
        """Wait for the device's queued work (so a phase's time is its own; no-op on the CPU)."""

    @abstractmethod
    def counters(self, state: HungarianState) -> tuple[int, int]:
        """(dual updates, rows scanned or BFS levels) accumulated by the searches; for the
        ε-scaling engine (searches, rows scanned)."""


class SlabPrimitives(ABC):
    """What a Dask rank's :class:`~dlap.distributed.rank.backend.DistributedBackend` asks of the local
    device's backend about its slab of the matrix, beyond :class:`Backend`: the parts of a phase
    that one rank computes before the ranks combine them with a collective."""

    @abstractmethod
    def allocate_graph(self, shape: tuple[int, int], dtype, tol_scale: float) -> HungarianState:
        """The state arrays for a matrix of ``shape`` held elsewhere: the Dask engine's replicated
        search state, whose matrix is split across the ranks (``state.cost`` has the shape and
        dtype but no memory; only the graph phases may run on it)."""

    @abstractmethod
    def column_reduction(self, state: HungarianState) -> None:
        """Algorithm 1, column reduction with the state's row duals: ``v[j] = min_i (C - u)``."""

    @abstractmethod
    def column_minima(self, state: HungarianState):
        """JV's column reduction: ``v[j] = min_i C[i, j]``; returns the first row at each minimum."""

    @abstractmethod
    def row_duals(self, state: HungarianState) -> None:
        """``u[i] = min_j (C[i, j] - v[j])``: the largest row duals that keep ``v`` feasible."""

    @abstractmethod
    def search_offer(self, state: HungarianState, match, row: int, shift: float):
        """One step of an ε-scaling search over this state's columns, for the Dask engine
        (:mod:`dlap.distributed.rank.scaling`): row ``row`` (unless -1) lowers ``slack`` (the
        distances) to ``(C[row] - v_open) + shift`` where that is lower, recording it in
        ``col_pred``; returns the nearest column not completed (the first free one at that
        distance, else the first) as a float64 array (distance, column, 1.0 if free under
        ``match``, the reduced cost ``C[match[j], j] - v[j]`` of its row there, its
        predecessor); distance inf where every column is completed."""

    @abstractmethod
    def row_minima_terms(self, state: HungarianState, rows):
        """For each row of ``rows``, over the state's columns with prices ``v``: the smallest
        reduced cost ``C[i, j] - v[j]`` and its first column, the second smallest (a tie with the
        smallest counts), and the smallest over the free columns (``col_match < 0``) with its
        first column, as a float64 array of shape (len(rows), 5); column -1 where there is none.
        What a row's bid (:meth:`bidding_rounds`) and its reduction transfer are made of: the
        Dask engine computes them on each slab and combines them over the ranks."""

    @abstractmethod
    def bids_of_terms(self, terms, eps: float):
        """Each row's bid from its terms (rows of :meth:`row_minima_terms`, combined over the
        ranks), the rule of :meth:`Backend.bidding_rounds`: a free column at the minimum at no
        price change, else the cheapest column lowered by ``u2 - u1 + eps`` (by ``eps`` alone
        where u2 is infinite; no bid with ``eps = 0`` on a tie or a single finite entry).
        Returns (column or -1, decrement) as device arrays."""

    @abstractmethod
    def award_bids(self, state: HungarianState, rows, cols, dec) -> int:
        """The bids (:meth:`bids_of_terms`) of the free ``rows`` resolved on ``state`` as a round
        of :meth:`Backend.bidding_rounds` resolves them: the largest decrement wins a column,
        equal ones the lowest row; winners take their column, lower its price by their bid and
        displace its row. Returns the free rows left, listed as :meth:`Backend.optimality_check` lists them."""

    @abstractmethod
    def column_competition(self, state: HungarianState, row_low):
        """Each column's second-smallest row-reduced cost ``C[i, j] - row_low[i]`` (its smallest
        with one finite entry, inf with none): ε-scaling's competition prices before their
        shift (step 1 of :mod:`dlap.hungarian.scaling`), for this slab's columns."""

    @abstractmethod
    def cheapest_untaken(self, state: HungarianState, row: int, taken) -> tuple[float, int]:
        """The greedy start's step (step 1 of :mod:`dlap.hungarian.scaling`): row ``row``'s smallest
        reduced cost ``C[row, j] - v[j]`` over the columns not ``taken`` (a bool device array)
        and its first column (-1 where none is finite), on the host."""

    @abstractmethod
    def lower_taken_prices(self, state: HungarianState, row: int, own: float, taken) -> None:
        """The price fit's step: every ``taken`` column whose reduced cost in row ``row`` is
        below ``own`` is lowered to ``own``."""

    @abstractmethod
    def tree_scan(self, state: HungarianState, rows, shift, n: int) -> None:
        """Algorithm 4's expansion for an explicit frontier: every row ``rows[q]`` (q < n) lowers
        ``slack[j]`` to ``shift[q] + C[rows[q], j] - v_open[j]`` where that is lower, recording
        the row in ``col_pred``. The Dask engine's tree search runs it on a column slab."""

    @abstractmethod
    def tree_offer(self, state: HungarianState, level: float, lo: int, out) -> None:
        """A tree wave's offer from a column slab (the Dask engine's tree search; the slab's
        columns are global columns ``lo + j``): ``out[0] = (smallest slack, count, 0)``, then
        ``count`` rows (global column, ``col_pred``, slack) of the columns with a finite slack at
        or below ``max(level, smallest slack)``, in any order. ``out`` (float64, 3 wide) has a
        row per column of the slab and one more."""

    @abstractmethod
    def tree_join(self, state: HungarianState, slab: HungarianState, offered, level: float, lo: int, shift,
                  wave, first: bool) -> None:
        """A tree wave's join on the replica ``state``: of the rows (column, predecessor, slack)
        of ``offered``, in order, those tight at ``level`` join the forest: the column's
        ``col_pred``/``col_level``, ``forest_cols``; a free one ``reverse``; the row matched to
        another joins ``rows_q`` with its ``row_level``/``row_pred``, and is the next frontier with
        ``shift = slack - u``. The columns of ``slab`` (global ``lo + j``) among them leave its scan
        (``slack`` +inf, ``v_open`` -inf). ``wave`` (int64: forest columns, reverse columns,
        forest rows, frontier rows of this wave) is advanced; ``first`` starts the frontier."""

    @abstractmethod
    def load_reverse(self, state: HungarianState, n_reverse: int) -> None:
        """Declare ``reverse[:n_reverse]`` as the free columns a search reached, for a search run
        outside the backend (the Dask engine's), before :meth:`reverse_pass`."""


class DeviceBackend(Backend, SlabPrimitives):
    """A device's backend (:func:`dlap.backends.backend`): the drivers' primitives and a Dask
    rank's slab primitives, and what ``dlap.solve`` asks of it around a solve."""

    @abstractmethod
    def allocate(self, problem: Problem) -> HungarianState:
        """Place the cost matrix on the device and allocate the state arrays."""

    @abstractmethod
    def to_host(self, state: HungarianState):
        """``(row_match, u, v)`` as NumPy arrays."""

    @abstractmethod
    def to_device(self, state: HungarianState):
        """``(row_match, u, v)`` on the device that solved them (CuPy arrays on a GPU)."""

    @abstractmethod
    def placed_matrix(self, state: HungarianState):
        """``(matrix, exponent)``: the matrix ``state`` solves, on the device, in minimisation form,
        and the power of two it was scaled down by beyond its problem's ``scale_exponent``."""
