"""The ranks' comms on real CPU LocalClusters: their sockets, handshake and TLS, and failed,
cancelled or absent ranks ending their solve, never the cluster."""

import logging
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

from ..helpers import assert_nan_slab_refused, solve_in_background  # noqa: E402
from .engine_checks import check  # noqa: E402


def test_a_failing_rank_ends_the_solve(client):
    """A slab holding a NaN fails in placement, before any rank joins a comm: scipy's error comes
    back within 30 s and the cluster solves the next matrix. (A rank failing mid-solve is the
    dead-worker tests of tests/distributed/test_faults.py, and on GPUs test_engine_gpu.py.)"""
    cost = uniform_block((0, 300), (0, 300), 300, 3000, 4).astype(np.float64)
    assert_nan_slab_refused(lambda c, method: dd.solve(da.from_array(c, chunks=(100, 100)), client, method=method), cost)
    check(cost, client, "tree", chunks=(100, 100))
    assert_no_abort_events_left(client)


def assert_no_abort_events_left(client, timeout=5.0):
    """The scheduler holds no solve's abort event once the solves have ended (failed ones too)."""
    def abort_events(dask_scheduler):
        return [str(name) for name in dask_scheduler.extensions["events"]._events if str(name).startswith("dlap-abort-")]

    deadline = time.perf_counter() + timeout  # a watchdog's last wait (0.5 s at most) may still be open
    while client.run_on_scheduler(abort_events) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert client.run_on_scheduler(abort_events) == []


def test_closing_the_cluster_right_after_a_solve_logs_no_error():
    """A script's ``with LocalCluster(...)`` block that ends right after its solve: the ranks'
    watchdogs held a waiting ``Event.wait`` open on the scheduler for up to 0.5 s, and closing
    the cluster then logged each as a cancelled handler (ERROR and a CancelledError traceback
    from ``distributed.event``, in two of three runs of a 2-rank solve)."""
    records = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = records.append
    logger = logging.getLogger("distributed.event")
    logger.addHandler(handler)
    try:
        cost = dlap.generate.uniform(300, 10, seed=2)
        for _ in range(2):
            with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
                    distributed.Client(cluster) as c:
                result = dd.solve(da.from_array(cost, chunks=(300, 150)), c, method="tree", device="cpu")
                assert result.stats.phase_counts["ranks"] == 2 and result.verify().optimal
    finally:
        logger.removeHandler(handler)
    assert not records, [r.getMessage() for r in records]


def test_a_cancelled_rank_ends_the_solve(client):
    """Another client cancels a rank's task mid-solve: the solve raises within 30 s instead of
    waiting for a task that will never finish, and the cluster solves again."""
    cost = uniform_block((0, 5000), (0, 5000), 5000, 50000, 10)  # a solve of about a second
    arr = da.from_array(cost, chunks=(5000, 1667))
    thread, started, outcome = solve_in_background(
        lambda progress: dd.solve(arr, client, method="tree", progress=progress))
    assert started.wait(60), "the solve never reported progress"
    processing = client.processing()
    keys = [k for tasks in processing.values() for k in tasks if str(k).startswith("dlap-solve-tree-")]
    assert keys
    with distributed.Client(client.scheduler.address) as other:
        cancelled = time.perf_counter()
        other.cancel([distributed.Future(keys[0], other)], force=True)
    thread.join(60)
    assert not thread.is_alive() and time.perf_counter() - cancelled < 30
    assert "cancelled" in str(outcome.get("error")), outcome
    small = uniform_block((0, 150), (0, 150), 150, 1500, 1)
    assert dd.solve(da.from_array(small, chunks=(50, 150)), client).objective == dlap.solve(small).objective
    assert_no_abort_events_left(client)


