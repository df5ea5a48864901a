"""The Dask engine on GPUs: a LocalCUDACluster (one worker per visible GPU), NCCL between ranks."""

import time
import warnings

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.distributed]

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dlap  # noqa: E402
import dlap.distributed as dd  # noqa: E402
import dlap.generate  # noqa: E402
from dlap.distributed.cluster import ucx_waits_spin, worker_addresses  # noqa: E402
from dlap.generate import uniform_block, uniform_dask  # noqa: E402

from ..helpers import (  # noqa: E402
    assert_nan_slab_refused,
    exact_optimum,
    received_bytes,
    reference,
    solve_in_background,
)

METHODS = ["classical", "hybrid", "tree"]


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("dask_cuda")
    with dd.start_cluster(dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("method, shape", [
    ("classical", (3000, 3000)), ("classical", (2000, 2600)), ("classical", (2600, 2000)),
    ("tree", (800, 800)), ("tree", (600, 700)), ("tree", (700, 600)),  # latency-bound: one step per wave
    ("hybrid", (1500, 1500)), ("hybrid", (1200, 1500)),
])
def test_same_optimum_as_single_gpu(client, method, shape):
    """Generated on the GPU workers; the optimum of the single-GPU engine on the same matrix."""
    import cupy

    n, m = shape
    ranks = len(worker_addresses(client))
    chunks = (-(-n // ranks), m) if (method == "classical") == (n <= m) else (n, -(-m // ranks))
    result = dd.solve(uniform_dask(n, 10, m=m, seed=11, chunks=chunks, gpu=True), client, method=method)
    single = dlap.solve(uniform_block((0, n), (0, m), m, 10 * n, 11, cupy))
    assert result.objective == single.objective
    assert result.verify().optimal
    assert result.stats.phase_counts["ranks"] == ranks and result.stats.device.endswith("gpu")


@pytest.mark.parametrize("method", ["auto", *METHODS])
def test_float32_subnormal_costs_reach_the_objective(client, method):
    """The ranks sum their assigned float32 costs exactly, subnormals included (CuPy's
    conversion to float64 flushed them to zero)."""
    cost = np.array([[1e-45, 1.0, 2.0], [1.0, 3e-45, 2.0], [2.0, 2.0, 1e-44]], dtype=np.float32)
    result = dd.solve(da.from_array(cost, chunks=(3, 3)), client, method=method, device="gpu")
    assert result.objective == float(cost[0, 0]) + float(cost[1, 1]) + float(cost[2, 2])
    assert result.verify().optimal


@pytest.mark.parametrize("method", ["auto", *METHODS])
def test_float32_costs_that_are_all_subnormal(client, method):
    """Costs in units of 2**-149 only: the ranks' matched costs and duals widen them exactly
    (flushed to zero, every assignment of the matrix would look optimal)."""
    cost = (np.random.default_rng(9).integers(0, 8, (40, 40)) * 2.0**-149).astype(np.float32)
    result = dd.solve(da.from_array(cost, chunks=(20, 40)), client, method=method, device="gpu")
    assert result.objective == exact_optimum(cost, False)
    assert result.verify().optimal


@pytest.mark.parametrize("method", METHODS)
def test_host_chunks_floats_forbidden_maximize(client, method):
    """NumPy chunks moved to the GPUs; floats with +inf forbidden pairs, maximised, vs scipy."""
    rng = np.random.default_rng(3)
    cost = rng.random((300, 200)) * 1e3
    cost[rng.random(cost.shape) < 0.2] = -np.inf  # forbidden when maximising
    picked, error = reference(cost, maximize=True)
    assert error is None
    result = dd.solve(da.from_array(cost, chunks=(100, 200)), client, method=method, maximize=True)
    expected = float(picked.sum())
    assert abs(result.objective - expected) <= 1e-9 * abs(expected)
    assert result.verify().optimal and result.verify(cost).optimal


@pytest.mark.parametrize("method", METHODS)
def test_jv_initialisation_on_gpu_ranks(client, method):
    """init="jv" on GPU ranks (the bids' row terms in CuPy, merged over NCCL): the single-GPU
    optimum, and fewer rows left free than the paper's reduction leaves."""
    cost = uniform_block((0, 1200), (0, 1200), 1200, 12000, 4)
    arr = uniform_dask(1200, 10, seed=4, chunks=(1200, 600) if method != "classical" else (600, 1200), gpu=True)
    jv = dd.solve(arr, client, method=method, init="jv")
    reduction = dd.solve(arr, client, method=method, init="reduction")
    assert jv.stats.init == "jv" and reduction.stats.init == "reduction"
    assert jv.objective == reduction.objective == dlap.solve(cost).objective
    assert jv.verify().optimal and reduction.verify().optimal
    assert jv.stats.initial_assignments > reduction.stats.initial_assignments


@pytest.mark.parametrize("family", ["uniform", "geometric", "machol-wien"])
def test_auto_solves_on_one_gpu_what_dlap_solve_solves(client, family):
    """method="auto" with a matrix that fits a GPU: one rank runs dlap.solve's pipeline there."""
    import cupy

    cost = dlap.generate.family(family, 600, seed=2)
    result = dd.solve(da.from_array(cost, chunks=(300, 600)), client)
    alone = dlap.solve(cupy.asarray(cost))
    assert result.stats.phase_counts["ranks"] == 1 and result.stats.device == "1 x gpu"
    assert result.stats.method == f"distributed-{alone.stats.method}"
    assert result.objective == alone.objective and result.verify().optimal and result.verify(cost).optimal


@pytest.mark.parametrize("family", ["geometric", "geometric-benefit", "machol-wien"])
def test_scaling_across_gpu_ranks(client, family):
    """method="scaling" over the GPUs' column slabs (bids in rounds, searches one all-gather per
    step, competition prices with cupy.partition): scipy's optimum with a certificate."""
    cost = dlap.generate.family(family, 400, seed=6)
    maximize = family in dlap.generate.MAXIMIZE
    picked, _ = reference(cost, maximize)
    result = dd.solve(da.from_array(cost, chunks=(400, 200)), client, method="scaling", maximize=maximize)
    assert result.stats.method == "distributed-scaling" and result.verify().optimal and result.verify(cost).optimal
    expected = picked.sum()
    assert abs(result.objective - expected) <= 1e-9 * max(1.0, abs(float(expected)))


@pytest.mark.multi_gpu
def test_the_nccl_communicator_is_kept_for_the_next_solve_on_the_same_workers(client):
    """The ranks' communicator outlives a solve that ends well and serves the next one on the
    same workers in the same order; other workers or another order make a new one."""
    workers = worker_addresses(client)
    arr = uniform_dask(1200, 10, seed=3, chunks=(600, 1200), gpu=True)
    expected = dd.solve(arr, client, method="classical", workers=workers[::-1]).objective
    kept = []
    for order in (workers, workers, workers[::-1], workers[::-1]):
        result = dd.solve(arr, client, method="classical", workers=order)
        assert result.objective == expected and result.verify().optimal
        kept.append(result.stats.phase_counts["comm_kept"])
    assert kept == [0, 1, 0, 1]


@pytest.mark.multi_gpu
def test_auto_solves_a_persisted_integer_matrix_where_it_lies(client):
    """method="auto" on a matrix that fits one GPU: in one row chunk per GPU it is solved split,
    classical, moving nothing (one rank would have gathered all but its own chunk); in column
    chunks the row slabs would move as much, so one rank solves it."""
    import cupy
    from distributed import wait

    workers = worker_addresses(client)
    n, ranks = 3000, len(workers)
    expected = dlap.solve(uniform_block((0, n), (0, n), n, 10 * n, 13, cupy)).objective
    rows = uniform_dask(n, 10, seed=13, chunks=(-(-n // ranks), n), gpu=True).persist()
    cols = uniform_dask(n, 10, seed=13, chunks=(n, -(-n // ranks)), gpu=True).persist()
    wait([rows, cols])
    split = dd.solve(rows, client)
    counts = split.stats.phase_counts
    assert split.objective == expected and split.verify().optimal
    assert counts["ranks"] == ranks and split.stats.method == "distributed-classical"
    assert counts["placement_moved_bytes"] == 0 and counts["one_rank_moved_bytes"] >= n * n * 4 // ranks
    alone = dd.solve(cols, client)
    assert alone.objective == expected and alone.stats.phase_counts["ranks"] == 1
    assert "one_rank_moved_bytes" not in alone.stats.phase_counts


@pytest.mark.multi_gpu
def test_auto_splits_a_large_integer_matrix_over_the_gpus(client, monkeypatch):
    """method="auto", an integer matrix of at least dlap.auto.split-min-entries entries that fits one GPU
    (the bound lowered to 3000 x 3000 here): split over every GPU with the classical variant
    where the ranks make their own row slabs, the single-GPU optimum; on one rank where every
    rank would make the whole matrix (column chunks), for floats, and below the bound."""

    import cupy

    workers = worker_addresses(client)
    monkeypatch.setitem(dask.config.config["dlap"]["auto"], "split-min-entries", 3000 * 3000)
    n = 3000
    expected = dlap.solve(uniform_block((0, n), (0, n), n, 10 * n, 4, cupy)).objective
    split = dd.solve(uniform_dask(n, 10, seed=4, chunks=(500, n), gpu=True), client)
    assert split.stats.phase_counts["ranks"] == len(workers) and split.stats.method == "distributed-classical"
    assert split.objective == expected and split.verify().optimal
    for matrix in (uniform_dask(n, 10, seed=4, chunks=(n, 1500), gpu=True),
                   uniform_dask(n, 10, seed=4, chunks=(500, n), gpu=True).astype(np.float32),
                   uniform_dask(n, 10, m=n - 1, seed=4, chunks=(500, n - 1), gpu=True)):
        alone = dd.solve(matrix, client)
        assert alone.stats.phase_counts["ranks"] == 1 and alone.verify().optimal


def test_zarr_read_into_gpu_memory(client, tmp_path):
    path = str(tmp_path / "cost.zarr")
    uniform_dask(1500, 1, seed=2, chunks=(500, 1500)).to_zarr(path)
    cost = uniform_block((0, 1500), (0, 1500), 1500, 1500, 2)
    for method in METHODS:
        result = dd.solve(path, client, method=method)
        assert result.objective == dlap.solve(cost).objective and result.verify().optimal


@pytest.mark.parametrize("source", ["zarr", "persisted", "generated"])
def test_a_gpu_slab_of_many_pieces_is_filled_in_place(client, tmp_path, monkeypatch, source):
    """GPU slabs of many pieces (Zarr bands read into GPU memory, persisted CuPy chunks cut in
    bands where they live, CuPy chunks generated on the rank's GPU), filled in place: float32
    costs, more rows than columns, maximised; the single-GPU optimum, every variant. (Uniform
    costs: the variants alone on geometric ones take minutes, the hard-instances engine's job.)"""
    import cupy


    monkeypatch.setitem(dask.config.config["dlap"]["placement"], "piece-bytes", 64 * 1024)
    monkeypatch.setitem(dask.config.config["dlap"]["placement"], "buffer-bytes", 3 * 64 * 1024)
    arr = (uniform_dask(900, 10, m=700, seed=8, chunks=(100, 140), gpu=True) / 7).astype(np.float32)
    cost = arr.compute()
    if source == "zarr":
        path = str(tmp_path / "cost.zarr")
        arr.map_blocks(cupy.asnumpy, meta=np.empty((0, 0), np.float32)).to_zarr(path)
        arr = path
    elif source == "persisted":
        arr = arr.persist()
        distributed.wait(arr)
    expected = dlap.solve(cost, maximize=True).objective
    for method in METHODS:
        with distributed.get_task_stream(client) as stream:
            result = dd.solve(arr, client, method=method, maximize=True)
        assert result.objective == expected and result.verify().optimal and result.verify(cost).optimal
        assert sum(str(t["key"]).startswith("dlap-write-slab-") for t in stream.data) >= 5


def test_a_slab_larger_than_the_gpu_is_refused_with_its_size(client):
    """One rank for a 160 GB matrix: MemoryError naming the slab's size and the GPU's free
    memory, before the matrix is made (its first chunk at most), and the cluster solves again."""
    arr = uniform_dask(200000, 1, seed=1, chunks=(10000, 200000), gpu=True)
    start = time.perf_counter()
    with pytest.raises(MemoryError, match=r"a 200000 x 200000 int32 slab needs 149\.01 GiB of GPU memory but GPU \d+ has"):
        dd.solve(arr, client, method="classical", n_workers=1)
    assert time.perf_counter() - start < 60
    cost = uniform_block((0, 500), (0, 500), 500, 500, 3)
    assert dd.solve(da.from_array(cost, chunks=(100, 500)), client, n_workers=1).objective == dlap.solve(cost).objective


def test_bad_slab_fails_before_the_ranks_start(client):
    """A NaN in one rank's slab: scipy's error within 30 s, and the cluster solves again."""
    cost = uniform_block((0, 2000), (0, 2000), 2000, 20000, 5).astype(np.float32)
    assert_nan_slab_refused(lambda c, method: dd.solve(da.from_array(c, chunks=(1000, 1000)), client, method=method), cost)
    result = dd.solve(da.from_array(cost, chunks=(1000, 2000)), client, method="classical")
    assert result.objective == dlap.solve(cost, device="cpu").objective


def check_persisted_cupy(client, n=4000):
    """A CuPy matrix persisted on the GPUs, in row chunks (the ranks follow the data: nothing
    moves, even after a solve of the same matrix generated in place) and in column chunks (each
    rank gathers the other GPUs' pieces of its row slab, and only those)."""
    import cupy
    from distributed import wait

    ranks = len(worker_addresses(client))
    expected = dlap.solve(uniform_block((0, n), (0, n), n, 10 * n, 21, cupy)).objective
    rows = (-(-n // ranks), n)
    # split, as the persisted solves below (one rank would pin every chunk's key to its worker,
    # and the persisted copy's chunks could then all be generated there)
    first = dd.solve(uniform_dask(n, 10, seed=21, chunks=rows, gpu=True), client, method="classical")
    assert first.objective == expected
    for chunks, moved in [(rows, 0), ((n, -(-n // ranks)), n * n * 4 * (ranks - 1) // ranks)]:
        arr = uniform_dask(n, 10, seed=21, chunks=chunks, gpu=True).persist()
        wait(arr)
        before = received_bytes(client)
        result = dd.solve(arr, client, method="classical")
        assert result.stats.phase_counts["placement_moved_bytes"] == moved
        assert moved <= received_bytes(client) - before <= moved * 1.05
        assert result.objective == expected and result.verify().optimal


def test_persisted_cupy_chunks(client):
    check_persisted_cupy(client)


def test_protocol_ucx():
    """The engine on a LocalCUDACluster whose workers talk UCX (distributed-ucxx): the same
    optimum as the single-GPU engine, and a persisted matrix's pieces moved between GPUs."""
    pytest.importorskip("distributed_ucxx")
    import cupy

    with dd.start_cluster(protocol="ucx", dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        assert all(address.startswith("ucx://") for address in worker_addresses(c))
        # the workers talk UCX through ucxx, and wait on it without spinning their event loops
        assert all(c.run(lambda: __import__("sys").modules["ucxx.core"]._ctx is not None).values())
        assert not any(c.run(ucx_waits_spin).values())
        for method, n in [("classical", 3000), ("tree", 800)]:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                result = dd.solve(uniform_dask(n, 10, seed=4, chunks=(n, -(-n // 2)), gpu=True), c, method=method)
            assert not [w for w in seen if "spinning" in str(w.message)]
            assert result.objective == dlap.solve(uniform_block((0, n), (0, n), n, 10 * n, 4, cupy)).objective
            assert result.verify().optimal
        check_persisted_cupy(c)


def test_ucx_workers_that_spin_are_named(monkeypatch):
    """Workers started with ucxx's blocking progress (distributed-ucxx's default) spin their event
    loops waiting on UCX: the solve still finds the optimum, and warns with the settings that
    stop it."""
    pytest.importorskip("distributed_ucxx")
    import cupy

    monkeypatch.setenv("UCXPY_PROGRESS_MODE", "blocking")
    monkeypatch.setenv("UCXPY_ENABLE_PYTHON_FUTURE", "0")
    n = 1000
    with dd.start_cluster(protocol="ucx", dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        assert all(c.run(ucx_waits_spin).values())
        with pytest.warns(RuntimeWarning, match="UCXPY_PROGRESS_MODE=thread UCXPY_ENABLE_PYTHON_FUTURE=1"):
            result = dd.solve(uniform_dask(n, 10, seed=5, chunks=(n, n // 2), gpu=True), c, method="classical")
        assert result.objective == dlap.solve(uniform_block((0, n), (0, n), n, 10 * n, 5, cupy)).objective


@pytest.mark.multi_gpu
def test_dead_gpu_worker_aborts_nccl(client):
    """Kill rank 1's worker mid-solve: rank 0, blocked in NCCL, is aborted; the client raises
    WorkerLostError within 30 s; the restarted worker joins the next solve."""
    import os
    import signal

    workers = worker_addresses(client)
    n = 20000
    arr = uniform_dask(n, 10, seed=8, chunks=(n, n // 2), gpu=True)
    thread, started, outcome = solve_in_background(
        lambda progress: dd.solve(arr, client, method="tree", progress=progress))
    assert started.wait(120)
    pid = client.run(os.getpid, workers=[workers[1]])[workers[1]]
    killed = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive() and time.perf_counter() - killed < 30
    assert isinstance(outcome.get("error"), dd.WorkerLostError), outcome
    client.wait_for_workers(len(workers), timeout=120)
    result = dd.solve(uniform_dask(1000, 1, seed=1, chunks=(500, 1000), gpu=True), client)
    assert result.verify().optimal
    # split over the GPUs: the surviving rank's aborted communicator is not reused
    result = dd.solve(uniform_dask(1000, 1, seed=1, chunks=(500, 1000), gpu=True), client, method="classical")
    assert result.verify().optimal and result.stats.phase_counts["comm_kept"] == 0
