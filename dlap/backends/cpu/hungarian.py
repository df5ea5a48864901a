"""Numba kernels of the CPU backend: one function per phase of Date & Nagi (2016).

These are the paper's OpenMP analogue: the O(n^2) phases (reductions, zero-slack compression,
classical dual update stage 1) run over rows with ``prange``; the searches run sequentially and
emulate the paper's race conditions deterministically (the first tree to claim a vertex keeps it).

Arrays keep the paper's names (section 2.1): ``row_match``/``col_match`` are A_r/A_c, ``u``/``v``
are D_r/D_c (always float64), ``col_pred``/``row_pred`` are P_c/P_r, ``succ_row`` is S_r, ``slack``
is the slack array of the alternating tree variant. Indices are int64 throughout (n*n passes 2**31
at n = 46341). The cost matrix is read in its own dtype and every entry is widened to float64
before arithmetic, so integer costs below 2**53 are exact.

Zero-slack tests: integer costs use ``slack <= 0`` exactly. Float costs in the classical variant use
``slack <= tol_scale * (|c_ij| + |u_i| + |v_j|)``, a bound on the rounding error of computing
``c_ij - u_i - v_j`` (a few ulps of the operands, so it scales with the entries: no fixed epsilon).
The tree variant needs no zero test: it compares slacks with the current dual level.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..constants import KEEP_ROW, SCAN_ROW
from .numba_setup import njit, prange_kernel  # first: cache folder and thread wait policy, before any kernel

INF = np.inf
COLUMN_BLOCK = 256  # columns per task in column-wise reductions (row-major friendly)


# --------------------------------------------------------------------------------------------
# Initial reduction (section 4.1, Algorithm 1) and Jonker-Volgenant initialisation
# --------------------------------------------------------------------------------------------


@prange_kernel(nogil=True)
def row_reduction(C, u):
    """Algorithm 1, row reduction: ``u[i] = min_j C[i, j]``."""
    n_rows, n_cols = C.shape
    for i in prange(n_rows):
        low = INF
        for j in range(n_cols):
            c = np.float64(C[i, j])
            if c < low:
                low = c
        u[i] = low


@prange_kernel(nogil=True)
def column_reduction(C, u, v, argmin):
    """Algorithm 1, column reduction: ``v[j] = min_i (C[i, j] - u[i])`` and its row in ``argmin``.

    Read row by row inside blocks of columns, so the row-major matrix streams through the cache.
    """
    n_rows, n_cols = C.shape
    n_blocks = (n_cols + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    for b in prange(n_blocks):
        lo = b * COLUMN_BLOCK
        hi = min(n_cols, lo + COLUMN_BLOCK)
        for j in range(lo, hi):
            v[j] = INF
            argmin[j] = -1
        for i in range(n_rows):
            ui = u[i]
            for j in range(lo, hi):
                r = np.float64(C[i, j]) - ui
                if r < v[j]:
                    v[j] = r
                    argmin[j] = i


@prange_kernel(nogil=True)
def row_duals_from_columns(C, v, u):
    """``u[i] = min_j (C[i, j] - v[j])``: the largest row duals that keep ``v`` dual feasible."""
    n_rows, n_cols = C.shape
    for i in prange(n_rows):
        low = INF
        for j in range(n_cols):
            r = np.float64(C[i, j]) - v[j]
            if r < low:
                low = r
        u[i] = low


@njit(cache=True, nogil=True, inline="always")
def slack_tolerance(c, ui, vj, tol_scale):
    """The zero-slack test's bound on the rounding error of ``c - ui - vj`` (0 for integer costs)."""
    return tol_scale * (abs(c) + abs(ui) + abs(vj))


@njit(cache=True, nogil=True, inline="always")
def zero_slack(c, ui, vj, tol_scale):
    """The zero-slack test of the module docstring (exact for integer costs: ``tol_scale = 0``)."""
    slack = c - ui - vj
    return slack < INF and slack <= slack_tolerance(c, ui, vj, tol_scale)


