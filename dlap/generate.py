"""Instance families, seeded and reproducible (``numpy.random.default_rng(seed)``).

- :func:`uniform`: i.i.d. integers in ``[0, f*n)``, the cost ranges of Date & Nagi (2016), Table 3
  (f = 0.1, 1, 10), the draws of the peers' published anchors (docs/benchmarks.md).
- :func:`uniform_counter`: the same costs from a counter-based hash, the values
  :func:`uniform_dask` generates on the workers of a Dask cluster (family ``uniform-counter``).
- :func:`uniform_float`: i.i.d. floats in ``[0, 1)``.
- :func:`geometric`: Euclidean distances between two sets of random points in ``[0, scale]^2``
  (the GEOM family of the DGS paper, Roverso et al.; Bus & Tvrdik). ``same_points=True`` gives the
  distances within one set, the benefit matrix the DGS paper maximises; ``dim=3`` points in 3-D.
  :func:`geometric_dask` computes the same matrix on the workers of a Dask cluster, chunk by chunk.
- :func:`geometric_int`: the same, points in ``[0, 10000]^2``, distances rounded to integers.
- :func:`geometric_disjoint`: two point sets in shifted clouds, no row near any column.
- :func:`machol_wien`: ``c_ij = i * j`` (1-based), a classic hard instance with many ties.
- :func:`ties`: integers from a handful of values: almost every entry ties with many others.

Point sets for :func:`dlap.solve_points` (:func:`points`, any size: O((n + m) d) memory):
``uniform`` in the unit square, ``uniform-3d`` in the unit cube, ``clustered`` (a Gaussian
mixture), ``shifted`` (two clouds half a side apart), ``embeddings`` (64-D unit vectors, the
columns noisy copies of the rows in another order).
"""

from __future__ import annotations

import math

import numpy as np


def _shape(n: int, m: int | None) -> tuple[int, int]:
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"sizes must be non-negative, got n={n}, m={m}")
    return n, n if m is None else m


def uniform(n: int, f: float = 1.0, *, m: int | None = None, seed: int = 0, dtype="int32"):
    """Integers drawn uniformly from ``[0, max(1, f*n))`` (upper bound exclusive)."""
    shape = _shape(n, m)
    high = _high(n, f)
    return np.random.default_rng(seed).integers(0, high, size=shape, dtype=np.dtype(dtype))


def uniform_float(n: int, *, m: int | None = None, seed: int = 0, dtype="float64"):
    """Floats drawn uniformly from ``[0, 1)``."""
    shape = _shape(n, m)
    return np.random.default_rng(seed).random(size=shape, dtype=np.dtype(dtype))


def geometric(
    n: int, *, m: int | None = None, scale: float = 1000.0, seed: int = 0, same_points=False,
    dim: int = 2, dtype="float64", xp=np,
):
    """Euclidean distances between random points in ``[0, scale]^dim``.

    Rows are one set of points and columns another (``same_points=True``: the same set, so the
    diagonal is 0 and the matrix is symmetric). ``xp=cupy`` computes the matrix on the GPU from
    the same points (the same values): only the points cross the bus.
    """
    rows, cols = _points(n, m, scale, seed, same_points, dim)
    return _distances(xp.asarray(rows), xp.asarray(cols), dtype, xp)


def _points(n: int, m: int | None, scale: float, seed: int, same_points: bool, dim: int):
    """:func:`geometric`'s row and column points, drawn in the order it always drew them."""
    n_rows, n_cols = _shape(n, m)
    rng = np.random.default_rng(seed)
    rows = rng.random((n_rows, dim)) * scale
    cols = rows[:n_cols] if same_points and n_cols <= n_rows else rng.random((n_cols, dim)) * scale
    return rows, cols


def geometric_int(n: int, *, m: int | None = None, scale: float = 10000.0, seed: int = 0, same_points=False):
    """:func:`geometric` with points in ``[0, scale]^2`` and distances rounded to the nearest
    integer (int32): the integer GEOM instances the GPU solvers' papers use."""
    return np.rint(geometric(n, m=m, scale=scale, seed=seed, same_points=same_points)).astype(np.int32)


