"""The two variants of Date & Nagi (2016), their hybrid, the ε-scaling engine for structured costs,
and the automatic choice between them, written once against the Backend interface; the table of
them by name is :func:`run_method`."""

from .auto import solve_auto
from .classical import solve_classical
from .hybrid import solve_hybrid
from .methods import device_variant, run_method
from .scaling import solve_scaling
from .tree import solve_tree

__all__ = ["device_variant", "run_method", "solve_auto", "solve_classical", "solve_hybrid", "solve_scaling",
           "solve_tree"]
