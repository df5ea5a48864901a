"""``dlap.distributed.solve_points``: the sparse-core engine of :mod:`dlap.points` with its work over
every pair split across the workers of a Dask cluster and its core solved on one of them.

The points, O((n + m) d), are checked and put in k-d order in the calling process and sent to each
worker once. Then each worker runs one long task, a rank (:mod:`dlap.distributed.rank.points`):
the searches that touch all n x m pairs (the candidates' nearest neighbours, every pricing
round) are split over the ranks by blocks of rows (of columns for each column's nearest rows);
rank 0, the root, solves the core, O(n k) edges, on its worker's thread team between the rounds
(and the coarse transport candidates' cells, :mod:`dlap.points.coarse`, before the first). The
duals go out and the violators come back through the ranks' communicator (NCCL between GPU
workers, sockets between CPU ones). Only the assignment and duals, O(n + m), come back here; the
result's ``verify()`` checks every pair here (k-d trees or blocks, as :func:`dlap.solve_points`'s).

On the dashboard each rank's task is ``dlap-points-<solve id>-<rank>`` and the dlap page shows
the solve's stage, its pricing rounds and violators. A rank that fails or whose worker leaves
ends the solve (the others are aborted, the workers stay usable), as :func:`dlap.distributed.solve`.
"""

from __future__ import annotations

import secrets
import time
import uuid

from ..options import DEVICES, check_choice
from ..points.metrics import Metric
from ..points.solve import PointsProblem
from .cluster import connected, worker_addresses
from .data import even_bounds
from .progress import watch
from .rank.comm import CommAborted
from .rank.engine import RankAborted
from .rank.points import PointsRankSpec, run_points_rank
from .scheduler import registry
from .solve import comm_spec, ended_by_the_scheduler, ranks_on_gpus, stop_ranks, wait_for_ranks


def solve_points(a, b, metric: Metric = "euclidean", client=None, *, p: float | None = None, maximize: bool = False,
                 candidates: int | None = None, n_workers: int | None = None, workers=None,
                 scheduler: str | None = None, device: str = "auto", progress=None):
    """:func:`dlap.solve_points` with the nearest-neighbour queries and the pricing of every pair
    split over a Dask cluster's workers (see the module docstring).

    Parameters
    ----------
    a, b : arrays of shape (n, d) and (m, d)
        NumPy, dask (computed on the cluster and gathered here: n x d values), CuPy, PyTorch or
        DLPack arrays; as :func:`dlap.solve_points`.
    metric, p, maximize, candidates, progress
        As :func:`dlap.solve_points`.
    client : distributed.Client, optional
        Where to solve: as :func:`dlap.distributed.solve` (``scheduler``'s cluster, the default
        client, or a local cluster started for this call and closed after it).
    n_workers, workers : how many of the cluster's workers, or which (addresses), take part;
        default all (at most one a row). Each is one rank, with a block of the rows and one of
        the columns; rank 0, the first, solves the core.
    device : {"auto", "cpu", "gpu"}
        Where each rank computes its pairs: ``"auto"`` on its worker's GPU where every rank's
        worker sees a GPU of its own (dask-cuda gives each worker one; the ranks then talk
        through NCCL) and its block has at least 512 x 512 pairs, else on its CPU; ``"gpu"``
        requires a GPU of its own for every rank's worker.

    Returns
    -------
    Assignment
        As :func:`dlap.solve_points`, the answers on the host; ``stats.phase_counts["workers"]``
        says how many ranks shared the searches, ``stats.device`` whether on GPUs.

    Raises
    ------
    As :func:`dlap.solve_points` for bad input (here, before any worker is asked);
    ``WorkerLostError`` where a rank's worker leaves, ``SolveExpired`` where the scheduler ended
    the solve (its client stopped renewing its lease), any error a rank raised: the other ranks
    are aborted first, and the cluster stays usable.
    """
    started = time.perf_counter()
    check_choice("device", device, DEVICES)
    with connected(client, scheduler, n_workers) as client:
        problem = PointsProblem(_local(a, client), _local(b, client), metric, p, "cpu", candidates)
        stats = problem.stats()
        solution = None
        if problem.rows:
            solution = _solve_on_ranks(client, problem, maximize, _workers(client, workers, n_workers), device,
                                       progress, stats)
    return problem.answer(solution, maximize, stats, started)


