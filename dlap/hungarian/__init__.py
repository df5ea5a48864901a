"""The two variants of Date & Nagi (2016), and their hybrid, written once against the Backend interface."""

from .classical import solve_classical
from .hybrid import solve_hybrid
from .tree import solve_tree

__all__ = ["solve_classical", "solve_hybrid", "solve_tree"]
