"""DGS within a deadline from the first call of a process: the compiled kernels and their loading.

The first solve of a process loads dlap's compiled kernels: on the CPU Numba itself (its import and
its typing context, 0.3 to 0.6 s on a 2-core machine) and then each kernel from the disk cache; on
the GPU CuPy, the CUDA context and the kernel modules (compiled by NVRTC on a machine's first run).
A DGS deadline of 50 ms cannot wait for that, nor share the interpreter with it: a thread loading
Numba holds the interpreter lock for up to 30 to 100 ms at a time (extension modules, LLVM), so a
deadline met on paper would be missed by the caller. Hence:

- :func:`load_dgs_kernels` loads them now (a tiny DGS solve of the dtype on the device runs every
  kernel DGS uses); a program with a deadline calls it once at start-up. ``dlap solve --method
  dgs --time-limit`` does, outside the timed solve; a solve without a deadline loads them anyway.
- A solve with a deadline whose kernels are not loaded makes, in NumPy only, the row and column
  reductions (its lower bound) and the greedy start (:func:`host_start`; Roverso et al., section
  3.1), cut short by the deadline, then starts loading the kernels in a thread. With at least
  :data:`LOAD_MIN_SECONDS` left it waits for them and goes on from that start on the device if
  they are there before the deadline (less a margin for taking the interpreter back); otherwise
  it returns the start (no switches; ``stats.time_limit_reached`` only where the deadline
  stopped it, ``stats.phase_counts["kernels_loading"]``) and warns once that
  :func:`load_dgs_kernels` was not called. The loading goes on, so later calls switch.
"""

from __future__ import annotations

import math
import threading
import warnings

import numpy as np

from ..problem import InfeasibleError, Problem

#: a solve with a deadline loads missing kernels (in a thread) only with this many seconds left
#: after its start: loading takes 0.3 to 0.6 s on the CPU when the disk cache is warm
LOAD_MIN_SECONDS = 1.0
#: the wait for a loading thread ends this share of the time left before the deadline
WAKE_MARGIN = 0.1
#: the GPU's kernels are loaded on a matrix of this size too (CuPy compiles per block size)
GPU_WARM_UP_N = 2048
#: and on matrices of these sizes: CuPy compiles its reductions (CUB's) per block size, which it
#: picks by the length reduced (32 to 512 threads: up to 128, 256, 512, 1024 elements and more),
#: so each class of rows needs its own, or a first call of that class compiles within its deadline
GPU_SIZE_CLASSES = (200, 400, 800, GPU_WARM_UP_N)
#: matrix entries per NumPy block (the reductions, a proposal call); the clock is read between blocks
HOST_CHUNK_ENTRIES = 1 << 20

_lock = threading.Lock()
_loaded: set[tuple] = set()
_loaders: dict[tuple, _Loader] = {}
_warned: set[tuple] = set()


def _key(device: str, dtype) -> tuple:
    return device, np.dtype(dtype).str


def _matrix_key(device: str, matrix) -> tuple:
    return _key(device, matrix.dtype)


def kernels_ready(device: str, matrix) -> bool:
    """Whether DGS's kernels for ``matrix``'s dtype are loaded on ``device`` (the CPU's read every
    matrix as a read-only view, writable or not: :func:`dlap.backends.cpu.numba_setup.read_only`)."""
    return _matrix_key(device, matrix) in _loaded


def mark_loaded(device: str, matrix) -> None:
    """Record that a DGS solve of ``matrix``'s kind ran on ``device``'s kernels: Numba and its
    typing context, or CuPy's modules, are loaded; a kernel that solve did not use (the other
    switching) loads in milliseconds."""
    _loaded.add(_matrix_key(device, matrix))


def load_dgs_kernels(dtype="float64", device: str = "auto") -> None:
    """Load the compiled Deep Greedy Switching kernels for cost matrices of ``dtype`` on
    ``device`` ("cpu", "gpu", or "auto": the GPU when one is visible), minimised or maximised,
    so that ``solve(method="dgs", time_limit=...)``
    switches from its first call. Takes 0.3 to 1 s once per process on the CPU, 2 to 3 s on a GPU
    (solves of each class of sizes CuPy compiles its own kernels for), more on a machine's first
    run, which compiles them into the disk cache; a no-op for what is loaded already."""
    from ..device import choose_device, gpu_available
    from ..options import DEVICES, check_choice
    from ..problem import working_dtype

    check_choice("device", device, DEVICES)
    # "auto" means the GPU whenever one is visible, not only for large matrices as for a solve
    device = "gpu" if device == "auto" and gpu_available() else choose_device(np.zeros((1, 1)), device)
    dtype = np.dtype(dtype)
    for solved in dict.fromkeys(working_dtype(dtype, maximize) for maximize in (False, True)):
        key = _key(device, solved)
        if key not in _loaded:
            _load(device, solved, None)
            _loaded.add(key)


