"""Placement on real CPU LocalClusters: each rank's slab made, read or cut where its data lives,
filled piece by piece, and nothing larger than a chunk in a graph."""

import time

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

from ..helpers import assert_nan_slab_refused, received_bytes  # noqa: E402
from .engine_checks import METHODS  # noqa: E402


def test_the_bytes_each_rank_makes_for_its_slab():
    """made_bytes: a chunk is made whole by every rank whose slab it overlaps (column chunks of
    a row split: the whole matrix by each rank)."""
    from dlap.distributed.data import as_source, made_bytes

    def made(chunks, axis=0):
        source = as_source(da.zeros((1000, 800), chunks=chunks, dtype=np.int32))
        bounds = (0, 250, 500, 750, 1000) if axis == 0 else (0, 200, 400, 600, 800)
        return (made_bytes(source, axis, bounds) // (4 * source.shape[1 - axis])).tolist()

    assert made((250, 800)) == [250, 250, 250, 250]
    assert made((100, 800)) == [300, 300, 300, 300]  # the bands across 250 and 750 are made twice
    assert made((300, 300)) == [300, 600, 600, 400]
    assert made((1000, 200)) == [1000] * 4
    assert made((1000, 300), axis=1) == [300, 600, 300, 200]


def test_generated_chunkings_do_not_share_keys(client):
    """The same generated matrix in two chunkings: a persisted one must not stand in for the other."""
    rows = uniform_dask(200, 1, seed=3, chunks=(100, 200)).persist()
    cols = uniform_dask(200, 1, seed=3, chunks=(200, 100))
    assert np.array_equal(cols.compute(), rows.compute())


def test_persisted_input_ranks_follow_the_data(client):
    """A persisted array with one row chunk per rank: each classical rank runs where its chunk
    is, and nothing moves between workers, even after a solve of the same array unpersisted
    (whose pinned tasks must not leave their worker restrictions on keys the next one uses)."""
    cost = uniform_block((0, 300), (0, 300), 300, 3000, 12)
    dd.solve(da.from_array(cost, chunks=(100, 300)), client, method="classical")
    arr = da.from_array(cost, chunks=(100, 300)).persist()
    distributed.wait(arr)
    holders = {key[1]: workers[0] for key, workers in client.who_has(arr).items()}
    before = received_bytes(client)
    with distributed.get_task_stream(client) as stream:
        result = dd.solve(arr, client, method="classical")
    assert received_bytes(client) == before
    assert result.stats.phase_counts["placement_moved_bytes"] == 0
    ran = {int(str(t["key"]).rsplit("-", 1)[1]): t["worker"] for t in stream.data
           if str(t["key"]).startswith("dlap-solve-")}
    assert ran == holders
    assert result.objective == dlap.solve(cost).objective and result.verify().optimal


def test_persisted_input_is_cut_where_it_lives(client):
    """Row chunks, column slabs (tree): each rank holds a third of its slab; the other pieces
    are cut on the workers that hold their chunks, so only they move (2/3 of the matrix, not
    the whole chunks: twice the matrix)."""
    cost = uniform_block((0, 300), (0, 300), 300, 300, 13).astype(np.float64)
    arr = da.from_array(cost, chunks=(100, 300)).persist()
    distributed.wait(arr)
    before = received_bytes(client)
    result = dd.solve(arr, client, method="tree")
    moved = result.stats.phase_counts["placement_moved_bytes"]
    assert moved == cost.nbytes * 2 // 3
    assert moved <= received_bytes(client) - before <= moved * 1.05
    assert result.objective == dlap.solve(cost).objective and result.verify(cost).optimal


class HeldAtOnce(distributed.diagnostics.plugin.SchedulerPlugin):
    """Scheduler plugin: the most keys starting with ``prefix`` held in memory at once."""

    name = "held-at-once"

    def __init__(self, prefix: str):
        self.prefix, self.held, self.most = prefix, set(), 0

    def transition(self, key, start, finish, *args, **kwargs):
        if str(key).startswith(self.prefix):
            if finish == "memory":
                self.held.add(key)
                self.most = max(self.most, len(self.held))
            elif start == "memory":
                self.held.discard(key)


def held_at_once(client, prefix: str, solve):
    """``solve()``'s result, and the most keys starting with ``prefix`` it held at once."""
    client.register_plugin(HeldAtOnce(prefix), name=HeldAtOnce.name)
    try:
        result = solve()
        return result, client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins[HeldAtOnce.name].most)
    finally:
        client.unregister_scheduler_plugin(HeldAtOnce.name)


def slabs_left_filling(client, timeout: float = 5.0) -> int:
    """The slabs the workers' SlabsFilling plugins still hold, once the released keys have
    reached them (0 when every fill was closed or dropped)."""
    from dlap.distributed.placement import SlabsFilling

    def held(dask_worker):
        plugin = dask_worker.plugins.get(SlabsFilling.name)
        return len(plugin.slabs) if plugin is not None else 0

    deadline = time.perf_counter() + timeout
    while (left := sum(client.run(held).values())) and time.perf_counter() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize("source", ["zarr", "persisted", "generated"])
