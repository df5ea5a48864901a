"""The markers the suite runs by, and where each is skipped.

- ``gpu``: needs a CUDA GPU (skipped where CuPy sees none);
- ``multi_gpu``: needs two GPUs (skipped where CuPy sees fewer);
- ``distributed``: a Dask cluster in the test (skipped without dask and distributed);
- ``browser``: a real headless Chromium (skipped without Chromium and its driver);
- ``slow``: more than a few seconds on the 2-core CI machine (run; ``-m "not slow"`` leaves them).

Before the tests start, ``dlap warmup --jobs N`` fills Numba's disk cache with the CPU kernels
(``DLAP_TEST_WARMUP=0`` leaves it out), N the test processes (``-n``) or the cores: N processes
compile each kernel once, side by side, where the tests' processes, and the commands and Dask
workers they start, would each compile what they reach first, often the same kernels at the same
time; on a filled cache it only loads them (seconds). The Dask workers of the tests' own clusters
are forked from a forkserver that has imported dlap (:func:`fork_dask_workers`).
"""

import importlib.util
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from dlap.device import gpus_visible


def pytest_collection_modifyitems(config, items):
    gpus = gpus_visible()
    dask = all(importlib.util.find_spec(name) for name in ("dask", "distributed"))
    chromium = shutil.which("chromium") and shutil.which("chromedriver")
    skips = {
        "gpu": (gpus == 0, "no CUDA GPU visible"),
        "multi_gpu": (gpus < 2, "needs two CUDA GPUs"),
        "distributed": (not dask, "needs dask and distributed: pip install 'dlap[distributed]'"),
        "browser": (not chromium, "needs Chromium and its driver (apt install chromium chromium-driver)"),
    }
    for item in items:
        for marker, (skip, why) in skips.items():
            if skip and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=why))
    # the files that start Dask clusters, the longest, first: pytest-xdist's --dist loadfile hands
    # out files in this order, so the last ones to finish are short (a sort keeps each file's order)
    clusters = {item.path for item in items if item.get_closest_marker("distributed")}
    items.sort(key=lambda item: item.path not in clusters)


def pytest_configure(config):
    # the Dask clusters' scratch space (workers' spill folders and locks, which Dask leaves in
    # the system's temporary folder) in a folder of the suite's own, removed at its end
    config.dlap_dask_scratch = tempfile.mkdtemp(prefix="dlap-tests-dask-")
    os.environ["DASK_TEMPORARY_DIRECTORY"] = config.dlap_dask_scratch
    if "dask" in sys.modules:
        sys.modules["dask"].config.set({"temporary-directory": config.dlap_dask_scratch})
    fork_dask_workers()
    if os.environ.get("DLAP_TEST_WARMUP", "1") != "0" and not hasattr(config, "workerinput"):
        cores = os.cpu_count() or 1
        jobs = getattr(config.option, "numprocesses", None)  # pytest-xdist's -n (None without it)
        jobs = min(jobs, cores) if isinstance(jobs, int) and jobs > 0 else cores
        run = subprocess.run([sys.executable, "-m", "dlap", "warmup", "--device", "cpu", "--quiet", "--jobs", str(jobs)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode:  # the tests compile what they need themselves, and test_warmup.py says why
            config.issue_config_time_warning(pytest.PytestWarning(f"dlap warmup failed: {run.stderr[-500:]}"), 2)


def fork_dask_workers() -> None:
    """The Dask workers of this process's clusters forked from a forkserver that has imported
    dask, NumPy, SciPy, Zarr and dlap (as distributed's own suite does), instead of spawned and
    importing them again, each (where dask and distributed are installed). Only imported: a
    process that has started Numba's OpenMP thread team, as loading kernels by solving would,
    cannot fork safely. The processes the tests start (commands, examples, workflows) start
    their clusters as users do."""
    if not all(importlib.util.find_spec(name) for name in ("dask", "distributed")) or \
            "forkserver" not in multiprocessing.get_all_start_methods():
        return
    import dask
    import distributed.utils

    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    context = distributed.utils.get_mp_context()  # sets distributed's own preload list, once
    context.set_forkserver_preload(["distributed", "dask.array", "numpy", "scipy.optimize", "dlap",
                                    "dlap.distributed", "dlap.distributed.rank.engine", "dlap.points", "zarr"])


def pytest_unconfigure(config):
    shutil.rmtree(config.dlap_dask_scratch, ignore_errors=True)
