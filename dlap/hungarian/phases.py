"""What the variants share: the initialisation step, the optimality check, the augmentation and progress."""

from __future__ import annotations

import time

from ..problem import InfeasibleError
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


def drive(backend, state, stats: Stats, method: str, init: str, progress, run) -> None:
    """A variant's solve: initialisation, then ``run(backend, state, stats, phase, report)`` to
    optimality, reporting progress to ``progress``."""
    stats.method = method
    phase = PhaseTimer(stats, backend, state)
    initialise(backend, state, init, stats, phase)
    report = Progress(progress, state.n_rows)
    run(backend, state, stats, phase, report)
    report(0, final=True)


def check(backend, state, phase: PhaseTimer, report) -> int:
    """Optimality check (section 4.2): the number of free rows, reported to the progress hook."""
    with phase("optimality_check"):
        n_free = backend.optimality_check(state)
    report(n_free)
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


class Progress:
    """Calls ``callback(matched, total)`` after augmentations, at most every ``interval`` s, and
    asks ``policy(n_free)`` after every optimality check whether the variant should stop
    (``method="auto"``'s hand-over to ε-scaling): the variants' loops end once ``stopped``."""

    def __init__(self, callback, total: int, interval: float = 0.1, policy=None):
        self.callback, self.total, self.interval, self.policy = callback, total, interval, policy
        self.stopped = False
        self._last = time.perf_counter()

    def __call__(self, n_free: int, final: bool = False) -> None:
        if self.policy is not None and not final:
            self.stopped = self.policy(n_free)
        if self.callback is None:
            return
        now = time.perf_counter()
        if final or now - self._last >= self.interval:
            self._last = now
            self.callback(self.total - n_free, self.total)
