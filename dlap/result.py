"""The result of a solve: the assignment, its duals, what the solver did, and its certificate.

``Assignment.verify()`` recomputes the certificate from the matrix, the indices and the duals
(:mod:`dlap.certificate`).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from .certificate import BLOCK_ELEMENTS, RTOL, Certificate, certify, exact_sum, widened
from .device import array_module, is_device_array
from .problem import Problem, unscaled, unscaled_duals

MSG_MATRIX_GONE = (
    "verify(): the solved matrix is gone (a result references it weakly, so as not to keep a large "
    "matrix alive); pass it: result.verify(cost)"
)


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
    last_phase: str = field(default="", compare=False)  # the phase timed last (a live solve's progress)

    def add(self, phase: str, seconds: float, count: int = 1) -> None:
        self.last_phase = phase
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


class MatrixReference:
    """A weak reference to a solved matrix, for :meth:`Assignment.verify`: a copy of the result
    shares it, a pickle holds it as gone (a pickle cannot hold a weak reference), and a matrix
    type that cannot be referenced weakly is simply not referenced."""

    __slots__ = ("_ref",)

    def __init__(self, matrix=None):
        try:
            self._ref = None if matrix is None else weakref.ref(matrix)
        except TypeError:
            self._ref = None

    def __call__(self):
        return None if self._ref is None else self._ref()

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return MatrixReference, ()


@dataclass
class Assignment:
    """An assignment of rows to columns, with the duals that prove it optimal.

    Attributes
    ----------
    row_ind, col_ind : int64 arrays, ``row_ind`` sorted (scipy's convention).
    objective : the total cost ``cost[row_ind, col_ind].sum()``, exactly: a Python int for integer
        costs, the correctly rounded sum for float costs.
    row_duals, col_duals : duals of the caller's problem (int64 for integer costs, exact; float64
        otherwise): ``u_i + v_j <= c_ij`` when
        minimising (``>=`` when maximising), equality on assigned pairs, and on the longer side of a
        rectangular matrix ``v_j <= 0`` (``>= 0`` when maximising), 0 where unassigned.
    stats : :class:`Stats`.
    heuristic : True when the assignment comes from a heuristic (DGS): no optimality claim; the
        duals are then those of the row and column reductions (feasible, but complementary
        slackness does not hold) and :meth:`verify` measures the gap they prove.
    lower_bound : heuristics only: the value of those reduction duals, a bound no assignment can
        beat (an upper bound when maximising); ``abs(objective - lower_bound)`` is the most the
        assignment can be from the optimum.
    matrix_ref : a weak reference to the solved matrix (:class:`MatrixReference`), for
        :meth:`verify`.
    """

    row_ind: np.ndarray
    col_ind: np.ndarray
    objective: int | float
    row_duals: np.ndarray
    col_duals: np.ndarray
    stats: Stats
    maximize: bool = False
    heuristic: bool = False
    lower_bound: float | None = None
    matrix_ref: MatrixReference = field(default_factory=MatrixReference, repr=False, compare=False)

    def __iter__(self):
        """Unpack as scipy does: ``rows, cols = dlap.solve(c)``."""
        return iter((self.row_ind, self.col_ind))

    def verify(self, cost=None, rtol: float = RTOL) -> Certificate:
        """Prove the assignment optimal from the matrix, the indices and the duals alone, trusting
        nothing else the solver stored (:func:`dlap.certificate.certify`): a permutation of the
        right size, the objective summed again, every entry's dual feasibility, complementary
        slackness, and a lower bound of its own. Integer costs are certified exactly; float costs
        within ``rtol``.

        ``cost`` defaults to the matrix that was solved, which the result references weakly (it
        does not keep a large matrix alive): once the caller has dropped it, pass it here.
        """
        c = cost if cost is not None else self.matrix_ref()
        if c is None:
            raise ValueError(MSG_MATRIX_GONE)
        return certify(c, self.row_ind, self.col_ind, self.objective, self.row_duals, self.col_duals,
                       maximize=self.maximize, heuristic=self.heuristic, rtol=rtol)



def caller_assignment(problem: Problem, row_match, u, v, stats: Stats, reference: MatrixReference) -> Assignment:
    """Map the internal solution (min form, rows <= cols) back to the caller's matrix.

    The arrays are of the caller's kind: CuPy for a CuPy matrix (whatever device solved it).
    """
    original = problem.original
    xp = array_module(original)
    rows = xp.arange(problem.n_rows, dtype=np.int64)
    cols = xp.asarray(row_match, dtype=np.int64)
    u, v = unscaled_duals(xp.asarray(u), xp.asarray(v), problem.scale_exponent)
    row_duals, col_duals = caller_duals(u, v, integer=problem.is_integer,
                                        offset=problem.offset, maximize=problem.maximize)
    if problem.transposed:
        order = xp.argsort(cols)  # a permutation's values are distinct: any sort is stable
        rows, cols = cols[order], rows[order]
        row_duals, col_duals = col_duals, row_duals
    return Assignment(
        row_ind=rows,
        col_ind=cols,
        objective=exact_sum(original[rows, cols]),
        row_duals=row_duals,
        col_duals=col_duals,
        stats=stats,
        maximize=problem.maximize,
        matrix_ref=reference,
    )


def dgs_answer(problem: Problem, row_match, u, v, stats: Stats, reference: MatrixReference) -> Assignment:
    """DGS's solution as the caller's :class:`Assignment` (:func:`caller_assignment`): a heuristic
    one, with the reductions' bound (:func:`_reduction_bound`). Also what
    :func:`dlap.dgs.loading.load_dgs_kernels` runs on the GPU, so that a first call's answer
    compiles none of CuPy's kernels past its deadline."""
    result = caller_assignment(problem, row_match, u, v, stats, reference)
    result.heuristic = True
    result.lower_bound = _reduction_bound(result, problem)
    return result


