"""The result of a solve: the assignment, its duals, what the solver did, and its certificate.

``Assignment.verify()`` checks the LP optimality conditions of Date & Nagi (2016), section 2
(dual feasibility u_i + v_j <= c_ij and complementary slackness on the assigned pairs), and computes
a rigorous lower bound from the column duals alone (u'_i = min_j (c_ij - v_j) is dual feasible by
construction), so the reported gap is a true bound on how far the assignment can be from optimal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .problem import array_module

_BLOCK_ELEMENTS = 1 << 22  # matrix entries per block when verifying (bounded temporaries)


@dataclass
class Stats:
    """What a solve did: the paper's Table 2 and Fig. 3.

    ``phase_seconds`` and ``phase_counts`` are keyed by phase name (``initial_reduction``,
    ``optimality_check``, ``compress``, ``forward_pass``, ``reverse_pass``, ``augment``,
    ``dual_update``; for DGS ``start``, ``full_evaluation``, ``switching``).
    ``paths_per_iteration[k]`` is the number of vertex-disjoint augmenting paths used in the k-th
    augmentation. ``iterations`` counts augmentations (DGS: switching rounds).
    """

    method: str = ""
    device: str = "cpu"
    init: str = ""
    seconds: float = 0.0
    iterations: int = 0
    initial_assignments: int = 0
    dual_updates: int = 0
    phase_seconds: dict = field(default_factory=dict)
    phase_counts: dict = field(default_factory=dict)
    paths_per_iteration: list = field(default_factory=list)
    switches: int = 0  # DGS: 2-exchanges applied
    time_limit_reached: bool = False  # DGS: stopped by its time limit, not by convergence
    threads: int = 0  # CPU threads the kernels ran on (dlap.threads); 0 on a GPU

    def add(self, phase: str, seconds: float, count: int = 1) -> None:
        self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + seconds
        self.phase_counts[phase] = self.phase_counts.get(phase, 0) + count

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "device": self.device,
            "init": self.init,
            "seconds": self.seconds,
            "iterations": self.iterations,
            "initial_assignments": self.initial_assignments,
            "dual_updates": self.dual_updates,
            "phase_seconds": dict(self.phase_seconds),
            "phase_counts": dict(self.phase_counts),
            "paths_per_iteration": [int(p) for p in self.paths_per_iteration],
            "switches": self.switches,
            "time_limit_reached": self.time_limit_reached,
            "threads": self.threads,
        }


@dataclass(frozen=True)
class Certificate:
    """The optimality certificate of an assignment.

    ``primal`` is the assignment's objective and ``lower_bound`` a value no assignment can beat
    (for ``maximize``: an upper bound no assignment can exceed); ``gap = |primal - lower_bound|``.
    ``max_dual_violation`` and ``max_slackness_violation`` measure how far the solver's own duals
    are from exact feasibility and complementary slackness (0 for integer costs).
    """

    primal: float
    lower_bound: float
    gap: float
    relative_gap: float
    max_dual_violation: float
    max_slackness_violation: float
    optimal: bool

    def __str__(self) -> str:
        verdict = "optimal" if self.optimal else "NOT proven optimal"
        return (
            f"{verdict}: objective {self.primal:.12g}, dual bound {self.lower_bound:.12g}, "
            f"gap {self.gap:.3g} (relative {self.relative_gap:.3g})"
        )


@dataclass
class Assignment:
    """An assignment of rows to columns, with the duals that prove it optimal.

    Attributes
    ----------
    row_ind, col_ind : int64 arrays, ``row_ind`` sorted (scipy's convention).
    objective : the total cost ``cost[row_ind, col_ind].sum()`` (an int for integer costs).
    row_duals, col_duals : float64 duals of the caller's problem: ``u_i + v_j <= c_ij`` when
        minimising (``>=`` when maximising), equality on assigned pairs, and on the longer side of a
        rectangular matrix ``v_j <= 0`` (``>= 0`` when maximising), 0 where unassigned.
    stats : :class:`Stats`.
    heuristic : True when the assignment comes from a heuristic (DGS): no optimality claim; the
        duals are then those of the row and column reductions (feasible, but complementary
        slackness does not hold) and :meth:`verify` measures the gap they prove.
    lower_bound : heuristics only: the value of those reduction duals, a bound no assignment can
        beat (an upper bound when maximising); ``abs(objective - lower_bound)`` is the most the
        assignment can be from the optimum.
    """

    row_ind: np.ndarray
    col_ind: np.ndarray
    objective: float
    row_duals: np.ndarray
    col_duals: np.ndarray
    stats: Stats
    maximize: bool = False
    heuristic: bool = False
    lower_bound: float | None = None
    cost: np.ndarray | None = field(default=None, repr=False)

    def __iter__(self):
        """Unpack as scipy does: ``rows, cols = dlap.solve(c)``."""
        return iter((self.row_ind, self.col_ind))

    def verify(self, cost=None, rtol: float = 1e-9) -> Certificate:
        """Check dual feasibility and complementary slackness; return a :class:`Certificate`.

        ``cost`` defaults to the matrix that was solved. Integer costs must close the gap exactly;
        float costs within ``rtol`` of the magnitudes summed (objective, assigned costs, duals).
        """
        c = self.cost if cost is None else cost
        xp = array_module(c)  # a CuPy matrix is checked on its GPU
        c = xp.asarray(c)
        if c.ndim != 2 or c.size == 0:
            return Certificate(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, True)
        sign = -1.0 if self.maximize else 1.0
        u = sign * xp.asarray(self.row_duals, dtype=np.float64)
        v = sign * xp.asarray(self.col_duals, dtype=np.float64)
        primal = sign * float(self.objective)
        # Work in the orientation where rows <= cols: there every row is assigned and the column
        # duals of a rectangular problem must be <= 0 (LP dual of sum_i x_ij <= 1).
        rows, cols = xp.asarray(self.row_ind), xp.asarray(self.col_ind)
        if c.shape[0] > c.shape[1]:
            c, u, v, rows, cols = c.T, v, u, cols, rows
        assigned = xp.zeros(c.shape[1], dtype=bool)
        assigned[xp.asarray(cols)] = True
        rectangular = c.shape[0] < c.shape[1]
        v_bounded = xp.minimum(v, 0.0) if rectangular else v
        slack_cs = 0.0
        if rectangular:
            slack_cs = _max0(xp.abs(v[~assigned]))
        matched = sign * c[rows, cols].astype(np.float64)
        slack_cs = max(slack_cs, _max0(xp.abs(matched - u[rows] - v[cols])))

        # dual feasibility of the solver's duals, and the repaired duals u'_i = min_j (c_ij - v_j)
        violation = 0.0
        u_repaired = xp.empty_like(u)
        step = max(1, _BLOCK_ELEMENTS // c.shape[1])
        for start in range(0, c.shape[0], step):
            block = sign * c[start : start + step].astype(np.float64)
            reduced = block - v_bounded[None, :]
            u_repaired[start : start + step] = reduced.min(axis=1)
            reduced -= u[start : start + step, None]
            violation = max(violation, float(-reduced.min()))
        violation = max(violation, 0.0, _max0(v) if rectangular else 0.0)
        bound = float(u_repaired.sum() + v_bounded.sum())
        gap = abs(primal - bound)
        # rounding in the bound grows with the magnitudes summed, not with the (possibly
        # cancelling) objective: scale the gap by the largest of them
        scale = max(
            abs(primal), float(xp.abs(matched).sum()),
            float(xp.abs(u_repaired).sum() + xp.abs(v_bounded).sum()), 1e-300,
        )
        if np.issubdtype(c.dtype, np.integer) or c.dtype == bool:
            optimal = gap < 1.0  # integer objectives differ by at least 1: a gap below 1 closes it
        else:
            optimal = gap <= rtol * scale
        return Certificate(
            primal=sign * primal,
            lower_bound=sign * bound,
            gap=gap,
            relative_gap=gap / scale,
            max_dual_violation=violation,
            max_slackness_violation=slack_cs,
            optimal=bool(optimal and np.isfinite(bound)),
        )


def row_minima(c, v):
    """``min_j (c_ij - v_j)`` for every row of ``c`` (NumPy or CuPy, in float64), a block of rows
    at a time so that no n x m temporary is made: the row duals that make the column duals ``v``
    feasible, whose sum with ``v``'s bounds the optimum from below."""
    xp = array_module(c)
    out = xp.empty(c.shape[0])
    step = max(1, _BLOCK_ELEMENTS // max(c.shape[1], 1))
    for start in range(0, c.shape[0], step):
        out[start : start + step] = (c[start : start + step].astype(np.float64) - v[None, :]).min(axis=1)
    return out


def _max0(x) -> float:
    """max(0, largest entry of x) for NumPy and CuPy arrays (CuPy's max has no ``initial``)."""
    return max(0.0, float(x.max())) if x.size else 0.0
