"""The Backend primitives over a Dask cluster: one rank's slab of the matrix and a communicator.

The drivers of :mod:`dlap.hungarian` (``initialise``, ``run_classical``, ``run_tree``,
``run_hybrid``, ``solve_auto``, ``solve_scaling``) run on every rank unchanged, against
:class:`DistributedBackend`: the state they are given is the rank's replica of the O(n) search
state (assignment, duals, forest; ``allocate_graph``, the same on every rank), and each
primitive that needs the matrix runs the local backend's kernel on the rank's slab and combines
the ranks' parts with one collective (Date & Nagi 2016, section 5):

- rows split (classical variant, step 4a): the initial reduction's row minima are gathered and its
  column minima reduced; the zero-slack edges of each rank's rows are compressed and gathered into
  the global CSR (section 3.3); the dual update's stage 1 (Algorithm 7) runs over each rank's
  forest rows and theta is all-reduced (the hybrid runs the same phases on column slabs: each
  row's edges merged from every rank, theta over every forest row and each rank's columns);
- columns split (tree variant, step 4b): row minima reduced, column minima gathered; the forward
  pass (Algorithm 4 with Algorithm 9 folded in) scans the frontier rows over each rank's columns,
  and one all-gather of each rank's smallest slack and candidate columns gives every rank the
  dual level and the next frontier: all columns tight at the level join at once (a wave), so a
  search takes one step per (level, BFS depth) pair;
- JV initialisation (either split): column minima gathered or reduced, the reduction transfer and
  the augmenting row reduction's rounds of bids from per-row terms combined over the ranks;
- the graph phases (optimality check, BFS forward pass on the CSR, reverse pass, augmentation,
  the dual shifts) are the local backend's own, on the replica. The root's augmentation is
  broadcast (section 5: the root augments and broadcasts): on a GPU the paths kept are decided by
  races, so replicas left to themselves would drift apart and issue different collectives.

The drivers' loops exist once, in :mod:`dlap.hungarian`; this module has none of its own.
"""

from __future__ import annotations

import numpy as np

from ...backends.base import ARR_MAX_ROUNDS, ARR_MIN_PROGRESS, Backend, bidding_loop, install_assignment
from .comm import to_host
from .scaling import DistributedScaling

#: the axis of the (solved, rows <= cols) matrix each variant splits over the ranks
#: (the hybrid runs the classical variant on column slabs, then the tree; ε-scaling searches
#: over column slabs; "auto" runs on one rank, whose slab is the whole matrix, or split as its
#: variant: dlap.distributed.solve)
SPLIT_AXIS = {"auto": 1, "classical": 0, "hybrid": 1, "scaling": 1, "tree": 1}
#: a tree wave's exchange carries this many of each rank's offered columns in its one
#: all-gather; a wave where a rank offers more sends the rest in a second
WAVE_CAPACITY = 256


