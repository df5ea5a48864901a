"""The CPU kernels' atomic steps: threads of a team that add to one counter, or take turns through
a lock made of compare-and-swap, lose no update."""

import numba
import numpy as np
import pytest
from numba import njit, prange

from dlap.backends.cpu.atomics import compare_and_swap, fetch_add

THREADS = min(4, numba.config.NUMBA_NUM_THREADS)


@njit(parallel=True)
def _count_together(shared, at, threads):
    """``shared[at[k]] += 1`` for every k, on each thread (the entries read from ``at``, so that
    the compiler cannot fold the steps into one: plain additions lose about a sixth of them)."""
    for _thread in prange(threads):
        for k in range(at.shape[0]):
            fetch_add(shared, at[k], 1)


@njit(parallel=True)
def _count_in_turns(locks, total, at, threads):
    """A plain ``total[at[k]] += 1``, each inside the lock ``locks[0]``."""
    for _thread in prange(threads):
        for k in range(at.shape[0]):
            while compare_and_swap(locks, 0, 0, 1) != 0:
                pass
            total[at[k]] += 1
            compare_and_swap(locks, 0, 1, 0)


@pytest.mark.skipif(THREADS < 2, reason="Numba has one thread here")
def test_no_update_is_lost_among_threads():
    previous = numba.get_num_threads()
    numba.set_num_threads(THREADS)
    try:
        shared, at = np.zeros(1, dtype=np.int64), np.zeros(2_000_000, dtype=np.int64)
        _count_together(shared, at, THREADS)
        assert shared[0] == at.size * THREADS
        locks, total = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        _count_in_turns(locks, total, at, THREADS)
        assert total[0] == at.size * THREADS and locks[0] == 0
    finally:
        numba.set_num_threads(previous)


def test_the_steps_return_what_was_there():
    @njit
    def steps(values):
        return (fetch_add(values, 1, 5), compare_and_swap(values, 0, 3, 9), compare_and_swap(values, 0, 7, 1),
                compare_and_swap(values, 2, 0, -4))

    for dtype in (np.int64, np.int32):
        values = np.array([7, 10, 0], dtype=dtype)
        assert steps(values) == (10, 7, 7, 0)  # 3 was not there: no swap; 7 was: swapped
        assert values.tolist() == [1, 15, -4]
