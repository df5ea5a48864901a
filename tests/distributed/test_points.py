"""``dlap.distributed.solve_points`` on real LocalClusters: the ranks' searches over every pair gathered
at the root, the optimum :func:`dlap.solve_points` and scipy find, scipy's errors, one task a rank,
a dead worker or a paused client ending the solve and not the cluster."""

import os
import signal
import time

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

pytestmark = pytest.mark.distributed

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dlap  # noqa: E402
import dlap.distributed as dd  # noqa: E402
from dlap import generate  # noqa: E402
from dlap.points import coarse  # noqa: E402
from dlap.points.search import PairSearch  # noqa: E402

from ..helpers import assert_told_its_solve_ended, client_process, registry_rows, solve_in_background  # noqa: E402


def scipy_optimum(a, b, metric, maximize=False, **kw):
    cost = cdist(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), metric, **kw)
    rows, cols = linear_sum_assignment(cost, maximize=maximize)
    return cost[rows, cols].sum()


@pytest.mark.parametrize("shape", [(120, 120), (90, 130), (130, 90)])
@pytest.mark.parametrize("metric, kw", [("euclidean", {}), ("sqeuclidean", {}), ("cityblock", {}),
                                        ("cosine", {}), ("minkowski", {"p": 3.0})])
def test_agrees_with_scipy(client, shape, metric, kw):
    """Both orientations, every metric, one candidate a row (so the pricing rounds find the optimum's
    edges) and the default; maximised too."""
    n, m = shape
    rng = np.random.default_rng(n + m)
    a, b = rng.normal(size=(n, 3)), rng.normal(size=(m, 3))
    for candidates, maximize in ((1, False), (None, True)):
        result = dd.solve_points(a, b, metric, client, candidates=candidates, maximize=maximize, **kw)
        assert result.objective == pytest.approx(scipy_optimum(a, b, metric, maximize, **kw), rel=1e-12, abs=1e-12)
        assert result.verify().optimal
        assert result.row_ind.shape[0] == min(n, m)
        assert result.stats.phase_counts["workers"] == 3


def queries_on_ranks(a, b, spec, u, v, k, subsets):
    """A rank's task for the test below: the root asks every rank for each row's and column's
    ``k`` nearest and prices ``u``, ``v`` for each of ``subsets`` (None: every row), returning
    the gathered answers; the others answer."""
    from distributed import get_worker

    from dlap.distributed.rank.engine import joined
    from dlap.distributed.rank.points import RankBlocks, RootSearch, answer_queries
    from dlap.points.costs import PointCosts

    blocks = RankBlocks(spec, a, b)
    with joined(spec.solve_id, spec.rank, spec.size, spec.comm, None, spec.token, get_worker(), np) as comm:
        if spec.rank:
            return answer_queries(comm, np, blocks)
        costs = PointCosts(a, b, spec.metric, spec.exponent, "cpu")
        here = PairSearch(costs.kernels, a, b, costs.a_norms, costs.b_norms, spec.metric, spec.exponent, spec.sign)
        search = RootSearch(comm, np, blocks, here)
        answers = [search.nearest_columns(k), search.nearest_rows(k)]
        for rows in subsets:
            found = np.full((a.shape[0], k), -1), np.zeros((a.shape[0], k)), np.full(a.shape[0], -1, dtype=np.int64)
            search.price(u, v, 1e-12, 0.0, *found, rows)
            answers.append(found)
        search.done()
        return answers


