"""ε-scaling: shortest augmenting paths with ε-scaled prices, for the structured costs on which the
Hungarian variants of Date & Nagi make one augmenting path per search.

Geometric costs, benefit matrices and Machol-Wien ``c_ij = i * j`` leave most rows free after
Jonker-Volgenant initialisation, and every later augmenting path is long: the paper's searches
then find one path per iteration, and each iteration costs a search over the whole forest (on a
GPU, one grid-wide barrier per column that joins it). What makes such instances fast is good
prices: with column prices close to optimal duals, a row's cheapest columns are nearly the ones it
ends with, and its search reaches a free column after a row or two.

This driver finds such prices in three steps:

1. ``price_initialisation`` (a backend primitive): every column priced at its second-keenest
   row's row-reduced cost, then a greedy assignment by decreasing regret, and the prices fitted
   to it (on Machol-Wien the greedy assignment is optimal, and the fitted prices prove it at once).
   A solve handed over at once after Jonker-Volgenant initialisation may start from JV's prices
   instead (``start="jv"``), ε₀ from their standard deviation (:func:`jv_start_excess`).
2. :func:`scaling_phase` for ε = ε₀, ε₀/θ, ...: every row assigned from scratch, every column a
   row fought for made dearer by at least ε (Bertsekas' ε-scaling, in the form of Guthe & Thuerck,
   ACM TOMS 47, 2021, "Algorithm 1015"). Where the backend bids in parallel (a GPU), rounds of
   bids by every free row at once assign most rows (:func:`bidding`: Bertsekas' auction in Jacobi
   form, ``backend.bidding_rounds``); shortest augmenting path searches assign the rest
   (``backend.assign_free_rows``), each lowering the prices of the columns it completed by at
   least ε. ε₀ is the greedy assignment's mean excess over the rows' minima, so an optimal greedy
   assignment skips this step. Integer costs keep integer ε (and integer prices).
3. :func:`exact_phase`: ε = 0, every row assigned from scratch once more (the bids are then
   Jonker & Volgenant's augmenting row reduction, whose pairs are tight). This is the exact
   shortest augmenting path algorithm from the prices of step 2 (with every row free at its start,
   the prices need no property), so the result is optimal whatever steps 1 and 2 did; they only
   decide how short its searches are. Where the fitted prices of step 1 prove the greedy
   assignment optimal (every pair tight, so no ε-phase runs: Machol-Wien), the phase keeps it
   and searches for no row; a partial assignment of tight pairs is what its searches start from
   anyway. A rectangular matrix gets virtual rows of zero costs, which hold the unassigned
   columns and give them the dual the rectangular problem's certificate needs.

That holds in real arithmetic. With float costs the prices can end far larger than the costs that
decide the optimum (1e-12 beside 1e6: the ε-phases work at the large costs' scale), and ``c - v``
then rounds those costs away. So a float answer must prove itself at the precision of the costs it
sums (:func:`proves_itself`); where it cannot, the tree variant solves the matrix again from
Jonker-Volgenant initialisation (``stats.method == "tree"``, ``phase_counts["scaling_imprecise"]``).

``stats.iterations`` counts the searches (one augmenting path each),
``phase_counts["rows_scanned"]`` their row scans, ``phase_counts["scaling_phase"]`` the ε-phases,
``phase_counts["bidding_rounds"]`` and ``["bids"]`` the rounds of bids and the bids made in them,
``["scaling_narrowed"]`` whether the ε-phases read a half-width copy of the matrix
(``Backend.narrowed``: the CPU's, where float64 or int64 costs fit float32 or int32).
"""

from __future__ import annotations

import math

import numpy as np

from ..device import array_module
from ..problem import InfeasibleError
from ..progress import Progress
from ..result import Stats
from ..timing import PhaseTimer
from .phases import drive, start_afresh
from .tree import run_tree

