"""Numba's settings for dlap's CPU kernels: where it caches them, and how its threads wait.

Every module with Numba kernels imports this one first, so both settings are in place before a
kernel is compiled or a thread team is started.

**Cache folder.** With ``cache=True`` Numba writes its cache next to a module's source by default,
that is inside ``site-packages/dlap``. Those files are no part of what pip installed, so
``pip uninstall`` (or the reinstall that ``pip install -e .`` makes after ``pip install .``) leaves
them behind in a ``dlap/`` folder without ``__init__.py``, which then shadows the editable
install: ``import dlap`` found no ``solve``. The cache goes to the user's cache folder instead. A
user's own choice (``NUMBA_CACHE_DIR``) stands; where the folder cannot be written, Numba falls
back to its defaults. Numba has one cache folder per process, so other ``cache=True`` functions
compiled after ``import dlap`` are cached there too (each under a path named after its source file,
so nothing collides); set ``NUMBA_CACHE_DIR`` to keep them elsewhere.

**Wait policy.** Numba's OpenMP thread team busy-waits between parallel regions by default. On a
machine whose cores other processes use, a region then waits for team threads the scheduler has
put aside (on a 2-core machine with two busy processes, a solve of n = 2000 took 178 ms on a
spinning team against 63 ms on one thread). A passive policy lets idle team threads sleep (76 ms
there). ``OMP_WAIT_POLICY`` is read when the OpenMP runtime starts,
so it is set here, unless the user set it, before any kernel runs; a runtime another library
started earlier in the process keeps its own policy. Small problems run on one thread anyway
(:mod:`dlap.threads`).

**Cache updates under a lock.** Numba adds a kernel's compiled version to the cache by reading
the kernel's index, naming a data file after the entries it found, and writing both back. Two
processes that compile one kernel for different types at once (``dlap warmup --jobs``, Dask
workers, a test suite's processes) can both read the index before either writes it and name
both data files alike; the index then gives one type the other's machine code in every later
process (wrong numbers, or "can't unbox array"; Numba's issue 10128). dlap's kernels
(:func:`njit`, :class:`PrangeKernel`) read and update their cache entries under a lock on a file
beside the index (:class:`LockedIndex`; where the platform has ``fcntl``).

**Read-only costs.** Numba types a read-only array apart from a writable one and compiles each
kernel for both: a caller's memory-mapped matrix cost a second compilation of every kernel it
reached, and the test suite's run on an empty cache compiled 238 kernel versions (160 since, and
its tests ran 74 s faster on this project's 2-core machine). The CPU backends hand their kernels
the cost matrix as a read-only view (:func:`read_only`), whatever the caller's array, so each
kernel is compiled once per dtype, and a kernel that wrote to the matrix would not compile.
"""

from __future__ import annotations

import functools
import os
import types
from contextlib import contextmanager
from pathlib import Path

import numba
from numba.core.caching import IndexDataCacheFile

try:
    import fcntl
except ImportError:  # no POSIX file locks (Windows): Numba's own unlocked updates
    fcntl = None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/dlap/numba``, or ``~/.cache/dlap/numba``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dlap" / "numba"


def read_only(matrix):
    """A read-only view of ``matrix`` (a NumPy array): how the CPU kernels receive a cost matrix."""
    view = matrix.view()
    view.flags.writeable = False
    return view


if not numba.config.CACHE_DIR:
    numba.config.CACHE_DIR = str(cache_dir())


@contextmanager
def _locked(index_path: str, exclusive: bool):
    """``index_path``'s lock (a file beside it), held exclusively or shared where it can be taken:
    not where the platform has no ``fcntl``, the folder cannot be written (Numba then caches
    elsewhere) or its file system has no locks (some network mounts)."""
    lock = None
    if fcntl is not None:
        try:
            lock = open(f"{index_path}.lock", "ab")  # noqa: SIM115 (closed below)
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            if lock is not None:
                lock.close()
            lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.close()  # which releases the lock


