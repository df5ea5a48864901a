"""GPU backend: the phase primitives of Date & Nagi (2016) as CUDA kernels, launched through CuPy.

Each primitive is one to three kernel launches; the searches (the classical BFS and the tree
variant's Dijkstra-like growth) are persistent kernels that loop on the device with a grid-wide
barrier, so the host reads a few scalars per iteration, never per BFS level (docs/design.md, "GPU:
launches and syncs, not bandwidth"). The kernels are in ``backends/gpu/cuda/``.

A NumPy matrix is copied in row chunks through pinned buffers by several host threads, each on its
own stream (one chunk's worth in a single copy); the first phases' reductions (row minima, and
the column minima of JV's column reduction) run on each chunk as soon as it lands, overlapped with
the rest of the copy, and so do the checks and the negation of a float matrix that
``dlap.problem.prepare`` left to the GPU. A CuPy matrix is used where it is, in its own dtype.
"""

from __future__ import annotations

import math
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import cupy
import numpy as np

from ...certificate import widened
from ...device import require_device_memory
from ...hungarian.state import HungarianState
from ...problem import FLOAT_HEADROOM, MSG_INVALID, Problem, scale_exponent, unscaled_duals
from .. import constants as c
from ..base import (
    ARR_MAX_ROUNDS,
    ARR_MIN_PROGRESS,
    FLOAT_TOL_SCALE,
    DeviceBackend,
    install_assignment,
    rescan_bound,
)
from ..constants import KEEP_UNCOVERED, SCAN_BATCH, SCAN_ROW, SEARCH_WIDE_THREADS, THETA_ROWS
from . import kernels as gk

#: host-to-device copy: rows per chunk (about this many bytes) and host threads copying at once
UPLOAD_CHUNK_BYTES = 32 << 20
UPLOAD_THREADS = 8
#: column reductions: split the rows into bands so about this many blocks read at once
COLUMN_BAND_BLOCKS = 4096
#: device memory per row or column for the solver state (duals, levels, slacks, indices, ARR)
STATE_BYTES_PER_VERTEX = 128
#: the classical compression stages this many zero-slack edges per row on average (uniform costs
#: have a few; the rows past the buffer are read a second time)
STAGED_EDGES_PER_ROW = 16
#: ε-scaling: shared memory per column of a search (prices, distances, its row's dual, its row,
#: its predecessor, the completed flag) and of the greedy start (prices, taken flag), when it fits
SCALING_SHARED_BYTES_PER_COLUMN = 8 + 8 + 8 + 4 + 4 + 1
GREEDY_SHARED_BYTES_PER_COLUMN = 8 + 4
#: a search's columns per block of its cluster, at least (the cluster is the largest that keeps it:
#: a cluster's barrier costs what its narrower scan saves below about this many columns a block)
SCALING_BLOCK_COLUMNS = 1250
#: blocks per search cluster, forced (None: chosen by SCALING_BLOCK_COLUMNS)
SCALING_CLUSTER: int | None = None
#: a cluster's blocks are wide where a block of the narrow layout (1024 threads a cluster) would
#: load its slice of a row in more than this many batches
SCALING_WIDE_BATCHES = 1
#: wide search blocks, forced on or off (None: chosen by SCALING_WIDE_BATCHES)
SCALING_WIDE: bool | None = None


@dataclass
class GPUState(HungarianState):
    """The shared state plus the device control block, the barrier and the upload's reductions."""

    ctl: Any = None  # uint64[CTL_SIZE]: counters and scalars (backends/constants.py, CTL_*)
    barrier: Any = None  # uint32[2]: the persistent kernels' grid barrier
    device_id: int = 0
    zeros_rows: Any = None
    zeros_cols: Any = None
    band_rows: int = 1  # column reductions: rows per band
    band_low: Any = None  # [n_bands, n_cols] band minima of the raw matrix (JV column reduction)
    band_arg: Any = None
    bands_ready: bool = False  # band_low/band_arg hold the raw column minima (from the upload)
    row_min_ready: bool = False  # u holds the raw row minima (from the upload)
    scaling: Any = None  # the ε-scaling phases' search arrays (_ScalingBuffers), made on first use
    staged: Any = None  # int32[STAGED_EDGES_PER_ROW * n_rows]: the compression's staged edges, made on first use
    upload_exponent: int = 0  # the device copy is the uploaded matrix times 2**-upload_exponent (huge costs)


@dataclass
class _ScalingBuffers:
    """The ε-scaling searches' arrays, one entry per column: distances, the rows' duals, completed
    flags and the scans' predecessors (used where shared memory is too small), the completed
    columns' predecessors, the completed columns and their distances; the virtual rows' columns."""

    dist: Any
    col_u: Any
    closed: Any
    scan_pred: Any
    pred: Any
    done: Any
    done_dist: Any
    extra_match: Any

    @classmethod
    def allocate(cls, n_rows: int, n_cols: int) -> _ScalingBuffers:
        require_device_memory(37 * n_cols + 4 * n_rows, f"the ε-scaling searches of a {n_rows} x {n_cols} matrix")
        index = lambda: cupy.empty(n_cols, dtype=np.int32)  # noqa: E731 - one column array of indices
        return cls(
            dist=cupy.empty(n_cols), col_u=cupy.empty(n_cols), closed=cupy.empty(n_cols, dtype=np.uint8),
            scan_pred=index(), pred=index(), done=index(), done_dist=cupy.empty(n_cols),
            extra_match=cupy.full(max(1, n_cols - n_rows), -1, dtype=np.int32),
        )


