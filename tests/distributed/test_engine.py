"""The Dask engine on real CPU LocalClusters: scipy's optimum and errors, on workers' data and Zarr.

Every solve here runs over 2 to 4 worker processes that exchange their vectors over TCP sockets
between them (the CPU Comm, connected through Dask's worker-to-worker RPC); the GPU tests
(tests/distributed/test_engine_gpu.py) run the same engine over NCCL. On a host with one GPU these workers all
see it: ``device="auto"`` then keeps split solves on their CPUs (NCCL refuses two ranks on one
GPU), and a one-rank solve goes to the GPU; the tests of ``method="auto"`` ask for the CPU.
"""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.distributed

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dlap  # noqa: E402
import dlap.distributed as dd  # noqa: E402
import dlap.generate  # noqa: E402
from dlap.generate import geometric_dask, uniform_block, uniform_dask  # noqa: E402

from ..helpers import assert_scipy_objective, reference  # noqa: E402
from ..strategies import STRATEGIES  # noqa: E402
from .engine_checks import METHODS, check  # noqa: E402


@pytest.mark.parametrize("method", METHODS + ["auto"])
@pytest.mark.parametrize("strategy", list(STRATEGIES), ids=list(STRATEGIES))
def test_agrees_with_scipy(client, method, strategy):
    """Hypothesis: ties, huge ranges, int32, wide floats, float32, 9th-digit floats, +inf
    forbidden pairs; maximised, transposed, split over 1 to 3 ranks with random chunks."""

    @settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
    @given(cost=STRATEGIES[strategy], maximize=st.booleans(), transpose=st.booleans(), chunk=st.integers(1, 9))
    def run(cost, maximize, transpose, chunk):
        if maximize and strategy == "forbidden":
            cost = -cost
        cost = np.ascontiguousarray(cost.T if transpose else cost)
        check(cost, client, method, maximize, chunks=(chunk, chunk))

    run()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", ["ties", "wide", "floats", "rectangular"])