def _load(device: str, dtype: np.dtype, gpu_id: int | None) -> None:
    """One tiny DGS solve per switching of ``device``, so every kernel it uses is loaded (the
    matrices are of the dtype the solvers read)."""
    tiny = warm_up_matrix(dtype)
    if device == "gpu":
        import cupy

        with cupy.cuda.Device(gpu_id if gpu_id is not None else cupy.cuda.runtime.getDevice()):
            _tiny_solve("gpu", cupy.asarray(tiny), "parallel")
            for n in GPU_SIZE_CLASSES:  # CuPy sizes the blocks of its reductions by the input
                _first_calls(_uniform(n, dtype))
            cupy.cuda.get_current_stream().synchronize()
        return
    for switching in ("parallel", "sequential"):
        _tiny_solve("cpu", tiny, switching)
    _start_thread_team(tiny)


def _tiny_solve(device: str, matrix, switching: str, maximize: bool = False, initial=None) -> None:
    """DGS to convergence on ``matrix`` (minimised, or ``maximize``d), from its greedy start or
    from ``initial`` (a row's column, -1 for none) as a call whose kernels were loading starts,
    and its answer made as a call makes it (:func:`dlap.result.dgs_answer`: on the GPU, CuPy's
    kernels for a CuPy matrix's)."""
    from ..backends import backend
    from ..problem import prepare
    from ..result import MatrixReference, Stats, dgs_answer
    from ..threads import solve_threads
    from . import run_dgs

    problem, stats = prepare(matrix, maximize), Stats(device=device)
    with solve_threads(matrix.size):
        solution = run_dgs(backend(device), problem, stats, math.inf, start="greedy", seed=0, switching=switching,
                           initial=initial)
    dgs_answer(problem, *solution, stats, MatrixReference(matrix))


def _first_calls(matrix: np.ndarray) -> None:
    """What first calls on the GPU run on a matrix of ``matrix``'s class of sizes: DGS from the
    host matrix and from a copy on the GPU, minimised and maximised (CuPy compiles its reductions,
    scans and elementwise kernels per block size, array layout and dtype), and from a start that
    leaves a row to the repair."""
    import cupy

    for caller in (matrix, cupy.asarray(matrix)):
        for maximize in (False, True):
            _tiny_solve("gpu", caller, "parallel", maximize)
    initial = np.arange(matrix.shape[0])
    initial[-1] = -1
    _tiny_solve("gpu", matrix, "parallel", initial=initial)


def _start_thread_team(tiny: np.ndarray) -> None:
    """The kernels a thread team runs, and the team itself: the tiny solves ran on one thread
    (serial twins), and a first parallel region that starts the team takes up to 0.1 s on a busy
    machine (a large solve runs on the team)."""
    from ..backends.cpu import dgs
    from ..backends.cpu.numba_setup import compile_team_twins, read_only
    from ..threads import SERIAL_MAX_ENTRIES, solve_threads

    compile_team_twins(dgs.__name__)
    with solve_threads(SERIAL_MAX_ENTRIES):
        dgs.transpose(read_only(tiny), np.empty(tiny.shape[::-1], dtype=tiny.dtype))


class _Loader:
    """:func:`_load` in a thread. Not a daemon: a process that ends meanwhile waits for it rather
    than stop a compiler writing its cache."""

    def __init__(self, key: tuple, gpu_id: int | None):
        self.key = key
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(gpu_id,), name=f"dlap-load-{key}", daemon=False)
        self.thread.start()

    def _run(self, gpu_id):
        device, dtype = self.key
        try:
            _load(device, np.dtype(dtype), gpu_id)
            _loaded.add(self.key)
        except BaseException as e:  # reported to the solve that waits for it
            self.error = e
        finally:
            self.done.set()

    def wait(self, seconds: float) -> bool:
        """Whether the kernels are loaded within ``seconds``; raise what stopped the loading."""
        ready = self.done.wait(max(0.0, seconds))
        if ready and self.error is not None:
            raise self.error
        return ready


