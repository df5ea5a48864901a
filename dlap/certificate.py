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
the matrix and duals, the gap against the magnitudes summed (sums by ``math.fsum``), with no floor
but float64's smallest subnormal (one per row where a huge matrix was scaled into range): every
solver widens float32 costs exactly, subnormals included, so assignments one subnormal apart are
told apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .device import array_module
from .problem import FLOAT_HEADROOM, MSG_NOT_2D, check_entries, offset_for_range, scale_exponent

BLOCK_ELEMENTS = 1 << 22  # matrix entries per block (bounded temporaries)
#: the relative tolerance of a float certificate (its slack and its gap) unless the caller gives one
RTOL = 1e-9
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
            f"{verdict}: objective {_shown(self.primal)}, dual bound {_shown(self.lower_bound)}, "
            f"gap {_shown(self.gap, 3)} (relative {self.relative_gap:.3g})"
        )
        return text + "".join(f"; {p}" for p in self.problems)


def _shown(x, digits: int = 12) -> str:
    """An integer certificate's values in full, a float's to ``digits`` significant digits."""
    return str(x) if isinstance(x, int) else f"{x + 0.0:.{digits}g}"  # (+ 0.0: no "-0")


def refused(problems) -> Certificate:
    """The certificate of an answer whose indices or duals cannot even be checked."""
    nan = math.nan
    return Certificate(nan, nan, math.inf, math.inf, math.inf, math.inf, False, tuple(problems))


