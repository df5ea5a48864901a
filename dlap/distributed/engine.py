"""The SPMD solve that runs on every rank: Date & Nagi (2016), section 5, over a Dask cluster.

Each rank holds one slab of the cost matrix on its device and a replica of the O(n) search state
(assignment, duals, predecessors, the forest). The O(n^2) phases run on the slabs; what the
paper's root gathers and broadcasts goes through one all-gather instead (every rank receives the
gathered frontier or graph and applies it to its replica, which is the same on every rank), so a
step costs one collective rather than a gather plus a broadcast.

- **Classical variant, rows split** (section 5, step 4a): each rank compresses the zero-slack
  edges of its rows (section 3.3); the partial adjacency lists are all-gathered into the global
  CSR, and the BFS forward pass, reverse pass and augmentation run on the replica with no
  communication at all until a dual update is needed. The dual update's stage 1 (Algorithm 7)
  runs over each rank's forest rows, an all-reduce gives theta, stage 2 is applied to the replica.
  Communication: three collectives per dual update, none per BFS level or augmentation.
- **Alternating tree variant, columns split** (step 4b): each rank scans the frontier rows over
  its columns (Algorithm 4), one all-gather of (local minimum slack, tight count) gives the dual
  level, and one all-gather of the tight columns (column, predecessor row, level) gives every rank
  the next frontier. All columns tight at the level join at once (a wave), so a search takes one
  step per (level, BFS depth) pair, not one per column.

The replica's phases (optimality check, forward pass on the CSR, reverse pass, augmentation) are the
single-device backend's own primitives, run on a state with no matrix (``allocate_graph``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..backends.base import FLOAT_TOL_SCALE
from ..hungarian.phases import PhaseTimer, Progress, augment_paths
from ..certificate import exact_sum
from ..problem import InfeasibleError, Problem, check_entries, is_device_array, shifted
from ..result import Stats
from .comm import CommAborted, NCCLComm, RPCComm

#: methods of the Dask engine and the axis of the (solved, rows <= cols) matrix each one splits
SPLIT_AXIS = {"classical": 0, "tree": 1}
#: seconds between progress events of rank 0
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
    comm: tuple  # ("nccl", unique_id) or ("rpc", worker addresses in rank order)
    progress_topic: str = ""
    abort_event: str | None = None

    @property
    def lo(self) -> int:
        return self.bounds[self.rank]

    @property
    def hi(self) -> int:
        return self.bounds[self.rank + 1]


@dataclass
class RankResult:
    """Rank 0's answer: the assignment and duals of the solved matrix, stats and certificate."""

    row_match: np.ndarray
    u: np.ndarray
    v: np.ndarray
    stats: dict
    certificate: dict


