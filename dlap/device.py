"""Devices: which array library an array is in, whether a GPU is there and what it has free, and
the device a solve runs on (its primitives: :func:`dlap.backends.backend`). CuPy is imported only
to answer a question about a GPU."""

from __future__ import annotations

import functools

import numpy as np

from .options import DEVICES, check_choice

MSG_NO_GPU = "device='gpu' needs CuPy and a CUDA GPU (pip install 'dlap[gpu]'); none is visible"
#: device="auto" takes the GPU for matrices of at least this many entries (below it, the launch and
#: copy overheads of a GPU solve exceed the CPU's whole solve)
GPU_MIN_ENTRIES = 512 * 512


def is_device_array(x) -> bool:
    """Whether ``x`` is a CuPy array (checked without importing CuPy)."""
    return type(x).__module__.split(".")[0] == "cupy"


def array_module(x):
    """``cupy`` for a CuPy array, ``numpy`` for anything else."""
    if is_device_array(x):
        import cupy

        return cupy
    return np


def to_host(x) -> np.ndarray:
    """``x`` as a NumPy array (a CuPy array copied from its GPU)."""
    return x.get() if is_device_array(x) else np.asarray(x)


def gpus_visible() -> int:
    """GPUs CuPy sees on this machine (0 without CuPy, a driver or a device)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return 0


@functools.cache
def gpu_available() -> bool:
    """Whether CuPy is installed and sees a CUDA GPU (asked once: a failed import of CuPy costs
    milliseconds each time, which a DGS deadline would pay)."""
    return gpus_visible() > 0


def free_device_memory() -> int:
    """Bytes a solve can take on the current GPU: free memory plus CuPy's cached blocks."""
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())


def require_device_memory(nbytes: int, what: str) -> None:
    """Refuse, before allocating, what does not fit in free GPU memory (sizes in the message)."""
    free = free_device_memory()
    if nbytes > free:
        import cupy

        raise MemoryError(
            f"{what} needs {nbytes / 2**30:.2f} GiB of GPU memory but GPU {cupy.cuda.runtime.getDevice()} has "
            f"{free / 2**30:.2f} GiB free"
        )


def choose_device(cost, device: str) -> str:
    """The device a solve of ``cost`` runs on: ``"gpu"`` or ``"cpu"`` as asked (RuntimeError where
    no GPU is visible), or for ``"auto"`` the GPU for a CuPy array or a matrix of at least
    :data:`GPU_MIN_ENTRIES` entries when CuPy sees a GPU, the CPU otherwise."""
    check_choice("device", device, DEVICES)
    size = getattr(cost, "size", None)
    return device_for(device, is_device_array(cost), np.size(cost) if size is None else size)


def device_for(device: str, on_gpu: bool, entries: int) -> str:
    """:func:`choose_device` for data of ``entries`` matrix entries (``on_gpu``: already on a GPU)."""
    if device == "gpu":
        if not gpu_available():
            raise RuntimeError(MSG_NO_GPU)
        return "gpu"
    if device == "cpu":
        return "cpu"
    if on_gpu:
        return "gpu"
    return "gpu" if entries >= GPU_MIN_ENTRIES and gpu_available() else "cpu"
