"""The CPU backend: Numba kernels (the paper's OpenMP analogue), one module per algorithm."""

from .backend import CPUBackend

__all__ = ["CPUBackend"]