class DistributedSolver:
    """One rank's part of a solve: its slab state, the replicated search state, the comm."""

    def __init__(self, backend, slab, spec: RankSpec, comm, report=None):
        self.backend, self.spec, self.comm = backend, spec, comm
        self.xp = _array_module(slab)
        tol = 0.0 if spec.integer else FLOAT_TOL_SCALE
        self.slab = backend.allocate(Problem(matrix=slab, transposed=False, maximize=False, original=slab))
        self.g = backend.allocate_graph(spec.shape, slab.dtype, tol)
        self.stats = Stats(device=backend.device, method=spec.method, init="reduction")
        self.phase = PhaseTimer(self.stats, backend, self.g)
        self.report = Progress(report, spec.shape[0], PROGRESS_INTERVAL)

    # ------------------------------------------------------------------ shared steps

    def _infeasible_if(self, x) -> None:
        """Raise on every rank alike when a replicated vector has a non-finite entry."""
        if not bool(self.xp.isfinite(x).all()):
            raise InfeasibleError()

    def solve(self) -> None:
        n_rows, n_cols = self.spec.shape
        with self.phase("initial_reduction"):
            if self.spec.method == "classical":
                self.classical_initial_reduction(columns=n_rows == n_cols)
            else:
                self.tree_initial_reduction(columns=n_rows == n_cols)
        run = self.classical_iterations if self.spec.method == "classical" else self.tree_iterations
        run()
        self.report(0, final=True)
        self.stats.phase_seconds["communication"] = self.comm.seconds
        self.stats.phase_counts["communication"] = self.comm.calls

    def check(self) -> int:
        with self.phase("optimality_check"):
            n_free = self.backend.optimality_check(self.g)
        self.report(n_free)
        return n_free

    def augment(self) -> None:
        """Reverse pass and augmentation (4.3.2-4.3.3) by the root, whose assignment every rank
        then adopts (section 5: the root augments and broadcasts). Each replica could run them
        itself, but on a GPU the paths kept are decided by races (which tree claims a root
        first), so replicas would drift apart and issue different collectives."""
        augment_paths(self.backend, self.g, self.stats, self.phase)
        if self.comm.size == 1:
            return
        g, xp = self.g, self.xp
        with self.phase("broadcast"):
            g.row_match[:] = self.comm.bcast(g.row_match)
            g.col_match[:] = -1
            rows = xp.flatnonzero(g.row_match >= 0)
            g.col_match[g.row_match[rows]] = rows.astype(g.col_match.dtype)

    # ------------------------------------------------------------------ classical, rows split

    def classical_initial_reduction(self, columns: bool) -> None:
        """Section 5, step 2: row minima of each rank's own rows, gathered; column minima over
        each rank's rows, reduced (rows only for a rectangular matrix)."""
        s, g = self.slab, self.g
        self.backend.initial_reduction(s, columns=False)
        g.u[:] = self.comm.allgatherv(s.u)
        self._infeasible_if(g.u)
        if columns:
            self.backend.column_reduction(s)
            g.v[:] = self.comm.allreduce(s.v, "min")
            self._infeasible_if(g.v)

    def classical_iterations(self) -> None:
        compressed = False
        while self.check():
            if not compressed:
                with self.phase("compress"):
                    self.compress()
                compressed = True
            with self.phase("forward_pass"):
                n_reverse = self.backend.classical_forward_pass(self.g)
            self.stats.iterations += 1
            if n_reverse:
                self.augment()
                continue
            with self.phase("dual_update"):
                self.classical_dual_update()
            compressed = False

    def compress(self) -> None:
        """Section 3.3 on each rank's rows, then the all-gathered global CSR (step 4a)."""
        s, g, lo, hi = self.slab, self.g, self.spec.lo, self.spec.hi
        s.u[:] = g.u[lo:hi]
        s.v[:] = g.v
        nnz = self.backend.compress(s)
        counts = self.comm.allgatherv(s.row_ptr[1:] - s.row_ptr[:-1])
        g.col_idx = self.comm.allgatherv(s.col_idx[:nnz])
        g.row_ptr = self.xp.zeros(g.n_rows + 1, dtype=np.int64)
        self.xp.cumsum(counts, out=g.row_ptr[1:])
        self.stats.phase_counts["zero_slack_edges"] = int(g.col_idx.shape[0])

    def classical_dual_update(self) -> None:
        """Algorithm 7 over each rank's forest rows, theta all-reduced, Algorithm 8 on the replica."""
        s, g, lo, hi = self.slab, self.g, self.spec.lo, self.spec.hi
        forest = g.rows_q[: g.n_forest_rows]
        mine = forest[(forest >= lo) & (forest < hi)] - lo
        theta = np.inf
        if mine.shape[0]:
            s.rows_q[: mine.shape[0]] = mine
            s.n_forest_rows = int(mine.shape[0])
            s.col_seen[:] = g.col_seen
            theta = self.backend.classical_theta(s)
        theta = float(self.comm.allreduce(self.xp.asarray([theta]), "min")[0])
        if theta == np.inf:
            raise InfeasibleError()
        self.backend.classical_shift(g, theta)
        self.stats.dual_updates += 1

    # ------------------------------------------------------------------ tree, columns split

    def tree_initial_reduction(self, columns: bool) -> None:
        """Section 5, step 2 for column slabs: row minima over each rank's columns, reduced;
        column minima of each rank's own columns with the global row duals, gathered."""
        s, g = self.slab, self.g
        self.backend.initial_reduction(s, columns=False)
        g.u[:] = self.comm.allreduce(s.u, "min")
        self._infeasible_if(g.u)
        if columns:
            s.u[:] = g.u
            self.backend.column_reduction(s)
            g.v[:] = self.comm.allgatherv(s.v)
            self._infeasible_if(g.v)

    def tree_iterations(self) -> None:
        while n_free := self.check():
            with self.phase("forward_pass"):
                n_reverse, level = self.tree_forward_pass(n_free)
            self.backend.load_reverse(self.g, n_reverse)
            self.augment()
            with self.phase("dual_update"):
                self.tree_dual_update(level)
            self.stats.iterations += 1

    def tree_forward_pass(self, n_free: int) -> tuple[int, float]:
        """Algorithm 4 with Algorithm 9 folded in, as waves over the column slabs.

        The replica's forest is ``rows_q[:n_q]`` / ``forest_cols[:n_forest]`` with the levels at
        which each joined, exactly as the single-device kernels keep it, so the reverse pass,
        augmentation and dual update that follow are theirs.
        """
        xp, s, g, comm = self.xp, self.slab, self.g, self.comm
        lo = self.spec.lo
        s.slack[:] = np.inf
        s.v_open[:] = g.v[lo : self.spec.hi]
        frontier = g.free_rows[:n_free].copy()
        g.row_level[frontier] = 0.0
        g.row_pred[frontier] = -1
        g.rows_q[:n_free] = frontier
        n_q, n_forest, n_rev, level = n_free, 0, 0, 0.0
        shift = -g.u[frontier]
        while True:
            if frontier.shape[0]:
                self.backend.tree_scan(s, frontier, shift, int(frontier.shape[0]))
            local_min = float(s.slack.min()) if s.slack.shape[0] else np.inf
            local_count = int((s.slack <= max(level, local_min)).sum()) if local_min < np.inf else 0
            summary = _host(comm.allgather(xp.asarray([local_min, local_count], dtype=np.float64)))
            best = float(summary[:, 0].min())
            if n_rev > 0 and best > level:
                break  # the frontier is exhausted at this level: reverse pass (ties collected)
            if best == np.inf:
                raise InfeasibleError()
            if best > level:
                level = best  # dual update by theta = best - level (Algorithm 9, lazily)
                self.stats.dual_updates += 1
            counts = np.where(summary[:, 0] <= level, summary[:, 1], 0).astype(np.int64)
            tight = self._gather_tight(level, int(counts[self.spec.rank]), int(counts.max()), counts)
            cols = tight[:, 0].astype(g.col_pred.dtype)
            g.col_pred[cols] = tight[:, 1].astype(g.col_pred.dtype)
            g.col_level[cols] = tight[:, 2]
            g.forest_cols[n_forest : n_forest + cols.shape[0]] = cols
            n_forest += int(cols.shape[0])
            owner = g.col_match[cols]
            free = owner < 0
            reached = cols[free]
            g.reverse[n_rev : n_rev + reached.shape[0]] = reached
            n_rev += int(reached.shape[0])
            frontier = owner[~free]
            levels = tight[:, 2][~free]
            g.row_level[frontier] = levels
            g.row_pred[frontier] = cols[~free]
            g.rows_q[n_q : n_q + frontier.shape[0]] = frontier
            n_q += int(frontier.shape[0])
            shift = levels - g.u[frontier]
            self.stats.phase_counts["waves"] = self.stats.phase_counts.get("waves", 0) + 1
        g.n_forest_rows, g.n_forest_cols = n_q, n_forest
        return n_rev, level

    def _gather_tight(self, level: float, mine: int, width: int, counts: np.ndarray):
        """This rank's columns with slack <= level leave the scan (they are covered); every rank
        receives all of them as rows (column, predecessor row, level), in rank order."""
        xp, s, lo = self.xp, self.slab, self.spec.lo
        buf = xp.zeros((width, 3), dtype=np.float64)
        if mine:
            cols = xp.flatnonzero(s.slack <= level)
            buf[:mine, 0] = cols + lo
            buf[:mine, 1] = s.col_pred[cols]
            buf[:mine, 2] = s.slack[cols]
            s.slack[cols] = np.inf
            s.v_open[cols] = -np.inf
        stacked = self.comm.allgather(buf)
        return xp.concatenate([stacked[r, : counts[r]] for r in range(self.spec.size)])

    def tree_dual_update(self, level: float) -> None:
        """Algorithm 9 on the replica: forest rows gain ``level - joined``, covered columns lose it."""
        g = self.g
        rows, cols = g.rows_q[: g.n_forest_rows], g.forest_cols[: g.n_forest_cols]
        g.u[rows] += level - g.row_level[rows]
        g.v[cols] -= level - g.col_level[cols]

    # ------------------------------------------------------------------ certificate

    def certificate_terms(self) -> dict:
        """The terms of :meth:`dlap.Assignment.verify` over every slab, reduced: objective,
        rigorous bound, worst dual violation and worst slackness violation (solved orientation)."""
        xp, g, spec = self.xp, self.g, self.spec
        n_rows, n_cols = spec.shape
        rectangular = n_rows < n_cols
        rows = slice(spec.lo, spec.hi) if spec.method == "classical" else slice(0, n_rows)
        cols = slice(0, n_cols) if spec.method == "classical" else slice(spec.lo, spec.hi)
        r0, c0 = rows.start, cols.start
        c = self.slab.cost
        v_bounded = xp.minimum(g.v, 0.0) if rectangular else g.v
        u_repaired = xp.full(n_rows, np.inf)
        violation = 0.0
        step = max(1, (1 << 22) // max(c.shape[1], 1))
        for a in range(0, c.shape[0], step):
            reduced = c[a : a + step].astype(np.float64) - v_bounded[None, cols]
            u_repaired[r0 + a : r0 + a + reduced.shape[0]] = reduced.min(axis=1)
            reduced -= g.u[r0 + a : r0 + a + reduced.shape[0], None]
            violation = max(violation, float(-reduced.min()))
        match = g.row_match[rows]
        local = xp.flatnonzero((match >= cols.start) & (match < cols.stop))
        picked = c[local, match[local] - c0]
        if spec.integer:  # exact: two int64 sums of 31-bit parts, which no matrix size overflows
            wide = picked.astype(np.int64)
            total = xp.stack([(wide >> 31).sum(), (wide & (2**31 - 1)).sum()])
        else:
            total = xp.reshape(picked.astype(np.float64).sum(), (1,))
        slackness = picked.astype(np.float64) - g.u[local + r0] - g.v[match[local]]
        slackness = float(xp.abs(slackness).max()) if slackness.shape[0] else 0.0
        comm = self.comm
        u_repaired = comm.allreduce(u_repaired, "min")
        total = _host(comm.allreduce(total, "sum"))
        total = int(total[0]) * 2**31 + int(total[1]) if spec.integer else float(total[0])
        worst = _host(comm.allreduce(xp.asarray([max(violation, 0.0), slackness]), "max"))
        if rectangular:
            assigned = xp.zeros(n_cols, dtype=bool)
            assigned[g.row_match] = True
            worst[0] = max(worst[0], float(xp.maximum(g.v, 0.0).max()))
            worst[1] = max(worst[1], float(xp.abs(g.v[~assigned]).max()))
        if spec.integer:  # whole numbers in float64, summed exactly
            bound = exact_sum(u_repaired.astype(np.int64)) + exact_sum(v_bounded.astype(np.int64))
        else:
            bound = float(u_repaired.sum() + v_bounded.sum())
        return {
            "objective": total,
            "bound": bound,
            "magnitude": float(xp.abs(u_repaired).sum() + xp.abs(v_bounded).sum()),
            "max_dual_violation": float(worst[0]),
            "max_slackness_violation": float(worst[1]),
        }


def _array_module(x):
    if is_device_array(x):
        import cupy

        return cupy
    return np


def _host(x) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


# ---------------------------------------------------------------------------- the rank's task


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
        while not self._done.is_set():
            try:
                if self.event.wait(timeout=0.5):
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

    def stop(self) -> None:
        self._done.set()


def _backend(slab):
    if is_device_array(slab):
        from ..backends.gpu import GPUBackend

        return GPUBackend()
    from ..backends.cpu import CPUBackend

    return CPUBackend()


def _host_threads(slab, worker):
    """A CPU rank's kernels run on its worker's threads (``threads_per_worker``, 1 in clusters
    that :func:`~dlap.distributed.cluster.start_cluster` starts), not on every core of the host:
    one rank per core must not start a thread team per rank. Small slabs run on one thread."""
    if is_device_array(slab):
        return contextlib.nullcontext()
    from ..threads import solve_threads

    return solve_threads(slab.size, limit=worker.state.nthreads)


def _progress_events(worker, spec: RankSpec, live):
    """Rank 0's progress hook: a worker event on the solve's topic, with ``live()``'s counters
    (the client's progress bar shows ``matched``, the scheduler's dlap page all of it)."""
    if spec.rank != 0:
        return None

    def report(matched: int, total: int) -> None:
        worker.log_event(spec.progress_topic, {"matched": matched, "total": total, **live()})

    return report


def _live(solver, comm) -> dict:
    """What the dashboard shows of a running rank: the phase timed last, iterations, dual
    updates, seconds per phase, this rank's collectives and the bytes it sent."""
    stats = solver.stats
    return {
        "phase": stats.last_phase, "iterations": stats.iterations, "dual_updates": stats.dual_updates,
        "phase_seconds": dict(stats.phase_seconds), "collectives": comm.calls, "bytes_sent": comm.bytes,
    }


def _make_comm(spec: RankSpec):
    kind, arg = spec.comm
    if kind == "nccl":
        return NCCLComm(arg, spec.rank, spec.size)
    return RPCComm(spec.solve_id, spec.rank, list(arg))


def run_rank(slab, spec: RankSpec) -> RankResult | dict:
    """The long task of one rank (submitted pinned to its worker, pure=False): join the comm,
    solve, and return rank 0's :class:`RankResult` (the others return their timings)."""
    from distributed import get_worker

    worker = get_worker()
    solver = comm = None
    report = _progress_events(worker, spec, lambda: _live(solver, comm))  # called once both exist
    if is_device_array(slab):
        import cupy

        cupy.cuda.Device(slab.device.id).use()
    setup = time.perf_counter()
    comm = _make_comm(spec)
    watchdog = Watchdog(spec.abort_event, comm)
    try:
        comm.allreduce(_array_module(slab).zeros(1), "sum")  # NCCL connects on its first collective
        started = time.perf_counter()
        solver = DistributedSolver(_backend(slab), slab, spec, comm, report)
        with _host_threads(slab, worker) as threads:
            solver.stats.threads = threads or 0
            solver.solve()
            certificate = solver.certificate_terms()
        seconds = time.perf_counter() - started
        if spec.rank != 0:
            return {"rank": spec.rank, "seconds": seconds, "communication": comm.seconds}
        solver.stats.seconds = seconds
        solver.stats.phase_seconds["comm_setup"] = started - setup
        g = solver.g
        row_match, u, v = solver.backend.to_host(g)
        return RankResult(
            row_match=np.asarray(row_match, dtype=np.int64), u=np.asarray(u), v=np.asarray(v),
            stats=solver.stats.as_dict(), certificate=certificate,
        )
    except CommAborted:
        raise
    except BaseException:
        watchdog.signal()
        raise
    finally:
        watchdog.stop()
        comm.close()


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
        block = xp.negative(block, dtype=dtype)
    block = xp.ascontiguousarray(block, dtype=dtype)
    check_entries(block)
    return block
