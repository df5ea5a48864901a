"""The sparse-core engine: an exact assignment of two point sets without the n x m matrix.

Lee & Orlin's sparse core with pricing, as in column generation:

1. **candidates**: each row's ``k`` cheapest columns and each column's ``k`` cheapest rows (their
   nearest points in the metric: :mod:`dlap.points.search`), and for point sets the columns
   their cells' coarse assignment sends them to (:mod:`dlap.points.coarse`);
2. **core solve**: prices from Bertsekas' ε-scaling auction on that sparse graph (forward, and on a
   rectangular one reverse too; where the coarse problem says so, stopped at a coarse ε for a
   pricing pass whose violators join the core before the fine phases), then its exact assignment
   by shortest augmenting paths from them (Jonker & Volgenant's augmenting row reduction, then
   Dijkstra as in Crouse's rectangular algorithm, with implicit rows for the columns left over);
   where the auction or a search finds rows the core gives fewer columns than themselves, they
   get edges to their nearest free columns, and the solve goes on;
3. **pricing**: every one of the n x m pairs' reduced cost ``c_ij - u_i - v_j`` against the core's
   duals (each row's most violated ones; after the first pass only the rows whose duals moved so
   that a pair of theirs can have become violated: :class:`PricedDuals`); pairs below zero join
   the core, which is solved again warm: by the auction where many rows have new edges, else by
   letting the rows whose pairs the new edges undercut go and searching for them again;
4. stop when pricing finds none: the duals are then feasible for every pair and the assignment is
   optimal for the whole matrix. :func:`dlap.certificate.certify` proves it again, block by block
   (where the objective is near 0 beside larger duals, the duals nearest 0 are priced once more
   first, so that their rounding stays within the certificate's tolerance).

The rows are the shorter side (a tall problem is solved transposed), so every row is assigned and
the columns' duals stay at most 0, and 0 where unassigned (a rectangular matrix's dual).
"""

from __future__ import annotations

import math

import numpy as np

from ..certificate import RTOL as CERTIFICATE_RTOL
from ..problem import InfeasibleError
from ..progress import Progress
from ..result import Stats
from ..timing import PhaseTimer
from .coarse import beyond_reach
from .metrics import METRIC_IDS
from .search import listed

