"""The Backend primitives over a Dask cluster: one rank's slab of the matrix and a communicator.

The drivers of :mod:`dlap.hungarian` (``run_classical``, ``run_tree``, ``initialise``) run on
every rank unchanged, against :class:`DistributedBackend`: the state they are given is the rank's
replica of the O(n) search state (assignment, duals, forest; ``allocate_graph``, the same on every
rank), and each primitive that needs the matrix runs the local backend's kernel on the rank's slab
and combines the ranks' parts with one collective (Date & Nagi 2016, section 5):

- rows split (classical variant, step 4a): the initial reduction's row minima are gathered and its
  column minima reduced; the zero-slack edges of each rank's rows are compressed and gathered into
  the global CSR (section 3.3); the dual update's stage 1 (Algorithm 7) runs over each rank's
  forest rows and theta is all-reduced;
- columns split (tree variant, step 4b): row minima reduced, column minima gathered; the forward
  pass (Algorithm 4 with Algorithm 9 folded in) scans the frontier rows over each rank's columns,
  one all-gather of (minimum slack, tight count) gives the dual level and one all-gather of the
  tight columns gives every rank the next frontier: all columns tight at the level join at once
  (a wave), so a search takes one step per (level, BFS depth) pair;
- the graph phases (optimality check, BFS forward pass on the CSR, reverse pass, augmentation,
  the dual shifts) are the local backend's own, on the replica. The root's augmentation is
  broadcast (section 5: the root augments and broadcasts): on a GPU the paths kept are decided by
  races, so replicas left to themselves would drift apart and issue different collectives.

The drivers' loops exist once, in :mod:`dlap.hungarian`; this module has none of its own.
"""

from __future__ import annotations

import numpy as np

from ..backends.base import install_assignment
from .comm import _host

#: the axis of the (solved, rows <= cols) matrix each variant splits over the ranks
SPLIT_AXIS = {"classical": 0, "tree": 1}


