"""Validation and normalisation of a cost matrix: scipy's contract, dlap's dtype policy.

``prepare(cost, maximize)`` turns whatever the caller passed into a :class:`Problem`: a
C-contiguous minimisation matrix with no more rows than columns, in a dtype the solvers read
directly. It raises exactly what ``scipy.optimize.linear_sum_assignment`` raises, with the same
messages, and never writes to the caller's array (a copy is made whenever the matrix must be
negated, transposed or converted).

Dtype policy (docs/design.md, "Rules"): int32, int64, float32 and float64 stay as they are, so
a 4-byte matrix is read as 4 bytes; smaller integers and bool widen to int32, uint32 and uint64 to
int64, float16 to float32. longdouble is refused, as scipy refuses it.

Integer range: integer matrices are solved and certified exactly (objective, duals and certificate
are integers) when every entry lies within ``±MAX_INTEGER_MAGNITUDE`` (2**62) and the entries span at
most ``MAX_INTEGER_SPAN`` (2**51: the solvers keep integral duals in float64, and reduced costs of
a few spans must stay exact there). Entries beyond ``±MAX_INTEGER_SPAN`` are solved as
``c - min(c)`` (``maximize``: ``max(c) - c``, so that no negation overflows), the offset given back
to the duals. A matrix outside the range is refused with a ValueError naming its entries; scipy would
round it to float64 silently, which the message offers as the way to solve it approximately.

A CuPy array is validated and normalised on its GPU (the same rules, the same errors); copies it
needs there are refused before allocation when they do not fit in free device memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .device import array_module, is_device_array, require_device_memory

#: scipy's messages, reused word for word so dlap is a drop-in.
MSG_NOT_2D = "expected a matrix (2-D array), got a {ndim} array"
MSG_INVALID = "matrix contains invalid numeric entries"
MSG_INFEASIBLE = "cost matrix is infeasible"

_ROW_BLOCK_ELEMENTS = 1 << 22  # rows scanned per NaN/inf check block on a GPU, ~32 MB of float64
_CACHED_BLOCK_ELEMENTS = 1 << 16  # and on the host: 512 KB of float64, in a core's cache

#: integer entries solved exactly lie within ± this (the duals, which carry the entries' offset, are int64)
MAX_INTEGER_MAGNITUDE = 2**62
#: and span (max - min) at most this (reduced costs of a few spans stay exact in the solvers' float64)
MAX_INTEGER_SPAN = 2**51
#: float costs beyond this magnitude are solved scaled by a power of two (``Problem.scale_exponent``),
#: so that no difference or sum of a few costs and duals overflows float64 (issue 37)
FLOAT_HEADROOM = 2.0**1000
MSG_INTEGER_RANGE = (
    "integer costs from {lo} to {hi} are outside the range dlap solves exactly (entries within "
    "+-2**62, max - min at most 2**51); convert the matrix to float64 to solve it in floating "
    "point, as scipy does"
)


class CostShape:
    """``n_rows`` and ``n_cols`` of a solver state that holds its cost matrix in ``cost``."""

    @property
    def n_rows(self) -> int:
        return self.cost.shape[0]

    @property
    def n_cols(self) -> int:
        return self.cost.shape[1]


@dataclass(frozen=True)
class Problem:
    """A minimisation LAP ready for a solver.

    ``matrix`` has ``n_rows <= n_cols`` and is C-contiguous; ``transposed`` says whether it is the
    caller's matrix transposed, ``maximize`` whether it is the caller's matrix negated.
    ``original`` is the caller's array (never a copy, never written), from which the objective is
    summed. ``offset`` (integer matrices far from 0) is what the matrix was shifted by:
    ``(-1 if maximize else 1) * caller's entry == matrix entry + offset``.
    """

    matrix: np.ndarray  # or a CuPy array, when the caller's matrix is on a GPU
    transposed: bool
    maximize: bool
    original: np.ndarray
    offset: int = 0
    #: ``matrix`` is the caller's host float matrix as it is: its entries are not checked yet and,
    #: with ``maximize``, not negated yet. The GPU backend does both on its copy, as it uploads it
    #: (``prepare(..., deferred=True)``: only what solves on a GPU asks for)
    deferred: bool = False
    #: float costs beyond :data:`FLOAT_HEADROOM`: ``matrix`` is the caller's entries times
    #: ``2**-scale_exponent`` (exact but for entries that become subnormal), and so are the duals
    #: a solver finds
    scale_exponent: int = 0

    @property
    def on_device(self) -> bool:
        """Whether the matrix is a CuPy array (on a GPU)."""
        return is_device_array(self.matrix)

    @property
    def n_rows(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_cols(self) -> int:
        return self.matrix.shape[1]

    @property
    def is_integer(self) -> bool:
        return self.matrix.dtype.kind in "iu"

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of the caller's matrix."""
        return self.original.shape


