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
from .classical import classical_iterations
from .phases import PhaseTimer, drive
from .tree import tree_iterations

#: dual updates the classical variant may make before the hybrid switches to the tree variant: at
#: least MIN_CLASSICAL_DUAL_UPDATES, and one per COLUMNS_PER_DUAL_UPDATE columns
MIN_CLASSICAL_DUAL_UPDATES = 8
COLUMNS_PER_DUAL_UPDATE = 625


def classical_dual_update_limit(n_cols: int) -> int:
    """The classical variant's dual updates before the hybrid switches: 8 up to 5000 columns, 16 at
    10000, 64 at 40000. A dual update costs a pass over the matrix, the tree's searches that
    replace them more as the matrix widens. Measured on an H200, uniform f = 10, auto, CuPy in, a
    fixed limit of 8 / 24 / 64 / none (workflows/results/scaling-gpu-20261123-hybrid-switch.log):
    n = 5000 0.051 / 0.051 / 0.063 / 0.065 s, n = 10000 0.106 / 0.102 / 0.124 / 0.123,
    n = 20000 0.254 / 0.235 / 0.244 / 0.229, n = 40000 0.892 / 0.787 / 0.526 / 0.591; uniform
    floats (thousands of dual updates) 1% to 3% slower at 24 or 64 than at 8, and 18x to 26x
    slower with no switch. Since each dual update's compression scans only the rows at slack
    theta (session 10) the rule still holds: n = 5000 / 10000 / 20000 / 40000 fastest at a limit
    of 8 / 8 / 32-64 / 64, and the rule within 1-3% of that cell (9% at n = 40000, where the rule
    is 64 too: the spread between two cells of one limit); floats fastest at 8-32
    (workflows/results/gpu-20261124-s10-hybrid-switch-recompress.log)."""
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
