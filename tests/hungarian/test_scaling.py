"""The ε-scaling engine (dlap/hungarian/scaling.py) and method="auto"'s choice of it, on the CPU.

Its answers are checked against scipy on every hard family and shape (the hypothesis strategies
run it too, through conftest.CONFIGS); what is specific to it is checked here: that the exact phase
is exact from any prices at all (the property its correctness rests on), the ε schedule, the
rectangular duals its virtual rows give, and that "auto" hands it the structured costs only.
"""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import dlap
from dlap import generate
from dlap.backends.cpu import CPUBackend
from dlap.backends.cpu import backend as cpu_backend
from dlap.hungarian.scaling import SCALING_FACTOR, epsilon_schedule, exact_phase
from dlap.problem import prepare
from dlap.result import Stats

from ..helpers import assert_same_optimum, assert_valid, exact_optimum, exact_total, within_resolution
from ..strategies import SETTINGS, STRATEGIES, check_strategy

HARD = ["geometric", "geometric-int", "geometric-3d", "geometric-disjoint", "geometric-benefit", "machol-wien"]


@pytest.mark.parametrize("family", HARD + ["ties", "uniform", "float"])
@pytest.mark.parametrize("n", [1, 2, 17, 150])
@pytest.mark.parametrize("method", ["auto", "scaling"])
def test_every_family_agrees_with_scipy(family, n, method):
    cost = generate.family(family, n, seed=n)
    assert_same_optimum(cost, family in generate.MAXIMIZE, method=method)


@pytest.mark.parametrize("family", HARD)
@pytest.mark.parametrize("shape", [(60, 90), (90, 60), (89, 90)])
def test_rectangular_both_ways(family, shape):
    """Virtual rows of zero costs hold the unassigned columns; the duals are the rectangular
    problem's (v <= 0 on the longer side, 0 where unassigned), so the certificate closes."""
    cost = generate.family(family, max(shape), seed=3)[: shape[0], : shape[1]]
    for maximize in (False, True):
        result = assert_same_optimum(cost, maximize, method="scaling")
        long_duals = result.col_duals if shape[0] < shape[1] else result.row_duals
        sign = -1 if maximize else 1
        assert (sign * long_duals <= 0).all()
        unassigned = np.setdiff1d(np.arange(max(shape)), result.col_ind if shape[0] < shape[1] else result.row_ind)
        assert (long_duals[unassigned] == 0).all()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.integers(1, 8), st.integers(1, 8)),
    data=st.data(),
)
def test_the_exact_phase_is_exact_from_any_prices(shape, data):
    """The exact phase starts with every row free, so any prices will do: its result is optimal
    from random ones too (prices are what make it fast, never what makes it right)."""
    n_rows, n_cols = sorted(shape)
    cost = data.draw(arrays(np.int64, (n_rows, n_cols), elements=st.integers(-20, 20)))
    prices = data.draw(arrays(np.float64, n_cols, elements=st.integers(-50, 50).map(float)))
    backend = CPUBackend()
    state = backend.allocate(prepare(cost))
    state.v[:] = prices
    assert exact_phase(backend, state, {}, keep=False)
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    assert cost[np.arange(n_rows), state.row_match].sum() == cost[rows, cols].sum()
    assert len(set(state.row_match.tolist())) == n_rows
    reduced = cost - state.u[:, None] - state.v[None, :]
    assert reduced.min() >= 0 and (reduced[np.arange(n_rows), state.row_match] == 0).all()
    if n_rows < n_cols:  # the rectangular problem's dual: v <= 0, and 0 where unassigned
        assert (state.v <= 0).all() and (state.v[np.setdiff1d(np.arange(n_cols), state.row_match)] == 0).all()


