"""The collectives of the Dask engine: what the ranks exchange in each iteration.

Dask places the data and starts one task per rank; the per-iteration vectors (frontiers, minima,
tight columns, zero-slack edges) never go through the scheduler (a task costs ~10 ms).
They go through a :class:`Comm`:

- :class:`NCCLComm` between GPU workers: NCCL through ``cupy.cuda.nccl`` on CuPy arrays (NVLink on
  one host). The unique id is made by rank 0's worker and handed to the ranks through Dask; the
  communicator is kept by each worker for the next solve on the same workers.
- :class:`SocketComm` between CPU workers: TCP sockets between the ranks' processes, opened once
  per solve (the addresses are exchanged through :class:`RPCComm`), so a collective costs a
  send and a receive on each connection and no trip through a worker's event loop.
- :class:`RPCComm` Dask's own worker-to-worker RPC on NumPy arrays (each rank sends its piece
  straight to its peers' workers): about 1 ms a collective (a CPU cluster's n = 4000, f = 10
  solve made 444 of them, 0.5 to 0.75 s of its 2 s), kept for the sockets' rendezvous and for a
  single rank.

A rank that fails, or whose worker dies, must not leave the others blocked in a collective:
:meth:`Comm.abort` (called by the engine's watchdog thread when the solve's abort event is set)
makes every pending and later collective raise :class:`CommAborted`.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import hmac
import os
import secrets
import threading
import time
from abc import ABC, abstractmethod

import numpy as np

#: seconds between checks of the abort flag while an RPC collective waits for its peers
_POLL = 0.05
#: SocketComm: seconds a collective polls its connections before it blocks on them
_SPIN = 1e-3
#: NCCLComm: seconds between looks at a collective a rank waits for idly (:meth:`Comm.bcast_idle`)
_IDLE_POLL = 1e-3


class CommAborted(RuntimeError):
    """A collective was abandoned because the solve was aborted (another rank failed)."""


class Comm(ABC):
    """Collectives over ``size`` ranks on arrays of one device (NumPy or CuPy)."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size
        self.seconds = 0.0  # time spent inside collectives (stats: "communication")
        self.calls = 0
        self.bytes = 0  # bytes this rank sent (NCCL: its buffers' size; the dashboard shows them)

    @abstractmethod
    def allreduce(self, x, op: str):
        """Element-wise ``op`` ("min", "max" or "sum") of every rank's ``x``, on every rank."""

    @abstractmethod
    def allgather(self, x):
        """Every rank's ``x`` (all of one shape), stacked in rank order: shape ``(size, *x.shape)``."""

    @abstractmethod
    def bcast(self, x, root: int = 0):
        """Rank ``root``'s ``x`` on every rank (same shape and dtype everywhere)."""

    @abstractmethod
    def abort(self) -> None:
        """Abandon the pending and later collectives (they raise :class:`CommAborted`)."""

    @property
    def aborted(self) -> bool:
        """Whether the communicator was aborted (:meth:`abort`)."""
        return False

    def check(self) -> None:
        """Raise :class:`CommAborted` where the communicator was aborted: for a rank that works
        alone between collectives for long (the points engine's root, in its core solve)."""
        if self.aborted:
            raise CommAborted("dlap: the solve was aborted")

    def close(self) -> None:
        """Release the communicator."""

    def bcast_idle(self, x, root: int = 0):
        """:meth:`bcast` for a rank that may wait long for it (while the root works alone),
        without holding a core meanwhile (the host communicators' waits block already)."""
        return self.bcast(x, root)

    def gatherv(self, x, sizes=None, root: int = 0):
        """Every rank's 1-D ``x`` concatenated in rank order on rank ``root`` (None on the others;
        ``sizes``: every rank's length, needed on ``root`` only). Here an :meth:`allgatherv` (of
        the sizes, then the pieces); NCCL sends each piece to the root alone."""
        gathered = self.allgatherv(x)
        return gathered if self.rank == root else None

    def allgatherv(self, x, sizes=None):
        """Every rank's 1-D ``x`` (lengths may differ), concatenated in rank order: one padded
        all-gather, after one of the sizes unless the caller knows them (``sizes``: every rank's
        length, in rank order, the same list on every rank)."""
        xp = _xp(x)
        if sizes is None:
            sizes = [int(s) for s in to_host(self.allgather(xp.asarray([x.shape[0]], dtype=np.int64)))[:, 0]]
        width = max(sizes)
        if width == 0:
            return x[:0]
        padded = xp.zeros(width, dtype=x.dtype)
        padded[: x.shape[0]] = x
        stacked = self.allgather(padded)
        return xp.concatenate([stacked[r, : sizes[r]] for r in range(self.size)])

    def _timed(self, start: float, nbytes: int) -> None:
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.bytes += nbytes