class InfeasibleError(ValueError):
    """Raised when no assignment avoids the forbidden (+inf) entries."""

    def __init__(self, message: str = MSG_INFEASIBLE):
        super().__init__(message)


def as_cost_array(cost) -> np.ndarray:
    """Return ``cost`` as a 2-D array the way scipy reads it (no copy when possible).

    CuPy arrays stay CuPy arrays; anything else becomes a NumPy array. As in scipy, an array's
    dtype must cast safely to float64 (strings, objects, complex: ``TypeError``), while nested
    sequences are converted entry by entry (``[["1.5"]]`` is 1.5, ``[["a"]]`` raises float()'s
    ``ValueError``).
    """
    arr = as_numeric_array(cost)
    if arr.ndim != 2:
        raise ValueError(MSG_NOT_2D.format(ndim=arr.ndim))
    return arr


def as_numeric_array(cost):
    """:func:`as_cost_array` without the 2-D check: any number of dimensions (a batch is 3-D).
    PyTorch tensors and DLPack arrays are read without a copy (:func:`dlap.arrays.adopt`)."""
    from .arrays import adopt

    cost = adopt(cost)[0]
    if is_device_array(cost) or isinstance(cost, np.ndarray):
        arr = cost if is_device_array(cost) else np.asarray(cost)
    else:
        arr = np.asarray(cost)
        if arr.dtype.kind not in "biuf" or arr.dtype.itemsize > 8:
            arr = np.asarray(cost, dtype=np.float64)
    if arr.dtype.kind not in "biuf" or arr.dtype.itemsize > 8:  # longdouble: scipy's TypeError too
        raise TypeError(
            f"Cannot cast array data from {arr.dtype!r} to dtype('float64') "
            "according to the rule 'safe'"
        )
    return arr


def working_dtype(dtype: np.dtype, maximize: bool) -> np.dtype:
    """The dtype a solver reads, following the module's dtype policy.

    Maximising negates the matrix, so unsigned types widen to a signed type that holds the
    negation, and int32 widens to int64 (``-(-2**31)`` does not fit in int32).
    """
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        return np.dtype(np.int32)
    if kind == "f":
        return np.dtype(np.float32 if size <= 4 else np.float64)
    if kind == "u":
        return np.dtype(np.int64 if size >= 4 or maximize else np.int32)
    # signed integers
    if size < 4:
        return np.dtype(np.int32)
    if size == 4 and maximize:
        return np.dtype(np.int64)
    return np.dtype(np.int64 if size == 8 else np.int32)


