"""A rank of :func:`dlap.distributed.solve_points`: the sparse-core engine (:mod:`dlap.points.core`)
with its searches over every pair split over the ranks and the core solved by rank 0, the root
(issue 36; docs/design.md, "Point sets on a Dask cluster").

Every rank holds both point sets (the rows' side, in the engine's k-d order) and searches one
block of each: the nearest columns and the pricing of its rows, the nearest rows of its columns.
The root runs :func:`~dlap.points.core.solve_core` on its worker's thread team with a
:class:`RootSearch`: each search over every pair is a query that the root broadcasts (a header:
its kind and numbers; for pricing the duals and the rows to price), every rank answers it for its
blocks, and the answers are gathered to the root by the communicator (NCCL between GPU workers,
sockets between CPU ones), never through the scheduler. The other ranks answer queries
(:func:`answer_queries`) until the root's last, ``DONE``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...device import device_for
from ...points.search import PairSearch, listed
from ...result import Stats
from .comm import to_host
from .engine import RankAborted, joined, progress_events

#: the kinds of query, a header's first entry
NEAREST_COLUMNS, NEAREST_ROWS, PRICE, DONE = range(4)
#: a query's header: its kind, k, pricing's rtol and atol, how many rows to price (-1: every row)
HEADER = 5


@dataclass(frozen=True)
class PointsRankSpec:
    """What one rank's task needs (picklable, sent by the client)."""

    solve_id: str
    rank: int
    size: int
    row_bounds: tuple[int, ...]  # rank r searches rows [row_bounds[r], row_bounds[r + 1]) ...
    col_bounds: tuple[int, ...]  # ... and columns [col_bounds[r], col_bounds[r + 1])
    metric: str
    exponent: float
    sign: float
    device: str  # where a rank computes its pairs: "cpu", or "auto" / "gpu" as dlap.solve_points
    comm: tuple  # a RankSpec.comm
    candidates: int
    maximize: bool = False
    progress_topic: str = ""
    abort_event: str | None = None
    token: bytes = b""


@dataclass
class PointsRankResult:
    """The root's answer: the core's solution (:class:`dlap.points.core.CoreSolution`), its stats."""

    solution: object
    stats: dict
    window: tuple = ()  # when the task started and ended, time.time() on the root's worker


def run_points_rank(a, b, trees, spec: PointsRankSpec):
    """The long task of one rank (pinned to its worker, pure=False): join the communicator, then
    solve the core (the root) or answer the root's queries. ``trees``: the k-d trees of ``a`` and
    ``b`` as numbered (:func:`dlap.points.solve.spatial_order`'s), or None. Returns the root's
    :class:`PointsRankResult`, the others' timings, or :class:`~.engine.RankAborted`."""
    from distributed import get_worker

    entered = time.time()
    worker = get_worker()
    blocks = RankBlocks(spec, a, b, trees)
    xp = _comm_module(spec.comm)
    with joined(spec.solve_id, spec.rank, spec.size, spec.comm, spec.abort_event, spec.token, worker, xp) as comm:
        started = time.perf_counter()
        if spec.rank != 0:
            answer_queries(comm, xp, blocks)
            return {"rank": spec.rank, "seconds": time.perf_counter() - started, "communication": comm.seconds}
        solution, stats = solve_at_the_root(comm, xp, blocks, worker)
        return PointsRankResult(solution, stats, window=(entered, time.time()))
    return RankAborted(spec.rank)


