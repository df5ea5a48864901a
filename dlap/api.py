"""Public entry points: scipy's ``linear_sum_assignment`` contract, and ``solve`` with the details."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import time
from typing import Any, Unpack, overload

import numpy as np
from numpy.typing import NDArray

from .arrays import adopt
from .backends import backend as backend_for
from .device import choose_device, is_device_array, require_device_memory
from .options import (
    DEVICES,
    INITS,
    METHODS,
    ROOTS,
    STARTS,
    SWITCHINGS,
    Device,
    Init,
    Method,
    Roots,
    SolveOptions,
    Start,
    Switching,
    check_choice,
)
from .problem import Problem, prepare
from .progress import ProgressBar
from .result import Assignment, MatrixReference, Stats, caller_assignment, dgs_answer


@overload
def linear_sum_assignment(cost_matrix: np.ndarray | list, maximize: bool = False,
                          **options: Unpack[SolveOptions]) -> tuple[NDArray[np.int64], NDArray[np.int64]]: ...
@overload
def linear_sum_assignment(cost_matrix: Any, maximize: bool = False, **options: Unpack[SolveOptions]) -> tuple[Any, Any]: ...
def linear_sum_assignment(cost_matrix, maximize: bool = False, **options: Unpack[SolveOptions]):
    """Solve the linear sum assignment problem; a drop-in for scipy's function of that name.

    Parameters
    ----------
    cost_matrix : array_like, 2-D
        The cost matrix; ``+inf`` marks a forbidden pair (``-inf`` when ``maximize``). A PyTorch
        tensor or any DLPack / ``__cuda_array_interface__`` array is read without a copy, and the
        indices come back in its library, on its device.
    maximize : bool
        Maximise the total instead of minimising it.
    **options
        Passed to :func:`solve` (``method``, ``device``, ``init``, ``roots``, and for
        ``method="dgs"`` ``time_limit``, ``start``, ``seed``, ``switching``).

    Returns
    -------
    row_ind, col_ind : int64 arrays
        The optimal assignment, ``row_ind`` sorted; ``cost[row_ind, col_ind].sum()`` is optimal.
        CuPy arrays when ``cost_matrix`` is a CuPy array.

    Raises
    ------
    ValueError
        "expected a matrix (2-D array), ...", "matrix contains invalid numeric entries" (NaN,
        or -inf when minimising), "cost matrix is infeasible" (no assignment avoids +inf).
    """
    cost, give_back = adopt(cost_matrix)  # a PyTorch tensor or DLPack array: read in place, answered in kind
    result = solve(cost, maximize=maximize, **options)
    return give_back(result.row_ind), give_back(result.col_ind)


def solve(
    cost,
    *,
    maximize: bool = False,
    method: Method = "auto",
    device: Device = "auto",
    init: Init = "auto",
    roots: Roots = "auto",
    progress=None,
    time_limit: float | None = None,
    start: Start = "greedy",
    seed=0,
    switching: Switching = "parallel",
) -> Assignment:
    """Solve the LAP exactly (or near-optimally by DGS) and return an :class:`~dlap.Assignment`
    with duals and statistics.

    Parameters
    ----------
    cost : array_like, 2-D
        Cost matrix (any shape; ``+inf`` forbidden). Never modified. A CuPy array is solved on its
        GPU without a host copy, and the results are CuPy arrays.
    maximize : bool
    method : {"auto", "classical", "tree", "hybrid", "scaling", "sparse", "dgs"}
        The variant of Date & Nagi (2016), or the hybrid (classical until it has made a few dual
        updates, then tree; see :mod:`dlap.hungarian.hybrid`), or ``"scaling"``: shortest
        augmenting paths with ε-scaled prices (:mod:`dlap.hungarian.scaling`), the engine for
        structured costs (distances between point sets, benefit matrices, Machol-Wien).
        ``"auto"``: Jonker-Volgenant initialisation, then ε-scaling for a square matrix where it
        leaves more than a tenth of the rows free (structured costs; on a GPU a twentieth), and
        ``"sparse"`` for such a float matrix if it is rectangular, or on the CPU if JV left at
        most half its rows free (distances within point sets; integers too, where they span
        more than n values); otherwise on a GPU the hybrid and
        on the CPU classical for integer costs spanning at most n values and the tree variant
        for the rest (see :mod:`dlap.hungarian.auto`; ``stats.method`` says which ran).
        ``"dgs"``: Deep Greedy Switching (:mod:`dlap.dgs`), a heuristic: the result has
        ``heuristic=True``, the number of 2-exchanges in ``stats.switches`` and a
        ``lower_bound`` from the row and column reductions.
        ``"sparse"``: the sparse-core engine of :func:`dlap.solve_points` on the matrix's cheapest
        entries, every entry priced against its duals until none is below them (exact; an
        integer matrix's duals are whole numbers; on the GPU for a CuPy matrix or
        ``device="gpu"``, its core solved on the host).
    device : {"auto", "cpu", "gpu"}
        ``"auto"``: the GPU for a CuPy array, or for a matrix of at least ``GPU_MIN_ENTRIES``
        entries when CuPy sees a GPU; the CPU otherwise.
    init : {"auto", "jv", "reduction"}
        ``"reduction"`` is the paper's initial reduction; ``"jv"`` adds Jonker-Volgenant column
        reduction, reduction transfer and augmenting row reduction (``"auto"``: ``"jv"``).
        ``method="auto"`` always starts with ``"jv"``; ``"scaling"`` makes its own prices.
    roots : {"auto", "all", "one"}
        Tree variant only: grow trees from all free rows per iteration (the paper's parallel
        search), from one, or all while many rows are free and one after (``"auto"``).
    progress : callable or bool, optional
        ``callback(update)`` called during the solve with a :class:`dlap.SolveProgress` (the
        estimated share of the work done, the stage, matched rows, elapsed seconds, an ETA), at
        most ten times a second and once at the end; or True for a progress bar that appears
        when the solve takes more than a second (exact methods).
    time_limit : float, optional
        ``method="dgs"`` only: seconds from the call after which DGS stops and returns the best
        assignment so far (always full and valid; the start assignment is always completed).
        ``stats.time_limit_reached`` says whether the deadline stopped it (False where it
        converged, or returned its greedy start early because its kernels were still loading:
        ``stats.phase_counts["kernels_loading"]``). The promise: the answer comes back within
        ``time_limit`` plus one step of about 2**20 matrix entries wherever ``time_limit``
        leaves room for what every answer needs (one pass that checks the matrix, the
        reductions that give ``lower_bound``, and the completion of the greedy start); where it
        does not, right after those (``stats.phase_seconds`` times them). How far past their
        deadlines solves end, idle and with every core busy, is measured by
        ``dlap bench --suite deadlines``.
    start : {"greedy", "random"}
        ``method="dgs"``: the start assignment (``"random"``: a permutation drawn from ``seed``).
    seed : int or numpy.random.SeedSequence
        ``method="dgs"``, ``start="random"``: the seed; the same seed gives the same assignment.
    switching : {"parallel", "sequential"}
        ``method="dgs"``: apply every non-conflicting 2-exchange per round (Roverso et al.'s
        Algorithm 3, CPU or GPU) or the single best one (Algorithm 1, CPU only).

    Raises
    ------
    ValueError
        scipy's errors (see :func:`linear_sum_assignment`) and unknown option values.
    RuntimeError
        ``device="gpu"`` where CuPy is not installed or sees no GPU.
    MemoryError
        the matrix (or the copy the solve needs) does not fit in free GPU memory; raised before
        anything is allocated, with the sizes.
    """
    check_choice("method", method, METHODS)
    check_choice("device", device, DEVICES)
    check_choice("init", init, INITS)
    check_choice("roots", roots, ROOTS)
    check_choice("start", start, STARTS)
    check_choice("switching", switching, SWITCHINGS)
    if time_limit is not None and method != "dgs":
        raise ValueError("time_limit applies to method='dgs' (the exact methods run to the optimum)")
    if time_limit is not None:
        time_limit = _seconds(time_limit)
    started = time.perf_counter()
    if method == "dgs" and switching == "sequential":
        if device == "gpu":
            raise ValueError("switching='sequential' runs on the CPU; use device='cpu' or switching='parallel'")
        device = "cpu"
    device = choose_device(cost, device)
    reference = MatrixReference(cost)  # the caller's own array (a view dlap makes of it dies at once)
    if device == "cpu" and is_device_array(cost):
        cost = cost.get()  # the CPU solves a host copy; results go back to the caller's GPU
    # a GPU solve checks (and negates) a float matrix on the GPU, as it copies it there; DGS's
    # host start reads the matrix as prepared
    problem = prepare(cost, maximize, deferred=device == "gpu" and method not in ("dgs", "sparse"))
    stats = Stats(device=device)
    if problem.matrix.size == 0:
        row_match, u, v = np.empty(0, dtype=np.int64), np.zeros(problem.n_rows), np.zeros(problem.n_cols)
        stats.method = method
    elif method == "sparse":
        problem, (row_match, u, v) = _solve_sparse_or_tree(device, cost, maximize, problem, stats, roots, progress)
    elif method == "dgs":
        deadline = started + (np.inf if time_limit is None else time_limit)
        row_match, u, v = _solve_dgs(device, problem, stats, deadline, start=start, seed=seed, switching=switching)
    else:
        backend = backend_for(device)
        with _host_threads(backend, problem) as threads:
            stats.threads = threads or 0
            solved = _run(backend, problem, stats, method, init, roots, progress)
        if isinstance(solved, Problem):  # auto left the matrix to the sparse-core engine
            problem, solved = _solve_sparse_or_tree(device, cost, maximize, solved, stats, roots, progress)
        row_match, u, v = solved
    result = (dgs_answer if method == "dgs" else caller_assignment)(problem, row_match, u, v, stats, reference)
    stats.seconds = time.perf_counter() - started
    return result


def _seconds(time_limit) -> float:
    """``time_limit`` as float seconds (``inf``: none); ValueError for anything else, 10**400
    included (issue 37: OverflowError)."""
    try:
        seconds = float(time_limit) if isinstance(time_limit, numbers.Real) else math.nan
    except OverflowError:
        seconds = math.nan
    if isinstance(time_limit, bool) or not seconds >= 0:
        raise ValueError(f"time_limit must be a non-negative number of seconds; got {time_limit!r}")
    return seconds


def _host_threads(backend, problem: Problem):
    """The CPU's thread count for this solve (:mod:`dlap.threads`: one for small problems)."""
    if backend.device != "cpu":
        return contextlib.nullcontext()
    from .threads import solve_threads

    return solve_threads(problem.matrix.size)


