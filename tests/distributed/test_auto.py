"""``method="auto"`` on real CPU LocalClusters: one rank running what ``dlap.solve`` runs, or a
split with the variant ``dlap.solve`` picks, ε-scaling over column slabs, and the data a split
would move (tests/distributed/test_engine.py: how the clusters' workers see a GPU host)."""

import numpy as np
import pytest

pytestmark = pytest.mark.distributed

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dlap  # noqa: E402
import dlap.distributed as dd  # noqa: E402
import dlap.generate  # noqa: E402
from dlap.generate import uniform_block, uniform_dask  # noqa: E402

from ..helpers import assert_scipy_objective, reference  # noqa: E402


@pytest.mark.parametrize("family", ["uniform", "geometric", "machol-wien"])
@pytest.mark.parametrize("shape", [(300, 300), (200, 260), (260, 200)])
def test_auto_solves_on_one_rank_what_dlap_solve_solves(client, family, shape):
    """method="auto" (the default) with a matrix that fits a worker: one rank runs exactly what
    dlap.solve(method="auto") runs (ε-scaling on structured costs), and stats say so."""
    f = 10.0 if family in dlap.generate.TAKES_F else None
    cost = np.ascontiguousarray(dlap.generate.family(family, max(shape), f)[: shape[0], : shape[1]])
    alone = dlap.solve(cost, device="cpu")
    for maximize in (False, True):
        result = dd.solve(da.from_array(cost, chunks=(100, 100)), client, maximize=maximize, device="cpu")
        assert result.stats.phase_counts["ranks"] == 1 and result.stats.phase_counts["ranks_offered"] == 3
        assert result.verify().optimal and result.verify(cost).optimal
        mine = alone if not maximize else dlap.solve(cost, maximize=True, device="cpu")
        assert result.stats.method == f"distributed-{mine.stats.method}"  # the same run: the same answer
        np.testing.assert_array_equal(result.col_ind, mine.col_ind)
        assert result.objective == mine.objective  # float objectives summed correctly rounded, as dlap.solve


def _answers_unproved(dask_worker=None, undo=False):
    """On a worker: its ranks' sparse engine answers None (duals that do not prove its answer), or
    again its own answers (``undo``)."""
    from dlap.distributed.rank import engine
    from dlap.hungarian.sparse import solve_sparse

    engine.solve_sparse = solve_sparse if undo else (lambda *args: None)


def _sparse_from(rows, dask_worker=None):
    """On a worker: method="auto" gives structured floats to the sparse engine from ``rows`` rows."""
    from dlap.hungarian import auto

    auto.SPARSE_MIN_ROWS = rows