def solve_at_the_root(comm, xp, blocks: RankBlocks, worker):
    """The root's part: :func:`~dlap.points.core.solve_core` on this worker's thread team, its
    searches over every pair through :class:`RootSearch`; its progress as worker events on the
    solve's topic (the client's bar, the dashboard's dlap page: rounds and violators). Between
    its auction's phases and its searches' passes it asks whether the solve was aborted (the
    watchdog aborts the communicator), so that an ended solve frees its worker then rather than
    at the next query. Returns the core's solution and the stats (as a dict)."""
    from ...points.core import solve_core
    from ...points.costs import PointCosts
    from ...points.solve import coarse_pairs
    from ...threads import solve_threads

    spec, a, b, trees = blocks.spec, blocks.a, blocks.b, blocks.trees
    costs = PointCosts(a, b, spec.metric, spec.exponent, "cpu")
    search = RootSearch(comm, xp, blocks, PairSearch(costs.kernels, a, b, costs.a_norms, costs.b_norms, spec.metric,
                                                     spec.exponent, spec.sign, trees))
    stats = Stats(device="cpu")
    counts = stats.phase_counts

    def live() -> dict:
        return {"rounds": counts.get("pricing_rounds", 0), "violators": counts.get("violators", 0),
                "phase_seconds": dict(stats.phase_seconds), "collectives": comm.calls, "bytes_sent": comm.bytes}

    report = progress_events(worker, 0, spec.progress_topic, live)
    coarse = coarse_pairs(a, b, spec.metric, spec.exponent, spec.maximize) if trees is not None else None
    with solve_threads(search.shape[0] * search.shape[1]) as threads:
        stats.threads = threads
        solution = solve_core(search, stats, spec.candidates, report, coarse=coarse, interrupt=comm.check)
    search.done()  # (not after a failure: the others may be inside a collective; the abort ends them)
    stats.phase_seconds["communication"] = comm.seconds
    counts["communication"] = comm.calls
    return solution, stats.as_dict()


def _comm_module(comm: tuple):
    """The array module of the messages of a communicator ``comm`` (a ``RankSpec.comm``): CuPy
    for NCCL, NumPy otherwise."""
    if comm[0] == "nccl":
        import cupy

        return cupy
    return np


