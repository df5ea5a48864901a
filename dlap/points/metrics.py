"""The metrics a point set's costs are made of, defined once (every engine, the benchmarks and the
certificate compute them from these formulas, in float64, over the coordinates in order):

- ``euclidean``: ``sqrt(sum_k (x_k - y_k)**2)``
- ``sqeuclidean``: ``sum_k (x_k - y_k)**2``
- ``cityblock``: ``sum_k |x_k - y_k|``
- ``minkowski`` (``p >= 1``): ``(sum_k |x_k - y_k|**p)**(1/p)``
- ``cosine``: ``1 - sum_k x_k y_k / (|x| |y|)``, the norms ``sqrt(sum_k x_k**2)``

They are ``scipy.spatial.distance.cdist``'s values to within the rounding of float64.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal, get_args

import numpy as np

from ..certificate import widened
from ..device import to_host
from ..problem import FLOAT_HEADROOM

Metric = Literal["euclidean", "sqeuclidean", "cityblock", "minkowski", "cosine"]
METRICS: tuple[str, ...] = get_args(Metric)
#: the least squared norm of a point under cosine: below it the sum's terms are subnormal, and its
#: rounding is no longer float64's relative one (cdist's values and dlap's part)
COSINE_LEAST_SQUARES = 2.0**-1021
#: the kernels' number for each metric
METRIC_IDS = {name: number for number, name in enumerate(METRICS)}


def check_metric(metric: str, p) -> float:
    """The metric's exponent (``p`` for minkowski, 0 otherwise); ValueError for an unknown metric
    or a ``p`` that is not a finite number of at least 1 (scipy's condition)."""
    if metric not in METRIC_IDS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")
    if metric != "minkowski":
        if p is not None:
            raise ValueError(f"p is minkowski's exponent; metric {metric!r} takes none")
        return 0.0
    if p is None:
        p = 2.0
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not math.isfinite(p) or p < 1:
        raise ValueError(f"p must be a finite number of at least 1; got {p!r}")
    return float(p)


def check_points(a, b, xp) -> tuple:
    """``a`` (n, d) and ``b`` (m, d) as float32 or float64 arrays of ``xp`` (floats keep their
    dtype, integers and smaller floats widen to float64), with scipy's errors for what cdist refuses."""
    a, b = xp.asarray(a), xp.asarray(b)
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array of points (n, d); got {x.ndim} dimensions")
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{name} holds {x.dtype}: points must be real numbers")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same number of columns (coordinates): {a.shape[1]} and {b.shape[1]}")
    dtype = np.result_type(a.dtype, b.dtype)
    dtype = np.float32 if dtype == np.float32 else np.float64
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    for name, x in (("a", a), ("b", b)):
        if x.size and not bool(xp.isfinite(x).all()):
            raise ValueError(f"{name} contains NaN or infinite coordinates")
    return xp.ascontiguousarray(a), xp.ascontiguousarray(b)


def check_range(a, b, metric: str, exponent: float) -> None:
    """ValueError where a pair's metric value could pass :data:`dlap.problem.FLOAT_HEADROOM`
    (2**1000), or overflow float64 on the way (a cosine's squared norms, dot products and norms'
    products, held below it too): the engine's duals and reduced costs are sums and differences
    of such values (issue 37). The bound is each coordinate's spread over both sets (cosine: its
    largest magnitudes) put through the metric's formula, summed in the kernels' order: rounding
    is monotone, so no pair's value exceeds it."""
    if not (a.shape[0] and b.shape[0] and a.shape[1]):
        return
    (a_lo, a_hi), (b_lo, b_hi) = ((to_host(x.min(axis=0)).astype(np.float64), to_host(x.max(axis=0)).astype(np.float64))
                                  for x in (a, b))
    lo, hi = np.minimum(a_lo, b_lo), np.maximum(a_hi, b_hi)
    with np.errstate(over="ignore", invalid="ignore"):
        if metric == "cosine":
            a_big, b_big = np.maximum(-a_lo, a_hi), np.maximum(-b_lo, b_hi)
            a_squares, b_squares = _in_order(a_big * a_big), _in_order(b_big * b_big)
            value = max(a_squares, b_squares, _in_order(a_big * b_big), math.sqrt(a_squares) * math.sqrt(b_squares))
        else:
            spread = hi - lo
            if metric == "cityblock":
                value = _in_order(spread)
            elif metric == "minkowski":
                value = _in_order(spread**exponent) ** (1.0 / exponent)
            else:
                value = _in_order(spread * spread)
                value = math.sqrt(value) if metric == "euclidean" else value
    if not value <= FLOAT_HEADROOM:
        raise ValueError(
            f"the points' {metric} values can pass 2**1000 or overflow float64 (coordinates from {lo.min():.3g} "
            f"to {hi.max():.3g}), beyond what dlap solves exactly; scale the points"
            + (" (their cosine distances do not change)" if metric == "cosine" else ""))


def _in_order(terms: np.ndarray) -> float:
    """The float64 sum of ``terms`` added one after the other, as the kernels sum a pair's."""
    total = 0.0
    for term in terms.tolist():
        total += term
    return total


def norms(x, metric: str, xp):
    """Each point's norm (float64) where the metric needs it (cosine), else an empty array;
    ValueError for a zero point under cosine (its cosine distance is undefined), and for a point
    whose squared norm is below :data:`COSINE_LEAST_SQUARES`."""
    if metric != "cosine":
        return xp.zeros(0)
    x = widened(x)  # exact: CuPy's astype flushes float32 subnormals
    squares = (x**2).sum(axis=1)
    if x.shape[0] and not bool((squares >= COSINE_LEAST_SQUARES).all()):
        if not bool((x != 0).any(axis=1).all()):
            raise ValueError("cosine distance is undefined for a zero point (its norm is 0)")
        raise ValueError("the points' cosine values lose float64's precision (a point's squared norm is below "
                         "2**-1021, where its terms are subnormal); scale the points (their cosine distances "
                         "do not change)")
    return xp.sqrt(squares)