def test_a_one_rank_solve_hands_rectangular_structured_floats_to_the_sparse_engine(client):
    """method="auto" on one rank gives a rectangular structured float matrix to the sparse engine,
    as dlap.solve does (the same answer); where that engine's duals do not prove its answer, the
    rank solves the matrix again with the tree variant (shown on a smaller matrix, the sparse
    engine taking it from its 200 rows on)."""
    from dlap.hungarian.auto import SPARSE_MIN_ROWS

    cost = dlap.generate.family("geometric-disjoint", SPARSE_MIN_ROWS, m=SPARSE_MIN_ROWS + 200)
    alone = dlap.solve(cost, device="cpu")
    arr = da.from_array(cost, chunks=(SPARSE_MIN_ROWS // 2, SPARSE_MIN_ROWS // 2 + 100))
    result = dd.solve(arr, client, device="cpu")
    assert alone.stats.method == "sparse" and result.stats.method == "distributed-sparse"
    assert result.stats.phase_counts["ranks"] == 1
    assert result.objective == alone.objective and result.verify().optimal and result.verify(cost).optimal
    np.testing.assert_array_equal(result.col_ind, alone.col_ind)
    small = dlap.generate.family("geometric-disjoint", 200, m=300)
    arr = da.from_array(small, chunks=(100, 150))
    client.run(_sparse_from, 200)
    try:
        assert dd.solve(arr, client, device="cpu").stats.method == "distributed-sparse"
        client.run(_answers_unproved)
        try:
            tree = dd.solve(arr, client, device="cpu")
        finally:
            client.run(_answers_unproved, undo=True)
    finally:
        client.run(_sparse_from, SPARSE_MIN_ROWS)
    assert tree.stats.method == "distributed-tree" and tree.verify(small).optimal
    assert tree.objective == pytest.approx(dlap.solve(small, method="tree", device="cpu").objective, rel=1e-12)


def test_a_one_rank_solve_hands_large_square_integers_to_the_sparse_engine(client):
    """i.i.d. integers spanning more than n values, from IID_SPARSE_MIN_ROWS rows: the one rank
    gives them to the sparse engine as dlap.solve does, and its integer certificate proves the
    whole-number duals."""
    from dlap.hungarian.auto import IID_SPARSE_MIN_ROWS

    cost = dlap.generate.uniform(IID_SPARSE_MIN_ROWS, 10.0, seed=2)
    alone = dlap.solve(cost, device="cpu")
    result = dd.solve(da.from_array(cost, chunks=(IID_SPARSE_MIN_ROWS // 2, IID_SPARSE_MIN_ROWS)), client,
                      device="cpu")
    assert alone.stats.method == "sparse" and result.stats.method == "distributed-sparse"
    assert result.objective == alone.objective and result.row_duals.dtype == np.int64
    assert result.verify().optimal and result.verify(cost).optimal


def test_a_one_rank_solve_borrows_the_threads_of_the_workers_offered(client):
    """The one rank of method="auto" runs on the threads of every offered worker of its host
    (3 single-threaded workers here), as dlap.solve would on the host's cores; a split solve's
    ranks keep one thread each."""
    import numba

    cost = uniform_block((0, 1100), (0, 1100), 1100, 11000, 2)  # above dlap.threads' serial size
    cores = next(iter(client.run(lambda: numba.config.NUMBA_NUM_THREADS).values()))
    arr = da.from_array(cost, chunks=(550, 1100))
    alone = dd.solve(arr, client, device="cpu")
    assert alone.stats.phase_counts["ranks"] == 1 and alone.stats.threads == min(3, cores)
    assert dd.solve(arr, client, device="cpu", n_workers=2).stats.threads == min(2, cores)
    assert dd.solve(arr, client, method="tree", device="cpu").stats.threads == 1


@pytest.mark.parametrize("family", ["geometric", "machol-wien", "ties"])
def test_scaling_on_one_two_and_three_ranks(client, family):
    """method="scaling" over column slabs: scipy's optimum with a certificate, and the same
    decisions on one, two and three ranks; a rectangular matrix is refused with what to use."""
    cost = dlap.generate.family(family, 120, seed=5)
    maximize = family in dlap.generate.MAXIMIZE
    arr = da.from_array(cost, chunks=(120, 40))
    results = [dd.solve(arr, client, method="scaling", maximize=maximize, device="cpu", n_workers=k) for k in (1, 2, 3)]
    picked = reference(cost, maximize)[0]
    for result in results:
        assert result.stats.method == "distributed-scaling" and result.verify().optimal
        assert_scipy_objective(result, cost, picked, maximize)
    first = results[0]
    for other in results[1:]:
        assert other.stats.iterations == first.stats.iterations
        assert other.stats.phase_counts["rows_scanned"] == first.stats.phase_counts["rows_scanned"]
        np.testing.assert_array_equal(other.col_ind, first.col_ind)
        np.testing.assert_array_equal(other.col_duals, first.col_duals)
    with pytest.raises(ValueError, match="square matrices .* 120 x 80"):
        dd.solve(da.from_array(cost[:, :80]), client, method="scaling", device="cpu")


# (geometric split over ranks: test_auto_hands_split_structured_costs_to_scaling)
@pytest.mark.parametrize("family", ["geometric-benefit", "machol-wien", "geometric-disjoint"])
def test_scaling_across_ranks_is_the_one_process_engine_bit_for_bit(client, family, monkeypatch):
    """Column slabs of two and three ranks, even or not: the same assignment, the same duals to
    the last bit, the same searches and row scans as ``dlap.solve(method="scaling")`` in this
    process, whose ε-phases then read the matrix itself (the Dask ranks make no half-width copy)."""
    from dlap.backends.base import Backend
    from dlap.backends.cpu import CPUBackend

    monkeypatch.setattr(CPUBackend, "narrow_copy", Backend.narrow_copy)
    cost = dlap.generate.family(family, 200, seed=5)
    maximize = family in dlap.generate.MAXIMIZE
    alone = dlap.solve(cost, method="scaling", maximize=maximize, device="cpu")
    for k, widths in ((2, (100, 100)), (3, (70, 80, 50))):
        split = dd.solve(da.from_array(cost, chunks=(200, widths)), client, method="scaling", maximize=maximize,
                         device="cpu", n_workers=k)
        assert split.stats.phase_counts["ranks"] == k
        np.testing.assert_array_equal(split.col_ind, alone.col_ind)
        np.testing.assert_array_equal(split.col_duals, alone.col_duals)
        np.testing.assert_array_equal(split.row_duals, alone.row_duals)
        assert split.stats.iterations == alone.stats.iterations
        assert split.stats.phase_counts["rows_scanned"] == alone.stats.phase_counts["rows_scanned"]


@pytest.fixture
def small_workers():
    """Two workers with 2 MB each (memory management off, so they live): a matrix of more
    than 0.5 MB fits neither (a rank holds the matrix and the pieces on their way to it). (Two: a third process on a 2-core machine makes every collective
    wait for a descheduled rank, and the searches take one per step. Per test: a second client
    kept alive would become the default client of the module's other tests.)"""
    config = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")}
    with dask.config.set(config), distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit="2MB", dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_auto_splits_a_matrix_that_fits_no_worker(small_workers):
    """1.4 MB int32 and 2.9 MB float matrices are split over the workers, with the variant
    dlap.solve picks for their costs; a small one still goes to one rank."""
    c = small_workers
    cases = [(uniform_dask(600, 10.0, chunks=(300, 600)), "tree"),  # wide integer range
             (uniform_dask(600, 0.1, chunks=(300, 600)), "classical"),  # at most n values
             (uniform_dask(600, 10.0, chunks=(300, 600)) / 7.0, "tree")]  # floats
    for arr, variant in cases:
        result = dd.solve(arr, c, device="cpu")
        assert result.stats.method == f"distributed-{variant}" and result.stats.phase_counts["ranks"] == 2
        assert result.verify().optimal
    small = dd.solve(da.from_array(np.ones((50, 50), dtype=np.int32)), c, device="cpu")
    assert small.stats.phase_counts["ranks"] == 1 and small.objective == 50


@pytest.mark.parametrize("family", ["machol-wien", "geometric", "geometric-benefit"])
def test_auto_hands_split_structured_costs_to_scaling(small_workers, family):
    """Structured costs that fit no worker: the tree variant's searches stall, and the ranks hand
    over to the ε-scaling engine over their column slabs, as dlap.solve does on one device: its
    optimum, certified, and with the columns split evenly or not exactly the same decisions
    (bids, searches, rows scanned, duals)."""
    cost = dlap.generate.family(family, 300, seed=3)  # 0.7 MB
    maximize = family in dlap.generate.MAXIMIZE
    # (dlap.solve gives square geometric floats to the sparse engine, which needs the whole matrix)
    alone = dlap.solve(cost, maximize=maximize, device="cpu", method="scaling")
    results = [dd.solve(da.from_array(cost, chunks=(cost.shape[0], widths)), small_workers, maximize=maximize, device="cpu")
               for widths in ((150, 150), (70, 230))]  # one chunk per rank: the slabs' bounds
    for result in results:
        assert result.stats.method == "distributed-scaling" == f"distributed-{alone.stats.method}"
        assert result.stats.phase_counts["ranks"] == 2
        assert result.objective == alone.objective and result.verify().optimal and result.verify(cost).optimal
    even, uneven = results
    for key in ("bids", "bidding_rounds", "rows_scanned"):
        assert even.stats.phase_counts.get(key) == uneven.stats.phase_counts.get(key), key
    assert even.stats.iterations == uneven.stats.iterations
    np.testing.assert_array_equal(even.col_ind, uneven.col_ind)
    np.testing.assert_array_equal(even.col_duals, uneven.col_duals)


def test_the_data_a_gpu_auto_solve_follows_is_what_the_solves_move(client):
    """The estimate behind method="auto" following a persisted integer matrix on GPU workers
    (``_auto_split``, reached only there; computed here on CPU workers): below
    dlap.auto.split-min-entries it names what one rank would move and the classical split's plan exactly
    when the classical split moves less, and those are the bytes the two solves move. Not
    persisted: no estimate."""
    from dlap.distributed.cluster import worker_addresses
    from dlap.distributed.data import as_source
    from dlap.distributed.solve import _auto_split

    cost = uniform_block((0, 300), (0, 300), 300, 3000, 14)
    workers = worker_addresses(client)
    assert _auto_split(client, as_source(da.from_array(cost, chunks=(100, 300))), cost.shape, False,
                       workers, 3, False) is None
    for chunks in [(100, 300), (300, 100)]:
        arr = da.from_array(cost, chunks=chunks).persist()
        distributed.wait(arr)
        one = dd.solve(arr, client, device="cpu").stats.phase_counts
        split = dd.solve(arr, client, method="classical").stats.phase_counts
        assert one["ranks"] == 1 and split["ranks"] == 3
        followed = _auto_split(client, as_source(arr), cost.shape, False, workers, 3, False)
        if split["placement_moved_bytes"] < one["placement_moved_bytes"]:
            assert followed[0] == one["placement_moved_bytes"]
            assert followed[1].moved_bytes == split["placement_moved_bytes"]
        else:
            assert followed is None


def test_a_gpu_auto_solve_splits_a_large_matrix_where_that_moves_and_makes_no_more(client, monkeypatch, tmp_path):
    """``_auto_split`` from dask.config dlap.auto.split-min-entries (lowered to the 300 x 300 matrix here): split where
    the ranks make or read their own rows (row chunks of a dask array that is not persisted, or
    of a Zarr store) or where the split moves no more of a persisted matrix than one rank would
    (column chunks across the workers); one rank where each rank would make or read the whole
    matrix (column chunks, not persisted or in Zarr) or where one worker holds it all."""

    from dlap.distributed.cluster import worker_addresses
    from dlap.distributed.data import as_source
    from dlap.distributed.solve import _auto_split

    monkeypatch.setitem(dask.config.config["dlap"]["auto"], "split-min-entries", 300 * 300)
    cost = uniform_block((0, 300), (0, 300), 300, 3000, 15)
    workers = worker_addresses(client)

    def decide(arr):
        return _auto_split(client, as_source(arr), cost.shape, False, workers, 3, False)

    made = decide(da.from_array(cost, chunks=(100, 300)))
    assert made[0] is None and made[1].workers == workers
    assert decide(da.from_array(cost, chunks=(300, 100))) is None
    for chunks in [(100, 300), (300, 100)]:
        path = str(tmp_path / f"cost-{chunks[0]}.zarr")
        da.from_array(cost, chunks=chunks).to_zarr(path)
        assert (decide(path) is None) == (chunks == (300, 100))
    spread = da.from_array(cost, chunks=(300, 100)).persist()
    distributed.wait(spread)
    one_moved, plan = decide(spread)
    assert plan.moved_bytes <= one_moved
    assert dd.solve(spread, client, method="classical").stats.phase_counts["placement_moved_bytes"] == plan.moved_bytes
    held = client.persist(da.from_array(cost, chunks=(100, 300)), workers=workers[:1])
    distributed.wait(held)
    assert decide(held) is None