def _xp(x):
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def to_host(x) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


# ------------------------------------------------------------------------------------------ NCCL


_REDUCE_OPS = ("sum", "prod", "max", "min")  # NCCL's ncclRedOp_t order


def nccl_unique_id() -> tuple:
    """A fresh NCCL unique id (run on rank 0's worker; passed to every rank through Dask)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


#: the NCCL communicator this worker process keeps between solves (at most one, by the key of
#: its ranks' workers, :func:`nccl_key`): making one costs a tenth of a second or more per solve
_NCCL_KEPT: dict[str, object] = {}


def nccl_key(workers, rank: int) -> str:
    """The key of rank ``rank``'s communicator among ``workers`` (in rank order) on its GPU."""
    import cupy

    return f"{rank}/{cupy.cuda.Device().id}/{'|'.join(workers)}"


def _abort_kept() -> None:
    """At exit: abort (a local call) rather than leave the kept communicator to a destroy that
    may wait for peers already gone."""
    for kept in _NCCL_KEPT.values():
        kept.abort()
    _NCCL_KEPT.clear()


atexit.register(_abort_kept)


def nccl_kept(workers, dask_worker=None) -> bool:
    """Whether this worker keeps a communicator for its rank among ``workers`` (run by the client
    on every rank's worker, under the solve's lock, before it hands out a new unique id)."""
    return nccl_key(workers, list(workers).index(dask_worker.address)) in _NCCL_KEPT


