"""The two variants of Date & Nagi (2016), their hybrid, the ε-scaling engine for structured costs,
and the automatic choice between them, written once against the Backend interface."""

from .auto import solve_auto
from .classical import solve_classical
from .hybrid import solve_hybrid
from .scaling import solve_scaling
from .tree import solve_tree

__all__ = ["solve_auto", "solve_classical", "solve_hybrid", "solve_scaling", "solve_tree"]
