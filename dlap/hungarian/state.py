"""The solver state of Date & Nagi (2016), section 2.1, shared by both variants and every backend.

A backend allocates these arrays on its device (NumPy on the CPU; CuPy on the GPU) and mutates
them in place in its phase primitives; the drivers in :mod:`dlap.hungarian` only read the scalar
counters a primitive returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..problem import CostShape


@dataclass
class HungarianState(CostShape):
    """Arrays of section 2.1 plus the work arrays of the searches.

    ``cost`` (n_rows <= n_cols) is never written. ``u``/``v`` are the dual arrays D_r/D_c,
    ``row_match``/``col_match`` the assignment arrays A_r/A_c (-1: unassigned),
    ``row_pred``/``col_pred`` the predecessor arrays P_r/P_c, ``succ_row`` the successor array S_r,
    ``slack`` the column slack array of the alternating tree variant.

    The ε-scaling engine (:mod:`dlap.hungarian.scaling`) reuses the tree variant's arrays for its
    single-root searches: ``slack`` holds the tentative distances, ``v_open`` the prices of the
    columns a search has not completed, ``forest_cols``/``col_level`` the completed columns and
    their distances, ``counters`` [searches, rows scanned].
    """

    cost: Any
    u: Any
    v: Any
    row_match: Any
    col_match: Any
    row_pred: Any
    col_pred: Any
    succ_row: Any
    slack: Any
    free_rows: Any  # unassigned rows after the last optimality check
    rows_q: Any  # the forest's rows in the order they joined (frontier queue)
    reverse: Any  # columns marked "reverse" by the forward pass
    aug_roots: Any  # roots of the paths kept by the reverse pass
    row_level: Any  # tree variant: dual level at which a row joined the forest
    col_level: Any  # tree variant: dual level at which a column joined the forest
    v_open: Any  # tree variant: column duals, -inf for forest columns (masks them in the scan)
    forest_cols: Any  # tree variant: the forest's columns in the order they joined
    row_seen: Any  # classical variant: row visited by the BFS
    col_seen: Any  # classical variant: column covered by the BFS
    claimed: Any  # reverse pass: roots already claimed by a path
    counters: Any  # [dual updates, rows scanned / BFS levels]
    tol_scale: float  # zero-slack tolerance factor: 0 for integer costs
    # scalars of the last primitives
    n_free: int = 0
    n_reverse: int = 0
    n_forest_rows: int = 0
    n_forest_cols: int = 0
    level: float = 0.0
    n_paths: int = 0
    row_ptr: Any = None  # classical variant: CSR of the zero-slack edges
    col_idx: Any = None
    forest_low: Any = None  # classical dual update: per forest row, what compression_plan reads (made on first use)
    bids: Any = None  # ε-scaling: the bidding rounds' scratch arrays (the backend's), made on first use

    @classmethod
    def allocate(cls, cost, xp, index_dtype, flag_dtype, tol_scale: float, **extra):
        """The state for ``cost`` with arrays from ``xp`` (NumPy or CuPy): indices of
        ``index_dtype`` filled with -1, flags of ``flag_dtype``, float64 duals and levels.
        ``extra`` fills the fields a backend's subclass adds."""
        n_rows, n_cols = cost.shape
        idx = lambda n: xp.full(n, -1, dtype=index_dtype)  # noqa: E731 - sentinel-filled index array
        return cls(
            cost=cost, u=xp.zeros(n_rows), v=xp.zeros(n_cols),
            row_match=idx(n_rows), col_match=idx(n_cols), row_pred=idx(n_rows), col_pred=idx(n_cols),
            succ_row=idx(n_rows), slack=xp.empty(n_cols), free_rows=idx(n_rows), rows_q=idx(n_rows),
            reverse=idx(n_cols), aug_roots=idx(n_rows), row_level=xp.zeros(n_rows),
            col_level=xp.zeros(n_cols), v_open=xp.empty(n_cols), forest_cols=idx(n_cols),
            row_seen=xp.zeros(n_rows, dtype=flag_dtype), col_seen=xp.zeros(n_cols, dtype=flag_dtype),
            claimed=xp.zeros(n_rows, dtype=flag_dtype), counters=xp.zeros(2, dtype=np.int64),
            tol_scale=tol_scale, **extra,
        )