class NCCLComm(Comm):
    """NCCL collectives on CuPy arrays, one GPU per rank. Each call waits for its result, so a
    rank blocked on a dead peer is blocked inside a call that :meth:`abort` can end.

    ``uid`` None: the communicator this worker kept from the last solve on the same workers
    (the client has checked that every rank keeps one); else a new one made with ``uid``, which
    replaces any kept one. A communicator stays kept after :meth:`close` unless it was aborted:
    every rank of a solve that ends well has issued the same collectives, so the next solve on
    those workers starts from matched communicators, and a solve that fails aborts them all."""

    def __init__(self, uid: tuple | None, rank: int, size: int, workers):
        super().__init__(rank, size)
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl = cupy, nccl
        self._key = nccl_key(workers, rank)
        self.kept = uid is None  # stats: phase_counts["comm_kept"]
        if uid is None:
            self._comm = _NCCL_KEPT[self._key]
        else:
            _abort_kept()  # one kept per worker (each holds GPU buffers); its peers may be gone
            self._comm = _NCCL_KEPT[self._key] = nccl.NcclCommunicator(size, uid, rank)
        self._aborted = False
        self._types = {
            np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.int64): nccl.NCCL_INT64,
            np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
            np.dtype(np.uint8): nccl.NCCL_UINT8, np.dtype(np.uint64): nccl.NCCL_UINT64,
        }

    def _run(self, launch, nbytes: int, idle: bool = False):
        self.check()
        start = time.perf_counter()
        stream = self._cupy.cuda.get_current_stream()
        launch(stream.ptr)
        while idle and not stream.done:  # (a synchronize spins on a core the root's thread team uses)
            self.check()
            time.sleep(_IDLE_POLL)
        stream.synchronize()
        self.check()
        self._timed(start, nbytes)

    def allreduce(self, x, op):
        x = self._cupy.ascontiguousarray(x)
        out = self._cupy.empty_like(x)
        op_code = _REDUCE_OPS.index(op)
        self._run(lambda s: self._comm.allReduce(
            x.data.ptr, out.data.ptr, x.size, self._types[x.dtype], op_code, s), x.nbytes)
        return out

    def allgather(self, x):
        x = self._cupy.ascontiguousarray(x)
        out = self._cupy.empty((self.size, *x.shape), dtype=x.dtype)
        self._run(lambda s: self._comm.allGather(x.data.ptr, out.data.ptr, x.size, self._types[x.dtype], s), x.nbytes)
        return out

    def bcast(self, x, root=0, idle: bool = False):
        x = self._cupy.ascontiguousarray(x)
        out = self._cupy.empty_like(x)
        self._run(lambda s: self._comm.broadcast(x.data.ptr, out.data.ptr, x.size, self._types[x.dtype], root, s),
                  x.nbytes if self.rank == root else 0, idle)
        return out

    def bcast_idle(self, x, root=0):
        return self.bcast(x, root, idle=True)

    def gatherv(self, x, sizes=None, root=0):
        x = self._cupy.ascontiguousarray(x)
        kind = self._types[x.dtype]
        if self.rank != root:
            if x.size:
                self._run(lambda s: self._comm.send(x.data.ptr, x.size, kind, root, s), x.nbytes)
            return None
        out = self._cupy.empty(sum(sizes), dtype=x.dtype)
        ends = np.cumsum(sizes).tolist()
        starts = [0, *ends[:-1]]
        out[starts[root] : ends[root]] = x

        def receive(stream):
            self._nccl.groupStart()
            try:
                for r, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
                    if r != root and hi > lo:
                        self._comm.recv(out[lo:].data.ptr, hi - lo, kind, r, stream)
            finally:
                self._nccl.groupEnd()

        self._run(receive, 0)
        return out

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self):
        """Abort the communicator (the watchdog's call, or a failing rank's) and forget it: the
        next solve on these workers makes a new one."""
        if not self._aborted:
            self._aborted = True
            if _NCCL_KEPT.get(self._key) is self._comm:
                del _NCCL_KEPT[self._key]
            self._comm.abort()


# ------------------------------------------------------------------------------- Dask worker RPC

#: handler name registered on each rank's worker
RPC_HANDLER = "dlap_comm_deliver"


class _Mailbox:
    """Messages delivered to one rank of one solve, keyed by (sequence number, source rank)."""

    def __init__(self):
        self.messages: dict[tuple[int, int], np.ndarray] = {}
        self.ready = threading.Condition()
        self.aborted = False


_MAILBOXES: dict[str, _Mailbox] = {}
_MAILBOXES_LOCK = threading.Lock()


def _mailbox(channel: str) -> _Mailbox:
    with _MAILBOXES_LOCK:
        return _MAILBOXES.setdefault(channel, _Mailbox())


def _deliver(channel: str, seq: int, src: int, data) -> None:
    """The RPC handler: file a peer's message (it may arrive before this rank asks for it)."""
    box = _mailbox(channel)
    with box.ready:
        box.messages[(seq, src)] = data
        box.ready.notify_all()


def register_rpc_handler(dask_worker) -> None:
    """Install the RPC handler on a worker; the client runs this on every rank's worker before
    the ranks start, so no message reaches a worker that cannot file it."""
    dask_worker.handlers.setdefault(RPC_HANDLER, _deliver)


_NUMPY_REDUCE = {"min": np.min, "max": np.max, "sum": np.sum}


class HostComm(Comm):
    """Collectives built on an all-gather of host arrays: a reduction is an all-gather reduced
    locally, a broadcast the root's piece of one (the vectors are O(n), the ranks few)."""

    def allreduce(self, x, op):
        xp = _xp(x)
        return xp.asarray(_NUMPY_REDUCE[op](to_host(self.allgather(x)), axis=0))

    def bcast(self, x, root=0):
        return self.allgather(x)[root]


