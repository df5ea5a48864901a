"""dlap's kernels read and update Numba's disk cache under a lock
(dlap.backends.cpu.numba_setup.LockedIndex): processes that compile one kernel for different
types at once keep each type's own machine code."""

import os
import subprocess
import sys
import textwrap

KERNEL = """
from dlap.backends.cpu.numba_setup import njit


@njit(cache=True)
def doubled_sum(x):
    return x.sum() * 2
"""

# Two processes compile doubled_sum at once, A for int64 and B for float64, their cache updates
# interleaved as a slow disk can interleave them: A reads the index, then B reads it, writes it
# and would write its code last; A writes the index and its code in between. Each waits for the
# other's step at most WAIT seconds (under the lock the other cannot take it: it waits for A).
COMPILE = """
import sys, time
from pathlib import Path
import numpy as np
from numba.core.caching import IndexDataCacheFile

role, folder = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, str(folder))
WAIT = 3.0


def signal(name):
    (folder / name).touch()


def wait(name):
    end = time.monotonic() + WAIT
    while not (folder / name).exists() and time.monotonic() < end:
        time.sleep(0.01)


save_index, save_data = IndexDataCacheFile._save_index, IndexDataCacheFile._save_data


def a_save_index(self, overloads):
    signal("a-read")
    wait("b-indexed")
    save_index(self, overloads)


def a_save_data(self, name, data):
    save_data(self, name, data)
    signal("a-saved")


def b_save_index(self, overloads):
    save_index(self, overloads)
    signal("b-indexed")
    wait("a-saved")


if role == "a":
    IndexDataCacheFile._save_index, IndexDataCacheFile._save_data = a_save_index, a_save_data
else:
    IndexDataCacheFile._save_index = b_save_index
    wait("a-read")
from kernel import doubled_sum

doubled_sum(np.arange(5) if role == "a" else np.arange(5.0))
"""

CHECK = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from kernel import doubled_sum

print(doubled_sum(np.arange(5)), doubled_sum(np.arange(5.0)), doubled_sum.stats.cache_hits.total())
"""


def test_two_processes_compiling_one_kernel_at_once_keep_each_types_code(tmp_path):
    """Numba alone names both entries' data file alike (each read the index before the other
    wrote it), and a later process calling the int64 version ran the float64 code ("can't unbox
    array"). Under dlap's lock B waits for A: the cache then holds both versions, each its own."""
    (tmp_path / "kernel.py").write_text(textwrap.dedent(KERNEL))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", COMPILE, role, str(tmp_path)], env=env, stderr=subprocess.PIPE,
                             text=True) for role in ("a", "b")]
    for run in runs:
        assert run.wait(timeout=300) == 0, run.stderr.read()[-3000:]
    check = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    assert check.stdout.split() == ["20", "20.0", "2"]  # both versions loaded from the cache