#: θ: ε is divided by this between ε-phases. With rounds of bids a phase's cost is mostly its
#: last searches, the same for every ε, so fewer phases pay; without bids θ changes the row scans
#: by 10% at most
SCALING_FACTOR = 6.0
SCALING_FACTOR_WITH_BIDS = 16.0
#: the last ε-phase runs at no less than this fraction of ε₀ / n (then the exact phase)
FINAL_EPSILON_FRACTION = 1 / 16
#: float costs: the answer's gap to its prices' dual bound, at most this fraction of the costs summed
PRECISION_RTOL = 1e-9
#: backends with ``parallel_bidding``: the rounds of bids stop at this many free rows (the
#: searches assign them), after this many rounds, or after this many rounds without progress
#: (tuned on the hard families, ``dlap bench --suite hard --device gpu``)
BIDDING_TAIL = 8
BIDDING_MAX_ROUNDS = 4096
BIDDING_STALL = 256
#: a start from JV's prices: ε₀ is this many times their standard deviation (tuned on geometric
#: costs, n = 3000 and 10000 on the CPU: the searches scan as many rows as from the greedy start)
JV_START_EPSILON_FACTOR = 10.0
#: the exact phase's bids (augmenting row reduction): at most this many rounds, each freeing this
#: share of the free rows at least
EXACT_MAX_ROUNDS = 32
EXACT_MIN_PROGRESS = 0.02


def epsilon_schedule(excess: float, n_rows: int, integer: bool, theta: float = SCALING_FACTOR) -> list[float]:
    """The ε of each ε-phase: from the greedy assignment's mean excess per row down by ``theta`` each
    phase, while ε stays above ``FINAL_EPSILON_FRACTION * ε₀ / n`` (and, for integer costs, at
    least 1: integer prices keep the exact phase's arithmetic exact). The number of phases is
    fixed by ``n`` and ``theta`` alone, and an ε that float64 cannot hold (a subnormal or zero
    excess: issue 37's ``5e-324`` had ε₀ / n underflow to 0, and the schedule grew without end)
    ends it."""
    if not excess > 0 or not math.isfinite(excess):
        return []
    eps = excess / n_rows
    lowest = eps * FINAL_EPSILON_FRACTION / n_rows
    schedule = []
    for _ in range(2 + math.ceil(math.log(n_rows / FINAL_EPSILON_FRACTION) / math.log(theta))):
        if eps < lowest or eps < (1 if integer else _SMALLEST_NORMAL):
            break
        schedule.append(float(math.floor(eps)) if integer else eps)
        eps /= theta
    return schedule


_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)


def normalise_prices(state) -> None:
    """Shift the prices so that the largest is 0. An ε-phase lowers every price it touches, by
    ε at least, so all of them drift down together; a shift changes no reduced-cost difference,
    but prices far below the costs would leave ``c - v`` without the costs' low digits (found by
    hypothesis: costs of 0 and 1e-12 tied once every price had drifted to -16385)."""
    state.v -= state.v.max()


def bidding(backend, state, eps: float, counts: dict) -> None:
    """Rounds of bids by every free row at once (Bertsekas' auction in Jacobi form), from an
    empty assignment, while more than ``BIDDING_TAIL`` rows are free: in an ε-phase until then
    (or until ``BIDDING_STALL`` rounds assign no more rows, or ``BIDDING_MAX_ROUNDS``); in the
    exact phase (ε = 0, Jonker & Volgenant's augmenting row reduction: every assigned pair stays
    tight, so the exact searches may start from it) while a round frees a ``EXACT_MIN_PROGRESS``
    share of the free rows, at most ``EXACT_MAX_ROUNDS`` times (float decrements can cycle).

    A round costs one scan of every free row, all at once, where a search costs a scan per step,
    one after the other: on a GPU the rounds assign most rows of a phase in the time a few
    searches take. The rows a long chain of bids would need are left to the searches."""
    exact = eps == 0
    _, rounds, bids = backend.bidding_rounds(
        state, eps, BIDDING_TAIL, EXACT_MAX_ROUNDS if exact else BIDDING_MAX_ROUNDS, BIDDING_STALL,
        1 - EXACT_MIN_PROGRESS if exact else 0.0,
    )
    counts["bidding_rounds"] = counts.get("bidding_rounds", 0) + rounds
    counts["bids"] = counts.get("bids", 0) + bids