#: each row's candidates to start from, and the most violators of a row one pricing pass adds
DEFAULT_CANDIDATES = 32
#: point sets of more than 10^4 rows start from this many more candidates for each tenfold more
#: rows, up to MOST_CANDIDATES (:func:`candidates_for`: the optimum's edges between uniform points
#: reach further among the neighbours the more points there are: docs/benchmarks.md, "Point sets")
CANDIDATES_PER_DECADE = 16
MOST_CANDIDATES = 48
#: pricing's tolerance: a pair is a violator when its reduced cost is below -PRICING_RTOL times
#: the magnitudes it is computed from, the largest duals' included (the duals were computed from
#: them: a pair of cost 0 between duals of 1e-17 is their rounding, not a violation)
PRICING_RTOL = 1e-12
#: a pricing pass prices every row where more than this share of them may have new violators
#: (:class:`PricedDuals`)
PRICE_EVERY_ROW_SHARE = 0.5
#: bids of the augmenting row reduction per free row before the shortest paths take over
ARR_STEPS_PER_ROW = 8
#: a square core's prices all sunk below this many spreads of its costs after an auction are
#: raised together until the highest is 0 (the rows' duals fall as much): every bid lowers a
#: price, and over many warm auctions (few candidates, tens of pricing rounds) they sank until
#: float64 lost the costs beside them (issue 36)
SUNK_PRICES = 1.0
#: the auction's first and last ε, as shares of the spread of the core's costs, and the factor between
#: phases (uniform points: the bids hardly change from 0.05 to 1, 1e-4 to 1e-6, 4 to 10)
AUCTION_FIRST_EPS = 0.25
AUCTION_LAST_EPS = 1e-6
AUCTION_EPS_FACTOR = 6.0
#: a rectangular core whose first auction leaves more than ``PLATEAU_SHARE`` of its assigned
#: columns priced within ``PLATEAU_WIDTH`` times its last ε of the top (the unassigned columns'
#: price) is on a plateau, where a search through the implicit rows settles every such column
#: nearer than the free column it ends at: its later auctions end at ``PLATEAU_LAST_EPS``
#: (docs/benchmarks.md, "The plateau at the top price")
PLATEAU_SHARE = 0.01
PLATEAU_WIDTH = 10.0
PLATEAU_LAST_EPS = 1e-7
#: where the coarse problem says to price early (:class:`dlap.points.coarse.Transport`), the first
#: auction stops at this share of the costs' spread for a pricing pass, and goes on from it with
#: the violators in the core (uniform Euclidean points on 2 cores: n = 10^6 119 -> 102 s, 443 ->
#: 321 million bids; n = 10^5 28.6 -> 18.9 million bids: docs/benchmarks.md, "Pricing early")
EARLY_PRICING_EPS = 1e-4
#: bids a row in a phase after which the auction asks whether its next free row can be matched at
#: all (and again after as many more): a core that matches not every row shows as a price war
AUCTION_CHECK_BIDS_PER_ROW = 20
#: a phase with more bids per row than this gives up (a guard)
AUCTION_BIDS_PER_ROW = 1000
#: after pricing, the core is solved again by the auction where more than this share of the rows
#: have new edges, else by letting the rows they undercut go
WARM_AUCTION_SHARE = 0.05
#: a repair after pricing gives way to the auction once its searches have reached a column for
#: every this many bids of the latest auction (about what a column reached cost beside a bid
#: before the searches' heap lowered keys in place; 3, about their ratio since, was slower:
#: docs/benchmarks.md, "Point sets")
SEARCH_COLUMN_BIDS = 8
#: a search that reaches no free column gives each row it reached edges to this many nearest free
#: columns (one makes its root matchable; as many as the rows reached grew the core by their
#: square each time: docs/benchmarks.md, "Point sets")
FREE_COLUMN_EDGES = 8
#: the most pricing rounds before the engine gives up (a bound the tests never reach)
MAX_ROUNDS = 1000
#: where the candidates' and the first core solve's parts of a progress bar end; the pricing
#: rounds share the rest, each half of what is left (uniform 2-D points, n = 50000, CPU: 12%,
#: 24%, then rounds of 27%, 22%, 7%, ...: dlap bench --suite progress)
PROGRESS_SHARES = (0.15, 0.4)


def candidates_for(n_rows: int) -> int:
    """Each row's candidates for a point set of ``n_rows`` rows: ``DEFAULT_CANDIDATES`` up to
    10^4 rows, then ``CANDIDATES_PER_DECADE`` more for each tenfold, at most ``MOST_CANDIDATES``."""
    grown = DEFAULT_CANDIDATES + CANDIDATES_PER_DECADE * math.log10(max(n_rows, 1) / 1e4)
    return int(min(MOST_CANDIDATES, max(DEFAULT_CANDIDATES, round(grown))))


class SparseCore:
    """The core's edges as a CSR: each row's columns ascending and unique, with their costs."""

    def __init__(self, n_rows: int, n_cols: int):
        self.n_rows, self.n_cols = n_rows, n_cols
        self.indptr = np.zeros(n_rows + 1, dtype=np.int64)
        self.indices = np.empty(0, dtype=self.index_dtype)
        self.costs = np.empty(0)
        self._csc = None

    def add(self, rows, cols, costs) -> int:
        """Add the edges not in the core yet (those with a row or column -1: none); returns how
        many were new."""
        from ..backends.cpu import points as core_kernels

        *csr, added = core_kernels.merge_edges(self.indptr, self.indices, self.costs, rows, cols,
                                               np.asarray(costs, dtype=np.float64))
        if added:
            self.indptr, self.indices, self.costs = csr
            self._csc = None
        return int(added)

    def fill(self, index, costs) -> None:
        """The empty core's first edges: row i's to the columns ``index[i]`` (-1: none), costs ``costs[i]``."""
        from ..backends.cpu import points as core_kernels

        self.indptr, self.indices, self.costs = core_kernels.rows_to_csr(index, np.asarray(costs, dtype=np.float64),
                                                                         self.index_dtype)
        self._csc = None

    def csr(self):
        return self.indptr, self.indices, self.costs

    def csc(self):
        """The edges by column (rows ascending in each): ``indptr``, row indices, costs."""
        if self._csc is None:
            from ..backends.cpu import points as core_kernels

            self._csc = core_kernels.by_column(*self.csr(), self.n_cols)
        return self._csc

    @property
    def index_dtype(self):
        """The CSR's and CSC's vertex indices: 32-bit where they fit (fewer bytes for each bid's scan)."""
        return np.int32 if max(self.n_rows, self.n_cols) <= np.iinfo(np.int32).max else np.int64

    @property
    def size(self) -> int:
        return int(self.indices.shape[0])