def test_a_cluster_without_workers_is_one_clear_error():
    """Issue 37: dd.solve on a cluster with 0 workers raised "min() arg is an empty sequence" or a
    KeyError."""
    with distributed.LocalCluster(n_workers=0, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as client:
            for method in ("auto", "classical", "tree"):
                with pytest.raises(RuntimeError, match="the Dask cluster has no workers"):
                    dd.solve(da.ones((4, 4), chunks=2), client, method=method)


def _socket_ranks(solve_id: str, rank: int, addresses: list, size: int, absent: str | None):
    """A rank of a bare SocketComm on its worker: all-gathers ``size`` bytes of its own and
    checks every peer's piece. With ``absent``, rank 0 then skips the second collective, either
    staying connected for 2.5 s while the others are aborted after 1 s ("abort"), or closing its
    sockets at once, as a dead worker's are closed ("leave"), or joins it 1.5 s late ("late":
    the others report the CPU time their wait took). Returns what the rank saw."""
    import threading

    from distributed import get_worker
    from distributed.comm import get_address_host

    from dlap.distributed.rank.comm import CommAborted, RPCComm, SocketComm

    worker = get_worker()
    comm = SocketComm(RPCComm(solve_id, rank, addresses), get_address_host(worker.address), b"solve-token")
    try:
        mine = np.full(size, rank, dtype=np.uint8)
        stacked = comm.allgather(mine)
        ok = stacked.shape == (len(addresses), size) and all((stacked[r] == r).all() for r in range(len(addresses)))
        if absent is None:
            return {"ok": ok, "bytes": comm.bytes, "calls": comm.calls}
        if absent == "late":
            time.sleep(1.5 if rank == 0 else 0.0)
            started, cpu = time.perf_counter(), time.thread_time()
            comm.allgather(mine)
            return {"ok": ok, "raised": "nothing", "after": time.perf_counter() - started,
                    "cpu": time.thread_time() - cpu}
        if rank == 0:
            time.sleep(2.5 if absent == "abort" else 0.0)
            return {"ok": ok, "raised": None}
        if absent == "abort":
            threading.Timer(1.0, comm.abort).start()
        started = time.perf_counter()
        try:
            comm.allgather(mine)
        except (CommAborted, ConnectionError) as e:
            kind = "ConnectionError" if isinstance(e, ConnectionError) else type(e).__name__  # reset, or closed
            return {"ok": ok, "raised": kind, "after": time.perf_counter() - started}
        return {"ok": ok, "raised": "nothing"}
    finally:
        comm.close()


def _run_socket_ranks(client, size, absent=None):
    from dlap.distributed.cluster import worker_addresses
    from dlap.distributed.rank.comm import register_rpc_handler

    workers = worker_addresses(client)
    client.run(register_rpc_handler, workers=workers)
    solve_id = f"sockets-{time.perf_counter_ns()}"
    futures = [client.submit(_socket_ranks, solve_id, r, workers, size, absent, workers=[w], pure=False)
               for r, w in enumerate(workers)]
    return client.gather(futures)


def test_socket_collectives_move_large_pieces_and_end_without_a_peer(client):
    """The CPU ranks' collectives go over TCP sockets between the workers (no Dask RPC per
    collective): every rank sends 24 MB to every other at once (more than any socket buffer, so
    ranks that sent before reading would block each other) and receives every piece intact. A
    rank waiting for a peer that never comes is ended by abort() (the watchdog's), and one whose
    peer closes its sockets (its worker died) raises."""
    size = 24 << 20
    results = _run_socket_ranks(client, size)
    assert all(r["ok"] for r in results)
    assert all(r["calls"] == 1 and r["bytes"] == size * (len(results) - 1) for r in results)
    waited = _run_socket_ranks(client, 1000, absent="abort")[1:]
    assert all(r["ok"] and r["raised"] == "CommAborted" and r["after"] >= 0.9 for r in waited), waited  # (the abort's)
    left = _run_socket_ranks(client, 1000, absent="leave")[1:]
    assert all(r["ok"] and r["raised"] == "ConnectionError" for r in left), left


def test_a_rank_waiting_for_a_peer_does_not_spin(client):
    """A collective whose peer comes 1.5 s late waits without burning its core (it polls for a
    millisecond, then blocks): a spinning wait would take the core that a rank sharing it needs
    (three ranks on two cores ran up to 10x slower)."""
    waited = _run_socket_ranks(client, 1000, absent="late")[1:]
    assert all(r["ok"] and r["after"] > 1.0 and r["cpu"] < r["after"] / 4 for r in waited), waited


def test_a_ucx_cluster_after_one_whose_communicator_outlived_it():
    """A UCX cluster started after another closed while one of its communicators was not yet
    collected: ucxx's notifier thread, kept alive by that communicator, serves the first
    cluster's closed event loop (distributed-ucxx stops it only when the last communicator is
    deregistered), and without ``start_cluster`` stopping it the new cluster cannot connect. The
    lingering communicator is a Dask resource registered on the first cluster's loop, as each UCX
    communicator registers itself."""
    registry = pytest.importorskip("distributed_ucxx.ucxx")
    with dd.start_cluster(2, protocol="ucx", gpu=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        assert c.submit(abs, -1).result() == 1

        async def register():
            return registry._register_dask_resource()

        lingering = c.sync(register)
    try:
        n = 300
        with dd.start_cluster(2, protocol="ucx", gpu=False, dashboard_address=None) as cluster, \
                distributed.Client(cluster) as c:
            result = dd.solve(uniform_dask(n, 10, seed=3, chunks=(n, n // 2)), c, method="classical")
        assert result.objective == dlap.solve(uniform_block((0, n), (0, n), n, 10 * n, 3, np)).objective
    finally:
        registry._deregister_dask_resource(lingering)


class _Interloper:
    """Rank 0's bootstrap, which, once the ranks' addresses are known, connects to rank 1's
    listener before rank 0 does, as a stranger would: saying nothing, claiming rank 0 with a
    forged proof, or sending garbage."""

    def __init__(self, rpc, how: str):
        self.rpc, self.how, self.kept = rpc, how, None
        self.rank, self.size = rpc.rank, rpc.size

    def allgather(self, x):
        import socket

        table = self.rpc.allgather(x)
        host = bytes(table[1, :256]).rstrip(b"\0").decode()
        port = int(np.frombuffer(bytes(table[1, 256:]), dtype=np.int64)[0])
        self.kept = socket.create_connection((host, port))
        if self.how == "forged":
            self.kept.recv(16)
            self.kept.sendall(np.int64(0).tobytes() + bytes(32))
        elif self.how == "garbage":
            self.kept.sendall(np.random.default_rng(0).bytes(4096))
        return table

    @property
    def aborted(self):
        return self.rpc.aborted

    def abort(self):
        self.rpc.abort()

    def close(self):
        self.kept.close()
        self.rpc.close()


def _rank_beside_a_stranger(solve_id: str, rank: int, addresses: list, how: str):
    """A rank of a SocketComm whose rank 1 is first reached by a stranger (:class:`_Interloper`):
    its all-gather must still be the ranks' own, and rank 1 must have waited for the silent one
    at most the handshake's limit (lowered here to 0.5 s)."""
    from distributed import get_worker
    from distributed.comm import get_address_host

    from dlap.distributed.rank import comm as module

    module.HANDSHAKE_SECONDS = 0.5
    bootstrap = module.RPCComm(solve_id, rank, addresses)
    if rank == 0:
        bootstrap = _Interloper(bootstrap, how)
    started = time.perf_counter()
    comm = module.SocketComm(bootstrap, get_address_host(get_worker().address), b"the-solve's-token")
    try:
        connected = time.perf_counter() - started
        stacked = comm.allgather(np.full(8, rank, dtype=np.int64))
        return {"ok": all((stacked[r] == r).all() for r in range(len(addresses))), "connected": connected}
    finally:
        comm.close()


@pytest.mark.parametrize("how", ["silent", "forged", "garbage"])
def test_a_stranger_at_a_ranks_listener_is_dropped(client, how):
    """Issue 37: the CPU ranks' rendezvous trusted an 8-byte rank number from whoever connected and
    read it with no time limit (a silent connection hung the rank). Every connection now proves
    it knows the solve's token (an HMAC of the listener's nonce) within HANDSHAKE_SECONDS."""
    from dlap.distributed.cluster import worker_addresses
    from dlap.distributed.rank.comm import register_rpc_handler

    workers = worker_addresses(client)[:2]
    client.run(register_rpc_handler, workers=workers)
    solve_id = f"stranger-{how}-{time.perf_counter_ns()}"
    futures = [client.submit(_rank_beside_a_stranger, solve_id, r, workers, how, workers=[w], pure=False)
               for r, w in enumerate(workers)]
    results = client.gather(futures)
    assert all(r["ok"] for r in results), results
    assert results[1]["connected"] < 30  # (it would wait forever for the silent one)


def test_a_wrong_token_is_refused_both_ways():
    """The handshake itself, over a socket pair: the proof of another token is refused by either
    side, the right one accepted, and a rank the listener does not expect is refused."""
    import socket
    import threading

    from dlap.distributed.rank.comm import HandshakeRefused, _answer, _greet

    def handshake(greeter_token, answer_token, rank=0, expected=(0,)):
        a, b = socket.socketpair()
        outcome = {}

        def greet():
            try:
                _greet(a, greeter_token, rank)
                outcome["greet"] = "ok"
            except (HandshakeRefused, ConnectionError) as e:
                outcome["greet"] = type(e).__name__

        thread = threading.Thread(target=greet)
        thread.start()
        try:
            outcome["answer"] = _answer(b, answer_token, set(expected))
        except HandshakeRefused:
            outcome["answer"] = "refused"
            b.close()
        thread.join(5)
        a.close()
        b.close()
        return outcome

    assert handshake(b"k", b"k") == {"greet": "ok", "answer": 0}
    assert handshake(b"k", b"other")["answer"] == "refused"
    assert handshake(b"k", b"k", rank=1, expected=(0,))["answer"] == "refused"


def test_ranks_on_a_tls_cluster_keep_dasks_encrypted_comms():
    """Issue 37: the CPU ranks' sockets bypassed Dask's TLS. On a cluster whose comms are TLS the
    ranks' collectives go through Dask's own (encrypted, authenticated) comms; elsewhere through
    their authenticated sockets."""
    pytest.importorskip("cryptography")  # Security.temporary's throwaway CA and certificate
    security = distributed.Security.temporary()
    cost = dlap.generate.uniform(120, 10.0, seed=4)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, protocol="tls", security=security,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster, security=security) as tls_client:
            result = dd.solve(da.from_array(cost, chunks=(60, 120)), tls_client, method="tree")
    assert result.stats.phase_counts["ranks"] == 2 and result.stats.phase_counts["comm_sockets"] == 0
    assert result.objective == dlap.solve(cost).objective and result.verify().optimal


def test_ranks_on_a_tcp_cluster_use_their_sockets(client):
    cost = dlap.generate.uniform(120, 10.0, seed=4)
    result = dd.solve(da.from_array(cost, chunks=(60, 120)), client, method="tree", n_workers=2)
    assert result.stats.phase_counts["ranks"] == 2 and result.stats.phase_counts["comm_sockets"] == 1