def _run(backend, problem: Problem, stats: Stats, method, init, roots, progress):
    """``method`` on ``backend``: the row matching and duals; or where ``method="auto"`` leaves the
    matrix to the sparse-core engine (:data:`dlap.hungarian.auto.SPARSE`), the problem of the
    matrix the backend placed (checked, in minimisation form: no second copy)."""
    from .hungarian import device_variant, run_method

    state = backend.allocate(problem)
    with ProgressBar(progress) as callback:
        handed_over = run_method(backend, state, stats, method, variant=device_variant(backend, problem.matrix),
                                 init="jv" if init == "auto" else init, roots=roots, progress=callback,
                                 sparse=True, integer=problem.is_integer)
    if handed_over:
        matrix, exponent = backend.placed_matrix(state)
        return dataclasses.replace(problem, matrix=matrix, deferred=False,
                                   scale_exponent=problem.scale_exponent + exponent)
    if problem.on_device:
        return backend.to_device(state)
    return backend.to_host(state)


def _solve_sparse_or_tree(device: str, cost, maximize: bool, problem: Problem, stats: Stats, roots, progress):
    """The sparse-core engine on ``problem`` (``cost`` prepared, not deferred), or where its duals
    cannot prove its answer the tree variant, as scaling's fallback: the problem solved and its
    row matching and duals."""
    solved = _solve_sparse(device, problem, stats, progress)
    if solved is None:
        problem = prepare(cost, maximize, deferred=device == "gpu")
        backend = backend_for(device)
        with _host_threads(backend, problem):
            solved = _run(backend, problem, stats, "tree", "jv", roots, progress)
    return problem, solved