class CoreSolution:
    """The core's duals and matching (minimisation form); ``whole``: the costs are whole numbers
    and so are the duals (float64, exact), as dlap gives and certifies an integer matrix's."""

    def __init__(self, n_rows: int, n_cols: int, whole: bool = False):
        self.whole = whole
        self.u = np.zeros(n_rows)
        self.v = np.zeros(n_cols)
        self.col4row = np.full(n_rows, -1, dtype=np.int64)
        self.row4col = np.full(n_cols, -1, dtype=np.int64)

    def start(self, core: SparseCore) -> None:
        """Cold start: ``v = 0``, each row's dual its cheapest core edge, and a greedy matching of
        the rows' cheapest edges (all tight)."""
        from ..backends.cpu import points as core_kernels

        self.v[:] = 0.0
        self.col4row[:] = -1
        self.row4col[:] = -1
        indptr, indices, costs = core.csr()
        core_kernels.row_duals(indptr, indices, costs, self.v, self.u)
        core_kernels.match_cheapest(indptr, indices, costs, self.u, self.col4row, self.row4col)

    def copy(self) -> CoreSolution:
        """A copy to go back to (:meth:`take`)."""
        other = CoreSolution(0, 0, self.whole)
        other.u, other.v, other.col4row, other.row4col = (x.copy() for x in (self.u, self.v, self.col4row,
                                                                            self.row4col))
        return other

    def take(self, other: CoreSolution) -> None:
        """Become ``other`` (a :meth:`copy`)."""
        self.u, self.v, self.col4row, self.row4col = other.u, other.v, other.col4row, other.row4col

    def repair(self, rows, cols, costs, square: bool = True) -> int:
        """Warm start after new edges: the duals are lowered until the new edges are feasible too,
        and the rows whose matched pair is no longer tight are let go (returned: how many). Each
        violated pair lowers its column's dual where more violated pairs share the column than the
        row (one row let go covers them all), else its row's; on a rectangular core always its
        row's for an unmatched column, which stays at 0 (the implicit rows of
        :func:`dlap.backends.cpu.points.augment_rows` hold it there)."""
        violated = costs - self.u[rows] - self.v[cols] < 0
        rows, cols, costs = rows[violated], cols[violated], costs[violated]
        by_column = np.bincount(cols, minlength=self.v.shape[0])[cols] > np.bincount(rows, minlength=self.u.shape[0])[rows]
        if not square:
            by_column &= self.row4col[cols] >= 0
        lowest = np.full(self.v.shape[0], np.inf)
        np.minimum.at(lowest, cols[by_column], costs[by_column] - self.u[rows[by_column]])
        columns = np.flatnonzero(lowest < self.v)
        self.v[columns] = lowest[columns]
        let_go = self.row4col[columns]
        still = costs - self.u[rows] - self.v[cols] < 0
        lowest = np.full(self.u.shape[0], np.inf)
        np.minimum.at(lowest, rows[still], costs[still] - self.v[cols[still]])
        lowered = np.flatnonzero(lowest < self.u)
        self.u[lowered] = lowest[lowered]
        let_go = np.unique(np.concatenate((let_go[let_go >= 0], lowered)))
        let_go = let_go[self.col4row[let_go] >= 0]
        self.row4col[self.col4row[let_go]] = -1
        self.col4row[let_go] = -1
        return int(let_go.shape[0])