def test_epsilon_schedule():
    assert epsilon_schedule(0.0, 100, integer=True) == []
    assert epsilon_schedule(float("inf"), 100, integer=False) == []
    floats = epsilon_schedule(1000.0, 10, integer=False)
    assert floats[0] == 100.0 and all(a / b == pytest.approx(SCALING_FACTOR) for a, b in itertools.pairwise(floats))
    assert floats[-1] >= 100.0 / 16 / 10
    ints = epsilon_schedule(1000.0, 10, integer=True)
    assert ints[0] == 100.0 and all(e == int(e) and e >= 1 for e in ints)
    assert epsilon_schedule(5.0, 10, integer=True) == []  # ε would be below 1: exact phase at once


def test_integer_prices_stay_integral():
    """Integer costs get integer ε and prices, so the exact phase's arithmetic is exact."""
    cost = generate.geometric_int(300, seed=5)
    result = dlap.solve(cost, method="scaling", device="cpu")
    assert result.stats.phase_counts["scaling_phase"] >= 2
    # whole numbers in int64; verify() checks them exactly (a rounded fraction would not be feasible)
    assert result.col_duals.dtype == result.row_duals.dtype == np.int64
    assert result.verify().optimal


def test_machol_wien_is_proved_by_the_greedy_prices():
    """c_ij = i*j: the greedy assignment by regret is optimal and the fitted prices prove it, so
    no ε-phase runs, and the exact phase keeps every greedy pair (all tight) and searches for none."""
    n = 800
    cost = generate.machol_wien(n)
    result = dlap.solve(cost, method="scaling", device="cpu")
    assert "scaling_phase" not in result.stats.phase_counts
    assert result.stats.phase_counts["rows_scanned"] == 0
    assert result.stats.iterations == 0
    assert_valid(result, cost)
    auto = dlap.solve(cost, device="cpu")
    assert auto.stats.method == "scaling" and auto.stats.phase_counts["rows_scanned"] == 0
    assert_valid(auto, cost)


def test_infeasible_and_forbidden_pairs():
    cost = np.array([[1.0, np.inf, 3.0], [np.inf, np.inf, 2.0], [4.0, 1.0, np.inf]])
    assert_same_optimum(cost, method="scaling")
    cost = np.array([[1.0, np.inf, np.inf], [np.inf, 3.0, 2.0], [4.0, np.inf, np.inf]])
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        dlap.solve(cost, method="scaling")
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        dlap.solve(np.array([[1.0, 2.0], [np.inf, np.inf]]), method="scaling")


@pytest.mark.parametrize("family", ["geometric-int", "geometric-disjoint", "geometric-benefit", "machol-wien"])
def test_auto_hands_structured_costs_to_scaling(family):
    """(Square float matrices that JV leaves at most half free go to the sparse engine on the CPU:
    tests/test_sparse_matrix.py.)"""
    result = dlap.solve(generate.family(family, 600, seed=0), maximize=family in generate.MAXIMIZE, device="cpu")
    assert result.stats.method == "scaling"
    assert result.stats.phase_counts["jv_free_rows"] > 60
    assert result.stats.phase_counts["handover_iteration"] == 0  # the CPU hands over before any iteration
    # the ε-phases start from JV's prices where JV matched most rows, else from the greedy by regret
    most_free = result.stats.phase_counts["jv_free_rows"] > 300
    assert result.stats.init == ("prices" if most_free else "jv")


@pytest.mark.filterwarnings("error")
@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 25), integer=st.booleans())
def test_the_jv_start_is_exact(data, n, integer):
    """ε-scaling from JV initialisation's state (the CPU's hand-over at once) on any matrix: ties,
    constant matrices (prices of spread 0: no ε-phase, JV's tight pairs kept), tiny, negative and
    huge entries (prices whose squares overflow: no warning)."""
    from dlap.hungarian.phases import initialise
    from dlap.hungarian.scaling import solve_scaling
    from dlap.timing import PhaseTimer

    values = st.integers(-5, 5) if integer else st.sampled_from([0.0, 1.0, 1e-12, 2.5, -3.0, 7e5, 1e300, -1e300])
    cost = data.draw(arrays(np.int64 if integer else np.float64, (n, n), elements=values))
    backend, stats = CPUBackend(), Stats()
    state = backend.allocate(prepare(cost))
    initialise(backend, state, "jv", stats, PhaseTimer(stats))
    solve_scaling(backend, state, stats, start="jv")
    assert sorted(state.row_match.tolist()) == list(range(n))
    mine, exact = exact_total(cost[np.arange(n), state.row_match]), exact_optimum(cost, False)
    # floats: to the resolution of duals beside the largest entry (docs/guide/exactness.md; found by
    # hypothesis: 0, -1e300 and 1e300 beside -3, optimum -3, JV and every method 0, scipy too at times)
    assert mine == exact if integer else within_resolution(mine, exact, cost), (mine, exact)


