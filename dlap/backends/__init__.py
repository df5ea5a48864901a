"""Backends: the phase primitives of :mod:`.base` on one device each (``cpu/``, ``gpu/``)."""


def backend(device: str):
    """The primitives of ``device`` ("cpu" or "gpu"); Numba or CuPy is imported here, on the first
    solve, not by ``import dlap``."""
    if device == "gpu":
        from .gpu import GPUBackend

        return GPUBackend()
    from .cpu import CPUBackend

    return CPUBackend()


def switching(device: str):
    """The Deep Greedy Switching primitives of ``device`` (:mod:`dlap.dgs`), reading the matrix
    where that device's :func:`backend` placed it."""
    if device == "gpu":
        from .gpu.dgs import GPUSwitching

        return GPUSwitching()
    from .cpu.dgs import CPUSwitching

    return CPUSwitching()
