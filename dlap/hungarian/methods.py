"""The exact methods by name: the one table that ``dlap.solve`` and every rank of a Dask solve run."""

from __future__ import annotations

from ..result import Stats
from .auto import solve_auto
from .classical import solve_classical
from .hybrid import solve_hybrid
from .scaling import solve_scaling
from .tree import solve_tree

#: rows sampled to estimate an integer matrix's cost range (:func:`device_variant`)
RANGE_SAMPLE_ROWS = 64


def run_method(backend, state, stats: Stats, method: str, *, variant: str = "tree", init: str = "jv",
               roots: str = "auto", progress=None, sparse: bool = False, integer: bool = False) -> str | None:
    """``method`` to optimality on ``state`` (mutated in place): ``"auto"`` runs JV, then
    ``variant``, handing structured costs over to ε-scaling (:mod:`.auto`), or with ``sparse``
    returning :data:`.auto.SPARSE` for the caller's sparse-core engine (``integer``: of an
    integer matrix); ``"scaling"`` the
    ε-scaling engine; ``"classical"``, ``"hybrid"`` and ``"tree"`` the variant from ``init``.
    ``roots="auto"`` is ``"all"`` on a GPU (one tree per iteration would leave it idle)."""
    if roots == "auto" and backend.device == "gpu":
        roots = "all"
    if method == "auto":
        return solve_auto(backend, state, stats, variant, roots=roots, progress=progress, sparse=sparse,
                          integer=integer)
    if method == "scaling":
        solve_scaling(backend, state, stats, progress=progress, roots=roots)
    elif method == "classical":
        solve_classical(backend, state, stats, init=init, progress=progress)
    elif method == "hybrid":
        solve_hybrid(backend, state, stats, init=init, progress=progress)
    else:
        solve_tree(backend, state, stats, init=init, roots=roots, progress=progress)
    return None


def device_variant(backend, cost) -> str:
    """The variant ``method="auto"`` runs after JV initialisation, where it leaves few rows free:
    the hybrid on a GPU; on the CPU the variant that was faster on this kind of input
    (docs/benchmarks.md). Integer costs spanning at most ``n_cols`` values (the paper's f <= 1)
    make a dense zero-slack graph, where the classical BFS over the compressed edges finds many
    paths per round (uniform f = 0.1, n = 4000: 0.05 s against 1.8 s for the tree variant);
    wider integer ranges and float costs favour the tree variant (geometric n = 1000: 0.04 s
    against 2.6 s). The range is estimated from evenly spaced rows: no pass over the matrix."""
    if backend.device == "gpu":
        return "hybrid"
    if cost.dtype.kind not in "iu":
        return "tree"
    sample = cost[:: max(1, cost.shape[0] // RANGE_SAMPLE_ROWS)]
    return "classical" if int(sample.max()) - int(sample.min()) <= cost.shape[1] else "tree"
