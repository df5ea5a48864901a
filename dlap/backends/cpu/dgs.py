"""Deep Greedy Switching on the CPU: the paper's difference evaluation, conflict check and switch
as Numba kernels (Roverso et al., sections 3 and 5), and the primitives the DGS driver calls.

The difference evaluation (ADE/JDE, Algorithm 2) runs over agents and jobs with ``prange`` (the
paper's "all ADE and JDE evaluations can be done in parallel"); the conflict check and the switch
(Algorithms 3 and 4) are O(n) passes. Both read the matrix and its transpose so every evaluation
walks two contiguous rows: ADE of agent i reads row i of C and row tau(i) of C^T, JDE of job j
reads row j of C^T and row sigma(j) of C.

Deltas are float64 and written in one order of operations, the same as the GPU kernels in
``cuda/dgs.cu``, so CPU and GPU make the same choices. Ties go to the lowest index.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ...dgs.primitives import SwitchingPrimitives
from ...dgs.state import DGSState
from .numba_setup import njit, prange_kernel, read_only  # first: cache folder and wait policy

INF = np.inf
_TRANSPOSE_BLOCK = 64


@prange_kernel(nogil=True)
def transpose(C, out):
    """``out = C.T`` in cache-sized tiles, rows of tiles in parallel."""
    n_rows, n_cols = C.shape
    n_tiles = (n_rows + _TRANSPOSE_BLOCK - 1) // _TRANSPOSE_BLOCK
    for t in prange(n_tiles):
        i0 = t * _TRANSPOSE_BLOCK
        i1 = min(n_rows, i0 + _TRANSPOSE_BLOCK)
        for j0 in range(0, n_cols, _TRANSPOSE_BLOCK):
            j1 = min(n_cols, j0 + _TRANSPOSE_BLOCK)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    out[j, i] = C[i, j]


@njit(cache=True, nogil=True, inline="always")
def _improvement(c_in, h_out, c_back, h_back, tol_scale):
    """The change of the objective when an agent takes a job of cost ``c_in`` instead of its own
    ``h_out`` and the job's holder takes the agent's job at ``c_back`` instead of ``h_back`` (both
    0 for an unheld job); 0 unless it improves by more than the rounding tolerance."""
    d = c_in - h_out
    d += c_back - h_back
    s = abs(c_in) + abs(h_out)
    s += abs(c_back) + abs(h_back)  # the order of operations of cuda/dgs.cu
    return d if d < -tol_scale * s else 0.0


@njit(cache=True, nogil=True)
def agent_difference_evaluation(C, CT, i, row_match, col_match, held, tol_scale):
    """ADE (Algorithm 2) for agent i: its best 2-exchange ``(tau(i), b)``; returns (a, b, delta),
    b = -1 when no exchange improves by more than the rounding tolerance."""
    a = row_match[i]
    row = C[i]
    col = CT[a]
    best = 0.0
    arg = -1
    for b in range(C.shape[1]):
        y = col_match[b]  # agent y takes job a; for an unheld job b, agent i just moves there
        if b != a:
            back = np.float64(col[y]) if y >= 0 else 0.0
            d = _improvement(np.float64(row[b]), held[a], back, held[b] if y >= 0 else 0.0, tol_scale)
            if d < best:
                best = d
                arg = b
    return a, arg, best


@njit(cache=True, nogil=True)
def job_difference_evaluation(C, CT, j, row_match, col_match, held, tol_scale):
    """JDE for job j: the agent r whose exchange with sigma(j) improves most; returns
    (j, tau(r), delta), or (j, -1, 0) when none improves."""
    x = col_match[j]  # sigma(j) takes agent r's job; for an unheld job, agent r just moves to j
    col = CT[j]
    best = 0.0
    arg = -1
    for r in range(C.shape[0]):
        if r != x:
            b = row_match[r]
            back = np.float64(C[x, b]) if x >= 0 else 0.0
            d = _improvement(np.float64(col[r]), held[b], back, held[j] if x >= 0 else 0.0, tol_scale)
            if d < best:
                best = d
                arg = r
    if arg < 0:
        return j, -1, 0.0
    return j, row_match[arg], best


@njit(cache=True, nogil=True)
def _evaluate_one(C, CT, k, row_match, col_match, held, tol_scale, cand_a, cand_b, cand_delta, cand_stamp, stamp):
    n_rows = C.shape[0]
    if k < n_rows:
        a, b, d = agent_difference_evaluation(C, CT, k, row_match, col_match, held, tol_scale)
    else:
        a, b, d = job_difference_evaluation(C, CT, k - n_rows, row_match, col_match, held, tol_scale)
    cand_a[k] = a
    cand_b[k] = max(b, 0)
    cand_delta[k] = d if b >= 0 else 0.0
    cand_stamp[k] = stamp


@prange_kernel(nogil=True)
def difference_evaluation(C, CT, entities, row_match, col_match, held, tol_scale, cand_a, cand_b,
                          cand_delta, cand_stamp, dirty, stamp):
    """ADE/JDE for the listed entities (k < n_rows: agent k, else job k - n_rows), in parallel."""
    for e in prange(entities.size):
        k = entities[e]
        _evaluate_one(C, CT, k, row_match, col_match, held, tol_scale, cand_a, cand_b, cand_delta, cand_stamp, stamp)
        dirty[k] = 0


@njit(cache=True, nogil=True)
def switch(C, a, b, row_match, col_match, held, col_stamp, stamp):
    """switch(): the holders of columns a and b exchange them; returns (old holder of a, of b)."""
    x = col_match[a]
    y = col_match[b]
    col_match[a] = y
    col_match[b] = x
    held[a] = np.float64(C[y, a]) if y >= 0 else 0.0
    held[b] = np.float64(C[x, b]) if x >= 0 else 0.0
    if x >= 0:
        row_match[x] = b
    if y >= 0:
        row_match[y] = a
    col_stamp[a] = stamp
    col_stamp[b] = stamp
    return x, y


@njit(cache=True, nogil=True)
def _is_stale(k, cand_a, cand_b, cand_stamp, col_stamp):
    return col_stamp[cand_a[k]] > cand_stamp[k] or col_stamp[cand_b[k]] > cand_stamp[k]


@njit(cache=True, nogil=True)
def check_conflicts_and_switch(C, row_match, col_match, held, cand_a, cand_b, cand_delta, cand_stamp,
                               col_stamp, dirty, best_delta, best_id, stamp):
    """One round of the parallel switching phase (Algorithm 3) with its conflict check (Algorithm 4).

    Stale candidates are dropped and their entities flagged for re-evaluation. Of the rest, a
    candidate is applied when it is the best (lowest delta, then lowest index) of every candidate
    touching either of its columns: the applied 2-exchanges share no agent or job, and the best
    one overall is always among them. Returns the number applied; flags the agents and jobs they
    moved.
    """
    n_rows = C.shape[0]
    best_delta[:] = 0.0
    best_id[:] = -1
    for k in range(cand_delta.size):
        d = cand_delta[k]
        if not d < 0.0:
            continue
        if _is_stale(k, cand_a, cand_b, cand_stamp, col_stamp):
            cand_delta[k] = 0.0
            dirty[k] = 1
            continue
        for c in (cand_a[k], cand_b[k]):
            if d < best_delta[c]:
                best_delta[c] = d
                best_id[c] = k
    applied = 0
    for k in range(cand_delta.size):
        a, b = cand_a[k], cand_b[k]
        if cand_delta[k] < 0.0 and best_id[a] == k and best_id[b] == k:
            x, y = switch(C, a, b, row_match, col_match, held, col_stamp, stamp)
            for agent in (x, y):
                if agent >= 0:
                    dirty[agent] = 1
            dirty[n_rows + a] = 1
            dirty[n_rows + b] = 1
            applied += 1
    return applied


@njit(cache=True, nogil=True)
def greedy_switching(C, CT, row_match, col_match, held, tol_scale, cand_a, cand_b, cand_delta,
                     cand_stamp, col_stamp, clock, max_steps):
    """The switching phase of sequential DGS (Algorithm 1), at most ``max_steps`` steps.

    Each step takes the best candidate of all agents and jobs; a stale one is re-evaluated (the
    paper's ``f(sigma') > f(sigma)`` test), a current one is applied and the two agents and two jobs
    it moved are re-evaluated. Returns ``(none_left, clock, switches)``; ``none_left`` means no
    candidate improves, so the caller re-evaluates everyone (the paper's outer loop).
    """
    n_rows = C.shape[0]
    switches = 0
    for _ in range(max_steps):
        k = np.int64(-1)  # not the literal -1: Numba would compile the callees for it too
        best = 0.0
        for q in range(cand_delta.size):
            if cand_delta[q] < best:
                best = cand_delta[q]
                k = q
        if k < 0:
            return True, clock, switches
        if _is_stale(k, cand_a, cand_b, cand_stamp, col_stamp):
            _evaluate_one(C, CT, k, row_match, col_match, held, tol_scale, cand_a, cand_b, cand_delta, cand_stamp, clock)
            continue
        clock += 1
        a, b = cand_a[k], cand_b[k]
        x, y = switch(C, a, b, row_match, col_match, held, col_stamp, clock)
        clock += 1
        for q in (x, y, n_rows + a, n_rows + b):
            if q >= 0:
                _evaluate_one(C, CT, q, row_match, col_match, held, tol_scale, cand_a, cand_b, cand_delta, cand_stamp, clock)
        switches += 1
    return False, clock, switches


@prange_kernel(nogil=True)
def propose(C, rows, col_match, out_cols, out_costs):
    """Greedy start, one round: each listed row's cheapest unheld column (-1: none is finite)."""
    for e in prange(rows.size):
        i = rows[e]
        best = INF
        arg = -1
        for j in range(C.shape[1]):
            if col_match[j] < 0 and C[i, j] < best:
                best = np.float64(C[i, j])
                arg = j
        out_cols[e] = arg
        out_costs[e] = best


@njit(cache=True, nogil=True)
def augment_free_rows(C, row_match, col_match):
    """Give every unassigned row a column along an augmenting path of finite entries (BFS);
    False when some row has none (no finite assignment exists: Hall's condition fails)."""
    n_rows, n_cols = C.shape
    col_pred = np.empty(n_cols, dtype=np.int64)
    queue = np.empty(n_rows, dtype=np.int64)
    for root in range(n_rows):
        if row_match[root] >= 0:
            continue
        col_pred[:] = -1
        queue[0] = root
        head, tail, end = 0, 1, -1
        while head < tail and end < 0:
            i = queue[head]
            head += 1
            for j in range(n_cols):
                if col_pred[j] >= 0 or not C[i, j] < INF:
                    continue
                col_pred[j] = i
                if col_match[j] < 0:
                    end = j
                    break
                queue[tail] = col_match[j]
                tail += 1
        if end < 0:
            return False
        j = end
        while True:
            i = col_pred[j]
            previous = row_match[i]
            row_match[i] = j
            col_match[j] = i
            if i == root:
                break
            j = previous
    return True


class CPUSwitching(SwitchingPrimitives):
    """DGS primitives on the host (Numba)."""

    xp = np
    index_dtype = np.int64
    sequential = True
    #: matrix entries read per evaluation, proposal or sequential-switching call under a deadline,
    #: which is read between calls: about a millisecond each, a few on a machine whose cores other
    #: processes use (a quarter of 1 << 20 halved the worst overshoot on a busy 2-core machine).
    #: Without a deadline one call takes everything (dlap.dgs.switching._per_call)
    evaluation_chunk = 1 << 18

    def allocate(self, cost, tol_scale):
        cost = read_only(cost)
        cost_t = np.empty((cost.shape[1], cost.shape[0]), dtype=cost.dtype)
        transpose(cost, cost_t)
        extra = (np.empty(cost.shape[1]), np.empty(cost.shape[1], dtype=np.int64))  # best_delta, best_id
        return DGSState.allocate(cost, cost_t, np, np.int64, tol_scale, extra)

    def propose(self, state, rows):
        cols = np.empty(rows.size, dtype=np.int64)
        costs = np.empty(rows.size)
        propose(state.cost, rows, state.col_match, cols, costs)
        return cols, costs

    def repair(self, state):
        return augment_free_rows(state.cost, state.row_match, state.col_match)

    def load_held(self, state):
        held = np.flatnonzero(state.col_match >= 0)
        state.held[:] = 0.0
        state.held[held] = state.cost[state.col_match[held], held]

    def evaluate(self, state, entities, stamp):
        difference_evaluation(
            state.cost, state.cost_t, entities, state.row_match, state.col_match, state.held,
            state.tol_scale, state.cand_a, state.cand_b, state.cand_delta, state.cand_stamp,
            state.dirty, stamp,
        )

    def parallel_round(self, state, stamp):
        best_delta, best_id = state.extra
        applied = check_conflicts_and_switch(
            state.cost, state.row_match, state.col_match, state.held, state.cand_a, state.cand_b,
            state.cand_delta, state.cand_stamp, state.col_stamp, state.dirty, best_delta, best_id, stamp,
        )
        return applied, np.flatnonzero(state.dirty)

    def sequential_steps(self, state, clock, max_steps):
        return greedy_switching(
            state.cost, state.cost_t, state.row_match, state.col_match, state.held, state.tol_scale,
            state.cand_a, state.cand_b, state.cand_delta, state.cand_stamp, state.col_stamp, clock, max_steps,
        )
