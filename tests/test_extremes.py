"""Extreme inputs (issue 37): subnormal and huge magnitudes, certificates under attack, and a
bounded fuzzer over all of them against scipy and brute force.

Every solve here must end (a subnormal excess once made the ε schedule grow forever), answer
finite costs near float64's largest value as scipy does, and come with a certificate that proves
exactly what holds: a rigorous dual bound within ``rtol`` of the costs the assignment sums,
whatever offset the duals carry.
"""

import dataclasses
import itertools
import math
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment as scipy_lsa

import dlap
from dlap.hungarian.scaling import SCALING_FACTOR, SCALING_FACTOR_WITH_BIDS, epsilon_schedule

from .helpers import assert_valid, exact_optimum, exact_total, within_resolution

METHODS = ["auto", "classical", "tree", "hybrid", "scaling", "dgs"]


def run_bounded(code: str, seconds: float = 60, memory_bytes: int = 2 << 30) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter under an address-space limit, killed after ``seconds``."""
    limit = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory_bytes}, {memory_bytes}))\n"
    return subprocess.run([sys.executable, "-c", limit + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=seconds)


# ---------------------------------------------------------------- subnormals


@pytest.mark.parametrize("excess", [5e-324, 1e-310, 2.2250738585072014e-308, 0.0, 1.0, 1e300])
@pytest.mark.parametrize("n", [1, 3, 1000])
@pytest.mark.parametrize("theta", [SCALING_FACTOR, SCALING_FACTOR_WITH_BIDS])
def test_the_epsilon_schedule_is_short_for_any_excess(excess, n, theta):
    """Issue 37: ε₀ / n underflowed to 0 for a subnormal excess and the schedule never ended. The
    number of phases depends on n and θ alone; no ε below the smallest normal number."""
    bound = 2 + math.ceil(math.log(16 * n) / math.log(theta))
    for integer in (False, True):
        schedule = epsilon_schedule(excess, n, integer, theta)
        assert len(schedule) <= bound
        assert all(eps >= np.finfo(np.float64).tiny for eps in schedule)
        assert schedule == sorted(schedule, reverse=True)


def test_the_issues_subnormal_matrix_ends_within_memory_and_time():
    """The issue's reproducer grew to 22.5 GB until the process was killed: now it ends, in a
    process limited to 2 GiB, with scipy's answer."""
    done = run_bounded("""
        import numpy as np, dlap
        cost = np.array([[0., 0, 0], [0, 0, 0], [0, 0, 5e-324]])
        for method in ("scaling", "auto", "tree", "classical", "hybrid", "dgs"):
            result = dlap.solve(cost, method=method, device="cpu")
            assert result.objective == 0.0 and result.verify().optimal, (method, result.verify())
        print("ok")
    """)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 5), m=st.integers(1, 5), maximize=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_exact_optimum_the_tests_compare_with_is_every_assignment_s_best(n, m, maximize, seed):
    """tests.helpers.exact_optimum (rational shortest paths, the reference of the float tests)
    against every assignment of small matrices of huge, tiny and forbidden entries."""
    rng = np.random.default_rng(seed)
    values = np.array([0.0, 1.0, 1e-12, -3.0, 7e5, 1e300, -1e300, 5e-324, 1.7e308, -1.7e308])
    cost = rng.choice(values, (n, m))
    cost[rng.random((n, m)) < 0.2] = -np.inf if maximize else np.inf
    wide = cost.T if n > m else cost
    totals = [exact_total(wide[np.arange(wide.shape[0]), list(p)])
              for p in itertools.permutations(range(wide.shape[1]), wide.shape[0])]
    best = max(totals) if maximize else min(totals)
    assert exact_optimum(cost, maximize) == best


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_subnormal_costs_agree_with_the_exact_optimum(method, maximize, dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    rng = np.random.default_rng(7)
    for _ in range(20):
        cost = rng.integers(0, 4, (4, 5)).astype(dtype) * tiny
        result = dlap.solve(cost, method=method, maximize=maximize, device="cpu")
        exact = exact_optimum(cost, maximize)
        if method == "dgs":  # a heuristic: between its bound and any assignment
            sign = -1 if maximize else 1
            assert sign * result.lower_bound <= sign * exact <= sign * result.objective
            continue
        assert result.objective == exact and result.verify().optimal, result.verify()


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("maximize", [False, True])
def test_float32_subnormal_costs_on_the_gpu(method, maximize):
    """CuPy float32 matrices whose costs are all subnormal (units of 2**-149): the GPU engines'
    matched costs, greedy excess and exact duals widen them exactly (CuPy's conversion to float64
    flushes them to zero, and a matrix of zeros is solved by any assignment)."""
    import cupy

    rng = np.random.default_rng(8)
    for shape in [(4, 5), (5, 4), (30, 30), (40, 60)]:
        cost = (rng.integers(0, 8, shape) * 2.0**-149).astype(np.float32)
        matrix = cupy.asarray(cost)
        result = dlap.solve(matrix, method=method, maximize=maximize, device="gpu")
        exact = exact_optimum(cost, maximize)
        if method == "dgs":
            sign = -1 if maximize else 1
            assert sign * result.lower_bound <= sign * exact <= sign * result.objective
            continue
        assert result.objective == exact and result.verify().optimal, (shape, result.objective, exact)


# ---------------------------------------------------------------- huge magnitudes


HUGE = [
    np.full((2, 2), 1e308),
    np.array([[1.5e308, 1], [1, 1.5e308]]),
    np.array([[1e-300, 1e-300], [1e307, 1.5e308]]),
    np.array([[-1.7e308, 1.7e308, 0], [1.7e308, -1.7e308, 1], [5, 1.79e308, -1.79e308]]),
    np.array([[1.7e308, np.inf, 1e308], [np.inf, 1.7e308, -1e308]]),
]


@pytest.mark.parametrize("cost", HUGE, ids=range(len(HUGE)))
@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("method", METHODS)
def test_finite_costs_near_the_largest_float_are_answered_as_scipy_does(cost, maximize, method):
    """Issue 37: every method raised OverflowError (fsum), returned an infinite dual, or said
    "gap 1"; scipy answers them. Now the matrix is solved scaled by a power of two, the duals
    come back finite where the problem has finite duals, and verify() neither raises nor lies."""
    if maximize and np.isinf(cost).any():
        cost = np.where(np.isinf(cost), -np.inf, cost)
    try:
        rows, cols = scipy_lsa(cost, maximize=maximize)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)):
            dlap.solve(cost, maximize=maximize, method=method, device="cpu")
        return
    result = dlap.solve(cost, maximize=maximize, method=method, device="cpu")
    assert result.objective == exact_optimum(cost, maximize) == exact_total(cost[rows, cols])
    certificate = result.verify()
    square = cost.shape[0] == cost.shape[1]
    if square:  # (a rectangular problem's duals cannot be shifted; where one passes 1.8e308 ...)
        assert np.isfinite(result.row_duals).all() and np.isfinite(result.col_duals).all()
    if method != "dgs" and (square or certificate.optimal):
        assert certificate.optimal, certificate
    elif method != "dgs":  # ... the certificate says so
        assert any("not all finite" in p for p in certificate.problems), certificate
    wrong_objective = result.objective * 0.5 if math.isfinite(result.objective) and result.objective else 1.0
    assert not dataclasses.replace(result, objective=wrong_objective).verify().optimal


