"""Trust: a certificate that cannot be fooled, integers that never overflow, inputs refused as
scipy refuses them, results that do not keep the caller's matrix alive.

The certificate is attacked by mutation (swap, duplicate, drop an index, shift a dual, a wrong
objective) on integer, float, rectangular and maximised problems; integer matrices far beyond
2**53 are solved and certified exactly against brute force in Python ints.
"""

import copy
import dataclasses
import gc
import itertools
import pickle
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment as scipy_lsa

import dlap
from dlap.device import array_module
from dlap.problem import MAX_INTEGER_MAGNITUDE, MAX_INTEGER_SPAN

from .configs import CONFIGS, GPU_CONFIGS

PROBLEMS = {
    "int": lambda rng: rng.integers(0, 100, (7, 7)),
    "float": lambda rng: rng.random((7, 7)) * 100,
    "wide": lambda rng: rng.random((5, 9)),
    "tall": lambda rng: rng.integers(-50, 50, (9, 5)),
    "near-2**62": lambda rng: -(2**62) + rng.integers(0, 1000, (6, 6)),
}


def _mutations(result):
    """(name, corrupted copy) pairs: each must fail verify() (NumPy or CuPy results)."""
    xp = array_module(result.col_ind)
    k = len(result.col_ind)

    def changed(**fields):
        return dataclasses.replace(copy.deepcopy(result), **fields)

    swapped = result.col_ind.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    repeated = result.col_ind.copy()
    repeated[1] = repeated[0]
    rows_repeated = result.row_ind.copy()
    rows_repeated[1] = rows_repeated[0]
    one_shifted = result.row_duals.copy()
    one_shifted[k // 2] += 10 if not result.maximize else -10
    wrong_objective = result.objective + (1 if isinstance(result.objective, int) else 1e-3)
    return [
        ("swap two columns", changed(col_ind=swapped)),
        ("duplicate a column", changed(col_ind=repeated)),
        ("duplicate a row", changed(row_ind=rows_repeated)),
        ("drop an index", changed(row_ind=result.row_ind[:-1], col_ind=result.col_ind[:-1])),
        ("column out of range", changed(col_ind=xp.where(result.col_ind == result.col_ind.max(), 10**6, result.col_ind))),
        ("shift a dual", changed(row_duals=one_shifted)),
        ("shift every dual", changed(row_duals=result.row_duals + 10, col_duals=result.col_duals + 10)),
        ("a wrong objective", changed(objective=wrong_objective)),
        ("float indices", changed(col_ind=result.col_ind.astype(float))),
    ]


@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
@pytest.mark.parametrize("family", PROBLEMS)
def test_every_mutation_of_an_answer_is_caught(family, maximize):
    cost = PROBLEMS[family](np.random.default_rng(1))
    result = dlap.solve(cost, maximize=maximize, device="cpu")
    assert result.verify().optimal, result.verify()
    for name, corrupted in _mutations(result):
        certificate = corrupted.verify()
        assert not certificate.optimal, name
        assert certificate.problems, name
        assert "NOT proven optimal" in str(certificate)


@pytest.mark.gpu
@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
@pytest.mark.parametrize("family", PROBLEMS)
def test_every_mutation_of_a_gpu_answer_is_caught(family, maximize):
    """The same on a CuPy matrix: solved and certified on its GPU."""
    import cupy

    cost = cupy.asarray(PROBLEMS[family](np.random.default_rng(1)))
    result = dlap.solve(cost, maximize=maximize, device="gpu")
    assert isinstance(result.col_ind, cupy.ndarray) and result.verify().optimal, result.verify()
    for name, corrupted in _mutations(result):
        assert not corrupted.verify().optimal, name


def test_the_issues_reproducer():
    """Issue 14: a swap with the stored objective kept was certified (true cost 171 against 92),
    and so was a duplicate column."""
    c = np.random.default_rng(1).integers(0, 100, (6, 6))
    r = dlap.solve(c, device="cpu")
    b = copy.deepcopy(r)
    b.col_ind = r.col_ind.copy()
    b.col_ind[[0, 1]] = b.col_ind[[1, 0]]
    certificate = b.verify()
    assert not certificate.optimal and certificate.primal == int(c[b.row_ind, b.col_ind].sum()) == 171
    assert any("stored objective 92" in p for p in certificate.problems)
    b.col_ind[1] = b.col_ind[0]
    assert not b.verify().optimal


def test_a_consistent_wrong_answer_is_caught_by_the_bound():
    """A worse permutation with its true objective and its own (infeasible) duals: only the bound
    and the duals' feasibility can catch it."""
    cost = np.random.default_rng(4).random((30, 30))
    result = dlap.solve(cost)
    worse = np.roll(result.col_ind, 1)
    u = cost[result.row_ind, worse] - result.col_duals[worse]  # complementary slackness made to hold
    wrong = dataclasses.replace(result, col_ind=worse, row_duals=u,
                                objective=float(cost[result.row_ind, worse].sum()))
    certificate = wrong.verify()
    assert not certificate.optimal and certificate.max_slackness_violation < 1e-12
    assert certificate.max_dual_violation > 0 and certificate.gap > 0.1


def test_a_forbidden_pair_is_not_certified():
    cost = np.array([[1.0, np.inf], [np.inf, 1.0]])
    result = dlap.solve(cost)
    wrong = dataclasses.replace(result, col_ind=np.array([1, 0]), objective=np.inf)
    assert not wrong.verify().optimal


# ---------------------------------------------------------------- integers beyond 2**53


def brute_force(cost, maximize=False) -> int:
    """The optimum in Python ints, over every assignment (small square or rectangular matrices)."""
    cost = np.asarray(cost)
    if cost.shape[0] > cost.shape[1]:
        cost = cost.T
    n, m = cost.shape
    values = [int(sum(int(cost[i, j]) for i, j in enumerate(cols))) for cols in itertools.permutations(range(m), n)]
    return max(values) if maximize else min(values)


@st.composite
def far_integers(draw):
    """Integer matrices far from 0: a base anywhere in dlap's range, a spread of up to 2**51."""
    n, m = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    spread = draw(st.sampled_from([10, 2**20, 2**40, MAX_INTEGER_SPAN]))
    base = draw(st.integers(-MAX_INTEGER_MAGNITUDE, MAX_INTEGER_MAGNITUDE - spread))
    entries = draw(st.lists(st.integers(0, spread), min_size=n * m, max_size=n * m))
    dtype = np.uint64 if base >= 0 and draw(st.booleans()) else np.int64
    return (base + np.array(entries, dtype=object).reshape(n, m)).astype(dtype)


@pytest.mark.parametrize("options", CONFIGS)
@settings(max_examples=40, deadline=None)
@given(cost=far_integers(), maximize=st.booleans())
def test_integers_beyond_2_53_are_solved_and_certified_exactly(options, cost, maximize):
    result = dlap.solve(cost, maximize=maximize, device="cpu", **options)
    assert result.objective == brute_force(cost, maximize)
    assert type(result.objective) is int
    certificate = result.verify()
    assert certificate.optimal and certificate.gap == 0, certificate
    assert result.row_duals.dtype == result.col_duals.dtype == np.int64


@pytest.mark.gpu
@pytest.mark.parametrize("options", GPU_CONFIGS)
@settings(max_examples=25, deadline=None)
@given(cost=far_integers(), maximize=st.booleans())
def test_integers_beyond_2_53_on_the_gpu(options, cost, maximize):
    result = dlap.solve(cost, maximize=maximize, **options)
    assert result.objective == brute_force(cost, maximize)
    certificate = result.verify()
    assert certificate.optimal and certificate.gap == 0, certificate


def test_the_issues_integer_reproducers():
    rng = np.random.default_rng(0)
    for seed in range(20):
        cost = 2**52 - np.random.default_rng(seed).integers(0, 10, (3, 3))
        for maximize in (False, True):
            result = dlap.solve(cost, maximize=maximize)
            assert result.objective == brute_force(cost, maximize) and result.verify().optimal
    cost = np.array([[-(2**62) + 8, -(2**62)]])
    result = dlap.solve(cost)
    assert result.col_ind.tolist() == [1] and result.objective == -(2**62) and result.verify().optimal
    cost = np.array([[-(2**62) + 1, -(2**62) + 3], [-(2**62) + 3, -(2**62) + 1]])  # a row dual of -(2**62 + 1)
    for options in (config.values[0] for config in CONFIGS):
        result = dlap.solve(cost, maximize=True, device="cpu", **options)
        assert result.objective == -(2**63) + 6 and result.verify().optimal, options
    cost = 2**52 + rng.integers(0, 1000, (50, 50))  # a sum beyond int64 if added in int64 ... 50 * 2**52
    result = dlap.solve(cost)
    assert result.objective == brute_force_big(cost) and result.verify().optimal


def brute_force_big(cost) -> int:
    """The optimum of a larger integer matrix: scipy on the entries less their minimum (exact in
    float64 there), plus the minimum back per row."""
    low = int(cost.min())
    rows, cols = scipy_lsa((cost - low).astype(np.float64))
    return int(sum(int(x) for x in cost[rows, cols]))


@pytest.mark.parametrize("cost, maximize", [
    (np.array([[np.iinfo(np.int64).min, 0], [0, 5]]), True),
    (np.array([[np.iinfo(np.int64).min, 0], [0, 5]]), False),
    (np.array([[0, 2**51 + 1]]), False),
    (np.array([[2**62 + 1, 2**62 + 2]]), False),
    (np.array([[2**64 - 1, 3]], dtype=np.uint64), True),
])
def test_integers_outside_the_exact_range_are_refused_by_name(cost, maximize):
    """The issue's int64 minimum with maximize=True returned a wrong assignment (the negation
    overflowed); a matrix dlap cannot solve exactly is refused, naming its entries and the way out."""
    with pytest.raises(ValueError, match=rf"integer costs from {int(cost.min())} to {int(cost.max())} .*float64"):
        dlap.solve(cost, maximize=maximize)
    floats = cost.astype(np.float64)
    assert dlap.solve(floats, maximize=maximize).verify().optimal  # the way out works


def test_int32_extremes_maximised_do_not_overflow():
    cost = np.array([[np.iinfo(np.int32).min, 0], [0, np.iinfo(np.int32).max]], dtype=np.int32)
    for maximize in (False, True):
        result = dlap.solve(cost, maximize=maximize)
        assert result.objective == brute_force(cost, maximize) and result.verify().optimal


# ---------------------------------------------------------------- inputs refused as scipy refuses them


@pytest.mark.parametrize("cost", [
    np.array([[1, 2], [3, 4]], dtype=np.longdouble),
    np.array([[1, 2], [3, 4]], dtype=np.clongdouble),
    np.array([["1", "2"], ["3", "4"]]),
    np.array([[b"1", b"2"], [b"3", b"4"]]),
    np.array([["1", "2"], ["3", "4"]], dtype=object),
    [["1.5", "2"], ["3", "4"]],
    [[b"1", 2.0], [3, 4]],
    [[np.longdouble(1), 2], [3, 4]],
], ids=["longdouble", "clongdouble", "str", "bytes", "object", "str-list", "bytes-list", "longdouble-list"])
def test_inputs_are_accepted_or_refused_as_scipy_does(cost):
    try:
        expected = scipy_lsa(cost)
    except Exception as e:
        with pytest.raises(type(e)):
            dlap.linear_sum_assignment(cost)
    else:
        got = dlap.linear_sum_assignment(cost)
        assert [g.tolist() for g in got] == [x.tolist() for x in expected]


# ---------------------------------------------------------------- memory


def test_a_result_does_not_keep_the_matrix_alive():
    """Issue 14: a result kept the caller's matrix alive (1 GB stayed resident). It references it
    weakly: verify() works while the caller holds the matrix and asks for it after."""
    cost = np.random.default_rng(3).random((300, 300))
    alive = weakref.ref(cost)
    result = dlap.solve(cost)
    assert result.verify().optimal
    copied = pickle.loads(pickle.dumps(result))  # a pickle holds no matrix, and says so
    with pytest.raises(ValueError, match="pass it"):
        copied.verify()
    kept = cost.copy()
    del cost
    gc.collect()
    assert alive() is None
    with pytest.raises(ValueError, match=r"matrix is gone.*result\.verify\(cost\)"):
        result.verify()
    assert result.verify(kept).optimal and copied.verify(kept).optimal


def test_a_zero_slack_graph_that_loses_edges_ends_in_an_error_not_a_hang():
    """The Dask engine's GPU ranks once all-gathered the CSR's column indices in 64 bits, which
    the GPU's forward pass reads as 32: the classical variant then made dual updates forever.
    A backend whose compression loses edges now ends the solve with an internal error once more
    dual updates than columns found no path (each one covers a new column)."""
    import dlap.generate
    from dlap.backends.cpu import CPUBackend
    from dlap.hungarian.classical import solve_classical
    from dlap.problem import prepare
    from dlap.result import Stats

    class LosesEdges(CPUBackend):
        def compress(self, state):
            super().compress(state)
            state.row_ptr[:] = 0  # every row's edges gone
            return 0

        def recompress(self, state, theta):  # and after each dual update
            return self.compress(state)

    cost = dlap.generate.uniform(40, 10.0, seed=3)
    backend = LosesEdges()
    with pytest.raises(RuntimeError, match="internal error: 41 dual updates"):
        solve_classical(backend, backend.allocate(prepare(cost)), Stats())
    state = CPUBackend().allocate(prepare(cost))  # the real one solves it
    solve_classical(CPUBackend(), state, Stats())
    assert cost[np.arange(40), state.row_match].sum() == dlap.solve(cost).objective
