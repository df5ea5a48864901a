"""The two Hungarian variants of Date & Nagi (2016), written once against the Backend interface."""

from .classical import solve_classical
from .tree import solve_tree

__all__ = ["solve_classical", "solve_tree"]
