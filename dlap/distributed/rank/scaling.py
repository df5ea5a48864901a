"""The ε-scaling engine's primitives (:mod:`dlap.hungarian.scaling`) over column slabs.

``method="auto"`` hands a split solve of structured costs to :func:`~dlap.hungarian.scaling.
solve_scaling` exactly as ``dlap.solve`` does; these are the primitives it calls, for ranks that
each hold a slab of columns (every row whole, as the tree variant splits them). Each step that
reads the matrix runs on every slab and one collective combines the parts; everything else runs
on the replica, the same on every rank:

- step 1, price initialisation: the rows' minima all-reduced, each column's two smallest
  row-reduced costs on its own rank (the competition prices), the regrets from the ranks' row
  minima (one all-gather), then the greedy assignment by decreasing regret, row by row, each row's
  cheapest untaken column found on every slab and agreed by one small all-gather, and the prices
  fitted to it, row by row, the owner of the row's column broadcasting its reduced cost there;
- step 2, the searches: one Dijkstra search per free row as on one device, each step one
  all-gather of five numbers per rank: the rank's nearest column (its first free one at that
  distance, else its first), whether it is free, the reduced cost of its row there and its
  predecessor. The rank-ordered slabs make "the first column" the same as on one device, and the
  replica keeps the predecessors of the completed columns, from which every rank augments;
- on GPU ranks the bids (:meth:`DistributedBackend.bidding_rounds`, one all-gather per round)
  assign most rows of a phase before the searches, as on one GPU;
- the exact duals, the matched costs and the row minima that prove a float answer: per slab,
  reduced over the ranks.

A search costs one collective per step: it pays where the matrix fits no single worker. Only
square matrices reach it (``solve_auto`` hands only them over; a rectangular exact phase would
need virtual rows).
"""

from __future__ import annotations

import math

import numpy as np

from ...backends.base import install_assignment
from ...certificate import widened
from .comm import to_host


