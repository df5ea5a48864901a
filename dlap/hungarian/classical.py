"""The classical (Munkres) variant of Date & Nagi (2016), sections 2.2 and 4.

Each iteration: optimality check (4.2); if rows are free, compress the zero-slack edges to CSR
(3.3; reused while no dual update happened, as the paper does), BFS forward pass from all free
rows (4.3.1, Algorithm 3); then either reverse and augmentation passes over the vertex-disjoint
paths found (4.3.2-4.3.3) or, when no free column was reached, the two-stage dual update (4.4).
"""

from __future__ import annotations

from ..problem import InfeasibleError
from ..result import Stats
from .phases import Progress, initialise, phase


def solve_classical(backend, state, stats: Stats, init: str = "reduction", progress=None) -> None:
    """Run the classical variant to optimality on ``state`` (mutated in place)."""
    stats.method = "classical"
    initialise(backend, state, init, stats)
    report = Progress(progress, state.n_rows)
    need_compress = True
    while True:
        with phase(stats, "optimality_check"):
            n_free = backend.optimality_check(state)
        report(n_free)
        if n_free == 0:
            break
        if need_compress:
            with phase(stats, "compress"):
                backend.compress(state)
            need_compress = False
        with phase(stats, "forward_pass"):
            n_reverse = backend.classical_forward_pass(state)
        if n_reverse:
            with phase(stats, "reverse_pass"):
                n_paths = backend.reverse_pass(state)
            with phase(stats, "augment"):
                backend.augment(state)
            stats.paths_per_iteration.append(n_paths)
        else:
            with phase(stats, "dual_update"):
                theta = backend.classical_dual_update(state)
            if theta == float("inf"):
                raise InfeasibleError()
            stats.dual_updates += 1
            need_compress = True
        stats.iterations += 1
    report(0, final=True)
    stats.phase_counts["bfs_levels"] = backend.counters(state)[1]