@njit(cache=True, nogil=True)
def initial_assignment(C, u, v, row_match, col_match, tol_scale):
    """Greedy matching on zero-slack edges after the initial reduction; returns how many."""
    n_rows, n_cols = C.shape
    count = 0
    for i in range(n_rows):
        ui = u[i]
        for j in range(n_cols):
            if col_match[j] >= 0:
                continue
            if zero_slack(np.float64(C[i, j]), ui, v[j], tol_scale):
                row_match[i] = j
                col_match[j] = i
                count += 1
                break
    return count


@njit(cache=True, nogil=True)
def jv_assignment_from_minima(C, v, argmin, row_match, col_match, count):
    """Jonker & Volgenant (1987) column reduction and reduction transfer, after ``column_reduction``.

    Each column goes to the row holding its minimum when that row is still free; a row that got
    exactly one column transfers its second-smallest reduced cost to that column's dual, which
    keeps every dual feasible (v only decreases). Columns are taken first column first (JV scan
    from the last; either order is exact): with ties to the first row in ``argmin`` and to the
    first free column in ARR, a constant matrix gets the identity, as from scipy (its issue 11602).
    ``count`` is scratch, zeros in (each kernel's scratch comes from its caller: an allocation
    inside a kernel compiles NumPy's allocators too, on a first call).
    """
    n_rows, n_cols = C.shape
    for j in range(n_cols):
        i = argmin[j]
        if count[i] == 0:
            row_match[i] = j
            col_match[j] = i
        count[i] += 1
    assigned = 0
    for i in range(n_rows):
        if count[i] == 0:
            continue
        assigned += 1
        if count[i] != 1:
            continue
        j1 = row_match[i]
        second = INF
        for j in range(n_cols):
            if j != j1:
                r = np.float64(C[i, j]) - v[j]
                if r < second:
                    second = r
        if second < INF:
            v[j1] -= second  # reduction transfer
    return assigned


@njit(cache=True, nogil=True)
def augmenting_row_reduction(C, v, row_match, col_match, free_rows, n_free, passes, budget):
    """Jonker & Volgenant's augmenting row reduction (ARR); returns the number of free rows left.

    A free row takes the column of its smallest reduced cost, lowering that column's dual to the
    row's second-smallest, and the row it displaces is processed next. Only ``v`` decreases, so
    the duals stay feasible with ``u[i] = min_j (C[i, j] - v[j])``. When the minimum is tied, a
    free column at the minimum is taken first (JV's rule alone leaves most rows free on
    low-range integer costs). ``budget`` caps the row visits
    per pass (float costs can cycle through tiny decrements; what is left goes to the search).
    """
    n_rows, n_cols = C.shape
    for _ in range(passes):
        k = 0
        prev_free = n_free
        n_free = 0
        visits = 0
        while k < prev_free:
            i = free_rows[k]
            k += 1
            visits += 1
            if visits > budget:
                free_rows[n_free] = i
                n_free += 1
                continue
            low = INF
            second = INF
            j1 = -1
            j2 = -1
            j_free = -1  # a free column at the current minimum, if any
            for j in range(n_cols):
                h = np.float64(C[i, j]) - v[j]
                if h < second:
                    if h >= low:
                        second = h
                        j2 = j
                    else:
                        second = low
                        j2 = j1
                        low = h
                        j1 = j
                        j_free = -1
                if h == low and j_free < 0 and col_match[j] < 0:
                    j_free = j
            if j_free >= 0 and low == second:
                # ties at the minimum (low-range integer costs): a free tied column is a tight
                # edge that displaces nobody, where JV's rule would displace the owner of j1 or j2
                row_match[i] = j_free
                col_match[j_free] = i
                continue
            if second == INF:
                # a single admissible column: no second value to lower its dual to
                if col_match[j1] < 0:
                    row_match[i] = j1
                    col_match[j1] = i
                else:
                    free_rows[n_free] = i
                    n_free += 1
                continue
            i0 = col_match[j1]
            strict = low < second
            if strict:
                v[j1] -= second - low
            elif i0 >= 0:
                j1 = j2
                i0 = col_match[j2]
            row_match[i] = j1
            col_match[j1] = i
            if i0 >= 0:
                row_match[i0] = -1
                if strict:
                    k -= 1
                    free_rows[k] = i0
                else:
                    free_rows[n_free] = i0
                    n_free += 1
    return n_free