def _unordered(bits: int) -> float:
    """Inverse of common.cuh's ordered(): the double an order-preserving u64 stands for."""
    raw = bits & ~(1 << 63) if bits >> 63 else ~bits & (2**64 - 1)
    return struct.unpack("<d", raw.to_bytes(8, "little"))[0]


def _ordered(x: float) -> np.uint64:
    """common.cuh's ordered(): the order-preserving u64 of a double (for the atomicMin slots)."""
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    return np.uint64(~bits & (2**64 - 1) if bits >> 63 else bits | (1 << 63))


#: the largest finite magnitude of an array, in one pass and no temporary
_largest_finite = cupy.ReductionKernel(
    "T x", "float64 y", "isinf((double)x) ? 0.0 : fabs((double)x)", "max(a, b)", "y = a", "0.0",
    "dlap_largest_finite",
)


def _finite(x) -> bool:
    return bool(cupy.isfinite(x).all())


def _search_threads(n_cols: int, limit: int = gk.PERSISTENT_BLOCK) -> int:
    """Threads of a block scanning ``n_cols`` columns: enough that each loads its entries of a
    row in one batch (scaling.cu's SCAN_BATCH), at most ``limit``: narrower matrices pay for fewer
    warps at each barrier."""
    return min(limit, max(32, -(-n_cols // (SCAN_BATCH * 32)) * 32))


def _search_cluster(n_cols: int, device_id: int) -> int:
    """Blocks of the cluster that scans a row (a search's, the greedy start's): SCALING_CLUSTER,
    or the largest portable one whose blocks keep SCALING_BLOCK_COLUMNS columns or more; a larger
    one (16 blocks, where the device schedules it) where the portable one's slices do not fit in
    shared memory: twice the multiprocessors for a step whose blocks then work in device memory,
    or keep half as many columns in shared memory."""
    if SCALING_CLUSTER:
        return SCALING_CLUSTER
    sizes = gk.cluster_sizes("scaling_phase")
    cluster = max(c for c in sizes if c <= gk.PORTABLE_CLUSTER and (c == 1 or n_cols // c >= SCALING_BLOCK_COLUMNS))
    larger = [c for c in sizes if c > gk.PORTABLE_CLUSTER]
    if cluster == gk.PORTABLE_CLUSTER and larger and not gk.shared_fits(
            SCALING_SHARED_BYTES_PER_COLUMN * -(-n_cols // cluster), device_id):
        cluster = max(larger)
    return cluster


def _search_kernel(n_cols: int, dtype, device_id: int):
    """(scaling_phase kernel, blocks per search cluster, threads per block, shared memory per
    block): the cluster of :func:`_search_cluster`, with wide blocks where narrow ones would scan
    a row in several batches (SCALING_WIDE_BATCHES, or SCALING_WIDE); 33 bytes of shared memory
    per column, or device memory where a block's slice does not fit in it."""
    cluster = _search_cluster(n_cols, device_id)
    chunk = -(-n_cols // cluster)
    # scaling.cu's search_threads(cluster, wide): 32 warps' slots a cluster, registers for a batch
    narrow = 512 if cluster == 1 else gk.PERSISTENT_BLOCK // cluster
    wide = cluster in gk.cluster_sizes("scaling_phase", wide=True) and (
        chunk > SCALING_WIDE_BATCHES * SCAN_BATCH * narrow if SCALING_WIDE is None else SCALING_WIDE)
    kernel = gk.kernel("scaling", "scaling_phase", dtype, cluster, wide)
    shared = gk.shared_launch(kernel, SCALING_SHARED_BYTES_PER_COLUMN * chunk, device_id)
    return kernel, cluster, _search_threads(chunk, SEARCH_WIDE_THREADS if wide else narrow), shared


class GPUBackend(DeviceBackend):
    """Date & Nagi's primitives on one CUDA device."""

    device = "gpu"
    parallel_bidding = True

    def allocate(self, problem: Problem) -> GPUState:
        matrix = problem.matrix
        n_rows, n_cols = matrix.shape
        on_device = isinstance(matrix, cupy.ndarray)
        state_bytes = STATE_BYTES_PER_VERTEX * (n_rows + n_cols)
        col_blocks = gk.blocks(n_cols)
        n_bands = min(n_rows, max(1, COLUMN_BAND_BLOCKS // col_blocks))
        band_rows = -(-n_rows // n_bands)
        n_bands = -(-n_rows // band_rows)
        band_bytes = 12 * n_bands * n_cols
        matrix_bytes = 0 if on_device else matrix.nbytes
        require_device_memory(
            matrix_bytes + state_bytes + band_bytes,
            f"a {n_rows} x {n_cols} {matrix.dtype} cost matrix "
            f"({matrix_bytes / 2**30:.2f} GiB to copy, {(state_bytes + band_bytes) / 2**20:.0f} MiB of solver state)",
        )
        state = self._allocate_state(
            matrix if on_device else cupy.empty(matrix.shape, matrix.dtype),
            0.0 if problem.is_integer else FLOAT_TOL_SCALE,
            zeros_rows=cupy.zeros(n_rows),
            zeros_cols=cupy.zeros(n_cols),
            band_rows=band_rows,
            band_low=cupy.empty((n_bands, n_cols)),
            band_arg=cupy.empty((n_bands, n_cols), dtype=np.int32),
        )
        if not on_device:
            invalid, huge = self._upload(matrix, state, problem.deferred, problem.deferred and problem.maximize)
            if invalid:
                raise ValueError(MSG_INVALID)
            if huge:
                self._scale_into_range(state)
        return state

    @staticmethod
    def _scale_into_range(state: GPUState) -> None:
        """A deferred float matrix with costs beyond FLOAT_HEADROOM: the device copy scaled by a
        power of two (as dlap.problem.prepare scales a host matrix), the duals given back scaled
        up by :meth:`to_host` and :meth:`to_device`; the upload's reductions are made again."""
        state.upload_exponent = scale_exponent(float(_largest_finite(state.cost)))
        cupy.ldexp(state.cost, -state.upload_exponent, out=state.cost)
        state.row_min_ready = state.bands_ready = False

    @staticmethod
    def _allocate_state(cost, tol_scale: float, **extra) -> GPUState:
        ctl = cupy.zeros(c.CTL_SIZE, dtype=np.uint64)
        ctl[c.CTL_OFFER_LOW] = gk.ORDERED_INF  # tree_offer's running minimum starts (and ends) there
        return GPUState.allocate(
            cost, cupy, np.int32, np.int32, tol_scale, ctl=ctl, barrier=cupy.zeros(2, dtype=np.uint32),
            device_id=cupy.cuda.runtime.getDevice(), **extra,
        )

    def allocate_graph(self, shape, dtype, tol_scale):
        require_device_memory(STATE_BYTES_PER_VERTEX * sum(shape), f"the search state of a {shape} matrix")
        return self._allocate_state(cupy.broadcast_to(cupy.zeros((), dtype=dtype), shape), tol_scale)

    # ---------------------------------------------------------------- host-to-device copy

    def _upload(self, host: np.ndarray, state: GPUState, check: bool, negate: bool) -> bool:
        """Copy ``host`` into ``state.cost`` and reduce it as it lands (row minima, band column
        minima), after negating it (``negate``) and checking its entries (``check``: the work of a
        deferred :class:`Problem`). Leaves ``u`` = row minima and the bands = raw column minima;
        returns whether an entry was NaN or -inf, and whether one was finite beyond
        ``FLOAT_HEADROOM`` (both checked only with ``check``).

        A matrix of one chunk (``UPLOAD_CHUNK_BYTES``) goes in one copy from pageable memory (the
        driver's own staging pipelines it); a larger one in row chunks through pinned buffers,
        several host threads at once, each chunk processed on its stream as soon as it lands
        (one copy is the faster below ``UPLOAD_CHUNK_BYTES``, the chunks two to three times
        faster above)."""
        n_rows, n_cols = host.shape
        row_bytes = n_cols * host.itemsize
        chunk_rows = max(1, UPLOAD_CHUNK_BYTES // row_bytes) // state.band_rows * state.band_rows
        chunk_rows = max(state.band_rows, chunk_rows)
        chunks = [(a, min(n_rows, a + chunk_rows)) for a in range(0, n_rows, chunk_rows)]
        n_workers = max(1, min(UPLOAD_THREADS, len(chunks), os.cpu_count() or 1))
        row_minimum, band_minima, invalid_entries = (
            gk.kernel("reduction", name, host.dtype) for name in ("row_minimum", "column_minimum_bands", "invalid_entries"))
        flags = cupy.zeros(2, dtype=np.int32)  # an invalid entry, a huge one
        device = state.cost

        def landed(a: int, b: int) -> None:  # rows [a, b) are on the device (current stream)
            if negate:  # flip the sign bits: exact, where CuPy's float negation flushes subnormals
                bits = device[a:b].view(np.uint32 if host.itemsize == 4 else np.uint64)
                cupy.bitwise_xor(bits, bits.dtype.type(1 << (8 * host.itemsize - 1)), out=bits)
            if check:
                entries = (b - a) * n_cols
                invalid_entries((gk.blocks(entries, 4 * gk.BLOCK),), (gk.BLOCK,),
                                (device[a:b], np.int64(entries), np.float64(FLOAT_HEADROOM), flags, flags[1:]))
            self._reduce_rows(state, row_minimum, band_minima, a, b)

        state.row_min_ready = state.bands_ready = True
        if len(chunks) == 1:
            device.set(host)
            landed(0, n_rows)
            return tuple(bool(x) for x in flags.get())
        cupy.cuda.Device(state.device_id).synchronize()  # the state's fills (null stream) are done

        def worker(w: int) -> None:
            stream = cupy.cuda.Stream(non_blocking=True)
            pinned = cupy.cuda.alloc_pinned_memory(chunk_rows * row_bytes)
            buf = np.frombuffer(pinned, dtype=host.dtype, count=chunk_rows * n_cols).reshape(chunk_rows, n_cols)
            with cupy.cuda.Device(state.device_id), stream:
                for a, b in chunks[w::n_workers]:
                    stream.synchronize()  # this worker's buffer is free again
                    np.copyto(buf[: b - a], host[a:b])
                    cupy.cuda.runtime.memcpyAsync(
                        device[a:b].data.ptr, buf.ctypes.data, (b - a) * row_bytes,
                        cupy.cuda.runtime.memcpyHostToDevice, stream.ptr,
                    )
                    landed(a, b)
                stream.synchronize()

        with ThreadPoolExecutor(n_workers) as pool:
            list(pool.map(worker, range(n_workers)))
        return tuple(bool(x) for x in flags.get())

    def _reduce_rows(self, state: GPUState, row_min, bands, a: int, b: int) -> None:
        """Row minima of rows [a, b) into u, raw column minima of their bands (current stream)."""
        n_cols = state.n_cols
        row_min((b - a,), (gk.BLOCK,), (state.cost[a:b], np.int32(b - a), np.int32(n_cols), state.zeros_cols, state.u[a:b]))
        self._column_bands(state, bands, a, b, state.zeros_rows)

    @staticmethod
    def _column_bands(state: GPUState, bands, a: int, b: int, u) -> None:
        """Band minima of C - u over rows [a, b) (a on a band boundary)."""
        n_cols, band_rows = state.n_cols, state.band_rows
        grid = (gk.blocks(n_cols), -(-(b - a) // band_rows))
        bands(grid, (gk.BLOCK,), (
            state.cost, np.int32(a), np.int32(b), np.int32(n_cols), u, np.int32(band_rows),
            np.int32(a // band_rows), state.band_low, state.band_arg,
        ))

    def _column_minimum(self, state: GPUState, u):
        """Column reduction: v[j] = min_i (C - u), returning argmin (first row on ties)."""
        if u is not state.zeros_rows or not state.bands_ready:
            self._column_bands(state, gk.kernel("reduction", "column_minimum_bands", state.cost.dtype), 0, state.n_rows, u)
        argmin = cupy.empty(state.n_cols, dtype=np.int32)
        gk.kernel("reduction", "column_minimum_combine")(
            (gk.blocks(state.n_cols),), (gk.BLOCK,),
            (state.band_low, state.band_arg, np.int32(state.band_low.shape[0]), np.int32(state.n_cols), state.v, argmin),
        )
        state.bands_ready = False  # the bands now hold whatever this call reduced
        return argmin

    def _row_minimum(self, state: GPUState, v) -> None:
        gk.kernel("reduction", "row_minimum", state.cost.dtype)(
            (state.n_rows,), (gk.BLOCK,), (state.cost, np.int32(state.n_rows), np.int32(state.n_cols), v, state.u)
        )

    # ---------------------------------------------------------------- initialisation

    def initial_reduction(self, state, columns):
        if not state.row_min_ready:
            self._row_minimum(state, state.zeros_cols)
        state.row_min_ready = False
        if not _finite(state.u):
            return False  # a row of forbidden entries only
        if columns:
            self.column_reduction(state)
            return _finite(state.v)
        return True

    def column_reduction(self, state):
        self._column_minimum(state, state.u)

    def column_minima(self, state):
        return self._column_minimum(state, state.zeros_rows)

    def row_duals(self, state):
        self._row_minimum(state, state.v)

    def row_minima_terms(self, state, rows):
        """bidding.cu's ``row_minima_terms``: one 1024-thread block per row, one block per
        multiprocessor (the module is launched cooperatively), the row terms of the rounds of bids."""
        rows = cupy.ascontiguousarray(rows, dtype=np.int32)
        terms = cupy.empty((rows.shape[0], 5))
        if rows.shape[0]:
            grid = min(rows.shape[0], gk.multiprocessors(state.device_id))
            gk.kernel("bidding", "row_minima_terms", state.cost.dtype)((grid,), (gk.PERSISTENT_BLOCK,), (
                state.cost, np.int32(state.cost.shape[1]), state.v, state.col_match, rows, np.int32(rows.shape[0]),
                terms))
        return terms

    def search_offer(self, state, match, row, shift):
        offer = cupy.empty(5)
        gk.launch_persistent("forward", "search_offer", state.cost.dtype, (
            state.cost, np.int32(state.n_cols), state.v, state.v_open, state.slack, state.col_pred, match,
            np.int32(row), np.float64(shift), offer, state.ctl, state.barrier,
        ), state.device_id)
        return offer

    def column_competition(self, state, row_low):
        n_bands, n_cols = state.band_low.shape
        second, out = cupy.empty_like(state.band_low), cupy.empty(n_cols)
        gk.kernel("scaling", "competition_bands", state.cost.dtype)((gk.blocks(n_cols), n_bands), (gk.BLOCK,), (
            state.cost, np.int32(state.n_rows), np.int32(n_cols), row_low, np.int32(state.band_rows),
            state.band_low, second,
        ))
        gk.kernel("scaling", "competition_combine")((gk.blocks(n_cols),), (gk.BLOCK,), (
            state.band_low, second, np.int32(n_bands), np.int32(n_cols), out,
        ))
        state.bands_ready = False  # band_low no longer holds the raw column minima
        return out

    def cheapest_untaken(self, state, row, taken):
        out = cupy.empty(2)
        gk.kernel("scaling", "cheapest_untaken", state.cost.dtype)((1,), (gk.PERSISTENT_BLOCK,), (
            state.cost, np.int32(state.n_cols), np.int64(row), state.v, taken, out))
        value, col = out.get().tolist()
        return value, int(col)

    def lower_taken_prices(self, state, row, own, taken):
        gk.kernel("scaling", "lower_taken_prices", state.cost.dtype)((gk.blocks(state.n_cols),), (gk.BLOCK,), (
            state.cost, np.int32(state.n_cols), np.int64(row), state.v, taken, np.float64(own)))

    def bids_of_terms(self, terms, eps):
        n = terms.shape[0]
        cols, dec = cupy.empty(n, dtype=np.int32), cupy.empty(n)
        if n:
            gk.kernel("bidding", "bids_of_terms")((gk.blocks(n),), (gk.BLOCK,), (
                cupy.ascontiguousarray(terms), np.int32(n), np.float64(eps), cols, dec))
        return cols, dec

    def award_bids(self, state, rows, cols, dec):
        _, _, _, col_best, col_winner = self._bid_buffers(state)
        rows, n = cupy.ascontiguousarray(rows, dtype=np.int32), rows.shape[0]
        if n:
            grid = (gk.blocks(n),), (gk.BLOCK,)
            gk.kernel("bidding", "award_best")(*grid, (cols, dec, np.int32(n), col_best))
            gk.kernel("bidding", "award_winner")(*grid, (rows, cols, dec, np.int32(n), col_best, col_winner))
            gk.kernel("bidding", "award_take")(*grid, (
                rows, cols, dec, np.int32(n), state.row_match, state.col_match, state.v, col_best, col_winner))
        return self.optimality_check(state)

    def jv_initialisation(self, state):
        n_rows, n_cols = state.n_rows, state.n_cols
        state.row_min_ready = False
        if n_rows == n_cols:
            argmin = self.column_minima(state)
            if not _finite(state.v):
                return False  # a column of forbidden entries only
            count = cupy.zeros(n_rows, dtype=np.int32)
            first_col = cupy.full(n_rows, n_cols, dtype=np.int32)
            gk.kernel("reduction", "jv_claim_minima")((gk.blocks(n_cols),), (gk.BLOCK,), (argmin, np.int32(n_cols), count, first_col))
            gk.kernel("reduction", "jv_assign_minima")(
                (gk.blocks(n_rows),), (gk.BLOCK,), (np.int32(n_rows), count, first_col, state.row_match, state.col_match)
            )
            transfer = cupy.full(n_rows, np.inf)
            gk.kernel("reduction", "jv_reduction_transfer", state.cost.dtype)(
                (n_rows,), (gk.BLOCK,), (state.cost, np.int32(n_rows), np.int32(n_cols), count, state.row_match, state.v, transfer)
            )
            gk.kernel("reduction", "jv_apply_transfer")(
                (gk.blocks(n_rows),), (gk.BLOCK,), (np.int32(n_rows), count, state.row_match, transfer, state.v)
            )
        self._augmenting_row_reduction(state)
        self.row_duals(state)
        return _finite(state.u)

    def _augmenting_row_reduction(self, state: GPUState) -> None:
        """JV's augmenting row reduction: rounds of bids with ε = 0 (bidding.cu)."""
        self.optimality_check(state)
        self.bidding_rounds(state, 0.0, 0, ARR_MAX_ROUNDS, ARR_MAX_ROUNDS, 1 - ARR_MIN_PROGRESS)

    def bidding_rounds(self, state, eps, tail, max_rounds, stall, keep_share):
        bid_col, bid_dec, next_rows, col_best, col_winner = self._bid_buffers(state)
        state.ctl[c.CTL_BID_ROUNDS : c.CTL_BIDS + 1] = 0
        gk.launch_persistent("bidding", "bidding_rounds", state.cost.dtype, (
            state.cost, np.int32(state.n_cols), state.v, np.float64(eps), state.row_match, state.col_match,
            state.free_rows, next_rows, bid_col, bid_dec, col_best, col_winner, np.int32(tail),
            np.int32(max_rounds), np.int32(stall), np.float64(keep_share), state.ctl, state.barrier,
        ), state.device_id)
        ctl = state.ctl.get()
        state.n_free = int(ctl[c.CTL_N_FREE])
        return state.n_free, int(ctl[c.CTL_BID_ROUNDS]), int(ctl[c.CTL_BIDS])

    @staticmethod
    def _bid_buffers(state):
        """The bids' scratch, made once: per free row the column, the decrement and the next
        round's list; per column the best bid (0 between rounds) and its row (INT_MAX)."""
        if state.bids is None:
            state.bids = (cupy.empty(state.n_rows, dtype=np.int32), cupy.empty(state.n_rows),
                          cupy.empty(state.n_rows, dtype=np.int32), cupy.zeros(state.n_cols, dtype=np.uint64),
                          cupy.full(state.n_cols, np.iinfo(np.int32).max, dtype=np.int32))
        return state.bids

    def initial_assignment(self, state):
        gk.kernel("reduction", "initial_assignment", state.cost.dtype)(
            (state.n_rows,), (gk.BLOCK,), (
                state.cost, np.int32(state.n_rows), np.int32(state.n_cols), state.u, state.v,
                np.float64(state.tol_scale), state.row_match, state.col_match,
            ),
        )
        return int(cupy.count_nonzero(state.row_match >= 0))

    # ---------------------------------------------------------------- both variants

    def optimality_check(self, state):
        state.ctl[c.CTL_N_FREE] = 0
        gk.kernel("paths", "optimality_check")(
            (gk.blocks(state.n_rows),), (gk.BLOCK,), (state.row_match, np.int32(state.n_rows), state.free_rows, state.ctl)
        )
        state.n_free = int(state.ctl[c.CTL_N_FREE])
        return state.n_free

    def reverse_pass(self, state):
        gk.kernel("paths", "reverse_pass")(
            (gk.blocks(state.n_reverse),), (gk.BLOCK,), (
                state.reverse, state.col_pred, state.row_pred, state.claimed, state.succ_row,
                state.aug_roots, state.ctl,
            ),
        )
        state.n_paths = int(state.ctl[c.CTL_N_PATHS])
        return state.n_paths

    def augment(self, state):
        gk.kernel("paths", "augment")(
            (gk.blocks(state.n_paths),), (gk.BLOCK,),
            (state.aug_roots, state.succ_row, state.row_match, state.col_match, state.claimed, state.ctl),
        )

    def _read_search(self, state: GPUState) -> np.ndarray:
        """The control block after a search: one device-to-host copy of 128 bytes."""
        ctl = state.ctl.get()
        state.n_reverse = int(ctl[c.CTL_N_REV])
        state.n_forest_rows = int(ctl[c.CTL_N_Q])
        state.n_forest_cols = int(ctl[c.CTL_N_FOREST])
        return ctl

    # ---------------------------------------------------------------- classical variant

    def compress(self, state):
        """Section 3.3 in one read of the matrix (classical.cu: ``compress_scan`` counts each
        row's zero-slack edges and stages them, ``compress_fill`` places them after the prefix
        sum; only a row with more than ``COMPRESS_ROW_EDGES``, or past the staging buffer's
        ``STAGED_EDGES_PER_ROW`` per row, is read again)."""
        return self._compress(state, cupy.full(state.n_rows, SCAN_ROW, dtype=np.int8))

    def recompress(self, state, theta):
        """:meth:`compress`'s kernels on the rows ``base.compression_plan`` scans; the other
        rows' edges come from the previous CSR. The plan is made by one kernel (classical.cu:
        ``compression_plan``), not CuPy's five, whose launches cost as much as the compression at
        n = 10000 (0.15 ms)."""
        n_q = state.n_forest_rows
        how = cupy.full(state.n_rows, KEEP_UNCOVERED, dtype=np.int8)
        if n_q:  # (a Dask rank's slab may hold none of the forest's rows)
            gk.kernel("classical", "compression_plan")((gk.blocks(n_q),), (gk.BLOCK,), (
                state.rows_q, state.forest_low, np.float64(rescan_bound(theta, state.tol_scale)), np.int32(n_q),
                how))
        return self._compress(state, how)

    @staticmethod
    def _compress(state: GPUState, how) -> int:
        n_rows, n_cols, dtype = state.n_rows, state.n_cols, state.cost.dtype
        counts, starts = cupy.empty(n_rows, dtype=np.int64), cupy.empty(n_rows, dtype=np.int64)
        if state.staged is None:
            require_device_memory(4 * STAGED_EDGES_PER_ROW * n_rows, "the compression's staging buffer")
            state.staged = cupy.empty(STAGED_EDGES_PER_ROW * n_rows, dtype=np.int32)
        # the previous CSR, read for the rows `how` does not scan (none in a first compression)
        old = (state.row_ptr, state.col_idx) if state.row_ptr is not None else (counts, state.staged)
        state.ctl[c.CTL_STAGED] = 0
        args = (
            state.cost, np.int32(n_rows), np.int32(n_cols), state.u, state.v, np.float64(state.tol_scale),
            how, *old, state.col_seen,
        )
        gk.kernel("classical", "compress_scan", dtype)((n_rows,), (gk.BLOCK,), (
            *args, counts, starts, state.staged, np.int64(state.staged.shape[0]), state.ctl))
        row_ptr = cupy.zeros(n_rows + 1, dtype=np.int64)
        cupy.cumsum(counts, out=row_ptr[1:])
        nnz = int(row_ptr[-1])
        require_device_memory(4 * nnz, f"the zero-slack graph ({nnz} edges)")
        col_idx = cupy.empty(max(nnz, 1), dtype=np.int32)
        gk.kernel("classical", "compress_fill", dtype)((n_rows,), (gk.BLOCK,), (
            *args, starts, state.staged, row_ptr, col_idx))
        state.row_ptr, state.col_idx = row_ptr, col_idx
        return nnz

    def classical_forward_pass(self, state, resume=False):
        gk.launch_persistent("forward", "classical_forward_pass", None, (
            state.row_ptr, state.col_idx, state.col_match, state.free_rows, np.int32(state.n_cols),
            np.int32(state.n_forest_rows if resume else 0),
            state.col_pred, state.row_pred, state.col_seen, state.rows_q, state.reverse, state.ctl,
            state.barrier,
        ), state.device_id)
        self._read_search(state)
        return state.n_reverse

    def classical_theta(self, state):
        n_q = state.n_forest_rows
        state.ctl[c.CTL_N_Q] = n_q
        state.ctl[c.CTL_THETA] = gk.ORDERED_INF
        if state.forest_low is None:
            state.forest_low = cupy.empty(state.n_rows)
        blocks = max(-(-n_q // THETA_ROWS), 1)
        gk.kernel("classical", "classical_theta", state.cost.dtype)((blocks,), (gk.BLOCK,), (
            state.cost, np.int32(state.n_cols), state.rows_q, state.u, state.v, state.col_seen,
            np.float64(state.tol_scale), state.forest_low, state.ctl,
        ))
        return _unordered(int(state.ctl[c.CTL_THETA]))

    def classical_shift(self, state, theta):
        state.ctl[c.CTL_THETA] = _ordered(theta)
        gk.kernel("classical", "classical_shift")(
            (gk.blocks(max(state.n_cols, state.n_forest_rows)),), (gk.BLOCK,),
            (state.rows_q, np.int32(state.n_cols), state.col_seen, state.ctl, state.u, state.v),
        )

    # ---------------------------------------------------------------- tree variant

    def tree_forward_pass(self, state, n_roots, collect_ties):
        gk.launch_persistent("forward", "tree_forward_pass", state.cost.dtype, (
            state.cost, np.int32(state.n_cols), state.u, state.v, state.col_match, state.free_rows,
            np.int32(n_roots), np.int32(bool(collect_ties)), state.slack, state.col_pred,
            state.row_pred, state.row_level, state.col_level, state.v_open, state.forest_cols,
            state.rows_q, state.reverse, state.ctl, state.barrier,
        ), state.device_id)
        ctl = self._read_search(state)
        if ctl[c.CTL_STATUS] == 2:
            raise RuntimeError("dlap internal error: the GPU tree search stopped making progress")
        return -1 if ctl[c.CTL_STATUS] else state.n_reverse

    def tree_scan(self, state, rows, shift, n):
        gk.kernel("tree", "tree_scan", state.cost.dtype)((gk.blocks(state.n_cols),), (gk.BLOCK,), (
            state.cost, np.int32(state.n_cols), rows, shift, np.int32(n), state.v_open, state.slack, state.col_pred,
        ))

    def tree_offer(self, state, level, lo, out):
        gk.launch_persistent("forward", "tree_offer", None, (
            state.slack, state.col_pred, np.int32(state.n_cols), np.int32(lo), np.float64(level), out,
            state.ctl, state.barrier,
        ), state.device_id)

    def tree_join(self, state, slab, offered, level, lo, shift, wave, first):
        gk.kernel("forward", "tree_join")((1,), (gk.PERSISTENT_BLOCK,), (
            offered, np.int32(offered.shape[0]), np.float64(level), np.int32(lo), np.int32(lo + slab.n_cols),
            slab.slack, slab.v_open, state.col_pred, state.col_level, state.forest_cols, state.col_match,
            state.reverse, state.row_level, state.row_pred, state.rows_q, state.u, shift, wave, np.int32(first),
        ))

    def load_reverse(self, state, n_reverse):
        state.n_reverse = n_reverse
        state.ctl[c.CTL_N_REV] = n_reverse
        state.ctl[c.CTL_N_PATHS] = 0

    def tree_dual_update(self, state):
        gk.kernel("tree", "tree_dual_update")(
            (gk.blocks(max(state.n_rows, state.n_cols)),), (gk.BLOCK,),
            (state.rows_q, state.row_level, state.forest_cols, state.col_level, state.ctl, state.u, state.v),
        )

    # ---------------------------------------------------------------- ε-scaling (scaling.cu)

    def price_initialisation(self, state):
        n_rows, n_cols, dtype = state.n_rows, state.n_cols, state.cost.dtype
        square = n_rows == n_cols
        if state.scaling is None:  # the searches' buffers, for the phases that follow
            state.scaling = _ScalingBuffers.allocate(n_rows, n_cols)
        state.v.fill(0.0)
        if square:
            if not state.row_min_ready:
                self._row_minimum(state, state.zeros_cols)  # u: the raw row minima
            state.row_min_ready = state.bands_ready = False
            if not _finite(state.u):
                return None
            state.v[:] = self.column_competition(state, state.u)
            finite = cupy.isfinite(state.v)
            top = float(state.v[finite].max()) if bool(finite.any()) else 0.0
            state.v -= top
            state.v[~finite] = 0.0  # a column with no finite entry
        regret = cupy.empty(n_rows)
        gk.kernel("scaling", "row_regret", dtype)((n_rows,), (gk.BLOCK,), (state.cost, np.int32(n_cols), state.v, regret))
        order = cupy.argsort(-regret)  # stable: ties in row order, as on the CPU
        picked = cupy.empty(n_rows, dtype=np.int32)
        cluster = _search_cluster(n_cols, state.device_id)  # a cluster-wide argmin per row, as a search step
        chunk = -(-n_cols // cluster)
        greedy = gk.kernel("scaling", "greedy_prices", dtype, cluster)
        shared = gk.shared_launch(greedy, GREEDY_SHARED_BYTES_PER_COLUMN * chunk, state.device_id)
        greedy((cluster,), (_search_threads(chunk),), (
            state.cost, np.int32(n_rows), np.int32(n_cols), state.v, order, picked,
            cupy.zeros(n_cols, dtype=np.int32), np.int32(square), np.int32(shared > 0),
        ), shared_mem=shared)
        self._row_minimum(state, state.v)
        if not _finite(state.u):
            return None
        kept = picked >= 0
        rows, cols = order[kept], picked[kept]
        excess = widened(state.cost[rows, cols]) - state.v[cols] - state.u[rows]
        install_assignment(state, rows, cols)
        return math.fsum(excess.get().tolist())

    def _search_rows(self, state, eps: float, rows, q_begin: int, q_end: int) -> bool:
        """One launch of scaling_phase: the searches for rows[q] for q_begin <= q < q_end, or for
        the virtual rows q (from n_rows on); False when a row reached no free column."""
        buffers = state.scaling
        state.ctl[c.CTL_STATUS] = 0
        kernel, cluster, threads, shared = _search_kernel(state.n_cols, state.cost.dtype, state.device_id)
        kernel((cluster,), (threads,), (
            state.cost, np.int32(state.n_rows), np.int32(state.n_cols), state.v, np.float64(eps),
            rows, np.int32(q_begin), np.int32(q_end), state.row_match, state.col_match,
            buffers.extra_match, buffers.dist, buffers.col_u, buffers.closed, buffers.scan_pred, buffers.pred,
            buffers.done, buffers.done_dist, np.int32(shared > 0), state.ctl,
        ), shared_mem=shared)
        return int(state.ctl[c.CTL_STATUS]) == 0

    def assign_free_rows(self, state, eps, reverse, virtual):
        rows = cupy.sort(state.free_rows[: state.n_free])  # the rounds of bids list them unordered
        if reverse:
            rows = cupy.ascontiguousarray(rows[::-1])
        if rows.size and not self._search_rows(state, eps, rows, 0, rows.size):
            return False
        if not (virtual and state.n_cols > state.n_rows):
            return True
        state.scaling.extra_match.fill(-1)  # the virtual rows start free
        return self._search_rows(state, eps, rows, state.n_rows, state.n_cols)

    def exact_duals(self, state):
        cols = state.row_match
        state.u[:] = widened(state.cost[cupy.arange(state.n_rows), cols]) - state.v[cols]

    # ---------------------------------------------------------------- results

    def synchronize(self, state) -> None:
        cupy.cuda.get_current_stream().synchronize()

    def counters(self, state):
        ctl = state.ctl.get()
        return int(ctl[c.CTL_DUAL_UPDATES]), int(ctl[c.CTL_SCANNED])

    def to_host(self, state):
        row_match, u, v = self.to_device(state)
        return row_match.get(), u.get(), v.get()

    def to_device(self, state):
        """``(row_match, u, v)`` as CuPy arrays (for a matrix the caller passed on the GPU)."""
        return (state.row_match.astype(np.int64), *unscaled_duals(state.u, state.v, state.upload_exponent))

    def placed_matrix(self, state):
        return state.cost, state.upload_exponent
