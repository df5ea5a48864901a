"""Deep Greedy Switching on the GPU: the primitives of :mod:`dlap.dgs` as the kernels of
``cuda/dgs.cu`` (Roverso et al., section 5: difference evaluation and switching both on the GPU,
so a round moves a few scalars between host and device, never the assignment).

A switching round is five launches and one 16-byte read: the evaluation of the listed agents and
jobs, the two passes of the conflict check, the switch, and the control block (how many entities
to re-evaluate next, how many switches were applied).
"""

from __future__ import annotations

import cupy
import numpy as np

from ...device import require_device_memory
from ...dgs.primitives import SwitchingPrimitives
from ...dgs.state import DGSState
from . import kernels as gk

#: blocks of the evaluation kernel at most (one entity per block, grid-stride beyond)
MAX_EVALUATION_BLOCKS = 1 << 16


class GPUSwitching(SwitchingPrimitives):
    """DGS primitives on the current CUDA device; indices are int32."""

    xp = cupy
    index_dtype = np.int32
    evaluation_chunk = 1 << 40  # the GPU evaluates everyone in one launch

    def allocate(self, cost, tol_scale):
        n_rows, n_cols = cost.shape
        require_device_memory(
            cost.nbytes + 48 * (n_rows + n_cols),
            f"Deep Greedy Switching on a {n_rows} x {n_cols} {cost.dtype} matrix (its transpose)",
        )
        cost_t = cupy.ascontiguousarray(cost.T)
        extra = {
            "best_key": cupy.empty(n_cols, dtype=np.uint64),
            "best_id": cupy.empty(n_cols, dtype=np.int32),
            "dirty_list": cupy.empty(n_rows + n_cols, dtype=np.int32),
            "ctl": cupy.zeros(2, dtype=np.uint64),  # [entities listed, switches applied]
        }
        return DGSState.allocate(cost, cost_t, cupy, np.int32, tol_scale, extra)

    def propose(self, state, rows):
        cols = cupy.empty(rows.size, dtype=np.int32)
        costs = cupy.empty(rows.size)
        gk.kernel("dgs", "dgs_propose", state.cost.dtype)(
            (min(rows.size, MAX_EVALUATION_BLOCKS),), (gk.BLOCK,),
            (state.cost, np.int32(state.n_cols), rows, np.int32(rows.size), state.col_match, cols, costs),
        )
        return cols, costs

    def load_held(self, state):
        gk.kernel("dgs", "dgs_held", state.cost.dtype)((gk.blocks(state.n_cols),), (gk.BLOCK,), (
            state.cost, np.int32(state.n_cols), state.col_match, state.held,
        ))

    def repair(self, state):
        """Augmenting paths on the host (only reached when the start met forbidden pairs it could
        not avoid: a copy of the matrix comes to the host)."""
        from ..cpu.dgs import augment_free_rows

        row_match = state.row_match.get().astype(np.int64)
        col_match = state.col_match.get().astype(np.int64)
        ok = augment_free_rows(state.cost.get(), row_match, col_match)
        state.row_match[:] = cupy.asarray(row_match)
        state.col_match[:] = cupy.asarray(col_match)
        return ok

    def evaluate(self, state, entities, stamp):
        if entities.size == 0:
            return
        gk.kernel("dgs", "dgs_evaluate", state.cost.dtype)(
            (min(entities.size, MAX_EVALUATION_BLOCKS),), (gk.BLOCK,),
            (
                state.cost, state.cost_t, np.int32(state.n_rows), np.int32(state.n_cols),
                state.row_match, state.col_match, state.held, entities, np.int32(entities.size),
                np.float64(state.tol_scale), np.int32(stamp), state.cand_a, state.cand_b,
                state.cand_delta, state.cand_stamp, state.dirty,
            ),
        )

    def parallel_round(self, state, stamp):
        x = state.extra
        n_cand = np.int32(state.n_candidates)
        grid = (gk.blocks(state.n_candidates),)
        x["ctl"].fill(0)
        x["best_key"].fill(gk.ORDERED_INF)
        x["best_id"].fill(np.iinfo(np.int32).max)
        gk.kernel("dgs", "dgs_select_best")(grid, (gk.BLOCK,), (
            state.cand_a, state.cand_b, state.cand_delta, state.cand_stamp, state.col_stamp, n_cand,
            x["best_key"], state.dirty, x["dirty_list"], x["ctl"],
        ))
        gk.kernel("dgs", "dgs_select_id")(grid, (gk.BLOCK,), (
            state.cand_a, state.cand_b, state.cand_delta, n_cand, x["best_key"], x["best_id"],
        ))
        gk.kernel("dgs", "dgs_switch", state.cost.dtype)(grid, (gk.BLOCK,), (
            state.cost, np.int32(state.n_rows), np.int32(state.n_cols), state.cand_a, state.cand_b,
            state.cand_delta, n_cand, x["best_id"], state.row_match, state.col_match, state.held,
            state.col_stamp, np.int32(stamp), state.dirty, x["dirty_list"], x["ctl"],
        ))
        n_listed, applied = (int(c) for c in x["ctl"].get())
        return applied, x["dirty_list"][:n_listed]
