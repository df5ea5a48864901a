"""``dlap.distributed.solve``: an exact LAP solve over the workers of a Dask cluster."""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import time
import uuid
import warnings
from dataclasses import dataclass

import numpy as np

from ..certificate import RTOL, refused
from ..device import MSG_NO_GPU as NO_GPU
from ..device import gpus_visible
from ..options import DEVICES, INITS, check_choice
from ..problem import unscaled_duals, working_dtype
from ..result import Assignment, Certificate, Stats, caller_duals
from . import config
from .cluster import UCX_ENVIRONMENT, connected, ucx_waits_spin, worker_addresses
from .data import (
    as_source,
    assign_ranks,
    chunk_holders,
    made_bytes,
    plan_ranks,
    slab_bounds,
    source_offset,
    source_range,
)
from .placement import place_slabs
from .progress import watch
from .rank.backend import SPLIT_AXIS
from .rank.comm import CommAborted, nccl_kept, nccl_unique_id, register_rpc_handler
from .rank.engine import RankAborted, RankSpec, run_rank
from .scheduler import registry

METHODS = tuple(SPLIT_AXIS)
#: seconds between the client's questions to the scheduler about the ranks' workers
POLL = 0.25
#: seconds between the client's looks at the ranks' futures (local state)
TICK = 0.005


class WorkerLostError(RuntimeError):
    """A rank's worker left the cluster during a solve."""


@dataclass
class DistributedAssignment(Assignment):
    """An :class:`~dlap.Assignment` whose matrix stays on the cluster: :meth:`verify` returns the
    certificate the ranks computed over their slabs (pass ``cost`` to check against a matrix
    held here instead)."""

    certificate: Certificate | None = None
    certified: str = ""  # fingerprint of what the ranks certified

    def verify(self, cost=None, rtol: float = RTOL) -> Certificate:
        """The ranks' certificate, as long as the indices, duals and objective are still the ones
        they certified; else (or with ``cost``) the certificate computed here from the matrix."""
        if cost is not None:
            return super().verify(cost, rtol)
        if self.fingerprint() != self.certified:
            return refused(["the assignment, its duals or its objective changed after the solve; "
                            "pass the matrix to check them: verify(cost)"])
        return self.certificate

    def fingerprint(self) -> str:
        """A digest of the indices, the duals and the objective."""
        digest = hashlib.sha256(repr(self.objective).encode())
        for array in (self.row_ind, self.col_ind, self.row_duals, self.col_duals):
            array = np.asarray(array)
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


