"""What the variants share: the initialisation step, the optimality check, the augmentation and progress."""

from __future__ import annotations

from ..problem import InfeasibleError
from ..progress import Progress
from ..result import Stats
from ..timing import PhaseTimer


def initialise(backend, state, init: str, stats: Stats, phase: PhaseTimer) -> None:
    """Dual-feasible start and first assignment.

    ``init="reduction"`` is the paper's initial reduction (section 4.1: row then column
    reduction; rows only for a rectangular matrix, whose unassigned column duals must stay 0)
    followed by a greedy matching of zero-slack edges. ``init="jv"`` is Jonker & Volgenant's
    column reduction, reduction transfer and augmenting row reduction, which leaves far fewer free
    rows; both leave feasible duals, so the Hungarian phases continue from either.
    """
    stats.init = init
    with phase("initial_reduction"):
        if init == "jv":
            feasible = backend.jv_initialisation(state)
        else:
            square = state.n_rows == state.n_cols
            feasible = backend.initial_reduction(state, columns=square)
            if feasible:
                backend.initial_assignment(state)
    if not feasible:
        raise InfeasibleError()
    stats.initial_assignments = state.n_rows - backend.optimality_check(state)


def start_afresh(state) -> None:
    """Drop the matching and the column prices another engine left in ``state`` (``v = 0`` is JV
    initialisation's start, and a rectangular matrix keeps it; found by hypothesis): before the
    tree variant solves the matrix again, where that engine's duals do not prove its answer."""
    state.row_match.fill(-1)
    state.col_match.fill(-1)
    state.v.fill(0.0)


def drive(backend, state, stats: Stats, method: str, init: str, progress, run) -> None:
    """A variant's solve: initialisation, then ``run(backend, state, stats, phase, report)`` to
    optimality, reporting progress to ``progress``."""
    stats.method = method
    phase = PhaseTimer(stats, backend, state)
    initialise(backend, state, init, stats, phase)
    report = Progress.of(progress, state.n_rows)
    run(backend, state, stats, phase, report)
    report(0, final=True)


def check(backend, state, phase: PhaseTimer, report) -> int:
    """Optimality check (section 4.2): the number of free rows, reported to the progress hook."""
    with phase("optimality_check"):
        n_free = backend.optimality_check(state)
    report.check(n_free)
    return n_free


def augment_paths(backend, state, stats: Stats, phase: PhaseTimer) -> None:
    """Reverse pass (4.3.2) and augmentation pass (4.3.3) over the paths the forward pass found."""
    with phase("reverse_pass"):
        n_paths = backend.reverse_pass(state)
    if n_paths == 0:  # a forward pass that reached a free column always yields a path
        raise RuntimeError("dlap internal error: the reverse pass kept no augmenting path")
    with phase("augment"):
        backend.augment(state)
    stats.paths_per_iteration.append(n_paths)
