"""The GPU backend: CUDA kernels (``cuda/*.cu``) compiled through CuPy, one module per algorithm."""

from .backend import GPUBackend, free_device_memory, gpu_available, require_device_memory

__all__ = ["GPUBackend", "free_device_memory", "gpu_available", "require_device_memory"]