def solve(
    cost, client=None, *, method: str = "auto", maximize: bool = False, n_workers: int | None = None,
    scheduler: str | None = None, protocol: str = "tcp", progress=None, workers=None, device: str = "auto",
    init: str = "auto",
) -> DistributedAssignment:
    """Solve the LAP held in a dask array, Zarr array or Zarr store across a Dask cluster.

    Parameters
    ----------
    cost : dask.array.Array, zarr.Array or str
        The cost matrix (any shape; ``+inf`` forbidden), NumPy or CuPy chunks. It is loaded into
        the workers' memory (GPU memory on GPU workers) and never passes through the client.
    client : distributed.Client, optional
        Where to solve. Without one: ``scheduler``'s cluster if given, else the default client
        (the last ``Client`` opened in this process and not closed, as Dask's own functions use),
        else a local cluster started for this call (``LocalCUDACluster`` with one worker per GPU, or a ``LocalCluster`` of
        ``n_workers`` processes where no GPU is visible) and closed after it.
    method : {"auto", "classical", "hybrid", "scaling", "tree"}
        Date & Nagi's classical variant with rows split over the ranks, or the alternating tree
        variant with columns split (section 5; see :mod:`dlap.distributed.rank.engine`), or the
        hybrid (:mod:`dlap.hungarian.hybrid`: classical, then tree) or the ε-scaling engine
        (:mod:`dlap.hungarian.scaling`, square matrices only) on column slabs. ``"auto"``:
        where the matrix fits one worker (dask.config ``dlap.auto.one-rank-memory-share`` of its GPU's free memory,
        or of its memory limit; placement fills the slab piece by piece, so the worker never
        holds the matrix twice), the whole solve runs on one rank with exactly what ``dlap.solve(method="auto")``
        runs there, ε-scaling included: below ``dlap.auto.split-min-entries`` more ranks have been slower
        than one (docs/benchmarks.md, "Dask engine"). ``stats.phase_counts["ranks"]`` is then 1 and
        ``["ranks_offered"]`` the workers it could have used. Two exceptions on GPU workers, for
        integer costs, which are split with the classical variant: a matrix of at least
        ``dlap.auto.split-min-entries`` entries (80000 x 80000: docs/benchmarks.md) unless the split would move more of it
        than one rank or make it once per rank (``_auto_split``), and a matrix persisted across
        them so that one rank would gather more of it than the classical variant's row slabs need
        (``stats.phase_counts["one_rank_moved_bytes"]`` says what one rank would have
        moved). A matrix that fits no worker is split, with the
        variant ``dlap.solve`` would pick on a CPU (classical for integer costs spanning at most
        ``n_cols`` values, else tree); on GPUs classical for integer costs (timed at n = 200000)
        and tree for floats, on which classical is about 20x slower (``dlap.solve`` picks the
        hybrid on one GPU; across GPUs it has not been timed yet).
    n_workers, workers : how many of the cluster's workers, or which (addresses), take part;
        default all. Each is one rank (one GPU on a dask-cuda cluster); rank 0 is the first of
        ``workers``. Without ``workers``, a persisted dask array's ranks go to the workers that
        already hold most of their slabs (``stats.phase_counts["placement_moved_bytes"]`` says
        what still had to move).
    progress : True for a progress bar, or ``callback(update)`` receiving a :class:`dlap.SolveProgress`
        (rank 0's estimate of the share of the work done, its stage, matched rows, an ETA).
    device : {"auto", "cpu", "gpu"}
        ``"auto"``: the GPUs where every rank's worker sees one, else the CPUs (a local cluster
        started here is a ``LocalCUDACluster`` where GPUs are visible). ``"cpu"``: NumPy slabs and
        the CPU kernels, whatever the workers see. ``"gpu"``: every rank's worker must see a GPU.
    init : {"auto", "jv", "reduction"}
        As in :func:`dlap.solve`: Jonker-Volgenant initialisation (its augmenting row reduction
        as rounds of bids over the ranks) or the paper's initial reduction. ``"auto"``: ``"jv"``,
        on CPU and GPU ranks (it leaves a quarter of the reduction's free rows).

    Returns a :class:`DistributedAssignment` whose ``verify()`` is the ranks' certificate.

    Raises scipy's errors for bad input (the ranks check their slabs), ``InfeasibleError``,
    ``WorkerLostError`` when a rank's worker dies, and any error a rank raised; the other ranks
    are aborted first, so none is left blocked and the cluster stays usable. ``RuntimeError``
    for ``device="gpu"`` where a rank's worker sees no GPU.
    """
    check_choice("method", method, METHODS)
    check_choice("device", device, DEVICES)
    check_choice("init", init, INITS)
    if device == "gpu" and client is None and scheduler is None and gpus_visible() == 0:
        raise RuntimeError(NO_GPU)
    source = as_source(cost)
    local_gpu = None if device == "auto" else device == "gpu"
    with connected(client, scheduler, n_workers, protocol, gpu=local_gpu) as client:
        return _solve_on(client, source, method, bool(maximize), n_workers, workers, progress, device, init)