def solve_core(search, stats: Stats, candidates: int = DEFAULT_CANDIDATES, progress=None,
               whole: bool = False, coarse=None, interrupt=None) -> CoreSolution:
    """The exact assignment of every row (n <= m) to the columns of the costs ``search`` answers
    for (:class:`dlap.points.search.PairSearch`: ``shape``, ``nearest_columns``, ``nearest_rows``,
    ``price``, ``pair_costs``, ``nearest_among``); see the module docstring. ``progress``
    hears of each stage (:data:`PROGRESS_SHARES`). ``whole``: the costs are whole numbers (of
    at most 2**51 in magnitude), and the duals are kept whole: the auction's prices are rounded
    down before the exact solve, whose shortest paths keep them whole. ``coarse``: a callable
    giving the coarse problem's :class:`dlap.points.coarse.Transport`: more pairs (rows, columns)
    for the first core, and whether to price once at ``EARLY_PRICING_EPS`` of the first auction.
    ``interrupt``: called between the auction's phases and between the searches' passes, where
    the core solve works alone for long; it raises to end the solve (a Dask solve's root: the
    solve was aborted)."""
    from ..backends.cpu import points as core_kernels

    n, m = search.shape
    square = n == m
    k = max(1, min(candidates, m))
    core, solution = SparseCore(n, m), CoreSolution(n, m, whole)
    counts, _timed = stats.phase_counts, PhaseTimer(stats)

    report = Progress(progress, n)
    candidates_end, core_end = PROGRESS_SHARES
    report.stage("candidates", 0.0, candidates_end, n)
    with _timed("candidates"):
        nearest = search.nearest_columns(k)
        core.fill(*nearest)
        k_rows = max(1, min(k, n))
        back_index, back_cost = search.nearest_rows(k_rows)
        core.add(back_index.ravel(), np.repeat(np.arange(m, dtype=np.int64), k_rows), back_cost.ravel())
        transport = coarse() if coarse is not None else None
        if transport is not None and transport.pairs is not None:
            rows, cols = transport.pairs
            costs = search.pair_costs(rows, cols)
            far = beyond_reach(rows, costs, nearest[1][:, -1])
            counts["coarse_edges"] = core.add(rows[far], cols[far], costs[far])
    early = transport is not None and transport.price_early
    violators = np.empty((n, k), dtype=np.int64), np.empty((n, k)), np.empty(n, dtype=np.int64)
    report.stage("core solve", candidates_end, core_end, n)
    with _timed("core_solve"):
        solution.start(core)
        last = EARLY_PRICING_EPS if early else None
        while (short := _auction(core, solution, square, counts, last_share=last,
                                 interrupt=interrupt)) is not None and short.size:
            _make_matchable(search, core, solution, counts, short)  # the nearest neighbours match not every row
            solution.start(core)
        finer = None
        if not square and _on_a_plateau(core, solution, PLATEAU_WIDTH * (last or AUCTION_LAST_EPS)):
            finer = PLATEAU_LAST_EPS
            counts["plateau"] = 1
    if early:
        with _timed("pricing"):
            counts["early_violators"], *pairs = _price(search, core, solution, violators)
        with _timed("core_solve"):
            if _auction(core, solution, square, counts, first_share=EARLY_PRICING_EPS, last_share=finer,
                        matchable=short is None, interrupt=interrupt) is not None:
                _restart(core, solution, square, counts, *pairs)  # (its guard stopped it: repaired instead)
    with _timed("core_solve"):
        _assign_all(search, core, solution, square, counts, interrupt=interrupt)
    auction_bids = counts.get("auction_bids", 0)
    polished = False
    priced = PricedDuals()
    for round_ in range(1, MAX_ROUNDS + 1):
        # each round half as long as the one before, in the rest of the bar
        report.stage(f"pricing round {round_}", 1 - (1 - core_end) / 2 ** (round_ - 1),
                     1 - (1 - core_end) / 2**round_, 0)
        with _timed("pricing"):
            found, rows, cols, costs = _price(search, core, solution, violators, priced, counts)
            counts["violators"] = counts.get("violators", 0) + found
        counts["pricing_rounds"] = round_
        if not found:
            if polished or solution.whole or not _rounding_outweighs_objective(solution):
                break
            with _timed("core_solve"):  # and pricing again, for the new duals
                core_kernels.largest_duals(*core.csr(), solution.u, solution.v, solution.col4row, solution.row4col)
            polished = True
            counts["largest_duals"] = counts.get("largest_duals", 0) + 1
            continue
        with _timed("core_solve"):
            auction_bids = _resume(search, core, solution, square, counts, rows, cols, costs, auction_bids, finer,
                                   interrupt)
        polished = False
    else:
        raise RuntimeError(f"dlap internal error: the sparse core did not settle in {MAX_ROUNDS} pricing rounds")
    counts["core_edges"] = core.size
    counts["candidates"] = k
    report(0, final=True)
    return solution