def scaling_phase(backend, state, eps: float, reverse: bool, counts: dict) -> bool:
    """Step 2, one ε-phase: every row assigned from an empty assignment, by bids first where the
    backend bids in parallel, then by searches (rows last to first with ``reverse``) that lower
    the prices of the columns they complete by ε at least. False: infeasible."""
    backend.empty_assignment(state)
    if backend.parallel_bidding:
        bidding(backend, state, eps, counts)
    feasible = backend.assign_free_rows(state, eps, reverse, virtual=False)
    normalise_prices(state)
    return feasible


def exact_phase(backend, state, counts: dict, keep: bool) -> bool:
    """Step 3: the same with ε = 0 (its bids are the augmenting row reduction, which keeps every
    assigned pair tight), from the assignment in ``state`` with ``keep`` (every pair of it tight:
    the greedy assignment proved optimal), then the virtual rows of a rectangular matrix; leaves
    the optimal
    assignment and its duals: ``u`` of the tight assignment and, for a rectangular matrix, the
    prices shifted so that the unassigned columns' (the largest, which the virtual rows gave
    them) is 0, as the rectangular problem's dual asks. False: infeasible."""
    if keep:
        backend.optimality_check(state)  # list the rows the greedy assignment left free
    else:
        backend.empty_assignment(state)
    if backend.parallel_bidding:
        bidding(backend, state, 0.0, counts)
    if not backend.assign_free_rows(state, 0.0, reverse=False, virtual=True):
        return False
    backend.exact_duals(state)
    if state.n_cols > state.n_rows:
        top = state.v.max()
        state.v -= top
        state.u += top
    return True


def jv_start_excess(state) -> float:
    """Step 1 from Jonker-Volgenant initialisation's prices and assignment (feasible, its pairs
    tight): ``n * ε₀``, ε₀ ``JV_START_EPSILON_FACTOR`` times the prices' standard deviation.
    JV's start skips the greedy's kernels (what a first call compiles). The deviation is taken of
    the prices over their largest magnitude (their squares could overflow)."""
    xp = array_module(state.v)
    top = float(xp.abs(state.v).max()) if state.v.size else 0.0
    spread = top * float(xp.std(state.v / top)) if top > 0 else 0.0
    return JV_START_EPSILON_FACTOR * spread * state.n_rows


