"""The collectives of the Dask engine: what the ranks exchange in each iteration.

Dask places the data and starts one task per rank; the per-iteration vectors (frontiers, minima,
tight columns, zero-slack edges) never go through the scheduler (a task costs ~10 ms, ANCHORS.md).
They go through a :class:`Comm`:

- :class:`NCCLComm` between GPU workers: NCCL through ``cupy.cuda.nccl`` on CuPy arrays (NVLink on
  one host). The unique id is made by rank 0's worker and handed to the ranks through Dask.
- :class:`RPCComm` between CPU workers: Dask's own worker-to-worker RPC on NumPy arrays (each
  rank sends its piece straight to its peers' workers; ~1 ms a collective).

A rank that fails, or whose worker dies, must not leave the others blocked in a collective:
:meth:`Comm.abort` (called by the engine's watchdog thread when the solve's abort event is set)
makes every pending and later collective raise :class:`CommAborted`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from abc import ABC, abstractmethod

import numpy as np

#: seconds between checks of the abort flag while an RPC collective waits for its peers
_POLL = 0.05


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

    def close(self) -> None:
        """Release the communicator."""

    def allgatherv(self, x):
        """Every rank's 1-D ``x`` (lengths may differ), concatenated in rank order: the sizes
        first, then one padded all-gather."""
        xp = _xp(x)
        sizes = [int(s) for s in _host(self.allgather(xp.asarray([x.shape[0]], dtype=np.int64)))[:, 0]]
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


def _host(x) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


# ------------------------------------------------------------------------------------------ NCCL


_REDUCE_OPS = ("sum", "prod", "max", "min")  # NCCL's ncclRedOp_t order


def nccl_unique_id() -> tuple:
    """A fresh NCCL unique id (run on rank 0's worker; passed to every rank through Dask)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


class NCCLComm(Comm):
    """NCCL collectives on CuPy arrays, one GPU per rank. Each call waits for its result, so a
    rank blocked on a dead peer is blocked inside a call that :meth:`abort` can end."""

    def __init__(self, uid: tuple, rank: int, size: int):
        super().__init__(rank, size)
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl = cupy, nccl
        self._comm = nccl.NcclCommunicator(size, uid, rank)
        self._aborted = False
        self._types = {
            np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.int64): nccl.NCCL_INT64,
            np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
            np.dtype(np.uint8): nccl.NCCL_UINT8, np.dtype(np.uint64): nccl.NCCL_UINT64,
        }

    def _run(self, launch, nbytes: int):
        if self._aborted:
            raise CommAborted("dlap: the solve was aborted")
        start = time.perf_counter()
        stream = self._cupy.cuda.get_current_stream()
        launch(stream.ptr)
        stream.synchronize()
        if self._aborted:
            raise CommAborted("dlap: the solve was aborted")
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

    def bcast(self, x, root=0):
        x = self._cupy.ascontiguousarray(x)
        out = self._cupy.empty_like(x)
        self._run(lambda s: self._comm.broadcast(x.data.ptr, out.data.ptr, x.size, self._types[x.dtype], root, s),
                  x.nbytes if self.rank == root else 0)
        return out

    def abort(self):
        if not self._aborted:
            self._aborted = True
            self._comm.abort()

    def close(self):
        if not self._aborted:
            self._comm.destroy()


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


class RPCComm(Comm):
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
        if self._box.aborted:
            raise CommAborted("dlap: the solve was aborted")
        start = time.perf_counter()
        xp = _xp(x)
        x = np.ascontiguousarray(_host(x))
        seq, self._seq = self._seq, self._seq + 1
        self._send_all(seq, x)
        pieces = [None] * self.size
        pieces[self.rank] = x
        box = self._box
        with box.ready:
            for src in range(self.size):
                while src != self.rank and (seq, src) not in box.messages:
                    if box.aborted:
                        raise CommAborted("dlap: the solve was aborted")
                    box.ready.wait(_POLL)
                if src != self.rank:
                    pieces[src] = np.asarray(box.messages.pop((seq, src)))
        self._timed(start, x.nbytes * (self.size - 1))
        return xp.asarray(np.stack(pieces))

    def allreduce(self, x, op):
        xp = _xp(x)
        return xp.asarray(_NUMPY_REDUCE[op](_host(self.allgather(x)), axis=0))

    def bcast(self, x, root=0):
        return self.allgather(x)[root]

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

    def abort(self):
        box = self._box
        with box.ready:
            box.aborted = True
            box.ready.notify_all()

    def close(self):
        with _MAILBOXES_LOCK:
            _MAILBOXES.pop(self._channel, None)
