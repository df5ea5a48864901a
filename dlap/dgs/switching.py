"""Deep Greedy Switching (Naiem & El-Beltagy; parallel form by Roverso et al.): the driver.

DGS starts from a full assignment and moves through 2-exchanges (two agents swap jobs) while one
improves the objective. Written once against :class:`~dlap.dgs.primitives.SwitchingPrimitives`:

- **start** (section 3.1): a full assignment, ``"greedy"`` (each unassigned row proposes to its
  cheapest unheld column and each column keeps its cheapest proposal, until every row holds one)
  or ``"random"`` (a seeded permutation); forbidden (+inf) pairs are then replaced along
  augmenting paths of finite entries, so every assignment DGS holds is finite.
- **difference evaluation** (section 3.2, Algorithm 2): every agent's best 2-exchange (ADE) and
  every job's (JDE).
- **switching** (section 3.3): ``"sequential"`` applies the single best exchange and re-evaluates
  the two agents and two jobs it moved (Algorithm 1); ``"parallel"`` applies every exchange that
  conflicts with no better one in one round, then re-evaluates the agents and jobs that moved or
  whose candidate went stale (Algorithms 3 and 4).
- when no candidate improves, everyone is evaluated again (the paper's outer ``repeat``); DGS
  stops when that full evaluation finds nothing: the assignment is 2-exchange optimal.

The assignment is full and valid at every step, so a deadline returns the best one so far.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..problem import InfeasibleError
from ..result import Stats
from .primitives import SwitchingPrimitives

#: greedy start: proposal rounds at most; rows still unassigned then take the unheld columns in
#: order (on instances where every row wants the same few columns, such as the GEOM benefit
#: matrices, the rounds would otherwise number in the hundreds, each a pass over those rows)
GREEDY_MAX_ROUNDS = 8


#: a deadline counts as passed this long before it: the solve still has to return after the
#: loop's last step, and a process that shares its core waits for it in scheduler slices
#: (``dlap bench --suite deadlines`` measures how far past their deadlines solves end)
DEADLINE_GUARD = 0.002


class Deadline:
    """A ``time.perf_counter()`` deadline, read between the steps of a loop: it counts as passed
    once the next step, if it lasts as long as the last one did, would end after it (less
    ``DEADLINE_GUARD``). So a loop stops before the deadline rather than one step after it."""

    def __init__(self, at: float = math.inf):
        self.at = at - DEADLINE_GUARD
        self.last = time.perf_counter()
        self.step = 0.0

    @property
    def bounded(self) -> bool:
        """Whether there is a deadline at all (without one, the loops need not cut their work
        into calls short enough to read it between)."""
        return self.at < math.inf

    def passed(self) -> bool:
        now = time.perf_counter()
        self.step, self.last = now - self.last, now
        return now + self.step >= self.at


def deep_greedy_switching(prims: SwitchingPrimitives, cost, tol_scale: float, stats: Stats, phase, *,
                          start: str = "greedy", seed=0, switching: str = "parallel",
                          deadline: float = math.inf, initial=None):
    """Run DGS on ``cost`` (min form, n_rows <= n_cols, on the primitives' device) until it
    converges or ``deadline`` (a ``time.perf_counter()`` value) passes; return ``row_match``.

    ``initial``: a start made elsewhere (``row_match``, -1 for rows to be repaired), used instead
    of ``start`` (:mod:`dlap.dgs.loading` makes one on the host while the kernels load).

    Records in ``stats``: ``switches``, ``iterations`` (switching rounds or calls),
    ``time_limit_reached``, and through ``phase`` (a :class:`~dlap.hungarian.phases.PhaseTimer`)
    the times of the phases ``start``, ``full_evaluation`` and ``switching``.
    """
    clock = Deadline(deadline)
    with phase("start"):
        state = prims.allocate(cost, tol_scale)
        initial_assignment(prims, state, start, seed, clock, initial)
    run = _sequential_switching if switching == "sequential" else _parallel_switching
    stats.time_limit_reached = run(prims, state, stats, clock, phase)
    return state.row_match


def initial_assignment(prims: SwitchingPrimitives, state, start: str, seed, deadline: Deadline,
                       initial=None) -> None:
    """A full finite assignment in ``state`` (see the module docstring), and ``held``."""
    xp = prims.xp
    rows = xp.arange(state.n_rows, dtype=prims.index_dtype)
    if initial is not None:
        initial = xp.asarray(initial, dtype=prims.index_dtype)
        placed = initial >= 0
        _assign_finite(state, rows[placed], initial[placed])
    elif start == "random":
        perm = np.random.default_rng(seed).permutation(state.n_cols)[: state.n_rows]
        _assign_finite(state, rows, xp.asarray(perm, dtype=prims.index_dtype))
    else:
        greedy_start(prims, state, deadline)
    if bool((state.row_match < 0).any()) and not prims.repair(state):
        raise InfeasibleError()
    prims.load_held(state)


def greedy_start(prims: SwitchingPrimitives, state, deadline: Deadline) -> None:
    """Rounds of proposals: every unassigned row proposes to its cheapest unheld column; a column
    keeps its cheapest proposer (lowest row on ties). A row with no finite unheld column is left
    for the repair (unheld columns only get fewer). After ``GREEDY_MAX_ROUNDS`` rounds, or once
    ``deadline`` has passed, the rows left take the unheld columns in order (the repair then fixes
    any forbidden pair): the start never holds the solve past its deadline by more than one
    block of proposals."""
    xp = prims.xp
    rows = xp.arange(state.n_rows, dtype=prims.index_dtype)
    for _ in range(GREEDY_MAX_ROUNDS):
        if rows.size == 0:
            return
        cols, costs = _proposals(prims, state, rows, deadline)
        ok = cols >= 0
        rows, cols, costs = rows[ok], cols[ok], costs[ok]
        if rows.size == 0:
            break
        order = xp.lexsort(xp.stack([rows.astype(np.float64), costs, cols.astype(np.float64)]))
        by_col = cols[order]
        first = xp.ones(by_col.size, dtype=bool)
        first[1:] = by_col[1:] != by_col[:-1]
        winners = order[first]
        state.row_match[rows[winners]] = cols[winners]
        state.col_match[cols[winners]] = rows[winners]
        rows = rows[state.row_match[rows] < 0]
        if deadline.passed():
            break
    left = xp.flatnonzero(state.row_match < 0).astype(prims.index_dtype)
    _assign_finite(state, left, xp.flatnonzero(state.col_match < 0)[: left.size].astype(prims.index_dtype))


def _proposals(prims: SwitchingPrimitives, state, rows, deadline: Deadline):
    """One proposal round (``prims.propose``) in blocks of ``prims.evaluation_chunk`` entries; the
    rows of blocks the deadline cuts off propose nothing (-1)."""
    xp = prims.xp
    per_call = _per_call(prims, state.n_cols, rows.size, deadline)
    cols = xp.full(rows.size, -1, dtype=prims.index_dtype)
    costs = xp.full(rows.size, math.inf)
    for lo in range(0, rows.size, per_call):
        if deadline.passed():
            break
        cols[lo:lo + per_call], costs[lo:lo + per_call] = prims.propose(state, rows[lo:lo + per_call])
    return cols, costs


def _per_call(prims: SwitchingPrimitives, entries: int, size: int, deadline: Deadline) -> int:
    """How many of ``size`` items (rows, entities, sequential steps), each reading about
    ``entries`` matrix entries, one call takes: about ``prims.evaluation_chunk`` entries under a
    deadline, all of them without one."""
    if not deadline.bounded:
        return max(size, 1)
    return max(1, prims.evaluation_chunk // max(entries, 1))


def _assign_finite(state, rows, cols) -> None:
    """Assign ``rows[k]`` to ``cols[k]`` wherever that pair is not forbidden (the repair assigns
    the others)."""
    finite = state.cost[rows, cols] < math.inf
    state.row_match[rows[finite]] = cols[finite]
    state.col_match[cols[finite]] = rows[finite]


def _evaluate_all(prims, state, stamp: int, deadline: Deadline) -> bool:
    """Difference evaluation of every agent and job; False if the deadline cut it."""
    return _evaluate(prims, state, prims.xp.arange(state.n_candidates, dtype=prims.index_dtype), stamp, deadline)


def _evaluate(prims, state, entities, stamp: int, deadline: Deadline) -> bool:
    """Difference evaluation of ``entities`` in calls of about ``prims.evaluation_chunk`` entries;
    False if the deadline cut it (the rest keep stale candidates, which a round drops)."""
    per_call = _per_call(prims, state.n_cols, entities.size, deadline)
    for lo in range(0, entities.size, per_call):
        if deadline.passed():
            return False
        prims.evaluate(state, entities[lo:lo + per_call], stamp)
    return True


def _parallel_switching(prims, state, stats: Stats, deadline: Deadline, phase) -> bool:
    """Algorithm 3; returns whether the deadline stopped it."""
    stamp, full, entities = 0, True, None
    while True:
        stamp += 1
        if full:
            with phase("full_evaluation"):
                if not _evaluate_all(prims, state, stamp, deadline):
                    return True
        with phase("switching"):
            if not full and not _evaluate(prims, state, entities, stamp, deadline):
                return True
            stamp += 1
            applied, entities = prims.parallel_round(state, stamp)
        stats.iterations += 1
        stats.switches += int(applied)
        if applied == 0:
            if full:
                return False  # a full evaluation found no improving 2-exchange
            full = True
        else:
            full = False
        if deadline.passed():
            return True


def _sequential_switching(prims, state, stats: Stats, deadline: Deadline, phase) -> bool:
    """Algorithm 1; returns whether the deadline stopped it."""
    if not prims.sequential:
        raise ValueError("switching='sequential' runs on the CPU (device='cpu')")
    # a step reads about 5 n_rows + n_cols entries; without a deadline one call ends the pass
    steps = _per_call(prims, 5 * state.n_rows + state.n_cols, np.iinfo(np.int64).max, deadline)
    clock = 1
    with phase("full_evaluation"):
        if not _evaluate_all(prims, state, clock, deadline):
            return True
    since_full = 0
    while not deadline.passed():
        with phase("switching"):
            none_left, clock, switches = prims.sequential_steps(state, clock, steps)
        stats.iterations += 1
        stats.switches += int(switches)
        since_full += int(switches)
        if none_left:
            if since_full == 0:
                return False
            clock += 1
            with phase("full_evaluation"):
                if not _evaluate_all(prims, state, clock, deadline):
                    return True
            since_full = 0
    return True
