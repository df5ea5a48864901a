"""Instance families, seeded and reproducible (``numpy.random.default_rng(seed)``).

- :func:`uniform`: i.i.d. integers in ``[0, f*n)``, the cost ranges of Date & Nagi (2016), Table 3
  (f = 0.1, 1, 10), generated exactly as ``../shared/ANCHORS.md`` does.
- :func:`uniform_float`: i.i.d. floats in ``[0, 1)``.
- :func:`geometric`: Euclidean distances between two sets of random points in ``[0, scale]^2``
  (the GEOM family of the DGS paper, Roverso et al.; Bus & Tvrdik). ``same_points=True`` gives the
  distances within one set, the benefit matrix the DGS paper maximises.
- :func:`machol_wien`: ``c_ij = i * j`` (1-based), a classic hard instance with many ties.
- :func:`ties`: integers from a handful of values: almost every entry ties with many others.
"""

from __future__ import annotations

import numpy as np


def _shape(n: int, m: int | None) -> tuple[int, int]:
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"sizes must be non-negative, got n={n}, m={m}")
    return n, n if m is None else m


def uniform(n: int, f: float = 1.0, *, m: int | None = None, seed: int = 0, dtype="int32"):
    """Integers drawn uniformly from ``[0, max(1, f*n))`` (upper bound exclusive)."""
    shape = _shape(n, m)
    high = max(1, int(round(f * n)))
    return np.random.default_rng(seed).integers(0, high, size=shape, dtype=np.dtype(dtype))


def uniform_float(n: int, *, m: int | None = None, seed: int = 0, dtype="float64"):
    """Floats drawn uniformly from ``[0, 1)``."""
    shape = _shape(n, m)
    return np.random.default_rng(seed).random(size=shape, dtype=np.dtype(dtype))


def geometric(
    n: int, *, m: int | None = None, scale: float = 1000.0, seed: int = 0, same_points=False,
    dtype="float64",
):
    """Euclidean distances between random points in ``[0, scale]^2``.

    Rows are one set of points and columns another (``same_points=True``: the same set, so the
    diagonal is 0 and the matrix is symmetric).
    """
    n_rows, n_cols = _shape(n, m)
    rng = np.random.default_rng(seed)
    rows = rng.random((n_rows, 2)) * scale
    cols = rows[:n_cols] if same_points and n_cols <= n_rows else rng.random((n_cols, 2)) * scale
    out = np.empty((n_rows, n_cols), dtype=np.dtype(dtype))
    step = max(1, (1 << 22) // max(n_cols, 1))  # bounded temporaries for large n
    for start in range(0, n_rows, step):
        diff = rows[start : start + step, None, :] - cols[None, :, :]
        out[start : start + step] = np.sqrt((diff * diff).sum(axis=2))
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
    return np.random.default_rng(seed).integers(0, levels, size=shape, dtype=np.dtype(dtype))


#: family name -> generator(n, f, seed); what the CLI and the benchmark accept
FAMILIES = {
    "uniform": lambda n, f=1.0, seed=0: uniform(n, f, seed=seed),
    "float": lambda n, f=None, seed=0: uniform_float(n, seed=seed),
    "geometric": lambda n, f=None, seed=0: geometric(n, seed=seed),
    "machol-wien": lambda n, f=None, seed=0: machol_wien(n),
    "ties": lambda n, f=None, seed=0: ties(n, seed=seed),
}


def family(name: str, n: int, f: float | None = None, seed: int = 0):
    """Generate an instance of family ``name`` (one of :data:`FAMILIES`)."""
    try:
        make = FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}; choose from {', '.join(FAMILIES)}") from None
    return make(n, f, seed) if f is not None else make(n, seed=seed)