def check_entries(matrix) -> float:
    """Raise scipy's ValueError if ``matrix`` (minimisation form) holds NaN or -inf; return the
    largest finite magnitude of a float64 matrix (0 for other dtypes, which cannot overflow
    float64 arithmetic).

    Scans in row blocks so a large float matrix needs no n x m temporary.
    """
    if matrix.dtype.kind != "f":
        return 0.0
    xp = array_module(matrix)
    n_rows, n_cols = matrix.shape
    # a host block small enough to stay in cache between its minimum and its maximum (one pass
    # over memory for both); a device block large enough to keep the launches few
    step = max(1, (_ROW_BLOCK_ELEMENTS if xp is not np else _CACHED_BLOCK_ELEMENTS) // max(n_cols, 1))
    largest = 0.0
    for start in range(0, n_rows, step):
        block = matrix[start : start + step]
        if not block.size:
            continue
        # NaN and -inf are the only values whose minimum-compare fails: min(block) is NaN or -inf.
        low = float(block.min())
        if math.isnan(low) or low == -math.inf:
            raise ValueError(MSG_INVALID)
        if matrix.dtype.itemsize == 8:
            high = float(block.max())
            if high == math.inf:  # forbidden pairs: the largest of the others
                high = float(xp.where(block == math.inf, 0.0, abs(block)).max())
            largest = max(largest, -low, high)
    return largest


def scale_exponent(largest: float) -> int:
    """The power of two ``s`` that brings float magnitudes up to ``largest`` within
    :data:`FLOAT_HEADROOM` once multiplied by ``2**-s`` (0 where they are within already)."""
    if not largest > FLOAT_HEADROOM or not math.isfinite(largest):
        return 0
    return math.frexp(largest)[1] - math.frexp(FLOAT_HEADROOM)[1] + 1


def unscaled_duals(u, v, exponent: int):
    """A solver's duals of a matrix scaled by ``2**-exponent`` in the caller's units. Duals of
    costs near float64's largest value can themselves pass it once scaled back (a row dual of
    twice the largest cost); a square problem's duals are first shifted, ``(u + t, v - t)``, an
    equally good dual solution, to the ``t`` that makes the largest magnitude smallest."""
    if exponent and u.shape == v.shape and u.size:
        a = max(float(u.max()), -float(v.min()))
        b = max(float(v.max()), -float(u.min()))
        t = (b - a) / 2
        u, v = u + t, v - t
    return unscaled(u, exponent), unscaled(v, exponent)


def unscaled(x, exponent: int):
    """Duals (or any values) of a matrix scaled by ``2**-exponent`` in the caller's units: times
    ``2**exponent``, exactly (``inf`` where that passes float64's largest value)."""
    if not exponent:
        return x
    xp = array_module(x)
    with np.errstate(over="ignore"):
        return xp.ldexp(x, exponent)


def integer_offset(matrix, maximize: bool) -> int:
    """For an integer matrix: what it must be shifted by so that the solvers see entries in
    ``[0, span]`` (0 when its entries are within ``±MAX_INTEGER_SPAN``: no shift, no copy).
    Raises ValueError (:data:`MSG_INTEGER_RANGE`) outside the range solved exactly. Only 8-byte
    integers can leave it, so only they cost a pass over the matrix."""
    if matrix.dtype.kind not in "iu" or matrix.dtype.itemsize < 8 or matrix.size == 0:
        return 0
    return offset_for_range(int(matrix.min()), int(matrix.max()), maximize)


def offset_for_range(lo: int, hi: int, maximize: bool) -> int:
    """:func:`integer_offset` of integer entries from ``lo`` to ``hi`` (however they were found:
    one matrix, a problem of a batch, a dask array reduced on its workers)."""
    if max(-lo, hi) > MAX_INTEGER_MAGNITUDE or hi - lo > MAX_INTEGER_SPAN:
        raise ValueError(MSG_INTEGER_RANGE.format(lo=lo, hi=hi))
    if max(-lo, hi) <= MAX_INTEGER_SPAN:
        return 0
    return -hi if maximize else lo


def shifted(matrix, offset: int, maximize: bool, dtype):
    """``sign * matrix - offset`` in ``dtype`` (every entry is within ±2**62 and the result within
    ``[0, span]``, so int64 holds every step)."""
    xp = array_module(matrix)
    wide = matrix.astype(np.int64)  # a copy, written in place from here on
    if maximize:
        xp.negative(wide, out=wide)
    if offset:
        wide -= np.int64(offset)
    return xp.ascontiguousarray(wide, dtype=dtype)


def negated(matrix, dtype):
    """``-matrix`` in ``dtype``, a new array. A CuPy float32 matrix has its sign bits flipped:
    CuPy's float32 arithmetic flushes subnormals to zero."""
    xp = array_module(matrix)
    if xp is np or matrix.dtype != np.float32 or np.dtype(dtype) != np.float32:
        return xp.negative(matrix, dtype=dtype)
    return xp.bitwise_xor(matrix.view(np.int32), np.int32(-(2**31))).view(np.float32)


def prepare(cost, maximize: bool = False, deferred: bool = False) -> Problem:
    """Validate ``cost`` and return the minimisation problem a solver works on.

    ``deferred``: for a solve on the GPU. A host float matrix that needs no transposition and no
    new dtype is returned as it is (``Problem.deferred``), so that the GPU checks its entries and
    negates it (``maximize``) on its own copy, in a fraction of a millisecond, where the host
    spent a pass over the matrix on the check and a new matrix on the negation (GEOM benefit
    n = 10000 on the device's host: 0.24 s to 0.30 s, a tenth of the solve).

    Raises
    ------
    ValueError
        not a 2-D array, NaN entries, -inf when minimising (+inf when maximising).
    TypeError
        object or complex input, as scipy.
    """
    original = as_cost_array(cost)
    xp = array_module(original)
    dtype = working_dtype(original.dtype, bool(maximize))
    matrix = original
    transposed = original.shape[0] > original.shape[1]
    if transposed:
        matrix = matrix.T
    reshaped = transposed or dtype != original.dtype or not original.flags.c_contiguous
    copies = reshaped or maximize
    if deferred and xp is np and dtype.kind == "f" and not reshaped:
        return Problem(matrix=original, transposed=False, maximize=bool(maximize), original=original, deferred=True)
    if xp is not np and copies:
        require_device_memory(original.size * dtype.itemsize, f"a copy of the {original.shape} cost matrix")
    offset = integer_offset(original, bool(maximize))
    if offset or (maximize and dtype.kind == "i"):
        # a new array; the caller's matrix is untouched
        matrix = shifted(matrix, offset, bool(maximize), dtype)
    elif maximize:
        matrix = negated(matrix, dtype)
    # no copy when the caller's matrix is already contiguous in the working dtype: solvers only read it.
    matrix = xp.ascontiguousarray(matrix, dtype=dtype)
    exponent = scale_exponent(check_entries(matrix))
    if exponent:  # a new array (the caller's matrix is untouched)
        matrix = xp.ldexp(matrix, -exponent)
    return Problem(matrix=matrix, transposed=transposed, maximize=bool(maximize), original=original, offset=offset,
                   scale_exponent=exponent)
