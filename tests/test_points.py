"""dlap.solve_points: the sparse-core engine against scipy on the dense matrix, for every metric,
dtype, orientation and maximise; pricing that finds what no candidate list holds; the certificate
over every pair."""

import dataclasses
import math
import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment as scipy_lsa
from scipy.spatial.distance import cdist

import dlap
from dlap import generate
from dlap.points import coarse
from dlap.points.core import PRICING_RTOL
from dlap.points.metrics import METRICS
from dlap.points.search import listed

from .helpers import assert_valid

SCREENED_METRICS = ["euclidean", "sqeuclidean", "cosine"]


def _dense(a, b, metric, p):
    return cdist(a.astype(np.float64), b.astype(np.float64), metric, **({"p": p} if metric == "minkowski" else {}))


def _check(a, b, metric="euclidean", p=None, maximize=False, **options):
    result = dlap.solve_points(a, b, metric, p=p, maximize=maximize, **options)
    dense = _dense(a, b, metric, 2.0 if p is None else p)
    rows, cols = scipy_lsa(dense, maximize=maximize)
    assert_valid(result, dense, maximize)
    assert result.objective == pytest.approx(dense[rows, cols].sum(), rel=1e-9, abs=1e-9)
    certificate = result.verify()
    assert certificate.optimal, certificate
    return result


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40), m=st.integers(1, 40), d=st.integers(1, 5),
    metric=st.sampled_from(METRICS), maximize=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31 - 1),
    candidates=st.integers(1, 6), clustered=st.booleans(),
)
# a pair of cost 0 whose duals' rounding left it -4e-17: pricing found it every round
@example(n=31, m=38, d=2, metric="sqeuclidean", maximize=False, dtype=np.float64, seed=6268, candidates=3,
         clustered=True)
def test_the_optimum_of_the_dense_matrix(n, m, d, metric, maximize, dtype, seed, candidates, clustered):
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)), rng.random((m, d))
    if clustered:  # many ties and near-ties: points on a coarse grid
        a, b = np.round(a * 3) / 3 + 0.1, np.round(b * 3) / 3 + 0.1
    p = 1.5 if metric == "minkowski" else None
    _check(a.astype(dtype), b.astype(dtype), metric, p, maximize, candidates=candidates)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60), m=st.integers(1, 60), d=st.integers(1, 3),
    metric=st.sampled_from(METRICS), maximize=st.booleans(), seed=st.integers(0, 2**31 - 1),
    candidates=st.integers(1, 6), clustered=st.booleans(),
)
def test_the_optimum_with_the_auction_on_a_thread_team(n, m, d, metric, maximize, seed, candidates, clustered):
    """As above, every solve on a team of two threads whose auction bids, row reductions and
    searches run in parallel from the first row on (:func:`dlap.backends.cpu.points.bid_in_parallel`,
    :func:`dlap.backends.cpu.points.search_on_the_team`)."""
    import numba

    from dlap import threads
    from dlap.backends.cpu import points

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here")
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)), rng.random((m, d))
    if clustered:
        a, b = np.round(a * 3) / 3 + 0.1, np.round(b * 3) / 3 + 0.1
    with (mock.patch.object(threads, "_limit", 2), mock.patch.object(threads, "SERIAL_MAX_ENTRIES", 0),
          mock.patch.object(points, "TEAM_AUCTION_ROWS", 1), mock.patch.object(points, "TEAM_SEARCH_ROWS", 1)):
        result = _check(a, b, metric, 1.5 if metric == "minkowski" else None, maximize, candidates=candidates)
    assert result.stats.threads == 2


@pytest.mark.parametrize("seed", range(40))
def test_searches_through_the_implicit_rows_leave_feasible_duals(seed):
    """Unequal sets of points on a coarse grid (ties everywhere) with two candidates a row: the
    exact phase's searches pass the implicit rows of the columns left over again and again, and
    the duals they leave are certified (a version that let the held columns' prices follow the
    highest without writing them, and forgot a search's sink at the highest price, failed 2 of
    these 40: an optimal assignment whose duals the certificate rejected)."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(5, 40)), int(rng.integers(5, 40))
    a, b = np.round(rng.random((n, 2)) * 3) / 3, np.round(rng.random((m, 2)) * 3) / 3
    _check(a, b, candidates=2, device="cpu")


def test_a_search_through_the_implicit_rows_reaches_no_column_beyond_the_nearest_free_one():
    """Row 0 (free) reaches column 0, held by an implicit row at the top price 0 (as is column 1);
    through the implicit rows column 2 (free, -1) is 1 away, column 3 (row 1's, -3) 3 and column 4
    (free, -5) 5: the search takes column 2 and reaches neither 3 nor 4 (it reached every column
    before)."""
    from dlap.backends.cpu import points as module

    indptr, indices, costs = np.array([0, 1, 2]), np.array([0, 3], dtype=np.int32), np.array([0.5, 1.0])
    u, v = np.array([0.5, 4.0]), np.array([0.0, 0.0, -1.0, -3.0, -5.0])
    col4row, row4col = np.array([-1, 3]), np.array([-1, -1, -1, 1, -1])
    counters = np.zeros(3, dtype=np.int64)
    stuck = module.augment_rows(indptr, indices, costs, u, v, col4row, row4col, np.array([0]),
                                np.empty(2, dtype=np.int64), counters, np.iinfo(np.int64).max)
    assert stuck == -1 and col4row.tolist() == [0, 3] and row4col.tolist() == [0, -1, -1, 1, -1]
    assert counters[1] == 3  # columns 0, 1 and 2
    _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row)
    assert v[2] == v.max() == 0.0  # column 2 is held at the top price now


def test_searches_through_the_implicit_rows_go_in_rounds():
    """Twenty free rows, each tight to a column the implicit rows hold at the top price 0; fifty
    matched columns at the top too (a plateau), and twenty free columns priced -1 to -20 below it.
    One at a time each search passed the implicit rows and completed the whole plateau before its
    free column (20 x 50 columns reached in all); one round from every free row at once reaches
    each column once and augments them all: the free rows take the held columns and the implicit
    rows the free ones, at the optimum 0, with feasible duals and every unmatched column at 0."""
    from dlap.backends.cpu import points as module

    free, plateau = 20, 50
    n, m = free + plateau, 2 * free + plateau
    edges = [[(i, 0.0), (free + i, 5.0)] for i in range(free)]  # a held column, and a free one dearly
    edges += [[(2 * free + p, 0.0), (free + p % free, 10.0)] for p in range(plateau)]
    indptr = np.cumsum([0] + [len(e) for e in edges])
    order = [sorted(e) for e in edges]
    indices = np.array([j for e in order for j, _ in e], dtype=np.int32)
    costs = np.array([c for e in order for _, c in e])
    v = np.concatenate((np.zeros(free), -np.arange(1.0, free + 1), np.zeros(plateau)))
    u = np.zeros(n)
    col4row = np.concatenate((np.full(free, -1), 2 * free + np.arange(plateau)))
    row4col = np.full(m, -1)
    row4col[col4row[free:]] = np.arange(free, n)
    counters = np.zeros(3, dtype=np.int64)
    assert module.augment_rows(indptr, indices, costs, u, v, col4row, row4col, np.arange(free),
                               np.empty(n, dtype=np.int64), counters, np.iinfo(np.int64).max) == -1
    assert col4row[:free].tolist() == list(range(free)) and counters[0] == free
    assert counters[1] <= m  # one round (the searches one at a time: over 1000)
    _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row)
    assert (v <= 0).all() and (v[row4col < 0] == 0).all()


def test_a_rectangular_core_on_a_plateau_ends_its_later_auctions_finer():
    """Uniform sets of unequal sizes, either way round, and clustered ones: after the first
    auction many assigned columns are priced at the unassigned ones' top price (the surplus is
    everywhere), so the later auctions end at PLATEAU_LAST_EPS; shifted clouds' surplus lies
    apart, and their auctions end as before. Every answer is scipy's."""
    for family, n, m in (("uniform", 600, 720), ("uniform", 720, 600), ("clustered", 600, 720)):
        assert _check(*generate.points(family, n, m, seed=1)).stats.phase_counts["plateau"] == 1
    assert "plateau" not in _check(*generate.points("shifted", 600, 720, seed=1)).stats.phase_counts


@pytest.mark.parametrize("n, m", [(300, 300), (200, 350), (350, 200)])
def test_larger_sets_with_one_candidate_each(n, m):
    """k = 1: the first core is a forest; dead ends and pricing rounds make up the rest, rows let
    go by a repair among them (rectangular ones too: their unassigned columns stay at 0)."""
    rng = np.random.default_rng(n + m)
    result = _check(rng.random((n, 2)), rng.random((m, 2)), candidates=1)
    counts = result.stats.phase_counts
    assert counts["pricing_rounds"] >= 2 or counts.get("dead_ends", 0) + counts.get("unmatchable", 0) >= 1
    assert n == m or counts["rows_let_go"] >= 1


