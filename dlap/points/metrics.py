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

Metric = Literal["euclidean", "sqeuclidean", "cityblock", "minkowski", "cosine"]
METRICS: tuple[str, ...] = get_args(Metric)
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


def norms(x, metric: str, xp):
    """Each point's norm (float64) where the metric needs it (cosine), else an empty array;
    ValueError for a zero point under cosine (its cosine distance is undefined)."""
    if metric != "cosine":
        return xp.zeros(0)
    norm = xp.sqrt((widened(x) ** 2).sum(axis=1))  # exact: CuPy's astype flushes float32 subnormals
    if x.shape[0] and not bool((norm > 0).all()):
        raise ValueError("cosine distance is undefined for a zero point (its norm is 0)")
    return norm
