"""The hybrid of the two variants (HyLAC's idea, Kawtikwar & Nagi 2024): classical, then tree.

The classical variant is cheap while the zero-slack graph still holds augmenting paths: one
compression pass over the matrix, then every iteration is a BFS over the (sparse) compressed
edges. Its cost is the dual update: each one needs a pass over the forest's rows and a fresh
compression of the whole matrix. The tree variant pays a pass over the frontier rows instead and
folds every dual update of a search into one comparison per column.

So the hybrid runs the classical variant while its dual updates stay few, and switches to the
tree variant when progress stalls: at the iteration that would need dual update number
``MAX_CLASSICAL_DUAL_UPDATES + 1``. On low cost ranges (many ties, a dense zero-slack graph) the
classical variant finishes first (uniform f <= 1 at n = 20000 needs 0 to 7 dual updates); on wide
ranges it hands over early (f = 10 needs 71, each a compression pass). Measured on one H200
(workflows/results/gpu-*-phases.log): n = 20000, f = 1: classical 0.055 s, tree 0.116 s;
f = 10: classical 0.282 s, tree 0.266 s. ``stats.phase_counts["switch_iteration"]`` records where
it switched.
"""

from __future__ import annotations

from ..result import Stats
from .classical import classical_iterations
from .phases import PhaseTimer, drive
from .tree import tree_iterations

#: dual updates the classical variant may make before the hybrid switches to the tree variant
MAX_CLASSICAL_DUAL_UPDATES = 8


def run_hybrid(backend, state, stats: Stats, phase: PhaseTimer, report) -> None:
    """The classical variant until it stalls, then the tree variant, after initialisation."""
    if classical_iterations(backend, state, stats, phase, report, MAX_CLASSICAL_DUAL_UPDATES):
        stats.phase_counts["switch_iteration"] = stats.iterations
        tree_iterations(backend, state, stats, phase, report, roots="all")
    classical_updates = stats.dual_updates
    tree_updates, stats.phase_counts["search_steps"] = backend.counters(state)
    stats.dual_updates = classical_updates + tree_updates


def solve_hybrid(backend, state, stats: Stats, init: str = "jv", progress=None) -> None:
    """Run the classical variant until it stalls, then the tree variant to optimality."""
    drive(backend, state, stats, "hybrid", init, progress, run_hybrid)
