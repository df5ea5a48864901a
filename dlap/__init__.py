"""dlap: exact linear assignment on a CPU, a GPU or a Dask cluster (Date & Nagi 2016).

``import dlap`` imports NumPy only; Numba, CuPy and Dask are imported when first needed.
"""

from .api import linear_sum_assignment, solve
from .batch import BatchResult, solve_batch
from .dgs.loading import load_dgs_kernels
from .points import solve_points
from .problem import InfeasibleError
from .progress import SolveProgress
from .result import Assignment, Certificate, Stats
from .threads import get_num_threads, set_num_threads

__version__ = "0.1.0"

__all__ = [
    "Assignment",
    "BatchResult",
    "Certificate",
    "InfeasibleError",
    "SolveProgress",
    "Stats",
    "get_num_threads",
    "linear_sum_assignment",
    "load_dgs_kernels",
    "set_num_threads",
    "solve",
    "solve_batch",
    "solve_points",
    "__version__",
]