def certify(cost, row_ind, col_ind, objective, row_duals, col_duals, *, maximize: bool = False,
            heuristic: bool = False, rtol: float = RTOL) -> Certificate:
    """Check an assignment of ``cost`` (NumPy, or CuPy: checked on its GPU) and its duals; see the
    module docstring. Raises ValueError for a matrix dlap would refuse (not 2-D, NaN, integers out
    of range), never for a wrong answer: that gets ``optimal=False`` and its ``problems``."""
    on_demand = getattr(cost, "on_demand", False)  # costs computed block by block (dlap.points)
    xp = cost.xp if on_demand else array_module(cost)
    c = cost if on_demand else xp.asarray(cost)
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
    if _real(objective) is None:
        problems.append(f"the stored objective {objective!r} is not a number")
    elif objective != primal:
        problems.append(f"the stored objective {objective} is not the assignment's cost {primal}")
    return _verdict(primal, bound, gap, gap / max(abs(primal), 1), max(violation, 0), slackness, gap == 0,
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
    """Steps 2-5 in float64 (see the module docstring, "Floats")."""
    rectangular = c.shape[0] < c.shape[1]
    u, v = sign * u.astype(np.float64), sign * v.astype(np.float64)
    duals_large = max(float(abs(u).max()), float(abs(v).max()))

    def scanned(exponent: int) -> FloatScan | None:
        vb = bound_duals(xp, v, rectangular, exponent)
        scan = _searched(c, "certificate_scan", sign, u, v, vb, exponent)
        return float_scan(xp, c, sign, u, v, vb, exponent) if scan is NotImplemented else scan

    def reductions(row_duals) -> list:
        found = _searched(c, "certificate_reductions", sign, exponent, row_duals)
        return column_reductions(xp, c, sign, exponent, row_duals) if found is NotImplemented else found

    exponent = scale_exponent(duals_large)
    scan = scanned(exponent)
    if scan is None:  # a cost beyond FLOAT_HEADROOM: again, with every value scaled into range
        largest = _searched(c, "largest_cost")
        exponent = scale_exponent(max(duals_large, _largest_cost(c) if largest is NotImplemented else largest))
        scan = scanned(exponent)
    matched = sign * widened(c[rows, cols])
    slackness = float(abs(matched - u[rows] - v[cols]).max()) if rows.size else 0.0
    return float_verdict(
        xp, scan, matched, cols, u, v, slackness, exponent, rtol, objective, heuristic,
        problems, reductions, sign,
    )


def _searched(c, name: str, *args):
    """What on-demand costs find over every pair by a search of their own (dlap.points: through
    k-d trees), else NotImplemented: the certificate then scans them block by block."""
    method = getattr(c, name, None)
    return NotImplemented if method is None else method(*args)


_EPS = float(np.finfo(np.float64).eps)
_SUBNORMAL = math.ldexp(1.0, -1074)


@dataclass
class FloatScan:
    """What a pass over (a part of) a float matrix in minimisation form finds, values scaled by
    ``2**-exponent``: each row's minimum of ``c - v`` (:func:`bound_duals`) as computed, and its
    rounding error (their sum is the exact minimum), each row's minimum of ``c``; unscaled, the
    worst ``u_i + v_j - c_ij`` of the given duals and the largest finite ``|c_ij|``."""

    row_minima: object
    row_errors: object
    cost_minima: object
    violation: float
    largest: float = 0.0


def bound_duals(xp, v, rectangular: bool, exponent: int):
    """The bound's column duals, scaled by ``2**-exponent``: at most 0 on a rectangular matrix's
    longer side; a square matrix's shifted to max 0 (v - t is as good as v, and a common offset
    of the duals, however large, then leaves nothing behind: issue 37)."""
    v = v * math.ldexp(1.0, -exponent)
    return xp.minimum(v, 0.0) if rectangular else v - float(v.max())


def float_scan(xp, c, sign, u, v, vb, exponent: int) -> FloatScan | None:
    """One pass over ``c`` (a matrix, or a rank's slab of one) in row blocks: ``u`` are its rows'
    given duals, ``v`` its columns' and ``vb`` their :func:`bound_duals`. None where an unscaled
    cost exceeds :data:`FLOAT_HEADROOM` while ``exponent`` is 0 (the caller scans again, scaled)."""
    f = math.ldexp(1.0, -exponent)
    us, vs = u * f, v * f
    k = c.shape[0]
    scan = FloatScan(xp.empty(k), xp.empty(k), xp.empty(k), -math.inf)
    for block, d, largest in _scaled_blocks(c, sign, f):
        if not exponent and largest > FLOAT_HEADROOM:
            return None
        scan.largest = max(scan.largest, largest)
        scan.row_minima[block], scan.row_errors[block] = _minima_with_errors(xp, d - vb[None, :], d, vb[None, :], 1)
        scan.cost_minima[block] = d.min(axis=1)
        scan.violation = max(scan.violation, float((us[block, None] + vs[None, :] - d).max()))
    scan.violation = math.ldexp(scan.violation, exponent)
    return scan


def column_reductions(xp, c, sign, exponent: int, row_duals) -> list:
    """For each array of row duals (one per row of ``c``, scaled by ``2**-exponent``, each at
    most the rows' exact minima of some ``c - v``), the columns' minima of ``c - u`` and their
    rounding errors: the column reduction of section 4.1 made exact."""
    f = math.ldexp(1.0, -exponent)
    m = c.shape[1]
    found = [(xp.full(m, math.inf), xp.zeros(m)) for _ in row_duals]
    for block, d, _ in _scaled_blocks(c, sign, f):
        for r, u in enumerate(row_duals):
            found[r] = merge_minima(*found[r], *_minima_with_errors(xp, d - u[block, None], d, u[block, None], 0))
    return found


def merge_minima(low, error, other_low, other_error):
    """Exact minima (computed minimum, rounding error) of two parts of the same rows or columns."""
    xp = array_module(low)
    error = xp.where(other_low < low, other_error, xp.where(other_low == low, xp.minimum(error, other_error), error))
    return xp.minimum(low, other_low), error


def float_verdict(xp, scan: FloatScan, matched, cols, u, v, slackness: float, exponent: int,
                  rtol: float, objective, heuristic: bool, problems: list, reductions, sign: int = 1,
                  stored: bool = True) -> Certificate:
    """The float certificate from a whole matrix's :class:`FloatScan` (a rank's, combined):
    ``matched`` the assigned costs (minimisation form, unscaled), ``cols`` their columns, ``u``
    and ``v`` the given duals, ``slackness`` the largest ``|c - u - v|`` on the assigned pairs;
    ``reductions(row_duals)`` is :func:`column_reductions` over the whole matrix, asked for only
    where the first bounds do not close. ``stored`` False: no stored objective to check (the
    ranks of a Dask solve, whose objective is what they sum).
    Everything is in minimisation form but the objective and the certificate's primal and bound,
    which are the caller's (``sign`` -1: maximised)."""
    k, rectangular = u.shape[0], u.shape[0] < v.shape[0]
    f = math.ldexp(1.0, -exponent)  # values scaled by f are exact unless they fall below 2**-1022
    if not bool(xp.isfinite(matched).all()):
        problems.append("the assignment takes a forbidden (infinite) pair")
        matched = xp.where(xp.isfinite(matched), matched, 0.0)
    primal = exact_sum(matched)
    violation = scan.violation
    if rectangular:  # the longer side's duals: v_j <= 0, and 0 where unassigned
        violation = max(violation, float(v.max()))
        slackness = max(slackness, _unassigned_duals(xp, v, cols))
    # the given duals are checked within rtol of the magnitudes they were computed from: the
    # largest cost and dual (of a square matrix's duals shifted to max(v) = 0, which no common
    # offset changes); the proof below needs no such allowance
    shifted = _unscaled(_shifted_magnitude(u * f, v * f, rectangular), exponent)
    tolerance = rtol * (scan.largest + shifted) + _unscaled(_SUBNORMAL, exponent)
    # the proof: an exact lower bound, from the given column duals, from v = 0 (an assignment of
    # every row's cheapest entry), or else from one more reduction of either (a second pass)
    ms = matched * f
    magnitude = exact_sum(abs(ms))
    # the gap is rounded up by one step; scaling rounds each cost it makes subnormal (by 2**-1075)
    allowed = rtol * magnitude + (k if exponent else 1) * _SUBNORMAL
    vb = bound_duals(xp, v, rectangular, exponent)
    above, gap, bound = min(_gap_above(ms, scan.row_minima, scan.row_errors, vb),
                            _gap_above(ms, scan.cost_minima, xp.zeros_like(vb)))
    if not above <= allowed:
        exact_below = xp.where(scan.row_errors < 0, xp.nextafter(scan.row_minima, -math.inf), scan.row_minima)
        for row_duals, (low, error) in zip((scan.cost_minima, exact_below),
                                           reductions([scan.cost_minima, exact_below]), strict=True):
            if rectangular:  # v_j <= 0: where the minimum is not below 0, v_j = 0
                low, error = xp.minimum(low, 0.0), xp.where(low < 0, error, 0.0)
            above, gap, bound = min((above, gap, bound), _gap_above(ms, row_duals, low, error))
    if stored:
        value = _real(objective)
        if value is None:
            problems.append(f"the stored objective {objective!r} is not a number")
        elif not _objective_agrees(sign * value, primal, magnitude, exponent, k):
            problems.append(f"the stored objective {objective!r} is not the assignment's cost {sign * primal!r}")
    relative = gap / magnitude if magnitude > 0 else (0.0 if gap <= 0 else math.inf)
    return _verdict(sign * primal, sign * _unscaled(bound, exponent), _unscaled(max(gap, 0.0), exponent), relative,
                    max(violation, 0.0), slackness, above <= allowed, violation <= tolerance,
                    slackness <= tolerance or heuristic, problems)


def _shifted_magnitude(u, v, rectangular: bool) -> float:
    """``max |u| + max |v|`` of the duals, those of a square matrix taken as ``(u + t, v - t)``
    with ``max(v - t) = 0``."""
    t = 0.0 if rectangular else float(v.max())
    return float(abs(u + t).max()) + float(abs(v - t).max())


def _largest_cost(c) -> float:
    """The largest finite ``|c_ij|``, a block of rows at a time."""
    starts, step = _blocks(c)
    return max(check_entries(widened(abs(c[start : start + step]))) for start in starts)


def _scaled_blocks(c, sign, f):
    """``(rows, sign * c[rows] * f)`` in float64, a block of rows at a time, checked for NaN and
    -inf (scipy's ValueError), with each block's largest finite magnitude before scaling."""
    starts, step = _blocks(c)
    for start in starts:
        d = sign * widened(c[start : start + step])
        largest = check_entries(d)
        d *= f
        yield slice(start, start + step), d, largest


def _minima_with_errors(xp, reduced, d, duals, axis: int):
    """The minima of ``reduced = d - duals`` along ``axis``, and the rounding error of each:
    Knuth's TwoSum on the entries that attain it (rounding is monotone, so the exact minimum is
    among them), 0 where the minimum is infinite."""
    low = reduced.min(axis=axis)
    with np.errstate(invalid="ignore"):  # inf - inf on forbidden entries, which attain no finite minimum
        error = rounding_errors(reduced, d, duals)
    attained = reduced == xp.expand_dims(low, axis)
    error = xp.where(attained, error, math.inf).min(axis=axis)
    return low, xp.where(xp.isfinite(low), error, 0.0)


def rounding_errors(reduced, d, duals):
    """Each ``reduced = d - duals`` (as computed)'s rounding error, by Knuth's TwoSum: ``reduced``
    plus it is the exact difference."""
    back = reduced - d
    return (d - (reduced - back)) + (-duals - back)


def _gap_above(matched, *bound) -> tuple[float, float, float]:
    """``sum(matched) - sum(bound)`` (the bound's arrays summed exactly) correctly rounded, a float
    at least as large as it exactly is (one step up), and the bound."""
    gap = exact_sum(matched, *(-b for b in bound))
    return math.nextafter(gap, math.inf), gap, exact_sum(*bound)


def _unscaled(x: float, exponent: int) -> float:
    try:
        return math.ldexp(x, exponent)
    except OverflowError:
        return math.copysign(math.inf, x)


def _real(x):
    """``x`` as a Python float, or None if it is not a real number (a malformed stored objective:
    a string, an array, a complex number, a bool)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    try:
        return float(x)
    except OverflowError:  # a Python int beyond float64 (an integer objective is compared exactly)
        return math.inf if x > 0 else -math.inf


def _objective_agrees(stored: float, primal: float, magnitude: float, exponent: int, k: int) -> bool:
    """Whether a stored objective is the assignment's cost summed in some order: within the
    rounding of a sum of ``k`` terms of total magnitude ``magnitude`` (scaled units)."""
    if math.isinf(primal) or math.isinf(stored):
        return stored == primal
    f = math.ldexp(1.0, -exponent)
    return abs(stored * f - primal * f) <= (k + 1) * _EPS * magnitude + _SUBNORMAL


def _unassigned_duals(xp, v, cols):
    """The largest ``|v_j|`` on the columns no row takes (they must be 0)."""
    free = xp.ones(v.shape[0], dtype=bool)
    free[cols] = False
    return abs(v[free]).max().item() if bool(free.any()) else 0


def _verdict(primal, bound, gap, relative, violation, slackness, closed, feasible, complementary, problems):
    if not feasible:
        problems.append(f"the duals are not feasible (an entry's reduced cost is {-violation:.3g})")
    if not complementary:
        problems.append(f"complementary slackness fails by {slackness:.3g} on an assigned pair")
    if not closed:
        problems.append("the dual bound does not meet the objective")
    return Certificate(
        primal=primal, lower_bound=bound, gap=gap, relative_gap=relative, max_dual_violation=violation,
        max_slackness_violation=slackness, optimal=not problems, problems=tuple(problems),
    )


def widened(x):
    """``x`` as float64, exactly. CuPy's float32 -> float64 conversion flushes subnormals to zero
    (a GPU batch's objective lost a cost of 1e-45 that way, found by hypothesis on an H200), so a
    CuPy float32 array's subnormals are built from their bits, as the solvers' own ``widen``
    builds them (backends/gpu/cuda/common.cuh): mantissa times 2**-149."""
    xp = array_module(x)
    if x.dtype != np.float32 or xp is np:
        return x.astype(np.float64)
    bits = x.view(np.int32)
    magnitude = (bits & 0x007FFFFF).astype(np.float64) * 2.0**-149
    subnormal = xp.where(bits < 0, -magnitude, magnitude)
    return xp.where((bits & 0x7F800000) == 0, subnormal, x.astype(np.float64))


def exact_sum(*arrays):
    """The exact sum of the entries of NumPy or CuPy arrays, all in one sum: a Python int for
    integers, the correctly rounded float for floats (``math.fsum``; ``±inf`` where the sum
    itself is beyond float64). One sum, not one per array added after: two sides of a dual bound
    rounded apart cancel (DGS's bound passed the optimum of [[-1, 1e-12], [1e-12, 2]] that way)."""
    values = [value for x in arrays for value in x.tolist()]
    if all(x.dtype.kind in "biu" for x in arrays):
        return sum(values)
    try:
        return math.fsum(values)
    except OverflowError:  # a partial sum passed float64's largest value (issue 37)
        infinite = [x for x in values if not math.isfinite(x)]
        return sum(infinite) if infinite else _fsum_of_huge(values)


def _fsum_of_huge(values) -> float:
    """:func:`math.fsum` for finite floats whose partial sums overflow: the sum in integer units
    of 2**-1074 (every float64 is a whole number of them), rounded once by Python's correctly
    rounded int / int division."""
    total = 0
    for x in values:
        p, q = float(x).as_integer_ratio()
        total += p * ((1 << 1074) // q)
    try:
        return total / (1 << 1074)
    except OverflowError:
        return math.inf if total > 0 else -math.inf