class LoneComm(HostComm):
    """One rank alone: every collective gives back its own piece (a rank's solve run in this
    process, as ``dlap warmup`` runs one to compile a rank's kernels)."""

    def __init__(self):
        super().__init__(0, 1)

    def allgather(self, x):
        return _xp(x).asarray(x)[None]

    def abort(self):
        pass


class RPCComm(HostComm):
    """Collectives over Dask's worker-to-worker RPC, for CPU workers (and for a single GPU rank,
    whose CuPy arrays it returns as CuPy arrays).

    An all-gather sends this rank's piece to every peer (concurrently, on the worker's event loop)
    and waits for theirs; reductions are all-gathers reduced locally. Every rank issues the same
    sequence of collectives, so a per-communicator sequence number pairs the messages.
    """

    def __init__(self, solve_id: str, rank: int, addresses: list[str]):
        super().__init__(rank, len(addresses))
        from distributed import get_worker

        self._worker = get_worker()
        register_rpc_handler(self._worker)
        self._addresses = addresses
        self._peers = [f"{solve_id}/{r}" for r in range(self.size)]  # each rank's mailbox
        self._channel = self._peers[rank]
        self._box = _mailbox(self._channel)
        self._seq = 0

    def allgather(self, x):
        self.check()
        start = time.perf_counter()
        xp = _xp(x)
        x = np.ascontiguousarray(to_host(x))
        seq, self._seq = self._seq, self._seq + 1
        self._send_all(seq, x)
        pieces = [None] * self.size
        pieces[self.rank] = x
        box = self._box
        with box.ready:
            for src in range(self.size):
                while src != self.rank and (seq, src) not in box.messages:
                    self.check()
                    box.ready.wait(_POLL)
                if src != self.rank:
                    pieces[src] = np.asarray(box.messages.pop((seq, src)))
        self._timed(start, x.nbytes * (self.size - 1))
        return xp.asarray(np.stack(pieces))

    def _send_all(self, seq: int, x: np.ndarray) -> None:
        from distributed.protocol import to_serialize
        from distributed.utils import sync

        worker = self._worker

        async def send():
            await asyncio.gather(*(
                worker.rpc(self._addresses[r]).dlap_comm_deliver(
                    channel=self._peers[r], seq=seq, src=self.rank, data=to_serialize(x))
                for r in range(self.size) if r != self.rank
            ))

        sync(worker.loop, send)

    @property
    def aborted(self) -> bool:
        return self._box.aborted

    def abort(self):
        box = self._box
        with box.ready:
            box.aborted = True
            box.ready.notify_all()

    def close(self):
        with _MAILBOXES_LOCK:
            _MAILBOXES.pop(self._channel, None)


# ------------------------------------------------------------------------------ TCP sockets

#: bytes of a rank's listening address in the rendezvous (host name, UTF-8, zero-padded)
_ADDRESS_BYTES = 256
#: bytes read from a connection at once
_CHUNK = 1 << 20
#: seconds a connection to a rank's listener has to prove it is a peer (then it is dropped)
HANDSHAKE_SECONDS = 5.0
#: seconds the ranks have to connect to each other (then the rendezvous fails)
RENDEZVOUS_SECONDS = 60.0
_NONCE_BYTES = 16


class HandshakeRefused(ConnectionError):
    """A connection to a rank's listener that did not prove it is a peer of this solve."""


def _proof(token: bytes, purpose: bytes, nonce: bytes, rank: int) -> bytes:
    return hmac.new(token, purpose + nonce + np.int64(rank).tobytes(), hashlib.sha256).digest()


def _greet(conn, token: bytes, rank: int) -> None:
    """The connecting side of the handshake: answer the listener's nonce with this rank and its
    proof of the solve's token, then check the listener's proof (both ways: neither side talks
    to a stranger)."""
    nonce = _read_exactly(conn, _NONCE_BYTES)
    conn.sendall(np.int64(rank).tobytes() + _proof(token, b"dlap-rank", nonce, rank))
    if not hmac.compare_digest(_read_exactly(conn, 32), _proof(token, b"dlap-peer", nonce, rank)):
        raise HandshakeRefused("dlap: a rank's listener did not prove it belongs to this solve")