def test_a_square_cores_sunk_prices_are_raised_together():
    """Every bid lowers a price, so over many warm auctions a square core's prices sink (k = 1
    sets on a team: to -1e5 beside costs of 1e-3, whose rounding the certificate then found).
    An auction that leaves them all more than a spread of the costs below 0 raises them together
    until the highest is 0: the matching stays, each matched pair tight, every edge feasible."""
    from dlap.points.core import CoreSolution, SparseCore, _auction

    rng = np.random.default_rng(3)
    n, k = 400, 6
    core = SparseCore(n, n)
    rows = np.repeat(np.arange(n), k + 1)
    cols = np.concatenate([rng.integers(0, n, (n, k)), np.arange(n)[:, None]], axis=1).ravel()
    core.add(rows, cols, rng.random(rows.size) * 1e-3)
    solution = CoreSolution(n, n)
    solution.start(core)
    assert _auction(core, solution, True, {}) is None
    sunk = solution.copy()
    sunk.v -= 1e5
    sunk.u += 1e5
    solution.take(sunk)
    assert _auction(core, solution, True, {}, first_eps=1e-7) is None
    assert solution.v.max() == 0.0
    indptr, indices, costs = core.csr()
    _assert_tight_and_feasible(indptr, indices, costs, solution.u, solution.v, solution.col4row)


@pytest.mark.parametrize("n, m, candidates", [(250, 250, 32), (300, 200, 4), (150, 220, 3)])
def test_shifted_clouds_whose_neighbours_match_no_row_set(n, m, candidates):
    """Two clouds half a side apart: each point's nearest neighbours crowd onto the other
    cloud's near edge, the first core matches not every row: the auction names rows it gives
    fewer columns than themselves, and the core grows (costs ignored) until it does."""
    a, b = generate.points("shifted", n, m, seed=n)
    result = _check(a, b, candidates=candidates)
    assert result.stats.phase_counts["unmatchable"] >= 1


@pytest.mark.parametrize("n, m", [(240, 200), (300, 360), (600, 720)])
def test_clustered_sets_of_different_sizes(n, m):
    """Rectangular: the auction's last ε leaves rows free whose columns are priced below the
    unassigned ones; the searches reach them through the implicit rows of the square problem."""
    a, b = generate.points("clustered", n, m, seed=n)
    _check(a, b)


def test_an_objective_near_zero_beside_larger_duals():
    """Cosine on a coarse grid: nearly every row has a parallel column, so the optimum is a sum of
    rounding (about -4e-15) while the core's duals are near 0.03; their rounding alone kept the
    certificate from closing the gap, so the engine takes the duals nearest 0 and prices again."""
    rng = np.random.default_rng(0)
    n, m = rng.integers(20, 120, 2)
    a, b = (np.round((rng.random((size, 2)) + 0.1) * 3) / 3 + 0.1 for size in (n, m))
    result = _check(a, b, "cosine", candidates=int(rng.integers(1, 8)))
    assert result.stats.phase_counts["largest_duals"] == 1


@pytest.mark.parametrize("n, m", [(400, 400), (300, 380)])
def test_a_warm_auction_that_gives_up_leaves_no_violator_behind(n, m, monkeypatch):
    """An auction that runs out of bids keeps the solution it started from; its duals are not
    feasible for the pairs pricing added, so the engine repairs them before it searches, and it
    stops only when pricing finds no violator at all (violators already in the core included).
    One bid per row per phase makes every auction give up."""
    import dlap.points.core

    monkeypatch.setattr(dlap.points.core, "AUCTION_BIDS_PER_ROW", 1)
    rng = np.random.default_rng(n + m)
    result = _check(rng.random((n, 2)), rng.random((m, 2)), candidates=3)
    assert result.stats.phase_counts["pricing_rounds"] >= 2


@pytest.mark.parametrize("n, m", [(500, 500), (300, 360)])
def test_a_repair_that_costs_more_than_an_auction_gives_way_to_it(n, m, monkeypatch):
    """A repair whose searches pass their budget is undone and the round solved by the auction
    instead, to the same optimum; with no budget at all (and no row reduction, which can match
    the rows a repair let go without a search) every repair gives way."""
    import dlap.points.core

    monkeypatch.setattr(dlap.points.core, "SEARCH_COLUMN_BIDS", 10**12)
    monkeypatch.setattr(dlap.points.core, "ARR_STEPS_PER_ROW", 0)
    rng = np.random.default_rng(n + m)
    a, b = rng.random((n, 2)), rng.random((m, 2))
    result = _check(a, b, candidates=2)
    counts = result.stats.phase_counts
    assert counts["repairs_abandoned"] >= 1 and "rows_let_go" in counts


def test_the_searches_stop_at_their_budget(core_threads):
    """The searches with a budget of columns reached: the first search (on a team, the first of
    each thread at most) runs, the next would pass it, so the rest stay free; the duals stay
    feasible and the matched pairs tight. Without a budget every row is matched."""
    from dlap.backends.cpu import points as module

    n = 300
    indptr, indices, costs = _random_core(n, 4, seed=1, ties=False)
    for budget, expected in ((0, module.OVER_BUDGET), (np.iinfo(np.int64).max, -1)):
        u, v = np.empty(n), np.zeros(n)
        col4row, row4col = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        module.row_duals(indptr, indices, costs, v, u)
        counters = np.zeros(3, dtype=np.int64)
        assert module.augment_free_rows(indptr, indices, costs, u, v, col4row, row4col, np.arange(n),
                                        np.empty(n, dtype=np.int64), counters, budget) == expected
        matched = np.flatnonzero(col4row >= 0)
        assert (1 <= matched.size <= core_threads if budget == 0 else matched.size == n)
        assert counters[0] == matched.size
        _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row)


def _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row):
    rows = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    reduced = costs - u[rows] - v[indices]
    assert (reduced >= -1e-9).all()
    own = indices == col4row[rows]
    assert (np.abs(reduced[own]) <= 1e-9).all()


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n, k", [(2, 1), (400, 1), (3000, 3), (3000, 8)])
def test_the_searches_reach_one_threads_optimum(n, k, ties, core_threads):
    """From the rows' cheapest edges, the row reduction then the searches (on one thread, or on a
    team) match every row of a core at the optimum the one-thread searches alone reach (its cost:
    the matching may be another among ties), with feasible duals tight on every matched pair."""
    from dlap.backends.cpu import points as module

    indptr, indices, costs = _random_core(n, k, seed=n + k, ties=ties)
    totals = []
    for reduced_first in (False, True):
        u, v = np.empty(n), np.zeros(n)
        col4row, row4col = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        module.row_duals(indptr, indices, costs, v, u)
        if reduced_first:
            module.reduce_free_rows(indptr, indices, costs, u, v, col4row, row4col, np.arange(n), 8 * n)
            stuck = module.augment_free_rows(indptr, indices, costs, u, v, col4row, row4col,
                                             np.flatnonzero(col4row < 0), np.empty(n, dtype=np.int64),
                                             np.zeros(3, dtype=np.int64), np.iinfo(np.int64).max)
        else:
            stuck = module.augment_rows(indptr, indices, costs, u, v, col4row, row4col, np.arange(n),
                                        np.empty(n, dtype=np.int64), np.zeros(3, dtype=np.int64),
                                        np.iinfo(np.int64).max)
        assert stuck == -1 and np.array_equal(np.sort(col4row), np.arange(n))
        assert np.array_equal(row4col[col4row], np.arange(n))
        _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row)
        rows = np.repeat(np.arange(n), np.diff(indptr))
        totals.append(math.fsum(costs[indices == col4row[rows]].tolist()))
    assert totals[1] == pytest.approx(totals[0], rel=1e-12, abs=1e-9)


def test_the_row_reductions_serial_tail_keeps_the_bids_a_row(monkeypatch, core_threads):
    """On a team, the rows the team's bids of a row reduction leave get at most as many serial
    bids a row as the reduction had (``SERIAL_REDUCTION_SHARE``), not the rest of its budget: that
    went to one thread's price wars at ε = 0 (docs/benchmarks.md, "The row reduction's serial
    tail"). The searches then match every row, tight and feasible."""
    from dlap.backends.cpu import points as module

    if core_threads == 1:
        pytest.skip("one thread reduces serially")
    given = []
    serial = module.augmenting_row_reduction

    def recording(indptr, indices, costs, u, v, col4row, row4col, rows, steps):
        given.append((rows.shape[0], steps))
        return serial(indptr, indices, costs, u, v, col4row, row4col, rows, steps)

    monkeypatch.setattr(module, "augmenting_row_reduction", recording)
    monkeypatch.setattr(module, "SERIAL_REDUCTION_SHARE", 1.0)
    n = 3000
    indptr, indices, costs = _random_core(n, 3, seed=11, ties=True)  # the team leaves a fifth of the rows
    u, v = np.empty(n), np.zeros(n)
    col4row, row4col = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    module.row_duals(indptr, indices, costs, v, u)
    module.reduce_free_rows(indptr, indices, costs, u, v, col4row, row4col, np.arange(n), 8 * n)
    (left, steps), = given
    assert 0 < left < n and steps <= 8 * left
    stuck = module.augment_free_rows(indptr, indices, costs, u, v, col4row, row4col, np.flatnonzero(col4row < 0),
                                     np.empty(n, dtype=np.int64), np.zeros(3, dtype=np.int64), np.iinfo(np.int64).max)
    assert stuck == -1 and np.array_equal(np.sort(col4row), np.arange(n))
    _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row)


