"""ε-scaling: shortest augmenting paths with ε-scaled prices, for the structured costs on which the
Hungarian variants of Date & Nagi make one augmenting path per search.

Geometric costs, benefit matrices and Machol-Wien ``c_ij = i * j`` leave most rows free after
Jonker-Volgenant initialisation, and every later augmenting path is long: the paper's searches
then find one path per iteration, and each iteration costs a search over the whole forest (on a
GPU, one grid-wide barrier per column that joins it). What makes such instances fast is good
prices: with column prices close to optimal duals, a row's cheapest columns are nearly the ones it
ends with, and its search reaches a free column after a row or two.

This driver finds such prices in three steps, each a backend primitive:

1. ``price_initialisation``: every column priced at its second-keenest row's row-reduced cost,
   then a greedy assignment by decreasing regret, and the prices fitted to it (on Machol-Wien the
   greedy assignment is optimal, and the fitted prices prove it at once).
2. ``scaling_phase(ε)`` for ε = ε₀, ε₀/θ, ...: every row assigned from scratch by a shortest
   augmenting path search, each search lowering the prices of the columns it completed by at least
   ε (Bertsekas' ε-scaling, in the form of Guthe & Thuerck, ACM TOMS 47, 2021, "Algorithm 1015").
   ε₀ is the greedy assignment's mean excess over the rows' minima, so an optimal greedy
   assignment skips this step. Integer costs keep integer ε (and integer prices).
3. ``exact_phase``: ε = 0, every row assigned from scratch once more. This is the exact shortest
   augmenting path algorithm from the prices of step 2 (with every row free at its start, the
   prices need no property), so the result is optimal whatever steps 1 and 2 did; they only decide
   how short its searches are. A rectangular matrix gets virtual rows of zero costs, which hold the
   unassigned columns and give them the dual the rectangular problem's certificate needs.

``stats.iterations`` counts the searches (one augmenting path each),
``phase_counts["rows_scanned"]`` the row scans, ``phase_counts["scaling_phase"]`` the ε-phases.
"""

from __future__ import annotations

import math

from ..problem import InfeasibleError
from ..result import Stats
from .phases import PhaseTimer, Progress

#: θ: ε is divided by this between ε-phases
SCALING_FACTOR = 6.0
#: the last ε-phase runs at no less than this fraction of ε₀ / n (then the exact phase)
FINAL_EPSILON_FRACTION = 1 / 16


def epsilon_schedule(excess: float, n_rows: int, integer: bool) -> list[float]:
    """The ε of each ε-phase: from the greedy assignment's mean excess per row down by θ each
    phase, while ε stays above ``FINAL_EPSILON_FRACTION * ε₀ / n`` (and, for integer costs, at
    least 1: integer prices keep the exact phase's arithmetic exact)."""
    if not excess > 0 or not math.isfinite(excess):
        return []
    eps = excess / n_rows
    lowest = eps * FINAL_EPSILON_FRACTION / n_rows
    schedule = []
    while eps >= lowest:
        if integer:
            if eps < 1:
                break
            schedule.append(float(math.floor(eps)))
        else:
            schedule.append(eps)
        eps /= SCALING_FACTOR
    return schedule


def scaling_iterations(backend, state, stats: Stats, phase: PhaseTimer) -> None:
    """Steps 1-3 on ``state``: leaves the optimal assignment and its duals."""
    counted = backend.counters(state)  # what a variant counted before a hand-over
    with phase("price_initialisation"):
        excess = backend.price_initialisation(state)
    if excess is None:
        raise InfeasibleError()
    integer = state.cost.dtype.kind in "iu"
    for k, eps in enumerate(epsilon_schedule(excess, state.n_rows, integer)):
        with phase("scaling_phase"):
            # alternate the row order: the rows that came last in one phase come first in the next
            feasible = backend.scaling_phase(state, eps, reverse=k % 2 == 0)
        if not feasible:
            raise InfeasibleError()
    with phase("exact_phase"):
        feasible = backend.exact_phase(state)
    if not feasible:
        raise InfeasibleError()
    searches, rows_scanned = (now - before for now, before in zip(backend.counters(state), counted))
    stats.iterations, stats.phase_counts["rows_scanned"] = searches, rows_scanned


def solve_scaling(backend, state, stats: Stats, progress=None) -> None:
    """Run the ε-scaling engine to optimality on ``state`` (mutated in place). Progress is
    reported when the solve ends (every phase reassigns all rows, so no count of matched rows
    grows during it)."""
    stats.method = "scaling"
    stats.init = "prices"
    scaling_iterations(backend, state, stats, PhaseTimer(stats, backend, state))
    Progress(progress, state.n_rows)(0, final=True)