class PricedDuals:
    """The duals and tolerance of the last pricing pass, and the rows it found violators of: which
    rows a pass must price again. A pair's reduced cost ``c - u_i - v_j`` and its tolerance are
    computed by operations each monotone in the duals, so where ``u_i`` is the same, every ``v_j``
    at most what it was and no nearer 0, and the tolerance no smaller, a pair the last pass did
    not find violated is not violated now: only rows whose dual changed, or that had violators
    (now core edges, solved since), are priced again; the others' pairs stay proven by the pass
    that priced them last, and the first pass prices every row."""

    def __init__(self):
        self.u = self.v = self.violated = None
        self.tolerance = (0.0, 0.0)

    def rows(self, u, v, rtol: float, atol: float):
        """The rows a pass with duals ``u``, ``v`` and tolerance ``rtol``, ``atol`` must price
        (ascending), or None: every row (also where more than ``PRICE_EVERY_ROW_SHARE`` of them
        must: a pass over some rows copies their points)."""
        if self.u is None or self.u.shape != u.shape or self.v.shape != v.shape:
            return None
        last_rtol, last_atol = self.tolerance
        if rtol != last_rtol or atol < last_atol or not np.all((v <= self.v) & (np.abs(v) >= np.abs(self.v))):
            return None
        rows = np.flatnonzero((u != self.u) | self.violated)
        return None if rows.shape[0] > PRICE_EVERY_ROW_SHARE * u.shape[0] else rows

    def record(self, u, v, rtol: float, atol: float, count) -> None:
        """The pass just made: its duals, tolerance and the rows with violators."""
        self.u, self.v, self.violated = u.copy(), v.copy(), count > 0
        self.tolerance = (rtol, atol)


def _price(search, core, solution, violators, priced: PricedDuals | None = None, counts=None):
    """A pricing pass against the solution's duals: each row's most violated pairs (at most as
    many as ``violators``' buffers hold) join the core; only the rows ``priced`` says may have new
    violators (:class:`PricedDuals`; every row where None), their number added to
    ``counts["rows_priced"]``. Returns how many pairs were violated, and the pairs that joined
    (rows, columns, costs)."""
    index, reduced, count = violators
    rtol, atol = _pricing_tolerance(solution)
    to_price = priced.rows(solution.u, solution.v, rtol, atol) if priced is not None else None
    search.price(solution.u, solution.v, rtol, atol, index, reduced, count, to_price)
    if priced is not None:
        priced.record(solution.u, solution.v, rtol, atol, count)
    if counts is not None:
        counts["rows_priced"] = counts.get("rows_priced", 0) + (count.shape[0] if to_price is None
                                                                 else to_price.shape[0])
    k = index.shape[1]
    rows = np.repeat(np.arange(index.shape[0], dtype=np.int64), np.minimum(count, k))
    cols = index[listed(count, k)]
    costs = search.pair_costs(rows, cols)
    core.add(rows, cols, costs)  # violators already in the core are solved again all the same
    return int(count.sum()), rows, cols, costs


