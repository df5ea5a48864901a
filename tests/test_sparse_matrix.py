"""dlap.solve(method="sparse"): the sparse-core engine on a given matrix, against scipy on the
property tests' float matrices (ties, 1e-12 to 1e12, the 9th digit, float32, +inf forbidden
pairs and infeasible matrices, both orientations, maximised), and on larger structured ones where
the first core misses the optimum and pricing finds the rest."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import dlap
from dlap import generate

from .helpers import assert_same_optimum
from .strategies import SETTINGS, check_strategy

FLOAT_STRATEGIES = ["wide-floats", "float32", "ninth-digit", "forbidden"]
INTEGER_STRATEGIES = ["ties", "huge-ints", "int32"]


@pytest.mark.parametrize("strategy", FLOAT_STRATEGIES)
def test_agrees_with_scipy(strategy):
    check_strategy(strategy, {"method": "sparse"}, SETTINGS)


@pytest.mark.parametrize("candidates", [1, 2])
@pytest.mark.parametrize("strategy", FLOAT_STRATEGIES)
def test_few_candidates(strategy, candidates, monkeypatch):
    """One or two candidates a row and column: the first cores miss most of the optimum, so dead
    ends, pricing rounds and their warm starts do the work."""
    import dlap.points.core

    monkeypatch.setattr(dlap.points.core, "DEFAULT_CANDIDATES", candidates)
    check_strategy(strategy, {"method": "sparse"}, SETTINGS)


@pytest.mark.parametrize("strategy", FLOAT_STRATEGIES + ["ties"])
def test_the_auction_on_a_thread_team(strategy, monkeypatch):
    """Every solve on a team of threads, whose auction bids in parallel from the first row on
    (:func:`dlap.backends.cpu.points.bid_in_parallel`)."""
    import numba

    from dlap import threads
    from dlap.backends.cpu import points

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here")
    monkeypatch.setattr(threads, "_limit", 2)
    monkeypatch.setattr(threads, "SERIAL_MAX_ENTRIES", 0)
    monkeypatch.setattr(points, "TEAM_AUCTION_ROWS", 1)
    check_strategy(strategy, {"method": "sparse"}, SETTINGS)


@pytest.mark.parametrize("strategy", FLOAT_STRATEGIES)
def test_the_block_queries_on_the_host(strategy, monkeypatch):
    """The queries a GPU runs (NumPy-compatible blocks, what CuPy runs) on NumPy matrices."""
    import dlap.points.matrix

    monkeypatch.setattr(dlap.points.matrix.MatrixSearch, "_host", None)
    check_strategy(strategy, {"method": "sparse"}, SETTINGS)


@pytest.mark.parametrize("cost", [
    np.array([[0.0, 1e-12], [1e-12, 107.0]]),
    np.array([[4.0] + [0.0] * 8] + [[0.0] * 9] * 2 + [[-2.220446e-16] + [0.0] * 8] + [[0.0] * 9] * 5, dtype=np.float32),
], ids=["1e-12 beside 107", "-2e-16 beside 4"])
def test_answers_the_duals_cannot_prove_go_to_the_tree_variant(cost, monkeypatch):
    """Found by hypothesis on the block queries: costs at the rounding of the duals beside far
    larger ones; where the engine's duals do not close the gap at the precision of the costs
    it sums, the tree variant solves the matrix again, as the scaling engine's fallback."""
    import dlap.points.matrix

    monkeypatch.setattr(dlap.points.matrix.MatrixSearch, "_host", None)
    result = assert_same_optimum(cost, method="sparse")
    assert result.verify().optimal
    if result.stats.method == "tree":
        assert result.stats.phase_counts["sparse_imprecise"] == 1


@pytest.mark.parametrize("family, n, m", [("uniform", 400, 400), ("shifted", 300, 250), ("clustered", 240, 300)])
@pytest.mark.parametrize("maximize", [False, True])
def test_structured_matrices(family, n, m, maximize):
    """Distances between point sets as a matrix (the shifted clouds' first core matches not every
    row); maximised, the cheapest entries are the farthest points."""
    a, b = generate.points(family, n, m, seed=n)
    cost = cdist(a, b)
    kept = cost.copy()
    result = assert_same_optimum(cost, maximize, method="sparse")
    assert result.stats.method == "sparse" and result.stats.phase_counts["pricing_rounds"] >= 1
    np.testing.assert_array_equal(cost, kept)


def test_forbidden_pairs_far_from_every_candidate():
    """A row whose only allowed entries are the most expensive of their columns: no candidate list
    holds them, so the core reaches them through the dead ends' nearest free columns."""
    rng = np.random.default_rng(3)
    cost = rng.random((60, 70))
    cost[0, :] = np.inf
    cost[0, [5, 9]] = 50.0
    assert_same_optimum(cost, method="sparse")
    cost[0, :] = np.inf
    assert_same_optimum(cost, method="sparse")  # infeasible: scipy's ValueError


