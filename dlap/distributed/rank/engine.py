"""The SPMD solve that runs on every rank: Date & Nagi (2016), section 5, over a Dask cluster.

Each rank holds one slab of the cost matrix on its device and a replica of the O(n) search state
(assignment, duals, predecessors, the forest). Every rank runs the drivers of
:mod:`dlap.hungarian` (the classical variant with rows split, step 4a; the alternating tree
variant, the hybrid and the ε-scaling engine with columns split, step 4b; ``method="auto"`` on
one rank, dlap.solve's own pipeline) against :class:`~.backend.DistributedBackend`, whose
primitives run the O(n^2) phases on the slab and combine the ranks' parts with one collective
each; what the paper's root gathers and broadcasts goes through one all-gather instead (every
rank receives the gathered frontier or graph and applies it to its replica, the same on every
rank), so a step costs one collective rather than a gather plus a broadcast. The classical
variant communicates three times per dual update and never per BFS level; the tree variant once
per wave; an ε-scaling search once per step.

This module is the rank's task around that: joining the communicator, the watchdog that aborts
it when another rank fails, progress events for the client and the dashboard, and the certificate
computed over the slabs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from ...backends.base import FLOAT_TOL_SCALE, install_assignment
from ...certificate import (
    Certificate,
    bound_duals,
    column_reductions,
    exact_sum,
    float_scan,
    float_verdict,
    widened,
)
from ...device import is_device_array
from ...hungarian import device_variant, run_method
from ...hungarian.phases import start_afresh
from ...hungarian.sparse import solve_sparse
from ...problem import Problem, check_entries, negated, scale_exponent, shifted, unscaled
from ...progress import SolveProgress
from ...result import Stats
from ...threads import get_num_threads
from .backend import SPLIT_AXIS, DistributedBackend
from .comm import CommAborted, LoneComm, NCCLComm, RPCComm, SocketComm, to_host

#: seconds between progress events of rank 0 (the last one is always sent)
PROGRESS_INTERVAL = 0.5


@dataclass(frozen=True)
class RankSpec:
    """What one rank's task needs to take part in a solve (picklable, sent by the client)."""

    solve_id: str
    rank: int
    size: int
    method: str
    shape: tuple[int, int]  # the solved matrix: rows <= cols, minimisation
    bounds: tuple[int, ...]  # slab boundaries along the split axis: rank r owns [b[r], b[r+1])
    integer: bool
    comm: tuple  # ("nccl", unique id or None: the kept one, workers) or ("rpc", workers), in rank order
    progress_topic: str = ""
    abort_event: str | None = None
    init: str = "jv"  # "jv" or "reduction" (dlap.hungarian.phases.initialise)
    threads: int | None = None  # a CPU rank's thread limit; None: its worker's threads
    auto: bool = False  # method="auto" split: dlap.solve's auto with ``method`` as its variant
    token: bytes = b""  # the solve's secret, which CPU ranks' socket connections prove (comm.SocketComm)

    @property
    def lo(self) -> int:
        return self.bounds[self.rank]

    @property
    def hi(self) -> int:
        return self.bounds[self.rank + 1]


@dataclass(frozen=True)
class RankAborted:
    """What a rank's task returns when the solve was aborted under it (its cause is reported by
    whoever aborted it: a failed rank, the client, the scheduler's registry)."""

    rank: int


@dataclass
class RankResult:
    """Rank 0's answer: the assignment and duals of the solved matrix, stats and certificate."""

    row_match: np.ndarray
    u: np.ndarray
    v: np.ndarray
    stats: dict
    certificate: Certificate  # the solved form's (minimisation; integers less their offset)
    window: tuple = ()  # when the task started and ended, time.time() on the rank's worker
    scale_exponent: int = 0  # the slabs were solved times 2**-scale_exponent (float costs beyond FLOAT_HEADROOM)


