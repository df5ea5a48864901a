"""Coarse transport candidates: the first core's edges along the direction the mass moves.

Where the two sets' local densities differ (two images' palettes, shifted or clustered clouds), the
optimum has long edges that no row's nearest columns hold, and pricing finds them a few at a time,
each round solving the core again. So the points, numbered in k-d order
(:func:`dlap.points.solve.spatial_order`), are grouped into cells of ``CELL_POINTS`` consecutive
points on each side; the cells' centroids are assigned exactly, a problem ``CELL_POINTS`` times
smaller solved by the same engine; and each row gets edges to every column of the cell its own cell
is assigned to. The cells follow each set's own density, so the coarse assignment moves the mass
the fine one must move (coarsening as in multiscale transport solvers, Schmitzer 2016). The edges
are candidates only: pricing still proves the answer over every pair. Where the coarse problem's
own pricing found almost no violators, its transport is local, the fine one's too, and the
neighbours suffice: no edges are added then (they only made such cores larger), except under
the Euclidean distance, whose optimum has long edges between uniform sets too; those sets are also
priced once early, at a coarse ε of the first auction (:class:`Transport`), so that the long
edges the cells miss join the core before the auction's fine phases instead of after them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: the points of a cell, on each side (8 rather than 16 on 2 cores: clustered sets n = 20000 2.0 s
#: against 3.1 s, uniform n = 10^6 161 s against 182 s, shifted clouds 10.0 s against 8.5 s:
#: docs/benchmarks.md, "Coarse transport candidates")
CELL_POINTS = 8
#: the fewest rows for which the first core gets coarse transport candidates (at 2000 rows they
#: halve the time of shifted clouds and cost uniform sets 6 ms: docs/benchmarks.md, "Coarse
#: transport candidates")
MIN_ROWS = 2000
#: the coarse problem's violators a cell at most (over its pricing rounds; a row with more than the
#: pricing keeps counts at least that many) for its transport to count as local (uniform sets:
#: none; clustered, shifted clouds and images: tens to hundreds)
LOCAL_VIOLATORS = 1.0
#: the metrics whose sets get coarse candidates however local their transport: Euclidean
#: distances between uniform sets have long optimal edges too, where many pairs along an edge are
#: nearly tight (cityblock ones were slower with them, squared distances too)
ALWAYS_METRICS = ("euclidean",)


class Transport(NamedTuple):
    """What the coarse problem says of the fine one: ``pairs`` (rows, columns) for the first core,
    or None; ``price_early``: the transport is local, yet under a metric of ``ALWAYS_METRICS``
    (uniform sets under the Euclidean distance): the optimum's long edges are few and spread, and
    a pricing pass at a coarse ε finds them before the auction's fine phases
    (:data:`dlap.points.core.EARLY_PRICING_EPS`)."""

    pairs: tuple[np.ndarray, np.ndarray] | None
    price_early: bool


def cell_bounds(n_points: int, n_cells: int) -> np.ndarray:
    """The first point of each of ``n_cells`` cells of consecutive points (sizes differing by at
    most one), then ``n_points``."""
    return np.linspace(0, n_points, n_cells + 1).astype(np.int64)


def centroids(points: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each cell's mean point."""
    sums = np.add.reduceat(points, bounds[:-1], axis=0)
    return sums / np.diff(bounds)[:, None]


def transport_pairs(rows: np.ndarray, cols: np.ndarray, assign, always: bool = False) -> Transport:
    """Row ``i`` paired with every column of the cell its cell is assigned to; none where the
    transport is local, unless ``always`` (then the transport says to price early).
    ``rows`` and ``cols``: host points in k-d order, ``len(rows) <= len(cols)``;
    ``assign(row_centroids, col_centroids)``: the column cell of each row cell (every row cell
    assigned) and the coarse solve's violators."""
    n, m = rows.shape[0], cols.shape[0]
    row_cells = max(1, n // CELL_POINTS)
    col_cells = max(row_cells, min(m, round(row_cells * m / n)))
    row_bounds, col_bounds = cell_bounds(n, row_cells), cell_bounds(m, col_cells)
    partner, violators = assign(centroids(rows, row_bounds), centroids(cols, col_bounds))
    local = violators <= LOCAL_VIOLATORS * row_cells
    if local and not always:
        return Transport(None, False)
    partner = np.asarray(partner, dtype=np.int64)
    cell_of_row = np.repeat(np.arange(row_cells), np.diff(row_bounds))
    first, width = col_bounds[partner][cell_of_row], np.diff(col_bounds)[partner][cell_of_row]
    pair_rows = np.repeat(np.arange(n, dtype=np.int64), width)
    starts = np.cumsum(width) - width
    pair_cols = np.repeat(first - starts, width) + np.arange(pair_rows.shape[0], dtype=np.int64)
    return Transport((pair_rows, pair_cols), local)


def beyond_reach(rows: np.ndarray, costs: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Which of the pairs (``rows`` ascending, ``costs``) to keep: those of the rows whose every
    pair costs more than the row's ``reach`` (its farthest nearest-neighbour candidate). A row
    whose partner cell is within its reach gains nothing its neighbours do not give it, and the
    edges would only make the core larger."""
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    far = np.minimum.reduceat(costs, starts) > reach[rows[starts]]
    return np.repeat(far, np.diff(np.r_[starts, rows.shape[0]]))