def _auction(core, solution, square: bool, counts, first_eps: float | None = None, first_share: float | None = None,
             last_share: float | None = None, matchable: bool = False, interrupt=None) -> np.ndarray | None:
    """Prices from Bertsekas' ε-scaling auction on the core (forward and, on a rectangular matrix,
    reverse), from the solution's prices and matching, ε from ``first_eps`` (else ``first_share``
    of the costs' spread, default ``AUCTION_FIRST_EPS``) down to ``last_share`` of it (default
    ``AUCTION_LAST_EPS``); the rows not tight under them are let go for the exact solve (returns
    None). Where the auction finds no perfect matching of the core, it returns rows the core gives
    fewer columns than themselves, the solution's matching then the auction's (for
    :func:`_make_matchable` to go on from); where its guard stopped it, none, the solution as it was.
    ``matchable``: the core is known to match every row (an auction matched fewer of its edges).
    ``interrupt``: called before each phase (:func:`solve_core`)."""
    from ..backends.cpu import points as core_kernels

    indptr, indices, costs = core.csr()
    span = _spread(costs)
    if span == 0.0:
        return None
    last = (AUCTION_LAST_EPS if last_share is None else last_share) * span
    if first_eps is None:
        first = (AUCTION_FIRST_EPS if first_share is None else first_share) * span
    else:
        first = max(first_eps, last)
    counters, reached = np.zeros(3, dtype=np.int64), np.empty(core.n_rows, dtype=np.int64)
    v, col4row, row4col = solution.v.copy(), solution.col4row.copy(), solution.row4col.copy()
    by_column = _NO_COLUMNS if square else core.csc()
    settled = core_kernels.scaled_auction(indptr, indices, costs, *by_column, v, col4row, row4col, first, last,
                                          AUCTION_EPS_FACTOR, span, AUCTION_CHECK_BIDS_PER_ROW * core.n_rows,
                                          AUCTION_BIDS_PER_ROW * core.n_rows, reached, counters, matchable,
                                          interrupt)
    counts["auction_bids"] = counts.get("auction_bids", 0) + int(counters[0])
    counts["auction_phases"] = counts.get("auction_phases", 0) + int(counters[1])
    if not settled:
        if counters[2]:
            solution.col4row[:], solution.row4col[:] = col4row, row4col
        return reached[: counters[2]]
    if solution.whole:
        np.floor(v, out=v)  # still at most 0, and 0 where a column is unassigned
    if square and v.size and (highest := v.max()) < -SUNK_PRICES * span:
        v -= highest  # a square core's duals keep their sums when shifted: kept near the costs' magnitude
    if not square:
        core_kernels.tighten_by_column_duals(indptr, indices, costs, *by_column, v, col4row, 0.0)
    core_kernels.release_loose_rows(indptr, indices, costs, v, col4row, row4col, 0.0)
    solution.v[:], solution.col4row[:], solution.row4col[:] = v, col4row, row4col
    core_kernels.row_duals(indptr, indices, costs, solution.v, solution.u)
    return None


def _spread(costs) -> float:
    """The spread of the core's costs (0 where it has none), the unit of the auction's ε;
    RuntimeError where it is not finite (an auction at ε NaN or inf never settles: points whose
    values overflowed looped forever before :func:`dlap.points.metrics.check_range` refused them)."""
    spread = float(costs.max() - costs.min()) if costs.size else 0.0
    if not math.isfinite(spread):
        raise RuntimeError(f"dlap internal error: the sparse core's costs span {spread} (a cost is not finite)")
    return spread


def _on_a_plateau(core, solution, width: float) -> bool:
    """Whether more than ``PLATEAU_SHARE`` of the assigned columns are priced within ``width`` (a
    share of the core's spread of costs) of the highest price (:data:`PLATEAU_SHARE`)."""
    v, assigned = solution.v, solution.row4col >= 0
    near = v >= v.max() - width * _spread(core.csr()[2])
    return bool(np.count_nonzero(assigned & near) > PLATEAU_SHARE * np.count_nonzero(assigned))


#: a square core's auction needs no edges by column
_NO_COLUMNS = (np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0))


def _pricing_tolerance(solution) -> tuple[float, float]:
    """Pricing's ``rtol`` and ``atol`` (:data:`PRICING_RTOL`); for whole numbers none: their
    reduced costs are exact, and a violation is at least 1."""
    if solution.whole:
        return 0.0, 0.5
    return PRICING_RTOL, PRICING_RTOL * (_largest_magnitude(solution.u) + _largest_magnitude(solution.v))


def _rounding_outweighs_objective(solution) -> bool:
    """Whether the duals' rounding (an ulp of the largest of them, a row) could exceed the
    certificate's tolerance of the objective: an objective near 0 beside duals far from it, as
    where most rows have a copy of their point among the columns. The duals nearest 0 are then
    taken instead (:func:`dlap.backends.cpu.points.largest_duals`)."""
    matched = math.fsum(np.abs(solution.u + solution.v[solution.col4row]).tolist())
    rounding = solution.u.shape[0] * np.finfo(np.float64).eps * (_largest_magnitude(solution.u)
                                                                  + _largest_magnitude(solution.v))
    return rounding > CERTIFICATE_RTOL * matched


