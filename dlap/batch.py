"""``dlap.solve_batch``: thousands of small assignment problems in one call, on a GPU (one thread
block per problem, one launch) or across the CPU's cores (one single-threaded solve per core).

The common case is small and repeated: DETR-style matching of 100-300 queries against 0-100
targets per image, a batch of images per training step; tracking frame to frame. A batch is a
3-D array ``(B, n, m)`` or a sequence of 2-D matrices of any shapes (a ragged batch: an image with
no targets is a ``(0, m)`` matrix), from NumPy, CuPy, PyTorch or any DLPack array; a GPU tensor
stays on its GPU and the answers come back in the caller's library and device.

Every problem follows scipy's contract (rectangular in both orientations, ``+inf`` forbidden, rows
sorted) and gets scipy's errors, prefixed with the problem's index. The solvers
(:mod:`dlap.backends.cpu.batch`, ``backends/gpu/cuda/batch.cu``) find shortest augmenting paths
from zero duals, exactly (float64 arithmetic; integers shifted into the range of
:mod:`dlap.problem`), and keep the duals that prove each answer: ``BatchResult.verify(b, cost)``
is :func:`dlap.certificate.certify` on problem ``b``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .arrays import adopt
from .certificate import RTOL, certify, widened
from .device import MSG_NO_GPU, gpu_available
from .options import DEVICES, Device, check_choice
from .problem import (
    MSG_INFEASIBLE,
    MSG_INVALID,
    array_module,
    as_cost_array,
    as_numeric_array,
    is_device_array,
    offset_for_range,
    working_dtype,
)
from .result import caller_duals

MSG_NOT_A_BATCH = "expected a batch: a 3-D array or a sequence of 2-D matrices, got a {ndim}-D array"


@dataclass
class BatchResult:
    """The answers to a batch, problem by problem (``result[b]`` is ``(row_ind, col_ind)``, and
    iterating gives those pairs, as a DETR matcher returns them).

    ``row_ind``, ``col_ind``: problem b's int64 indices in ``row_ind[b]``, ``col_ind[b]``, in the
    caller's library and device, ``row_ind[b]`` sorted: (B, k) arrays for a 3-D batch
    (k = min(n, m)), lists of arrays for a ragged one. ``objective``: one value per problem
    (int64 for integer costs, exact; an object array of Python ints beyond int64; float64
    otherwise). ``row_duals``, ``col_duals``: the same layout with ``duals=True`` (None
    otherwise), as :class:`dlap.Assignment` has them. ``seconds`` and ``device``.
    """

    row_ind: list
    col_ind: list
    objective: object
    maximize: bool
    device: str
    seconds: float = 0.0
    row_duals: list | None = None
    col_duals: list | None = None

    def __len__(self) -> int:
        return len(self.row_ind)

    def __getitem__(self, b: int):
        return self.row_ind[b], self.col_ind[b]

    def __iter__(self):
        return zip(self.row_ind, self.col_ind, strict=True)

    def verify(self, b: int, cost, rtol: float = RTOL):
        """The certificate of problem ``b`` (:func:`dlap.certificate.certify`) against its matrix
        ``cost``; needs the duals (``solve_batch(..., duals=True)``)."""
        if self.row_duals is None:
            raise ValueError("verify() needs the duals: solve the batch with duals=True")
        arrays = [adopt(a[b])[0] for a in (self.row_ind, self.col_ind, self.row_duals, self.col_duals)]
        xp = array_module(arrays[0])  # checked where the answers are: the matrix is moved there
        cost = adopt(cost)[0]
        cost = xp.asarray(cost) if xp is not np else (cost.get() if is_device_array(cost) else np.asarray(cost))
        objective = adopt(self.objective)[0][b]
        objective = objective.item() if hasattr(objective, "item") else objective
        return certify(cost, *arrays[:2], objective, *arrays[2:], maximize=self.maximize, rtol=rtol)


def solve_batch(costs, *, maximize: bool = False, device: Device = "auto", duals: bool = False) -> BatchResult:
    """Solve every problem of a batch (see the module docstring).

    Parameters
    ----------
    costs : 3-D array ``(B, n, m)``, or a sequence of 2-D matrices (shapes may differ)
        NumPy, CuPy, PyTorch or any DLPack / ``__cuda_array_interface__`` arrays. Never modified.
    maximize : bool
    device : {"auto", "cpu", "gpu"}
        ``"auto"``: where the batch is (a GPU array on its GPU, host arrays on the CPU).
    duals : bool
        Keep each problem's duals (``row_duals``, ``col_duals``), for :meth:`BatchResult.verify`.

    Raises
    ------
    ValueError, TypeError
        scipy's errors of the first problem that has one, as ``"problem b: ..."``; an integer
        matrix outside the exact range; a batch that is neither 3-D nor a sequence.
    """
    check_choice("device", device, DEVICES)
    started = time.perf_counter()
    problems, give_back = _problems(costs)
    on_gpu = problems.on_gpu if device == "auto" else device == "gpu"
    if on_gpu and not gpu_available():
        raise RuntimeError(MSG_NO_GPU)
    groups = problems.by_dtype()
    if len(groups) > 1:  # each problem keeps its own dtype's rules (issue 37: all were cast to float64)
        parts = [(index, _solve(group, on_gpu, maximize, duals, give_back)) for index, group in groups]
        result = _merged(parts, len(problems.n), maximize, duals)
    else:
        result = _solve(problems, on_gpu, maximize, duals, give_back)
    result.device, result.seconds = "gpu" if on_gpu else "cpu", time.perf_counter() - started
    return result


def _solve(problems: _Problems, on_gpu: bool, maximize: bool, duals: bool, give_back) -> BatchResult:
    """The problems of one working dtype, solved on the GPU or the CPU."""
    offsets = problems.integer_offsets(maximize)  # on the caller's dtypes (uint64 beyond int64 is refused)
    problems = problems.moved(on_gpu)
    sign = -1 if maximize else 1
    flat, start = problems.packed()
    check_entries(flat, start, problems.n * problems.m, maximize, problems.number)
    rows, cols = np.minimum(problems.n, problems.m), np.maximum(problems.n, problems.m)
    transposed = problems.n > problems.m
    if on_gpu:
        from .backends.gpu.batch import solve_all

        u, v, col4row, status = solve_all(flat, start, rows, cols, transposed, sign, offsets)
        status = status.get()
    else:
        u, v, col4row, status = _solve_on_cpu(flat, start, rows, cols, transposed, sign, offsets, problems.integer)
    failed = np.flatnonzero(status)
    if failed.size:
        raise ValueError(f"problem {problems.number(failed[0])}: {MSG_INFEASIBLE}")
    return problems.answers(flat, start, col4row, u, v, offsets, maximize, duals, give_back)


def _merged(parts, count: int, maximize: bool, duals: bool) -> BatchResult:
    """The results of a ragged batch's dtype groups (each ``(their problems' indices, result)``)
    in the batch's order; the objective an object array of each problem's own value."""
    result = BatchResult([None] * count, [None] * count, np.empty(count, dtype=object), maximize, "",
                         row_duals=[None] * count if duals else None, col_duals=[None] * count if duals else None)
    for index, part in parts:
        objective = part.objective.get() if is_device_array(part.objective) else part.objective
        for k, b in enumerate(index):
            result.row_ind[b], result.col_ind[b] = part.row_ind[k], part.col_ind[k]
            result.objective[b] = objective[k].item() if hasattr(objective[k], "item") else objective[k]
            if duals:
                result.row_duals[b], result.col_duals[b] = part.row_duals[k], part.col_duals[k]
    return result


def _solve_on_cpu(flat, start, rows, cols, transposed, sign, offsets, integer):
    from .backends.cpu.batch import solve_all
    from .threads import solve_threads

    n_problems = start.shape[0]
    row_stride, col_stride = max(1, int(rows.max(initial=0))), max(1, int(cols.max(initial=0)))
    u, v = np.zeros((n_problems, row_stride)), np.zeros((n_problems, col_stride))  # an empty problem keeps 0
    col4row = np.full((n_problems, row_stride), -1, dtype=np.int64)
    status = np.zeros(n_problems, dtype=np.int64)
    kind = np.int64 if integer else np.float64
    if not n_problems:
        return u, v, col4row, status
    with solve_threads(int(flat.size)):
        import numba

        threads = numba.config.NUMBA_NUM_THREADS  # get_thread_id() is below the pool's size
        solve_all(flat, start, rows.astype(np.int64), cols.astype(np.int64), transposed,
                  kind(sign), offsets.astype(kind), u, v, col4row, status,
                  np.empty((threads, 3, col_stride), dtype=np.int64), np.empty((threads, col_stride)),
                  np.empty((threads, 2, col_stride), dtype=np.bool_))
    return u, v, col4row, status


@dataclass
class _Problems:
    """The batch's matrices (NumPy or CuPy, working dtype) and their shapes; a 3-D batch is kept
    as one array (``stacked``), a ragged one as a list."""

    matrices: list | None
    stacked: object | None
    n: np.ndarray
    m: np.ndarray
    numbers: np.ndarray | None = None  # each problem's index in the caller's batch (a dtype group's)

    def number(self, b: int) -> int:
        """Problem ``b``'s index in the caller's batch (its errors name it)."""
        return int(b if self.numbers is None else self.numbers[b])

    def by_dtype(self) -> list[tuple[np.ndarray, _Problems]]:
        """The problems grouped by the dtype a solver reads (a ragged batch may mix them), each
        group with its problems' indices: one group where they share it."""
        everyone = np.arange(len(self.n))
        if self.stacked is not None:
            return [(everyone, self)]
        kinds = [working_dtype(a.dtype, False) for a in self.matrices]  # (the kernels negate as they read)
        if len(set(kinds)) <= 1:
            return [(everyone, self)]
        groups = []
        for kind in dict.fromkeys(kinds):
            index = np.array([b for b, k in enumerate(kinds) if k == kind], dtype=np.int64)
            groups.append((index, _Problems([self.matrices[b] for b in index], None, self.n[index], self.m[index],
                                            index)))
        return groups

    @property
    def on_gpu(self) -> bool:
        return is_device_array(self.stacked if self.stacked is not None else (self.matrices or [None])[0])

    @property
    def dtype(self) -> np.dtype:
        if self.stacked is not None:
            return self.stacked.dtype
        return self.matrices[0].dtype if self.matrices else np.dtype(np.float64)

    @property
    def integer(self) -> bool:
        return self.dtype.kind in "iu"

    def each(self):
        """The problems' matrices, one by one (views of a 3-D batch)."""
        return [self.stacked[b] for b in range(len(self.n))] if self.stacked is not None else self.matrices

    def moved(self, gpu: bool) -> _Problems:
        """The matrices on the GPU (``gpu``) or the host, in one working dtype."""
        if gpu:
            import cupy as xp
        else:
            xp = np
        # (a group of by_dtype: every matrix has this working dtype)
        dtype = working_dtype((self.stacked if self.stacked is not None else (self.matrices or [np.empty(0)])[0]).dtype,
                              False)

        def move(a):
            a = a.get() if (is_device_array(a) and not gpu) else a
            return xp.ascontiguousarray(xp.asarray(a), dtype=dtype)

        if self.stacked is not None:
            return _Problems(None, move(self.stacked), self.n, self.m, self.numbers)
        return _Problems([move(a) for a in self.matrices], None, self.n, self.m, self.numbers)

    def integer_offsets(self, maximize: bool) -> np.ndarray:
        """Per problem, :func:`dlap.problem.integer_offset`: the shift into ``[0, span]`` of a
        problem beyond ``±MAX_INTEGER_SPAN`` (ValueError outside the exact range), else 0."""
        offsets = np.zeros(len(self.n), dtype=np.int64)
        if not self.integer or self.dtype.itemsize < 8:
            return offsets
        sizes = self.n * self.m
        if self.stacked is not None and sizes.size and sizes.min() > 0:
            lo, hi = self.stacked.min(axis=(1, 2)).tolist(), self.stacked.max(axis=(1, 2)).tolist()
        else:
            pairs = [(int(a.min()), int(a.max())) if a.size else (0, 0) for a in self.each()]
            lo, hi = [p[0] for p in pairs], [p[1] for p in pairs]
        for b, (low, high) in enumerate(zip(lo, hi, strict=True)):
            try:
                offsets[b] = offset_for_range(low, high, maximize)
            except ValueError as e:
                raise ValueError(f"problem {self.number(b)}: {e}") from None
        return offsets

    def packed(self):
        """One flat buffer of every problem's entries (C order), and where each problem starts."""
        sizes = (self.n * self.m).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes.size else sizes
        if self.stacked is not None:
            return self.stacked.reshape(-1), start
        xp = array_module(self.matrices[0]) if self.matrices else np
        if not self.matrices:
            return xp.empty(0), start
        return xp.concatenate([a.reshape(-1) for a in self.matrices]), start

    def answers(self, flat, start, col4row, u, v, offsets, maximize, duals, give_back) -> BatchResult:
        """Each problem's indices in the caller's orientation (rows sorted), objective and duals:
        (B, k) arrays for a 3-D batch, lists for a ragged one; whole-batch operations either
        way, no device synchronisation per problem."""
        xp = array_module(col4row)
        k = np.minimum(self.n, self.m)
        objective = give_back(_objectives(xp, flat, start, col4row, self.n, self.m, self.integer))
        if self.stacked is not None:
            count, n, m = self.stacked.shape
            rows, cols = _caller_indices(xp, col4row[:, : min(n, m)], n > m)
            result = BatchResult(give_back(rows), give_back(cols), objective, maximize, "")
            if duals:
                ub, vb = self._duals(u[:, : min(n, m)], v[:, : max(n, m)], offsets, n > m, maximize)
                result.row_duals, result.col_duals = give_back(ub), give_back(vb)
            return result
        result = BatchResult([], [], objective, maximize, "", row_duals=[] if duals else None,
                             col_duals=[] if duals else None)
        counting = xp.arange(col4row.shape[1], dtype=np.int64)
        work = col4row.astype(np.int64, copy=False)  # int32 on a GPU; int64 answers, as scipy's
        # the transposed problems' answers sorted by the caller's rows, all in one sort (the
        # padding past a problem's k sorts last)
        past = counting[None, :] >= xp.asarray(k)[:, None]
        order = xp.argsort(xp.where(past, np.iinfo(np.int64).max, work), axis=1)
        by_row = xp.take_along_axis(work, order, axis=1)
        for b, (n, m) in enumerate(zip(self.n.tolist(), self.m.tolist(), strict=True)):
            rows, cols = (by_row[b, : k[b]], order[b, : k[b]]) if n > m else (counting[: k[b]], work[b, : k[b]])
            result.row_ind.append(give_back(rows))
            result.col_ind.append(give_back(cols))
            if duals:
                ub, vb = self._duals(u[b : b + 1, : k[b]], v[b : b + 1, : max(n, m)], offsets[b : b + 1], n > m,
                                     maximize)
                result.row_duals.append(give_back(ub[0]))
                result.col_duals.append(give_back(vb[0]))
        return result

    def _duals(self, u, v, offsets, transposed, maximize):
        """Working duals of a block of problems as the callers' (rows first)."""
        xp = array_module(u)
        ub, vb = caller_duals(u, v, integer=self.integer, offset=xp.asarray(offsets)[:, None], maximize=maximize)
        return (vb, ub) if transposed else (ub, vb)


