"""Start or attach to the Dask cluster a distributed solve runs on."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from ..device import gpus_visible

#: dask-cuda worker options for solves: no device spilling, no host memory limit (see start_cluster)
GPU_WORKER_OPTIONS = {"device_memory_limit": 0, "memory_limit": 0}

#: ucxx's progress settings for processes that talk UCX. Under distributed-ucxx's defaults
#: (blocking progress, no Python futures) ucxx waits for each pending receive by rescheduling it
#: on the event loop until it completes (``await asyncio.sleep(0)`` in a loop), and a worker
#: always has one pending (its stream from the scheduler): its event loop thread spins, busy 80%
#: of the time, and takes the GIL each time a rank's thread lets go of it, which every CUDA call
#: does. A launch then cost 16-28 us of host time in a rank's thread instead of 7-12 us, and the
#: ranks' solve at n = 40000 ran 27-40% slower than over tcp. With a progress thread and Python
#: futures a receive is an asyncio future that ucxx's notifier thread completes, the loop sleeps
#: (1-2% busy), and the ranks' solve is within 5% of tcp's. A progress thread alone does not stop
#: the spinning.
UCX_ENVIRONMENT = {"UCXPY_PROGRESS_MODE": "thread", "UCXPY_ENABLE_PYTHON_FUTURE": "1"}


def start_cluster(n_workers: int | None = None, *, protocol: str = "tcp", gpu: bool | None = None, **options):
    """A local cluster: ``LocalCUDACluster`` (one worker per GPU, dask-cuda) where GPUs are
    visible, else a ``LocalCluster`` of single-threaded worker processes. ``options`` go to the
    cluster class (``dashboard_address``, ``CUDA_VISIBLE_DEVICES``, ...).

    GPU workers get :data:`GPU_WORKER_OPTIONS` unless ``options`` says otherwise: a slab is most of
    its GPU, so dask-cuda's device-to-host spilling (at 80% of the GPU by default, counting each
    key that refers to the slab) would copy it to host memory, and the host memory limit would
    then kill the worker (seen with n = 200000 on two H200s).

    With ``protocol="ucx"`` the variables of :data:`UCX_ENVIRONMENT` are set in this process's
    environment where it has none of its own (the workers inherit them; the scheduler of a local
    cluster runs here)."""
    if protocol == "ucx":
        _require("distributed_ucxx", "protocol='ucx' needs distributed-ucxx: pip install 'dlap[ucx]' (CUDA 13: 'dlap[ucx-cuda13]')")
        for name, value in UCX_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
        stop_stale_ucx_notifier()
    n_gpus = gpus_visible()
    gpu = n_gpus > 0 if gpu is None else gpu
    if gpu:
        _require("dask_cuda", "GPU workers need dask-cuda: pip install 'dlap[cuda]' (CUDA 13: 'dlap[cuda13]')")
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(n_workers=n_workers or n_gpus, protocol=protocol, **{**GPU_WORKER_OPTIONS, **options})
    from distributed import LocalCluster

    options.setdefault("threads_per_worker", 1)
    options.setdefault("dashboard_address", ":0")
    return LocalCluster(n_workers=n_workers or 2, protocol=protocol, processes=True, **options)


def _require(module: str, hint: str) -> None:
    """ImportError with the install hint where ``module`` is missing (found without importing it)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ImportError(hint)


def _ucxx_context():
    """This process's ucxx application context (one per process), or None where ucxx has not
    made one (or is not imported): looked up without importing ucxx, which would start UCX."""
    return getattr(sys.modules.get("ucxx.core"), "_ctx", None)


def stop_stale_ucx_notifier() -> None:
    """Stop this process's ucxx notifier thread if the event loop it serves is closed.

    ucxx keeps one context per process; with Python futures (:data:`UCX_ENVIRONMENT`) its
    notifier thread completes UCX requests on the event loop it was started in. distributed-ucxx
    starts it with the process's first UCX communicator and stops it when the last one is
    deregistered; a communicator of a closed cluster that is not yet deregistered keeps it serving
    that cluster's closed loop, and the next local cluster, on a new loop, cannot connect ("got
    Future <Future pending> attached to a different loop"). Seen in one GPU test run in four, and in
    2 runs of 10 that start two CPU LocalClusters over UCX one after the other. A notifier whose
    loop is closed serves nobody: once stopped, the next communicator starts it on its own loop.
    (ucxx keeps that loop only as the thread's argument: ``Thread._args``.)"""
    context = _ucxx_context()
    thread = getattr(context, "notifier_thread", None)
    loop = getattr(thread, "_args", (None,))[0]
    if loop is not None and loop.is_closed():
        context.stop_notifier_thread()


def ucx_waits_spin() -> bool:
    """Whether this process talks UCX with ucxx waiting on its receives by spinning the event
    loop (see :data:`UCX_ENVIRONMENT`); False where it does not talk UCX."""
    context = _ucxx_context()
    return context is not None and not getattr(context, "enable_python_future", True)


def worker_addresses(client) -> list[str]:
    """The addresses of the cluster's workers, sorted, fetched from the scheduler now.

    Not ``client.scheduler_info()["workers"]``: that returns the client's shared cached identity,
    which the client's periodic refresh overwrites with a copy that lists no workers, so a
    caller can read an empty list (seen in CI as a healthy rank's worker "leaving")."""
    return sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


@contextmanager
def connected(client=None, scheduler: str | None = None, n_workers: int | None = None, protocol: str = "tcp",
              gpu: bool | None = None):
    """Yield a client: the one given, one connected to ``scheduler``, the current default client
    (``distributed.default_client()``, Dask's convention), or one on a local cluster started here
    (and closed on exit; ``gpu`` as :func:`start_cluster`)."""
    from distributed import Client, default_client

    if client is None and scheduler is None:
        try:
            client = default_client()
        except ValueError:  # no client is open in this process
            client = None
    if client is not None:
        yield client
        return
    if scheduler is not None:
        try:
            client = Client(scheduler)
        except OSError as e:  # refused, or no answer within distributed.comm.timeouts.connect
            raise OSError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        with client:
            yield client
        return
    with start_cluster(n_workers, protocol=protocol, gpu=gpu) as cluster, Client(cluster) as client:
        yield client
