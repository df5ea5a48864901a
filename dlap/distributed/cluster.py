"""Start or attach to the Dask cluster a distributed solve runs on."""

from __future__ import annotations

from contextlib import contextmanager


#: dask-cuda worker options for solves: no device spilling, no host memory limit (see start_cluster)
GPU_WORKER_OPTIONS = {"device_memory_limit": 0, "memory_limit": 0}


def gpus_visible() -> int:
    """GPUs CuPy sees on this machine (0 without CuPy)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return 0


def start_cluster(n_workers: int | None = None, *, protocol: str = "tcp", gpu: bool | None = None, **options):
    """A local cluster: ``LocalCUDACluster`` (one worker per GPU, dask-cuda) where GPUs are
    visible, else a ``LocalCluster`` of single-threaded worker processes. ``options`` go to the
    cluster class (``dashboard_address``, ``CUDA_VISIBLE_DEVICES``, ...).

    GPU workers get :data:`GPU_WORKER_OPTIONS` unless ``options`` says otherwise: a slab is most of
    its GPU, so dask-cuda's device-to-host spilling (at 80% of the GPU by default, counting each
    key that refers to the slab) would copy it to host memory, and the host memory limit would
    then kill the worker (seen with n = 200000 on two H200s)."""
    n_gpus = gpus_visible()
    gpu = n_gpus > 0 if gpu is None else gpu
    if gpu:
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(n_workers=n_workers or n_gpus, protocol=protocol, **{**GPU_WORKER_OPTIONS, **options})
    from distributed import LocalCluster

    options.setdefault("threads_per_worker", 1)
    options.setdefault("dashboard_address", ":0")
    return LocalCluster(n_workers=n_workers or 2, protocol=protocol, processes=True, **options)


def worker_addresses(client) -> list[str]:
    """The addresses of the cluster's workers, sorted, fetched from the scheduler now.

    Not ``client.scheduler_info()["workers"]``: that returns the client's shared cached identity,
    which the client's periodic refresh overwrites with a copy that lists no workers, so a
    caller can read an empty list (seen in CI as a healthy rank's worker "leaving")."""
    return sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


@contextmanager
def connected(client=None, scheduler: str | None = None, n_workers: int | None = None, protocol: str = "tcp",
              gpu: bool | None = None):
    """Yield a client: the one given, one connected to ``scheduler``, or one on a local cluster
    started here (and closed on exit; ``gpu`` as :func:`start_cluster`)."""
    from distributed import Client

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