def check_entries(flat, start, sizes, maximize: bool, number=int) -> None:
    """scipy's ValueError for NaN, or -inf when minimising (+inf when maximising), naming the
    first problem that has one (``number``: its index in the caller's batch): one pass over the
    packed batch, one synchronisation."""
    if flat.dtype.kind != "f" or not flat.size:
        return
    xp = array_module(flat)
    good = flat < np.inf if maximize else flat > -np.inf  # False for NaN too
    if bool(good.all()):
        return
    first = int(xp.argmin(good))
    problem = int(np.searchsorted(start + sizes, first, side="right"))
    raise ValueError(f"problem {number(problem)}: {MSG_INVALID}")


def _objectives(xp, flat, start, col4row, n, m, integer: bool):
    """Each problem's total, gathered from the packed batch at its assigned pairs: float64 sums,
    or exact integers (int64, or an object array of Python ints beyond int64)."""
    count, width = col4row.shape
    if not count:
        return xp.zeros(0, dtype=np.int64 if integer else np.float64)
    rows, cols = np.minimum(n, m), np.maximum(n, m)
    to = {"dtype": np.int64}
    i = xp.arange(width, dtype=np.int64)[None, :]
    valid = i < xp.asarray(rows, **to)[:, None]
    j = xp.where(valid, col4row.astype(np.int64), 0)
    transposed = xp.asarray(n > m)[:, None]
    offset = xp.where(transposed, j * xp.asarray(rows, **to)[:, None] + i, i * xp.asarray(cols, **to)[:, None] + j)
    position = xp.where(valid, xp.asarray(start, **to)[:, None] + offset, 0)
    picked = xp.where(valid, flat[position] if flat.size else xp.zeros(position.shape, flat.dtype), 0)
    if not integer:
        return widened(picked).sum(axis=1)
    if picked.size and width * int(abs(picked).max()) >= 2**63:  # beyond int64: Python ints
        return np.asarray([sum(row) for row in picked.tolist()], dtype=object)
    return picked.sum(axis=1, dtype=np.int64)