def _entries_among(seed: int, dtype):
    """A matrix of ties and forbidden entries, some of its rows and an ascending subset of its
    columns, and those rows' k cheapest entries among those columns: sorted by cost then column."""
    rng = np.random.default_rng(seed)
    n, m = rng.integers(1, 40, 2)
    cost = rng.integers(0, 5, (n, m)).astype(dtype)
    if cost.dtype.kind == "f":
        cost[rng.random((n, m)) < 0.2] = np.inf
    rows = rng.choice(n, rng.integers(1, n + 1), replace=False).astype(np.int64)
    columns = np.flatnonzero(rng.random(m) < 0.7) if m > 1 else np.arange(m)
    columns = columns if columns.size else np.arange(m)
    k = int(rng.integers(1, 40))
    expected_cols, expected_cost = np.full((rows.size, k), -1), np.full((rows.size, k), np.inf)
    for r, i in enumerate(rows):
        values = cost[i, columns].astype(np.float64)
        order = np.lexsort((columns, values))[:k]
        allowed = order[np.isfinite(values[order])]
        expected_cols[r, : allowed.size], expected_cost[r, : allowed.size] = columns[allowed], values[allowed]
    return cost, rows, columns, k, expected_cols, expected_cost


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_the_cheapest_entries_among_given_columns(seed, dtype):
    """What a stuck search's rows get (the nearest free columns): only those rows and columns read."""
    from dlap.backends.cpu import matrix_core
    from dlap.backends.cpu.numba_setup import read_only

    cost, rows, columns, k, expected_cols, expected_cost = _entries_among(seed, dtype)
    cols, found = np.empty((rows.size, k), dtype=np.int64), np.empty((rows.size, k))
    matrix_core.cheapest_among(read_only(cost), rows, columns, k, cols, found)
    np.testing.assert_array_equal(cols, expected_cols)
    np.testing.assert_array_equal(found, expected_cost)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(5))
def test_the_gpus_cheapest_entries_of_subnormal_float32_costs(seed):
    """float32 costs of 0 to 4 units of 2**-140 (subnormal) keep their order on the GPU: widened
    exactly (common.cuh's widen), not flushed to zero into ties."""
    import cupy

    from dlap.backends.gpu import points

    cost, rows, columns, k, expected_cols, expected_cost = _entries_among(seed, np.float32)
    unit = 2.0**-140
    cols, found = np.empty((rows.size, k), dtype=np.int64), np.empty((rows.size, k))
    points.cheapest_among(cupy.asarray(cost * np.float32(unit)), rows, columns, k, cols, found)
    np.testing.assert_array_equal(cols, expected_cols)
    np.testing.assert_array_equal(found, expected_cost * unit)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(40, 40), (30, 45)])
def test_a_cupy_float32_matrix_of_subnormal_costs_on_the_gpu_engine(shape):
    """The sparse engine's blocks and pair costs of a CuPy float32 matrix widen its subnormal
    costs exactly: the CPU's optimum, certified."""
    import cupy

    rng = np.random.default_rng(shape[1])
    cost = (rng.integers(1, 1000, shape) * 2.0**-140).astype(np.float32)
    expected = dlap.solve(cost, method="sparse", device="cpu")
    matrix = cupy.asarray(cost)
    result = dlap.solve(matrix, method="sparse", device="gpu")
    assert result.objective == expected.objective > 0 and result.verify().optimal


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_the_cheapest_entries_among_given_columns_on_the_gpu(seed, dtype):
    """The GPU's warps (a row each, 32 columns a step) give the same columns in the same order."""
    import cupy

    from dlap.backends.gpu import points

    cost, rows, columns, k, expected_cols, expected_cost = _entries_among(seed, dtype)
    cols, found = np.empty((rows.size, k), dtype=np.int64), np.empty((rows.size, k))
    points.cheapest_among(cupy.asarray(cost), rows, columns, k, cols, found)
    np.testing.assert_array_equal(cols, expected_cols)
    np.testing.assert_array_equal(found, expected_cost)


def test_a_dead_end_with_no_allowed_free_column_is_not_infeasibility(monkeypatch):
    """Found by hypothesis (one candidate each): the rows a stuck search reached have no allowed
    entry in any free column, but allowed entries in columns the core never held, through which
    an assignment exists; the core grows to those before the matrix is called infeasible."""
    import dlap.points.core

    monkeypatch.setattr(dlap.points.core, "DEFAULT_CANDIDATES", 1)
    inf = np.inf
    cost = np.array([[0, inf, inf, 0, 0, inf, 0], [inf, inf, 0, inf, inf, 0, inf], [inf, 0, inf, inf, 0, inf, inf],
                     [0, inf, inf, 0, inf, inf, 0], [inf, inf, 0, inf, inf, 0, inf], [inf, 0, inf, inf, 0, inf, inf],
                     [0, inf, inf, -1, inf, inf, 0]])
    assert assert_same_optimum(cost, method="sparse").objective == -1


