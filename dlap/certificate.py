"""The optimality certificate of an assignment, recomputed from the matrix and the indices alone.

Date & Nagi (2016), section 2: an assignment and duals ``(u, v)`` with ``u_i + v_j <= c_ij`` on
every pair (dual feasibility) and equality on the assigned pairs (complementary slackness) prove
the assignment optimal. :func:`certify` trusts nothing a solver stored. It checks

1. that the indices are a (partial) permutation of the right size: ``min(n, m)`` distinct rows and
   distinct columns, in range, avoiding forbidden (infinite) pairs;
2. the objective, summed again from the matrix;
3. dual feasibility of every entry, and on the longer side of a rectangular matrix ``v_j <= 0``;
4. complementary slackness on the assigned pairs (and ``v_j = 0`` on unassigned columns);
5. a lower bound of its own: ``u'_i = min_j (c_ij - v_j)`` is feasible whatever ``v`` is, so
   ``sum u' + sum v`` bounds every assignment from below, whoever made ``v``.

The assignment is proven optimal when all five hold and the bound meets the objective. A
heuristic's duals (DGS: the reductions) are feasible but not complementary, so for a heuristic
step 4 is reported and not required: the bound alone then proves how far it is from the optimum.

Integer matrices are certified exactly: integer duals, the entries shifted by their minimum into
``[0, span]`` (:data:`dlap.problem.MAX_INTEGER_SPAN`) so that int64 holds every reduced cost, and
sums in Python ints. Float matrices within ``rtol``: each entry's slack against the magnitudes of
the matrix and duals, the gap against the magnitudes summed (sums by ``math.fsum``), neither below
the smallest normal number of the costs' dtype.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .problem import MSG_NOT_2D, array_module, check_entries, offset_for_range

BLOCK_ELEMENTS = 1 << 22  # matrix entries per block (bounded temporaries)
#: integer duals, less the entries' offset, are checked within ± this (int64 then holds every sum)
_DUAL_LIMIT = 2**61


@dataclass(frozen=True)
class Certificate:
    """The optimality certificate of an assignment.

    ``primal`` is the assignment's objective recomputed from the matrix and ``lower_bound`` a value
    no assignment can beat (for ``maximize``: an upper bound no assignment can exceed);
    ``gap = |primal - lower_bound|`` (exact integers for integer costs).
    ``max_dual_violation`` and ``max_slackness_violation`` measure how far the given duals are
    from feasibility and complementary slackness. ``problems`` says what failed, in words.
    """

    primal: float
    lower_bound: float
    gap: float
    relative_gap: float
    max_dual_violation: float
    max_slackness_violation: float
    optimal: bool
    problems: tuple = ()

    def __str__(self) -> str:
        verdict = "optimal" if self.optimal else "NOT proven optimal"
        text = (
            f"{verdict}: objective {self.primal:.12g}, dual bound {self.lower_bound:.12g}, "
            f"gap {self.gap:.3g} (relative {self.relative_gap:.3g})"
        )
        return text + "".join(f"; {p}" for p in self.problems)


def refused(problems) -> Certificate:
    """The certificate of an answer whose indices or duals cannot even be checked."""
    nan = math.nan
    return Certificate(nan, nan, math.inf, math.inf, math.inf, math.inf, False, tuple(problems))


def certify(cost, row_ind, col_ind, objective, row_duals, col_duals, *, maximize: bool = False,
            heuristic: bool = False, rtol: float = 1e-9) -> Certificate:
    """Check an assignment of ``cost`` (NumPy, or CuPy: checked on its GPU) and its duals; see the
    module docstring. Raises ValueError for a matrix dlap would refuse (not 2-D, NaN, integers out
    of range), never for a wrong answer: that gets ``optimal=False`` and its ``problems``."""
    xp = array_module(cost)
    c = xp.asarray(cost)
    if c.ndim != 2:
        raise ValueError(MSG_NOT_2D.format(ndim=c.ndim))
    n, m = c.shape
    k = min(n, m)
    problems = []
    rows = _permutation_part(xp, row_ind, n, k, "row_ind", problems)
    cols = _permutation_part(xp, col_ind, m, k, "col_ind", problems)
    u = _duals(xp, row_duals, n, "row_duals", problems)
    v = _duals(xp, col_duals, m, "col_duals", problems)
    if problems:
        return refused(problems)
    if c.dtype.kind in "biu":  # exact arithmetic needs whole-number duals
        u, v = _as_int(xp, u, "row_duals", problems), _as_int(xp, v, "col_duals", problems)
        if problems:
            return refused(problems)
    if c.size == 0:
        if objective != 0:
            problems.append(f"the stored objective {objective!r} of an empty assignment is not 0")
        return Certificate(0, 0, 0, 0.0, 0, 0, not problems, tuple(problems))
    sign = -1 if maximize else 1
    if n > m:  # the orientation where every row is assigned and the longer side's duals are <= 0
        c, rows, cols, u, v = c.T, cols, rows, v, u
    terms = _integer_terms if c.dtype.kind in "biu" else _float_terms
    return terms(xp, c, rows, cols, u, v, sign, objective, heuristic, rtol, problems)


def _permutation_part(xp, index, extent: int, size: int, name: str, problems: list):
    """``index`` as int64 when it is ``size`` distinct integers in ``[0, extent)``; else None, and
    why in ``problems``."""
    a = xp.asarray(index)
    if a.ndim != 1 or a.shape[0] != size:
        problems.append(f"{name} has shape {tuple(a.shape)}, expected ({size},)")
        return None
    if a.dtype.kind not in "iu":
        problems.append(f"{name} holds {a.dtype}, not integers")
        return None
    if size and (int(a.min()) < 0 or int(a.max()) >= extent):
        problems.append(f"{name} has entries outside [0, {extent})")
        return None
    a = a.astype(np.int64)
    if xp.unique(a).shape[0] != size:
        problems.append(f"{name} repeats an index: not a permutation")
        return None
    return a


def _duals(xp, duals, extent: int, name: str, problems: list):
    a = xp.asarray(duals)
    if a.shape != (extent,) or a.dtype.kind not in "biuf":
        problems.append(f"{name} has shape {tuple(a.shape)} and dtype {a.dtype}, expected ({extent},) numbers")
        return None
    if a.dtype.kind == "f" and extent and not bool(xp.isfinite(a).all()):
        problems.append(f"{name} are not all finite")
        return None
    return a


def _blocks(c):
    step = max(1, BLOCK_ELEMENTS // max(c.shape[1], 1))
    return range(0, c.shape[0], step), step


def _integer_terms(xp, c, rows, cols, u, v, sign, objective, heuristic, rtol, problems) -> Certificate:
    """Steps 2-5 in exact integer arithmetic: ``d = sign * c - shift`` lies in ``[0, span]``."""
    k, rectangular = c.shape[0], c.shape[0] < c.shape[1]
    lo, hi = int(c.min()), int(c.max())
    offset_for_range(lo, hi, sign < 0)  # raises for a matrix outside the range dlap solves exactly
    shift = lo if sign > 0 else -hi
    if max(int(u.max()), -int(u.min()), int(v.max()), -int(v.min())) > 2**62:
        return refused(problems + ["a dual exceeds 2**62"])  # (the sign flip below must not overflow)
    u, v = sign * u, sign * v
    if max(int(u.max()) - shift, shift - int(u.min()), int(v.max()), -int(v.min())) > _DUAL_LIMIT:
        return refused(problems + [f"a dual is more than 2**61 from the entries: {int(u.min())}..{int(u.max())}, "
                                   f"{int(v.min())}..{int(v.max())}"])
    u_d = u - np.int64(shift)
    v_bounded = xp.minimum(v, 0) if rectangular else v

    def shifted(block):
        return sign * block.astype(np.int64) - np.int64(shift)

    violation, u_repaired = 0, xp.empty(k, dtype=np.int64)
    starts, step = _blocks(c)
    for start in starts:
        d = shifted(c[start : start + step])
        u_repaired[start : start + step] = (d - v_bounded[None, :]).min(axis=1)
        violation = max(violation, -int((d - u_d[start : start + step, None] - v[None, :]).min()))
    matched = shifted(c[rows, cols])
    slackness = int(abs(matched - u_d[rows] - v[cols]).max())
    if rectangular:
        violation = max(violation, int(v.max()))
        slackness = max(slackness, _unassigned_duals(xp, v, cols))
    primal_d = exact_sum(matched)
    bound_d = exact_sum(u_repaired, v_bounded)
    primal, bound = sign * (primal_d + k * shift), sign * (bound_d + k * shift)
    gap = primal_d - bound_d  # >= 0: the bound holds for every assignment
    if objective != primal:
        problems.append(f"the stored objective {objective} is not the assignment's cost {primal}")
    return _verdict(primal, bound, gap, max(abs(primal), 1), max(violation, 0), slackness, gap == 0,
                    violation <= 0, slackness == 0 or heuristic, problems)


def _as_int(xp, duals, name, problems):
    """Integer duals as int64; float duals that are whole numbers too (else None: an integer
    matrix's duals are integers in dlap, and exact arithmetic needs them)."""
    if duals.dtype.kind in "biu":
        if duals.dtype == np.uint64 and duals.size and int(duals.max()) > 2**62:
            problems.append(f"{name} exceed 2**62")
            return None
        return duals.astype(np.int64)
    if duals.size and float(abs(duals).max()) > 2**62:
        problems.append(f"{name} exceed 2**62")
        return None
    whole = xp.floor(duals)
    if bool((whole != duals).any()):
        problems.append(f"{name} of an integer matrix are not whole numbers")
        return None
    return whole.astype(np.int64)


def _float_terms(xp, c, rows, cols, u, v, sign, objective, heuristic, rtol, problems) -> Certificate:
    """Steps 2-5 in float64, with tolerances relative to the magnitudes involved."""
    k, rectangular = c.shape[0], c.shape[0] < c.shape[1]
    u, v = sign * u.astype(np.float64), sign * v.astype(np.float64)
    v_bounded = xp.minimum(v, 0.0) if rectangular else v
    violation, largest = -math.inf, 0.0
    u_repaired = xp.empty(k)
    starts, step = _blocks(c)
    for start in starts:
        d = sign * widened(c[start : start + step])
        check_entries(d)  # NaN, or -inf in minimisation form: scipy's ValueError
        finite = xp.where(xp.isinf(d), 0.0, d)
        largest = max(largest, float(abs(finite).max()))
        u_repaired[start : start + step] = (d - v_bounded[None, :]).min(axis=1)
        violation = max(violation, float((u[start : start + step, None] + v[None, :] - d).max()))
    matched = sign * widened(c[rows, cols])
    if not bool(xp.isfinite(matched).all()):
        problems.append("the assignment takes a forbidden (infinite) pair")
    # below the costs' smallest normal number no hardware that flushes subnormals (a GPU's float32)
    # can tell two values apart (found on an H200: a dual off by a float32 subnormal, 1.95e-43)
    tiny = float(np.finfo(c.dtype).tiny)
    tolerance = rtol * (largest + float(abs(u).max()) + float(abs(v).max())) + tiny
    slackness = float(abs(matched - u[rows] - v[cols]).max())
    if rectangular:
        violation = max(violation, float(v.max()))
        slackness = max(slackness, _unassigned_duals(xp, v, cols))
    primal = math.fsum(matched.tolist())
    bound = exact_sum(u_repaired, v_bounded)
    scale = max(abs(primal), math.fsum(abs(matched).tolist()),
                math.fsum(abs(u_repaired).tolist()) + math.fsum(abs(v_bounded).tolist()), 1e-300)
    gap = abs(primal - bound) if math.isfinite(primal - bound) else math.inf
    if not abs(sign * objective - primal) <= rtol * scale:
        problems.append(f"the stored objective {objective!r} is not the assignment's cost {sign * primal!r}")
    return _verdict(sign * primal, sign * bound, gap, scale, max(violation, 0.0), slackness,
                    gap <= rtol * scale + tiny, violation <= tolerance, slackness <= tolerance or heuristic, problems)


def _unassigned_duals(xp, v, cols):
    """The largest ``|v_j|`` on the columns no row takes (they must be 0)."""
    free = xp.ones(v.shape[0], dtype=bool)
    free[cols] = False
    return abs(v[free]).max().item() if bool(free.any()) else 0


def _verdict(primal, bound, gap, scale, violation, slackness, closed, feasible, complementary, problems):
    if not feasible:
        problems.append(f"the duals are not feasible (an entry's reduced cost is {-violation:.3g})")
    if not complementary:
        problems.append(f"complementary slackness fails by {slackness:.3g} on an assigned pair")
    if not closed:
        problems.append("the dual bound does not meet the objective")
    return Certificate(
        primal=primal, lower_bound=bound, gap=gap, relative_gap=gap / scale, max_dual_violation=violation,
        max_slackness_violation=slackness, optimal=not problems, problems=tuple(problems),
    )


def widened(x):
    """``x`` as float64, exactly. CuPy's float32 -> float64 conversion flushes subnormals to zero
    (a GPU batch's objective lost a cost of 1e-45 that way, found by hypothesis on an H200), so a
    CuPy float32 array is widened by the solvers' own ``widen`` (backends/cuda/common.cuh), which
    builds them from their bits."""
    if x.dtype == np.float32 and array_module(x) is not np:
        return _widen_float32()(x)
    return x.astype(np.float64)


@functools.cache
def _widen_float32():
    import cupy

    from .backends.gpu_kernels import common_source

    return cupy.ElementwiseKernel("float32 x", "float64 y", "y = widen(x)", "dlap_widen_float32",
                                  preamble=common_source())


def exact_sum(*arrays):
    """The exact sum of the entries of NumPy or CuPy arrays, all in one sum: a Python int for
    integers, the correctly rounded float (``math.fsum``) for floats. One sum, not one per array
    added after: two sides of a dual bound rounded apart cancel (DGS's bound passed the optimum
    of [[-1, 1e-12], [1e-12, 2]] that way)."""
    values = [value for x in arrays for value in x.tolist()]
    return sum(values) if all(x.dtype.kind in "biu" for x in arrays) else math.fsum(values)