def _answer(conn, token: bytes, expected) -> int:
    """The listening side of the handshake: the rank of a connection that proves the solve's
    token (one of ``expected``), or HandshakeRefused."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    conn.sendall(nonce)
    header = _read_exactly(conn, 8 + 32)
    rank = int(np.frombuffer(header[:8], dtype=np.int64)[0])
    if rank not in expected or not hmac.compare_digest(header[8:], _proof(token, b"dlap-rank", nonce, rank)):
        raise HandshakeRefused("dlap: a connection to a rank did not prove it belongs to this solve")
    conn.sendall(_proof(token, b"dlap-peer", nonce, rank))
    return rank


class SocketComm(HostComm):
    """All-gathers over TCP connections between every pair of ranks, for CPU workers.

    Each rank listens on its worker's host, the ranks exchange their addresses with one
    collective of ``bootstrap`` (an :class:`RPCComm`), rank i connects to every higher rank and
    accepts the lower ones. Every connection proves both ways that it belongs to this solve (an
    HMAC of a listener's nonce under ``token``, the per-solve secret that came through Dask;
    issue 37: a listener trusted the rank number of whoever connected, and read it with no time
    limit): one that does not, or says nothing for ``HANDSHAKE_SECONDS``, is dropped, and the
    ranks have ``RENDEZVOUS_SECONDS`` to connect. A collective then sends this rank's piece (an
    8-byte length, then the bytes) on every connection and reads every peer's, non-blocking
    through one selector, so two ranks sending large pieces to each other cannot block each
    other. A peer that closes its connection (its worker died) raises ``ConnectionError``;
    :meth:`abort` ends a pending collective within ``_POLL`` seconds. The connections are plain
    TCP: on a cluster whose comms are TLS the ranks keep Dask's own (:class:`RPCComm`).
    """

    def __init__(self, bootstrap: RPCComm, host: str, token: bytes):
        import selectors
        import socket

        super().__init__(bootstrap.rank, bootstrap.size)
        self._bootstrap, self._aborted = bootstrap, False
        listener = socket.create_server((host, 0))
        port = listener.getsockname()[1]
        me = np.zeros(_ADDRESS_BYTES + 8, dtype=np.uint8)
        encoded = host.encode()[:_ADDRESS_BYTES]
        me[: len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
        me[_ADDRESS_BYTES:] = np.frombuffer(np.int64(port).tobytes(), dtype=np.uint8)
        table = to_host(bootstrap.allgather(me))
        self._peers: dict[int, socket.socket] = {}
        listener.settimeout(_POLL)
        deadline = time.monotonic() + RENDEZVOUS_SECONDS
        with listener:
            for r in range(self.rank + 1, self.size):  # connect to the higher ranks
                peer_host = bytes(table[r, :_ADDRESS_BYTES]).rstrip(b"\0").decode()
                peer_port = int(np.frombuffer(bytes(table[r, _ADDRESS_BYTES:]), dtype=np.int64)[0])
                conn = socket.create_connection((peer_host, peer_port), timeout=RENDEZVOUS_SECONDS)
                conn.settimeout(max(HANDSHAKE_SECONDS, deadline - time.monotonic()))  # (the peer may be busy accepting)
                _greet(conn, token, self.rank)
                self._peers[r] = conn
            while len(self._peers) < self.size - 1:  # accept the lower ones
                if time.monotonic() > deadline:
                    missing = sorted(set(range(self.rank)) - set(self._peers))
                    raise TimeoutError(f"dlap: ranks {missing} did not connect to rank {self.rank} within "
                                       f"{RENDEZVOUS_SECONDS:g} s")
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    self.check()
                    continue
                conn.settimeout(HANDSHAKE_SECONDS)
                try:
                    self._peers[_answer(conn, token, set(range(self.rank)) - set(self._peers))] = conn
                except (OSError, HandshakeRefused):  # a stranger, or silent: dropped, the peers still awaited
                    conn.close()
        self._selector = selectors.DefaultSelector()
        for conn in self._peers.values():
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)

    @property
    def aborted(self) -> bool:
        return self._aborted or self._bootstrap.aborted

    def allgather(self, x):
        self.check()
        start = time.perf_counter()
        xp = _xp(x)
        x = np.ascontiguousarray(to_host(x))
        received = self._exchange(x)
        pieces = [np.frombuffer(received[r], dtype=x.dtype, offset=8).reshape(x.shape) if r != self.rank else x
                  for r in range(self.size)]
        self._timed(start, x.nbytes * (self.size - 1))
        return xp.asarray(np.stack(pieces))

    def _exchange(self, x: np.ndarray) -> dict:
        """Send ``x`` to every peer and read every peer's piece of the same size: per peer, a
        buffer holding its 8-byte length, then its bytes. A connection is watched only for what
        is still to do on it (writing while this piece is unsent, reading while the peer's is
        unread): a socket that is always writable, or holds a peer's next piece early, would
        otherwise wake the selector at once, and the wait would spin on a core that the other
        ranks need. The first ``_SPIN`` seconds poll (yielding the core between polls), then
        the wait blocks: a peer's piece usually arrives within tens of microseconds, and waking
        from a blocked wait cost about 50 us a collective on a 2-core VM (a split geometric
        solve was 2.6x slower blocking); polling without end made three ranks on two cores 10x
        slower."""
        import selectors

        payload = memoryview(x.reshape(-1).view(np.uint8))  # (a zero-size array cannot be cast)
        frame = memoryview(np.int64(payload.nbytes).tobytes() + payload.tobytes())
        to_send = {r: frame for r in self._peers}
        buffers = {r: bytearray(8 + payload.nbytes) for r in self._peers}
        filled = dict.fromkeys(self._peers, 0)
        watched = set()

        def watch(r: int) -> None:
            events = (selectors.EVENT_WRITE if r in to_send else 0) | (
                selectors.EVENT_READ if filled[r] < len(buffers[r]) else 0)
            if events and r in watched:
                self._selector.modify(self._peers[r], events, r)
            elif events:
                self._selector.register(self._peers[r], events, r)
                watched.add(r)
            elif r in watched:
                self._selector.unregister(self._peers[r])
                watched.discard(r)

        for r in self._peers:
            watch(r)
        spin_until = time.perf_counter() + _SPIN
        try:
            while watched:
                self.check()
                spinning = time.perf_counter() < spin_until
                ready = self._selector.select(timeout=0 if spinning else _POLL)
                if not ready and spinning:
                    os.sched_yield()  # a rank that shares this core runs first
                for key, events in ready:
                    r, conn = key.data, key.fileobj
                    if events & selectors.EVENT_WRITE and r in to_send:
                        sent = conn.send(to_send[r][:_CHUNK])
                        to_send[r] = to_send[r][sent:]
                        if not len(to_send[r]):
                            del to_send[r]
                            watch(r)
                    if events & selectors.EVENT_READ and filled[r] < len(buffers[r]):
                        view = memoryview(buffers[r])[filled[r] :]
                        n = conn.recv_into(view, min(len(view), _CHUNK))
                        if n == 0:
                            raise ConnectionError(f"dlap: rank {r} closed its connection during the solve")
                        filled[r] += n
                        if filled[r] == len(buffers[r]):
                            watch(r)
        finally:
            for r in list(watched):
                self._selector.unregister(self._peers[r])
        for r, buf in buffers.items():
            if int(np.frombuffer(buf, dtype=np.int64, count=1)[0]) != payload.nbytes:
                raise RuntimeError(f"dlap internal error: rank {r} sent a piece of another size")
        return buffers

    def abort(self):
        self._aborted = True
        self._bootstrap.abort()

    def close(self):
        self._selector.close()
        for conn in self._peers.values():
            conn.close()
        self._bootstrap.close()


def _read_exactly(conn, n: int) -> bytes:
    """``n`` bytes from a blocking socket."""
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("dlap: a rank closed its connection while the ranks connected")
        data += chunk
    return data