@pytest.mark.parametrize("f", [0.1, 1.0, 10.0])
def test_auto_keeps_iid_costs_with_the_variants_on_the_cpu(f):
    result = dlap.solve(generate.family("uniform", 600, f=f, seed=1), device="cpu")
    assert result.stats.method in ("classical", "tree")
    assert result.stats.phase_counts["jv_free_rows"] <= 0.1 * 600
    assert "handover_iteration" not in result.stats.phase_counts


def test_the_hand_over_waits_for_the_iteration_after_a_dual_update():
    """The windows an H200 ran on uniform f = 1, n = 20000 (2077 rows free after JV; 0 is an
    iteration that ended in a dual update; scaling-gpu-20261123-auto-repro.log): the one that
    was handed over (then 7 s in ε-scaling) waits for the iteration after its dual update, which
    augmented about 400 paths in every other run; structured windows still hand over."""
    from dlap.hungarian.auto import stalled

    n_rows = 20000
    assert not stalled([21, 1, 1, 0], 2077 - 990 - 169 - 21 - 2, n_rows, searching=False)
    assert not stalled([1, 1, 0, 408], 886, n_rows, searching=False)
    assert stalled([1, 0, 1, 1], 1400, n_rows, searching=False)  # geometric-like
    assert stalled([0, 0, 1, 0], 1999, n_rows, searching=False)  # Machol-Wien-like
    assert stalled([1, 1, 1, 1], 1400, n_rows, searching=True)  # the tree variant's searches
    assert not stalled([1, 1, 1, 1], 1400, n_rows, searching=False)  # no dual update seen yet
    assert not stalled([1, 0, 1], 1400, n_rows, searching=False)  # the window is not full
    assert not stalled([1, 0, 1, 1], 399, n_rows, searching=False)  # under 2% free: finish here


def test_the_hybrid_hands_over_from_a_lower_jv_share():
    """The free rows an H200's JV initialisation left (gpu-20261123-s7-handover-trace.jsonl): the
    hybrid may hand points in 3-D at n = 20000 over (8.9%) but not uniform floats (3.7%); the CPU's
    variants, whose one-root searches augment one path each on uniform costs too, keep 10%."""
    from dlap.hungarian.auto import jv_says_structured

    assert jv_says_structured(1772, 20000, "hybrid")  # points in 3-D
    assert not jv_says_structured(738, 20000, "hybrid")  # uniform floats
    assert not jv_says_structured(1772, 20000, "tree")
    assert jv_says_structured(1033, 10000, "tree")  # points in 3-D at n = 10000: 10.3%