class DistributedSolver:
    """One rank's part of a solve: its slab state, the replicated search state, the comm, and the
    drivers of :mod:`dlap.hungarian` run against :class:`~.backend.DistributedBackend`."""

    def __init__(self, local, slab, spec: RankSpec, comm, report=None):
        self.spec, self.comm = spec, comm
        self.xp = _array_module(slab)
        tol = 0.0 if spec.integer else FLOAT_TOL_SCALE
        self.slab = local.allocate(Problem(matrix=slab, transposed=False, maximize=False, original=slab))
        self.replica = local.allocate_graph(spec.shape, slab.dtype, tol)
        self.backend = DistributedBackend(local, self.slab, comm, spec.method, spec.bounds, spec.rank, self.xp)
        self.stats = Stats(device=local.device, method=spec.method, init=spec.init)
        self.report = report

    def solve(self) -> None:
        """The method's solve, by :func:`dlap.hungarian.run_method`: with ``method="auto"`` on
        one rank, on the rank's local backend over the whole matrix (:meth:`solve_alone`); split
        by auto over column slabs, ``solve_auto`` with ``method`` as its variant (JV, the
        variant, ε-scaling for structured costs); otherwise ``method`` itself (its
        initialisation, then its iterations; the tree searches from every free row at once)."""
        backend, replica, stats, spec = self.backend, self.replica, self.stats, self.spec
        if spec.method == "auto":
            self.solve_alone()
            return
        method = "auto" if spec.auto and backend.split == 1 else spec.method  # (the searches may hand over)
        run_method(backend, replica, stats, method, variant=spec.method, init=spec.init, roots="all", progress=self.report)
        for name in ("waves", "zero_slack_edges"):
            if backend.tallies[name]:
                stats.phase_counts[name] = backend.tallies[name]
        stats.phase_seconds["communication"] = self.comm.seconds
        stats.phase_counts["communication"] = self.comm.calls

    def solve_alone(self) -> None:
        """The one-rank solve of ``method="auto"``: the slab is the whole matrix, and the local
        backend runs on it exactly what ``dlap.solve(method="auto")`` runs (JV initialisation,
        the device's variant, ε-scaling where the searches show structured costs, the sparse
        engine where auto gives it the matrix); the answer is then copied into the replica,
        which the certificate reads."""
        slab, replica, local = self.slab, self.replica, self.backend.local
        if run_method(local, slab, self.stats, "auto", variant=device_variant(local, slab.cost), progress=self.report,
                      sparse=True, integer=self.spec.integer):
            self.solve_sparse()
        for name in ("u", "v", "row_match", "col_match"):
            getattr(replica, name)[:] = getattr(slab, name)
        self.stats.phase_seconds["communication"] = 0.0
        self.stats.phase_counts["communication"] = 0

    def solve_sparse(self) -> None:
        """The slab (the whole matrix) solved by the sparse-core engine, where ``method="auto"``
        gives it the matrix as ``dlap.solve`` does (or, where its duals cannot prove its answer,
        by the tree variant)."""
        slab, xp = self.slab, self.xp
        solved = solve_sparse(slab.cost, self.stats, self.report)
        if solved is None:
            start_afresh(slab)
            run_method(self.backend.local, slab, self.stats, "tree", init="jv", progress=self.report)
            return
        row_match, u, v = solved
        install_assignment(slab, xp.arange(row_match.shape[0]), xp.asarray(row_match))
        slab.u[:], slab.v[:] = xp.asarray(u), xp.asarray(v)

    # ------------------------------------------------------------------ certificate

    def certificate(self, original, exponent: int) -> Certificate:
        """:meth:`dlap.Assignment.verify` over every slab, in the solved form (minimisation): every
        rank takes part, and each gets the same certificate. ``original`` is the rank's slab
        before it was scaled by ``2**-exponent`` (float costs beyond FLOAT_HEADROOM): the proof
        is made in the scaled units, the objective summed from the original entries."""
        if self.spec.integer:
            return self._integer_certificate()
        certificate = self._float_certificate()
        if not exponent:
            return certificate
        picked = original[self._picked_index()]
        return dataclasses.replace(
            certificate, primal=exact_sum(self.comm.allgatherv(widened(picked))),
            lower_bound=unscaled(certificate.lower_bound, exponent), gap=unscaled(certificate.gap, exponent),
            max_dual_violation=unscaled(certificate.max_dual_violation, exponent),
            max_slackness_violation=unscaled(certificate.max_slackness_violation, exponent),
        )

    def _slices(self) -> tuple[slice, slice]:
        """The rows and columns of the solved matrix that this rank's slab holds."""
        n_rows, n_cols = self.spec.shape
        if self.backend.split == 0:
            return slice(self.spec.lo, self.spec.hi), slice(0, n_cols)
        return slice(0, n_rows), slice(self.spec.lo, self.spec.hi)

    def _picked_index(self) -> tuple:
        """Where the slab holds the assigned pairs (an index into the slab)."""
        rows, cols = self._slices()
        match = self.replica.row_match[rows]
        local = self.xp.flatnonzero((match >= cols.start) & (match < cols.stop))
        return local, match[local] - cols.start

    def _picked(self):
        """The slab's entries on the assigned pairs, and their rows."""
        local, columns = self._picked_index()
        return self.slab.cost[local, columns], local + self._slices()[0].start

    def _float_certificate(self) -> Certificate:
        """The float certificate (dlap.certificate's float_scan and float_verdict): each rank
        scans its slab, the ranks' row minima (with their rounding errors) are combined by a
        collective, and the verdict is the same on every rank."""
        xp, replica, comm, c = self.xp, self.replica, self.comm, self.slab.cost
        rows, cols = self._slices()
        rows_split = self.backend.split == 0
        rectangular = self.spec.shape[0] < self.spec.shape[1]
        scan = float_scan(xp, c, 1, replica.u[rows], replica.v[cols], bound_duals(xp, replica.v, rectangular, 0)[cols], 0)
        if scan is None:
            raise RuntimeError("dlap internal error: a slab holds costs beyond FLOAT_HEADROOM unscaled")
        sizes = np.diff(self.spec.bounds).tolist()
        if rows_split:  # each rank holds whole rows: its rows' minima are complete
            scan.row_minima, scan.row_errors, scan.cost_minima = (
                comm.allgatherv(x, sizes) for x in (scan.row_minima, scan.row_errors, scan.cost_minima))
        else:
            scan.row_minima, scan.row_errors = self._merged(scan.row_minima, scan.row_errors)
            scan.cost_minima = comm.allreduce(scan.cost_minima, "min")
        picked, picked_rows = self._picked()
        slack = widened(picked) - replica.u[picked_rows] - replica.v[replica.row_match[picked_rows]]
        worst = to_host(comm.allreduce(xp.asarray([scan.violation, scan.largest,
                                                 float(abs(slack).max()) if slack.shape[0] else 0.0]), "max"))
        scan.violation, scan.largest = float(worst[0]), float(worst[1])

        def reductions(row_duals):
            found = column_reductions(xp, c, 1, 0, [d[rows] for d in row_duals])
            if rows_split:
                return [self._merged(low, error) for low, error in found]
            return [(comm.allgatherv(low, sizes), comm.allgatherv(error, sizes)) for low, error in found]

        return float_verdict(xp, scan, comm.allgatherv(widened(picked)), replica.row_match, replica.u, replica.v, float(worst[2]), 0,
                             CERTIFICATE_RTOL, None, False, [], reductions,
                             stored=False)

    def _merged(self, low, error):
        """Exact minima (:func:`dlap.certificate.merge_minima`) of every rank's part: the smallest
        computed minimum, and the smallest rounding error among the ranks that attain it."""
        xp = self.xp
        merged = self.comm.allreduce(low, "min")
        error = self.comm.allreduce(xp.where(low == merged, error, math.inf), "min")
        return merged, xp.where(xp.isfinite(merged), error, 0.0)

    def _integer_certificate(self) -> Certificate:
        """The integer certificate, exactly: the slab's row minima of c - v (the local kernel, in
        float64, exact for the solved form's integers), the assigned entries summed in Python ints."""
        xp, replica, spec, comm, slab = self.xp, self.replica, self.spec, self.comm, self.slab
        n_rows, n_cols = spec.shape
        rectangular = n_rows < n_cols
        rows, cols = self._slices()
        v_bounded = xp.minimum(replica.v, 0.0) if rectangular else replica.v
        slab.v[:] = v_bounded[cols]
        self.backend.local.row_duals(slab)  # the slab's row minima of c - v: the repaired row duals
        u_repaired = xp.full(n_rows, np.inf)
        u_repaired[rows] = slab.u
        violation = float((replica.u[rows] - slab.u).max()) if slab.u.shape[0] else 0.0
        picked, picked_rows = self._picked()
        wide = picked.astype(np.int64)  # two int64 sums of 31-bit parts, which no matrix size overflows
        parts = to_host(comm.allreduce(xp.stack([(wide >> 31).sum(), (wide & (2**31 - 1)).sum()]), "sum"))
        total = int(parts[0]) * 2**31 + int(parts[1])
        slack = picked.astype(np.float64) - replica.u[picked_rows] - replica.v[replica.row_match[picked_rows]]
        slackness = float(xp.abs(slack).max()) if slack.shape[0] else 0.0
        u_repaired = comm.allreduce(u_repaired, "min")
        worst = to_host(comm.allreduce(xp.asarray([max(violation, 0.0), slackness]), "max"))
        if rectangular:
            assigned = xp.zeros(n_cols, dtype=bool)
            assigned[replica.row_match] = True
            worst[0] = max(worst[0], float(xp.maximum(replica.v, 0.0).max()))
            worst[1] = max(worst[1], float(xp.abs(replica.v[~assigned]).max()))
        bound = exact_sum(u_repaired.astype(np.int64), v_bounded.astype(np.int64))  # whole numbers, exactly
        gap = total - bound
        return Certificate(
            primal=total, lower_bound=bound, gap=gap, relative_gap=gap / max(abs(total), 1),
            max_dual_violation=int(worst[0]), max_slackness_violation=int(worst[1]),
            optimal=bool(gap == 0 and worst[0] <= 0 and worst[1] == 0),
        )


