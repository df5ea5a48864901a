"""The hybrid of the two variants (HyLAC's idea, Kawtikwar & Nagi 2024): classical, then tree.

The classical variant is cheap while the zero-slack graph still holds augmenting paths: one
compression pass over the matrix, then every iteration is a BFS over the (sparse) compressed
edges. Its cost is the dual update: each one needs a pass over the forest's rows (theta), then
a compression of the rows it changed. The tree variant pays a pass over the frontier rows instead
and folds every dual update of a search into one comparison per column.

So the hybrid runs the classical variant while its dual updates stay few, and switches to the
tree variant when progress stalls: at the iteration that would need one dual update more than
:func:`classical_dual_update_limit` allows. On low cost ranges (many ties, a dense zero-slack
graph) the classical variant finishes first (uniform f <= 1 at n = 20000 needs 0 to 7 dual
updates); on wide ranges it hands over (f = 10 needs 58 to 71, each a compression pass).
``stats.phase_counts["switch_iteration"]`` records where it switched.
"""

from __future__ import annotations

from ..result import Stats
from ..timing import PhaseTimer
from .classical import classical_iterations
from .phases import drive
from .tree import tree_iterations

#: dual updates the classical variant may make before the hybrid switches to the tree variant: at
#: least MIN_CLASSICAL_DUAL_UPDATES, and one per COLUMNS_PER_DUAL_UPDATE columns
MIN_CLASSICAL_DUAL_UPDATES = 8
COLUMNS_PER_DUAL_UPDATE = 625


def classical_dual_update_limit(n_cols: int) -> int:
    """The classical variant's dual updates before the hybrid switches: 8 up to 5000 columns, 16 at
    10000, 64 at 40000. A dual update costs a pass over the matrix, the tree's searches that
    replace them more as the matrix widens (swept on uniform integers and floats, n = 5000 to
    40000: the rule is within a few percent of the best fixed limit at each size; floats with no
    switch are 18x to 26x slower)."""
    return max(MIN_CLASSICAL_DUAL_UPDATES, n_cols // COLUMNS_PER_DUAL_UPDATE)


def run_hybrid(backend, state, stats: Stats, phase: PhaseTimer, report) -> None:
    """The classical variant until it stalls, then the tree variant, after initialisation."""
    left = classical_iterations(backend, state, stats, phase, report, classical_dual_update_limit(state.n_cols))
    if left and not report.stopped:
        stats.phase_counts["switch_iteration"] = stats.iterations
        tree_iterations(backend, state, stats, phase, report, roots="all")
    classical_updates = stats.dual_updates
    tree_updates, stats.phase_counts["search_steps"] = backend.counters(state)
    stats.dual_updates = classical_updates + tree_updates


def solve_hybrid(backend, state, stats: Stats, init: str = "jv", progress=None) -> None:
    """Run the classical variant until it stalls, then the tree variant to optimality."""
    drive(backend, state, stats, "hybrid", init, progress, run_hybrid)