def geometric_disjoint(n: int, *, m: int | None = None, scale: float = 1000.0, seed: int = 0, dtype="float64"):
    """Two point sets in shifted clouds (after lap-solver's ``geometric_disjoint``, Guthe & Thuerck
    2021): half the rows in ``[0, 1]^2`` and half in ``[1, 2]^2``, half the columns in
    ``[1, 2] x [0, 1]`` and half in ``[0, 1] x [1, 2]`` (times ``scale / 2``). No row has a column
    in its own cloud, so many rows compete for the columns along the clouds' shared edges."""
    n_rows, n_cols = _shape(n, m)
    rng = np.random.default_rng(seed)
    rows = rng.random((n_rows, 2))
    cols = rng.random((n_cols, 2))
    rows[n_rows // 2 :] += 1.0
    cols[: n_cols // 2, 0] += 1.0
    cols[n_cols // 2 :, 1] += 1.0
    return _distances(rows * (scale / 2), cols * (scale / 2), dtype)


def _distances(rows, cols, dtype, xp=np):
    """``|rows[i] - cols[j]|`` as a matrix of ``dtype``, in row blocks (bounded temporaries), in
    float64 whatever ``dtype`` (NumPy or CuPy ``xp``: the same values, rounded once at the end)."""
    out = xp.empty((rows.shape[0], cols.shape[0]), dtype=np.dtype(dtype))
    step = max(1, (1 << 22) // max(cols.shape[0], 1))
    for start in range(0, rows.shape[0], step):
        diff = rows[start : start + step, None, :] - cols[None, :, :]
        squared = diff[:, :, 0] * diff[:, :, 0]
        for d in range(1, rows.shape[1]):  # summed left to right, the same on every module
            squared += diff[:, :, d] * diff[:, :, d]
        out[start : start + step] = xp.sqrt(squared)
    return out


def machol_wien(n: int, *, m: int | None = None, dtype="int64"):
    """``c_ij = i * j`` for 1-based i and j (Machol & Wien); deterministic."""
    n_rows, n_cols = _shape(n, m)
    i = np.arange(1, n_rows + 1, dtype=np.dtype(dtype))
    j = np.arange(1, n_cols + 1, dtype=np.dtype(dtype))
    return np.multiply.outer(i, j)


def ties(n: int, *, m: int | None = None, levels: int = 3, seed: int = 0, dtype="int32"):
    """Integers from ``levels`` values: huge numbers of equal-cost optima."""
    shape = _shape(n, m)
    if not 1 <= levels < 2**31:
        raise ValueError(f"levels must be a whole number from 1 to 2**31 - 1; got {levels!r}")
    return np.random.default_rng(seed).integers(0, levels, size=shape, dtype=np.dtype(dtype))


#: the families that are :func:`geometric` with these arguments (made on one machine by
#: :data:`FAMILIES`, on the workers of a Dask cluster by :func:`family_dask`)
GEOMETRIC_FAMILIES = {"geometric": {}, "geometric-3d": {"dim": 3}, "geometric-benefit": {"same_points": True}}


def _geometric_family(name: str):
    shape = GEOMETRIC_FAMILIES[name]
    return lambda n, f=None, seed=0, m=None: geometric(n, m=m, seed=seed, **shape)


#: family name -> generator(n, f, seed, m); what the CLI and the benchmark accept. ``f`` is the
#: cost range factor of ``uniform`` and the number of values of ``ties`` (default 3); ``m`` the
#: number of columns (default n).
FAMILIES = {
    "uniform": lambda n, f=1.0, seed=0, m=None: uniform(n, f, m=m, seed=seed),
    "uniform-counter": lambda n, f=1.0, seed=0, m=None: uniform_counter(n, f, m=m, seed=seed),
    "float": lambda n, f=None, seed=0, m=None: uniform_float(n, m=m, seed=seed),
    "geometric": _geometric_family("geometric"),
    "geometric-int": lambda n, f=None, seed=0, m=None: geometric_int(n, m=m, seed=seed),
    "geometric-3d": _geometric_family("geometric-3d"),
    "geometric-disjoint": lambda n, f=None, seed=0, m=None: geometric_disjoint(n, m=m, seed=seed),
    "geometric-benefit": _geometric_family("geometric-benefit"),
    "machol-wien": lambda n, f=None, seed=0, m=None: machol_wien(n, m=m),
    "ties": lambda n, f=None, seed=0, m=None: ties(n, m=m, levels=3 if f is None else _levels(f), seed=seed),
}
#: the families that take ``f``
TAKES_F = frozenset({"uniform", "uniform-counter", "ties"})
#: families whose question is a maximum (the benchmark and ``dlap solve --family`` maximise them):
#: GEOM benefit, distances within one point set, as the DGS paper poses it
MAXIMIZE = frozenset({"geometric-benefit"})


#: point-set family -> its points' default dimension (:func:`points`)
POINT_FAMILIES = {"uniform": 2, "uniform-3d": 3, "clustered": 2, "shifted": 2, "embeddings": 64}
#: ``clustered``: points per cluster centre (at least one centre), and the clusters' spread
CLUSTER_POINTS = 1000
CLUSTER_SIGMA = 0.02
#: ``embeddings``: the noise added to each row's copy before it is normalised again
EMBEDDING_NOISE = 0.3


def points(name: str, n: int, m: int | None = None, *, dim: int | None = None, seed: int = 0,
           dtype="float64") -> tuple[np.ndarray, np.ndarray]:
    """Two point sets of family ``name`` (one of :data:`POINT_FAMILIES`): ``a`` of shape
    ``(n, dim)`` and ``b`` of shape ``(m, dim)`` (``m`` default ``n``; ``dim`` the family's
    default), for :func:`dlap.solve_points`."""
    try:
        default_dim = POINT_FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown point family {name!r}; choose from {', '.join(POINT_FAMILIES)}") from None
    m = n if m is None else m
    dim = default_dim if dim is None else dim
    if min(n, m) < 0 or dim < 1:
        raise ValueError(f"sizes must be non-negative and dim positive; got n={n}, m={m}, dim={dim}")
    rng = np.random.default_rng(seed)
    if name == "clustered":
        centres = rng.random((max(1, max(n, m) // CLUSTER_POINTS), dim))
        a, b = (centres[rng.integers(0, len(centres), k)] + CLUSTER_SIGMA * rng.standard_normal((k, dim))
                for k in (n, m))
    elif name == "embeddings":
        a = rng.standard_normal((n, dim))
        b = rng.standard_normal((m, dim))
        copied = min(n, m)
        b[:copied] = a[rng.permutation(n)[:copied]] + EMBEDDING_NOISE * rng.standard_normal((copied, dim))
        a, b = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (a, b))
    else:
        a, b = rng.random((n, dim)), rng.random((m, dim))
        if name == "shifted":
            b[:, 0] += 0.5
    return a.astype(dtype), b.astype(dtype)


def family(name: str, n: int, f: float | None = None, seed: int = 0, m: int | None = None):
    """Generate an ``n`` x ``m`` (default ``n`` x ``n``) instance of family ``name`` (one of
    :data:`FAMILIES`)."""
    try:
        make = FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}; choose from {', '.join(FAMILIES)}") from None
    if f is not None and name not in TAKES_F:
        raise ValueError(f"family {name} takes no f (only {', '.join(sorted(TAKES_F))} do)")
    return make(n, f, seed, m) if f is not None else make(n, seed=seed, m=m)


def _levels(f: float) -> int:
    """``ties``' number of values from ``f``: a whole number."""
    if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or f != int(f):
        raise ValueError(f"f (the number of values of ties) must be a whole number; got {f!r}")
    return int(f)


# ------------------------------------------------------------------------------------------------
# Instances generated where they live (the Dask engine): a counter-based generator, so any block
# of the matrix is computed from its indices alone, identically by NumPy and CuPy.
# ------------------------------------------------------------------------------------------------

_HASH_ELEMENTS = 1 << 26  # entries hashed at once (bounded uint64 temporaries)


def _mix(x, xp):
    """splitmix64's finaliser: a bijection of uint64 whose outputs pass as independent."""
    x = x ^ (x >> xp.uint64(30))
    x = x * xp.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> xp.uint64(27))
    x = x * xp.uint64(0x94D049BB133111EB)
    return x ^ (x >> xp.uint64(31))


def uniform_block(rows: tuple[int, int], cols: tuple[int, int], n_cols: int, high: int, seed: int, xp=np,
                  dtype="int32"):
    """Entries ``[rows) x [cols)`` of the counter-based uniform matrix: entry (i, j) is
    ``hash(seed, i * n_cols + j)`` scaled into ``[0, high)``, so a block needs no other block
    (the same matrix whatever the chunking, on NumPy or CuPy)."""
    if not 0 < high < 2**32:
        raise ValueError(f"high must be in [1, 2**32), got {high}")
    out = xp.empty((rows[1] - rows[0], cols[1] - cols[0]), dtype=np.dtype(dtype))
    step = max(1, _HASH_ELEMENTS // max(out.shape[1], 1))
    j = xp.arange(cols[0], cols[1], dtype=np.uint64)
    key = xp.uint64((seed * 0x9E3779B97F4A7C15) & (2**64 - 1))
    for a in range(0, out.shape[0], step):
        i = xp.arange(rows[0] + a, min(rows[1], rows[0] + a + step), dtype=np.uint64)
        bits = _mix(i[:, None] * xp.uint64(n_cols) + j[None, :] + key, xp) >> xp.uint64(32)
        out[a : a + i.shape[0]] = (bits * xp.uint64(high)) >> xp.uint64(32)
    return out


def uniform_counter(n: int, f: float = 1.0, *, m: int | None = None, seed: int = 0, dtype="int32"):
    """The whole of :func:`uniform_dask`'s matrix, here: the same values, so a solve on one
    device and a solve on a cluster of the same generated instance see the same matrix."""
    n_rows, n_cols = _shape(n, m)
    return uniform_block((0, n_rows), (0, n_cols), n_cols, _high(n, f), seed, dtype=dtype)


def _high(n: int, f: float) -> int:
    """The exclusive upper bound of :func:`uniform`'s costs: ``max(1, f * n)``, for a positive,
    finite ``f`` (issue 37: inf raised OverflowError, -1 made an all-zero matrix)."""
    if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or not 0 < f < math.inf:
        raise ValueError(f"f must be a positive, finite number (costs lie in [0, f * n)); got {f!r}")
    return max(1, int(round(f * n)))


def uniform_dask(n: int, f: float = 1.0, *, m: int | None = None, seed: int = 0, chunks=None, gpu: bool = False,
                 dtype="int32"):
    """A dask array of integers uniform in ``[0, max(1, f*n))`` whose chunks are generated by the
    task that makes them, on the worker that runs it (CuPy chunks with ``gpu=True``): the matrix
    never exists on the client. ``chunks`` as dask takes them (default: about 128 MiB blocks);
    for the Dask engine, one chunk per rank along the split axis places each slab with no copy.
    The values are :func:`uniform_block`'s (not ``uniform``'s ``default_rng`` stream)."""
    import dask.array as da

    n_rows, n_cols = _shape(n, m)
    high = _high(n, f)
    xp_name = "cupy" if gpu else "numpy"
    meta = _module(xp_name).empty((0, 0), dtype=np.dtype(dtype))
    chunks = da.core.normalize_chunks(chunks or "auto", (n_rows, n_cols), dtype=np.dtype(dtype))

    def block(block_info=None):
        (r0, r1), (c0, c1) = block_info[None]["array-location"]
        return uniform_block((r0, r1), (c0, c1), n_cols, high, seed, _module(xp_name), dtype)

    from dask.base import tokenize

    # the chunking is part of the name: the same matrix chunked two ways must not share keys
    name = f"dlap-uniform-{n_rows}x{n_cols}-f{f}-s{seed}-{np.dtype(dtype)}-{xp_name}-{tokenize(chunks)}"
    return da.map_blocks(block, chunks=chunks, dtype=np.dtype(dtype), meta=meta, name=name)


def geometric_dask(n: int, *, m: int | None = None, scale: float = 1000.0, seed: int = 0, same_points=False,
                   dim: int = 2, chunks=None, gpu: bool = False, dtype="float64"):
    """:func:`geometric`'s matrix as a dask array whose chunks are computed by the task that makes
    them, on the worker that runs it (CuPy chunks with ``gpu=True``): only the points (``n x dim``
    floats) leave the client, so a 90 GB float32 instance at n = 150000 starts from 2.4 MB. The
    values are :func:`geometric`'s for the same arguments (the same points, the same arithmetic)."""
    import dask.array as da
    from dask.base import tokenize

    rows, cols = _points(n, m, scale, seed, same_points, dim)
    shape = (rows.shape[0], cols.shape[0])
    xp_name = "cupy" if gpu else "numpy"
    meta = _module(xp_name).empty((0, 0), dtype=np.dtype(dtype))
    chunks = da.core.normalize_chunks(chunks or "auto", shape, dtype=np.dtype(dtype))
    # each task receives the points of its own rows and columns, not all of them
    row_points = da.from_array(rows, chunks=(chunks[0], dim))
    col_points = da.from_array(cols, chunks=(chunks[1], dim))

    def block(row_block, col_block):
        xp = _module(xp_name)
        return _distances(xp.asarray(row_block), xp.asarray(col_block), dtype, xp)

    name = (f"dlap-geometric-{shape[0]}x{shape[1]}-d{dim}-s{seed}-{int(same_points)}-{scale}-{np.dtype(dtype)}-"
            f"{xp_name}-{tokenize(chunks)}")
    return da.blockwise(block, "ij", row_points, "ik", col_points, "jk", concatenate=True, dtype=np.dtype(dtype),
                        meta=meta, name=name)


#: the families whose matrix the workers of a Dask cluster can make chunk by chunk
#: (:func:`family_dask`): their values are those of :func:`family`
WORKER_FAMILIES = ("uniform-counter", *GEOMETRIC_FAMILIES)


def family_dask(name: str, n: int, f: float | None = None, seed: int = 0, m: int | None = None, *,
                chunks=None, gpu: bool = False):
    """:func:`family`'s matrix as a dask array generated on the workers, for the families of
    :data:`WORKER_FAMILIES`."""
    if name == "uniform-counter":
        return uniform_dask(n, 1.0 if f is None else f, m=m, seed=seed, chunks=chunks, gpu=gpu)
    if name not in GEOMETRIC_FAMILIES:
        raise ValueError(f"family {name!r} is made on one machine; the workers make {', '.join(WORKER_FAMILIES)}")
    return geometric_dask(n, m=m, seed=seed, chunks=chunks, gpu=gpu, **GEOMETRIC_FAMILIES[name])


def _module(name: str):
    if name == "cupy":
        import cupy

        return cupy
    return np