def test_an_exact_sum_beyond_the_largest_float_is_inf_not_an_error():
    from dlap.certificate import exact_sum

    assert exact_sum(np.array([1e308, 1e308])) == math.inf
    assert exact_sum(np.array([1e308, 1e308, -1e308, -1e308, 1e-300])) == 1e-300
    assert exact_sum(np.array([-1e308, -1e308])) == -math.inf
    assert exact_sum(np.array([1.7e308, 1.7e308, -1.7e308])) == 1.7e308


# ---------------------------------------------------------------- the certificate under attack


def _offset(result, t):
    return dataclasses.replace(result, row_duals=result.row_duals + t, col_duals=result.col_duals - t)


@pytest.mark.parametrize("t", [1e3, 1e9, 1e12, 1e15, 1e100, -1e12])
def test_a_dual_offset_does_not_certify_a_wrong_assignment(t):
    """Issue 37: (u + t, v - t) is an equally valid dual solution, and with t = 1e9 it made the
    certificate accept the wrong assignment of [[0, 1], [1, 0]] ("gap 2, relative 5e-10"); with
    t = 1e12 the maximum of a 50 x 50 matrix was certified as its minimum."""
    c = np.array([[0.0, 1.0], [1.0, 0.0]])
    r = dlap.solve(c, device="cpu")
    bad = dataclasses.replace(_offset(r, t), col_ind=np.array([1, 0]), objective=2.0)
    certificate = bad.verify(c)
    assert not certificate.optimal and certificate.gap == 2 and "dual bound" in str(certificate)

    c = np.random.default_rng(0).random((50, 50))
    low, high = dlap.solve(c, device="cpu"), dlap.solve(c, maximize=True, device="cpu")
    bad = dataclasses.replace(_offset(low, t), col_ind=high.col_ind, objective=high.objective)
    assert not bad.verify(c).optimal
    assert bad.verify(c).gap >= high.objective - low.objective - 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_the_proof_is_invariant_under_a_dual_offset(seed):
    """Where (u + t, v - t) rounds nothing (dyadic duals, t a power of two), the certificate's
    verdict, bound and gap are the same for every t."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 1000, (12, 12)) / 64.0
    r = dlap.solve(c, device="cpu")
    first = r.verify(c)
    assert first.optimal
    for t in (2.0**10, 2.0**30, -(2.0**20)):
        shifted = _offset(r, t).verify(c)
        assert shifted.optimal and (shifted.gap, shifted.lower_bound) == (first.gap, first.lower_bound)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e150])
def test_wrong_answers_on_extreme_magnitudes_are_caught(scale):
    """Issue 37: the same attacks on matrices of entries near 1e300."""
    c = np.random.default_rng(1).random((30, 30)) * scale
    low, high = dlap.solve(c, device="cpu"), dlap.solve(c, maximize=True, device="cpu")
    assert low.verify(c).optimal and high.verify(c).optimal
    for t in (0.0, 1e3 * scale):
        bad = dataclasses.replace(_offset(low, t), col_ind=high.col_ind, objective=high.objective)
        assert not bad.verify(c).optimal


def test_a_stored_objective_wrong_by_a_millionth_is_caught_on_wide_magnitudes():
    """Issue 37: the objective was compared within rtol of the duals' magnitudes, so one wrong by
    1e-6 relative passed on matrices of mixed magnitudes. It must be the assignment's cost summed
    in some order: within the rounding of a sum of the assigned entries."""
    rng = np.random.default_rng(2)
    c = 10.0 ** rng.uniform(-8, 8, (40, 40))
    r = dlap.solve(c, device="cpu")
    assert r.verify(c).optimal
    for relative in (1e-6, 1e-9, 1e-12):
        off = dataclasses.replace(r, objective=r.objective * (1 + relative))
        assert not off.verify(c).optimal, relative
    pairwise = dataclasses.replace(r, objective=float(c[r.row_ind, r.col_ind].sum()))  # numpy's own order
    assert pairwise.verify(c).optimal


@pytest.mark.parametrize("objective", [None, "12", [1.0], True, complex(1, 0), np.array([1.0, 2.0])])
def test_a_malformed_objective_is_refused_not_raised(objective):
    """Issue 37: verify() raised TypeError on a malformed objective."""
    c = np.array([[1.0, 2.0], [3.0, 0.0]])
    r = dlap.solve(c)
    certificate = dataclasses.replace(r, objective=objective).verify(c)
    assert not certificate.optimal and any("objective" in p for p in certificate.problems)
    ints = np.array([[1, 2], [3, 0]])
    certificate = dataclasses.replace(dlap.solve(ints), objective=objective).verify(ints)
    assert not certificate.optimal and any("objective" in p for p in certificate.problems)


# ---------------------------------------------------------------- the fuzzer


MAGNITUDES = [0.0, 5e-324, 1e-310, 2.2e-308, 1e-300, 1e-12, 1.0, 1.5, 8192.0, 32769.0, 1e12, 1e300, 1e307,
              1.7e308, np.finfo(np.float64).max]


@st.composite
def extreme_matrices(draw):
    """Small float64, float32 or integer matrices of extreme and tied magnitudes, +inf forbidden
    pairs, either orientation."""
    n, m = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["float64", "float32", "int64", "uint64", "int32"]))
    if kind.startswith("float"):
        values = draw(st.lists(st.sampled_from(MAGNITUDES), min_size=n * m, max_size=n * m))
        signs = draw(st.lists(st.sampled_from([1.0, -1.0]), min_size=n * m, max_size=n * m))
        cost = (np.array(values) * np.array(signs)).reshape(n, m)
        if draw(st.booleans()):
            cost[draw(st.integers(0, n - 1)), draw(st.integers(0, m - 1))] = np.inf
        with np.errstate(over="ignore"):
            return cost.astype(kind)
    info = np.iinfo(kind)
    low, high = max(int(info.min), -(2**62)), min(int(info.max), 2**62)
    base = draw(st.integers(low, high - 2**51 if high - low > 2**51 else low))
    spread = min(high - base, draw(st.sampled_from([3, 2**20, 2**51])))
    values = draw(st.lists(st.integers(0, spread), min_size=n * m, max_size=n * m))
    return (base + np.array(values, dtype=object).reshape(n, m)).astype(kind)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cost=extreme_matrices(), maximize=st.booleans(), method=st.sampled_from(METHODS))
def test_fuzz_extreme_matrices_against_brute_force(cost, maximize, method):
    """Every method on extreme matrices: scipy's error for invalid entries, else the exact
    optimum (enumerated; scipy itself calls [[1e300, -1.8e308], [inf, 0]] infeasible), and a
    certificate that proves it or says why floats cannot."""
    if maximize:
        cost = np.where(np.isposinf(cost), -np.inf, cost) if cost.dtype.kind == "f" else cost
    if cost.dtype.kind == "f":
        check_float_answer(cost, maximize, method)
        return
    result = dlap.solve(cost, maximize=maximize, method=method, device="cpu")
    transposed = cost.T if cost.shape[0] > cost.shape[1] else cost
    totals = [sum(int(transposed[i, j]) for i, j in enumerate(p))
              for p in itertools.permutations(range(transposed.shape[1]), transposed.shape[0])]
    exact, sign = (max(totals) if maximize else min(totals)), (-1 if maximize else 1)
    if method == "dgs":
        assert sign * result.lower_bound <= sign * exact <= sign * result.objective
        return
    assert result.objective == exact and result.verify().optimal



def check_float_answer(cost, maximize, method):
    """A float matrix: scipy's error for NaN or -inf, "infeasible" where no assignment avoids the
    forbidden pairs, else the exact optimum (an exact method) or an assignment between DGS's
    bound and the optimum, and its certificate."""
    invalid = np.isnan(cost).any() or (np.isposinf(cost) if maximize else np.isneginf(cost)).any()
    if invalid:
        with pytest.raises(ValueError, match="^matrix contains invalid numeric entries$"):
            dlap.solve(cost, maximize=maximize, method=method, device="cpu")
        return
    wide = cost.T if cost.shape[0] > cost.shape[1] else cost
    if not any(np.isfinite(wide[np.arange(wide.shape[0]), list(p)]).all()
               for p in itertools.permutations(range(wide.shape[1]), wide.shape[0])):
        with pytest.raises(ValueError, match="^cost matrix is infeasible$"):
            dlap.solve(cost, maximize=maximize, method=method, device="cpu")
        return
    result = dlap.solve(cost, maximize=maximize, method=method, device="cpu")
    sign, exact = (-1 if maximize else 1), exact_optimum(cost, maximize)
    if method == "dgs":
        assert sign * result.lower_bound <= sign * exact <= sign * result.objective
        assert result.verify().primal == result.objective
        return
    assert_valid(result, cost, maximize)
    assert within_resolution(result.objective, exact, cost), (result, exact)


def test_extreme_matrices_solved_from_many_threads_at_once():
    """The fuzzer's matrices from four threads at once: each answer is the one a lone call gives
    (the solvers share no state between calls; Numba's layer is serialised where it must be)."""
    import concurrent.futures

    rng = np.random.default_rng(11)
    matrices = []
    for _ in range(48):
        n, m = rng.integers(1, 7, 2)
        values = rng.choice(np.array(MAGNITUDES[:-1]), (n, m)) * rng.choice([-1.0, 1.0], (n, m))
        matrices.append(values if rng.random() < 0.7 else rng.integers(-(2**40), 2**40, (n, m)))
    alone = [dlap.solve(c, method=METHODS[k % 5], device="cpu").objective for k, c in enumerate(matrices)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda kc: dlap.solve(kc[1], method=METHODS[kc[0] % 5], device="cpu").objective,
                                 enumerate(matrices)))
    assert together == alone