class DistributedScaling:
    """The ε-scaling primitives of :class:`~dlap.distributed.rank.backend.DistributedBackend`."""

    @property
    def parallel_bidding(self) -> bool:
        """Bids where the local device bids (a GPU scans the free rows at once; a round is then
        one collective where the searches take one per step), not on CPU ranks: at n = 2000 on
        two single-threaded CPU ranks the rounds scanned 8x the rows the searches do)."""
        return self.local.parallel_bidding

    def narrowed(self, state):
        """The ε-phases read the slabs themselves: no half-width copy across the ranks (each
        rank's slab would need its own)."""
        return None

    def _require_columns(self) -> None:
        if self.split != 1:
            raise RuntimeError("dlap internal error: the Dask engine's ε-scaling runs on column slabs")

    # ------------------------------------------------------------------ step 1

    def price_initialisation(self, state):
        """Step 1 of :mod:`dlap.hungarian.scaling` over the column slabs; returns the greedy
        assignment's total excess, or None where a row has no finite entry."""
        self._require_columns()
        xp, slab = self.xp, self.slab
        square = state.n_rows == state.n_cols
        state.v[:] = 0.0
        if square:
            self.local.initial_reduction(slab, columns=False)
            row_low = self._rows_of_slabs(slab.u)
            if self._infeasible_if(row_low):
                return None
            state.v[:] = self._columns_of_slabs(self.local.column_competition(slab, row_low))
            finite = state.v[state.v < np.inf]
            top = float(finite.max()) if finite.shape[0] else 0.0
            state.v[:] = xp.where(state.v < np.inf, state.v - top, 0.0)
        terms = self._row_minima_terms(state, xp.arange(state.n_rows))
        regret = xp.where(terms[:, 2] < np.inf, terms[:, 2] - terms[:, 0], 0.0)
        order = xp.lexsort(xp.stack([xp.arange(state.n_rows, dtype=np.float64), -regret]))
        picked, taken = self._greedy(state, order)
        if square:
            self._fit_prices(state, order, picked, taken)
        state.v[:] = self._columns_of_slabs(slab.v)
        state.u[:] = self._row_minima(state, state.v)
        if self._infeasible_if(state.u):
            return None
        kept = picked >= 0
        rows, cols = order[kept], picked[kept]
        excess = (self.matched_at(state, rows, cols) - state.v[cols]) - state.u[rows]
        install_assignment(state, rows, cols)
        return math.fsum(to_host(excess).tolist())

    def _greedy(self, state, order):
        """Rows in ``order``, each taking its cheapest untaken column (one all-gather per row:
        each rank's ``cheapest_untaken``, the lowest column winning ties). Returns the picks
        (global columns, -1 for none) and this rank's taken flags."""
        xp, slab = self.xp, self.slab
        self._load_duals(state)
        taken = xp.zeros(slab.v.shape[0], dtype=bool)
        picked = np.full(state.n_rows, -1, dtype=np.int64)
        for q, i in enumerate(_host_list(order)):
            best, j = self.local.cheapest_untaken(slab, i, taken)
            offers = to_host(self.comm.allgather(xp.asarray([best, j + self.lo], dtype=np.float64)))
            r = int(offers[:, 0].argmin())
            if offers[r, 0] == np.inf:
                continue
            picked[q] = int(offers[r, 1])
            if r == self.rank:
                taken[j] = True
        return xp.asarray(picked), taken

    def _fit_prices(self, state, order, picked, taken) -> None:
        """The price fit, last row first: each row lowers the price of every column taken before
        it that it would rather have (``lower_taken_prices`` on every slab) to its own column's
        reduced cost, which the column's owner broadcasts."""
        xp, slab = self.xp, self.slab
        for q in range(state.n_rows - 1, -1, -1):
            jq = int(picked[q])
            if jq < 0:
                continue
            owner = self._owner(jq)
            i = int(order[q])
            own = np.inf
            if owner == self.rank:
                taken[jq - self.lo] = False
                own = float(slab.cost[i, jq - self.lo]) - float(slab.v[jq - self.lo])
            own = float(to_host(self.comm.bcast(xp.asarray([own]), root=owner))[0])
            self.local.lower_taken_prices(slab, i, own, taken)

    # ------------------------------------------------------------------ step 2

    def empty_assignment(self, state) -> None:
        self.local.empty_assignment(state)  # the replica's, the same on every rank

    def assign_free_rows(self, state, eps: float, reverse: bool, virtual: bool) -> bool:
        """One Dijkstra search per free row (ascending, descending with ``reverse``), each step
        one all-gather; then the completed columns' prices lowered by ``max(length - d, eps)``
        and the path flipped, on the replica. False: a row reaches no free column. The
        assignment is followed on the host during the searches (a step reads the row matched to
        the column it completes) and written to the replica after each path."""
        self._require_columns()
        if virtual and state.n_cols > state.n_rows:
            raise RuntimeError("dlap internal error: the Dask engine's ε-scaling is for square matrices")
        xp, slab = self.xp, self.slab
        rows = _host_list(xp.sort(state.free_rows[: state.n_free]))
        row_match, col_match = to_host(state.row_match).copy(), to_host(state.col_match).copy()
        self._load_duals(state)
        slab.v_open[:] = slab.v
        for i0 in rows[::-1] if reverse else rows:
            self.tallies["searches"] += 1
            end, length, done, dist, preds = self._search(state, i0, col_match)
            state.v[done] -= xp.maximum(length - dist, eps)
            mine = done[(done >= self.lo) & (done < self.hi)] - self.lo  # only their prices changed
            slab.v[mine] = state.v[mine + self.lo]
            slab.v_open[mine] = slab.v[mine]
            if end < 0:
                return False
            path_rows, path_cols, j = [], [], end
            while True:  # augment along the completed columns' predecessors
                i = preds[j]
                nxt = int(row_match[i])
                col_match[j], row_match[i] = i, j
                path_rows.append(i)
                path_cols.append(j)
                if i == i0:
                    break
                j = nxt
            path_rows, path_cols = xp.asarray(path_rows), xp.asarray(path_cols)
            state.col_match[path_cols] = path_rows
            state.row_match[path_rows] = path_cols
        self.local.optimality_check(state)
        return True

    def _search(self, state, i0: int, col_match):
        """Dijkstra from row ``i0`` over the slabs until a free column is completed: each step,
        every slab's scan of the last row and its offer (``search_offer``), all-gathered and
        combined by the order of one device's search (the nearest offer, the first free one
        among equals, else the first: the slabs are in column order). ``col_match`` is
        the assignment on the host. Returns (free column or -1, path length, the completed
        columns and their distances, and their predecessors by column), the predecessors
        written to the replica's ``col_pred`` too."""
        slab = self.slab
        slab.slack[:] = np.inf
        match = state.col_match[self.lo : self.hi]
        starts = np.asarray(self.bounds[:-1], dtype=np.float64)
        row, shift = i0, 0.0
        preds, done_dist, level = {}, [], -np.inf  # the completed columns (in order) and predecessors
        while True:
            offer = self.local.search_offer(slab, match, row, shift)
            self.tallies["rows_scanned"] += 1
            offers = to_host(self.comm.allgather(offer))
            offers[:, 1] += np.where(offers[:, 1] >= 0, starts, 0.0)  # each slab's column, globally
            best = offers[:, 0].min()
            if best == np.inf:
                return -1, np.inf, *self._completed(state, preds, done_dist), preds
            at = np.flatnonzero(offers[:, 0] == best)
            free = at[offers[at, 2] > 0]
            r = int(free[0] if free.shape[0] else at[0])
            j = int(offers[r, 1])
            preds[j] = int(offers[r, 4])
            done_dist.append(best)
            if r == self.rank:
                slab.slack[j - self.lo] = np.inf
                slab.v_open[j - self.lo] = -np.inf
            level = max(level, best)
            if offers[r, 2] > 0:
                return j, level, *self._completed(state, preds, done_dist), preds
            row, shift = int(col_match[j]), level - offers[r, 3]

    def _completed(self, state, preds, done_dist):
        """A search's completed columns (``preds``' keys, in the order they were completed) and
        their distances as arrays, their predecessors written to the replica."""
        xp = self.xp
        cols = xp.asarray(list(preds), dtype=np.int64)
        if preds:
            state.col_pred[cols] = xp.asarray(list(preds.values()), dtype=state.col_pred.dtype)
        return cols, xp.asarray(done_dist)

    # ------------------------------------------------------------------ duals and proofs

    def exact_duals(self, state) -> None:
        """``u[i] = C[i, row_match[i]] - v[row_match[i]]``, each from the slab holding the column."""
        state.u[:] = self.matched_costs(state) - state.v[state.row_match]

    def matched_costs(self, state):
        return self.matched_at(state, self.xp.arange(state.n_rows), state.row_match)

    def reduced_row_minima(self, state, v):
        return self._row_minima(state, v)

    def matched_at(self, state, rows, cols):
        """``C[rows[k], cols[k]]`` in float64, each entry from the slab holding its column."""
        xp, slab = self.xp, self.slab
        mine = (cols >= self.lo) & (cols < self.hi)
        out = xp.full(rows.shape[0], np.inf)
        out[mine] = widened(slab.cost[rows[mine], cols[mine] - self.lo])
        return self.comm.allreduce(out, "min")

    def _owner(self, col: int) -> int:
        return int(np.searchsorted(np.asarray(self.bounds), col, side="right")) - 1


def _host_list(x) -> list:
    return [int(i) for i in to_host(x).tolist()]