def load_in_background(device: str, matrix) -> _Loader:
    """The thread loading DGS's kernels for ``matrix`` on ``device``: the one under way, or a new
    one (also after one failed)."""
    key = _matrix_key(device, matrix)
    with _lock:
        loader = _loaders.get(key)
        if loader is None or (loader.done.is_set() and loader.error is not None):
            gpu_id = None
            if device == "gpu":
                import cupy  # imported already: the device was chosen with it

                gpu_id = cupy.cuda.runtime.getDevice()
            loader = _loaders[key] = _Loader(key, gpu_id)
    return loader


def warn_not_loaded(device: str, matrix) -> None:
    """Once per kind of matrix: the answer is the start, as the kernels were not loaded."""
    key = _matrix_key(device, matrix)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(
            f"DGS returned its greedy start: its {device} kernels for {matrix.dtype} matrices were not loaded "
            "(seconds; they are loading now, for the next calls); call "
            f"dlap.load_dgs_kernels({str(matrix.dtype)!r}, {device!r}) once before solves with a deadline",
            RuntimeWarning, stacklevel=4)


def _uniform(n: int, dtype) -> np.ndarray:
    return (np.random.default_rng(0).random((n, n)) * n).astype(dtype)


def warm_up_matrix(dtype) -> np.ndarray:
    """A 4 x 4 matrix of ``dtype`` on which DGS runs every phase: the greedy start leaves row 1
    only a forbidden pair (float dtypes), so the repair runs, and its answer has an improving
    2-exchange (rows 0 and 2), so a switch is applied."""
    forbidden = math.inf if np.dtype(dtype).kind == "f" else 99
    matrix = np.array([[1, 2, 5, 8], [2, forbidden, 3, forbidden], [9, 1, 5, 3], [4, 6, 1, 9]])
    return matrix.astype(dtype)


def host_start(problem: Problem, deadline: float):
    """``(row_match, u, v)`` in NumPy: the reductions DGS reports as its bound (rows, and columns
    for a square matrix, as ``Backend.initial_reduction``) and the greedy start, its proposal
    rounds stopped by ``deadline``. Rows left unassigned then take the unheld columns in order;
    those that would sit on a forbidden pair stay at -1 for the device's repair."""
    from .switching import Deadline, greedy_start

    cost = problem.matrix
    if not isinstance(cost, np.ndarray):
        cost = cost.get()  # a CuPy matrix: the start is made on a host copy
    u, v = _reductions(cost, columns=problem.n_rows == problem.n_cols)
    state = _HostAssignment(cost)
    greedy_start(_HostProposals(), state, Deadline(deadline))
    return state.row_match, u, v


def _reductions(cost: np.ndarray, columns: bool):
    """Section 4.1 of Date & Nagi: u_i = min_j c_ij, then v_j = min_i (c_ij - u_i), in row blocks."""
    u = cost.min(axis=1).astype(np.float64)
    if not np.isfinite(u).all():
        raise InfeasibleError()  # a row of forbidden entries only
    v = np.zeros(cost.shape[1])
    if columns:
        v[:] = math.inf
        step = max(1, HOST_CHUNK_ENTRIES // max(cost.shape[1], 1))
        for lo in range(0, cost.shape[0], step):
            block = cost[lo:lo + step].astype(np.float64) - u[lo:lo + step, None]
            np.minimum(v, block.min(axis=0), out=v)
        if not np.isfinite(v).all():
            raise InfeasibleError()  # a column of forbidden entries only
    return u, v


class _HostAssignment:
    """What :func:`~dlap.dgs.switching.greedy_start` reads and writes of a DGS state."""

    def __init__(self, cost: np.ndarray):
        self.cost = cost
        self.n_rows, self.n_cols = cost.shape
        self.row_match = np.full(self.n_rows, -1, dtype=np.int64)
        self.col_match = np.full(self.n_cols, -1, dtype=np.int64)


class _HostProposals:
    """The greedy start's proposal round in NumPy (``SwitchingPrimitives.propose``); the driver
    calls it on blocks of :data:`HOST_CHUNK_ENTRIES` entries and looks at the clock between them."""

    xp = np
    index_dtype = np.int64
    evaluation_chunk = HOST_CHUNK_ENTRIES

    def propose(self, state: _HostAssignment, rows):
        cols = np.full(rows.size, -1, dtype=np.int64)
        costs = np.full(rows.size, math.inf)
        unheld = np.flatnonzero(state.col_match < 0)
        if unheld.size:
            block = state.cost[np.ix_(rows, unheld)]
            best = block.argmin(axis=1)
            costs[:] = block[np.arange(best.size), best]
            cols[:] = np.where(costs < math.inf, unheld[best], -1)
        return cols, costs