@pytest.fixture
def small_hand_over(monkeypatch):
    """method="auto" hands matrices of 200 rows and more to the sparse engine (SPARSE_MIN_ROWS:
    2000 rows, whose references from scipy would take seconds each)."""
    import dlap.hungarian.auto

    monkeypatch.setattr(dlap.hungarian.auto, "SPARSE_MIN_ROWS", 200)


@pytest.mark.usefixtures("small_hand_over")
@pytest.mark.parametrize("family", ["geometric-disjoint", "geometric-benefit"])
@pytest.mark.parametrize("transpose", [False, True])
def test_auto_gives_rectangular_structured_floats_to_the_sparse_engine(family, transpose):
    """JV leaves most rows of shifted clouds and benefit matrices free: ``method="auto"`` solves
    such a rectangular float matrix with the sparse engine, not the tree variant."""
    cost = generate.family(family, 300, m=340)
    cost = cost.T if transpose else cost
    result = assert_same_optimum(cost, family in generate.MAXIMIZE)
    assert result.stats.method == "sparse" and result.stats.phase_counts["jv_free_rows"] > 0.5 * 300
    assert result.verify().optimal


@pytest.mark.usefixtures("small_hand_over")
@pytest.mark.parametrize("family", ["geometric", "geometric-3d"])
def test_auto_gives_square_overlapping_point_distances_to_the_sparse_engine_on_the_cpu(family):
    """JV leaves 10% to 50% of such rows free: the sparse engine, not ε-scaling, on the CPU."""
    cost = generate.family(family, 400, seed=0)
    result = assert_same_optimum(cost, device="cpu")
    assert result.stats.method == "sparse" and result.verify().optimal


def test_auto_gives_large_square_iid_floats_to_the_sparse_engine_on_the_cpu():
    """From IID_SPARSE_MIN_ROWS rows, i.i.d. floats that JV leaves with free rows go to the sparse
    engine on the CPU; below, to the tree variant."""
    from dlap.hungarian.auto import IID_SPARSE_MIN_ROWS

    cost = generate.uniform_float(IID_SPARSE_MIN_ROWS, seed=3)
    result = dlap.solve(cost, device="cpu")
    assert result.stats.method == "sparse" and result.stats.phase_counts["jv_free_rows"] > 0
    assert result.verify().optimal
    assert dlap.solve(cost[:1000, :1000], device="cpu").stats.method == "tree"


