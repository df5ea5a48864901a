"""Costs and a checking backend shared by the classical variant's compression and resumed-search
tests."""

import numpy as np
import pytest

from dlap import generate
from dlap.backends.base import FLOAT_TOL_SCALE
from dlap.hungarian.classical import solve_classical
from dlap.problem import prepare
from dlap.result import Stats

from ..helpers import reference

RNG = np.random.default_rng(16)
COSTS = {
    "uniform-int": generate.uniform(120, 10.0, seed=1),
    "ties": generate.ties(110, levels=100, seed=2),
    "rectangular-int": generate.uniform(60, 3.0, m=90, seed=3),
    "uniform-float": generate.uniform_float(100, seed=4),
    # entries that differ in the 9th digit
    "close-floats": 1.0 + RNG.integers(0, 50, (90, 90)) * 1e-9,
    "forbidden": np.where(RNG.random((80, 80)) < 0.3, np.inf, RNG.integers(0, 400, (80, 80)).astype(float)),
    "negative-wide": RNG.uniform(-1e6, 1e6, (70, 70)).round(3),
}


def _edges(state):
    """The CSR's edges as a set of (row, column) pairs, on the host."""
    row_ptr = np.asarray(host(state.row_ptr))
    cols = np.asarray(host(state.col_idx))[: row_ptr[-1]]
    rows = np.repeat(np.arange(state.n_rows), np.diff(row_ptr))
    return set(zip(rows.tolist(), cols.tolist(), strict=True))


def host(x):
    return x.get() if hasattr(x, "get") else x


def checked(backend_class):
    """``backend_class`` whose every recompression is compared with a full one (the CSR it
    made is kept, so the solve goes on from it); the differences are collected in
    ``differences`` as (slack, tolerance) pairs, with the number of compared dual updates."""

    class Checked(backend_class):
        updates = 0
        differences: list[tuple[float, float]] = []

        def recompress(self, state, theta):
            nnz = super().recompress(state, theta)
            made = _edges(state), state.row_ptr, state.col_idx
            self.compress(state)
            full = _edges(state)
            state.row_ptr, state.col_idx = made[1:]
            assert nnz == len(made[0])
            cost, u, v = (np.asarray(host(a), dtype=np.float64) for a in (state.cost, state.u, state.v))
            for i, j in made[0] ^ full:
                tolerance = FLOAT_TOL_SCALE * (abs(cost[i, j]) + abs(u[i]) + abs(v[j]))
                self.differences.append((cost[i, j] - u[i] - v[j], tolerance))
            type(self).updates += 1
            return nnz

    return Checked


def solve_classical_to_scipy(backend, cost, xp=np) -> Stats:
    """Solve ``cost`` with the classical variant on ``backend`` (a checked subclass), assert
    scipy's objective, and return the solve's stats."""
    problem = prepare(xp.asarray(cost))
    state = backend.allocate(problem)
    stats = Stats()
    solve_classical(backend, state, stats)
    matrix = np.asarray(host(problem.matrix), dtype=np.float64)
    picked = np.asarray(host(state.row_match))
    objective = matrix[np.arange(state.n_rows), picked].sum()
    assert objective == pytest.approx(reference(matrix)[0].sum(), rel=1e-12, abs=1e-9)
    return stats