# --------------------------------------------------------------------------------------------
# Optimality check (section 4.2, Algorithm 2)
# --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def optimality_check(row_match, free_rows):
    """Algorithm 2: list the unassigned rows in ``free_rows``; return how many there are."""
    n_free = 0
    for i in range(row_match.shape[0]):
        if row_match[i] < 0:
            free_rows[n_free] = i
            n_free += 1
    return n_free


# --------------------------------------------------------------------------------------------
# Classical variant: CSR compression (3.3), BFS forward pass (4.3.1, Algorithm 3),
# two-stage dual update (4.4, Algorithms 7 and 8)
# --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _row_edges(C, u, v, tol_scale, i, how, old_ptr, old_idx, col_seen, out, k, write):
    """Row ``i``'s zero-slack columns, made as ``how`` says (:data:`~dlap.backends.base.SCAN_ROW`
    and the others), counted from ``k`` (and written to
    ``out[k:]`` when ``write``); returns the count's end."""
    if how == SCAN_ROW:
        ui = u[i]
        for j in range(C.shape[1]):
            if zero_slack(np.float64(C[i, j]), ui, v[j], tol_scale):
                if write:
                    out[k] = j
                k += 1
    else:
        for e in range(old_ptr[i], old_ptr[i + 1]):
            j = old_idx[e]
            if how == KEEP_ROW or not col_seen[j]:
                if write:
                    out[k] = j
                k += 1
    return k


@prange_kernel(nogil=True)
def count_edges(C, u, v, tol_scale, how, old_ptr, old_idx, col_seen, counts):
    """Section 3.3's stream compaction, its predicate count: ``counts[i]``, row i's zero-slack
    edges made as ``how[i]`` says (:data:`SCAN_ROW` for every row: the whole matrix; the others
    take the row's edges from the previous CSR ``old_ptr``/``old_idx``). The backend's prefix
    sum of the counts is the CSR's ``row_ptr``; :func:`scatter_edges` writes the edges."""
    for i in prange(C.shape[0]):
        counts[i] = _row_edges(C, u, v, tol_scale, i, how[i], old_ptr, old_idx, col_seen, counts, 0, False)


@prange_kernel(nogil=True)
def scatter_edges(C, u, v, tol_scale, how, old_ptr, old_idx, col_seen, row_ptr, col_idx):
    """The compaction's scatter: row i's edges (those :func:`count_edges` counted) to
    ``col_idx[row_ptr[i]:row_ptr[i + 1]]``."""
    for i in prange(C.shape[0]):
        _row_edges(C, u, v, tol_scale, i, how[i], old_ptr, old_idx, col_seen, col_idx, row_ptr[i], True)


@njit(cache=True, nogil=True)
def classical_forward_pass(
    row_ptr, col_idx, col_match, free_rows, n_free, col_pred, row_pred, row_seen, col_seen,
    rows_q, reverse, counters, n_resumed,
):
    """Algorithm 3: BFS over the zero-slack graph from every free row, level by level.

    Expansion scans the adjacency lists of the frontier; contraction keeps the rows not yet
    visited. Columns are claimed by the first row that reaches them (the paper's race), so the
    trees are vertex-disjoint (Proposition 1). Free columns reached are marked "reverse".
    ``n_resumed`` > 0 resumes the forest of ``n_resumed`` rows that the previous pass left,
    after a dual update (section 4.4): its marks stay and its rows are expanded again, over the
    edges the update made (:meth:`dlap.backends.base.Backend.classical_forward_pass`).
    Returns ``(n_reverse, n_forest_rows)``; the forest's rows are ``rows_q[:n_forest_rows]``.
    """
    n_q = n_resumed
    if not n_resumed:
        row_seen[:] = False
        col_seen[:] = False
        for k in range(n_free):
            i = free_rows[k]
            row_seen[i] = True
            row_pred[i] = -1
            rows_q[n_q] = i
            n_q += 1
    head = 0
    n_rev = 0
    while head < n_q:  # one BFS level per pass: expansion then contraction
        level_end = n_q
        counters[1] += 1
        while head < level_end:
            i = rows_q[head]
            head += 1
            for e in range(row_ptr[i], row_ptr[i + 1]):
                j = col_idx[e]
                if col_seen[j]:
                    continue
                col_seen[j] = True
                col_pred[j] = i
                i_new = col_match[j]
                if i_new < 0:
                    reverse[n_rev] = j  # candidate for the reverse pass
                    n_rev += 1
                elif not row_seen[i_new]:
                    row_seen[i_new] = True
                    row_pred[i_new] = j
                    rows_q[n_q] = i_new
                    n_q += 1
    return n_rev, n_q


