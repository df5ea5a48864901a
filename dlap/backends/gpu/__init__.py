"""The GPU backend: CUDA kernels (``cuda/*.cu``) compiled through CuPy, one module per algorithm."""

from .backend import GPUBackend

__all__ = ["GPUBackend"]
