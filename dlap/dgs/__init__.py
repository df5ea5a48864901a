"""Deep Greedy Switching: the anytime heuristic of Roverso et al. (``dlap.solve(method="dgs")``)."""

from .switching import STARTS, SWITCHINGS, deep_greedy_switching

__all__ = ["STARTS", "SWITCHINGS", "deep_greedy_switching"]