def test_ranks_decide_what_one_rank_decides(client, method, kind):
    """Every collective of the JV initialisation and the searches combines the slabs' parts
    exactly (minima with their first row or column, the bids' second minima across ranks, the
    tree waves' candidates): one, two and three ranks make the same initial assignment and the
    same searches, and end with the same assignment and duals, ties included. (The paper's
    reduction is followed by each rank's own greedy matching, merged: its start depends on the
    split, and it leaves more rows free.)"""
    rng = np.random.default_rng(7)
    cost = {
        "ties": uniform_block((0, 240), (0, 240), 240, 6, 3),
        "wide": uniform_block((0, 240), (0, 240), 240, 2**31 - 1, 4),
        "floats": rng.random((240, 240)),
        "rectangular": uniform_block((0, 200), (0, 260), 260, 40, 5),
    }[kind]
    arr = da.from_array(cost, chunks=(80, 80))
    results = [dd.solve(arr, client, method=method, n_workers=k, device="cpu") for k in (1, 2, 3)]
    assert [r.stats.phase_counts["ranks"] for r in results] == [1, 2, 3]
    first = results[0]
    picked = reference(cost)[0]
    assert first.stats.init == "jv" and first.verify().optimal
    assert_scipy_objective(first, cost, picked, False)
    for other in results[1:]:
        assert other.stats.initial_assignments == first.stats.initial_assignments
        assert other.stats.iterations == first.stats.iterations and other.objective == first.objective
        np.testing.assert_array_equal(other.col_ind, first.col_ind)
        np.testing.assert_array_equal(other.row_duals, first.row_duals)
        np.testing.assert_array_equal(other.col_duals, first.col_duals)
    reduction = dd.solve(arr, client, method=method, init="reduction", device="cpu")
    assert reduction.stats.init == "reduction" and reduction.verify().optimal
    assert_scipy_objective(reduction, cost, picked, False)
    if kind != "rectangular":  # JV's column reduction and bids run on square matrices
        assert first.stats.initial_assignments > reduction.stats.initial_assignments


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", [(300, 300), (240, 301), (301, 240)])
def test_generated_on_workers(client, method, shape):
    """A few hundred rows generated on the workers (one chunk per rank), equal to scipy and to the
    single-device engine on the same matrix."""
    n, m = shape
    arr = uniform_dask(n, 10, m=m, seed=3, chunks=(-(-n // 3), m) if method == "classical" else (n, -(-m // 3)))
    cost = uniform_block((0, n), (0, m), m, max(1, 10 * n), 3)
    result = check(cost, client, method)
    assert dd.solve(arr, client, method=method).objective == result.objective == dlap.solve(cost).objective
    assert result.stats.phase_counts["ranks"] == 3


@pytest.mark.parametrize("dtype, dim, same_points", [("float64", 2, False), ("float32", 3, False), ("float64", 2, True)])
def test_geometric_generated_on_workers(client, dtype, dim, same_points):
    """Points in the plane or in 3-D, their distances computed chunk by chunk on the workers
    (``geometric_dask``: the matrix of ``geometric``, bit for bit), solved by the ε-scaling engine
    over three column slabs: certified, and the optimum of ``dlap.solve`` and scipy on that matrix."""
    n, maximize = 240, same_points
    arr = geometric_dask(n, seed=7, dim=dim, same_points=same_points, chunks=(n, n // 3), dtype=dtype)
    cost = dlap.generate.geometric(n, seed=7, dim=dim, same_points=same_points, dtype=dtype)
    assert np.array_equal(arr.compute(), cost) and arr.dtype == cost.dtype
    alone = dlap.solve(cost, maximize=maximize, device="cpu")
    split = dd.solve(arr, client, maximize=maximize, device="cpu", method="scaling")
    assert split.stats.phase_counts["ranks"] == 3 and split.verify(cost).optimal
    assert split.objective == pytest.approx(alone.objective, rel=1e-12)
    assert_scipy_objective(split, cost, reference(cost, maximize)[0], maximize)


def test_worker_families_are_the_families():
    """``family_dask`` makes each of ``WORKER_FAMILIES`` chunk by chunk with ``family``'s values
    (what ``dlap solve --workers`` relies on), and names the families it cannot make."""
    for name in dlap.generate.WORKER_FAMILIES:
        f = 10.0 if name == "uniform-counter" else None
        chunked = dlap.generate.family_dask(name, 150, f, seed=4, m=170, chunks=(60, 70)).compute()
        np.testing.assert_array_equal(chunked, dlap.generate.family(name, 150, f, seed=4, m=170))
    with pytest.raises(ValueError, match="family 'ties' is made on one machine; the workers make uniform-counter"):
        dlap.generate.family_dask("ties", 10)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("family", ["geometric", "machol-wien", "ties", "float"])
def test_families(client, method, family):
    # Machol-Wien needs O(n^2) dual updates, each a few collectives (~4 ms apiece over Dask RPC on
    # CI's 2 cores): n = 16 keeps it to seconds
    n = 16 if family == "machol-wien" else 120
    check(dlap.generate.family(family, n, seed=1), client, method, chunks=(50, 50))


def test_maximize_and_caller_data_untouched(client):
    cost = uniform_block((0, 90), (0, 70), 70, 1000, 2).astype(np.float64)
    before = cost.copy()
    for method in METHODS:
        check(cost, client, method, maximize=True, chunks=(40, 30))
    assert np.array_equal(cost, before)


def test_errors(client):
    with pytest.raises(TypeError, match="dask array, a Zarr array or a Zarr path"):
        dd.solve(np.zeros((3, 3)), client)
    with pytest.raises(ValueError, match="expected a matrix"):
        dd.solve(da.zeros((2, 2, 2)), client)
    with pytest.raises(TypeError, match="Cannot cast"):
        dd.solve(da.from_array(np.zeros((2, 2), dtype=complex)), client)
    with pytest.raises(ValueError, match="method must be one of"):
        dd.solve(da.zeros((2, 2)), client, method="dgs")
    empty = dd.solve(da.zeros((0, 3)), client)
    assert empty.row_ind.shape == (0,) and empty.row_ind.dtype == np.int64


def test_subnormal_costs_end_on_the_ranks(client):
    """Issue 37: the ε schedule of a subnormal excess grew without end; on a cluster a 4 x 4
    matrix pushed both workers to 2.8 GB until their nannies restarted them."""
    cost = np.zeros((4, 4))
    cost[3, 3] = 5e-324
    for method in ("scaling", "auto", "tree"):
        result = dd.solve(da.from_array(cost, chunks=(2, 4)), client, method=method)
        assert result.objective == 0.0 and result.verify().optimal


def test_a_rank_runs_on_its_workers_threads(client):
    """Three single-threaded worker processes on this host: each rank's kernels run on one thread,
    not on a team of every core per rank, even for a slab above the serial size."""
    n = 1800  # 3 slabs of 1.08M entries: above dlap.threads.SERIAL_MAX_ENTRIES
    result = dd.solve(uniform_dask(n, 10, seed=4, chunks=(n // 3, n)), client, method="classical")
    assert result.stats.threads == 1
    assert result.verify().optimal


def test_the_wall_time_is_accounted_for(client):
    """stats say where a solve's wall time went: placement, the comm's setup on the client, the
    ranks' tasks starting, their solve, their results coming back; together at most the wall
    time, and the ranks' part the largest."""
    result = dd.solve(uniform_dask(900, 10, seed=6, chunks=(300, 900)), client, method="classical")
    seconds = result.stats.phase_seconds
    parts = ("placement", "comm_spec", "rank_start", "comm_setup", "rank_solve", "rank_return")
    assert all(seconds[name] >= 0 for name in parts), seconds
    assert sum(seconds[name] for name in parts) <= result.stats.seconds
    assert result.stats.phase_counts["comm_kept"] == 0  # sockets between CPU ranks: one per solve


def test_progress_events_and_task_names(client):
    """Rank 0's progress events reach the caller's callback; the dashboard's task stream shows the
    placement and solve tasks under their names."""
    seen = []
    cost = uniform_block((0, 400), (0, 400), 400, 4000, 6)
    with distributed.get_task_stream(client) as stream:
        result = dd.solve(da.from_array(cost, chunks=(134, 400)), client, method="classical",
                          progress=seen.append)
    assert seen and (seen[-1].matched, seen[-1].total, seen[-1].stage) == (400, 400, "done") and result.verify().optimal
    assert [u.fraction for u in seen] == sorted(u.fraction for u in seen) and seen[-1].fraction == 1.0
    keys = [str(task["key"]) for task in stream.data]
    assert sum(k.startswith("dlap-solve-classical-") for k in keys) == 3
    assert sum(k.startswith("dlap-slab-") for k in keys) == 3


def test_a_solve_without_a_client_starts_a_cluster_of_its_own(tmp_path):
    """Two ranks, rows and columns split: solve() in a process with no client open starts and
    closes a LocalCluster of its own for each call (a fresh interpreter: this module holds a
    client)."""
    script = tmp_path / "alone.py"
    script.write_text("""
import dask.array as da, dlap, dlap.distributed as dd
from dlap.generate import uniform_block
if __name__ == "__main__":
    cost = uniform_block((0, 200), (0, 200), 200, 200, 7)
    arr = da.from_array(cost, chunks=(60, 200))
    expected = dlap.solve(cost).objective
    for method in ("classical", "tree"):
        result = dd.solve(arr, method=method, n_workers=2, device="cpu")
        assert result.objective == expected and result.verify().optimal
        assert result.stats.phase_counts["ranks"] == 2
""")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_without_a_client_the_default_client_solves(client):
    """Dask's convention: with a Client open, solve() uses it (this module's three workers)
    instead of starting a cluster."""
    cost = uniform_block((0, 60), (0, 60), 60, 60, 3)
    result = dd.solve(da.from_array(cost, chunks=(30, 60)))
    assert result.objective == dlap.solve(cost).objective
    assert result.stats.phase_counts["ranks_offered"] == len(client.scheduler_info()["workers"]) == 3


def test_zarr_round_trip(client, tmp_path):
    """Generated on the workers into a Zarr store, solved from its path (each rank reads its own
    region), the assignment and duals written back to Zarr."""
    zarr = pytest.importorskip("zarr")
    path = str(tmp_path / "cost.zarr")
    uniform_dask(250, 1, seed=5, chunks=(100, 250)).to_zarr(path)
    cost = zarr.open_array(path, mode="r")[:]
    for method in METHODS:
        result = dd.solve(path, client, method=method)
        assert result.objective == dlap.solve(cost).objective and result.verify(cost).optimal
    out = zarr.open_group(str(tmp_path / "solution.zarr"), mode="w")
    out.create_array("col_ind", data=result.col_ind)
    out.create_array("col_duals", data=result.col_duals)
    again = zarr.open_group(str(tmp_path / "solution.zarr"), mode="r")
    assert np.array_equal(again["col_ind"][:], result.col_ind)
