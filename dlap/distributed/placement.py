"""Placement: each rank's slab in its worker's memory, filled piece by piece, never through the client.

Rank r's slab is the region ``bounds[r]:bounds[r+1]`` of the caller's matrix along the split axis
(rows for the classical variant, columns for the others: section 5 of Date & Nagi), in the
solved form (:func:`dlap.distributed.rank.engine.prepare_slab`). Its pieces come from where the
matrix is:

- a Zarr array: bands of whole Zarr chunk rows, each read by a task on rank r's worker (into GPU
  memory through Zarr's GPU buffers on a GPU worker);
- a dask array the caller has persisted: each chunk's share, cut in bands on the worker that
  holds the chunk (``dlap-cut``), so only that share crosses the network (over NVLink with
  ``protocol="ucx"``); the ranks go to the workers that hold most of their slabs
  (:func:`~.data.plan_ranks`), and a rank's worker that holds its whole slab as one chunk uses
  that chunk;
- any other dask array (e.g. :func:`dlap.generate.geometric_dask`): its chunks, each computed by
  tasks pinned to rank r's worker, so that it is generated or read where it will live.

A slab of one piece is that piece in the solved form (``dlap-slab``: no copy where the piece is
in that form already, so a generated or held chunk per rank is the slab). A slab of several pieces is
allocated once (``dlap-open-slab``) and each piece is written into it as it arrives
(``dlap-write-slab``), with at most dask.config ``dlap.placement.buffer-bytes`` of pieces on the way per rank (or one
piece, if larger; the pieces just written are released a moment after the next ones are asked
for, so a worker may hold up to twice that briefly): the worker holds the slab and a few
pieces, never the slab twice, so a 90 GB matrix in 6 GB chunks fills one 141 GB GPU. The
client paces the pieces.

The slab being filled is held by the :class:`SlabsFilling` worker plugin, not by Dask's data
store: the writes change it in place, which a key's value must never be (the worker could spill
it, and a write would fill the copy left behind). The plugin drops it when the key of the task
that opened it is released, so a solve that fails, or whose client dies, leaves nothing behind.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from dataclasses import dataclass

import dask
import numpy as np
from distributed.diagnostics.plugin import WorkerPlugin

from ..problem import working_dtype
from . import config
from .data import RankPlan, Source, chunk_edges, graph_limit
from .rank.engine import prepare_slab


@dataclass(frozen=True)
class SlabForm:
    """The solved form of a rank's slab (:func:`~dlap.distributed.rank.engine.prepare_slab`), and
    where it lives."""

    gpu: bool
    maximize: bool
    transposed: bool
    dtype: np.dtype
    offset: int
    declared: np.dtype  # the caller's array's dtype, which every chunk must have (its offset assumes it)


@dataclass(frozen=True)
class Piece:
    """A part of a rank's slab: ``make()`` submits the task that produces it, ``local`` is the
    part of that task's result that is the piece (None: all of it), ``region`` is where the
    piece lies in the caller's matrix, ``nbytes`` what the task's result holds; ``chunk``, for
    a chunk of a dask array, is the ``Delayed`` that ``make`` computes, so that the chunks
    submitted together go to the scheduler as one graph (of at most Dask's large-graph
    threshold of data)."""

    make: Callable
    region: tuple[slice, slice]
    nbytes: int
    local: tuple[slice, slice] | None = None
    chunk: object = None
    sent: int = 0  # bytes of data ``chunk``'s graph carries (a chunk of an in-memory array: its data)


class SlabsFilling(WorkerPlugin):
    """Worker plugin: the slabs being filled on this worker, by the key of the task that opened
    each; a slab is dropped when that key is released (see the module docstring)."""

    name = "dlap-slabs-filling"
    idempotent = True

    def setup(self, worker) -> None:
        self.slabs = {}

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish in ("released", "forgotten"):
            self.slabs.pop(key, None)


def _filling() -> dict:
    from distributed import get_worker

    return get_worker().plugins[SlabsFilling.name].slabs


def open_slab(shape: tuple[int, int], form: SlabForm) -> object:
    """Task: allocate a slab to fill (refused with the sizes where the GPU cannot hold it);
    returns this task's key, which the writes find it by."""
    from distributed import get_worker

    if form.gpu:
        import cupy

        from ..device import require_device_memory

        nbytes = shape[0] * shape[1] * np.dtype(form.dtype).itemsize
        require_device_memory(nbytes, f"a {shape[0]} x {shape[1]} {np.dtype(form.dtype)} slab")
        slab = cupy.empty(shape, dtype=form.dtype)
    else:
        slab = np.empty(shape, dtype=form.dtype)
    key = get_worker().get_current_task()
    _filling()[key] = slab
    return key


