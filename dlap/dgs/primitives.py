"""The primitive set a device implements for Deep Greedy Switching (CPU: Numba; GPU: CUDA)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from .state import DGSState


class SwitchingPrimitives(ABC):
    """The phases of DGS (Roverso et al.) on one device, written against :class:`DGSState`."""

    #: array module of the device (NumPy or CuPy)
    xp = None
    #: dtype of the index arrays
    index_dtype = None
    #: whether the sequential switching phase (Algorithm 1) runs here
    sequential = False
    #: matrix entries read per evaluation call (the driver checks its deadline between calls)
    evaluation_chunk = 1 << 22

    @abstractmethod
    def allocate(self, cost, tol_scale: float) -> DGSState:
        """The state for ``cost`` (already on the device), with its transpose."""

    @abstractmethod
    def propose(self, state: DGSState, rows):
        """Greedy start: each of ``rows``' cheapest unheld column and its cost (-1: none finite)."""

    @abstractmethod
    def repair(self, state: DGSState) -> bool:
        """Assign the unassigned rows along augmenting paths of finite entries; False if impossible."""

    @abstractmethod
    def load_held(self, state: DGSState) -> None:
        """``held[j] = C[col_match[j], j]`` (0 for a job no agent holds), exactly: float32
        subnormals included, which a GPU's float32 -> float64 conversion flushes to zero."""

    @abstractmethod
    def evaluate(self, state: DGSState, entities, stamp: int) -> None:
        """Difference evaluation (ADE/JDE, Algorithm 2) of the listed agents and jobs."""

    @abstractmethod
    def parallel_round(self, state: DGSState, stamp: int):
        """Conflict check and parallel switch (Algorithms 3 and 4): ``(applied, entities to
        re-evaluate)``."""

    def sequential_steps(self, state: DGSState, clock: int, max_steps: int):
        """Sequential switching (Algorithm 1): ``(none_left, clock, switches)``."""
        raise NotImplementedError("sequential switching runs on the CPU")