def _caller_indices(xp, work, transposed):
    """``(rows, cols)`` of a block of problems (one per row of ``work``, the working rows'
    columns) in the callers' orientation, rows sorted."""
    work = work.astype(np.int64)
    if not transposed:
        return xp.broadcast_to(xp.arange(work.shape[1], dtype=np.int64), work.shape).copy(), work
    order = xp.argsort(work, axis=1)
    return xp.take_along_axis(work, order, axis=1), order


def _problems(costs):
    """The batch as :class:`_Problems`, with scipy's per-problem errors, and the function that
    returns results in the caller's kind."""
    costs, give_back = adopt(costs)
    if isinstance(costs, (list, tuple)):
        matrices = []
        for b, cost in enumerate(costs):
            cost, back = adopt(cost)
            if b == 0:
                give_back = back
            try:
                matrices.append(as_cost_array(cost))
            except (TypeError, ValueError) as e:
                raise type(e)(f"problem {b}: {e}") from None
        shapes = np.array([a.shape for a in matrices], dtype=np.int64).reshape(-1, 2)
        return _Problems(matrices, None, shapes[:, 0], shapes[:, 1]), give_back
    array = as_numeric_array(costs)
    if array.ndim != 3:
        raise ValueError(MSG_NOT_A_BATCH.format(ndim=array.ndim))
    count, n, m = array.shape
    return _Problems(None, array, np.full(count, n, dtype=np.int64), np.full(count, m, dtype=np.int64)), give_back
