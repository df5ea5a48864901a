"""What every DGS answer must satisfy, checked by the CPU and the GPU DGS tests alike."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlap
from dlap import generate

from ..helpers import reference
from ..strategies import STRATEGIES


def best_exchange(cost, rows, cols, maximize):
    """The most improving 2-exchange left in an assignment (brute force; 0 if none): the holders of
    two columns swap them (a holder of none: the other moves there)."""
    c = np.asarray(cost, dtype=np.float64) * (-1.0 if maximize else 1.0)
    if c.shape[0] > c.shape[1]:
        c, rows, cols = c.T, cols, rows
    holder = np.full(c.shape[1], -1)
    holder[cols] = rows
    best = 0.0
    for a in range(c.shape[1]):
        for b in range(a + 1, c.shape[1]):
            x, y = holder[a], holder[b]
            d = (c[x, b] - c[x, a] if x >= 0 else 0.0) + (c[y, a] - c[y, b] if y >= 0 else 0.0)
            best = min(best, d)
    return best


def assert_dgs_result(result, cost, maximize=False, converged=True):
    """scipy's format, a permutation avoiding forbidden pairs, a bound that brackets scipy's
    optimum, and (once converged) no improving 2-exchange. ``converged`` None: either (a start
    returned early while the kernels load)."""
    cost = np.asarray(cost)
    rows, cols = result.row_ind, result.col_ind
    assert rows.dtype == np.int64 and cols.dtype == np.int64
    assert len(rows) == min(cost.shape) and np.all(np.diff(rows) > 0)
    assert len(np.unique(cols)) == len(cols) and cols.max(initial=0) < cost.shape[1]
    picked = cost[rows, cols].astype(np.float64)
    assert np.isfinite(picked).all(), "a forbidden pair was assigned"
    assert result.heuristic and result.stats.method == "dgs"
    if converged is not None:
        assert result.stats.time_limit_reached == (not converged)
    exact, error = reference(cost, maximize)
    assert error is None
    optimum = float(exact.astype(np.float64).sum())
    scale = float(np.abs(picked).sum() + np.abs(exact.astype(np.float64)).sum()) or 1.0
    tol = 1e-9 * scale
    sign = -1.0 if maximize else 1.0
    assert abs(result.objective - picked.sum()) <= tol
    assert sign * result.lower_bound <= sign * optimum + tol, "the bound passes the optimum"
    assert sign * optimum <= sign * result.objective + tol
    cert = result.verify()
    assert sign * cert.lower_bound >= sign * result.lower_bound - tol  # verify() repairs the duals
    assert cert.gap + tol >= abs(result.objective - optimum)
    if converged:
        assert best_exchange(cost, rows, cols, maximize) >= -tol, "an improving 2-exchange is left"


def check_dgs_strategy(strategy: str, options: dict, settings_) -> None:
    """Hypothesis: on ``strategy``'s matrices, scipy's errors where scipy raises, otherwise a valid
    2-exchange optimum with a true bound, the caller's matrix untouched (CPU and GPU tests)."""

    @settings_
    @given(cost=STRATEGIES[strategy], maximize=st.booleans(), transpose=st.booleans())
    def check(cost, maximize, transpose):
        if maximize and strategy == "forbidden":
            cost = -cost
        cost = cost.T if transpose else cost
        before = cost.copy()
        _, error = reference(cost, maximize)
        if error is not None:
            with pytest.raises(ValueError, match=error):
                dlap.solve(cost, maximize=maximize, method="dgs", **options)
            return
        result = dlap.solve(cost, maximize=maximize, method="dgs", **options)
        np.testing.assert_array_equal(cost, before)
        assert_dgs_result(result, cost, maximize)

    check()


FAMILIES = [
    ("uniform", lambda: generate.uniform(120, 10, seed=3), False),
    ("geometric", lambda: generate.geometric(120, seed=4), False),
    ("geometric-benefit", lambda: generate.geometric(120, seed=5, same_points=True), True),
    ("rectangular", lambda: generate.uniform_float(70, m=110, seed=6), False),
    ("tall", lambda: generate.uniform(110, 10, m=70, seed=7), True),
    ("ties", lambda: generate.ties(100, seed=8), False),
    ("machol-wien", lambda: generate.machol_wien(60), False),
]