class DistributedBackend:
    """The primitives ``initialise``, ``run_classical`` and ``run_tree`` call, for one rank.

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
        self.level = 0.0  # the dual level the last tree forward pass reached
        self.tallies = {"dual_updates": 0, "rows_scanned": 0, "waves": 0, "zero_slack_edges": 0}

    # ------------------------------------------------------------------ shared

    def synchronize(self, state) -> None:
        self.local.synchronize(state)

    def counters(self, state) -> tuple[int, int]:
        """The local counters of the replica's phases, plus the tree waves' dual updates and rows
        scanned (counted once, not once per rank)."""
        first, second = self.local.counters(state)
        return first + self.tallies["dual_updates"], second + self.tallies["rows_scanned"]

    def optimality_check(self, state) -> int:
        return self.local.optimality_check(state)

    def _infeasible_if(self, x) -> bool:
        """Whether a replicated vector has a non-finite entry (the same answer on every rank)."""
        return not bool(self.xp.isfinite(x).all())

    def initial_reduction(self, state, columns: bool) -> bool:
        """Section 4.1 over the slabs: each rank's row (and column) minima of its part, combined
        across the ranks by gathering the split axis and reducing the other."""
        s, comm = self.slab, self.comm
        self.local.initial_reduction(s, columns=False)
        state.u[:] = comm.allgatherv(s.u) if self.split == 0 else comm.allreduce(s.u, "min")
        if self._infeasible_if(state.u):
            return False
        if not columns:
            return True
        s.u[:] = state.u[self.lo : self.hi] if self.split == 0 else state.u
        self.local.column_reduction(s)
        state.v[:] = comm.allreduce(s.v, "min") if self.split == 0 else comm.allgatherv(s.v)
        return not self._infeasible_if(state.v)

    def initial_assignment(self, state) -> int:
        """The greedy matching of zero-slack edges on each rank's slab, merged: a column claimed
        by two ranks' rows (rows split) goes to the lowest row, a row claimed on two ranks'
        columns (columns split) to the lowest rank's. Returns the pairs made."""
        xp, s = self.xp, self.slab
        self._load_duals(state)
        self.local.initial_assignment(s)
        if self.split == 0:
            claims = self.comm.allgatherv(s.row_match.astype(np.int64))
            rows = xp.flatnonzero(claims >= 0)
            cols = claims[rows]
            _, first = xp.unique(cols, return_index=True)  # the lowest row claiming each column
            rows, cols = rows[first], cols[first]
        else:
            stacked = self.comm.allgather(s.row_match.astype(np.int64))  # (ranks, rows), local columns
            claimed = stacked >= 0
            rows = xp.flatnonzero(claimed.any(axis=0))
            owner = xp.argmax(claimed[:, rows], axis=0)  # the lowest rank with a claim
            offsets = xp.asarray(np.asarray(self.bounds[:-1], dtype=np.int64))
            cols = stacked[owner, rows] + offsets[owner]
        install_assignment(state, rows, cols)
        return int(rows.shape[0])

    def _load_duals(self, state) -> None:
        """The replica's duals, restricted to this rank's slab."""
        s = self.slab
        if self.split == 0:
            s.u[:] = state.u[self.lo : self.hi]
            s.v[:] = state.v
        else:
            s.u[:] = state.u
            s.v[:] = state.v[self.lo : self.hi]

    def reverse_pass(self, state) -> int:
        return self.local.reverse_pass(state)

    def augment(self, state) -> None:
        """The augmentation (4.3.3) on the replica, then the root's assignment on every rank."""
        self.local.augment(state)
        if self.comm.size == 1:
            return
        root = self.comm.bcast(state.row_match)
        rows = self.xp.flatnonzero(root >= 0)
        install_assignment(state, rows, root[rows])

    # ------------------------------------------------------------------ classical, rows split

    def compress(self, state) -> int:
        """Section 3.3 on each rank's rows, then the all-gathered global CSR (step 4a)."""
        s, xp = self.slab, self.xp
        self._load_duals(state)
        nnz = self.local.compress(s)
        counts = self.comm.allgatherv(s.row_ptr[1:] - s.row_ptr[:-1])
        state.col_idx = self.comm.allgatherv(s.col_idx[:nnz])
        state.row_ptr = xp.zeros(state.n_rows + 1, dtype=np.int64)
        xp.cumsum(counts, out=state.row_ptr[1:])
        self.tallies["zero_slack_edges"] = int(state.col_idx.shape[0])
        return self.tallies["zero_slack_edges"]

    def classical_forward_pass(self, state) -> int:
        return self.local.classical_forward_pass(state)

    def classical_theta(self, state) -> float:
        """Algorithm 7 over this rank's forest rows, all-reduced to the global minimum."""
        s = self.slab
        forest = state.rows_q[: state.n_forest_rows]
        mine = forest[(forest >= self.lo) & (forest < self.hi)] - self.lo
        theta = np.inf
        if mine.shape[0]:
            self._load_duals(state)
            s.rows_q[: mine.shape[0]] = mine
            s.n_forest_rows = int(mine.shape[0])
            s.col_seen[:] = state.col_seen
            theta = self.local.classical_theta(s)
        return float(_host(self.comm.allreduce(self.xp.asarray([theta]), "min"))[0])

    def classical_shift(self, state, theta: float) -> None:
        self.local.classical_shift(state, theta)

    # ------------------------------------------------------------------ tree, columns split

    def tree_forward_pass(self, state, n_roots: int, collect_ties: bool) -> int:
        """Algorithm 4 with Algorithm 9 folded in, as waves over the column slabs, from the first
        ``n_roots`` free rows; stops at the first wave that reaches a free column, or with
        ``collect_ties`` once no column is left at that level. Leaves the forest in
        ``rows_q``/``forest_cols`` with the levels at which each vertex joined, exactly as the
        single-device kernels do, and returns the free columns reached (-1: infeasible)."""
        xp, s, g, comm = self.xp, self.slab, state, self.comm
        s.slack[:] = np.inf
        s.v_open[:] = g.v[self.lo : self.hi]
        frontier = g.free_rows[:n_roots].copy()
        g.row_level[frontier] = 0.0
        g.row_pred[frontier] = -1
        g.rows_q[:n_roots] = frontier
        n_q, n_forest, n_rev, level = n_roots, 0, 0, 0.0
        shift = -g.u[frontier]
        while not (n_rev > 0 and not collect_ties):
            if frontier.shape[0]:
                self.local.tree_scan(s, frontier, shift, int(frontier.shape[0]))
                self.tallies["rows_scanned"] += int(frontier.shape[0])
            local_min = float(s.slack.min()) if s.slack.shape[0] else np.inf
            local_count = int((s.slack <= max(level, local_min)).sum()) if local_min < np.inf else 0
            summary = _host(comm.allgather(xp.asarray([local_min, local_count], dtype=np.float64)))
            best = float(summary[:, 0].min())
            if n_rev > 0 and best > level:
                break  # no column left at this level: the paths found go to the reverse pass
            if best == np.inf:
                return -1
            if best > level:
                level = best  # dual update by theta = best - level (Algorithm 9, lazily)
                self.tallies["dual_updates"] += 1
            counts = np.where(summary[:, 0] <= level, summary[:, 1], 0).astype(np.int64)
            tight = self._gather_tight(level, int(counts[self.rank]), int(counts.max()), counts)
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
            self.tallies["waves"] += 1
        g.n_forest_rows, g.n_forest_cols = n_q, n_forest
        self.level = level
        self.local.load_reverse(g, n_rev)
        return n_rev

    def _gather_tight(self, level: float, mine: int, width: int, counts: np.ndarray):
        """This rank's columns with slack <= level leave the scan (they are covered); every rank
        receives all of them as rows (column, predecessor row, level), in rank order."""
        xp, s = self.xp, self.slab
        buf = xp.zeros((width, 3), dtype=np.float64)
        if mine:
            cols = xp.flatnonzero(s.slack <= level)
            buf[:mine, 0] = cols + self.lo
            buf[:mine, 1] = s.col_pred[cols]
            buf[:mine, 2] = s.slack[cols]
            s.slack[cols] = np.inf
            s.v_open[cols] = -np.inf
        stacked = self.comm.allgather(buf)
        return xp.concatenate([stacked[r, : counts[r]] for r in range(self.comm.size)])

    def tree_dual_update(self, state) -> None:
        """Algorithm 9 on the replica: forest rows gain ``level - joined``, covered columns lose it."""
        g = state
        rows, cols = g.rows_q[: g.n_forest_rows], g.forest_cols[: g.n_forest_cols]
        g.u[rows] += self.level - g.row_level[rows]
        g.v[cols] -= self.level - g.col_level[cols]