def test_the_searches_report_rows_with_too_few_columns(core_threads):
    """Rows 0-2 have column 0 only, the others their own column and two more: a search from
    one of rows 0-2 reaches no free column, and the rows it reached have fewer columns than
    themselves (what the engine gives edges to free columns)."""
    from dlap.backends.cpu import points as module

    n = 3000
    rng = np.random.default_rng(3)
    lists = [[0], [0], [0]] + [sorted({i, *rng.integers(3, n, 2).tolist()}) for i in range(3, n)]
    indptr = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
    indices = np.array([j for x in lists for j in x], dtype=np.int32)  # the engine's core's column type
    costs = rng.random(indices.size)
    u, v = np.empty(n), np.zeros(n)
    col4row, row4col = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    module.row_duals(indptr, indices, costs, v, u)
    scanned, counters = np.empty(n, dtype=np.int64), np.zeros(3, dtype=np.int64)
    rows = np.arange(n)[::-1].copy()  # rows 0-2 last: the others are matched first
    position = module.augment_free_rows(indptr, indices, costs, u, v, col4row, row4col, rows, scanned, counters,
                                        np.iinfo(np.int64).max)
    assert position >= 0 and rows[position] in (0, 1, 2) and col4row[rows[position]] < 0
    reached = scanned[: counters[2]]
    neighbours = np.unique(np.concatenate([indices[indptr[r]: indptr[r + 1]] for r in reached]))
    assert rows[position] in reached and neighbours.size < reached.size
    _assert_tight_and_feasible(indptr, indices, costs, u, v, col4row)


def test_pricing_finds_a_pair_no_candidate_list_holds():
    """Row 0's optimal partner is the farthest point from it: the only way to cover the far
    point b[-1] is row 0, since every other row's point sits on top of its own partner."""
    n = 50
    a = np.column_stack([np.arange(n, dtype=float), np.zeros(n)])
    b = a.copy()
    a[0] = [-1000.0, 0.0]  # far from everything, nearest to b[0]
    b[0] = [1000.0, 1.0]   # b[0] far on the other side: only row 0 is left for it
    result = _check(a, b, candidates=2)
    assert result.col_ind[0] == 0
    assert result.stats.phase_counts["pricing_rounds"] >= 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), m=st.integers(1, 40), d=st.integers(1, 12), metric=st.sampled_from(METRICS),
       seed=st.integers(0, 2**31 - 1), matrix=st.booleans())
def test_a_pricing_pass_prices_every_row_whose_pairs_can_have_become_violated(n, m, d, metric, seed, matrix):
    """After a pass, duals that moved as the engine's do (some rows' up or down, some columns'
    down from at most 0): the rows :class:`PricedDuals` names hold every violator a pass over every
    row finds, with the same lists; a column's dual rising, or a smaller tolerance, asks for every row."""
    from dlap.points.core import PricedDuals
    from dlap.points.costs import PointCosts
    from dlap.points.matrix import MatrixSearch
    from dlap.points.search import PairSearch

    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)), rng.random((m, d))
    costs = PointCosts(a, b, metric, 3.0 if metric == "minkowski" else None, "cpu")
    if matrix:
        search = MatrixSearch(cdist(a, b, metric, **({"p": 3.0} if metric == "minkowski" else {})))
    else:
        search = PairSearch(costs.kernels, costs.a, costs.b, costs.a_norms, costs.b_norms, metric, 3.0, 1.0)
    k = 3
    u, v = rng.random(n), -rng.random(m) * 0.5
    outputs = [np.empty((n, k), dtype=np.int64), np.empty((n, k)), np.empty(n, dtype=np.int64)]
    priced = PricedDuals()
    assert priced.rows(u, v, PRICING_RTOL, 0.0) is None
    search.price(u, v, PRICING_RTOL, 0.0, *outputs)
    priced.record(u, v, PRICING_RTOL, 0.0, outputs[2])
    u2, v2 = u.copy(), v.copy()
    moved = rng.random(n) < 0.3
    u2[moved] += rng.normal(0.0, 0.3, moved.sum())
    lowered = rng.random(m) < 0.3
    v2[lowered] -= rng.random(lowered.sum()) * 0.3
    chosen = priced.rows(u2, v2, PRICING_RTOL, 0.0)  # None: every row (most of them moved or had violators)
    rows = np.arange(n) if chosen is None else chosen
    full = [np.empty((n, k), dtype=np.int64), np.empty((n, k)), np.empty(n, dtype=np.int64)]
    search.price(u2, v2, PRICING_RTOL, 0.0, *full)
    assert set(np.flatnonzero(full[2] > 0)) <= set(rows.tolist())
    part = [np.full((n, k), -7, dtype=np.int64), np.full((n, k), 7.0), np.full(n, -7, dtype=np.int64)]
    search.price(u2, v2, PRICING_RTOL, 0.0, *part, rows)
    assert np.array_equal(part[2], full[2])
    kept = listed(full[2], k)
    assert np.array_equal(part[0][kept], full[0][kept]) and np.array_equal(part[1][kept], full[1][kept])
    risen, j = v2.copy(), rng.integers(m)
    risen[j] = v[j] + 0.1
    assert priced.rows(u2, risen, PRICING_RTOL, 0.0) is None
    assert priced.rows(u2, v2, PRICING_RTOL, -1.0) is None
    quiet = PricedDuals()  # a pass without violators, then one row's dual moved
    quiet.record(u, v, PRICING_RTOL, 0.0, np.zeros(n, dtype=np.int64))
    one = u.copy()
    one[n // 2] += 1.0
    moved_rows = quiet.rows(one, v, PRICING_RTOL, 0.0)
    assert moved_rows is None if n == 1 else moved_rows.tolist() == [n // 2]  # (one row of one: every row)


def test_the_certificate_checks_every_pair():
    rng = np.random.default_rng(3)
    a, b = rng.random((60, 2)), rng.random((60, 2))
    result = dlap.solve_points(a, b)
    assert result.verify().optimal
    swapped = result.col_ind.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert not dataclasses.replace(result, col_ind=swapped).verify().optimal
    # duals that are feasible on the core but not on some far pair: the scan over every pair sees it
    v = result.col_duals.copy()
    v[7] -= 10.0
    u = result.row_duals.copy()
    u[result.row_ind[result.col_ind == 7]] += 10.0
    broken = dataclasses.replace(result, row_duals=u, col_duals=v).verify()
    assert not broken.optimal and broken.max_dual_violation > 1


def test_the_certificate_runs_on_as_many_threads_as_the_solve(monkeypatch):
    """verify()'s scans through the k-d trees run on the threads of a solve of their size: one
    for a small problem, as its solve (a first small verify() compiled the thread team's kernel
    of the scan), the team's for a large one."""
    import numba

    from dlap.backends.cpu import kdtree
    from dlap.certificate import certify
    from dlap.points.costs import PointCosts
    from dlap.threads import SERIAL_MAX_ENTRIES, threads_for

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here")
    threads, scan = [], kdtree.reduced_minima

    def spy(*args):
        threads.append(numba.get_num_threads())
        return scan(*args)

    monkeypatch.setattr(kdtree, "reduced_minima", spy)
    rng = np.random.default_rng(4)
    small = dlap.solve_points(rng.random((60, 2)), rng.random((70, 2)), device="cpu")
    assert small.verify().optimal and threads and set(threads) == {1} and small.stats.threads == 1
    n = math.isqrt(SERIAL_MAX_ENTRIES) + 1  # the scan of a large problem's (made-up) answer
    costs = PointCosts(rng.random((n, 2)), rng.random((n, 2)), "euclidean", 2.0, "cpu")
    del threads[:]
    identity = np.arange(n)
    certify(costs, identity, identity, float(costs[identity, identity].sum()), np.zeros(n), np.zeros(n))
    assert threads and set(threads) == {threads_for(n * n)}


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 50), m=st.integers(1, 50), d=st.integers(1, 4), metric=st.sampled_from(METRICS),
       maximize=st.booleans(), seed=st.integers(0, 2**31 - 1), grid=st.booleans(),
       wrong=st.sampled_from(["none", "swap", "duals"]))
def test_the_trees_certificate_is_the_scan_of_every_pair(n, m, d, metric, maximize, seed, grid, wrong):
    """verify() through the k-d trees finds what the scan of every pair finds (the same minima to
    the bit, so the same objective, bound, gap and verdict), on the solver's answers and on wrong
    ones (two columns swapped; duals raised)."""
    from dlap.certificate import certify
    from dlap.points.costs import PointCosts

    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)) + 0.1, rng.random((m, d)) + 0.1
    if grid:
        a, b = np.round(a * 3) / 3 + 0.1, np.round(b * 3) / 3 + 0.1
    p = 1.5 if metric == "minkowski" else None
    result = dlap.solve_points(a, b, metric, p=p, maximize=maximize, device="cpu")
    costs = PointCosts(a, b, metric, 2.0 if p is None else p, "cpu")
    rows, cols, u, v = result.row_ind, result.col_ind.copy(), result.row_duals, result.col_duals
    if wrong == "swap" and cols.size >= 2:
        cols[[0, 1]] = cols[[1, 0]]
    elif wrong == "duals":
        u = u + 1e-3
    objective = float(costs[rows, cols].sum())
    trees = certify(costs, rows, cols, objective, u, v, maximize=maximize)
    scan = certify(costs[0:n], rows, cols, objective, u, v, maximize=maximize)
    assert (trees.optimal, trees.primal, trees.lower_bound, trees.gap) == (scan.optimal, scan.primal,
                                                                           scan.lower_bound, scan.gap)
    if wrong == "duals":
        assert not trees.optimal


