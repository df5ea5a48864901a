"""The classical (Munkres) variant of Date & Nagi (2016), sections 2.2 and 4.

Each iteration: optimality check (4.2); if rows are free, BFS forward pass from all free rows
over the zero-slack edges compressed to CSR (4.3.1, Algorithm 3; 3.3); then either reverse and
augmentation passes over the vertex-disjoint paths found (4.3.2-4.3.3) or, when no free column
was reached, the two-stage dual update (4.4). The CSR is made once from the matrix; an
augmentation leaves it as it is (as the paper reuses it), and a dual update changes it where the
update changed slacks only (``Backend.recompress``): the rows it scans again are the few at
slack theta, not the matrix. The forward pass after a dual update resumes the forest the
fruitless one left (as Munkres' step 6 returns to step 4 with its covers), so it searches only
what the update made reachable; after an augmentation the search starts again from the free
rows.
"""

from __future__ import annotations

import math

from ..problem import InfeasibleError
from ..result import Stats
from ..timing import PhaseTimer
from .phases import augment_paths, check, drive


def classical_search(backend, state, stats: Stats, phase: PhaseTimer, resume: bool = False) -> bool:
    """The BFS forward pass over the CSR, then the reverse and augmentation passes over the paths
    found. Returns whether any path was found; when none was, the caller decides between the
    dual update and another variant. ``resume``: a dual update followed the previous pass, whose
    forest the pass goes on from (``Backend.classical_forward_pass``)."""
    with phase("forward_pass"):
        n_reverse = backend.classical_forward_pass(state, resume)
    if n_reverse:
        augment_paths(backend, state, stats, phase)
    stats.iterations += 1
    return bool(n_reverse)


def classical_dual_update(backend, state, stats: Stats, phase: PhaseTimer) -> None:
    """The two-stage dual update after a forward pass that reached no free column, then the
    compression of the zero-slack edges it changed."""
    with phase("dual_update"):
        theta = backend.classical_theta(state)
        backend.classical_shift(state, theta)
    if theta == float("inf"):
        raise InfeasibleError()
    stats.dual_updates += 1
    with phase("compress"):
        backend.recompress(state, theta)


def classical_iterations(
    backend, state, stats: Stats, phase: PhaseTimer, report, max_dual_updates: float = math.inf
) -> int:
    """Iterate the classical variant until no row is free, or until a forward pass finds no path
    after ``max_dual_updates`` dual updates (the hybrid's switch), or the progress hook's policy
    stops it (``report.stopped``). Returns the rows left free."""
    compressed = False
    fruitless = 0  # dual updates since the last augmenting path: the forest is resumed after one
    while (n_free := check(backend, state, phase, report)) and not report.stopped:
        if not compressed:
            with phase("compress"):
                backend.compress(state)
            compressed = True
        if classical_search(backend, state, stats, phase, resume=fruitless > 0):
            fruitless = 0
        elif stats.dual_updates < max_dual_updates:
            if fruitless > state.n_cols:
                # each dual update makes a new column tight for a forest row, so the next forward
                # pass covers one more column or reaches a free one: n_cols updates at most
                raise RuntimeError(
                    f"dlap internal error: {fruitless} dual updates in a row found no augmenting "
                    "path (the zero-slack graph lost edges); the solve cannot progress")
            classical_dual_update(backend, state, stats, phase)
            fruitless += 1
        else:
            return n_free
    return 0


def run_classical(backend, state, stats: Stats, phase: PhaseTimer, report) -> None:
    """The classical variant's iterations to optimality, after initialisation."""
    classical_iterations(backend, state, stats, phase, report)
    stats.phase_counts["bfs_levels"] = backend.counters(state)[1]


def solve_classical(backend, state, stats: Stats, init: str = "reduction", progress=None) -> None:
    """Run the classical variant to optimality on ``state`` (mutated in place)."""
    drive(backend, state, stats, "classical", init, progress, run_classical)