@prange_kernel(nogil=True)
def classical_theta(C, u, v, rows_q, n_q, col_seen, tol_scale, forest_low, row_low):
    """Algorithm 7: theta = min slack over forest rows x uncovered columns, in parallel over the
    forest rows. Returns inf when no finite edge leaves the forest (infeasible).

    Also leaves ``forest_low[q]``: row ``rows_q[q]``'s smallest uncovered slack less twice its
    zero-slack tolerance, which tells the compression after the shift which rows can have gained
    an edge (:func:`dlap.backends.base.rescan_bound`). ``row_low`` is scratch (``n_q`` entries)."""
    n_cols = C.shape[1]
    for q in prange(n_q):
        i = rows_q[q]
        ui = u[i]
        low = INF
        low_tol = INF
        for j in range(n_cols):
            if not col_seen[j]:
                c = np.float64(C[i, j])
                vj = v[j]
                r = c - ui - vj
                if r < low:
                    low = r
                r -= 2 * slack_tolerance(c, ui, vj, tol_scale)
                if r < low_tol:
                    low_tol = r
        row_low[q] = low
        forest_low[q] = low_tol
    theta = INF
    for q in range(n_q):
        if row_low[q] < theta:
            theta = row_low[q]
    return theta


@njit(cache=True, nogil=True)
def classical_shift(u, v, rows_q, n_q, col_seen, theta):
    """Algorithm 8: the forest rows' duals rise and the covered columns' duals fall by theta,
    which keeps every assigned edge tight and makes the minimising edge tight."""
    if theta == INF:
        return
    for q in range(n_q):
        u[rows_q[q]] += theta
    for j in range(v.shape[0]):
        if col_seen[j]:
            v[j] -= theta


# --------------------------------------------------------------------------------------------
# Alternating tree variant: forward pass with slack (4.3.1, Algorithm 4) and O(n) dual update
# (4.4, Algorithm 9)
# --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _scan_row(row, shift, v_open, slack, col_pred, i):
    """Algorithm 4's inner loop for frontier row ``i``: lower the slacks row ``i`` improves.

    Contiguous over all columns: forest columns have ``v_open = -inf``, so their candidate slack
    is +inf and never an update. The branch is rarely taken once the slacks are low.
    """
    for j in range(row.shape[0]):
        s = shift + (np.float64(row[j]) - v_open[j])
        if s < slack[j]:
            slack[j] = s
            col_pred[j] = i