def _solve_on(client, source, method, maximize, n_workers, workers, progress, device, init) -> DistributedAssignment:
    from distributed import Event, MultiLock

    started = time.perf_counter()
    n_rows, n_cols = source.shape
    transposed = n_rows > n_cols
    shape = (n_cols, n_rows) if transposed else (n_rows, n_cols)
    keep_order = workers is not None
    candidates = list(workers) if keep_order else worker_addresses(client)
    if not candidates:  # (issue 37: "min() arg is an empty sequence")
        raise RuntimeError("the Dask cluster has no workers: start some, or wait for them "
                           "(client.wait_for_workers(n)) before dlap.distributed.solve")
    offered = wanted = len(candidates) if keep_order or not n_workers else min(n_workers, len(candidates))
    if n_rows == 0 or n_cols == 0:
        return _empty(source.shape, method, maximize)
    if method == "scaling" and n_rows != n_cols:
        raise ValueError(
            f"method='scaling' across the ranks solves square matrices (this one is {n_rows} x {n_cols}): "
            "its exact phase would need virtual rows; use method='auto' or 'tree'")
    auto = method == "auto"
    followed = None  # (bytes one rank would move, the classical split's plan): auto splits
    if auto:
        method, gpu = _auto_method(client, source, shape, candidates[:offered], device, maximize)
        if method == "auto" and gpu and source.dtype.kind in "biu" and wanted > 1:
            followed = _auto_split(client, source, shape, transposed, candidates, wanted, keep_order)
            method = "classical" if followed else method
        wanted = 1 if method == "auto" else wanted
    split = SPLIT_AXIS[method]
    n_ranks = max(1, min(wanted, shape[split]))
    axis = 1 - split if transposed else split
    bounds = slab_bounds(source, axis, n_ranks)
    plan = followed[1] if followed else plan_ranks(client, source, axis, bounds, candidates, keep_order)
    workers = plan.workers
    gpu = ranks_on_gpus(client, workers, device)
    _warn_if_ucx_spins(client, workers)
    lenders = [] if gpu or method != "auto" else _lenders(client, workers[0], candidates[:offered])
    threads = _nthreads(client, workers + lenders) if lenders else None
    solve_id = uuid.uuid4().hex[:12]
    topic, abort_name = f"dlap-progress-{solve_id}", f"dlap-abort-{solve_id}"
    lock = MultiLock(names=[f"dlap-worker-{w}" for w in workers + lenders], client=client)
    abort = Event(abort_name, client=client)
    # the scheduler releases the lock and aborts the ranks if this client dies (registry.py)
    running = []  # the tasks to stop if the caller is interrupted
    with registry.registered(client, solve_id, lock, abort_name, workers, method, source.shape,
                             interrupted=lambda: stop_ranks(client, running, workers, abort)) as lease:
        registry.acquire(lock, lease)  # two solves never share a worker (each rank task holds its worker's comm)
        offset = source_offset(client, source, maximize)
        running = slabs = place_slabs(client, source, plan, axis=axis, bounds=bounds, transposed=transposed,
                                      maximize=maximize, gpu=gpu, solve_id=solve_id, offset=offset,
                                      wait=lambda futures, owners: wait_for_ranks(client, futures, workers, abort, owners,
                                                                         solve_id))
        wait_for_ranks(client, slabs, workers, abort, solve_id=solve_id)  # bad input fails here, before any rank joins a comm
        placed = time.perf_counter()
        comm = comm_spec(client, workers, gpu and n_ranks > 1)
        joined = time.perf_counter()
        integer = source.dtype.kind in "biu"
        token = secrets.token_bytes(32)  # reaches the ranks through Dask (TLS where the cluster has it)
        specs = [
            RankSpec(solve_id=solve_id, rank=r, size=n_ranks, method=method, shape=shape, bounds=bounds,
                     integer=integer, comm=comm, progress_topic=topic, abort_event=abort_name,
                     init="jv" if init == "auto" else init, threads=threads,
                     auto=auto, token=token)
            for r in range(n_ranks)
        ]
        submitted = time.time()  # the ranks' tasks report their own clock's times (one host, or NTP)
        running = futures = [
            client.submit(run_rank, slab, spec, key=f"dlap-solve-{method}-{solve_id}-{spec.rank}",
                          workers=[w], allow_other_workers=False, pure=False, retries=0)
            for slab, spec, w in zip(slabs, specs, workers, strict=True)
        ]
        del slabs
        with watch(client, topic, progress):
            wait_for_ranks(client, futures, workers, abort, solve_id=solve_id)
        results = client.gather(futures)
        gathered = time.time()
        if any(isinstance(r, RankAborted) for r in results):  # the scheduler stopped it while no rank failed
            raise ended_by_the_scheduler(client, solve_id) or CommAborted(f"dlap: solve {solve_id} was aborted")
    result = _assignment(results, integer, offset, method, maximize, transposed, n_ranks, gpu)
    seconds = result.stats.phase_seconds
    seconds["placement"] = placed - started
    seconds["comm_spec"] = joined - placed
    # rank 0's timeline, which the other parts (its comm setup and solve) are timed on
    seconds["rank_start"] = results[0].window[0] - submitted
    seconds["rank_return"] = gathered - results[0].window[1]
    result.stats.seconds = time.perf_counter() - started
    result.stats.phase_counts["ranks_offered"] = offered
    if plan.moved_bytes is not None:
        result.stats.phase_counts["placement_moved_bytes"] = plan.moved_bytes
    if followed and followed[0] is not None:
        result.stats.phase_counts["one_rank_moved_bytes"] = followed[0]
    return result