def _largest_magnitude(x) -> float:
    return float(np.abs(x).max()) if x.size else 0.0


def _resume(search, core, solution, square, counts, rows, cols, costs, auction_bids: int,
            last_share: float | None = None, interrupt=None) -> int:
    """Solve the core grown by the pairs ``rows``, ``cols`` (costs ``costs``), warm: where few rows
    have new pairs, by letting go the rows the new pairs undercut and searching for them again,
    unless the searches cost more than an auction (``auction_bids``, the latest one's bids:
    :data:`SEARCH_COLUMN_BIDS`); else, or then, by the auction from the prices, from ε = the
    pairs' largest violation down to ``last_share`` of the spread (default ``AUCTION_LAST_EPS``;
    where it gives up, keeping the solution it started from, by letting the rows go). Returns
    the latest auction's bids."""
    if np.unique(rows).shape[0] <= WARM_AUCTION_SHARE * core.n_rows:
        saved = solution.copy()
        _restart(core, solution, square, counts, rows, cols, costs)
        if _assign_all(search, core, solution, square, counts, auction_bids // SEARCH_COLUMN_BIDS, interrupt):
            return auction_bids
        solution.take(saved)
        counts["repairs_abandoned"] = counts.get("repairs_abandoned", 0) + 1
    before = counts.get("auction_bids", 0)
    if _auction(core, solution, square, counts, _largest_violation(solution, rows, cols, costs), last_share=last_share,
                matchable=True, interrupt=interrupt) is not None:
        _restart(core, solution, square, counts, rows, cols, costs)
    _assign_all(search, core, solution, square, counts, interrupt=interrupt)
    return counts.get("auction_bids", 0) - before or auction_bids


def _largest_violation(solution, rows, cols, costs) -> float:
    """The most any of the pairs ``rows``, ``cols`` (costs ``costs``) is below its duals' sum (0: none is)."""
    return max(float((solution.u[rows] + solution.v[cols] - costs).max()), 0.0) if costs.size else 0.0


def _restart(core, solution, square, counts, rows, cols, costs) -> None:
    """The solution repaired for the new pairs (the rows they undercut let go)."""
    counts["rows_let_go"] = counts.get("rows_let_go", 0) + solution.repair(rows, cols, costs, square)


def _assign_all(search, core, solution, square, counts, budget: int | None = None, interrupt=None) -> bool:
    """Augment every free row; where a search finds no free column, join the rows it reached to
    their nearest free columns and go on. The core is solved on the host, whichever device
    computes the costs. Returns False where the searches passed ``budget`` columns reached (the
    rows not searched yet are left free). ``interrupt``: called before each pass (:func:`solve_core`)."""
    from ..backends.cpu import points as core_kernels

    counters = np.zeros(3, dtype=np.int64)
    scanned = np.empty(core.n_rows, dtype=np.int64)
    budget = np.iinfo(np.int64).max if budget is None else budget
    stuck = -1
    while True:
        if interrupt is not None:
            interrupt()
        free = np.flatnonzero(solution.col4row < 0)
        if not free.size:
            break
        indptr, indices, costs = core.csr()
        core_kernels.reduce_free_rows(indptr, indices, costs, solution.u, solution.v, solution.col4row,
                                      solution.row4col, free, ARR_STEPS_PER_ROW * free.shape[0])
        free = np.flatnonzero(solution.col4row < 0)
        stuck = core_kernels.augment_free_rows(indptr, indices, costs, solution.u, solution.v, solution.col4row,
                                          solution.row4col, free, scanned, counters, budget)
        if stuck < 0:
            break
        rows, cols, new_costs = _to_free_columns(search, core, scanned[: counters[2]], solution.row4col)
        core.add(rows, cols, new_costs)
        counts["dead_ends"] = counts.get("dead_ends", 0) + 1
        _restart(core, solution, square, counts, rows, cols, new_costs)
    counts["searches"] = counts.get("searches", 0) + int(counters[0])
    counts["columns_reached"] = counts.get("columns_reached", 0) + int(counters[1])
    return stuck != core_kernels.OVER_BUDGET


def _make_matchable(search, core, solution, counts, short) -> None:
    """Grow the core until it matches every row, ignoring costs, from the matching of an auction
    that found the rows ``short`` unmatchable: edges from them to their nearest free columns, then
    a search for a free column from each row still free, and where one finds none, edges from the
    rows it reached (:func:`_to_free_columns`). The edges wait in lists (:class:`NewEdges`) that
    the searches read beside the core, and join it together at the end."""
    from ..backends.cpu import points as core_kernels

    counters, scanned = np.zeros(3, dtype=np.int64), np.empty(core.n_rows, dtype=np.int64)
    rows = np.flatnonzero(solution.col4row < 0)
    new = NewEdges(core.n_rows)
    indptr, indices, _ = core.csr()
    while short is not None:
        new.add(*_to_free_columns(search, core, short, solution.row4col, new))
        counts["unmatchable"] = counts.get("unmatchable", 0) + 1
        stuck = core_kernels.match_rows(indptr, indices, solution.col4row, solution.row4col, rows, scanned, counters,
                                        new.first, new.next, new.cols)
        short = scanned[: counters[2]] if stuck >= 0 else None
        rows = rows[max(stuck, 0) :]
    core.add(*new.edges())


class NewEdges:
    """Edges for the core, kept as a list a row (``first[i]``: row ``i``'s latest edge, -1 for
    none; ``next[e]``: the row's edge before ``e``; ``cols[e]``: its column) until they join it."""

    def __init__(self, n_rows: int):
        self.first = np.full(n_rows, -1, dtype=np.int64)
        self.next = self.cols = np.empty(0, dtype=np.int64)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, rows, cols, costs) -> None:
        if not rows.size:
            return
        order = np.argsort(rows, kind="stable")
        by_row, at = rows[order], self.cols.shape[0] + order  # the new edges by row, and their numbers
        last = np.append(by_row[1:] != by_row[:-1], True)  # a row's last new edge links to its old list
        first = np.append(True, last[:-1])  # and its first new edge heads the list now
        follows = np.append(at[1:], -1)
        follows[last] = self.first[by_row[last]]
        self.next = np.concatenate((self.next, np.empty(rows.shape[0], dtype=np.int64)))
        self.next[at] = follows
        self.first[by_row[first]] = at[first]
        self.cols = np.concatenate((self.cols, cols.astype(np.int64)))
        self.parts.append((rows, cols, costs))

    def columns_of(self, rows) -> np.ndarray:
        """The columns of the edges of ``rows``."""
        if not self.parts:
            return np.empty(0, dtype=np.int64)
        all_rows, all_cols, _ = self.edges()
        return all_cols[np.isin(all_rows, rows)]

    def edges(self):
        """Every edge (rows, columns, costs), in the order added."""
        if not self.parts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0)
        return tuple(np.concatenate(x) for x in zip(*self.parts, strict=True))