def _reduction_bound(result: Assignment, problem: Problem):
    """DGS's bound: the reductions' duals (section 4.1) summed exactly, in one sum (the two
    sides summed and rounded apart cancelled to a bound above the optimum: 2.00007e-12 for
    [[-1, 1e-12], [1e-12, 2]], whose optimum is 2e-12; found by the property test). Float column
    duals v_j = min_i (c_ij - u_i) are rounded to nearest, so each may exceed the exact
    differences by half a unit in its last place: a unit per column is given back, and the
    total is rounded away from the optimum. A matrix scaled into float64's range
    (``Problem.scale_exponent``) was reduced in its scaled units, where a cost can round to a
    subnormal: a unit of those per row is given back too."""
    u, v = result.row_duals, result.col_duals
    if problem.is_integer:
        return exact_sum(u, v)
    sign = -1.0 if problem.maximize else 1.0
    exponent = problem.scale_exponent
    v_scaled = np.ldexp(np.abs(v.get() if is_device_array(v) else v), -exponent)
    rows = np.full(len(u), math.ldexp(1.0, exponent - 1074) if exponent else 0.0)
    given_back = -sign * np.concatenate([unscaled(_ulp(v_scaled), exponent), rows])
    with np.errstate(over="ignore"):  # a bound past float64's largest value is inf, still a bound
        return float(np.nextafter(exact_sum(u, v, given_back), -sign * np.inf))


def _ulp(x):
    """At least a unit in the last place of each ``x >= 0``: twice the step down, which is the
    ulp or (at a power of two) half of it, and never less than the smallest subnormal
    (``np.spacing`` steps up, past float64's largest value)."""
    return np.maximum(2 * (x - np.nextafter(x, 0)), math.ldexp(1.0, -1074))


def caller_duals(u, v, *, integer: bool, offset: int, maximize: bool):
    """A solver's float64 duals of the matrix it solved (NumPy or CuPy) as the caller's: for
    integer costs whole numbers in int64 with the matrix's offset (:func:`dlap.problem.integer_offset`)
    given back to the rows (every row is assigned, so the longer side's duals keep their sign);
    negated when maximising."""
    sign = -1 if maximize else 1
    if integer:
        xp = array_module(u)
        u = xp.rint(u).astype(np.int64) + xp.asarray(offset, dtype=np.int64)  # a scalar, or one per row of u
        v = xp.rint(v).astype(np.int64)
        if u.shape == v.shape and u.size:  # square: u + t, v - t is as good a dual solution
            t = _dual_shift(int(u.min()), int(u.max()), int(v.min()), int(v.max()))
            u, v = u + t, v - t
    else:
        u, v = u.astype(np.float64), v.astype(np.float64)
    return sign * u, sign * v


def _dual_shift(u_lo: int, u_hi: int, v_lo: int, v_hi: int, limit: int = 2**62) -> int:
    """The shift t nearest 0 that brings integer duals ``u + t`` and ``v - t`` within ``±limit``
    (the certificate's range), 0 where none does. The offset given back to the rows can take
    them just past it: entries within 2**62 of 0, maximised, had a row dual of -(2**62 + 1)
    (found by hypothesis), where ``t = 1`` fits every dual."""
    low, high = max(-limit - u_lo, v_hi - limit), min(limit - u_hi, v_lo + limit)
    if low > high:
        return 0
    return min(max(0, low), high)


def row_minima(c, v):
    """``min_j (c_ij - v_j)`` for every row of ``c`` (NumPy or CuPy, in float64), a block of rows
    at a time so that no n x m temporary is made: the row duals that make the column duals ``v``
    feasible, whose sum with ``v``'s bounds the optimum from below."""
    xp = array_module(c)
    out = xp.empty(c.shape[0])
    step = max(1, BLOCK_ELEMENTS // max(c.shape[1], 1))
    for start in range(0, c.shape[0], step):
        out[start : start + step] = (widened(c[start : start + step]) - v[None, :]).min(axis=1)
    return out
