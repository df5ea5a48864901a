"""Assignments of point sets, exact, without the matrix of their distances (the sparse-core engine)."""

from .solve import solve_points

__all__ = ["solve_points"]