def test_which_matrices_auto_gives_the_sparse_engine():
    from dlap.hungarian.auto import IID_SPARSE_MIN_ROWS, SPARSE_MIN_ROWS, for_the_sparse_engine

    n, iid = SPARSE_MIN_ROWS, IID_SPARSE_MIN_ROWS
    assert for_the_sparse_engine(0, n, square=False, structured=True, device="gpu")
    assert not for_the_sparse_engine(n, n - 1, square=False, structured=True, device="gpu")  # too small
    assert not for_the_sparse_engine(n // 2, n, square=False, structured=False, device="cpu")
    assert for_the_sparse_engine(n // 5, n, square=True, structured=True, device="cpu")
    assert not for_the_sparse_engine(n // 5, n, square=True, structured=True, device="gpu")  # the GPU's own engines
    assert not for_the_sparse_engine(n * 3 // 4, n, square=True, structured=True, device="cpu")  # greedy + ε-scaling
    assert for_the_sparse_engine(1, iid, square=True, structured=False, device="cpu")
    assert not for_the_sparse_engine(0, iid, square=True, structured=False, device="cpu")  # JV solved it
    assert not for_the_sparse_engine(1, iid - 1, square=True, structured=False, device="cpu")
    assert not for_the_sparse_engine(0, n, square=False, structured=True, device="cpu", integer=True)
    assert for_the_sparse_engine(n // 5, n, square=True, structured=True, device="cpu", integer=True)
    assert not for_the_sparse_engine(n // 5, n, square=True, structured=True, device="cpu", integer=True,
                                     few_values=True)  # the classical variant's integers


@pytest.mark.usefixtures("small_hand_over")
@pytest.mark.parametrize("family, f, m", [("float", None, 340), ("geometric-int", None, 303), ("uniform", 1.0, 300),
                                          ("geometric-disjoint", None, 300), ("geometric-benefit", None, 300)],
                         ids=["i.i.d. floats", "rectangular integers", "integers spanning n values",
                              "square shifted clouds", "square benefit matrix"])
def test_auto_keeps_the_rest_from_the_sparse_engine(family, f, m):
    """What JV says is i.i.d., rectangular integers and those spanning at most n values (the
    classical variant's), and square matrices JV leaves more than half free (the ε-scaling
    engine's) stay where they were."""
    cost = generate.family(family, 300, f, m=m)
    result = assert_same_optimum(cost, family in generate.MAXIMIZE, device="cpu")
    assert result.stats.method != "sparse"


@pytest.mark.usefixtures("small_hand_over")
def test_auto_gives_square_structured_integers_to_the_sparse_engine_on_the_cpu():
    """Distances within one point set rounded to integers (more than n values): the sparse
    engine, with whole-number duals the integer certificate checks."""
    result = assert_same_optimum(generate.family("geometric-int", 400), device="cpu")
    assert result.stats.method == "sparse" and result.row_duals.dtype == np.int64


@pytest.mark.parametrize("candidates", [1, 32])
@pytest.mark.parametrize("strategy", INTEGER_STRATEGIES)
def test_integer_matrices_get_whole_duals(strategy, candidates, monkeypatch):
    """Integers (ties, ±1e12, int32's range): the exact optimum and whole-number duals the
    integer certificate checks exactly (assert_same_optimum), from cores of 1 and 32 candidates."""
    import dlap.points.core

    monkeypatch.setattr(dlap.points.core, "DEFAULT_CANDIDATES", candidates)
    check_strategy(strategy, {"method": "sparse"}, SETTINGS)


@pytest.mark.parametrize("family, f, m", [("geometric-int", None, 700), ("ties", 4, 600), ("machol-wien", None, 500)])
def test_larger_integer_matrices_through_pricing_rounds(family, f, m):
    """Structured integers (Machol-Wien's first core misses the optimum: pricing rounds and warm
    starts; its core is not matchable at first): the duals stay whole through the auction
    (rounded down) and what follows it: the engine's own duals are whole, not only the caller's
    (rounded to the nearest whole number)."""
    from dlap.hungarian.sparse import solve_sparse
    from dlap.result import Stats

    cost = generate.family(family, 500, f, m=m)
    result = assert_same_optimum(cost, family in generate.MAXIMIZE, method="sparse", device="cpu")
    assert result.stats.method == "sparse" and result.row_duals.dtype == np.int64
    _, u, v = solve_sparse(cost.max() - cost if family in generate.MAXIMIZE else cost, Stats())
    assert np.array_equal(u, np.floor(u)) and np.array_equal(v, np.floor(v))


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", FLOAT_STRATEGIES)
def test_agrees_with_scipy_on_the_gpu(strategy):
    check_strategy(strategy, {"method": "sparse", "device": "gpu"}, SETTINGS)


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", INTEGER_STRATEGIES)
def test_integers_agree_with_scipy_on_the_gpu(strategy):
    check_strategy(strategy, {"method": "sparse", "device": "gpu"}, SETTINGS)


@pytest.mark.gpu
def test_a_cupy_integer_matrix_gets_whole_duals_on_the_gpu():
    import cupy

    cost = cupy.asarray(generate.family("geometric-int", 500, m=560))
    result = dlap.solve(cost, method="sparse")
    assert result.stats.method == "sparse" and result.row_duals.dtype == np.int64 and result.verify().optimal
    assert result.objective == dlap.solve(cost.get(), device="cpu").objective


@pytest.mark.gpu
def test_a_cupy_matrix_is_answered_on_the_gpu():
    import cupy

    a, b = generate.points("clustered", 300, 360, seed=1)
    cost = cdist(a, b)
    on_device = cupy.asarray(cost)
    on_gpu = dlap.solve(on_device, method="sparse")
    on_cpu = dlap.solve(cost, method="sparse", device="cpu")
    assert isinstance(on_gpu.col_ind, cupy.ndarray) and on_gpu.stats.device == "gpu"
    assert on_gpu.objective == pytest.approx(on_cpu.objective, rel=1e-12) and on_gpu.verify().optimal


@pytest.mark.gpu
@pytest.mark.usefixtures("small_hand_over")
@pytest.mark.parametrize("on_device", [False, True], ids=["host matrix", "CuPy matrix"])
def test_auto_gives_rectangular_structured_floats_to_the_sparse_engine_on_the_gpu(on_device):
    import cupy

    cost = generate.family("geometric-disjoint", 600, m=680)
    given = cupy.asarray(cost) if on_device else cost
    result = dlap.solve(given, device="gpu")
    assert result.stats.method == "sparse" and result.stats.device == "gpu"
    assert isinstance(result.col_ind, cupy.ndarray) == on_device
    assert result.objective == pytest.approx(dlap.solve(cost, method="tree", device="cpu").objective, rel=1e-12)
    assert result.verify().optimal