def write_piece(opened, block, local, dest: tuple[slice, slice], form: SlabForm) -> None:
    """Task: one piece, in the solved form, written into the slab ``opened`` (its region
    ``dest`` there)."""
    _filling()[opened][dest] = make_slab(block, form, local)


def close_slab(opened):
    """Task: the filled slab, handed to Dask's data store as this task's result."""
    return _filling().pop(opened)


def make_slab(block, form: SlabForm, local=None):
    """Task: ``block[local]`` on the worker's GPU when the solve runs on GPUs (a NumPy chunk is
    copied there), in host memory when it runs on CPUs (a CuPy chunk is copied here), in the
    solved form."""
    if local is not None:
        block = block[local]
    if block.dtype != form.declared:  # issue 37: a float64 chunk of an array declared int64 solved to 0
        raise TypeError(f"a chunk of the matrix holds {block.dtype} where its dask array declares {form.declared} "
                        "(check the dtype= or meta= of the function that makes its chunks)")
    if form.gpu and isinstance(block, np.ndarray):
        import cupy

        block = cupy.asarray(block)
    elif not form.gpu and not isinstance(block, np.ndarray):
        block = block.get()
    return prepare_slab(block, form.maximize, form.transposed, form.dtype, form.offset)


def cut(chunk, region: tuple[slice, slice]):
    """Task: a held chunk's share of one rank's slab, cut on the worker that holds it."""
    return chunk[region]


def read_zarr_region(array, region: tuple[slice, slice], gpu: bool):
    """Task: read one region of a Zarr array, into GPU memory on a GPU worker."""
    if not gpu:
        return array[region]
    import cupy
    import zarr

    with zarr.config.enable_gpu():
        block = array[region]
    return block if isinstance(block, cupy.ndarray) else cupy.asarray(block)