def test_the_hybrids_hand_over_rule_on_the_traces_an_h200_ran():
    """The free rows at every check of the GPU hybrid, logged on an H200 with the hand-over off
    (benchmarks/results/hybrid-handover-trace-h200-*): under the hybrid's JV gate and the stall test,
    no uniform instance would have been handed over (f = 0.1 to 10, n = 5000 to 100000), nor
    uniform floats (which stall, but JV leaves them under the gate), and every geometric one would,
    within six checks."""
    from dlap.hungarian.auto import SCALING_WINDOW, jv_says_structured, stalled

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    runs = []  # ((family, f, n), JV's free rows, [(free rows, paths, searching) at each check])
    for line in (results / "hybrid-handover-trace-h200-a.log").read_text().splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            free = d["trace"]
            runs.append(((d["family"], d["f"], d["n"]), d["jv_free"],
                         [(b, a - b, False) for a, b in zip(free, free[1:], strict=False)]))
    for line in (results / "hybrid-handover-trace-h200-b.jsonl").read_text().splitlines():
        d = json.loads(line)
        runs.append(((d["family"], d["f"], d["n"]), d["jv_free"], [(t[1], t[2], bool(t[3])) for t in d["trace"]]))
    handed = []  # (run, the check at which it is handed over or None)
    for key, jv_free, checks in runs:
        n, window, at = key[2], [], None
        for k, (n_free, paths, searching) in enumerate(checks):
            window.append(paths)
            if jv_says_structured(jv_free, n, "hybrid") and stalled(window[-SCALING_WINDOW:], n_free, n, searching):
                at = k
                break
        handed.append((key, at))
    uniform = [at for key, at in handed if key[0] == "uniform"]
    assert len(uniform) == 10 and uniform == [None] * 10, handed
    floats = [at for key, at in handed if key[0] == "float"]  # they stall, but JV leaves them under the gate
    assert len(floats) == 4 and floats == [None] * 4, handed
    geometric = [at for key, at in handed if key[0].startswith("geometric")]
    assert len(geometric) == 6 and all(at is not None and at <= 5 for at in geometric), handed


@pytest.mark.parametrize("family, f", [("uniform", 1.0), ("uniform", 10.0), ("float", None), ("ties", None)])
def test_auto_keeps_the_variants_for_iid_costs(family, f):
    result = dlap.solve(generate.family(family, 300, f, seed=1), device="cpu")
    assert result.stats.method in ("classical", "tree")
    assert result.stats.phase_counts["jv_free_rows"] <= 30


def test_auto_keeps_rectangular_integer_matrices_with_the_variants():
    """A rectangular integer benefit matrix (JV leaves most rows free) stays with the variants: the
    ε-scaling engine is for square matrices and the sparse engine for float ones
    (tests/test_sparse_matrix.py: the float benefit matrix goes there)."""
    cost = generate.geometric_int(300, m=320, seed=1, same_points=True)
    result = dlap.solve(cost, maximize=True, device="cpu")
    assert result.stats.method == "tree" and result.stats.phase_counts["jv_free_rows"] > 0.5 * 300
    assert_valid(result, cost, maximize=True)


def test_stats_of_a_scaling_solve():
    n = 400
    result = dlap.solve(generate.geometric(n, seed=2), method="scaling", device="cpu")
    stats = result.stats
    assert stats.method == "scaling" and stats.init == "prices"
    phases = stats.phase_counts.get("scaling_phase", 0)
    assert stats.iterations == n * (phases + 1)  # one search per row and phase
    assert stats.phase_counts["rows_scanned"] >= stats.iterations
    for name in ("price_initialisation", "exact_phase"):
        assert stats.phase_seconds[name] > 0


def test_scaling_state_is_shared_with_the_backend_interface():
    """The engine drives any Backend: the CPU backend's primitives leave a valid state."""
    cost = generate.geometric(50, seed=9)
    backend = CPUBackend()
    state = backend.allocate(prepare(cost))
    from dlap.hungarian import solve_scaling

    stats = Stats()
    solve_scaling(backend, state, stats)
    assert sorted(state.row_match.tolist()) == list(range(50))
    assert (state.col_match[state.row_match] == np.arange(50)).all()


def test_prices_do_not_drift_below_the_costs():
    """Found by hypothesis: ε-phases had lowered every price to -16385, where 0 and 1e-12 tie in
    c - v, and the exact phase returned 5e-12 for an optimum of 4e-12. Prices are shifted back
    after each ε-phase, so they stay at the scale of the last ε, where c - v still tells 1e-12
    from 0."""
    cost = np.full((5, 5), 1e-12)
    cost[0, 3] = 0.0
    cost[3, 2], cost[4, 2] = 1.0, 8379.0
    result = assert_same_optimum(cost, method="scaling")
    assert result.objective == 4e-12
    v = result.col_duals
    assert abs(v).max() < 1000
    assert ((1e-12 - v) != (0.0 - v)).all()