class RankBlocks:
    """This rank's searches: its rows against every column, its columns against every row (made
    at the first query that needs each; ``trees``, those of ``a`` and ``b``, reused), on its GPU
    where the spec's device says so (:func:`dlap.device.device_for` by the block's pairs)."""

    def __init__(self, spec: PointsRankSpec, a, b, trees=None):
        self.spec, self.a, self.b, self.trees = spec, a, b, trees
        self.rows = spec.row_bounds[spec.rank], spec.row_bounds[spec.rank + 1]
        self.cols = spec.col_bounds[spec.rank], spec.col_bounds[spec.rank + 1]
        self._made = {}

    def search(self, side: int) -> PairSearch:
        """Side 0: the block of rows against every column; side 1: the block of columns against
        every row."""
        if side not in self._made:
            from ...points.costs import PointCosts

            spec = self.spec
            lo, hi = self.rows if side == 0 else self.cols
            mine, others = (self.a, self.b) if side == 0 else (self.b, self.a)
            mine = mine[lo:hi]
            others_tree = None if self.trees is None else self.trees[1 - side]
            on = device_for(spec.device, False, mine.shape[0] * others.shape[0]) if spec.device != "cpu" else "cpu"
            if on == "gpu":
                import cupy

                mine, others = cupy.asarray(mine), cupy.asarray(others)
            costs = PointCosts(mine, others, spec.metric, spec.exponent, on)
            self._made[side] = PairSearch(costs.kernels, costs.a, costs.b, costs.a_norms, costs.b_norms, spec.metric,
                                          spec.exponent, spec.sign, (None, others_tree))
        return self._made[side]

    def sizes(self, side: int, per: int = 1) -> list[int]:
        """Every rank's block length on ``side`` times ``per``, in rank order."""
        bounds = self.spec.row_bounds if side == 0 else self.spec.col_bounds
        return [(hi - lo) * per for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def answer(comm, xp, blocks: RankBlocks, header, u=None, v=None, rows=None):
    """Every rank's part of one query (the same calls on every rank, in the same order); on the
    root, the gathered answer: each row's (column's) nearest, or the pricing's counts and the
    violators kept, rank after rank (None on the others)."""
    root = comm.rank == 0
    kind, k = int(header[0]), int(header[1])
    if kind in (NEAREST_COLUMNS, NEAREST_ROWS):
        side = 0 if kind == NEAREST_COLUMNS else 1
        index, cost = blocks.search(side).nearest_columns(k)
        sizes = blocks.sizes(side, k)
        index, cost = (comm.gatherv(xp.asarray(x.ravel()), sizes) for x in (index, cost))
        return (to_host(index).reshape(-1, k), to_host(cost).reshape(-1, k)) if root else None
    n, m = blocks.a.shape[0], blocks.b.shape[0]
    u = to_host(comm.bcast(xp.asarray(u) if root else xp.empty(n), 0))
    v = to_host(comm.bcast(xp.asarray(v) if root else xp.empty(m), 0))
    lo, hi = blocks.rows
    part = None
    if header[4] >= 0:
        asked = to_host(comm.bcast(xp.asarray(rows) if root else xp.empty(int(header[4]), dtype=np.int64), 0))
        part = asked[(asked >= lo) & (asked < hi)] - lo
    index, reduced = np.empty((hi - lo, k), dtype=np.int64), np.empty((hi - lo, k))
    count = np.zeros(hi - lo, dtype=np.int64)
    if part is None or part.size:
        blocks.search(0).price(u[lo:hi], v, float(header[2]), float(header[3]), index, reduced, count, part)
    kept = listed(count, k)
    counts = comm.gatherv(xp.asarray(count), blocks.sizes(0))
    sizes = None
    if root:
        counts = to_host(counts)
        bounds = blocks.spec.row_bounds
        sizes = [int(np.minimum(counts[b_lo:b_hi], k).sum()) for b_lo, b_hi in zip(bounds[:-1], bounds[1:],
                                                                                    strict=True)]
    found, below = (comm.gatherv(xp.asarray(x[kept]), sizes) for x in (index, reduced))
    return (counts, to_host(found), to_host(below)) if root else None


def answer_queries(comm, xp, blocks: RankBlocks) -> None:
    """A rank other than the root: answer the root's queries until it says ``DONE``."""
    while True:
        header = to_host(comm.bcast_idle(xp.empty(HEADER), 0))
        if int(header[0]) == DONE:
            return
        answer(comm, xp, blocks, header)


class RootSearch:
    """The root's queries of :func:`dlap.points.core.solve_core` (see
    :class:`dlap.points.search.PairSearch`): those over every pair asked of every rank, the
    others (a few pairs) answered here by ``here``."""

    def __init__(self, comm, xp, blocks: RankBlocks, here: PairSearch):
        self.comm, self.xp, self.blocks, self.here = comm, xp, blocks, here
        self.shape = here.shape

    def _ask(self, kind: int, k: int, rtol: float = 0.0, atol: float = 0.0, rows=None):
        header = np.array([kind, k, rtol, atol, -1 if rows is None else rows.shape[0]], dtype=np.float64)
        self.comm.bcast(self.xp.asarray(header), 0)
        return header

    def _answer(self, header, *args):
        return answer(self.comm, self.xp, self.blocks, header, *args)

    def nearest_columns(self, k: int):
        """Each row's ``k`` cheapest columns and their costs."""
        return self._answer(self._ask(NEAREST_COLUMNS, k))

    def nearest_rows(self, k: int):
        """Each column's ``k`` cheapest rows and their costs."""
        return self._answer(self._ask(NEAREST_ROWS, k))

    def price(self, u, v, rtol: float, atol: float, index, reduced, count, rows=None) -> None:
        """:meth:`dlap.points.search.PairSearch.price` over every rank's block of rows."""
        k = index.shape[1]
        header = self._ask(PRICE, k, rtol, atol, rows)
        counts, found, below = self._answer(header, u, v, rows)
        kept = listed(counts, k)
        count[:] = counts
        index[kept], reduced[kept] = found, below

    def pair_costs(self, rows, cols):
        return self.here.pair_costs(rows, cols)

    def nearest_among(self, rows, columns, k: int):
        return self.here.nearest_among(rows, columns, k)

    def done(self) -> None:
        """Tell the other ranks that the queries are over."""
        self._ask(DONE, 0)