def test_the_ranks_searches_are_one_search_s(client):
    """Over three ranks (a block of rows without any to price among them), the root gathers the
    nearest columns and rows and the pricing of one process's search over every pair: the
    counts, lists and reduced costs, rows with none and with more than the lists hold included,
    of every row or of some."""
    from dlap.distributed.rank.points import PointsRankSpec
    from dlap.distributed.solve import comm_spec
    from dlap.points.solve import PointsProblem

    n, m, k = 700, 900, 4
    a, b = generate.points("uniform", n, m, seed=4)
    side = PointsProblem(a, b, "euclidean", None, "cpu", None).rows_side
    workers = sorted(client.scheduler_info()["workers"])
    rng = np.random.default_rng(0)
    u, v = rng.uniform(0.0, 0.08, n), -rng.uniform(0.0, 0.05, m)
    subsets = [None, np.flatnonzero(rng.random(n // 2) < 0.3)]  # none of rows 350.. (the third block's)
    comm, solve_id = comm_spec(client, workers, False), f"test-{rng.integers(1 << 30)}"
    specs = [PointsRankSpec(solve_id=solve_id, rank=r, size=3, row_bounds=(0, 200, 350, n),
                            col_bounds=(0, 500, 501, m), metric="euclidean", exponent=2.0, sign=1.0, device="cpu",
                            comm=comm, candidates=k) for r in range(3)]
    futures = [client.submit(queries_on_ranks, side.a, side.b, spec, u, v, k, subsets, workers=[w], pure=False)
               for spec, w in zip(specs, workers, strict=True)]
    distributed.wait(futures, timeout=120)  # a hang guard, not a timing
    answers = futures[0].result()
    assert [f.result() for f in futures[1:]] == [None, None]
    here = PairSearch(side.kernels, side.a, side.b, side.a_norms, side.b_norms, "euclidean", 2.0, 1.0)
    for there, alone in zip(answers[:2], (here.nearest_columns(k), here.nearest_rows(k)), strict=True):
        assert np.array_equal(there[0], alone[0]) and np.array_equal(there[1], alone[1])
    for there, rows in zip(answers[2:], subsets, strict=True):
        alone = np.full((n, k), -1), np.zeros((n, k)), np.full(n, -1, dtype=np.int64)
        here.price(u, v, 1e-12, 0.0, *alone, rows)
        assert (alone[2] == 0).any() and (alone[2] > k).any()
        kept = np.arange(k)[None, :] < alone[2][:, None]
        assert np.array_equal(there[2], alone[2])
        assert np.array_equal(there[0][kept], alone[0][kept]) and np.array_equal(there[1][kept], alone[1][kept])


@pytest.mark.parametrize("family", ["uniform", "clustered", "shifted"])
def test_the_optimum_of_one_process(client, family):
    """The same optimum as :func:`dlap.solve_points` on its families, float32 points included, the
    core solved on as many threads (dlap.threads' rule for 1500 x 1300 pairs)."""
    a, b = generate.points(family, 1500, 1300, seed=3)
    for dtype in (np.float64, np.float32):
        here = dlap.solve_points(a.astype(dtype), b.astype(dtype), device="cpu")
        there = dd.solve_points(a.astype(dtype), b.astype(dtype), client=client, device="cpu")
        assert there.objective == here.objective and there.stats.threads == here.stats.threads >= 1
        assert there.verify().optimal


def test_coarse_transport_candidates_are_the_roots(client, monkeypatch):
    """Shifted clouds, cells of 8 from 64 rows whatever the coarse solve priced: the cells'
    assignment is solved by the root and gives the first core the same edges as
    :func:`dlap.solve_points`'s."""
    small = {"MIN_ROWS": 64, "CELL_POINTS": 8, "LOCAL_VIOLATORS": -1.0}
    kept = {name: getattr(coarse, name) for name in small}
    for name, value in small.items():
        monkeypatch.setattr(coarse, name, value)
    a, b = generate.points("shifted", 400, 460, seed=5)
    here = dlap.solve_points(a, b, device="cpu")
    client.run(lambda: [setattr(coarse, name, value) for name, value in small.items()])
    try:
        there = dd.solve_points(a, b, client=client, device="cpu")
    finally:
        client.run(lambda: [setattr(coarse, name, value) for name, value in kept.items()])
    assert there.stats.phase_counts["coarse_edges"] == here.stats.phase_counts["coarse_edges"] > 0
    assert there.objective == pytest.approx(scipy_optimum(a, b, "euclidean"), rel=1e-12)
    assert there.verify().optimal


def test_dask_arrays_in_and_one_task_a_rank(client):
    a, b = generate.points("uniform", 700, 700, seed=5)
    with distributed.get_task_stream(client) as stream:
        result = dd.solve_points(da.from_array(a, chunks=(200, 2)), da.from_array(b, chunks=(300, 2)), client=client,
                                 n_workers=2)
    assert result.objective == dlap.solve_points(a, b, device="cpu").objective
    assert result.stats.phase_counts["workers"] == 2 and result.stats.device == "2 x cpu"
    ranks = sorted(str(task["key"]).rsplit("-", 1)[1] for task in stream.data
                   if str(task["key"]).startswith("dlap-points-"))
    assert ranks == ["0", "1"]  # what the dashboard's task stream shows: one long task a rank


def test_scipy_errors(client):
    good = np.zeros((3, 2))
    with pytest.raises(ValueError, match="NaN|finite"):
        dd.solve_points(np.array([[0.0, np.nan], [1.0, 1.0]]), good, client=client)
    with pytest.raises(ValueError):
        dd.solve_points(good, np.zeros((3, 3)), client=client)
    with pytest.raises(ValueError, match="device"):
        dd.solve_points(good, good, client=client, device="tpu")
    empty = dd.solve_points(np.zeros((0, 2)), good, client=client)
    assert empty.objective == 0.0 and empty.row_ind.shape == (0,)


def test_without_a_client_the_default_client_solves(client):
    a, b = generate.points("uniform", 200, 200, seed=8)
    assert dd.solve_points(a, b).objective == dlap.solve_points(a, b, device="cpu").objective


@pytest.mark.gpu
@pytest.mark.parametrize("family, metric, n", [("uniform", "euclidean", 20000), ("embeddings", "cosine", 3000)])
def test_on_gpu_workers(family, metric, n):
    """One dask-cuda worker per GPU; 2-D points through the workers' k-d trees, 64-D embeddings
    scanned by their GPUs."""
    pytest.importorskip("dask_cuda")
    a, b = generate.points(family, n, n + 500, seed=2)
    with dd.start_cluster(dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        result = dd.solve_points(a, b, metric, c, device="gpu")
    assert result.objective == dlap.solve_points(a, b, metric, device="cpu").objective
    assert result.verify().optimal


def test_a_worker_that_dies_ends_its_solve_and_the_cluster_goes_on():
    """A rank's worker killed mid-solve: the solve ends with WorkerLostError (the other ranks
    aborted), and the cluster, its worker restarted, solves the next."""
    a, b = generate.points("uniform", 40000, 40000, seed=9)
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        workers = sorted(c.scheduler_info()["workers"])
        thread, started, outcome = solve_in_background(
            lambda progress: dd.solve_points(a, b, client=c, workers=workers, progress=progress))
        assert started.wait(120), "the solve never reported progress"
        os.kill(c.run(os.getpid, workers=[workers[2]])[workers[2]], signal.SIGKILL)
        thread.join(120)  # hang guards, not timings
        assert not thread.is_alive()
        assert isinstance(outcome.get("error"), dd.WorkerLostError), outcome
        c.wait_for_workers(3, timeout=120)
        small = generate.points("uniform", 500, 500, seed=1)
        assert dd.solve_points(*small, client=c).objective == dlap.solve_points(*small, device="cpu").objective


def test_an_ended_solve_frees_the_roots_worker_during_its_core_solve():
    """The root works alone in its core solve for long (here an auction of about 78,000 phases:
    the ε factor between them 1.0001 on the workers); a rank's worker killed meanwhile ends the
    solve, and the root, which asks between its phases whether the solve was aborted, frees its
    worker at once, so the next solve runs (it used to go on until its next query, at the end of
    that auction, minutes later, and the next solve's root task waited for it)."""
    import threading

    import dlap.points.core as core_module

    a, b = generate.points("uniform", 20000, 20000, seed=9)
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        workers = sorted(c.scheduler_info()["workers"])
        c.run(setattr, core_module, "AUCTION_EPS_FACTOR", 1.0001)
        c.run(setattr, coarse, "MIN_ROWS", 10**9)  # no coarse problem: its auction would be slowed too
        in_core, outcome = threading.Event(), {}

        def heard(update):
            if update.stage == "core solve":
                in_core.set()

        def solve():
            try:
                dd.solve_points(a, b, client=c, workers=workers, progress=heard)
            except Exception as e:  # the test checks what it was
                outcome["error"] = e

        thread = threading.Thread(target=solve)
        thread.start()
        assert in_core.wait(120), "the solve never reached its core solve"
        time.sleep(1.0)  # inside the first auction's phases
        os.kill(c.run(os.getpid, workers=[workers[2]])[workers[2]], signal.SIGKILL)
        c.run(setattr, core_module, "AUCTION_EPS_FACTOR", 6.0, workers=workers[:2])
        c.run(setattr, coarse, "MIN_ROWS", coarse.MIN_ROWS, workers=workers[:2])
        thread.join(120)  # hang guards, not timings
        assert isinstance(outcome.get("error"), dd.WorkerLostError), outcome
        c.wait_for_workers(3, timeout=120)
        small = generate.points("uniform", 500, 500, seed=1)
        after = threading.Thread(target=lambda: outcome.update(next=dd.solve_points(*small, client=c)))
        after.start()
        after.join(90)  # the slowed auction alone would hold the root's worker for minutes
        assert "next" in outcome, "the next solve waited for the ended solve's root"
        assert outcome["next"].objective == dlap.solve_points(*small, device="cpu").objective


def test_the_dashboard_page_follows_the_rounds(client):
    """The scheduler's solve registry (the dashboard's dlap page) has the solve, its pricing
    rounds and violators, and the stage it was at, as the client's events said."""
    a, b = generate.points("uniform", 2000, 2000, seed=4)
    result = dd.solve_points(a, b, client=client, candidates=2)
    row = registry_rows(client)[0]
    counts = result.stats.phase_counts
    assert row["method"] == "sparse core (points)" and row["state"] == "done" and row["shape"] == "2000 x 2000"
    assert row["rounds"] == counts["pricing_rounds"] >= 2 and row["violators"] == counts["violators"] > 0
    assert row["done"] == "100%" and row["stage"] == "done" and row["ranks"] == 3


#: a client solving points in a process of its own (the test stops it)
POINTS_CLIENT = """
import sys, distributed
import dlap.distributed as dd
from dlap import generate
a, b = generate.points("uniform", int(sys.argv[2]), int(sys.argv[2]), seed=3)
with distributed.Client(sys.argv[1]) as client:
    dd.solve_points(a, b, client=client)
"""


def test_a_paused_client_has_its_solve_ended_and_the_cluster_goes_on():
    """Client A stopped (SIGSTOP) mid-solve: its lease (2 s here) lapses, the registry ends its
    solve, client B solves meanwhile, and A, resumed, is told its solve was ended."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c, client_process(POINTS_CLIENT, cluster.scheduler_address, 40000) as child:
        deadline = time.monotonic() + 120  # hang guards, not timings
        while "running" not in solve_states(c) and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGSTOP)
        while not any(s.startswith("lease expired") for s in solve_states(c)) and time.monotonic() < deadline:
            time.sleep(0.1)
        a, b = generate.points("uniform", 300, 300, seed=1)
        assert dd.solve_points(a, b, client=c).objective == dlap.solve_points(a, b, device="cpu").objective
        assert child.poll() is None  # B solved while A was stopped
        assert_told_its_solve_ended(child)


def solve_states(client) -> list[str]:
    return [row["state"] for row in registry_rows(client)]