def _bands(lo: int, hi: int, step: int) -> list[tuple[int, int]]:
    """``lo:hi`` cut at the multiples of ``step``."""
    edges = [lo, *range((lo // step + 1) * step, hi, step), hi]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _rows_per_piece(n_cols: int, itemsize: int, multiple: int = 1) -> int:
    """Rows of a band of at most dlap.placement.piece-bytes (at least ``multiple``), a multiple of
    ``multiple``."""
    return max(1, config.nbytes("placement.piece-bytes") // max(1, n_cols * itemsize * multiple)) * multiple


def zarr_pieces(client, source: Source, region, gpu: bool, pin: dict, name: str) -> list[Piece]:
    """Bands of whole Zarr chunk rows of ``region``, each read on the rank's worker."""
    (r0, r1), (c0, c1) = region
    itemsize = source.dtype.itemsize
    step = _rows_per_piece(c1 - c0, itemsize, int(source.array.chunks[0]))
    pieces = []
    for k, (a, b) in enumerate(_bands(r0, r1, step)):
        band = (slice(a, b), slice(c0, c1))
        make = _submitter(client, read_zarr_region, source.array, band, gpu, key=f"{name}-{k}", **pin)
        pieces.append(Piece(make, band, (b - a) * (c1 - c0) * itemsize))
    return pieces


def held_pieces(client, source: Source, holders: dict, region, name: str, worker: str) -> list[Piece]:
    """Each held chunk's share of ``region``, in bands, cut on the worker that holds the chunk.
    The tasks' keys are this solve's own: keys derived from the caller's collection (dask's
    ``getitem-...``) could meet an earlier task of the same key and inherit its worker
    restrictions. A cut is pinned to its holder (left free, the scheduler moves a whole chunk to
    an idle worker rather than wait for a busy holder).

    A region that is one whole chunk held by the rank's own ``worker`` is that chunk, one piece
    made by no task: the slab is the chunk itself where it is in the solved form (the solver
    never writes its matrix), with no copy and no second slab's worth of memory (cutting a chunk
    into bands and writing them cost more than the solve of a matrix of one row chunk per GPU)."""
    from distributed import Future

    edges, itemsize = chunk_edges(source), source.dtype.itemsize
    shares = list(_chunks_within(source, region))
    if len(shares) == 1 and holders[shares[0][0]] == worker:
        (i, j), (rows, cols) = shares[0]
        whole = ((edges[0][i], edges[0][i + 1]), (edges[1][j], edges[1][j + 1]))
        if (rows, cols) == region == whole:
            chunk = Future((source.array.name, i, j), client)
            return [Piece(lambda: chunk, (slice(*rows), slice(*cols)), (rows[1] - rows[0]) * (cols[1] - cols[0]) * itemsize)]
    pieces = []
    for (i, j), (rows, cols) in shares:
        chunk = Future((source.array.name, i, j), client)
        pin = {"workers": [holders[(i, j)]], "allow_other_workers": False}
        for a, b in _bands(rows[0], rows[1], _rows_per_piece(cols[1] - cols[0], itemsize)):
            make = _submitter(client, cut, chunk, _in_chunk(edges, i, j, (a, b), cols), key=f"{name}-{i}-{j}-{a}", **pin)
            pieces.append(Piece(make, (slice(a, b), slice(*cols)), (b - a) * (cols[1] - cols[0]) * itemsize))
    return pieces


def chunk_pieces(client, source: Source, region, pin: dict) -> list[Piece]:
    """The chunks ``region`` overlaps, each computed whole on the rank's worker (the piece is
    its share of the chunk), from the array's optimised graph culled to that chunk's tasks: a
    chunk's ``Delayed`` carries the whole graph, which for ``da.from_array`` holds every chunk's
    data, so each piece shipped the matrix (Dask warned of a large graph at each)."""
    from dask.delayed import Delayed
    from dask.optimization import cull
    from dask.sizeof import sizeof

    delayed = source.array.to_delayed()
    graph = dict(delayed.flat[0].dask)  # the one optimised graph every chunk's Delayed shares
    edges = chunk_edges(source)
    largest_graph = graph_limit()
    pieces = []
    for (i, j), (rows, cols) in _chunks_within(source, region):
        shape = (edges[0][i + 1] - edges[0][i], edges[1][j + 1] - edges[1][j])
        whole = (rows[1] - rows[0], cols[1] - cols[0]) == shape
        key = delayed[i, j].key
        # a chunk already held by a future (a persisted input still being computed, so not
        # planned as held) is no task of the graph: its Delayed stands as it is
        culled = cull(graph, [key])[0] if key in graph else None
        chunk = delayed[i, j] if culled is None else Delayed(key, culled)
        sent = 0 if culled is None else sizeof(culled)
        local = None if whole else _in_chunk(edges, i, j, rows, cols)
        nbytes = shape[0] * shape[1] * source.dtype.itemsize
        if sent > largest_graph:  # a chunk of an in-memory array larger than a graph should carry
            make = functools.partial(_scatter, client, chunk, pin["workers"])
            pieces.append(Piece(make, (slice(*rows), slice(*cols)), nbytes, local))
        else:
            make = functools.partial(client.compute, chunk, **pin)
            pieces.append(Piece(make, (slice(*rows), slice(*cols)), nbytes, local, chunk, sent))
    return pieces


def _scatter(client, chunk, workers):
    """A future of ``chunk`` (whose graph holds its data) on ``workers``: the data is taken out of
    the graph here and scattered, as Dask advises, instead of sent as a large graph."""
    (block,) = dask.compute(chunk, scheduler="sync")
    return client.scatter(block, workers=workers, hash=False)


def _chunks_within(source: Source, region):
    """``((i, j), ((row lo, row hi), (col lo, col hi)))`` for each chunk that overlaps
    ``region``, with the overlap in the caller's coordinates."""
    (r0, r1), (c0, c1) = region
    edges = chunk_edges(source)
    for i in range(len(edges[0]) - 1):
        rows = (max(r0, edges[0][i]), min(r1, edges[0][i + 1]))
        if rows[0] >= rows[1]:
            continue
        for j in range(len(edges[1]) - 1):
            cols = (max(c0, edges[1][j]), min(c1, edges[1][j + 1]))
            if cols[0] < cols[1]:
                yield (i, j), (tuple(int(x) for x in rows), tuple(int(x) for x in cols))


def _in_chunk(edges, i: int, j: int, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[slice, slice]:
    """The region ``rows`` x ``cols`` of the caller's matrix in chunk (i, j)'s coordinates."""
    return (slice(rows[0] - edges[0][i], rows[1] - edges[0][i]), slice(cols[0] - edges[1][j], cols[1] - edges[1][j]))


def _submitter(client, function, *args, **kwargs) -> Callable:
    """``make`` for a piece: submits the task ``function(*args)`` when called."""
    return functools.partial(client.submit, function, *args, **kwargs)


class SlabFill:
    """One rank's slab of several pieces, being filled: opened on its worker, its pieces
    submitted while their bytes on the way allow, each written as it arrives, closed into a
    future of the slab."""

    def __init__(self, client, pieces: list[Piece], origin: tuple[int, int], shape, form: SlabForm, pin: dict,
                 name: str):
        self.client, self.origin, self.form, self.pin, self.name = client, origin, form, pin, name
        self.queue = collections.deque(enumerate(pieces))
        self.flying = collections.deque()  # (the write's future, the piece's, its bytes), oldest first
        self.opened = client.submit(open_slab, shape, form, key=f"dlap-open-slab-{name}", **pin)
        self.graph_bytes = graph_limit()

    def top_up(self) -> None:
        """Submit the next pieces and their writes while the pieces on the way stay within
        dlap.placement.buffer-bytes (at least one), in one batch: the chunks of a dask array as one graph and
        the writes as one map, where a message to the scheduler per task cost more than the
        tasks."""
        batch, nbytes, sent = [], self.on_the_way(), 0
        limit = config.nbytes("placement.buffer-bytes")
        while self.queue and (not (self.flying or batch) or nbytes + self.queue[0][1].nbytes <= limit):
            if batch and sent + self.queue[0][1].sent > self.graph_bytes:
                break  # the rest of the in-memory chunks in the next batch
            batch.append(self.queue.popleft())
            nbytes, sent = nbytes + batch[-1][1].nbytes, sent + batch[-1][1].sent
        if not batch:
            return
        pieces = [piece for _, piece in batch]
        chunks = [p.chunk for p in pieces if p.chunk is not None]
        computed = iter(self.client.compute(chunks, **self.pin) if chunks else ())
        blocks = [next(computed) if p.chunk is not None else p.make() for p in pieces]
        dests = [self._dest(p.region) for p in pieces]
        written = self.client.map(write_piece, [self.opened] * len(batch), blocks, [p.local for p in pieces], dests,
                                  [self.form] * len(batch), key=[f"dlap-write-slab-{self.name}-{k}" for k, _ in batch],
                                  **self.pin)
        self.flying.extend(zip(written, blocks, (p.nbytes for p in pieces), strict=True))

    def _dest(self, region: tuple[slice, slice]) -> tuple[slice, slice]:
        """Where a piece at ``region`` of the caller's matrix goes in the slab (its solved form)."""
        rows, cols = region
        dest = (slice(rows.start - self.origin[0], rows.stop - self.origin[0]),
                slice(cols.start - self.origin[1], cols.stop - self.origin[1]))
        return dest[::-1] if self.form.transposed else dest

    def on_the_way(self) -> int:
        """Bytes of the pieces submitted and not yet let go."""
        return sum(nbytes for *_, nbytes in self.flying)

    def land(self) -> None:
        """Let go of the pieces written (their tasks are released)."""
        while self.flying and self.flying[0][0].status == "finished":
            self.flying.popleft()

    def futures(self) -> list:
        """Every task of the fill still held here."""
        return [self.opened, *(f for written, block, _ in self.flying for f in (written, block))]

    def close(self):
        return self.client.submit(close_slab, self.opened, key=f"dlap-slab-{self.name}", **self.pin)


def fill(fills: list[SlabFill], wait: Callable) -> None:
    """Write every fill's pieces, the ranks side by side; ``wait(futures, workers)`` waits for
    tasks (running on ``workers``) and raises the first failure."""
    for f in fills:
        f.top_up()
    while any(f.flying for f in fills):
        waiting = [f for f in fills if f.flying]
        wait([f.flying[0][0] for f in waiting], [f.pin["workers"][0] for f in waiting])
        for f in fills:
            f.land()
            f.top_up()


def place_slabs(client, source: Source, plan: RankPlan, *, axis: int, bounds, transposed: bool, maximize: bool,
                gpu: bool, solve_id: str, offset: int, wait: Callable) -> list:
    """One future per rank: its slab in the solved form, on its worker (module docstring);
    ``wait(futures, workers)`` waits for tasks (running on ``workers``) and raises the first
    failure (a rank's worker lost, bad input)."""
    form = SlabForm(gpu, maximize, transposed, working_dtype(source.dtype, maximize), offset, np.dtype(source.dtype))
    slabs, fills = [], []
    for rank, worker in enumerate(plan.workers):
        lo, hi = bounds[rank], bounds[rank + 1]
        region = ((lo, hi), (0, source.shape[1])) if axis == 0 else ((0, source.shape[0]), (lo, hi))
        pin = {"workers": [worker], "allow_other_workers": False}
        name = f"{solve_id}-{rank}"
        if source.is_zarr:
            pieces = zarr_pieces(client, source, region, gpu, pin, f"dlap-read-zarr-{name}")
        elif plan.holders is not None:
            pieces = held_pieces(client, source, plan.holders, region, f"dlap-cut-{name}", worker)
        else:
            pieces = chunk_pieces(client, source, region, pin)
        if len(pieces) == 1:
            slabs.append(client.submit(make_slab, pieces[0].make(), form, pieces[0].local, key=f"dlap-slab-{name}", **pin))
            continue
        if not fills:
            client.register_plugin(SlabsFilling(), name=SlabsFilling.name)
        shape = (region[0][1] - region[0][0], region[1][1] - region[1][0])
        fills.append(SlabFill(client, pieces, (region[0][0], region[1][0]), shape[::-1] if transposed else shape,
                              form, pin, name))
        slabs.append(fills[-1])
    try:
        fill(fills, wait)
    except BaseException:
        # the caller may keep the error (a notebook keeps the last one), and with it these
        # futures: the slabs are freed now
        client.cancel([f for s in slabs for f in (s.futures() if isinstance(s, SlabFill) else [s])], force=True)
        raise
    return [s.close() if isinstance(s, SlabFill) else s for s in slabs]
