"""The alternating tree (Lawler) variant of Date & Nagi (2016), sections 2.3 and 4.

Each iteration: optimality check (4.2); forward pass growing alternating trees from the free rows
with column slacks and predecessors (4.3.1, Algorithm 4), raising the dual level by the minimum
slack whenever the frontier empties (4.4, Algorithm 9); reverse pass and augmentation over the
vertex-disjoint paths found (4.3.2-4.3.3); and the dual update of the forest.

``roots="all"`` is the paper's parallel search: trees from every free row at once, several
vertex-disjoint augmenting paths per iteration. ``roots="one"`` grows a single tree per iteration
(Lawler's sequential algorithm, which with Jonker-Volgenant initialisation is what LAPJV does):
each search scans only the rows its own tree reaches, which wins on a CPU once few rows are free.
``roots="auto"`` searches from all free rows while many are free, and one at a time after that.
"""

from __future__ import annotations

from ..problem import InfeasibleError
from ..result import Stats
from ..timing import PhaseTimer
from .phases import augment_paths, check, drive

#: roots="auto": search from all free rows while more than this fraction of rows is free
AUTO_FOREST_FRACTION = 0.25


def tree_search(backend, state, stats: Stats, phase: PhaseTimer, n_free: int, roots: str) -> None:
    """One iteration after the optimality check: forward pass, reverse pass, augmentation and the
    dual update of the forest."""
    forest = roots == "all" or (roots == "auto" and n_free > AUTO_FOREST_FRACTION * state.n_rows)
    with phase("forward_pass"):
        n_reverse = backend.tree_forward_pass(state, n_roots=n_free if forest else 1, collect_ties=forest)
    if n_reverse < 0:
        raise InfeasibleError()
    augment_paths(backend, state, stats, phase)
    with phase("dual_update"):
        backend.tree_dual_update(state)
    stats.iterations += 1


def tree_iterations(backend, state, stats: Stats, phase: PhaseTimer, report, roots: str) -> None:
    """Iterate the tree variant until no row is free (or the progress hook's policy stops it:
    ``report.stopped``)."""
    while (n_free := check(backend, state, phase, report)) and not report.stopped:
        tree_search(backend, state, stats, phase, n_free, roots)


def run_tree(backend, state, stats: Stats, phase: PhaseTimer, report, roots: str) -> None:
    """The tree variant's iterations to optimality, after initialisation."""
    tree_iterations(backend, state, stats, phase, report, roots)
    stats.dual_updates, stats.phase_counts["rows_scanned"] = backend.counters(state)


def solve_tree(
    backend, state, stats: Stats, init: str = "reduction", roots: str = "all", progress=None
) -> None:
    """Run the alternating tree variant to optimality on ``state`` (mutated in place)."""
    drive(backend, state, stats, "tree", init, progress, lambda *args: run_tree(*args, roots))