def _auto_method(client, source, shape, candidates, device, maximize) -> tuple[str, bool]:
    """``method="auto"``: "auto" (one rank) where the matrix fits a worker, else the variant;
    and whether the ranks would be GPUs."""
    seen = client.run(_worker_capacity, workers=candidates)
    gpu = device == "gpu" or (device == "auto" and all(g for g, _ in seen.values()))
    capacity = min(gpu_bytes if gpu else host_bytes for _, (gpu_bytes, host_bytes) in seen.values())
    matrix_bytes = shape[0] * shape[1] * working_dtype(source.dtype, maximize).itemsize
    held = matrix_bytes + min(matrix_bytes, config.nbytes("placement.buffer-bytes"))  # the slab, and pieces on the way
    if held <= config.number(f"auto.one-rank-memory-share.{'gpu' if gpu else 'cpu'}") * capacity:
        return "auto", gpu
    if source.dtype.kind not in "biu":
        return "tree", gpu
    if gpu:
        return "classical", gpu
    lo, hi = source_range(client, source)
    return ("classical" if int(hi) - int(lo) <= shape[1] else "tree"), gpu


def _auto_split(client, source, shape, transposed, candidates, wanted, keep_order):
    """For an integer matrix that fits one GPU (method="auto" on GPU workers): where auto splits
    it over the workers with the classical variant, the bytes one rank would have moved (None
    for input that is not persisted) and the split's :func:`plan_ranks` (the plan the solve then
    uses); else None. Auto splits

    - a matrix persisted across the workers so that one rank would gather more of it than the
      row slabs need: the ranks follow the data (moving a matrix between workers takes longer
      than solving it);
    - a matrix of ``dlap.auto.split-min-entries`` entries or more, unless the split would move more of a
      persisted matrix than one rank would (a matrix held by one worker stays there), or every
      rank would make as much of it as one rank (a dask array in column chunks that are not
      held is made whole by each rank of a row split, a Zarr array in column chunks read whole
      by each: ``made_bytes``)."""
    axis = 1 if transposed else 0  # the classical variant splits the solved form's rows
    bounds = slab_bounds(source, axis, max(1, min(wanted, source.shape[axis])))
    big = shape[0] * shape[1] >= config.number("auto.split-min-entries")
    holders = chunk_holders(client, source)
    one = assign_ranks(holders, source, axis, (0, source.shape[axis]), candidates, keep_order)
    if one.moved_bytes is not None:  # persisted
        split = assign_ranks(holders, source, axis, bounds, candidates, keep_order)
        moves_less = split.moved_bytes < one.moved_bytes or (big and split.moved_bytes <= one.moved_bytes)
        return (one.moved_bytes, split) if moves_less else None
    if not big:
        return None
    matrix_bytes = int(np.prod(source.shape)) * source.dtype.itemsize
    if made_bytes(source, axis, bounds).max() >= matrix_bytes:
        return None
    return None, assign_ranks(holders, source, axis, bounds, candidates, keep_order)