class LockedIndex(IndexDataCacheFile):
    """Numba's index and data files of one kernel's cache, saved under an exclusive lock (the
    index read, the entry named, both files written) and loaded under a shared one, so processes
    that compile the kernel at once never give two entries one data file."""

    def save(self, key, data):
        with _locked(self._index_path, exclusive=True):
            super().save(key, data)

    def load(self, key):
        with _locked(self._index_path, exclusive=False):
            return super().load(key)


def locked_cache(dispatcher):
    """``dispatcher`` (Numba's, with ``cache=True``) reading and writing its cache through
    :class:`LockedIndex`; returns it."""
    cache = getattr(dispatcher, "_cache", None)
    if isinstance(getattr(cache, "_cache_file", None), IndexDataCacheFile):
        cache._cache_file.__class__ = LockedIndex
    return dispatcher


def njit(py_func=None, **options):
    """``numba.njit`` for dlap's kernels: ``@njit(cache=True, ...)`` caches through
    :class:`LockedIndex`."""
    if py_func is None:
        return lambda f: njit(f, **options)
    dispatcher = numba.njit(**options)(py_func)
    return locked_cache(dispatcher) if options.get("cache") else dispatcher

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class PrangeKernel:
    """A ``prange`` kernel compiled from one function twice: :attr:`parallel` for a thread team,
    :attr:`serial` for one thread (``prange`` as ``range``), called by whichever Numba's thread
    count asks for. Small solves run on one thread (:mod:`dlap.threads`), and Numba compiles a
    parallel kernel about three times slower than a serial one, so a first small solve compiles
    only serial twins; the parallel ones compile when a solve first runs on a team. Each twin has
    a cache entry of its own (Numba keys its cache by the function's qualified name, not by its
    options). Called from Python only: a Numba function calls :attr:`serial` or :attr:`parallel`."""

    def __init__(self, py_func, options: dict):
        self.parallel = njit(py_func, cache=True, parallel=True, **options)
        twin = types.FunctionType(py_func.__code__, py_func.__globals__, f"{py_func.__name__}_serial",
                                  py_func.__defaults__, py_func.__closure__)
        twin.__qualname__, twin.__module__ = f"{py_func.__qualname__}_serial", py_func.__module__
        self.serial = njit(twin, cache=True, **options)
        functools.update_wrapper(self, py_func)
        KERNELS.append(self)

    def __call__(self, *args):
        return (self.serial if numba.get_num_threads() == 1 else self.parallel)(*args)

    @property
    def signatures(self) -> list:
        """The argument types each twin is compiled for."""
        return self.serial.signatures + self.parallel.signatures


#: every :class:`PrangeKernel`, in the order their modules defined them
KERNELS: list[PrangeKernel] = []


def prange_kernel(py_func=None, **options):
    """``@prange_kernel`` or ``@prange_kernel(nogil=True)``: a :class:`PrangeKernel` (Numba's
    ``cache=True`` and ``parallel=True`` for the team's twin, and ``options`` for both)."""
    if py_func is None:
        return lambda f: PrangeKernel(f, options)
    return PrangeKernel(py_func, options)


def compile_team_twins(module: str | None = None, share: tuple[int, int] = (0, 1)) -> None:
    """Compile (or load from the cache) each kernel's :attr:`~PrangeKernel.parallel` twin for
    the argument types its serial twin was compiled for (only ``module``'s kernels where it is
    named): what a warm-up of small solves leaves for the large ones. ``share`` ``(i, n)``: every
    n-th of those (kernel, types) pairs from the i-th, in an order of their names (n processes
    that compiled the same serial twins, in any order, compile them side by side)."""
    part, parts = share
    pairs = sorted(((kernel, signature) for kernel in KERNELS if module is None or kernel.__module__ == module
                    for signature in kernel.serial.signatures),
                   key=lambda pair: (pair[0].__module__, pair[0].__qualname__, str(pair[1])))
    for kernel, signature in pairs[part::parts]:
        kernel.parallel.compile(signature)
