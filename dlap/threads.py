"""How many threads a CPU solve runs on.

The CPU kernels are Numba ``prange`` loops (the paper's OpenMP analogue). A thread team pays off
on large matrices and costs more than it saves on small ones, most of all on a machine whose cores
other processes use: every parallel region then waits for team threads the scheduler has put
aside. So a solve of fewer than :data:`SERIAL_MAX_ENTRIES` entries runs on the calling thread
alone, and a larger one on at most :func:`get_num_threads` threads. The limit is
``DLAP_NUM_THREADS`` from the environment, or :func:`set_num_threads`, or the cores this process
may run on (its CPU affinity, which container limits and ``taskset`` set), never more than Numba's
``NUMBA_NUM_THREADS``. Numba's thread count is per calling thread, so solves in several threads
(a Dask worker's) each keep their own.

On a 2-core machine a solve of n = 1000 takes 9 ms on one thread and 5 to 6 ms on two when the
machine is idle, but 124 ms on two spinning threads with two other busy processes
(``dlap bench --suite deadlines`` measures the thread team on idle and busy cores).
"""

from __future__ import annotations

import contextlib
import operator
import os
import threading
from contextlib import contextmanager

#: solves of fewer entries than this run on one thread (no thread team at all): n = 1000 is serial
SERIAL_MAX_ENTRIES = 1 << 20

ENV_VAR = "DLAP_NUM_THREADS"

_limit: int | None = None  # set_num_threads(); None: the environment or the machine decides


def _numba_max() -> int:
    import numba

    return numba.config.NUMBA_NUM_THREADS


def _checked(n, source: str) -> int:
    try:
        value = int(n) if isinstance(n, str) else operator.index(n)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a whole number of threads; got {n!r}") from None
    top = _numba_max()
    if isinstance(n, bool) or not 1 <= value <= top:
        raise ValueError(f"{source} must be between 1 and {top} (NUMBA_NUM_THREADS); got {n!r}")
    return value


def set_num_threads(n: int) -> None:
    """Run large CPU solves on at most ``n`` threads (1 <= n <= ``NUMBA_NUM_THREADS``)."""
    global _limit
    _limit = _checked(n, "the number of threads")


def get_num_threads() -> int:
    """The most threads a CPU solve uses: :func:`set_num_threads`, else ``DLAP_NUM_THREADS``,
    else the cores this process may run on."""
    if _limit is not None:
        return _limit
    env = os.environ.get(ENV_VAR)
    if env:
        return _checked(env.strip(), ENV_VAR)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _numba_max()))


def threads_for(n_entries: int, limit: int | None = None) -> int:
    """Threads for a solve of ``n_entries`` entries: one below :data:`SERIAL_MAX_ENTRIES`, else
    ``limit`` (a Dask rank's share of its host) or :func:`get_num_threads`."""
    if n_entries < SERIAL_MAX_ENTRIES:
        return 1
    return limit if limit is not None else get_num_threads()


@contextmanager
def solve_threads(n_entries: int, limit: int | None = None):
    """Run the body's Numba kernels on :func:`threads_for` threads (yielded), restoring the
    count after; one body at a time where Numba's threading layer cannot run parallel regions
    from several threads at once (:func:`thread_safe_layer`)."""
    import numba

    from .backends.cpu import numba_setup  # noqa: F401 - the wait policy, before the team starts

    previous = numba.get_num_threads()  # (starts the thread team: the layer is known from here)
    with contextlib.nullcontext() if thread_safe_layer() else _one_at_a_time:
        threads = min(threads_for(n_entries, limit), _numba_max())
        numba.set_num_threads(threads)
        try:
            yield threads
        finally:
            numba.set_num_threads(previous)


#: held by each CPU solve where the threading layer is not thread-safe
_one_at_a_time = threading.RLock()


def thread_safe_layer() -> bool:
    """Whether Numba's threading layer runs parallel regions launched from several threads at
    once: TBB and OpenMP do; ``workqueue``, which Numba falls back to where neither runtime is
    installed, aborts the process instead (issue 37: eight threads solving at once, exit 134)."""
    import numba

    try:
        return numba.threading_layer() != "workqueue"
    except ValueError:  # no thread team started yet: assume the worst
        return False
