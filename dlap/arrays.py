"""Arrays from other libraries: a PyTorch tensor, or any array that speaks DLPack or
``__cuda_array_interface__`` (JAX, Numba, ...), is read without a copy where its layout allows:
as a NumPy array on the host, a CuPy array on a GPU. Results go back in the caller's library and
on its device (PyTorch tensors for PyTorch; NumPy or CuPy arrays otherwise)."""

from __future__ import annotations

import numpy as np

from .device import is_device_array

_DLPACK_CPU = 1  # kDLCPU in DLPack's device types


def _same(array):
    return array


def adopt(x):
    """``(array, give_back)``: ``x`` as NumPy or CuPy (anything else, e.g. a list, unchanged), and
    the function that turns a result array back into ``x``'s kind."""
    if isinstance(x, np.ndarray) or is_device_array(x):
        return x, _same
    if type(x).__module__.split(".")[0] == "torch":
        tensor = x.detach()
        if tensor.is_cuda:
            import cupy

            return cupy.from_dlpack(tensor), _to_torch
        return tensor.numpy(), _to_torch
    if hasattr(x, "__cuda_array_interface__"):
        import cupy

        return cupy.asarray(x), _same
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        if x.__dlpack_device__()[0] == _DLPACK_CPU:
            return np.from_dlpack(x), _same
        import cupy

        return cupy.from_dlpack(x), _same
    return x, _same


def _to_torch(array):
    """A NumPy or CuPy result as a tensor on the same device (no copy); object arrays (exact
    Python-int objectives beyond int64) stay NumPy."""
    import torch

    if is_device_array(array):
        return torch.from_dlpack(array)
    if array.dtype == object:
        return array
    return torch.from_numpy(np.ascontiguousarray(array))