@pytest.mark.gpu
@pytest.mark.parametrize("wrong", ["none", "swap", "duals"])
@pytest.mark.parametrize("metric", METRICS)
def test_the_certificate_of_gpu_points_through_the_trees_is_the_gpus_scan(metric, wrong):
    """verify() of CuPy points asks the host's k-d trees: the same verdict, objective, bound and
    gap as the GPU's scan of every pair (a block of the costs), on the answer and on wrong ones;
    minkowski's (whose pow differs between the devices in the last places) scans the GPU's costs."""
    import cupy

    from dlap.certificate import certify
    from dlap.points.costs import PointCosts

    rng = np.random.default_rng(5)
    a, b = (cupy.asarray(x) for x in (rng.random((300, 2)) + 0.1, rng.random((260, 2)) + 0.1))
    p = 1.5 if metric == "minkowski" else 2.0
    result = dlap.solve_points(a, b, metric, p=p if metric == "minkowski" else None)
    costs = PointCosts(a, b, metric, p, "gpu")
    assert (costs._search(1.0) is None) == (metric == "minkowski")
    rows, cols, u, v = result.row_ind, result.col_ind.copy(), result.row_duals, result.col_duals
    if wrong == "swap":
        cols[[0, 1]] = cols[[1, 0]]
    elif wrong == "duals":
        u = u + 1e-3
    objective = float(costs[rows, cols].sum())
    trees = certify(costs, rows, cols, objective, u, v)
    scan = certify(costs[0:300], rows, cols, objective, u, v)
    assert (trees.optimal, trees.primal, trees.lower_bound, trees.gap) == (scan.optimal, scan.primal,
                                                                           scan.lower_bound, scan.gap)
    assert trees.optimal == (wrong == "none")


def test_a_result_pickles_with_its_points():
    rng = np.random.default_rng(4)
    result = dlap.solve_points(rng.random((30, 3)), rng.random((20, 3)), "cityblock")
    again = pickle.loads(pickle.dumps(result))
    assert again.verify().optimal and again.objective == result.objective


def test_bad_points_get_clear_errors():
    a = np.zeros((3, 2))
    with pytest.raises(ValueError, match="same number of columns"):
        dlap.solve_points(a, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="2-D"):
        dlap.solve_points(np.zeros(3), a)
    with pytest.raises(ValueError, match="NaN or infinite"):
        dlap.solve_points(np.array([[0.0, np.nan]]), a)
    with pytest.raises(ValueError, match="unknown metric"):
        dlap.solve_points(a, a, "hamming")
    with pytest.raises(ValueError, match="p must be"):
        dlap.solve_points(a, a, "minkowski", p=0.5)
    with pytest.raises(ValueError, match="takes none"):
        dlap.solve_points(a, a, "euclidean", p=3)
    with pytest.raises(ValueError, match="zero point"):
        dlap.solve_points(a, a + 1, "cosine")
    with pytest.raises(TypeError, match="real numbers"):
        dlap.solve_points(a.astype(complex), a)
    with pytest.raises(ValueError, match="candidates"):
        dlap.solve_points(a, a, candidates=0)


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize(("metric", "scale"), [
    ("euclidean", 1e200), ("sqeuclidean", 1e155), ("cityblock", 1e308), ("minkowski", 1e150), ("cosine", 1e200),
])
def test_points_whose_values_overflow_are_refused(metric, scale, maximize):
    """Costs beyond 2**1000 or past float64 on the way (scipy's cdist gives inf or NaN there):
    a clear error, where the engine looped forever (euclidean, minkowski, cosine), reported an
    uncertified inf (sqeuclidean) or failed in its own sums (cityblock near 1e308)."""
    rng = np.random.default_rng(1)
    a, b = rng.random((6, 2)) * scale, rng.random((7, 2)) * scale
    for x, y in ((a, b), (b, a)):
        with pytest.raises(ValueError, match=f"{metric} values can pass 2\\*\\*1000 or overflow"):
            dlap.solve_points(x, y, metric, p=3.0 if metric == "minkowski" else None, maximize=maximize)


@pytest.mark.parametrize(("metric", "top"), [("euclidean", 1e150), ("sqeuclidean", 3e150), ("cityblock", 1e301),
                                             ("minkowski", 1e150)])
def test_values_just_below_the_limit_are_solved_exactly(metric, top):
    """Coordinates as large as the values allow (their squares within float64; sums within
    2**1000): scipy's optimum, certified, both ways."""
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(2)
    a, b = (rng.random((9, 2)) - 0.5) * top / 2, (rng.random((12, 2)) - 0.5) * top / 2
    for maximize in (False, True):
        cost = cdist(a, b, metric)
        best = cost[linear_sum_assignment(cost, maximize=maximize)].sum()
        result = dlap.solve_points(a, b, metric, maximize=maximize)
        assert result.verify().optimal
        assert cost[result.row_ind, result.col_ind].sum() == pytest.approx(best, rel=1e-12)


def test_cosine_of_points_too_small_for_float64_is_refused():
    """Coordinates of 1e-160: their squares are subnormal, and the cosine values dlap and cdist
    compute from them part (by 0.1 on a total of 0.2: found by a fuzz); a zero point is still a
    zero point."""
    rng = np.random.default_rng(3)
    a, b = rng.random((8, 2)), rng.random((9, 2))
    with pytest.raises(ValueError, match="cosine values lose float64's precision"):
        dlap.solve_points(a * 1e-160, b, "cosine")
    with pytest.raises(ValueError, match="zero point"):
        dlap.solve_points(np.vstack([a, np.zeros(2)]), b, "cosine")
    assert dlap.solve_points(a * 1e-150, b * 1e150, "cosine").verify().optimal  # squares of 1e-300: normal


def test_a_core_with_a_cost_that_is_not_finite_is_an_internal_error():
    """The auction's guard against what check_range keeps out: an ε of NaN or inf never settles."""
    from dlap.points.core import CoreSolution, SparseCore, _auction

    core = SparseCore(2, 2)
    core.fill(np.array([[0, 1], [0, 1]]), np.array([[1.0, np.inf], [2.0, 3.0]]))
    solution = CoreSolution(2, 2)
    solution.start(core)
    with pytest.raises(RuntimeError, match="a cost is not finite"):
        _auction(core, solution, True, {})


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cupy_points_whose_values_overflow_are_refused(dtype):
    """The bound from CuPy points, float32 ones too: refused before the GPU computes a cost."""
    import cupy

    rng = np.random.default_rng(4)
    a, b = rng.random((6, 3)), rng.random((7, 3))
    big = 1e30 if dtype == np.float32 else 1e200  # float32: squares of 1e30 overflow no float64; p = 20 does
    with pytest.raises(ValueError, match="minkowski values can pass"):
        dlap.solve_points(cupy.asarray(a * big, dtype=dtype), cupy.asarray(b * big, dtype=dtype), "minkowski", p=20.0)
    if dtype == np.float64:  # (float32 coordinates square to normal float64s)
        with pytest.raises(ValueError, match="cosine values lose"):
            dlap.solve_points(cupy.asarray(a * 1e-160), cupy.asarray(b), "cosine")
    a_gpu, b_gpu = cupy.asarray(a, dtype=dtype), cupy.asarray(b, dtype=dtype)
    assert dlap.solve_points(a_gpu, b_gpu, "euclidean").verify().optimal


def test_empty_sets_and_the_callers_arrays():
    empty = dlap.solve_points(np.zeros((0, 2)), np.ones((4, 2)))
    assert empty.row_ind.shape == (0,) and empty.objective == 0
    rng = np.random.default_rng(5)
    a, b = rng.random((20, 2)), rng.random((25, 2))
    a0, b0 = a.copy(), b.copy()
    dlap.solve_points(a, b, maximize=True)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.gpu
@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_gpu_computes_the_cpus_costs(metric, dtype):
    """The same formulas in the same order on both devices (no FMA contraction on the GPU): the
    same costs to the bit, minkowski's pow within a few units in the last place."""
    import cupy

    from dlap.points.costs import PointCosts

    rng = np.random.default_rng(11)
    a, b = rng.random((70, 5)).astype(dtype) + 0.1, rng.random((90, 5)).astype(dtype) + 0.1
    p = 1.5 if metric == "minkowski" else 0.0
    cpu = PointCosts(a, b, metric, p, "cpu")[0:70]
    gpu = PointCosts(cupy.asarray(a), cupy.asarray(b), metric, p, "gpu")[0:70].get()
    if metric == "minkowski":
        np.testing.assert_allclose(gpu, cpu, rtol=1e-14)
    else:
        np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.gpu
