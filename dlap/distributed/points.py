"""``dlap.distributed.solve_points``: the sparse-core engine of :mod:`dlap.points` with its work over
every pair split across the workers of a Dask cluster.

The points, O((n + m) d), are checked in the calling process and sent to each worker once. The
two searches that touch all n x m pairs run on the workers, each over its block of rows (or, for
each column's nearest rows, of columns): the candidates' nearest neighbours and every pricing
round. The core, O(n k) edges, is solved in the calling process between the rounds (and the
coarse transport candidates' cells, :mod:`dlap.points.coarse`, before the first); the result's
``verify()`` checks every pair there (k-d trees or blocks, as :func:`dlap.solve_points`'s).

On the dashboard the tasks are ``dlap-points-nearest-<solve id>-<side>-<first row>`` and
``dlap-points-price-<round>-<solve id>-0-<first row>``, one per worker. A worker that leaves has its
task redone by another and the next rounds' blocks split over the others; a block's search (its
k-d tree) is made once per worker and solve and dropped when the solve ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections import OrderedDict
from concurrent.futures import CancelledError

import numpy as np

from ..options import DEVICES, check_choice
from ..points.metrics import Metric
from ..points.search import listed
from ..points.solve import PointsProblem
from .cluster import connected, worker_addresses
from .solve import WorkerLostError, ended_by_the_scheduler

#: the block searches a worker keeps (a solve's, dropped at its end; a bound for solves whose
#: client went away before)
KEPT_SEARCHES = 8
_searches: OrderedDict = OrderedDict()  # on a worker: (solve id, side, lo, hi) -> PairSearch


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
    n_workers, workers : how many of the cluster's workers, or which (addresses), share the
        searches; default all. Each gets one block of rows.
    device : {"auto", "cpu", "gpu"}
        Where each worker computes its pairs: ``"auto"`` its GPU where it sees one and its block
        has at least 512 x 512 pairs (dask-cuda gives each worker one), else its CPU.

    Returns
    -------
    Assignment
        As :func:`dlap.solve_points`, the answers on the host; ``stats.phase_counts["workers"]``
        says how many workers shared the searches.
    """
    started = time.perf_counter()
    check_choice("device", device, DEVICES)
    with connected(client, scheduler, n_workers) as client:
        problem = PointsProblem(_local(a, client), _local(b, client), metric, p, "cpu", candidates)
        stats = problem.stats()
        solution = None
        if problem.rows:
            search = ClusterSearch(client, problem, maximize, _workers(client, workers, n_workers), device)
            stats.phase_counts["workers"] = len(search.workers)
            solution = _solve_registered(client, search, problem, stats, progress, maximize)
    return problem.answer(solution, maximize, stats, started)


def _solve_registered(client, search, problem, stats, progress, maximize: bool):
    """The core solve, on this process's thread team (:func:`dlap.threads.solve_threads`), recorded
    by the scheduler's solve registry (the dashboard's ``dlap`` page: its stage, pricing rounds and
    violators) on a lease this client renews: a client that stops answering has its solve's tasks
    cancelled, the cluster goes on."""
    from distributed import MultiLock

    from ..points.core import solve_core
    from ..progress import ProgressBar
    from ..threads import solve_threads
    from .scheduler.registry import registered

    solve_id = search.solve_id
    topic = f"dlap-progress-{solve_id}"
    lock = MultiLock(names=[f"dlap-points-{solve_id}"], client=client)  # never taken: no worker is held
    with (registered(client, solve_id, lock, f"dlap-abort-{solve_id}", search.workers, "sparse core (points)",
                     problem.costs.shape, keeps_going=True),
          contextlib.closing(search),
          solve_threads(search.shape[0] * search.shape[1]) as threads,
          ProgressBar(progress, "dlap distributed solve_points") as callback):
        stats.threads = threads

        def report(update) -> None:
            counts = stats.phase_counts
            client.log_event(topic, {**dataclasses.asdict(update), "rounds": counts.get("pricing_rounds", 0),
                                     "violators": counts.get("violators", 0),
                                     "phase_seconds": dict(stats.phase_seconds)})
            if callback is not None:
                callback(update)

        return solve_core(search, stats, problem.candidates, report, coarse=problem.coarse_pairs(maximize))


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