def test_a_float_answer_that_cannot_prove_itself_is_solved_again():
    """Found by hypothesis: costs of 1e-12 beside -884737 (maximised) leave the ε-phases' prices
    at the 1e4 scale, where c - v rounds the small costs away and the exact phase returned 2e-12
    for an optimum of 3e-12. The answer does not prove itself at the costs' precision, so the
    tree variant solves the matrix again."""
    cost = np.array([[0.0, 1e-12, 1e-12], [0.0, 1e-12, -8.84737e5], [1e-12, 1e-12, 1e-12]])
    result = assert_same_optimum(cost, True, method="scaling")
    assert result.objective == 3e-12
    assert result.stats.method == "tree" and result.stats.phase_counts["scaling_imprecise"] == 1
    # the hard families' answers prove themselves: no second solve
    for family in ("geometric", "geometric-benefit"):
        stats = dlap.solve(generate.family(family, 300, seed=2), maximize=family in generate.MAXIMIZE,
                           method="scaling").stats
        assert stats.method == "scaling" and "scaling_imprecise" not in stats.phase_counts


def test_an_optimum_of_cost_zero_proves_itself():
    """An optimum of cost 0 leaves proves_itself no tolerance: the float identity matrix always
    fell back to the tree variant (twice the work). Every row at its row's minimum is optimal
    without arithmetic. (The same matrix in bool, which scipy's own suite compares with the
    floats at 3 x 3, runs no ε-phase, since integer ε is at least 1, so its tie-break may differ
    at 7 x 7; both are optimal, and test_scipy_suite runs scipy's comparison.)"""
    identity = np.identity(7)
    result = assert_same_optimum(identity, method="scaling")
    assert result.stats.method == "scaling" and "scaling_imprecise" not in result.stats.phase_counts
    bools = assert_same_optimum(identity.astype(bool), method="scaling")
    assert bools.stats.method == "scaling" and bools.objective == result.objective == 0


# ---------------------------------------------------------------- the ε-phases' half-width copy


@pytest.mark.parametrize("family", ["geometric", "geometric-benefit", "geometric-disjoint"])
def test_the_epsilon_phases_read_a_half_width_copy(family, monkeypatch):
    """Float64 costs: the ε-phases scan a float32 copy (stats say so), the exact phase the matrix
    itself, so the answer is the optimum of the matrix (the duals certify it) and the same as
    without the copy; the caller's array is untouched. (Copies of matrices this small are
    allowed here: by default the CPU copies only matrices that do not fit its caches.)"""
    maximize = family in generate.MAXIMIZE
    cost = generate.family(family, 400, seed=5)
    before = cost.copy()
    assert dlap.solve(cost, method="scaling", device="cpu", maximize=maximize).stats.phase_counts[
        "scaling_narrowed"] == 0
    monkeypatch.setattr(cpu_backend, "NARROW_MIN_ENTRIES", 0)
    narrow = dlap.solve(cost, method="scaling", device="cpu", maximize=maximize)
    assert narrow.stats.phase_counts["scaling_narrowed"] == 1
    monkeypatch.setattr(CPUBackend, "narrow_copy", lambda self, cost, dtype: None)
    plain = dlap.solve(cost, method="scaling", device="cpu", maximize=maximize)
    assert plain.stats.phase_counts["scaling_narrowed"] == 0
    assert narrow.objective == plain.objective
    assert narrow.verify(cost).optimal
    np.testing.assert_array_equal(cost, before)