@pytest.mark.parametrize("metric", METRICS)
def test_float32_subnormal_coordinates_cost_the_same_on_both_devices(metric):
    """float32 points whose coordinates are subnormal (below 2**-126) are widened exactly on the
    GPU too (common.cuh's widen: a plain conversion flushed them to zero on an H200), so both
    devices compute the same nonzero costs."""
    import cupy

    from dlap.points.costs import PointCosts

    rng = np.random.default_rng(12)
    a, b = ((rng.integers(1, 2**23, (size, 3)) * 2.0**-149).astype(np.float32) for size in (20, 30))
    assert (np.abs(a) < np.finfo(np.float32).tiny).all() and a.min() > 0
    p = 1.5 if metric == "minkowski" else 0.0
    cpu = PointCosts(a, b, metric, p, "cpu")[0:20]
    gpu = PointCosts(cupy.asarray(a), cupy.asarray(b), metric, p, "gpu")[0:20].get()
    assert np.count_nonzero(cpu) > 0
    if metric == "minkowski":
        np.testing.assert_allclose(gpu, cpu, rtol=1e-14)
    else:
        np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.gpu
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), m=st.integers(1, 150), d=st.integers(1, 6),
       metric=st.sampled_from(["euclidean", "sqeuclidean", "cityblock", "cosine"]), maximize=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31 - 1), copies=st.booleans(),
       k=st.integers(1, 70))
def test_the_gpus_nearest_columns_and_pricing_are_the_cpus(n, m, d, metric, maximize, dtype, seed, copies, k):
    """The GPU's warps (32 columns a step) find the CPU's one-pass answers to the bit: the same
    columns, costs, violators, counts and order, ties (copies of a few points) and lists longer
    than a warp included."""
    import cupy

    from dlap.backends.cpu import points as cpu_kernels
    from dlap.backends.gpu import points as gpu_kernels
    from dlap.points.metrics import METRIC_IDS, norms

    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)).astype(dtype) + 0.1, rng.random((m, d)).astype(dtype) + 0.1
    if copies:
        b = b[rng.integers(0, min(3, m), m)]
    na, nb = norms(a, metric, np), norms(b, metric, np)
    rest = (METRIC_IDS[metric], 0.0, -1.0 if maximize else 1.0)
    on_gpu = (cupy.asarray(a), cupy.asarray(b), cupy.asarray(na), cupy.asarray(nb), *rest)
    k_near = min(k, m)
    found = [(np.empty((n, k_near), dtype=np.int64), np.empty((n, k_near))) for _ in range(2)]
    cpu_kernels.nearest_columns(a, b, na, nb, *rest, k_near, *found[0])
    gpu_kernels.nearest_columns(*on_gpu, k_near, *found[1])
    for on_cpu, on_device in zip(*found, strict=True):
        np.testing.assert_array_equal(on_cpu, on_device)
    u, v = rng.random(n) * 0.5, -rng.random(m) * 0.5  # duals that many pairs violate
    priced = [(np.full((n, k), -7, dtype=np.int64), np.full((n, k), 7.0), np.empty(n, dtype=np.int64))
              for _ in range(2)]
    cpu_kernels.price(a, b, na, nb, *rest, u, v, PRICING_RTOL, 0.0, *priced[0])
    gpu_kernels.price(*on_gpu, u, v, PRICING_RTOL, 0.0, *priced[1])
    listed = np.arange(k)[None, :] < np.minimum(priced[0][2], k)[:, None]  # (slots past a row's count: unset)
    np.testing.assert_array_equal(priced[0][2], priced[1][2])
    for on_cpu, on_device in zip(priced[0][:2], priced[1][:2], strict=True):
        np.testing.assert_array_equal(on_cpu[listed], on_device[listed])


@pytest.mark.gpu
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), m=st.integers(1, 60), metric=st.sampled_from(METRICS), maximize=st.booleans(),
       seed=st.integers(0, 2**31 - 1), candidates=st.integers(1, 8), d=st.sampled_from([3, 12]),
       gpu_prices=st.booleans())
def test_the_gpu_engine_reaches_the_optimum(n, m, metric, maximize, seed, candidates, d, gpu_prices):
    """d = 3: the k-d trees on the host, pricing by the GPU's scan of every pair or (more pairs
    than GPU_PRICING_PAIRS) through the trees too; d = 12: the GPU's scans."""
    from unittest import mock

    from dlap.points import search

    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)) + 0.1, rng.random((m, d)) + 0.1
    p = 1.5 if metric == "minkowski" else None
    with mock.patch.object(search, "GPU_PRICING_PAIRS", search.GPU_PRICING_PAIRS if gpu_prices else 0):
        result = _check(a, b, metric, p, maximize, device="gpu", candidates=candidates)
    assert result.stats.device == "gpu"


@pytest.mark.gpu
def test_points_of_five_coordinates_on_a_gpu_are_priced_by_its_scan_at_any_size(monkeypatch):
    """Beyond GPU_PRICING_PAIRS 2-D points are priced through the host's trees, 5-D ones (image
    pixels: the trees prune little) still by the GPU's scan of every pair, to scipy's optimum."""
    import cupy

    from dlap.points import search

    monkeypatch.setattr(search, "GPU_PRICING_PAIRS", 0)
    rng = np.random.default_rng(5)
    for d, scans in ((2, False), (search.GPU_PRICING_MIN_DIM, True)):
        a, b = rng.random((40, d)), rng.random((50, d))
        norms = cupy.empty(0)
        pairs = search.PairSearch(None, cupy.asarray(a), cupy.asarray(b), norms, norms, "sqeuclidean", 2.0, 1.0)
        assert pairs.gpu_prices is scans
        _check(a, b, "sqeuclidean", device="gpu")


#: a square core's auction takes no edges by column
_NO_COLUMNS = (np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0))


@pytest.fixture(params=["one thread", "team"])
def core_threads(request, monkeypatch):
    """The core's kernels on one thread, or on a team of two from the first row on: the auction's
    bids (:func:`dlap.backends.cpu.points.bid_in_parallel`) and reverse bids
    (:func:`~dlap.backends.cpu.points.reverse_bids_in_parallel`), the row reduction's and the
    searches for augmenting paths (:func:`~dlap.backends.cpu.points.search_on_the_team`)."""
    import numba

    from dlap.backends.cpu import points as module

    if request.param == "one thread":
        yield 1
        return
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here")
    monkeypatch.setattr(module, "TEAM_AUCTION_ROWS", 1)
    monkeypatch.setattr(module, "TEAM_SEARCH_ROWS", 1)
    previous = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        yield 2
    finally:
        numba.set_num_threads(previous)


