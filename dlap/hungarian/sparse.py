"""``method="sparse"``, and the matrices ``method="auto"`` gives it (:func:`.auto.for_the_sparse_engine`): the sparse-core
engine of :mod:`dlap.points.core` on a given matrix (:class:`dlap.points.matrix.MatrixSearch`: its
cheapest entries as candidates, one pass over it a pricing round), its answer kept only where its
duals prove it at the precision of the costs it sums (as the ε-scaling engine's: :func:`.scaling.gap_closes`)."""

from __future__ import annotations

import numpy as np

from ..points import core
from ..points.matrix import MatrixSearch
from ..result import Stats
from .scaling import gap_closes


def solve_sparse(matrix, stats: Stats, progress=None):
    """``(row_match, u, v)`` (NumPy) of ``matrix`` (minimisation form, ``n <= m``; NumPy, or CuPy
    to compute its candidates and pricing on its GPU; integers within :data:`dlap.problem.MAX_INTEGER_SPAN`
    get whole-number duals), or None where the duals do not prove the answer
    (``stats.phase_counts["sparse_imprecise"]``): the caller then runs another method."""
    stats.method = "sparse"
    search = MatrixSearch(matrix)
    solution = core.solve_core(search, stats, core.DEFAULT_CANDIDATES, progress,  # read at each call (tests set it)
                               whole=matrix.dtype.kind in "iu")
    if solution.whole:  # whole numbers: pricing and the tight matched pairs are exact, so is the proof
        return solution.col4row, solution.u, solution.v
    n_rows, n_cols = matrix.shape
    matched = search.pair_costs(np.arange(n_rows), solution.col4row)
    if not gap_closes(matched, search.reduced_minima(solution.v), solution.v,
                      lambda: search.reduced_minima(np.zeros(n_cols))):
        stats.phase_counts["sparse_imprecise"] = 1
        return None
    return solution.col4row, solution.u, solution.v