@pytest.mark.gpu
@pytest.mark.parametrize("cost", HUGE, ids=range(len(HUGE)))
@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("where", ["host", "device"])
@pytest.mark.parametrize("method", ["auto", "classical", "tree", "scaling", "dgs"])
def test_finite_costs_near_the_largest_float_on_the_gpu(cost, maximize, where, method):
    """The same on a GPU: a host matrix the upload checks and scales (a deferred problem), or a
    CuPy matrix scaled by prepare, verified there."""
    import cupy

    if maximize and np.isinf(cost).any():
        cost = np.where(np.isinf(cost), -np.inf, cost)
    try:
        scipy_lsa(cost, maximize=maximize)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)):
            dlap.solve(cost, maximize=maximize, method=method, device="gpu")
        return
    given = cost if where == "host" else cupy.asarray(cost)
    result = dlap.solve(given, maximize=maximize, method=method, device="gpu")
    assert result.objective == exact_optimum(cost, maximize)
    certificate = result.verify()
    if method != "dgs" and cost.shape[0] == cost.shape[1]:
        assert certificate.optimal, certificate


@pytest.mark.gpu
@pytest.mark.parametrize("t", [1e9, 1e12, 1e100])
def test_a_dual_offset_does_not_certify_a_wrong_assignment_on_the_gpu(t):
    import cupy

    c = cupy.asarray(np.random.default_rng(0).random((50, 50)))
    low, high = dlap.solve(c, device="gpu"), dlap.solve(c, maximize=True, device="gpu")
    assert low.verify().optimal and high.verify().optimal
    bad = dataclasses.replace(_offset(low, t), col_ind=high.col_ind, objective=high.objective)
    assert not bad.verify(c).optimal


def test_a_heuristic_bound_past_float64s_largest_value_is_inf_and_warns_nothing():
    """DGS's bound is rounded away from the optimum: past float64's largest value that is inf
    (the fuzz above found NumPy's overflow warning there)."""
    largest = np.finfo(np.float64).max
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = dlap.solve(np.array([[0.0, largest]]), maximize=True, method="dgs", device="cpu")
    assert result.objective == largest and result.lower_bound == math.inf