@prange_kernel(nogil=True)
def tree_scan(C, rows, shift, n, v_open, slack, col_pred):
    """Algorithm 4's expansion for an explicit frontier ``rows[:n]`` (the Dask engine's tree
    search on a column slab): blocks of columns in parallel, the frontier rows inside, so each
    block streams the rows' segments. A column keeps the first row that gives its lowest slack.
    """
    n_cols = C.shape[1]
    n_blocks = (n_cols + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    for b in prange(n_blocks):
        lo = b * COLUMN_BLOCK
        hi = min(n_cols, lo + COLUMN_BLOCK)
        for q in range(n):
            i = rows[q]
            _scan_row(C[i, lo:hi], shift[q], v_open[lo:hi], slack[lo:hi], col_pred[lo:hi], i)


@njit(cache=True, nogil=True)
def tree_offer(slack, col_pred, lo, level, out):
    """A tree wave's offer from a column slab (the Dask engine's): ``out[0] = (smallest slack,
    count, 0)``, then (global column, predecessor, slack) of each column with a finite slack at or
    below ``max(level, smallest slack)``, in column order."""
    low = min_slack(slack)
    bound = max(low, level)
    count = 0
    for j in range(slack.shape[0]):
        s = slack[j]
        if s <= bound and s < INF:
            count += 1
            out[count, 0], out[count, 1], out[count, 2] = j + lo, col_pred[j], s
    out[0, 0], out[0, 1], out[0, 2] = low, count, 0.0


@njit(cache=True, nogil=True)
def tree_join(offered, level, lo, slab_slack, slab_v_open, col_pred, col_level, forest_cols, col_match, reverse,
              row_level, row_pred, rows_q, u, shift, wave, first):
    """A tree wave's join on the replica: the offered rows tight at ``level`` join the forest in
    order (GPUBackend's ``tree_join`` kernel does the same with a block-wide prefix sum)."""
    n_forest, n_rev, n_q = wave[0], wave[1], wave[2]
    n_front = 0 if first else wave[3]
    hi = lo + slab_slack.shape[0]
    for k in range(offered.shape[0]):
        s = offered[k, 2]
        if s > level:
            continue
        j = int(offered[k, 0])
        if lo <= j < hi:
            slab_slack[j - lo] = INF
            slab_v_open[j - lo] = -INF
        col_pred[j] = int(offered[k, 1])
        col_level[j] = s
        forest_cols[n_forest] = j
        n_forest += 1
        owner = col_match[j]
        if owner < 0:
            reverse[n_rev] = j
            n_rev += 1
        else:
            rows_q[n_q] = owner
            n_q += 1
            row_level[owner] = s
            row_pred[owner] = j
            shift[n_front] = s - u[owner]
            n_front += 1
    wave[0], wave[1], wave[2], wave[3] = n_forest, n_rev, n_q, n_front


@njit(cache=True, nogil=True)
def min_slack(slack):
    """Minimum slack (forest columns hold +inf). Four accumulators break the compare chain."""
    n = slack.shape[0]
    b0 = b1 = b2 = b3 = INF
    j = 0
    while j + 4 <= n:
        x0, x1, x2, x3 = slack[j], slack[j + 1], slack[j + 2], slack[j + 3]
        b0 = x0 if x0 < b0 else b0
        b1 = x1 if x1 < b1 else b1
        b2 = x2 if x2 < b2 else b2
        b3 = x3 if x3 < b3 else b3
        j += 4
    while j < n:
        b0 = slack[j] if slack[j] < b0 else b0
        j += 1
    b0 = b1 if b1 < b0 else b0
    b2 = b3 if b3 < b2 else b2
    return b2 if b2 < b0 else b0


@njit(cache=True, nogil=True)
def tree_forward_pass(
    C, u, v, col_match, roots, n_roots, collect_ties, slack, col_pred, row_pred, row_level,
    col_level, v_open, forest_cols, rows_q, reverse, counters,
):
    """Algorithm 4 with the O(n) dual update of Algorithm 9 folded in.

    Grows alternating trees from ``roots[:n_roots]`` (all free rows: the paper's parallel
    search; one row: Lawler's sequential tree). Each frontier row updates the slack and
    predecessor of every column outside the forest (Algorithm 4). When no zero-slack column is
    left, the dual update raises the dual level by theta = min slack outside the forest
    (Algorithm 9); the slacks are kept relative to level 0 of this search (``slack[j]`` is the
    level at which column j becomes tight), so the update costs one comparison and the duals
    themselves are shifted once, by :func:`tree_dual_update`. This is the paper's update_2
    applied lazily: the same duals, without n subtractions per update.

    A column that becomes tight joins the forest (it is covered): ``forest_cols[:n]`` lists them,
    ``col_level`` keeps their level. With ``collect_ties`` the search goes on while columns are
    tight at the level where the first free column was reached, so every tree that can end at a
    free column without another dual update does (the paper's several vertex-disjoint paths per
    iteration).

    Returns ``(n_reverse, n_forest_rows, n_forest_cols, level)``; ``n_reverse == -1`` means
    no finite edge leaves the forest (the matrix is infeasible).
    """
    n_cols = C.shape[1]
    for j in range(n_cols):
        slack[j] = INF
        v_open[j] = v[j]
    n_forest = 0
    n_q = 0
    for r in range(n_roots):
        i = roots[r]
        rows_q[n_q] = i
        n_q += 1
        row_level[i] = 0.0
        row_pred[i] = -1
    head = 0
    n_rev = 0
    level = 0.0
    while True:
        while head < n_q:  # expansion: every frontier row updates the slacks (Algorithm 4)
            i = rows_q[head]
            head += 1
            _scan_row(C[i], row_level[i] - u[i], v_open, slack, col_pred, i)
            counters[1] += 1
        best = min_slack(slack)
        if n_rev > 0 and best > level:
            break  # the frontier is exhausted at this dual level: go to the reverse pass
        if best == INF:
            return -1, n_q, n_forest, level
        if best > level:
            level = best  # dual update by theta = best - level (Algorithm 9)
            counters[0] += 1
        j = 0
        while slack[j] > best:
            j += 1
        # column j has zero slack: it joins the forest (it is covered)
        col_level[j] = slack[j]
        slack[j] = INF
        v_open[j] = -INF
        forest_cols[n_forest] = j
        n_forest += 1
        i_new = col_match[j]
        if i_new < 0:
            reverse[n_rev] = j  # an unassigned column with zero slack: reverse pass candidate
            n_rev += 1
            if not collect_ties:
                break
        else:
            row_level[i_new] = col_level[j]  # its row becomes active at the column's level
            row_pred[i_new] = j
            rows_q[n_q] = i_new
            n_q += 1
    return n_rev, n_q, n_forest, level


@njit(cache=True, nogil=True)
def tree_dual_update(u, v, rows_q, n_q, row_level, forest_cols, n_forest, col_level, level):
    """Algorithm 9, applied once per search: forest rows gain, covered columns lose.

    A row that joined at level t gains ``level - t``; a column that became tight at level s
    loses ``level - s``. Assigned edges inside the forest stay tight, and every edge from the
    forest to a column outside it keeps a non-negative slack because that column's slack is at
    least ``level``.
    """
    for q in range(n_q):
        i = rows_q[q]
        u[i] += level - row_level[i]
    for q in range(n_forest):
        j = forest_cols[q]
        v[j] -= level - col_level[j]


# --------------------------------------------------------------------------------------------
# Reverse pass (4.3.2, Algorithm 5) and augmentation pass (4.3.3, Algorithm 6), both variants
# --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def reverse_pass(reverse, n_rev, col_pred, row_pred, succ_row, claimed, aug_roots):
    """Algorithm 5: trace each reverse column back to its root and record successors.

    Two free columns of one tree share its root; the first to claim the root keeps the path (the
    paper's race, Proposition 2), so the surviving paths are vertex-disjoint. Returns the number
    of paths; their roots are ``aug_roots[:n]``.
    """
    n_paths = 0
    for r in range(n_rev):
        j = reverse[r]
        i = col_pred[j]
        while row_pred[i] >= 0:
            i = col_pred[row_pred[i]]
        if claimed[i]:
            continue
        claimed[i] = True
        aug_roots[n_paths] = i
        n_paths += 1
        while j >= 0:
            i = col_pred[j]
            succ_row[i] = j
            j = row_pred[i]
    for q in range(n_paths):
        claimed[aug_roots[q]] = False
    return n_paths


@njit(cache=True, nogil=True)
def augment(aug_roots, n_paths, succ_row, row_match, col_match):
    """Algorithm 6: flip assigned and unassigned edges along every path, from its root."""
    for q in range(n_paths):
        i = aug_roots[q]
        while True:
            j = succ_row[i]
            nxt = col_match[j]
            row_match[i] = j
            col_match[j] = i
            if nxt < 0:
                break
            i = nxt