def test_a_slab_of_many_pieces_is_filled_in_place(client, tmp_path, monkeypatch, source):
    """A slab of many pieces (Zarr bands, persisted chunks cut in bands where they live, generated
    chunks) is allocated once and filled piece by piece, with about ``dlap.placement.buffer-bytes`` of pieces
    held per rank at a time: the optimum of dlap.solve, transposed (more rows than columns),
    maximised, 8-byte integers shifted by an offset, every variant; nothing left in the workers'
    plugin."""

    monkeypatch.setitem(dask.config.config["dlap"]["placement"], "piece-bytes", 4096)
    monkeypatch.setitem(dask.config.config["dlap"]["placement"], "buffer-bytes", 3 * 4096)
    cost = uniform_block((0, 200), (0, 150), 150, 3000, 21, dtype="int64") + 2**60
    if source == "zarr":
        zarr = pytest.importorskip("zarr")
        path = str(tmp_path / "cost.zarr")
        zarr.create_array(path, shape=cost.shape, chunks=(10, 40), dtype=cost.dtype)[:] = cost
        arr, prefix = path, "dlap-read-zarr-"
    elif source == "persisted":
        arr, prefix = da.from_array(cost, chunks=(50, 50)).persist(), "dlap-cut-"
        distributed.wait(arr)
    else:
        arr = uniform_dask(200, 15, m=150, seed=21, chunks=(20, 30), dtype="int64") + 2**60
        prefix = "add-"  # dask's name for the chunks of ``uniform + 2**60``
        assert np.array_equal(arr.compute(), cost)
    expected = dlap.solve(cost, maximize=True).objective
    for method in METHODS:
        with distributed.get_task_stream(client) as stream:
            result, most = held_at_once(client, prefix, lambda m=method: dd.solve(arr, client, method=m, maximize=True))
        assert result.objective == expected and result.verify().optimal and result.verify(cost).optimal
        keys = [str(t["key"]) for t in stream.data]
        ranks = result.stats.phase_counts["ranks"]
        writes = sum(k.startswith("dlap-write-slab-") for k in keys)
        assert sum(k.startswith("dlap-open-slab-") for k in keys) == ranks == 3
        # many pieces a slab, few of them held at once: buffer-bytes of them (3 bands, 2 generated
        # chunks), and the last ones written until their release reaches the scheduler
        per_rank = 3 if source != "generated" else 2
        assert most <= 2 * per_rank * ranks < writes, (most, writes)
    assert slabs_left_filling(client) == 0


def test_a_held_chunk_that_is_a_slab_is_used_as_it_is(client):
    """Two persisted row chunks, both held by the first rank's worker: that rank's slab is its
    chunk itself (no cut), the second rank's is cut where the chunk lies and moved; the
    optimum, and the caller's chunks unchanged."""
    from dlap.distributed.cluster import worker_addresses

    cost = uniform_block((0, 160), (0, 160), 160, 2000, 23).astype(np.int32)
    first, second = worker_addresses(client)[:2]
    arr = client.persist(da.from_array(cost, chunks=(80, 160)), workers=[first])
    distributed.wait(arr)
    assert all(held == (first,) for held in client.who_has(arr).values())
    with distributed.get_task_stream(client) as stream:
        result = dd.solve(arr, client, method="classical", workers=[first, second])
    assert result.objective == dlap.solve(cost).objective and result.verify(cost).optimal
    keys = [str(t["key"]) for t in stream.data]
    # dlap-cut-<solve>-<rank>-...: the second rank's only; each rank's slab made by one task
    # (dlap-slab-<solve>-<rank>), the first from its chunk
    cut = {k[len("dlap-cut-"):].split("-")[1] for k in keys if k.startswith("dlap-cut-")}
    slabs = sorted(k.rsplit("-", 1)[1] for k in keys if k.startswith("dlap-slab-"))
    assert cut == {"1"} and slabs == ["0", "1"], keys
    assert result.stats.phase_counts["placement_moved_bytes"] == cost[80:].nbytes
    assert np.array_equal(arr.compute(), cost)


def test_a_piece_of_an_in_memory_matrix_carries_its_chunk_only(client):
    """``da.from_array`` of a 32 MB matrix in 20 chunks: each chunk's Delayed holds the whole
    graph, every chunk's data included, so each piece computed from it shipped the matrix (and
    Dask warned of a large graph at each); placement culls each piece's graph to its chunk, and
    no graph sent is large. The optimum."""
    import warnings

    cost = uniform_block((0, 2000), (0, 2000), 2000, 20000, 24).astype(np.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = dd.solve(da.from_array(cost, chunks=(100, 2000)), client, method="classical")
    assert result.verify(cost).optimal
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert not large, large[0]


def test_a_chunk_larger_than_a_graph_should_carry_is_scattered(client):
    """An in-memory matrix whose every chunk alone passes Dask's large-graph threshold (lowered
    here to 100 kB, so that a small matrix shows it): no large graph is sent, the optimum."""
    import warnings

    cost = uniform_block((0, 300), (0, 300), 300, 3000, 25).astype(np.float64)  # chunks of 240 kB
    with warnings.catch_warnings(record=True) as caught, \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": "100kB"}):
        warnings.simplefilter("always")
        result = dd.solve(da.from_array(cost, chunks=(100, 300)), client, method="classical")
    assert result.verify(cost).optimal
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert not large, large[0]


def test_a_slab_that_fails_to_fill_is_dropped(client, monkeypatch):
    """A NaN in a later piece of a slab: scipy's error, and the half-filled slabs are freed on
    every worker."""

    monkeypatch.setitem(dask.config.config["dlap"]["placement"], "piece-bytes", 4096)
    cost = uniform_block((0, 300), (0, 300), 300, 3000, 22).astype(np.float64)
    assert_nan_slab_refused(lambda c, method: dd.solve(da.from_array(c, chunks=(20, 100)), client, method=method), cost)
    assert slabs_left_filling(client) == 0
