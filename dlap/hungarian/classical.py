"""The classical (Munkres) variant of Date & Nagi (2016), sections 2.2 and 4.

Each iteration: optimality check (4.2); if rows are free, compress the zero-slack edges to CSR
(3.3; reused while no dual update happened, as the paper does), BFS forward pass from all free
rows (4.3.1, Algorithm 3); then either reverse and augmentation passes over the vertex-disjoint
paths found (4.3.2-4.3.3) or, when no free column was reached, the two-stage dual update (4.4).
"""

from __future__ import annotations

from ..problem import InfeasibleError
from ..result import Stats
from .phases import Progress, augment_paths, check, initialise, phase


def solve_classical(backend, state, stats: Stats, init: str = "reduction", progress=None) -> None:
    """Run the classical variant to optimality on ``state`` (mutated in place)."""
    stats.method = "classical"
    initialise(backend, state, init, stats)
    report = Progress(progress, state.n_rows)
    need_compress = True
    while check(backend, state, stats, report):
        if need_compress:
            with phase(stats, "compress"):
                backend.compress(state)
            need_compress = False
        with phase(stats, "forward_pass"):
            n_reverse = backend.classical_forward_pass(state)
        if n_reverse:
            augment_paths(backend, state, stats)
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