def _random_core(n: int, k: int, seed: int, ties: bool):
    """A CSR of n rows with k random columns each and its own (so a perfect matching exists)."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), k + 1)
    cols = np.concatenate([rng.integers(0, n, (n, k)), np.arange(n)[:, None]], axis=1).ravel()
    keys = np.unique(rows * n + cols)
    costs = rng.integers(0, 4, keys.size).astype(np.float64) if ties else rng.random(keys.size) * 100
    indptr = np.searchsorted(keys // n, np.arange(n + 1)).astype(np.int64)
    return indptr, (keys % n).astype(np.int32), costs  # the engine's core: int32 columns below 2**31


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n, k", [(1, 1), (2, 1), (50, 3), (3000, 8), (4000, 1)])
def test_the_auction_leaves_every_row_within_the_last_eps(n, k, ties, core_threads):
    """The core's auction leaves every row assigned within the last ε of its cheapest column,
    from zero prices and again from its own, asking whether its free rows can be matched from
    its first bid on (never wrongly); it says so where the core has no perfect matching (two
    rows with one column; a row without edges), on one thread and on a team."""
    from dlap.backends.cpu import points as module
    from dlap.backends.cpu.points import release_loose_rows

    indptr, indices, costs = _random_core(n, k, seed=n + k, ties=ties)
    last = 1e-4
    v, col4row, row4col = np.zeros(n), np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    counters, reached = np.zeros(3, dtype=np.int64), np.empty(n, dtype=np.int64)
    for start in (25.0, 1.0):
        assert module.scaled_auction(indptr, indices, costs, *_NO_COLUMNS, v, col4row, row4col, start, last, 6.0,
                                     100.0, 1, 1000 * n, reached, counters)
        assert np.array_equal(np.sort(col4row), np.arange(n)) and np.array_equal(row4col[col4row], np.arange(n))
        rounding = 1e-12 * (np.abs(v).max() + np.abs(costs).max())  # of c - v, at the prices' magnitude
        assert release_loose_rows(indptr, indices, costs, v.copy(), col4row.copy(), row4col.copy(),
                                  last + rounding) == 0
    assert counters[0] >= n and counters[1] >= 2
    one_column = (np.array([0, 1, 2], dtype=np.int64), np.array([0, 0], dtype=np.int32), np.array([1.0, 2.0]))
    no_edges = (np.array([0, 1, 1], dtype=np.int64), np.array([0], dtype=np.int32), np.array([1.0]))
    # a price war is asked about after 40 bids (the guard, 10**9, never stops it), or stopped by the
    # guard; the rows the core cannot match are listed (both rows of one column; the row without
    # edges), none where the guard stopped it
    for core, check_after, bid_limit, short in ((one_column, 40, 10**9, [0, 1]), (no_edges, 40, 10**9, [1]),
                                                (one_column, 10**9, 400, [])):
        v, matched = np.zeros(2), np.full(2, -1, dtype=np.int64)
        counters, reached = np.zeros(3, dtype=np.int64), np.empty(2, dtype=np.int64)
        assert not module.scaled_auction(*core, *_NO_COLUMNS, v, matched, matched.copy(), 1.0, last, 6.0, 1.0,
                                         check_after, bid_limit, reached, counters)
        assert counters[0] <= min(2 * check_after, bid_limit)
        assert sorted(reached[: counters[2]].tolist()) == short


def test_a_square_cores_first_phase_chases_on_the_team(monkeypatch, core_threads):
    """On a team, a square core's first phase (before the auction knows that every row can be
    matched) chases displaced rows too, so no free row is left to the serial bids: where it swept
    instead, the last free rows' price wars ran on one thread (docs/benchmarks.md, "Chasing from
    the first phase"). Every row still ends within the last ε of its cheapest column."""
    from dlap.backends.cpu import points as module
    from dlap.backends.cpu.points import release_loose_rows

    if core_threads == 1:
        pytest.skip("one thread bids serially")
    left = []
    serial = module.auction_phase

    def counting(indptr, indices, costs, v, col4row, *args):
        left.append(int(np.count_nonzero(col4row < 0)))
        return serial(indptr, indices, costs, v, col4row, *args)

    monkeypatch.setattr(module, "auction_phase", counting)
    n = 3000
    indptr, indices, costs = _random_core(n, 8, seed=7, ties=False)
    v, col4row, row4col = np.zeros(n), np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    counters, reached = np.zeros(3, dtype=np.int64), np.empty(n, dtype=np.int64)
    assert module.scaled_auction(indptr, indices, costs, *_NO_COLUMNS, v, col4row, row4col, 25.0, 1e-4, 6.0, 100.0,
                                 20 * n, 1000 * n, reached, counters)
    assert left and left == [0] * len(left)
    assert np.array_equal(np.sort(col4row), np.arange(n))
    rounding = 1e-12 * (np.abs(v).max() + np.abs(costs).max())
    assert release_loose_rows(indptr, indices, costs, v, col4row, row4col, 1e-4 + rounding) == 0


@pytest.mark.parametrize("seed", range(3))
def test_contending_threads_keep_eps_slackness(seed, core_threads):
    """Rows next to each other share their columns (a band of 17 columns, costs 0 to 3: price
    wars), so the team's threads bid for the same columns at once: every row still ends within
    the last ε of its cheapest column (a bid whose column was outbid meanwhile must be made again:
    without that, rows of 10 seeds out of 10 broke it)."""
    from dlap.backends.cpu import points as module
    from dlap.backends.cpu.points import release_loose_rows

    n, k, band = 4000, 8, 8
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), k + 1)
    near = (np.arange(n)[:, None] + rng.integers(-band, band + 1, (n, k))) % n
    keys = np.unique(rows * n + np.concatenate([near, np.arange(n)[:, None]], axis=1).ravel())
    indptr, indices = np.searchsorted(keys // n, np.arange(n + 1)).astype(np.int64), (keys % n).astype(np.int32)
    costs = rng.integers(0, 4, keys.size).astype(np.float64)
    last = 1e-4
    v, col4row, row4col = np.zeros(n), np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    counters, reached = np.zeros(3, dtype=np.int64), np.empty(n, dtype=np.int64)
    assert module.scaled_auction(indptr, indices, costs, *_NO_COLUMNS, v, col4row, row4col, 1.0, last, 6.0, 100.0,
                                 20 * n, 1000 * n, reached, counters)
    assert np.array_equal(np.sort(col4row), np.arange(n)) and np.array_equal(row4col[col4row], np.arange(n))
    rounding = 1e-12 * (np.abs(v).max() + np.abs(costs).max())
    assert release_loose_rows(indptr, indices, costs, v, col4row, row4col, last + rounding) == 0


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n, m, k", [(1, 2, 1), (40, 60, 3), (2000, 2400, 8), (3000, 3300, 1)])
def test_the_rectangular_auction_leaves_unassigned_columns_at_the_top(n, m, k, ties, core_threads):
    """With more columns than rows the reverse iterations leave every row assigned within the
    last ε of its cheapest column, every unassigned column at price 0 and every price at most 0
    (the rectangular dual), from zero prices and again from its own, on one thread and on a team."""
    from dlap.backends.cpu import points as module
    from dlap.backends.cpu.points import release_loose_rows
    from dlap.points.core import SparseCore

    rng = np.random.default_rng(n + m + k)
    core = SparseCore(n, m)
    rows = np.repeat(np.arange(n), k + 1)
    cols = np.concatenate([rng.integers(0, m, (n, k)), np.arange(n)[:, None]], axis=1).ravel()
    core.add(rows, cols, rng.integers(0, 4, rows.size).astype(np.float64) if ties else rng.random(rows.size) * 100)
    indptr, indices, costs = core.csr()
    last = 1e-4
    v, col4row, row4col = np.zeros(m), np.full(n, -1, dtype=np.int64), np.full(m, -1, dtype=np.int64)
    counters, reached = np.zeros(3, dtype=np.int64), np.empty(n, dtype=np.int64)
    for start in (25.0, 1.0):
        assert module.scaled_auction(indptr, indices, costs, *core.csc(), v, col4row, row4col, start, last, 6.0,
                                     100.0, 20 * n, 1000 * n, reached, counters)
        assert (col4row >= 0).all() and np.array_equal(row4col[col4row], np.arange(n))
        assert (row4col >= 0).sum() == n and (v <= 0).all() and (v[row4col < 0] == 0).all()
        rounding = 1e-12 * (np.abs(v).max() + np.abs(costs).max())
        assert release_loose_rows(indptr, indices, costs, v.copy(), col4row.copy(), row4col.copy(),
                                  last + rounding) == 0


@pytest.mark.parametrize("team", [False, True])
def test_the_reverse_bids_stop_at_their_budget(team):
    """Two rows hold columns 0 and 1; columns 2 and 3, below the level, each want row 0 most: with
    no bids allowed the reverse iterations give up (-1); with enough, on one thread (two bids) or
    on a team (two, or more where both columns bid for row 0 at once; a team's threads claim bids
    ``SHARED_BIDS`` at a time, so its budget must leave them that), every row keeps a column,
    unassigned columns at price 0 and the others below it."""
    from dlap.backends.cpu import points as module
    from dlap.points.core import SparseCore

    core = SparseCore(2, 4)
    core.add(np.array([0, 0, 0, 1, 1, 1]), np.array([0, 2, 3, 1, 2, 3]), np.array([5.0, 0.0, 1.0, 5.0, 3.0, 4.0]))
    indptr, indices, costs = core.csr()
    for limit in (0, module.SHARED_BIDS * 64):
        v = np.array([0.0, 0.0, -2.0, -2.0])
        col4row, row4col = np.array([0, 1]), np.array([0, 1, -1, -1])
        locks = np.zeros(4, dtype=np.int64) if team else None
        bids = module.reverse_auction(indptr, indices, costs, *core.csc(), v, col4row, row4col, 0.5, limit, locks)
        assert bids == -1 if not limit else (bids >= 2 if team else bids == 2)
        if limit:
            assert sorted(col4row.tolist()) == [2, 3] and np.array_equal(row4col[col4row], [0, 1])
            assert (v <= 0).all() and (v[row4col < 0] == 0).all() and not locks_held(locks)


@pytest.mark.parametrize("blocked", [False, True])
def test_a_loose_rows_column_is_raised_where_no_other_row_minds(blocked):
    """Row 0 holds column 0 at 0.7 above its cheapest (column 2, unassigned at the top price 0):
    column 0's dual rises by 0.7, and row 0 is tight, unless row 1's edge to column 0 would then
    undercut row 1's cheapest; every row's cheapest ``c - v`` stays what it was."""
    from dlap.backends.cpu.points import release_loose_rows, tighten_by_column_duals
    from dlap.points.core import SparseCore

    core = SparseCore(2, 3)
    core.add(np.array([0, 0, 1, 1]), np.array([0, 2, 0, 1]), np.array([0.2, 0.5, 1.5 if blocked else 3.0, 1.0]))
    indptr, indices, costs = core.csr()
    v, col4row, row4col = np.array([-1.0, -1.0, 0.0]), np.array([0, 1]), np.array([0, 1, -1])
    cheapest = [min(costs[e] - v[indices[e]] for e in range(indptr[i], indptr[i + 1])) for i in range(2)]
    tighten_by_column_duals(indptr, indices, costs, *core.csc(), v, col4row, 0.0)
    assert v[0] == (-1.0 if blocked else pytest.approx(-0.3)) and (v <= 0).all()
    assert [min(costs[e] - v[indices[e]] for e in range(indptr[i], indptr[i + 1])) for i in range(2)] == \
        pytest.approx(cheapest)
    assert release_loose_rows(indptr, indices, costs, v, col4row, row4col, 0.0) == (1 if blocked else 0)


def locks_held(locks) -> bool:
    return locks is not None and bool(locks.any())


@pytest.mark.parametrize("listed", [False, True])
def test_a_matching_that_ignores_costs_reports_its_dead_end(listed):
    """match_rows: rows 0-2 reach only columns 0 and 1, so the third row has no path, and the
    rows its search reached are listed; with an edge from row 0 to column 2 (in the CSR, or in
    the lists of edges not in it yet) every row is matched, through an alternating path."""
    from dlap.backends.cpu.points import match_rows
    from dlap.points.core import NewEdges

    col4row, row4col = np.full(3, -1, dtype=np.int64), np.full(3, -1, dtype=np.int64)
    scanned, counters = np.empty(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    indptr, indices = np.array([0, 2, 4, 6], dtype=np.int64), np.array([0, 1, 1, 0, 1, 0], dtype=np.int32)
    new = NewEdges(3)
    assert match_rows(indptr, indices, col4row, row4col, np.arange(3), scanned, counters, new.first, new.next,
                      new.cols) == 2
    assert sorted(scanned[: counters[2]].tolist()) == [0, 1, 2] and col4row[2] == -1
    assert sorted(col4row[:2].tolist()) == [0, 1] and all(row4col[col4row[i]] == i for i in range(2))
    if listed:
        new.add(np.array([1, 0, 1]), np.array([1, 2, 0]), np.zeros(3))  # row 1's edges are in the CSR already
    else:
        indptr, indices = np.array([0, 3, 5, 7], dtype=np.int64), np.array([0, 1, 2, 1, 0, 1, 0], dtype=np.int32)
    assert match_rows(indptr, indices, col4row, row4col, np.array([2]), scanned, counters, new.first, new.next,
                      new.cols) == -1
    assert sorted(col4row.tolist()) == [0, 1, 2] and all(row4col[col4row[i]] == i for i in range(3))


def test_new_edges_list_each_rows_columns():
    """NewEdges: added in batches, each row's list holds exactly its edges' columns, and the
    edges come back whole in the order added."""
    from dlap.points.core import NewEdges

    rng = np.random.default_rng(3)
    new, added = NewEdges(20), []
    for size in (1, 30, 0, 12):
        rows, cols = rng.integers(0, 20, size), rng.integers(0, 50, size)
        new.add(rows, cols, cols * 0.5)
        added.append((rows, cols))
    rows, cols = np.concatenate([r for r, _ in added]), np.concatenate([c for _, c in added])
    for i in range(20):
        listed, e = [], new.first[i]
        while e >= 0:
            listed.append(int(new.cols[e]))
            e = new.next[e]
        assert sorted(listed) == sorted(cols[rows == i].tolist())
    all_rows, all_cols, all_costs = new.edges()
    assert np.array_equal(all_rows, rows) and np.array_equal(all_cols, cols) and np.array_equal(all_costs, cols * 0.5)
    assert sorted(new.columns_of(np.array([3, 4])).tolist()) == sorted(cols[np.isin(rows, [3, 4])].tolist())


@pytest.mark.gpu
def test_cupy_points_are_solved_on_the_gpu_and_answered_there():
    import cupy

    rng = np.random.default_rng(12)
    a, b = rng.random((400, 2)), rng.random((300, 2))
    result = dlap.solve_points(cupy.asarray(a), cupy.asarray(b))
    assert result.stats.device == "gpu" and isinstance(result.row_ind, cupy.ndarray)
    assert result.verify().optimal
    assert result.objective == pytest.approx(dlap.solve_points(a, b, device="cpu").objective, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 60), m=st.integers(1, 60), d=st.integers(1, 40), metric=st.sampled_from(SCREENED_METRICS),
       maximize=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31 - 1),
       copies=st.booleans(), k=st.integers(1, 8))