#: the ranks' float certificate is dlap.Assignment.verify()'s, with its default rtol
CERTIFICATE_RTOL = 1e-9


def _agreed_exponent(comm, slab) -> int:
    """The power of two every rank scales its slab by (:func:`dlap.problem.scale_exponent` of the
    largest finite cost of every slab): 0 without a collective for slabs that cannot hold costs
    beyond FLOAT_HEADROOM (not float64; every rank's slab has the solve's dtype)."""
    if slab.dtype != np.float64:
        return 0
    largest = comm.allreduce(_array_module(slab).asarray([check_entries(slab)]), "max")
    return scale_exponent(float(to_host(largest)[0]))


def _array_module(x):
    if is_device_array(x):
        import cupy

        return cupy
    return np


# ---------------------------------------------------------------------------- the rank's task


#: how often a rank's watchdog asks whether the solve was aborted (the longest a rank blocked in a
#: collective waits after a peer failed)
WATCH_INTERVAL = 0.1


class Watchdog:
    """Aborts this rank's communicator when the solve's abort event is set (by the client when a
    rank fails or its worker leaves, or by a failing rank itself), so no rank stays blocked."""

    def __init__(self, name: str | None, comm):
        self.comm, self.event, self._done = comm, None, threading.Event()
        self.fired = threading.Event()  # this rank was told to abort: its errors since are echoes
        if name is None:
            return
        from distributed import Event, get_client

        self.event = Event(name, client=get_client())  # explicit client: waited on from a thread
        self._thread = threading.Thread(target=self._watch, name="dlap-watchdog", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        """Ask the scheduler every ``WATCH_INTERVAL`` s whether the event is set. Not a waiting
        ``Event.wait``: the scheduler holds such a wait open until it times out, and a cluster
        closed meanwhile (a script's ``with`` block ending right after its solve) logged each
        rank's wait as a cancelled handler, two ERROR tracebacks in most runs of a 2-rank solve."""
        while not self._done.wait(WATCH_INTERVAL):
            try:
                if self.event.is_set():
                    self.fired.set()
                    self.comm.abort()
                    return
            except Exception:  # the scheduler is gone: nothing left to coordinate with
                self.comm.abort()
                return

    def signal(self) -> None:
        """Tell every rank to abort (this rank failed), unless this rank's failure follows an
        abort it was told of (setting the event again after the client cleared it would leave
        it on the scheduler)."""
        if self.event is not None and not self.fired.is_set():
            try:
                self.event.set()
            except Exception:
                pass
        self.comm.abort()

    def told(self) -> bool:
        """Whether this rank has been told to abort, asking the scheduler if the watchdog has
        not heard yet (a peer that heard first closes its sockets, and this rank may read
        that before its own watchdog wakes)."""
        if self.fired.is_set() or self.event is None:
            return self.fired.is_set()
        try:
            return self.event.is_set()
        except Exception:
            return False

    def stop(self) -> None:
        self._done.set()


def _local_backend(slab):
    if is_device_array(slab):
        from ...backends.gpu import GPUBackend

        return GPUBackend()
    from ...backends.cpu import CPUBackend

    return CPUBackend()


def _host_threads(slab, limit: int):
    """A CPU rank's kernels run on ``limit`` threads: its worker's (``threads_per_worker``, 1 in
    clusters that :func:`~dlap.distributed.cluster.start_cluster` starts), or on one rank, those of
    the workers of its host it was offered too; not on every core of the host: one rank per core
    must not start a thread team per rank. Small slabs run on one thread."""
    if is_device_array(slab):
        return contextlib.nullcontext()
    from ...threads import solve_threads

    return solve_threads(slab.size, limit=limit)


def solve_alone_here(matrix, method: str, auto: bool = False) -> None:
    """One rank's solve of ``matrix`` (a minimisation in a working dtype, rows <= cols) and its
    certificate, in this process, with ``method`` (``auto``: auto's split, ``method`` its variant)
    and its collectives the identity (:class:`~.comm.LoneComm`): every kernel a CPU rank of
    ``method`` runs is compiled or loaded (``dlap warmup``)."""
    spec = RankSpec(solve_id="warm-up", rank=0, size=1, method=method, shape=matrix.shape,
                    bounds=(0, matrix.shape[SPLIT_AXIS[method]]), integer=matrix.dtype.kind in "iu",
                    comm=("lone",), auto=auto)
    solver = DistributedSolver(_local_backend(matrix), matrix, spec, LoneComm())
    with _host_threads(matrix, get_num_threads()):
        solver.solve()
        solver.certificate(matrix, 0)


def progress_events(worker, rank: int, topic: str, live):
    """Rank 0's progress hook: a worker event on the solve's ``topic``, its
    :class:`~dlap.progress.SolveProgress` with ``live()``'s counters (the client's bar or
    callback reads the first, the scheduler's dlap page all of it); None on the other ranks."""
    if rank != 0:
        return None

    last = [-math.inf]

    def report(update: SolveProgress) -> None:
        now = time.perf_counter()
        if now - last[0] >= PROGRESS_INTERVAL or update.stage == "done":
            last[0] = now
            worker.log_event(topic, {**dataclasses.asdict(update), **live()})

    return report


def _live(solver, comm) -> dict:
    """What the dashboard shows of a running rank: the phase timed last, iterations, dual
    updates, seconds per phase, this rank's collectives and the bytes it sent."""
    stats = solver.stats
    return {
        "phase": stats.last_phase, "iterations": stats.iterations, "dual_updates": stats.dual_updates,
        "phase_seconds": dict(stats.phase_seconds), "collectives": comm.calls, "bytes_sent": comm.bytes,
    }


def _make_comm(comm: tuple, solve_id: str, rank: int, size: int):
    """NCCL between GPU ranks; Dask's RPC otherwise, which CPU ranks use only to exchange the
    addresses of their sockets (:func:`_socket_comm`)."""
    if comm[0] == "nccl":
        _, uid, workers = comm
        return NCCLComm(uid, rank, size, workers)
    return RPCComm(solve_id, rank, list(comm[1]))


def _socket_comm(rpc: RPCComm, worker, token: bytes):
    """CPU ranks' collectives over TCP sockets between their workers' hosts (one RPC collective
    to connect, none after); on a cluster whose comms are TLS, Dask's own (``rpc``): the sockets
    are plain TCP, and a cluster that encrypts its traffic keeps the ranks' encrypted."""
    from distributed.comm import get_address_host, parse_address

    if parse_address(worker.address)[0] == "tls":
        return rpc
    return SocketComm(rpc, get_address_host(worker.address), token)


@contextlib.contextmanager
def joined(solve_id: str, rank: int, size: int, comm: tuple, abort_event: str | None, token: bytes, worker, xp):
    """A rank's communicator for the body of a solve (``comm``: a ``RankSpec.comm``; CPU ranks
    connect their sockets through Dask's RPC) and the watchdog that aborts it when the solve's
    ``abort_event`` is set. A body the abort ended is left quietly (the rank's task then
    returns :class:`RankAborted`: the cause is reported by whoever aborted it; a raise would log
    a traceback per rank); any other failure tells every rank to abort, then propagates."""
    made = _make_comm(comm, solve_id, rank, size)
    watchdog = Watchdog(abort_event, made)  # before the sockets connect: a peer may be gone
    try:
        if isinstance(made, RPCComm) and size > 1:
            made = watchdog.comm = _socket_comm(made, worker, token)
        made.allreduce(xp.zeros(1), "sum")  # NCCL connects on its first collective
        yield made
    except CommAborted:  # another rank failed, or the client or the scheduler stopped the solve
        return
    except ConnectionError:
        if watchdog.told():  # a peer closed its sockets because the solve was aborted
            return
        watchdog.signal()
        raise
    except BaseException:
        watchdog.signal()
        raise
    finally:
        watchdog.stop()
        made.close()


def run_rank(slab, spec: RankSpec) -> RankResult | RankAborted | dict:
    """The long task of one rank (submitted pinned to its worker, pure=False): join the comm,
    solve, and return rank 0's :class:`RankResult` (the others return their timings)."""
    from distributed import get_worker

    entered = time.time()
    worker = get_worker()
    solver = None
    report = progress_events(worker, spec.rank, spec.progress_topic, lambda: _live(solver, comm))  # (once both exist)
    if is_device_array(slab):
        import cupy

        cupy.cuda.Device(slab.device.id).use()
    setup = time.perf_counter()
    with joined(spec.solve_id, spec.rank, spec.size, spec.comm, spec.abort_event, spec.token, worker,
                _array_module(slab)) as comm:
        started = time.perf_counter()
        original, exponent = slab, _agreed_exponent(comm, slab)
        if exponent:  # a scaled copy (the slab may be the caller's own chunk)
            slab = _array_module(slab).ldexp(slab, -exponent)
        solver = DistributedSolver(_local_backend(slab), slab, spec, comm, report)
        with _host_threads(slab, spec.threads or worker.state.nthreads) as threads:
            solver.stats.threads = threads or 0
            solver.solve()
            certified = time.perf_counter()
            certificate = solver.certificate(original, exponent)
            solver.stats.phase_seconds["certificate"] = time.perf_counter() - certified
        seconds = time.perf_counter() - started
        if spec.rank != 0:
            return {"rank": spec.rank, "seconds": seconds, "communication": comm.seconds}
        solver.stats.seconds = seconds
        solver.stats.phase_seconds["comm_setup"] = started - setup
        solver.stats.phase_counts["comm_kept"] = int(getattr(comm, "kept", False))
        solver.stats.phase_counts["comm_sockets"] = int(isinstance(comm, SocketComm))
        replica = solver.replica
        row_match, u, v = solver.backend.local.to_host(replica)
        return RankResult(
            row_match=np.asarray(row_match, dtype=np.int64), u=np.asarray(u), v=np.asarray(v),
            stats=solver.stats.as_dict(), certificate=certificate, window=(entered, time.time()),
            scale_exponent=exponent,
        )
    return RankAborted(spec.rank)


def prepare_slab(block, maximize: bool, transpose: bool, dtype, offset: int = 0):
    """A rank's slab in the solved form: transposed when the caller's matrix has more rows than
    columns, negated when maximising and shifted by the whole matrix's ``offset``
    (:func:`dlap.problem.integer_offset`), in the working dtype, C-contiguous; NaN / -inf refused
    with scipy's message. The caller's data is never written (a copy is made whenever it changes)."""
    xp = _array_module(block)
    if transpose:
        block = block.T
    if offset or (maximize and np.dtype(dtype).kind == "i"):
        block = shifted(block, offset, maximize, dtype)
    elif maximize:
        block = negated(block, dtype)
    block = xp.ascontiguousarray(block, dtype=dtype)
    check_entries(block)
    return block
