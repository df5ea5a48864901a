"""The Dask engine: exact LAP solves over the workers of a Dask cluster (Date & Nagi 2016, section 5).

``solve(cost, client=None, method="auto"|"classical"|"tree")`` takes a dask array, a Zarr array or a
Zarr path; ``solve_points(a, b, metric, client=None)`` two point sets (:mod:`~dlap.distributed.points`); see :mod:`dlap.distributed.solve` (API), :mod:`~dlap.distributed.data` (placement),
:mod:`~dlap.distributed.rank.engine` (the SPMD solve on each rank), :mod:`~dlap.distributed.rank.comm`
(NCCL and Dask-RPC collectives), :mod:`~dlap.distributed.cluster` and
:mod:`~dlap.distributed.progress`. Needs the ``distributed`` extra (``dask-cuda`` for GPUs).
"""

try:
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
except ImportError as missing:  # the install hint the command line gives too
    raise ImportError(f"dlap.distributed needs Dask: pip install 'dlap[distributed]' ({missing})") from missing

from .cluster import start_cluster
from .points import solve_points
from .solve import METHODS, DistributedAssignment, SolveExpired, WorkerLostError, solve

__all__ = ["METHODS", "DistributedAssignment", "SolveExpired", "WorkerLostError", "solve", "solve_points",
           "start_cluster"]
