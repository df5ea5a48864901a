"""The markers the suite runs by, and where each is skipped.

- ``gpu``: needs a CUDA GPU (skipped where CuPy sees none);
- ``multi_gpu``: needs two GPUs (skipped where CuPy sees fewer);
- ``distributed``: a Dask cluster in the test (skipped without dask and distributed);
- ``browser``: a real headless Chromium (skipped without Chromium and its driver);
- ``slow``: more than a few seconds on the 2-core CI machine (run; ``-m "not slow"`` leaves them).

While the suite runs, ``dlap warmup`` compiles the CPU kernels into Numba's disk cache in a second
process (``DLAP_TEST_WARMUP=0`` turns it off): on an empty cache the suite's own first calls
would compile them one after the other on one core; this way another core compiles them too, and
each is loaded from the cache by whichever process needs it first. The Dask workers of the
tests' own clusters are forked from a forkserver that has imported dlap (:func:`fork_dask_workers`).
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

#: the test files whose tests run dlap in processes of their own
SPAWNING = ("tests/bench/", "tests/test_cli.py", "tests/test_cli_errors.py", "tests/test_docs.py",
            "tests/test_imports.py", "tests/test_notebooks.py", "tests/test_workflows.py")


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
    # the tests that start other processes (the command, examples, notebooks, benchmarks) after
    # those that solve in this one, and those that start Dask workers last: by then the warm-up
    # (and the tests before) have compiled the CPU kernels into Numba's cache, which those
    # processes load instead of each compiling them again (a fresh clone compiles everything)
    items.sort(key=lambda item: (item.get_closest_marker("distributed") is not None,
                                 item.nodeid.startswith(SPAWNING)))


def pytest_configure(config):
    # the Dask clusters' scratch space (workers' spill folders and locks, which Dask leaves in
    # the system's temporary folder) in a folder of the suite's own, removed at its end
    config.dlap_dask_scratch = tempfile.mkdtemp(prefix="dlap-tests-dask-")
    os.environ["DASK_TEMPORARY_DIRECTORY"] = config.dlap_dask_scratch
    if "dask" in sys.modules:
        sys.modules["dask"].config.set({"temporary-directory": config.dlap_dask_scratch})
    fork_dask_workers()
    if os.environ.get("DLAP_TEST_WARMUP", "1") != "0" and not hasattr(config, "workerinput"):
        config.dlap_warmup = subprocess.Popen([sys.executable, "-m", "dlap", "warmup", "--device", "cpu", "--quiet"],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


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
    warmup = getattr(config, "dlap_warmup", None)
    if warmup is not None and warmup.poll() is None:
        warmup.terminate()  # Numba writes each cache file whole (a temporary file, renamed)
        warmup.wait()
    shutil.rmtree(config.dlap_dask_scratch, ignore_errors=True)
