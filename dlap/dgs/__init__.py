"""Deep Greedy Switching: the anytime heuristic of Roverso et al. (``dlap.solve(method="dgs")``)."""

from __future__ import annotations

from ..problem import InfeasibleError, Problem
from ..result import Stats
from .switching import deep_greedy_switching

__all__ = ["deep_greedy_switching", "run_dgs"]


def run_dgs(backend, problem: Problem, stats: Stats, deadline: float, **options):
    """Deep Greedy Switching on the backend's device: ``(row_match, u, v)``, the duals the row and
    column reductions (section 4.1 of Date & Nagi), whose sum bounds the optimum from below;
    CuPy arrays where the problem's matrix is on a GPU."""
    from ..backends import switching as switching_for
    from ..timing import PhaseTimer

    stats.method = "dgs"
    state = backend.allocate(problem)
    phase = PhaseTimer(stats, backend, state)
    with phase("initial_reduction"):
        # rows only for a rectangular matrix: the longer side's column duals must stay <= 0
        feasible = backend.initial_reduction(state, columns=problem.n_rows == problem.n_cols)
    if not feasible:
        raise InfeasibleError()
    state.row_match[:] = deep_greedy_switching(
        switching_for(backend.device), state.cost, state.tol_scale, stats, phase, deadline=deadline, **options
    )
    if problem.on_device:
        return backend.to_device(state)
    return backend.to_host(state)