def _to_free_columns(search, core, rows, row4col, new: NewEdges | None = None):
    """Edges from ``rows`` (those a search reached without finding a free column: the core gives
    them fewer columns than rows) to their ``FREE_COLUMN_EDGES`` nearest free columns; where a
    matrix forbids every such pair, to their nearest columns the search did not reach (through
    the core's edges and ``new``'s). Where there are none either, the rows have fewer allowed
    columns than themselves (Hall's condition): :class:`InfeasibleError`."""
    for columns in (np.flatnonzero(row4col < 0), None):
        if columns is None:
            indptr, indices, _ = core.csr()
            reached = np.concatenate([indices[indptr[r] : indptr[r + 1]] for r in rows.tolist()]
                                     + ([new.columns_of(rows)] if new is not None else []))
            columns = np.setdiff1d(np.arange(core.n_cols), reached)
        if not columns.size:
            continue
        found = search.nearest_among(rows, columns, min(columns.shape[0], FREE_COLUMN_EDGES))
        allowed = found[1] >= 0  # a matrix's forbidden entries are no edges
        if allowed.any():
            return tuple(x[allowed] for x in found)
    raise InfeasibleError()


def objective(kernels, a, b, a_norms, b_norms, metric: str, p: float, rows, cols) -> float:
    """The assignment's total cost: the metric's values summed correctly rounded."""
    out = np.empty(rows.shape[0])
    if out.size:
        kernels.pair_costs(a, b, a_norms, b_norms, METRIC_IDS[metric], p, 1.0, rows, cols, out)
    return math.fsum(out.tolist())
