"""scipy's contract: return types, shapes, errors and messages, and the caller's array untouched."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment as scipy_lsa

import dlap

from .configs import CONFIGS
from .helpers import assert_same_optimum

BAD_INPUTS = [
    (np.zeros(3), ValueError, r"expected a matrix \(2-D array\), got a 1 array"),
    (np.zeros((2, 2, 2)), ValueError, r"expected a matrix \(2-D array\), got a 3 array"),
    (np.float64(1.0), ValueError, r"expected a matrix \(2-D array\), got a 0 array"),
    ([[1.0, np.nan]], ValueError, "matrix contains invalid numeric entries"),
    ([[-np.inf, 1.0]], ValueError, "matrix contains invalid numeric entries"),
    ([[np.inf]], ValueError, "cost matrix is infeasible"),
    ([[np.inf, 1.0], [np.inf, 2.0]], ValueError, "cost matrix is infeasible"),
    ([[1.0, np.inf], [2.0, np.inf]], ValueError, "cost matrix is infeasible"),
    (np.array([[1, 2]], dtype=object), TypeError, "Cannot cast array data"),
    (np.array([[1 + 1j]]), TypeError, "Cannot cast array data"),
    ([["a"]], ValueError, "could not convert string to float"),
    # an array's dtype must cast safely; a list's entries are converted one by one (scipy 1.17)
    (np.identity(3).astype(str), TypeError, r"Cannot cast array data from dtype\('<U32'\)"),
    (np.ones((2, 2), dtype=object), TypeError, r"Cannot cast array data from dtype\('O'\)"),
    ([[1 + 1j]], TypeError, "float\\(\\) argument must be"),
    ([[None, 1.0]], ValueError, "matrix contains invalid numeric entries"),
]


def test_a_list_of_numeric_strings_is_read_as_numbers_like_scipy():
    cost = [["1.5", "2"], ["3", "0.25"]]
    assert [c.tolist() for c in dlap.linear_sum_assignment(cost)] == [c.tolist() for c in scipy_lsa(cost)]


@pytest.mark.parametrize("cost, error, message", BAD_INPUTS)
@pytest.mark.parametrize("options", CONFIGS)
def test_bad_input_raises_like_scipy(cost, error, message, options):
    with pytest.raises(error, match=message):
        scipy_lsa(cost)
    with pytest.raises(error, match=message):
        dlap.linear_sum_assignment(cost, **options)


def test_infinity_rules_follow_the_sense():
    # maximising: -inf is a forbidden pair, +inf is invalid (scipy's rule)
    rows, cols = dlap.linear_sum_assignment([[1.0, -np.inf]], maximize=True)
    assert cols.tolist() == [0]
    for solver in (scipy_lsa, dlap.linear_sum_assignment):
        with pytest.raises(ValueError, match="matrix contains invalid numeric entries"):
            solver([[np.inf, 1.0]], maximize=True)
        with pytest.raises(ValueError, match="cost matrix is infeasible"):
            solver([[-np.inf]], maximize=True)


def test_infeasible_error_is_a_value_error():
    with pytest.raises(dlap.InfeasibleError):
        dlap.solve([[np.inf, 1.0], [np.inf, 2.0]])


@pytest.mark.parametrize("shape", [(0, 0), (2, 0), (0, 3)])
def test_empty_matrices(shape):
    rows, cols = dlap.linear_sum_assignment(np.zeros(shape))
    assert rows.dtype == cols.dtype == np.int64
    assert rows.shape == cols.shape == (0,)
    assert dlap.solve(np.zeros(shape)).objective == 0


@pytest.mark.parametrize(
    "cost",
    [
        [[4, 1, 3], [2, 0, 5], [3, 2, 2]],  # a list of ints
        [[True, False], [False, True]],  # bool
        np.array([[1, 2], [3, 4]], dtype=np.uint8),
        np.array([[1, 2], [3, 4]], dtype=np.uint64),
        np.array([[1, 2], [3, 4]], dtype=np.float16),
        np.array([[2**31 - 1, -(2**31)], [0, 5]], dtype=np.int32),
    ],
    ids=["list", "bool", "uint8", "uint64", "float16", "int32-extremes"],
)
@pytest.mark.parametrize("maximize", [False, True])
def test_input_types_like_scipy(cost, maximize):
    rows, cols = dlap.linear_sum_assignment(cost, maximize=maximize)
    ref_rows, ref_cols = scipy_lsa(cost, maximize=maximize)
    c = np.asarray(cost)
    assert rows.dtype == np.int64 and cols.dtype == np.int64
    assert c[rows, cols].sum() == c[ref_rows, ref_cols].sum()


@pytest.mark.parametrize("shape", [(3, 7), (7, 3), (1, 5), (5, 1)])
@pytest.mark.parametrize("options", CONFIGS)
def test_rectangular_both_orientations(shape, options):
    cost = np.random.default_rng(3).integers(-20, 20, size=shape)
    for maximize in (False, True):
        for c in (cost, cost.T):
            assert_same_optimum(c, maximize, **options)


@pytest.mark.parametrize("options", CONFIGS)
def test_callers_array_is_never_modified(options):
    for cost in (
        np.random.default_rng(0).random((6, 4)),
        np.random.default_rng(1).integers(0, 9, (5, 5)).astype(np.int32),
    ):
        before = cost.copy()
        flags = cost.flags.writeable
        dlap.solve(cost, maximize=True, **options)
        dlap.solve(cost, **options)
        np.testing.assert_array_equal(cost, before)
        assert cost.flags.writeable == flags


def test_only_a_gpu_bound_host_float_matrix_is_deferred():
    """prepare(deferred=True) hands the GPU the caller's float matrix as it is (the GPU checks and
    negates its own copy); anything that needs a new matrix on the host is prepared there."""
    from dlap.problem import prepare

    cost = np.random.default_rng(3).random((4, 6))
    problem = prepare(cost, maximize=True, deferred=True)
    assert problem.deferred and problem.matrix is cost and problem.maximize
    assert not prepare(cost, maximize=True).deferred
    for other in (cost.T, cost[:, ::2], cost.astype(np.float16), (cost * 9).astype(np.int64)):
        assert not prepare(other, maximize=True, deferred=True).deferred


def test_read_only_and_non_contiguous_input():
    base = np.random.default_rng(2).random((8, 12))
    view = base[:, ::2]
    view.flags.writeable = False
    assert_same_optimum(view)


def test_a_read_only_matrix_compiles_no_kernel_again():
    """Numba compiles a kernel apart for a read-only array: a caller's memory-mapped matrix paid a
    second compilation of every kernel it reached (seconds each on a first run). The CPU backends
    read every cost matrix through a read-only view, so after the same solves on a writable
    matrix (minimised, and maximised: a new matrix), a read-only one adds no compiled version."""
    from dlap.backends.cpu import dgs as cpu_dgs
    from dlap.backends.cpu import hungarian as cpu_kernels
    from dlap.backends.cpu import scaling as cpu_scaling

    def versions():
        return {(module.__name__, name): len(kernel.signatures) for module in (cpu_kernels, cpu_scaling, cpu_dgs)
                for name, kernel in vars(module).items() if hasattr(kernel, "signatures")}

    solves = [dict(method=m) for m in ("classical", "tree", "hybrid", "scaling")]
    solves += [dict(method="dgs", switching=s) for s in ("parallel", "sequential")]
    cost = np.random.default_rng(4).integers(0, 60, (40, 40)).astype(np.float64)
    frozen = cost.copy()
    frozen.flags.writeable = False
    compiled = None
    for matrix in (cost, frozen):
        for options in solves:
            for maximize in (False, True):
                result = dlap.solve(matrix, maximize=maximize, device="cpu", **options)
                assert options["method"] == "dgs" or result.verify(matrix).optimal
        assert compiled in (None, versions())
        compiled = versions()


def test_solve_returns_an_assignment_that_unpacks_like_scipy():
    cost = [[4, 1, 3], [2, 0, 5], [3, 2, 2]]
    result = dlap.solve(cost)
    rows, cols = result
    assert rows.tolist() == [0, 1, 2] and cols.tolist() == [1, 0, 2]
    assert result.objective == 5 and isinstance(result.objective, int)
    # integer costs have integer duals, exactly (float costs float64 ones); their sum is the objective
    assert result.row_duals.dtype == result.col_duals.dtype == np.int64
    assert result.row_duals.sum() + result.col_duals.sum() == 5
    assert dlap.solve(np.asarray(cost, dtype=float)).col_duals.dtype == np.float64
    # a list is converted by dlap, so the result cannot reference it: verify() asks for it
    with pytest.raises(ValueError, match=r"pass it: result.verify\(cost\)"):
        result.verify()
    assert result.verify(cost).optimal


@pytest.mark.parametrize("name, value", [("method", "munkres"), ("device", "tpu"), ("init", "x")])
def test_unknown_options_are_refused(name, value):
    with pytest.raises(ValueError, match=f"{name} must be one of"):
        dlap.solve([[1.0]], **{name: value})
    with pytest.raises(ValueError, match="roots must be"):
        dlap.solve([[1.0, 2.0], [3.0, 4.0]], method="tree", roots="some")


def test_gpu_device_without_a_gpu_is_refused_clearly():
    from dlap.device import gpu_available

    if gpu_available():
        pytest.skip("a GPU is visible here")
    with pytest.raises(RuntimeError, match="needs CuPy and a CUDA GPU"):
        dlap.solve([[1.0]], device="gpu")


def test_auto_device_is_the_cpu_without_a_gpu():
    from dlap.device import gpu_available

    result = dlap.solve(np.ones((600, 600)))
    assert result.stats.device == ("gpu" if gpu_available() else "cpu")


def test_scipys_keyword_names():
    """Issue 39: dlap.linear_sum_assignment(cost_matrix=...) raised TypeError."""
    cost = np.array([[4.0, 1.0], [2.0, 3.0]])
    rows, cols = dlap.linear_sum_assignment(cost_matrix=cost, maximize=True)
    expected = scipy_lsa(cost_matrix=cost, maximize=True)
    assert [rows.tolist(), cols.tolist()] == [x.tolist() for x in expected]