def test_matrix_products_give_the_scans_answers(n, m, d, metric, maximize, dtype, seed, copies, k):
    """dlap.points.screen: each row's nearest columns and pricing through matrix products are
    the scan's to the bit (the same columns, costs, violators and order), near-ties included
    (copies: columns that repeat a few points, more within reach than a row's buffer holds)."""
    from dlap.backends.cpu import points as kernels
    from dlap.certificate import _minima_with_errors
    from dlap.points.metrics import METRIC_IDS, norms
    from dlap.points.screen import Screen

    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)).astype(dtype), rng.random((m, d)).astype(dtype)
    if copies:
        b = b[rng.integers(0, min(3, m), m)]
    na, nb = norms(a, metric, np), norms(b, metric, np)
    args = (a, b, na, nb, METRIC_IDS[metric], 0.0, -1.0 if maximize else 1.0)
    screen = Screen(kernels, *args)
    k = min(k, m)
    found = [(np.empty((n, k), dtype=np.int64), np.empty((n, k))) for _ in range(2)]
    kernels.nearest_columns(*args, k, *found[0])
    screen.nearest_columns(k, *found[1])
    np.testing.assert_array_equal(found[0][0], found[1][0])
    np.testing.assert_array_equal(found[0][1], found[1][1])
    u, v = rng.random(n) * 0.5, -rng.random(m) * 0.5  # duals that many pairs violate
    priced = [(np.full((n, 4), -7, dtype=np.int64), np.full((n, 4), 7.0), np.empty(n, dtype=np.int64)) for _ in range(2)]
    kernels.price(*args, u, v, PRICING_RTOL, 0.0, *priced[0])
    screen.price(u, v, PRICING_RTOL, 0.0, *priced[1])
    for scanned, screened in zip(*priced, strict=True):
        np.testing.assert_array_equal(scanned, screened)
    full = np.empty((n, m))  # the certificate's scan: each row's least reduced cost and its error
    kernels.block_costs(*args, 0, full)
    scale, w = 0.5, rng.random(m) - 0.5
    d = full * scale
    for scanned, screened in zip(_minima_with_errors(np, d - w[None, :], d, w[None, :], 1),
                                 screen.reduced_minima(scale, [w])[0], strict=True):
        np.testing.assert_array_equal(scanned, screened)


def test_points_of_many_coordinates_are_screened():
    from dlap.points.search import PairSearch

    a, b = generate.points("embeddings", 300, 250, dim=40, seed=1)
    result = _check(a, b, "cosine")
    assert result.stats.phase_counts["pricing_rounds"] >= 1
    assert PairSearch(None, a, b, np.ones(300), np.ones(250), "cosine", 0.0, 1.0).screened
    assert not PairSearch(None, a[:, :20], b[:, :20], np.ones(300), np.ones(250), "cosine", 0.0, 1.0).screened
    assert not PairSearch(None, a, b, np.ones(300), np.ones(250), "cityblock", 0.0, 1.0).screened
    assert result.matrix_ref()._search(1.0).screened  # verify() asks the products, not a scan of every block


def test_the_core_by_column_is_its_transpose():
    """SparseCore.csc (a counting sort of the CSR): each column's rows ascending, with their costs."""
    from dlap.points.core import SparseCore

    rng = np.random.default_rng(4)
    core = SparseCore(50, 70)
    core.add(rng.integers(0, 50, 400), rng.integers(0, 70, 400), rng.random(400))
    indptr, rows, costs = core.csc()
    assert indptr[0] == 0 and indptr[-1] == core.size and np.all(np.diff(indptr) >= 0)
    row_indptr, cols, row_costs = core.csr()
    edge_rows = np.repeat(np.arange(50), np.diff(row_indptr))  # ascending by row, then column
    for j in range(70):
        mine = slice(indptr[j], indptr[j + 1])
        expected = np.flatnonzero(cols == j)
        assert np.array_equal(rows[mine], edge_rows[expected]) and np.array_equal(costs[mine], row_costs[expected])


def test_a_cores_first_edges_are_those_add_gives():
    """SparseCore.fill (each row's columns sorted in place) builds the core SparseCore.add builds
    from the same lists: each row's columns ascending, a repeated column once with its first
    cost, -1 none."""
    from dlap.points.core import SparseCore

    rng = np.random.default_rng(7)
    index, costs = rng.integers(-1, 30, (60, 9)), rng.random((60, 9))
    index[5] = -1
    filled, added = SparseCore(60, 30), SparseCore(60, 30)
    filled.fill(index, costs)
    added.add(np.repeat(np.arange(60), 9), index.ravel(), costs.ravel())
    assert filled.size == added.size < index.size
    for mine, theirs in zip(filled.csr(), added.csr(), strict=True):
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)


