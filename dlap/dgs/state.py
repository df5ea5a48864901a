"""The arrays of Deep Greedy Switching (Roverso et al.), shared by the CPU and GPU primitives.

Notation of the paper, section 3 (agents are rows, jobs are columns; the solver works on the
minimisation form with ``n_rows <= n_cols``): ``row_match`` is tau (agent -> job), ``col_match``
is sigma (job -> agent, -1 for a job no agent holds when the matrix is rectangular).

A *candidate* is a 2-exchange written as the pair of columns ``(cand_a, cand_b)`` whose holders
swap (a holder of -1 means the other agent simply moves there). Candidate ``k < n_rows`` is agent
k's best 2-exchange (ADE, the paper's Algorithm 2), candidate ``n_rows + j`` job j's best (JDE).
Its change of the objective depends only on the holders of its two columns, so ``cand_delta`` stays
exact until one of them changes: ``col_stamp[c]`` records when column c last changed hands and
``cand_stamp[k]`` when candidate k was evaluated; ``col_stamp > cand_stamp`` marks it stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..problem import CostShape


@dataclass
class DGSState(CostShape):
    """Assignment, per-column held cost and the candidate 2-exchanges of every agent and job."""

    cost: Any  # C, n_rows x n_cols, never written
    cost_t: Any  # C transposed (contiguous): column j of C is row j of cost_t
    row_match: Any  # tau
    col_match: Any  # sigma
    held: Any  # held[j] = C[sigma(j), j] (0 for a job no agent holds)
    cand_a: Any
    cand_b: Any
    cand_delta: Any  # change of the objective (< 0: an improvement; 0: none found)
    cand_stamp: Any
    col_stamp: Any
    dirty: Any  # entity flagged for re-evaluation (its candidate went stale or it was switched)
    tol_scale: float  # improvements must exceed this many ulps of the terms (0 for integers)
    extra: Any = None  # the device's own work arrays

    @property
    def n_candidates(self) -> int:
        return self.n_rows + self.n_cols

    @classmethod
    def allocate(cls, cost, cost_t, xp, index_dtype, tol_scale: float, extra=None):
        n_rows, n_cols = cost.shape
        n_cand = n_rows + n_cols
        return cls(
            cost=cost, cost_t=cost_t,
            row_match=xp.full(n_rows, -1, dtype=index_dtype),
            col_match=xp.full(n_cols, -1, dtype=index_dtype),
            held=xp.zeros(n_cols),
            cand_a=xp.zeros(n_cand, dtype=index_dtype), cand_b=xp.zeros(n_cand, dtype=index_dtype),
            cand_delta=xp.zeros(n_cand), cand_stamp=xp.zeros(n_cand, dtype=index_dtype),
            col_stamp=xp.full(n_cols, -1, dtype=index_dtype),
            dirty=xp.zeros(n_cand, dtype=index_dtype),
            tol_scale=tol_scale, extra=extra,
        )