class DistributedBackend(DistributedScaling, Backend):
    """The primitives the drivers of :mod:`dlap.hungarian` call, for one rank (the ε-scaling
    engine's are in :mod:`.scaling`).

    ``local`` is the device's backend (CPU or GPU), ``slab`` its state of this rank's slab
    (rows ``[lo, hi)`` for the classical variant, columns for the tree), ``comm`` the ranks'
    communicator; the replica passed to every primitive as ``state`` is the same on every rank
    after every primitive."""

    def __init__(self, local, slab, comm, method: str, bounds: tuple[int, ...], rank: int, xp):
        self.local, self.slab, self.comm, self.xp = local, slab, comm, xp
        self.device = local.device
        self.split = SPLIT_AXIS[method]
        self.bounds, self.rank = bounds, rank
        self.lo, self.hi = bounds[rank], bounds[rank + 1]
        self.bounds_array = xp.asarray(np.asarray(bounds, dtype=np.int64))  # on the device, once
        self.level = 0.0  # the dual level the last tree forward pass reached
        self._waves = None  # the tree waves' buffers (_wave_buffers)
        self.tallies = dict.fromkeys(
            ("dual_updates", "searches", "rows_scanned", "waves", "zero_slack_edges"), 0)

    # ------------------------------------------------------------------ shared

    def synchronize(self, state) -> None:
        self.local.synchronize(state)

    def counters(self, state) -> tuple[int, int]:
        """The local counters of the replica's phases, plus the tree waves' dual updates (the
        ε-scaling searches) and rows scanned, counted once, not once per rank."""
        first, second = self.local.counters(state)
        return (first + self.tallies["dual_updates"] + self.tallies["searches"],
                second + self.tallies["rows_scanned"])

    def optimality_check(self, state) -> int:
        return self.local.optimality_check(state)

    def _infeasible_if(self, x) -> bool:
        """Whether a replicated vector has a non-finite entry (the same answer on every rank)."""
        return not bool(self.xp.isfinite(x).all())

    def initial_reduction(self, state, columns: bool) -> bool:
        """Section 4.1 over the slabs: each rank's row (and column) minima of its part, combined
        across the ranks by gathering the split axis and reducing the other."""
        slab = self.slab
        self.local.initial_reduction(slab, columns=False)
        state.u[:] = self._rows_of_slabs(slab.u)
        if self._infeasible_if(state.u):
            return False
        if not columns:
            return True
        slab.u[:] = state.u[self.lo : self.hi] if self.split == 0 else state.u
        self.local.column_reduction(slab)
        state.v[:] = self._columns_of_slabs(slab.v)
        return not self._infeasible_if(state.v)

    def _rows_of_slabs(self, x):
        """A per-row minimum each rank computed over its slab, for every row: the ranks' pieces
        in order (rows split) or their minimum (columns split)."""
        return self.comm.allgatherv(x) if self.split == 0 else self.comm.allreduce(x, "min")

    def _columns_of_slabs(self, x):
        """The same for a per-column minimum."""
        return self.comm.allreduce(x, "min") if self.split == 0 else self.comm.allgatherv(x)

    def jv_initialisation(self, state) -> bool:
        """Jonker & Volgenant's initialisation over the slabs, in the GPU backend's form: the
        column minima (gathered, or reduced with their rows) claimed on the replica by their rows,
        first column first; the reduction transfer of every row that got exactly one column; the
        augmenting row reduction as rounds of bids (:meth:`bidding_rounds`); the row duals of the
        final prices. Far fewer rows are left free than after the paper's reduction and the ranks'
        merged greedy matching (uniform n = 4000: 250 against about 880), and every free row
        costs the searches a scan."""
        xp, slab = self.xp, self.slab
        if state.n_rows == state.n_cols:
            argmin = self.local.column_minima(slab).astype(np.int64)
            if self.split == 1:
                state.v[:] = self.comm.allgatherv(slab.v)
                argmin = self.comm.allgatherv(argmin)
            else:  # the lowest row of the lowest rank holding the minimum: the first row
                stacked = self.comm.allgather(xp.stack([slab.v, (argmin + self.lo).astype(np.float64)]))
                owner = xp.argmin(stacked[:, 0], axis=0)
                cols = xp.arange(state.n_cols)
                state.v[:] = stacked[owner, 0, cols]
                argmin = stacked[owner, 1, cols].astype(np.int64)
            if self._infeasible_if(state.v):
                return False  # a column of forbidden entries only
            rows, first = xp.unique(argmin, return_index=True)
            install_assignment(state, rows, first)
            single = xp.flatnonzero(xp.bincount(argmin, minlength=state.n_rows) == 1)
            terms = self._row_minima_terms(state, single)
            own = state.row_match[single]
            transfer = xp.where(terms[:, 1] == own, terms[:, 2], terms[:, 0])  # min over j != own
            kept = transfer < np.inf
            state.v[own[kept]] -= transfer[kept]
        self.local.optimality_check(state)
        self.bidding_rounds(state, 0.0, 0, ARR_MAX_ROUNDS, ARR_MAX_ROUNDS, 1 - ARR_MIN_PROGRESS)
        state.u[:] = self._row_minima(state, state.v)
        return not self._infeasible_if(state.u)

    def _row_minima(self, state, v):
        """``min_j (C[i, j] - v[j])`` for every row: each slab's (the local kernel), combined
        over the ranks."""
        slab = self.slab
        slab.v[:] = v[self.lo : self.hi] if self.split == 1 else v
        self.local.row_duals(slab)
        return self._rows_of_slabs(slab.u)

    def bidding_rounds(self, state, eps: float, tail: int, max_rounds: int, stall: int, keep_share: float):
        """Rounds of bids by every free row (the rule of ``Backend.bidding_rounds``): each row's
        terms from the ranks' slabs (:meth:`_row_minima_terms`, one collective), the bids
        resolved on the replica, the same on every rank."""
        return bidding_loop(state, lambda: self._bidding_round(state, eps), tail, max_rounds, stall,
                            keep_share)

    def _bidding_round(self, state, eps: float) -> int:
        """One round: the free rows' terms combined over the slabs, their bids and the award on
        the replica (the local backend's ``bids_of_terms`` and ``award_bids``)."""
        rows = self.xp.sort(state.free_rows[: state.n_free]).astype(np.int64)  # a GPU lists them in any order
        cols, dec = self.local.bids_of_terms(self._row_minima_terms(state, rows), eps)
        return self.local.award_bids(state, rows, cols, dec)

    def _row_minima_terms(self, state, rows):
        """``Backend.row_minima_terms`` of the replica's ``rows`` (ascending) over the whole
        matrix, global column indices: with rows split, each rank's own rows, in rank order; with
        columns split, each rank's terms over its columns, combined (the smallest of the ranks'
        smallest, first column on ties; the second smallest is the smaller of its rank's second
        and the other ranks' smallest)."""
        xp, slab = self.xp, self.slab
        self._load_duals(state)
        if self.split == 0:
            slab.col_match[:] = state.col_match
            # each rank's share of the ascending rows, known to every rank: one host read, no
            # collective of the sizes
            edges = to_host(xp.searchsorted(rows, self.bounds_array)).tolist()
            mine = rows[edges[self.rank] : edges[self.rank + 1]] - self.lo
            sizes = [5 * (b - a) for a, b in zip(edges, edges[1:], strict=False)]
            return self.comm.allgatherv(self.local.row_minima_terms(slab, mine).ravel(), sizes=sizes).reshape(-1, 5)
        slab.col_match[:] = state.col_match[self.lo : self.hi]
        local = self.local.row_minima_terms(slab, rows)
        for k in (1, 4):
            local[:, k] += xp.where(local[:, k] >= 0, self.lo, 0)
        stacked = self.comm.allgather(local)  # (ranks, rows, 5)
        q = xp.arange(rows.shape[0])
        smallest = stacked[:, :, 0]
        r1 = xp.argmin(smallest, axis=0)
        others = smallest.copy()
        others[r1, q] = np.inf
        rf = xp.argmin(stacked[:, :, 3], axis=0)
        return xp.stack([
            smallest[r1, q], stacked[r1, q, 1], xp.minimum(stacked[r1, q, 2], others.min(axis=0)),
            stacked[rf, q, 3], stacked[rf, q, 4],
        ], axis=1)

    def initial_assignment(self, state) -> int:
        """The greedy matching of zero-slack edges on each rank's slab, merged: a column claimed
        by two ranks' rows (rows split) goes to the lowest row, a row claimed on two ranks'
        columns (columns split) to the lowest rank's. Returns the pairs made."""
        xp, slab = self.xp, self.slab
        self._load_duals(state)
        self.local.initial_assignment(slab)
        if self.split == 0:
            claims = self.comm.allgatherv(slab.row_match.astype(np.int64))
            rows = xp.flatnonzero(claims >= 0)
            cols = claims[rows]
            _, first = xp.unique(cols, return_index=True)  # the lowest row claiming each column
            rows, cols = rows[first], cols[first]
        else:
            stacked = self.comm.allgather(slab.row_match.astype(np.int64))  # (ranks, rows), local columns
            claimed = stacked >= 0
            rows = xp.flatnonzero(claimed.any(axis=0))
            owner = xp.argmax(claimed[:, rows], axis=0)  # the lowest rank with a claim
            cols = stacked[owner, rows] + self.bounds_array[owner]
        install_assignment(state, rows, cols)
        return int(rows.shape[0])

    def _load_duals(self, state) -> None:
        """The replica's duals, restricted to this rank's slab."""
        slab = self.slab
        if self.split == 0:
            slab.u[:] = state.u[self.lo : self.hi]
            slab.v[:] = state.v
        else:
            slab.u[:] = state.u
            slab.v[:] = state.v[self.lo : self.hi]

    def reverse_pass(self, state) -> int:
        return self.local.reverse_pass(state)

    def augment(self, state) -> None:
        """The augmentation (4.3.3) on the replica, then the root's assignment on every rank: its
        row and column matches in one broadcast, copied over the replica's (no host read)."""
        self.local.augment(state)
        if self.comm.size == 1:
            return
        n = state.n_rows
        root = self.comm.bcast(self.xp.concatenate((state.row_match, state.col_match)))
        state.row_match[:] = root[:n]
        state.col_match[:] = root[n:]

    # ------------------------------------------------------------------ classical (either split)

    def compress(self, state) -> int:
        """Section 3.3 on each rank's slab, then the global CSR on every rank (step 4a): with
        rows split, the ranks' CSRs one after the other; with columns split (the hybrid), each
        row's edges from every rank, in rank order, so in column order as on one device."""
        self._load_duals(state)
        return self._gather_edges(state, self.local.compress(self.slab))

    def recompress(self, state, theta: float) -> int:
        """:meth:`compress` after a dual update: each slab's CSR from its previous one, as the
        local backend makes it from the slab's forest rows and covered columns that
        :meth:`classical_theta` left there; then the same all-gathers."""
        self._load_duals(state)
        return self._gather_edges(state, self.local.recompress(self.slab, theta))

    def _gather_edges(self, state, nnz: int) -> int:
        """The global CSR on every rank from the slabs' (``nnz`` edges on this rank's)."""
        slab, xp = self.slab, self.xp
        counts = slab.row_ptr[1:] - slab.row_ptr[:-1]
        # two collectives: the rows' edge counts, then the edges
        if self.split == 0:
            # each rank's edge total travels ahead of its rows' counts (whose lengths follow from
            # the slab bounds): one host read of the totals sizes the edges' all-gather
            sizes = np.diff(self.bounds).tolist()
            header = xp.empty(max(sizes) + 1, dtype=np.int64)
            header[0] = nnz
            header[1 : 1 + counts.shape[0]] = counts
            stacked = self.comm.allgather(header)
            counts = xp.concatenate([stacked[r, 1 : 1 + k] for r, k in enumerate(sizes)])
            state.col_idx = self.comm.allgatherv(slab.col_idx[:nnz], sizes=to_host(stacked[:, 0]).tolist())
        else:
            # the local backend's index dtype: the GPU's forward pass reads 32-bit column indices
            cols = (slab.col_idx[:nnz] + self.lo).astype(slab.col_idx.dtype, copy=False)
            per_rank = self.comm.allgather(counts)  # (ranks, rows)
            state.col_idx = self.comm.allgatherv(cols, sizes=[int(t) for t in to_host(per_rank.sum(axis=1))])
            rows = xp.repeat(xp.tile(xp.arange(state.n_rows), self.comm.size), per_rank.ravel())
            state.col_idx = state.col_idx[xp.argsort(rows, kind="stable")]
            counts = per_rank.sum(axis=0)
        state.row_ptr = xp.zeros(state.n_rows + 1, dtype=np.int64)
        xp.cumsum(counts, out=state.row_ptr[1:])
        self.tallies["zero_slack_edges"] = int(state.col_idx.shape[0])
        return self.tallies["zero_slack_edges"]

    def classical_forward_pass(self, state, resume=False) -> int:
        return self.local.classical_forward_pass(state, resume)

    def classical_theta(self, state) -> float:
        """Algorithm 7 over the forest rows of this rank's slab (its own rows, or every forest
        row over its columns), all-reduced to the global minimum. The slab keeps its forest rows
        and covered columns for :meth:`recompress`."""
        slab = self.slab
        forest = state.rows_q[: state.n_forest_rows]
        if self.split == 0:
            mine = forest[(forest >= self.lo) & (forest < self.hi)] - self.lo
            seen = state.col_seen
        else:
            mine, seen = forest, state.col_seen[self.lo : self.hi]
        theta = np.inf
        slab.rows_q[: mine.shape[0]] = mine
        slab.n_forest_rows = int(mine.shape[0])
        slab.col_seen[:] = seen
        if mine.shape[0]:
            self._load_duals(state)
            theta = self.local.classical_theta(slab)
        return float(to_host(self.comm.allreduce(self.xp.asarray([theta]), "min"))[0])

    def classical_shift(self, state, theta: float) -> None:
        self.local.classical_shift(state, theta)

    # ------------------------------------------------------------------ tree, columns split

    def tree_forward_pass(self, state, n_roots: int, collect_ties: bool) -> int:
        """Algorithm 4 with Algorithm 9 folded in, as waves over the column slabs, from the first
        ``n_roots`` free rows; stops at the first wave that reaches a free column, or with
        ``collect_ties`` once no column is left at that level. Leaves the forest in
        ``rows_q``/``forest_cols`` with the levels at which each vertex joined, exactly as the
        single-device kernels do, and returns the free columns reached (-1: infeasible).

        A wave: the local backend scans the frontier rows over the slab (``tree_scan``) and
        lists the slab's columns at or below ``max(level, its smallest slack)``, a superset of
        those at the wave's level (``tree_offer``); one all-gather (:meth:`_exchange_offers`)
        gives every rank every offer and smallest slack, hence the wave's level; and each rank
        joins the tight columns to its replica, rank by rank (``tree_join``). The host reads the
        offers' headers and the wave's four counters: two small reads per wave."""
        slab, replica, xp = self.slab, state, self.xp
        offers, shift, wave = self._wave_buffers(replica)
        slab.slack[:] = np.inf
        slab.v_open[:] = replica.v[self.lo : self.hi]
        frontier = replica.free_rows[:n_roots]
        replica.row_level[frontier] = 0.0
        replica.row_pred[frontier] = -1
        replica.rows_q[:n_roots] = frontier
        shift[:n_roots] = -replica.u[frontier]
        wave[:] = xp.asarray([0, 0, n_roots, n_roots])
        n_q, n_front, n_rev, level = n_roots, n_roots, 0, 0.0
        waves = 0
        while not (n_rev > 0 and not collect_ties):
            waves += 1
            if waves > 2 * replica.n_cols + 2:  # every wave covers a column (n_cols + 1 at most), with a margin
                raise RuntimeError(
                    "dlap internal error: the tree search across the ranks stopped making progress")
            if n_front:
                self.local.tree_scan(slab, replica.rows_q[n_q - n_front : n_q], shift, n_front)
                self.tallies["rows_scanned"] += n_front
            self.local.tree_offer(slab, level, self.lo, offers)
            minima, pieces = self._exchange_offers(offers)
            best = float(minima.min())
            if n_rev > 0 and best > level:
                break  # no column left at this level: the paths found go to the reverse pass
            if best == np.inf:
                return -1
            if best > level:
                level = best  # dual update by theta = best - level (Algorithm 9, lazily)
                self.tallies["dual_updates"] += 1
            for r, piece in enumerate(pieces):
                self.local.tree_join(replica, slab, piece, level, self.lo, shift, wave, r == 0)
            n_forest, n_rev, n_q, n_front = (int(x) for x in to_host(wave))
            self.tallies["waves"] += 1
        replica.n_forest_rows, replica.n_forest_cols = n_q, n_forest
        self.level = level
        self.local.load_reverse(replica, n_rev)
        return n_rev

    def _wave_buffers(self, state):
        """The tree waves' buffers, made on the first search: this rank's offer (a row per column
        of the widest slab, and the header), the frontier's shifts, the wave's counters."""
        if self._waves is None:
            xp, widest = self.xp, max(b - a for a, b in zip(self.bounds, self.bounds[1:], strict=False))
            self._waves = (xp.zeros((widest + 1, 3)), xp.zeros(state.n_rows), xp.zeros(4, dtype=np.int64))
        return self._waves

    def _exchange_offers(self, offers):
        """One wave's exchange: every rank's smallest slack (host) and its offered rows (device
        views), in rank order. One all-gather of ``WAVE_CAPACITY`` rows per rank; a second only
        for a wave where some rank offers more."""
        stacked = self.comm.allgather(offers[: WAVE_CAPACITY + 1])
        header = to_host(stacked[:, 0, :2])
        counts = header[:, 1].astype(np.int64)
        pieces = [stacked[r, 1 : 1 + min(int(counts[r]), WAVE_CAPACITY)] for r in range(self.comm.size)]
        extra = int(counts.max()) - WAVE_CAPACITY
        if extra > 0:
            more = self.comm.allgather(offers[WAVE_CAPACITY + 1 : WAVE_CAPACITY + 1 + extra])
            pieces = [p for r in range(self.comm.size)
                      for p in (pieces[r], more[r, : max(int(counts[r]) - WAVE_CAPACITY, 0)])]
        return header[:, 0], pieces

    def tree_dual_update(self, state) -> None:
        """Algorithm 9 on the replica: forest rows gain ``level - joined``, covered columns lose it."""
        replica = state
        rows, cols = replica.rows_q[: replica.n_forest_rows], replica.forest_cols[: replica.n_forest_cols]
        replica.u[rows] += self.level - replica.row_level[rows]
        replica.v[cols] -= self.level - replica.col_level[cols]