@pytest.mark.parametrize("seed", range(4))
def test_merged_edges_keep_the_first_cost_of_each_pair(seed, core_threads):
    """merge_edges against NumPy's unique over the edges there and the new ones, in order: every
    pair once, each row's columns ascending, with its first cost; pairs with a row or column -1
    skipped; rows with many new edges (merge-sorted), few (insertion-sorted) and none (copied),
    on one thread and on a team; no new edge: the same edges back."""
    from dlap.backends.cpu.points import merge_edges

    rng = np.random.default_rng(seed)
    n_rows, n_cols = int(rng.integers(1, 80)), int(rng.integers(1, 80))
    keys = np.unique(rng.integers(0, n_rows * n_cols, int(rng.integers(0, 400))))
    indptr = np.searchsorted(keys, np.arange(n_rows + 1) * n_cols).astype(np.int64)
    indices, costs = (keys % n_cols).astype(np.int32), rng.random(keys.size)
    size = int(rng.integers(0, 3000))
    rows, cols = rng.integers(-1, n_rows, size), rng.integers(-1, n_cols, size)
    rows[: size // 3] = rng.integers(0, min(n_rows, 3))  # a few rows with many new edges
    new_costs = rng.random(size)
    merged_indptr, merged_indices, merged_costs, added = merge_edges(indptr, indices, costs, rows, cols, new_costs)
    kept = (rows >= 0) & (cols >= 0)
    every, first = np.unique(np.concatenate((keys, rows[kept] * n_cols + cols[kept])), return_index=True)
    assert added == every.size - keys.size and merged_indices.dtype == np.int32
    assert np.array_equal(merged_indptr, np.searchsorted(every, np.arange(n_rows + 1) * n_cols))
    assert np.array_equal(merged_indices, every % n_cols)
    assert np.array_equal(merged_costs, np.concatenate((costs, new_costs[kept]))[first])
    again = merge_edges(merged_indptr, merged_indices, merged_costs, rows, cols, new_costs)
    assert again[3] == 0 and all(np.array_equal(x, y) for x, y in zip(again[:3], (merged_indptr, merged_indices,
                                                                                  merged_costs), strict=True))


@pytest.mark.parametrize("metric", ["euclidean", "cityblock", "cosine"])
def test_the_queries_reuse_the_trees_that_numbered_the_points(metric):
    """PointsProblem's k-d trees (perm the identity over the renumbered points) answer the queries
    as trees built afresh; cosine's trees are over the normalised points, so built afresh."""
    from dlap.points.search import PairSearch
    from dlap.points.solve import PointsProblem

    a, b = generate.points("uniform", 700, 900, seed=2)
    problem = PointsProblem(a, b, metric, None, "cpu", None)
    side = problem.rows_side
    searches = [PairSearch(side.kernels, side.a, side.b, side.a_norms, side.b_norms, metric, 2.0, 1.0, trees)
                for trees in (problem.trees, None)]
    assert (searches[0]._built != {}) == (metric != "cosine")
    for found, fresh in zip(searches[0].nearest_columns(5) + searches[0].nearest_rows(5),
                            searches[1].nearest_columns(5) + searches[1].nearest_rows(5), strict=True):
        assert np.array_equal(found, fresh)


def test_each_row_gets_every_column_of_its_cells_partner(monkeypatch):
    """40 rows in cells of 4, 52 columns in 13 cells; the cells' assignment given: each row's
    pairs are its partner cell's columns, every one, rows ascending."""
    monkeypatch.setattr(coarse, "CELL_POINTS", 4)
    rng = np.random.default_rng(0)
    rows, cols = rng.random((40, 2)), rng.random((52, 2))
    partner = rng.permutation(13)[:10]
    seen = {}

    def assign(row_centroids, col_centroids):
        seen["shapes"] = row_centroids.shape, col_centroids.shape
        np.testing.assert_allclose(row_centroids[3], rows[12:16].mean(axis=0))
        return partner, 1e9

    transport = coarse.transport_pairs(rows, cols, assign)
    pair_rows, pair_cols = transport.pairs
    assert not transport.price_early
    assert seen["shapes"] == ((10, 2), (13, 2))
    assert np.all(np.diff(pair_rows) >= 0)
    col_bounds = coarse.cell_bounds(52, 13)
    for i in range(40):
        cell = partner[i // 4]
        np.testing.assert_array_equal(pair_cols[pair_rows == i], np.arange(col_bounds[cell], col_bounds[cell + 1]))


def test_local_transport_gets_no_coarse_pairs(monkeypatch):
    """A coarse solve whose pricing found at most LOCAL_VIOLATORS a cell: the neighbours suffice
    (unless ``always``: then the pairs, and a pricing pass early)."""
    monkeypatch.setattr(coarse, "CELL_POINTS", 4)
    rows = np.random.default_rng(1).random((40, 2))
    local, spread = 10 * coarse.LOCAL_VIOLATORS, 10 * coarse.LOCAL_VIOLATORS + 1
    assert coarse.transport_pairs(rows, rows, lambda r, c: (np.arange(10), local)) == (None, False)
    for always in (False, True):
        transport = coarse.transport_pairs(rows, rows, lambda r, c: (np.arange(10), spread), always=always)
        assert transport.pairs is not None and not transport.price_early
    transport = coarse.transport_pairs(rows, rows, lambda r, c: (np.arange(10), local), always=True)
    assert transport.pairs is not None and transport.price_early


def test_only_rows_whose_partner_cell_is_out_of_reach_keep_their_pairs():
    rows = np.array([0, 0, 1, 1, 2, 4])
    costs = np.array([5.0, 6.0, 1.0, 9.0, 3.0, 7.0])
    reach = np.array([4.0, 4.0, 3.0, 0.0, 6.0])
    np.testing.assert_array_equal(coarse.beyond_reach(rows, costs, reach), [True, True, False, False, False, True])


@pytest.mark.parametrize("family, n, m, maximize", [("shifted", 600, 600, False), ("clustered", 500, 640, False),
                                                     ("clustered", 640, 500, True), ("shifted", 520, 400, False)])
def test_coarse_transport_candidates_reach_the_optimum(family, n, m, maximize, monkeypatch):
    """Cells of 8 from 64 rows, whatever the coarse solve priced (so these sets get them): the
    edges join the first core, and the answer is scipy's, both orientations and maximised."""
    monkeypatch.setattr(coarse, "MIN_ROWS", 64)
    monkeypatch.setattr(coarse, "CELL_POINTS", 8)
    monkeypatch.setattr(coarse, "LOCAL_VIOLATORS", -1.0)
    a, b = generate.points(family, n, m, seed=n)
    result = _check(a, b, maximize=maximize)
    assert result.stats.phase_counts["coarse_edges"] > 0


def test_which_sets_get_coarse_pairs():
    """At the default settings: the coarse problem of shifted clouds prices hundreds of violators
    a cell, that of uniform sets none (their transport is local: no edges join the core), but
    under the Euclidean distance uniform sets get them all the same."""
    n = coarse.MIN_ROWS + 1000
    for metric in ("sqeuclidean", "euclidean"):
        shifted = dlap.solve_points(*generate.points("shifted", n, seed=2), metric)
        assert shifted.stats.phase_counts["coarse_edges"] > n
        assert "early_violators" not in shifted.stats.phase_counts
    uniform = generate.points("uniform", n, seed=2)
    for metric in ("sqeuclidean", "cityblock"):
        counts = dlap.solve_points(*uniform, metric).stats.phase_counts
        assert "coarse_edges" not in counts and "early_violators" not in counts
    counts = dlap.solve_points(*uniform, "euclidean").stats.phase_counts
    assert counts["coarse_edges"] > 0 and counts["early_violators"] > 0  # and it is priced early


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), m=st.integers(1, 60), d=st.integers(1, 4), metric=st.sampled_from(METRICS),
       maximize=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**31 - 1),
       cell=st.integers(2, 6), early=st.booleans())
def test_coarse_pairs_of_any_sets_keep_the_optimum(n, m, d, metric, maximize, dtype, seed, cell, early):
    """Coarse pairs for every set of at least 2 rows, whatever its coarse solve priced (cells of
    2 to 6 points, the coarse problems themselves coarsened again); ``early``: every transport
    local, every metric priced early (the first auction stopped at EARLY_PRICING_EPS)."""
    rng = np.random.default_rng(seed)
    a, b = (rng.random((n, d)) + 0.1).astype(dtype), (rng.random((m, d)) + 0.1).astype(dtype)
    p = 1.5 if metric == "minkowski" else None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(coarse, "MIN_ROWS", 2)
        patch.setattr(coarse, "CELL_POINTS", cell)
        patch.setattr(coarse, "LOCAL_VIOLATORS", np.inf if early else -1.0)
        if early:
            patch.setattr(coarse, "ALWAYS_METRICS", tuple(METRICS))
        result = _check(a, b, metric, p, maximize, candidates=2)
    priced_early = early and min(n, m) >= 2 and metric != "cosine"  # (cosine has no k-d order: no coarse problem)
    assert ("early_violators" in result.stats.phase_counts) == priced_early


@pytest.mark.gpu
@pytest.mark.parametrize("family, n, m", [("shifted", 600, 600), ("clustered", 500, 640)])
def test_coarse_transport_candidates_of_gpu_points(family, n, m, monkeypatch):
    monkeypatch.setattr(coarse, "MIN_ROWS", 64)
    monkeypatch.setattr(coarse, "CELL_POINTS", 8)
    monkeypatch.setattr(coarse, "LOCAL_VIOLATORS", -1.0)
    a, b = generate.points(family, n, m, seed=n)
    result = _check(a, b, device="gpu")
    assert result.stats.phase_counts["coarse_edges"] > 0