def _solve_on_ranks(client, problem: PointsProblem, maximize: bool, workers: list[str], device: str, progress,
                    stats):
    """The ranks' solve (see the module docstring) on ``workers``, one rank each (at most one a
    row), under the solve's lock and the scheduler's registry (the dashboard's dlap page; a
    client that stops renewing its lease has its solve ended, the cluster goes on). Returns the
    core's solution; ``stats`` gets the root's."""
    from distributed import Event, MultiLock

    side = problem.rows_side
    n, m = side.shape
    workers = workers[: min(len(workers), n)]
    size = len(workers)
    gpu = device != "cpu" and ranks_on_gpus(client, workers, device)
    solve_id = uuid.uuid4().hex[:12]
    topic, abort_name = f"dlap-progress-{solve_id}", f"dlap-abort-{solve_id}"
    lock = MultiLock(names=[f"dlap-worker-{w}" for w in workers], client=client)
    abort = Event(abort_name, client=client)
    running = []  # the tasks to stop if the caller is interrupted
    with registry.registered(client, solve_id, lock, abort_name, workers, "sparse core (points)", problem.costs.shape,
                             interrupted=lambda: stop_ranks(client, running, workers, abort)) as lease:
        registry.acquire(lock, lease)  # two solves never share a worker (each rank holds its worker's comm)
        points = client.scatter([side.a, side.b, problem.trees], workers=workers, broadcast=True, hash=False)
        try:
            comm = comm_spec(client, workers, gpu and size > 1)
            token = secrets.token_bytes(32)
            specs = [PointsRankSpec(solve_id=solve_id, rank=r, size=size, row_bounds=even_bounds(n, size),
                                    col_bounds=even_bounds(m, size), metric=problem.metric, exponent=problem.exponent,
                                    sign=problem.sign(maximize), device=device if gpu else "cpu", comm=comm,
                                    candidates=problem.candidates, maximize=maximize, progress_topic=topic,
                                    abort_event=abort_name, token=token)
                     for r in range(size)]
            submitted = time.time()
            running = futures = [
                client.submit(run_points_rank, *points, spec, key=f"dlap-points-{solve_id}-{spec.rank}",
                              workers=[w], allow_other_workers=False, pure=False, retries=0)
                for spec, w in zip(specs, workers, strict=True)
            ]
            with watch(client, topic, progress):
                wait_for_ranks(client, futures, workers, abort, solve_id=solve_id)
            results = client.gather(futures)
            gathered = time.time()
        finally:
            client.cancel(points)
        if any(isinstance(r, RankAborted) for r in results):  # the scheduler stopped it while no rank failed
            raise ended_by_the_scheduler(client, solve_id) or CommAborted(f"dlap: solve {solve_id} was aborted")
    root = results[0]
    stats.threads = root.stats["threads"]
    stats.phase_seconds.update(root.stats["phase_seconds"])
    stats.phase_counts.update(root.stats["phase_counts"])
    stats.phase_counts["workers"] = size
    stats.phase_seconds["rank_start"] = root.window[0] - submitted
    stats.phase_seconds["rank_return"] = gathered - root.window[1]
    stats.device = f"{size} x {'gpu' if gpu else 'cpu'}"
    return root.solution


def _local(points, client):
    """Points as an array of this process: a dask array computed on the cluster."""
    if hasattr(points, "dask") and hasattr(points, "compute"):
        return client.compute(points).result()
    return points


def _workers(client, workers, n_workers) -> list[str]:
    chosen = list(workers) if workers is not None else worker_addresses(client)
    if n_workers is not None:
        chosen = chosen[:n_workers]
    if not chosen:
        raise RuntimeError("dlap: the Dask cluster has no workers to solve on")
    return chosen
