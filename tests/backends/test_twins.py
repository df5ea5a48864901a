"""Each ``prange`` kernel is compiled twice, for one thread and for a thread team, and called in
the twin its thread count asks for (dlap.backends.cpu.numba_setup.PrangeKernel)."""

from pathlib import Path

import numba
import numpy as np
import pytest
from numba import prange

from dlap.backends.cpu.numba_setup import compile_team_twins, prange_kernel


@prange_kernel
def _thread_ids(out):
    for i in prange(out.shape[0]):
        out[i] = numba.get_thread_id()


def _ids(threads: int) -> np.ndarray:
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        out = np.full(64, -1, dtype=np.int64)
        _thread_ids(out)
        return out
    finally:
        numba.set_num_threads(before)


def test_one_thread_runs_the_serial_twin_and_compiles_no_parallel_one():
    assert (_ids(1) == 0).all()
    assert len(_thread_ids.serial.signatures) == 1 and not _thread_ids.parallel.signatures
    compile_team_twins(__name__)  # what a warm-up does after its one-thread solves
    assert _thread_ids.parallel.signatures == _thread_ids.serial.signatures


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba allows one thread")
def test_a_thread_team_runs_the_parallel_twin():
    assert set(_ids(2).tolist()) == {0, 1}  # Numba's static schedule gives each thread a half


def test_the_twins_have_cache_files_of_their_own():
    _ids(1)
    index = [p.name for p in Path(numba.config.CACHE_DIR).rglob("*_thread_ids*.nbi")]
    assert any("_thread_ids_serial" in name for name in index), index
    assert _thread_ids.__name__ == "_thread_ids" and "serial" in _thread_ids.serial.py_func.__qualname__