def _lenders(client, worker, offered) -> list:
    """The offered workers on ``worker``'s host that a one-rank CPU solve borrows the threads of
    (they are locked for the solve like a rank's): a solve of the whole matrix on one rank of a
    cluster of single-threaded workers would otherwise use one core of the host."""
    from distributed.comm import get_address_host

    host = get_address_host(worker)
    return [w for w in offered if w != worker and get_address_host(w) == host]


def _nthreads(client, workers) -> int:
    """The threads of ``workers`` together, from one look at the scheduler."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    return sum(int(info[w]["nthreads"]) for w in workers)


def _worker_capacity(dask_worker=None) -> tuple[bool, tuple[int, int]]:
    """Whether this worker sees a GPU, and (its GPU's free memory, CuPy's cached blocks
    included; its own memory limit or, without one, the host's memory) in bytes."""
    import psutil

    gpu_bytes = 0
    if _gpu_worker() is not None:
        from ..device import free_device_memory

        gpu_bytes = free_device_memory()
    host_bytes = int(getattr(dask_worker.memory_manager, "memory_limit", 0) or psutil.virtual_memory().total)
    return gpu_bytes > 0, (gpu_bytes, host_bytes)


def _warn_if_ucx_spins(client, workers) -> None:
    """Warn where a rank's worker talks UCX with ucxx spinning its event loop: every CUDA call
    of the rank then waits for the GIL (:data:`~.cluster.UCX_ENVIRONMENT`)."""
    if not any(w.startswith("ucx") for w in workers):
        return
    spinning = [w for w, spins in client.run(ucx_waits_spin, workers=workers).items() if spins]
    if spinning:
        settings = " ".join(f"{k}={v}" for k, v in UCX_ENVIRONMENT.items())
        warnings.warn(
            f"{len(spinning)} of the ranks' workers wait on UCX by spinning their event loop, which "
            f"slows every CUDA call of a rank (the ranks' solve was 27-40% slower than over tcp); start "
            f"the workers with {settings} (dlap.distributed.start_cluster does)", RuntimeWarning, stacklevel=4)


def ranks_on_gpus(client, workers, device) -> bool:
    """Whether the ranks' slabs go to their workers' GPUs: with ``device="auto"`` where every
    worker sees one and no two share it (plain LocalCluster workers on a GPU host all see the
    same GPU, and NCCL refuses two ranks on one device: they solve on their CPUs instead)."""
    seen = client.run(_gpu_worker, workers=workers)
    ids = [seen[w] for w in workers]
    shared = len(set(ids)) < len(ids)
    if device == "gpu":
        if not all(ids):
            raise RuntimeError(f"device='gpu': these workers see no GPU: {', '.join(w for w in workers if not seen[w])}")
        if shared:
            raise RuntimeError(
                "device='gpu': several ranks' workers share one GPU, which NCCL refuses; start one "
                "worker per GPU (dlap.distributed.start_cluster() or dask-cuda's LocalCUDACluster)")
        return True
    return device == "auto" and all(ids) and not shared


def _gpu_worker() -> str | None:
    """The PCI bus id of this worker's current GPU; None where it sees none."""
    if gpus_visible() == 0:
        return None
    import cupy

    return cupy.cuda.Device().pci_bus_id


def comm_spec(client, workers, nccl: bool) -> tuple:
    """How the ranks connect (``RankSpec.comm``): NCCL between GPU ranks, with the communicator
    their workers kept from the last solve on the same workers where every one keeps it (one
    round trip), else a new unique id from rank 0's worker; Dask's RPC otherwise (CPU ranks
    then open sockets through it, :class:`~.comm.SocketComm`)."""
    if not nccl:
        client.run(register_rpc_handler, workers=workers)
        return ("rpc", tuple(workers))
    if all(client.run(nccl_kept, tuple(workers), workers=workers).values()):
        return ("nccl", None, tuple(workers))
    return ("nccl", client.run(nccl_unique_id, workers=[workers[0]])[workers[0]], tuple(workers))


def wait_for_ranks(client, futures, workers, abort, owners=None, solve_id: str = "") -> None:
    """Wait for every task (one per rank, or placement's, which run on ``owners``). When one
    fails, is cancelled or a rank's worker leaves, set the abort event (every rank's watchdog
    aborts its communicator), wait for the ranks to stop, and raise the first cause.

    The futures' states are read locally every TICK; the scheduler is asked about the workers
    every POLL. (Not ``distributed.wait``: it waits through the process's default client, which
    is not ``client`` once the caller has made another one.)"""
    failure = None
    next_check = 0.0
    while failure is None:
        errors = [f for f in futures if f.status == "error"]
        if errors:
            failure = errors[0].exception()
            break
        if all(f.status == "finished" for f in futures):
            return
        cancelled = [f for f in futures if f.status == "cancelled"]
        if cancelled:
            # the scheduler also cancels the task of a rank whose worker it has removed (seen in
            # CI under load): then the dead worker is the cause
            failure = _worker_lost(client, workers) or ended_by_the_scheduler(client, solve_id) or RuntimeError(
                f"dlap: task {cancelled[0].key} was cancelled during the solve")
            break
        if time.perf_counter() >= next_check:
            failure = _worker_lost(client, workers)
            next_check = time.perf_counter() + POLL
        time.sleep(TICK)
    stop_ranks(client, futures, workers, abort, failure, owners)


class SolveExpired(RuntimeError):
    """The scheduler ended a solve whose client stopped renewing its lease."""


def ended_by_the_scheduler(client, solve_id: str) -> SolveExpired | None:
    """Why the scheduler's registry ended this solve, where it did (its lease ran out)."""
    state = registry.state(client, solve_id) if solve_id else None
    if state is None or not state.startswith("lease expired"):
        return None
    return SolveExpired(f"dlap: solve {solve_id} was ended by the scheduler ({state}); the cluster went on to "
                        "other work. Solve again")


def stop_ranks(client, futures, workers, abort, failure=None, owners=None) -> None:
    """Set the abort event (every rank's watchdog aborts its communicator), wait for the ranks
    whose workers are alive to stop, cancel every task, and raise the first real cause of
    ``failure`` (None: the caller was interrupted, and re-raises that itself)."""
    abort.set()
    deadline, next_check, waited = time.perf_counter() + config.seconds("abort-grace"), 0.0, futures
    while time.perf_counter() < deadline and not all(f.done() for f in waited):
        if time.perf_counter() >= next_check:  # the scheduler is asked every POLL, the futures every TICK
            waited, next_check = _alive(client, futures, owners or workers), time.perf_counter() + POLL
        time.sleep(TICK)  # a rank still blocked after the grace is cancelled below
    if isinstance(failure, OSError):
        # a rank that could not reach a peer usually raced the scheduler's notice of that peer's
        # death: the dead worker is the cause to report, once the scheduler has seen it go
        deadline = time.perf_counter() + config.seconds("lost-grace")
        while time.perf_counter() < deadline and not isinstance(failure, WorkerLostError):
            failure = _worker_lost(client, workers) or failure
            time.sleep(POLL)
    failure = _worker_lost(client, workers) or failure  # a worker that died meanwhile is the cause
    if failure is not None and not isinstance(failure, WorkerLostError):  # the first real cause
        causes = [f.exception() for f in futures if f.status == "error"]
        failure = min([failure, *causes], key=_echo_level)
    client.cancel(futures, force=True)
    abort.clear()  # the scheduler forgets an unset event once no watchdog waits on it
    if failure is not None:
        raise failure


def _echo_level(error: BaseException) -> int:
    """How likely ``error`` is only an echo of the abort: 0 for a real cause (a rank's own error,
    a cancelled task), 1 for a connection a peer closed as it stopped (an aborted rank closes its
    sockets, and a rank whose watchdog has not fired yet reads that as a reset), 2 for
    :class:`CommAborted`. The stable minimum over the client's cause and the ranks' errors is the
    cause to report."""
    return 2 if isinstance(error, CommAborted) else 1 if isinstance(error, ConnectionError) else 0


def _alive(client, futures, owners) -> list:
    """The futures whose workers (``owners``) the scheduler still lists: a dead worker's task
    never finishes (it is pinned there), so waiting for it would wait out the whole grace."""
    alive = set(worker_addresses(client))
    return [f for f, w in zip(futures, owners, strict=True) if w in alive]


def _worker_lost(client, workers) -> WorkerLostError | None:
    """A WorkerLostError naming the first rank whose worker the scheduler no longer lists."""
    alive = set(worker_addresses(client))
    for rank, worker in enumerate(workers):
        if worker not in alive:
            return WorkerLostError(
                f"dlap: worker {worker} (rank {rank}) left the cluster during the solve; the other ranks were aborted"
            )
    return None


def _assignment(results, integer, offset, method, maximize, transposed, n_ranks, gpu) -> DistributedAssignment:
    """Rank 0's solution (solved form) mapped back to the caller's matrix, like dlap.solve."""
    root = results[0]
    stats = Stats(**root.stats)
    stats.method = f"distributed-{stats.method}"  # auto: what it ran (a variant, or ε-scaling)
    stats.device = f"{n_ranks} x {'gpu' if gpu else 'cpu'}"
    stats.phase_seconds["rank_solve"] = root.stats["seconds"]
    stats.phase_counts["ranks"] = n_ranks
    stats.phase_counts["communication_per_rank"] = [root.stats["phase_seconds"].get("communication", 0.0)] + [
        r["communication"] for r in results[1:]
    ]
    rows = np.arange(root.row_match.shape[0], dtype=np.int64)
    cols = root.row_match
    u, v = caller_duals(*unscaled_duals(root.u, root.v, root.scale_exponent), integer=integer, offset=offset,
                        maximize=maximize)
    if transposed:
        order = np.argsort(cols)
        rows, cols, u, v = cols[order], rows[order], v, u
    sign = -1 if maximize else 1
    k = len(rows)
    certificate = _caller_certificate(root.certificate, sign, k * offset)
    result = DistributedAssignment(
        row_ind=rows, col_ind=cols, objective=certificate.primal, row_duals=u, col_duals=v, stats=stats,
        maximize=maximize, certificate=certificate,
    )
    result.certified = result.fingerprint()
    return result


def _caller_certificate(solved: Certificate, sign: int, shift: int) -> Certificate:
    """The ranks' certificate (the solved form: minimisation, integers less their offset) as the
    caller's: ``shift`` (k times the integer offset) added back, negated when maximising."""
    return dataclasses.replace(solved, primal=sign * (solved.primal + shift),
                               lower_bound=sign * (solved.lower_bound + shift))


def _empty(shape, method, maximize) -> DistributedAssignment:
    empty = np.empty(0, dtype=np.int64)
    stats = Stats(method=f"distributed-{method}")
    result = DistributedAssignment(
        row_ind=empty, col_ind=empty.copy(), objective=0, row_duals=np.zeros(shape[0]),
        col_duals=np.zeros(shape[1]), stats=stats, maximize=maximize,
        certificate=Certificate(0, 0, 0, 0.0, 0, 0, True),
    )
    result.certified = result.fingerprint()
    return result