def scaling_iterations(backend, state, stats: Stats, phase: PhaseTimer, report: Progress,
                       start: str = "greedy") -> None:
    """Steps 1-3 on ``state``: leaves the optimal assignment and its duals; step 1 by the greedy
    (``start="greedy"``) or from JV's state (``"jv"``, :func:`jv_start_excess`). ``report`` hears
    of each phase, an equal part of what is left of the solve once the schedule is known."""
    counted = backend.counters(state)  # what a variant counted before a hand-over
    report.stage("price initialisation", hi=report.fraction, n_free=state.n_rows)
    with phase("price_initialisation"):
        excess = backend.price_initialisation(state) if start == "greedy" else jv_start_excess(state)
    if excess is None:
        raise InfeasibleError()
    integer = state.cost.dtype.kind in "iu"
    theta = SCALING_FACTOR_WITH_BIDS if backend.parallel_bidding else SCALING_FACTOR
    schedule = epsilon_schedule(excess, state.n_rows, integer, theta)
    rough = None
    if schedule:
        with phase("narrow_copy"):
            rough = backend.narrowed(state)  # the ε-phases' half-width copy of the matrix
        stats.phase_counts["scaling_narrowed"] = int(rough is not None)
    begun, parts = report.fraction, len(schedule) + 1  # the bar's share done before the phases

    def next_part(k: int, name: str) -> None:
        report.stage(name, begun + (1 - begun) * k / parts, begun + (1 - begun) * (k + 1) / parts,
                     n_free=state.n_rows)

    for k, eps in enumerate(schedule):
        next_part(k, f"ε-phase {k + 1} of {len(schedule)}")
        with phase("scaling_phase"):
            # alternate the row order: the rows that came last in one phase come first in the next
            feasible = scaling_phase(backend, state if rough is None else rough, eps, k % 2 == 0,
                                     stats.phase_counts)
        if not feasible:
            raise InfeasibleError()
    del rough  # the copy's memory, back before the exact phase
    next_part(len(schedule), "exact phase")
    with phase("exact_phase"):
        feasible = exact_phase(backend, state, stats.phase_counts, keep=excess == 0)
    if not feasible:
        raise InfeasibleError()
    searches, rows_scanned = (now - before for now, before in zip(backend.counters(state), counted, strict=True))
    stats.iterations, stats.phase_counts["rows_scanned"] = searches, rows_scanned


def proves_itself(backend, state) -> bool:
    """Whether the assignment in ``state`` closes its gap to the dual bound of its prices,
    ``sum_i min_j (c_ij - v_j) + sum_j v_j``, within ``PRECISION_RTOL`` of the costs it sums,
    counting the rounding of every ``c_ij - v_j`` against it (a few ulps of the duals: prices far
    above the costs cannot prove an answer about them). The sums are exact (``math.fsum``), and
    the tolerance does not grow with the prices, as the certificate's does."""
    xp = array_module(state.v)
    return gap_closes(backend.matched_costs(state), backend.reduced_row_minima(state, state.v), state.v,
                      lambda: backend.reduced_row_minima(state, xp.zeros(state.n_cols)))


def gap_closes(matched, row_duals, v, cost_minima) -> bool:
    """:func:`proves_itself` from the matched costs, each row's least ``c - v`` and ``v``;
    ``cost_minima()`` gives each row's least ``c``, asked only where the gap does not close."""
    primal = math.fsum(matched.tolist())
    bound = math.fsum(row_duals.tolist()) + math.fsum(v.tolist())
    rounding = 4 * np.finfo(np.float64).eps * (float(abs(row_duals).sum()) + float(abs(v).sum()))
    if abs(primal - bound) + rounding <= PRECISION_RTOL * math.fsum(abs(matched).tolist()):
        return True
    # An optimum of cost 0 leaves the tolerance at 0, where any rounding fails it (the identity
    # matrix did); an assignment taking every row's minimum is optimal with no arithmetic at all.
    return bool((matched == cost_minima()).all())


def solve_scaling(backend, state, stats: Stats, progress=None, roots: str = "auto", start: str = "greedy") -> None:
    """Run the ε-scaling engine to optimality on ``state`` (mutated in place; ``start="jv"``:
    from JV initialisation's state in it); for float costs whose answer does not prove itself,
    the tree variant (with ``roots``) from JV initialisation. ``progress``: a callback, or the
    :class:`~dlap.progress.Progress` of a solve handed over."""
    stats.method = "scaling"
    stats.init = "prices" if start == "greedy" else "jv"
    report = Progress.of(progress, state.n_rows)
    scaling_iterations(backend, state, stats, PhaseTimer(stats, backend, state), report, start)
    if state.cost.dtype.kind == "f" and not proves_itself(backend, state):
        stats.phase_counts["scaling_imprecise"] = 1
        start_afresh(state)
        report.stage("searches (tree variant)")
        drive(backend, state, stats, "tree", "jv", report, lambda *args: run_tree(*args, roots))
        return
    report(0, final=True)
