"""The GPU backend against scipy and the CPU backend (skipped where no GPU is visible).

Every configuration a user can ask for on the GPU, on every solver dtype, every generator family,
rectangular and maximised matrices, forbidden pairs, CuPy inputs, the hypothesis strategies of
the CPU tests (fewer examples), and the refusal of a matrix that does not fit.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlap
from dlap import generate

from ..configs import GPU_CONFIGS
from ..helpers import assert_same_optimum, assert_valid
from ..strategies import STRATEGIES, check_strategy

pytestmark = pytest.mark.gpu

DTYPES = [np.int32, np.int64, np.float32, np.float64]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("options", GPU_CONFIGS)
@pytest.mark.parametrize("strategy", list(STRATEGIES), ids=list(STRATEGIES))
def test_agrees_with_scipy_on_generated_instances(options, strategy):
    check_strategy(strategy, options, SETTINGS)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (17, 17), (300, 300), (120, 300), (300, 120)])
@pytest.mark.parametrize("options", GPU_CONFIGS)
def test_every_dtype_and_shape(dtype, shape, options):
    rng = np.random.default_rng(sum(shape))
    cost = rng.integers(-500, 500, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        cost = cost + rng.random(shape).astype(dtype)
    for maximize in (False, True):
        assert_same_optimum(cost, maximize, **options)


@pytest.mark.parametrize("options", GPU_CONFIGS)
def test_float32_subnormals_count(options):
    """Found by hypothesis on an H200: a float32 subnormal flushed to zero tied with 0."""
    for cost in (np.array([[0.0, -1.95e-43]], dtype=np.float32), np.array([[1e-45, 0.0], [0.0, 2e-45]], dtype=np.float32)):
        # (and found by it again: CuPy's negation flushed them on the way to a maximising solve)
        for maximize in (False, True):
            assert_same_optimum(cost, maximize, **options)
            assert_same_optimum(cost.T.copy(), maximize, **options)


FAMILY_CASES = [
    ("uniform", 0.1), ("uniform", 1.0), ("uniform", 10.0), ("float", None), ("geometric", None),
    ("machol-wien", None), ("ties", None),
]


# Machol-Wien stops at n = 250: the classical variant is O(n^4)-like there (README)
SIZED_CASES = [(fam, f, n) for fam, f in FAMILY_CASES for n in (17, 250, 1000) if fam != "machol-wien" or n <= 250]


@pytest.mark.parametrize("family, f, n", SIZED_CASES, ids=[f"{a}-{b}-{c}" for a, b, c in SIZED_CASES])
@pytest.mark.parametrize("options", GPU_CONFIGS)
def test_every_family(family, f, n, options):
    assert_same_optimum(generate.family(family, n, f, seed=n), **options)


@pytest.mark.parametrize("family, f", [("uniform", 1.0), ("uniform", 10.0), ("float", None), ("geometric", None)])
def test_gpu_matches_cpu_at_a_larger_size(family, f):
    cost = generate.family(family, 3000, f, seed=11)
    gpu = dlap.solve(cost, device="gpu")
    cpu = dlap.solve(cost, device="cpu")
    if isinstance(cpu.objective, int):
        assert gpu.objective == cpu.objective
    else:
        assert abs(gpu.objective - cpu.objective) <= 1e-9 * abs(cpu.objective)
    assert_valid(gpu, cost)


@pytest.mark.parametrize("options", GPU_CONFIGS)
def test_forbidden_pairs_and_infeasible(options):
    cost = np.array([[1.0, np.inf, 3.0], [np.inf, np.inf, 2.0], [4.0, 1.0, np.inf]])
    assert_same_optimum(cost, **options)
    # rows 0 and 2 can only take column 0: no row or column is all-forbidden, but the searches
    # must find that no assignment exists (Hall's condition fails)
    cost = np.array([[1.0, np.inf, np.inf], [np.inf, 3.0, 2.0], [4.0, np.inf, np.inf]])
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        dlap.solve(cost, **options)


@pytest.mark.parametrize("high, shape", [(2, (2500, 2500)), (4, (3000, 3000)), (2, (1200, 2600))])
def test_classical_compression_of_dense_zero_slack_rows(high, shape):
    """Rows with more zero-slack edges than the compression stages in shared memory (1024), and
    more edges in all than its staging buffer holds (16 a row): those rows are read a second
    time; the optimum is scipy's, the zero-slack graph the CPU backend's."""
    from dlap.backends.cpu import CPUBackend
    from dlap.backends.gpu.backend import STAGED_EDGES_PER_ROW, GPUBackend
    from dlap.problem import Problem

    cost = np.random.default_rng(high).integers(0, high, shape).astype(np.int32)
    result = assert_same_optimum(cost, False, device="gpu", method="classical", init="reduction")
    graphs = []
    for backend, xp in ((CPUBackend(), np), (GPUBackend(), __import__("cupy"))):
        matrix = xp.asarray(cost)
        state = backend.allocate(Problem(matrix=matrix, transposed=False, maximize=False, original=matrix))
        backend.initial_reduction(state, columns=shape[0] == shape[1])
        nnz = backend.compress(state)
        rows = np.repeat(np.arange(shape[0]), np.diff(_host(state.row_ptr)))
        graphs.append((nnz, set(zip(rows.tolist(), _host(state.col_idx)[:nnz].tolist(), strict=True))))
    assert graphs[0] == graphs[1]
    assert graphs[1][0] > STAGED_EDGES_PER_ROW * shape[0] and result.verify().optimal


def _host(x):
    return x.get() if hasattr(x, "get") else np.asarray(x)


def test_cupy_input_stays_on_the_gpu_and_is_not_modified():
    import cupy

    host = generate.uniform(700, 1.0, seed=4)
    device = cupy.asarray(host)
    before = device.copy()
    result = dlap.solve(device, maximize=True)
    assert result.stats.device == "gpu"
    assert isinstance(result.row_ind, cupy.ndarray) and isinstance(result.col_ind, cupy.ndarray)
    assert isinstance(result.row_duals, cupy.ndarray)
    assert bool((device == before).all())
    expected = dlap.solve(host, maximize=True, device="cpu").objective
    assert result.objective == expected
    assert result.verify().optimal
    rows, cols = dlap.linear_sum_assignment(device[:, :500])  # rectangular, not contiguous
    assert isinstance(rows, cupy.ndarray) and len(rows) == 500


def test_cupy_input_errors_match_scipy():
    import cupy

    with pytest.raises(ValueError, match="invalid numeric entries"):
        dlap.solve(cupy.array([[1.0, cupy.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="invalid numeric entries"):
        dlap.solve(cupy.array([[1.0, -cupy.inf], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="expected a matrix"):
        dlap.solve(cupy.zeros(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_host_float_matrix_is_checked_and_negated_on_the_gpu(dtype, monkeypatch):
    """A host float matrix is checked (NaN, -inf; +inf when maximising) and negated on the GPU as
    its chunks land (Problem.deferred): scipy's errors, scipy's optimum, the caller's array
    untouched, wherever in the chunks the bad entry lies."""
    from scipy.optimize import linear_sum_assignment as scipy_lsa

    from dlap.backends.gpu import backend as gpu
    from dlap.problem import prepare

    cost = generate.geometric(600, seed=3).astype(dtype)
    problem = prepare(cost, True, deferred=True)
    assert problem.deferred and problem.matrix is cost
    for chunk in (gpu.UPLOAD_CHUNK_BYTES, 4096):  # one copy; many chunks on several threads
        monkeypatch.setattr(gpu, "UPLOAD_CHUNK_BYTES", chunk)
        for maximize in (False, True):
            before = cost.copy()
            result = dlap.solve(cost, maximize=maximize, device="gpu")
            np.testing.assert_array_equal(cost, before)
            rows, cols = scipy_lsa(cost, maximize=maximize)
            assert result.objective == pytest.approx(math.fsum(cost[rows, cols].tolist()), rel=1e-12)
            assert result.verify().optimal
        for row in (0, 299, 599):
            for bad, maximize in ((np.nan, False), (np.nan, True), (-np.inf, False), (np.inf, True)):
                broken = cost.copy()
                broken[row, 17] = bad
                with pytest.raises(ValueError, match="matrix contains invalid numeric entries"):
                    scipy_lsa(broken, maximize=maximize)
                with pytest.raises(ValueError, match="matrix contains invalid numeric entries"):
                    dlap.solve(broken, maximize=maximize, device="gpu")
        forbidden = cost.copy()
        forbidden[5, :300] = -np.inf  # forbidden pairs when maximising
        assert dlap.solve(forbidden, maximize=True, device="gpu").verify().optimal


def test_a_matrix_that_does_not_fit_is_refused_before_allocation():
    import cupy

    from dlap.device import free_device_memory

    cost = generate.uniform(12000, 1.0, seed=1)  # 576 MB
    filler = cupy.empty(free_device_memory() - (256 << 20), dtype=np.uint8)
    try:
        with pytest.raises(MemoryError, match=r"12000 x 12000 int32 cost matrix .* GiB free"):
            dlap.solve(cost, device="gpu")
    finally:
        del filler
        cupy.get_default_memory_pool().free_all_blocks()
    assert dlap.solve(cost[:50, :50], device="gpu").verify().optimal  # the GPU is still usable


def test_stats_report_the_phases():
    result = dlap.solve(generate.uniform(2000, 10.0, seed=2), device="gpu", method="tree")
    stats = result.stats
    assert stats.device == "gpu" and stats.method == "tree"
    for name in ("initial_reduction", "optimality_check", "forward_pass", "reverse_pass", "augment", "dual_update"):
        assert stats.phase_seconds[name] > 0, name
    assert sum(stats.paths_per_iteration) == 2000 - stats.initial_assignments
    assert stats.iterations == len(stats.paths_per_iteration)


# ---------------------------------------------------------------- the ε-scaling engine

HARD_CASES = [(fam, n) for fam in ("geometric", "geometric-int", "geometric-3d", "geometric-disjoint",
                                   "geometric-benefit", "machol-wien", "ties") for n in (300, 1200)]


@pytest.fixture
def cpu_bids(monkeypatch):
    """The CPU backend bids in rounds as the GPU does, and its ε-phases read the matrix itself
    (no half-width copy, as on the GPU), so the two run the same sequence."""
    from dlap.backends.base import Backend
    from dlap.backends.cpu import CPUBackend

    monkeypatch.setattr(CPUBackend, "parallel_bidding", True)
    monkeypatch.setattr(CPUBackend, "narrow_copy", Backend.narrow_copy)


LAYOUTS = [(layout, True) for layout in ("cluster-auto", "cluster-1", "cluster-2", "cluster-8", "device-memory",
                                         "cluster-8-device-memory", "cluster-8-wide", "cluster-8-wide-device-memory",
                                         "cluster-16", "cluster-16-wide", "cluster-16-wide-device-memory")]


def force_search_layout(layout: str, monkeypatch) -> None:
    """Make the ε-scaling searches run in ``layout``: "cluster-auto" (dlap's choice),
    "cluster-N" (N blocks a search and a greedy start; 16 is a non-portable size, skipped where
    the device does not schedule it), "-wide" (blocks that agree among their warps first),
    "device-memory" (the blocks' column arrays in device memory, as for matrices too wide for
    shared memory)."""
    from dlap.backends.gpu import backend as gpu
    from dlap.backends.gpu import kernels as gpu_kernels

    if layout.endswith("device-memory"):
        monkeypatch.setattr(gpu_kernels, "shared_launch", lambda kernel, nbytes, device_id: 0)
    if layout.startswith("cluster-") and layout != "cluster-auto":
        size = int(layout.split("-")[1])
        wide = "-wide" in layout
        if size not in gpu_kernels.cluster_sizes("scaling_phase", wide=wide):
            pytest.skip(f"no clusters of {size} {'wide ' if wide else ''}blocks on this GPU")
        monkeypatch.setattr(gpu, "SCALING_CLUSTER", size)
        monkeypatch.setattr(gpu, "SCALING_WIDE", wide)


@pytest.mark.parametrize("layout, bids", LAYOUTS + [("cluster-auto", False)],
                         ids=[f"{a}-{'bids' if b else 'searches'}" for a, b in LAYOUTS + [("cluster-auto", False)]])
@pytest.mark.parametrize("family, n", HARD_CASES, ids=[f"{a}-{b}" for a, b in HARD_CASES])
def test_scaling_is_the_cpu_engine_bit_for_bit(family, n, layout, bids, monkeypatch):
    """The GPU runs the CPU's sequence of bids and searches with the CPU's arithmetic: the same
    assignment and the same duals, to the last bit, whether a search runs in one block or a
    cluster of 2, 8 or 16 (each holding a slice of the columns in shared memory, or in device memory
    for matrices too wide for it), with narrow or wide blocks; and with no bids (every row
    assigned by a search, as the CPU does by default)."""
    from dlap.backends.base import Backend
    from dlap.backends.cpu import CPUBackend
    from dlap.backends.gpu import backend as gpu

    force_search_layout(layout, monkeypatch)
    monkeypatch.setattr(CPUBackend, "parallel_bidding", bids)
    monkeypatch.setattr(gpu.GPUBackend, "parallel_bidding", bids)
    monkeypatch.setattr(CPUBackend, "narrow_copy", Backend.narrow_copy)  # the GPU's ε-phases read the matrix
    assert_scaling_is_the_cpus(family, n, seed=n)


def assert_scaling_is_the_cpus(family: str, n: int, seed: int) -> None:
    """ε-scaling on the GPU and on the CPU: the same assignment, duals and counts, to the last bit."""
    cost = generate.family(family, n, seed=seed)
    maximize = family in generate.MAXIMIZE
    on_gpu = dlap.solve(cost, method="scaling", device="gpu", maximize=maximize)
    on_cpu = dlap.solve(cost, method="scaling", device="cpu", maximize=maximize)
    np.testing.assert_array_equal(on_gpu.col_ind, on_cpu.col_ind)
    np.testing.assert_array_equal(on_gpu.col_duals, on_cpu.col_duals)
    np.testing.assert_array_equal(on_gpu.row_duals, on_cpu.row_duals)
    assert on_gpu.stats.phase_counts == on_cpu.stats.phase_counts


@pytest.mark.parametrize("layout", ["cluster-8-wide", "cluster-8-wide-device-memory", "cluster-8-device-memory",
                                    "cluster-16-wide", "cluster-16-wide-device-memory"])
@pytest.mark.parametrize("family", ["geometric", "geometric-benefit"])
def test_wide_search_blocks_are_the_cpu_engine_bit_for_bit(family, layout, cpu_bids, monkeypatch):
    """Wide blocks of several warps each (n = 6000 over 8 blocks: 750 columns, 3 warps a block)
    agree on the same column as the CPU's search at every step: the same answer to the last bit."""
    force_search_layout(layout, monkeypatch)
    assert_scaling_is_the_cpus(family, 6000, seed=2)


@pytest.mark.parametrize("family, n", [(f, n) for f in ("geometric", "geometric-benefit", "machol-wien", "geometric-int")
                                       for n in (2000, 5000)])
def test_scaling_at_larger_sizes(family, n, cpu_bids):
    cost = generate.family(family, n, seed=1)
    maximize = family in generate.MAXIMIZE
    on_gpu = dlap.solve(cost, method="scaling", device="gpu", maximize=maximize)
    on_cpu = dlap.solve(cost, method="scaling", device="cpu", maximize=maximize)
    assert on_gpu.objective == on_cpu.objective  # the same bids and searches: the same optimum, exactly
    assert on_gpu.stats.phase_counts == on_cpu.stats.phase_counts
    assert_valid(on_gpu, cost, maximize)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_row_minima_terms_are_the_cpu_kernels(data):
    """bidding.cu's row terms (the bids of the Dask engine's GPU ranks, and their reduction
    transfer) equal the CPU kernel's on every dtype: ties (first column; a tie makes the second
    smallest equal to the smallest), floats that differ in the 9th digit, forbidden entries, free
    columns, repeated rows, and rows from one column to several batches of every thread of a block."""
    import cupy

    from dlap.backends.cpu import CPUBackend
    from dlap.backends.gpu import GPUBackend
    from dlap.problem import Problem

    dtype = np.dtype(data.draw(st.sampled_from(DTYPES)))
    n = data.draw(st.integers(1, 6))
    m = data.draw(st.sampled_from([1, 2, 7, 31, 33, 1023, 1025, 6200, 30001]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = data.draw(st.sampled_from(["ties", "wide", "9th-digit"]))
    if values == "ties" or dtype.kind == "i":
        cost = rng.integers(0, 4 if values == "ties" else 10**6, size=(n, m)).astype(dtype)
    else:
        cost = (rng.uniform(-1e6, 1e6, (n, m)) if values == "wide" else 1 + rng.integers(0, 4, (n, m)) * 1e-9)
        cost = cost.astype(dtype)
        cost[rng.random((n, m)) < data.draw(st.sampled_from([0.0, 0.5, 1.0]))] = np.inf
    v = rng.integers(-3, 4, m).astype(np.float64)
    match = np.where(rng.random(m) < data.draw(st.sampled_from([0.0, 0.3, 1.0])), -1, rng.integers(0, n, m))
    rows = rng.integers(0, n, data.draw(st.integers(0, 2 * n)))
    states = []
    for backend, xp in ((CPUBackend(), np), (GPUBackend(), cupy)):
        matrix = xp.asarray(cost)
        state = backend.allocate(Problem(matrix=matrix, transposed=False, maximize=False, original=matrix))
        state.v[:] = xp.asarray(v)
        state.col_match[:] = xp.asarray(match)
        states.append((backend, state, xp.asarray(rows)))
    (cpu, on_cpu, cpu_rows), (gpu, on_gpu, gpu_rows) = states
    np.testing.assert_array_equal(gpu.row_minima_terms(on_gpu, gpu_rows).get(), cpu.row_minima_terms(on_cpu, cpu_rows))


def _slab_costs(data, rng, dtype, n: int, m: int):
    """A slab for the Dask engine's kernel twins: small integers (ties everywhere), or floats of
    every magnitude with forbidden (+inf) entries."""
    if dtype.kind == "i" or data.draw(st.booleans()):
        return rng.integers(0, 4, (n, m)).astype(dtype)
    cost = rng.uniform(-1e6, 1e6, (n, m)).astype(dtype)
    cost[rng.random((n, m)) < 0.3] = np.inf
    return cost


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_slab_bids_and_greedy_steps_are_the_cpu_kernels(data):
    """The Dask engine's GPU ranks' steps of ε-scaling (bidding.cu's bids_of_terms and award_*,
    scaling.cu's competition prices, cheapest_untaken and lower_taken_prices) equal the CPU
    kernels on every dtype: tied bids for one column (the lowest row wins), rows that make no
    bid, evictions, taken columns, forbidden entries, one column to several batches of a block."""
    import cupy

    from dlap.backends.cpu import CPUBackend
    from dlap.backends.gpu import GPUBackend
    from dlap.problem import Problem

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dtype = np.dtype(data.draw(st.sampled_from(DTYPES)))
    n = data.draw(st.integers(1, 6))
    m = data.draw(st.sampled_from([1, 2, 33, 1025, 30001]))
    cost = _slab_costs(data, rng, dtype, n, m)
    v = rng.integers(-3, 4, m).astype(np.float64)
    taken = rng.random(m) < data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    row = data.draw(st.integers(0, n - 1))
    own = data.draw(st.sampled_from([-np.inf, 0.0, 1.5, np.inf]))
    eps = data.draw(st.sampled_from([0.0, 0.5]))
    row_low = rng.integers(-2, 3, n).astype(np.float64)
    k = min(n, m)  # the square replica's size
    held = rng.permutation(k)[: k // 2]  # its matched columns, rows 0.. in order
    results = []
    for backend, xp in ((CPUBackend(), np), (GPUBackend(), cupy)):
        host = (lambda a: a.get()) if xp is cupy else np.asarray
        matrix = xp.asarray(cost)
        state = backend.allocate(Problem(matrix=matrix, transposed=False, maximize=False, original=matrix))
        state.v[:] = xp.asarray(v)
        competition = host(backend.column_competition(state, xp.asarray(row_low)))
        cheapest = backend.cheapest_untaken(state, row, xp.asarray(taken))
        backend.lower_taken_prices(state, row, own, xp.asarray(taken))
        fitted = host(state.v).copy()
        # a round of bids on a small square replica: terms of every row, half the columns matched
        block = xp.asarray(cost[:k, :k])
        square = backend.allocate(Problem(matrix=block, transposed=False, maximize=False, original=block))
        square.v[:] = xp.asarray(v[:k])
        square.col_match[:] = -1
        square.row_match[:] = -1
        square.col_match[xp.asarray(held)] = xp.asarray(np.arange(held.shape[0]), dtype=square.col_match.dtype)
        square.row_match[: held.shape[0]] = xp.asarray(held, dtype=square.row_match.dtype)
        rows = xp.arange(held.shape[0], k, dtype=np.int64)
        cols, dec = backend.bids_of_terms(backend.row_minima_terms(square, rows), eps)
        n_free = backend.award_bids(square, rows, cols, dec)
        results.append((competition, np.asarray(cheapest), fitted, host(cols).astype(np.int64), host(dec),
                        np.asarray([n_free]), host(square.row_match).astype(np.int64),
                        host(square.col_match).astype(np.int64), host(square.v)))
    for on_cpu, on_gpu in zip(*results, strict=True):
        np.testing.assert_array_equal(on_gpu, on_cpu)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_search_step_kernel_is_the_cpu_kernel(data):
    """forward.cu's ε-scaling search step (the Dask engine's searches on GPU ranks) scans and
    offers what the CPU kernel does on every dtype: ties between distances and between free
    columns, completed columns (-inf prices), forbidden entries, no row, slabs of one column to
    more than a grid's worth."""
    import cupy

    from dlap.backends.cpu import CPUBackend
    from dlap.backends.gpu import GPUBackend
    from dlap.problem import Problem

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dtype = np.dtype(data.draw(st.sampled_from(DTYPES)))
    n = data.draw(st.integers(1, 5))
    m = data.draw(st.sampled_from([1, 2, 33, 1025, 140001]))
    cost = _slab_costs(data, rng, dtype, n, m)
    v = rng.integers(-3, 4, m).astype(np.float64)
    v_open = np.where(rng.random(m) < data.draw(st.sampled_from([0.0, 0.5, 1.0])), -np.inf, v)
    dist = rng.choice([np.inf, 0.0, 1.0, 2.5], m)
    dist[v_open == -np.inf] = np.inf
    pred = rng.integers(-1, n, m)
    match = np.where(rng.random(m) < data.draw(st.sampled_from([0.0, 0.5, 1.0])), -1, rng.integers(0, n, m))
    row = data.draw(st.integers(-1, n - 1))
    shift = data.draw(st.sampled_from([0.0, 1.5, -2.0]))
    results = []
    for backend, xp in ((CPUBackend(), np), (GPUBackend(), cupy)):
        matrix = xp.asarray(cost)
        state = backend.allocate(Problem(matrix=matrix, transposed=False, maximize=False, original=matrix))
        state.v[:], state.v_open[:], state.slack[:], state.col_pred[:] = (xp.asarray(a) for a in (v, v_open, dist, pred))
        offer = backend.search_offer(state, xp.asarray(match, dtype=state.col_match.dtype), row, shift)
        host = (lambda a: a.get()) if xp is cupy else np.asarray
        results.append((host(offer), host(state.slack), host(state.col_pred)))
    for on_cpu, on_gpu in zip(*results, strict=True):
        np.testing.assert_array_equal(on_gpu, on_cpu)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_tree_wave_kernels_are_the_cpu_kernels(data):
    """forward.cu's two halves of a tree wave of the Dask engine's GPU ranks equal the CPU kernels:
    the offer (its header exactly, its rows as a set: the GPU lists them in any order) on slabs
    of one column to several grids' worth, with ties, forbidden (+inf) columns and levels below,
    at and above the smallest slack; the join of the same rows in the same order into the
    replica and the slab (rows of other ranks' columns among them, free and matched columns,
    a wave started or continued, more rows than a block has threads)."""
    import cupy

    from dlap.backends.cpu import CPUBackend
    from dlap.backends.gpu import GPUBackend
    from dlap.problem import Problem

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n_rows = data.draw(st.integers(1, 3000))
    width = data.draw(st.sampled_from([1, 2, 31, 1025, 6200, 300001]))
    lo = data.draw(st.sampled_from([0, 7]))
    n_cols = lo + width + data.draw(st.sampled_from([0, 5, 3000]))
    slack = rng.integers(0, data.draw(st.sampled_from([2, 50])), width).astype(np.float64)
    slack[rng.random(width) < data.draw(st.sampled_from([0.0, 0.5, 1.0]))] = np.inf
    finite = slack[slack < np.inf]
    level = float(data.draw(st.sampled_from([-1.0, 0.0, 1.0]))) + (float(finite.min()) if finite.size else 0.0)
    col_pred = rng.integers(0, n_rows, width)
    # a partial matching of the replica's columns, and rows offered: columns of this slab and others
    match = np.full(n_cols, -1)
    matched = rng.permutation(n_cols)[: min(n_rows, int(n_cols * data.draw(st.sampled_from([0.0, 0.5, 1.0]))))]
    match[matched] = rng.permutation(n_rows)[: matched.size]
    # (at most n_cols - 3: the wave's counters below start at up to 3)
    offered_cols = rng.permutation(n_cols)[: min(data.draw(st.sampled_from([0, 1, 1023, 1025, 2500])), max(n_cols - 3, 0))]
    offered = np.stack([offered_cols, rng.integers(0, n_rows, offered_cols.size),
                        rng.integers(0, 3, offered_cols.size) + level - 1], axis=1).astype(np.float64)
    u = rng.integers(-5, 5, n_rows).astype(np.float64)
    wave = np.array([data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3)), 0, data.draw(st.integers(0, 3))])
    first = data.draw(st.booleans())
    results = []
    for backend, xp in ((CPUBackend(), np), (GPUBackend(), cupy)):
        block = xp.zeros((1, width))  # the offer and the join read the slab's per-column arrays only
        slab = backend.allocate(Problem(matrix=block, transposed=False, maximize=False, original=block))
        slab.slack[:], slab.col_pred[:], slab.v_open[:] = xp.asarray(slack), xp.asarray(col_pred), 0.0
        out = xp.zeros((width + 1, 3))
        backend.tree_offer(slab, level, lo, out)
        count = int(out[0, 1])
        rows = np.asarray(out[1 : 1 + count].get() if xp is cupy else out[1 : 1 + count])
        replica = backend.allocate_graph((n_rows, n_cols), np.float64, 0.0)
        replica.col_match[:], replica.u[:] = xp.asarray(match), xp.asarray(u)
        shift, counters = xp.zeros(n_rows + 3), xp.array(wave)  # a copy: the join advances it
        backend.tree_join(replica, slab, xp.asarray(offered), level, lo, shift, counters, first)
        host = (lambda a: a.get()) if xp is cupy else np.asarray
        results.append((host(out[0]), rows[np.argsort(rows[:, 0])], host(counters), host(shift),
                        *(host(a) for a in (slab.slack, slab.v_open, replica.col_pred, replica.col_level,
                                            replica.forest_cols, replica.reverse, replica.rows_q,
                                            replica.row_level, replica.row_pred))))
    for on_cpu, on_gpu in zip(*results, strict=True):
        np.testing.assert_array_equal(on_gpu, on_cpu)


@pytest.mark.parametrize("strategy", list(STRATEGIES), ids=list(STRATEGIES))
def test_bids_agree_with_scipy_on_the_gpu(strategy, monkeypatch):
    """BIDDING_TAIL = 0: the rounds of bids run on matrices of a few rows too."""
    from dlap.hungarian import scaling

    monkeypatch.setattr(scaling, "BIDDING_TAIL", 0)
    check_strategy(strategy, {"method": "scaling", "device": "gpu"}, SETTINGS)


def test_scaling_finds_an_infeasible_matrix_in_an_epsilon_phase():
    """Rows 0 and 2 can only take column 0: a search of an ε-phase reaches no free column."""
    cost = generate.geometric(600, seed=3)
    cost[[0, 2], 1:] = np.inf
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        dlap.solve(cost, method="scaling", device="gpu")
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        dlap.solve(cost, method="scaling", device="cpu")


def test_scaling_rectangular_on_the_gpu(cpu_bids):
    for shape in [(300, 420), (420, 300)]:
        cost = generate.geometric(max(shape), seed=4, same_points=True)[: shape[0], : shape[1]]
        for maximize in (False, True):
            on_gpu = assert_same_optimum(cost, maximize, method="scaling", device="gpu")
            on_cpu = dlap.solve(cost, maximize=maximize, method="scaling", device="cpu")
            np.testing.assert_array_equal(on_gpu.col_duals, on_cpu.col_duals)


@pytest.mark.parametrize("family", ["geometric", "geometric-benefit", "machol-wien", "geometric-disjoint"])
def test_gpu_auto_hands_structured_costs_to_scaling(family):
    cost = generate.family(family, 1500, seed=2)
    result = dlap.solve(cost, maximize=family in generate.MAXIMIZE, device="gpu")
    assert result.stats.method == "scaling"
    assert_valid(result, cost, family in generate.MAXIMIZE)


def test_gpu_auto_hands_points_in_3d_to_scaling():
    """JV leaves 10.5% of the rows free, the first iteration takes that under 10%, and then one
    path per iteration (scaling-gpu-20261122-auto-trace.log)."""
    cost = generate.family("geometric-3d", 5000, seed=0)
    result = dlap.solve(cost, device="gpu")
    assert result.stats.method == "scaling" and result.stats.phase_counts["handover_iteration"] <= 8
    assert_valid(result, cost)


def test_gpu_auto_hands_points_in_3d_to_scaling_where_jv_leaves_under_10_percent():
    """At n = 20000 JV leaves 8.9% free, under the CPU variants' gate of 10%; the hybrid then took
    11.3 s of one-path searches where ε-scaling takes 2.5 s (gpu-20261123-s7-handover-trace.jsonl)."""
    cost = generate.family("geometric-3d", 20000, seed=0)
    result = dlap.solve(cost, device="gpu")
    jv_free = result.stats.phase_counts["jv_free_rows"]
    assert 0.05 * 20000 < jv_free < 0.1 * 20000
    assert result.stats.method == "scaling"
    assert_valid(result, cost)


@pytest.mark.parametrize("n, f", [(3000, 10.0), (5000, 1.0), (5000, 10.0), (20000, 1.0)])
def test_gpu_auto_keeps_the_hybrid_for_uniform_costs(n, f):
    """Uniform f = 1 leaves over 10% free after JV as points in 3-D do, but augments many paths
    in every window of four iterations; f = 10 ends iterations in dual updates. The GPU's searches
    race, so the windows differ from run to run: 3 of 12 solves at n = 20000, f = 1 were handed
    over before the hand-over waited for the iteration after a dual update."""
    cost = generate.uniform(n, f, seed=0)
    for _ in range(8 if n == 20000 else 1):
        result = dlap.solve(cost, device="gpu")
        assert result.stats.method == "hybrid", result.stats.paths_per_iteration[:8]


def test_geometric_generated_on_the_gpu_is_the_host_matrix():
    """``geometric(xp=cupy)`` and ``geometric_dask(gpu=True)`` compute the matrix from the same
    points with the same float64 arithmetic (correctly rounded sqrt, no fused multiply-add): the
    host's values, bit for bit, in the plane and in 3-D, float64 and float32."""
    import cupy

    for kwargs in (dict(n=300), dict(n=200, m=260, dim=3, dtype="float32"), dict(n=250, same_points=True)):
        host = generate.geometric(seed=3, **kwargs)
        on_gpu = generate.geometric(seed=3, xp=cupy, **kwargs)
        assert isinstance(on_gpu, cupy.ndarray) and on_gpu.dtype == host.dtype
        np.testing.assert_array_equal(cupy.asnumpy(on_gpu), host)
    pytest.importorskip("dask")
    chunks = generate.geometric_dask(300, seed=3, chunks=(300, 100), gpu=True).compute()
    np.testing.assert_array_equal(cupy.asnumpy(chunks), generate.geometric(300, seed=3))