class ClusterSearch:
    """The queries of :func:`dlap.points.core.solve_core` (see :class:`dlap.points.search.PairSearch`):
    those over every pair by blocks on the workers, the others (a few pairs) here."""

    def __init__(self, client, problem: PointsProblem, maximize: bool, workers: list[str], device: str):
        from ..points.search import PairSearch

        side = problem.rows_side
        self.client, self.workers, self.device = client, workers, device
        self.sign = problem.sign(maximize)
        self.metric, self.exponent = problem.metric, problem.exponent
        self.here = PairSearch(side.kernels, side.a, side.b, side.a_norms, side.b_norms, problem.metric,
                               problem.exponent, self.sign, problem.trees)
        self.shape = self.here.shape
        self.solve_id = uuid.uuid4().hex[:12]
        self.rounds = 0
        # the points, once to each worker
        self.points = client.scatter([side.a, side.b], workers=workers, broadcast=True, hash=False)

    def _live(self) -> list[str]:
        """The solve's workers still in the cluster; :class:`SolveExpired` where the scheduler
        ended the solve meanwhile (its client stopped renewing its lease)."""
        expired = ended_by_the_scheduler(self.client, self.solve_id)
        if expired is not None:
            raise expired
        live = self._present()
        if not live:
            raise WorkerLostError("dlap: every worker of the solve left the cluster")
        return live

    def _present(self) -> list[str]:
        present = set(worker_addresses(self.client))
        return [w for w in self.workers if w in present]

    def _blocks(self, length: int):
        """Contiguous blocks of ``length`` rows (or columns), one per live worker."""
        live = self._live()
        bounds = np.linspace(0, length, min(len(live), length) + 1).astype(np.int64).tolist()
        return list(zip(bounds[:-1], bounds[1:], live, strict=False))

    def _gather(self, futures):
        """The futures' results; :class:`SolveExpired` where the scheduler cancelled them because
        it ended the solve (its client stopped renewing its lease)."""
        try:
            return self.client.gather(futures)
        except CancelledError:
            expired = ended_by_the_scheduler(self.client, self.solve_id)
            if expired is None:
                raise
            raise expired from None

    def _submit(self, function, name: str, side: int, lo: int, hi: int, worker: str, *args):
        return self.client.submit(function, self.solve_id, side, lo, hi, *self.points, self.metric, self.exponent,
                                  self.sign, self.device, *args, key=f"{name}-{self.solve_id}-{side}-{lo}",
                                  workers=[worker], allow_other_workers=True, pure=False)

    def nearest_columns(self, k: int):
        """Each row's ``k`` cheapest columns and their costs."""
        return self._nearest(0, self.shape[0], k)

    def nearest_rows(self, k: int):
        """Each column's ``k`` cheapest rows and their costs."""
        return self._nearest(1, self.shape[1], k)

    def _nearest(self, side: int, length: int, k: int):
        futures = [self._submit(_nearest_block, "dlap-points-nearest", side, lo, hi, w, k)
                   for lo, hi, w in self._blocks(length)]
        found = self._gather(futures)
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])

    def price(self, u, v, rtol: float, atol: float, index, reduced, count, rows=None) -> None:
        """Every pair's reduced cost, by blocks of rows (:meth:`dlap.points.search.PairSearch.price`;
        ``rows``: only those, each block asked for its own, a block without any not at all)."""
        self.rounds += 1
        asked = [(lo, hi, w, None) for lo, hi, w in self._blocks(self.shape[0])]
        if rows is not None:
            count[:] = 0
            ends = np.searchsorted(rows, [hi for _, hi, _, _ in asked]).tolist()
            asked = [(lo, hi, w, rows[first:end] - lo)
                     for (lo, hi, w, _), first, end in zip(asked, [0, *ends[:-1]], ends, strict=True) if end > first]
        if not asked:
            return
        duals = self.client.scatter(v, workers=[w for _, _, w, _ in asked], broadcast=True, hash=False)
        futures = [self._submit(_price_block, f"dlap-points-price-{self.rounds}", 0, lo, hi, w, u[lo:hi], duals,
                                rtol, atol, index.shape[1], part)
                   for lo, hi, w, part in asked]
        for (lo, hi, _, _), (found, below, c) in zip(asked, self._gather(futures), strict=True):
            kept = listed(c, index.shape[1])
            index[lo:hi][kept], reduced[lo:hi][kept], count[lo:hi] = found, below, c

    def pair_costs(self, rows, cols):
        return self.here.pair_costs(rows, cols)

    def nearest_among(self, rows, columns, k: int):
        return self.here.nearest_among(rows, columns, k)

    def close(self) -> None:
        """Drop the workers' searches and points of this solve."""
        self.client.run(forget, self.solve_id, workers=self._present())
        self.client.cancel(self.points)


def _block_search(solve_id, side, lo, hi, rows, cols, metric, exponent, sign, device):
    """On a worker: the search over block ``lo:hi`` of the rows (``side`` 0) or of the columns
    (``side`` 1, the other set then its columns), made once per solve."""
    from ..device import device_for
    from ..points.costs import PointCosts
    from ..points.search import PairSearch

    key = (solve_id, side, lo, hi)
    if key not in _searches:
        a, b = (rows, cols) if side == 0 else (cols, rows)
        a = a[lo:hi]
        on = device_for(device, False, a.shape[0] * b.shape[0])
        if on == "gpu":
            import cupy

            a, b = cupy.asarray(a), cupy.asarray(b)
        costs = PointCosts(a, b, metric, exponent, on)
        _searches[key] = PairSearch(costs.kernels, costs.a, costs.b, costs.a_norms, costs.b_norms, metric, exponent,
                                    sign)
        while len(_searches) > KEPT_SEARCHES:
            _searches.popitem(last=False)
    _searches.move_to_end(key)
    return _searches[key]


def _nearest_block(solve_id, side, lo, hi, rows, cols, metric, exponent, sign, device, k):
    """On a worker: its block's ``k`` nearest (columns of its rows, or rows of its columns)."""
    return _block_search(solve_id, side, lo, hi, rows, cols, metric, exponent, sign, device).nearest_columns(k)


def _price_block(solve_id, side, lo, hi, rows, cols, metric, exponent, sign, device, u, v, rtol, atol, k, part):
    """On a worker: its rows' violators (:meth:`dlap.points.search.PairSearch.price`; ``part``:
    only those of its rows, numbered from ``lo``), only those kept (each row's first ``min(count,
    k)``, row after row: most rows have none) and the counts."""
    search = _block_search(solve_id, side, lo, hi, rows, cols, metric, exponent, sign, device)
    index, reduced = np.empty((hi - lo, k), dtype=np.int64), np.empty((hi - lo, k))
    count = np.empty(hi - lo, dtype=np.int64)
    search.price(u, v, rtol, atol, index, reduced, count, part)
    kept = listed(count, k)
    return index[kept], reduced[kept], count


def forget(solve_id: str) -> None:
    """On a worker: drop the searches of solve ``solve_id``."""
    for key in [key for key in _searches if key[0] == solve_id]:
        del _searches[key]