def _solve_sparse(device: str, problem: Problem, stats: Stats, progress):
    """:func:`dlap.hungarian.sparse.solve_sparse` on the matrix, where ``device`` is: its row
    matching and duals, or None where its duals cannot prove its answer."""
    from .hungarian.sparse import solve_sparse
    from .threads import solve_threads

    matrix = problem.matrix
    if device == "gpu" and not problem.on_device:
        import cupy

        require_device_memory(matrix.nbytes, f"method='sparse' on a {matrix.shape[0]} x {matrix.shape[1]} matrix")
        matrix = cupy.asarray(matrix)
    with solve_threads(matrix.size) as threads, ProgressBar(progress) as callback:
        stats.threads = threads
        return solve_sparse(matrix, stats, callback)


def _solve_dgs(device: str, problem: Problem, stats: Stats, deadline: float, **options):
    """Deep Greedy Switching within ``deadline``, the first call of a process included: where the
    device's kernels for this matrix are not loaded, the start is made in NumPy, the kernels are
    loaded in the background (for this call where there is time, else for the next ones), and
    the start is the answer unless they come in time (:mod:`dlap.dgs.loading`)."""
    from .dgs import loading, run_dgs
    from .timing import PhaseTimer

    initial = None
    if deadline < np.inf and not loading.kernels_ready(device, problem.matrix):
        with PhaseTimer(stats)("host_start"):
            initial, u, v = loading.host_start(problem, deadline)
        # (issue 37: with less than LOAD_MIN_SECONDS left they were never loaded, and every later
        # call with a short deadline answered its greedy start too)
        loader = loading.load_in_background(device, problem.matrix)
        left = deadline - time.perf_counter()
        complete = bool((initial >= 0).all())  # else forbidden pairs: only the device's repair finishes it
        if complete and left < loading.LOAD_MIN_SECONDS:
            loading.warn_not_loaded(device, problem.matrix)
            return _start_is_the_answer(problem, stats, left <= 0, initial, u, v)
        if not loader.wait(left * (1 - loading.WAKE_MARGIN)):
            if complete:
                return _start_is_the_answer(problem, stats, True, initial, u, v)
            loader.wait(np.inf)
    backend = backend_for(device)
    with _host_threads(backend, problem) as threads:
        stats.threads = threads or 0
        solution = run_dgs(backend, problem, stats, deadline, initial=initial, **options)
    loading.mark_loaded(device, problem.matrix)  # what this solve did not run loads in milliseconds
    return solution


def _start_is_the_answer(problem: Problem, stats: Stats, reached: bool, *arrays):
    """DGS's answer is the host start (``reached``: the deadline stopped it; else the kernels were
    still loading and the call returned before its deadline): its arrays, on the GPU when the
    caller's matrix is there."""
    stats.method, stats.time_limit_reached = "dgs", reached
    stats.phase_counts["kernels_loading"] = 1
    if not problem.on_device:
        return arrays
    import cupy

    return tuple(cupy.asarray(a) for a in arrays)