def test_no_half_width_copy_where_an_entry_does_not_fit(monkeypatch):
    """A finite float64 entry beyond float32's range (it would become +inf, a forbidden pair, in
    the copy) or an int64 entry beyond int32's: the ε-phases read the matrix itself; the copy
    is made for int64 entries that all fit (exact), and for +inf (forbidden stays forbidden)."""
    monkeypatch.setattr(cpu_backend, "NARROW_MIN_ENTRIES", 0)
    rng = np.random.default_rng(3)
    points = generate.geometric(200, seed=3)
    huge = points.copy()
    huge[7, 11] = 1e300
    forbidden = points.copy()
    forbidden[rng.random(points.shape) < 0.05] = np.inf
    wide = np.rint(points * 1e3).astype(np.int64)
    too_wide = wide.copy()
    too_wide[3, 4] = 2**40
    for cost, made in [(huge, 0), (forbidden, 1), (wide, 1), (too_wide, 0)]:
        result = assert_same_optimum(cost, method="scaling", device="cpu")
        assert result.stats.phase_counts["scaling_narrowed"] == made
    backend = CPUBackend()
    state = backend.allocate(prepare(wide))
    rough = backend.narrowed(state)
    assert rough.cost.dtype == np.int32 and (rough.cost == wide).all()
    assert rough.v is state.v and rough.row_match is state.row_match  # one state, two matrices


# ---------------------------------------------------------------- rounds of bids (the GPU's path)
# The GPU starts every phase with rounds of bids by all free rows at once (parallel_bidding); the
# CPU backend implements the same rounds with the same rule, and runs them here. BIDDING_TAIL = 0
# bids until the rounds stall, so even the smallest matrices take this path.


@pytest.fixture
def bids(monkeypatch):
    from dlap.hungarian import scaling

    monkeypatch.setattr(CPUBackend, "parallel_bidding", True)
    monkeypatch.setattr(scaling, "BIDDING_TAIL", 0)


@pytest.mark.parametrize("strategy", list(STRATEGIES), ids=list(STRATEGIES))
def test_bids_agree_with_scipy(strategy, bids):
    check_strategy(strategy, {"method": "scaling", "device": "cpu"}, SETTINGS)


@pytest.mark.parametrize("family", HARD + ["ties", "float"])
@pytest.mark.parametrize("shape", [(2, 2), (17, 17), (150, 150), (60, 90), (90, 60)])
def test_bids_on_every_family_and_shape(family, shape, bids):
    cost = generate.family(family, max(shape), seed=shape[0])[: shape[0], : shape[1]]
    for maximize in (False, True):
        assert_same_optimum(cost, maximize, method="scaling", device="cpu")


def test_bids_assign_most_rows_and_leave_the_rest_to_the_searches(monkeypatch):
    from dlap.hungarian import scaling

    n = 400
    cost = generate.geometric(n, seed=2)
    plain = dlap.solve(cost, method="scaling", device="cpu")
    monkeypatch.setattr(CPUBackend, "parallel_bidding", True)
    result = dlap.solve(cost, method="scaling", device="cpu")
    counts, phases = result.stats.phase_counts, result.stats.phase_counts["scaling_phase"] + 1
    assert counts["bidding_rounds"] >= phases and counts["bids"] >= n * phases
    # every phase leaves at most BIDDING_TAIL rows to its searches, except where bids stall
    assert result.stats.iterations < n * phases / 4 < plain.stats.iterations
    assert result.objective == plain.objective
    assert_valid(result, cost)
    assert scaling.BIDDING_TAIL < n


def test_bids_on_an_infeasible_matrix_stall_and_the_searches_find_it(bids):
    cost = generate.geometric(200, seed=3)
    cost[[0, 2], 1:] = np.inf
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        dlap.solve(cost, method="scaling", device="cpu")


def test_a_rectangular_matrix_solved_again_starts_from_zero_prices(bids):
    """Found by hypothesis with bids: this answer did not prove itself, and the tree variant
    that solved it again kept the ε-phases' prices, which a rectangular matrix's JV start does
    not replace: it returned -562950 for an optimum of 1 (its certificate said so)."""
    cost = np.array([[0.0, -5.6295e5, 1.0, -5.6295e5], [-5.6295e5, -5.6295e5, 1.0, -5.6295e5]])
    result = assert_same_optimum(cost, True, method="scaling", device="cpu")
    assert result.objective == 1.0 and result.stats.phase_counts["scaling_imprecise"] == 1
