"""The classical variant's forward pass after a dual update resumes the fruitless pass's forest
(``Backend.classical_forward_pass(state, resume=True)``).

Section 4.4's shift keeps every edge of the forest tight and only makes edges from its rows to
uncovered columns, so the resumed pass must reach what a pass from the free rows reaches: the same
forest rows, the same covered columns and the same free columns. Each resumed pass of whole
solves is checked here against a fresh pass from the same state (the solve then goes on from the
resumed one), on the costs of the compression's tests.
"""

import dataclasses

import numpy as np
import pytest

from dlap.backends.cpu import CPUBackend

from .classical_checks import COSTS, host, solve_classical_to_scipy


def _reached(state) -> tuple[set, set, set]:
    """The forest rows, covered columns and free columns a forward pass reached."""
    rows = host(state.rows_q)[: state.n_forest_rows]
    cols = np.flatnonzero(host(state.col_seen))
    free = host(state.reverse)[: state.n_reverse]
    return set(rows.tolist()), set(cols.tolist()), set(free.tolist())


def _arrays(state) -> dict:
    """The state's arrays (NumPy or CuPy) but the matrix."""
    return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)
            if getattr(getattr(state, f.name), "ndim", 0) and f.name != "cost"}


def checked(backend_class):
    """``backend_class`` whose every resumed forward pass is compared with a fresh one from the
    same state; ``resumed`` counts them and ``levels`` adds up the BFS levels each took."""

    class Checked(backend_class):
        resumed = 0
        levels = {"fresh": 0, "resumed": 0}

        def classical_forward_pass(self, state, resume=False):
            if not resume:
                return super().classical_forward_pass(state)
            kept = {name: a.copy() for name, a in _arrays(state).items()}
            scalars = (state.n_forest_rows, state.n_reverse)
            before = int(host(self.counters(state))[1])
            super().classical_forward_pass(state)
            fresh = _reached(state)
            after = int(host(self.counters(state))[1])
            for name, a in _arrays(state).items():
                a[...] = kept[name]
            state.n_forest_rows, state.n_reverse = scalars
            n_reverse = super().classical_forward_pass(state, resume=True)
            assert _reached(state) == fresh
            type(self).levels["fresh"] += after - before
            type(self).levels["resumed"] += int(host(self.counters(state))[1]) - before
            type(self).resumed += 1
            return n_reverse

    return Checked


def assert_resumed_pass_is_the_fresh_one(backend, cost, xp=np):
    stats = solve_classical_to_scipy(backend, cost, xp)
    assert type(backend).resumed == stats.dual_updates > 0  # every dual update was followed by a checked pass
    return type(backend).levels


@pytest.mark.parametrize("name", COSTS)
def test_the_resumed_forward_pass_reaches_what_a_fresh_one_does_on_the_cpu(name):
    levels = assert_resumed_pass_is_the_fresh_one(checked(CPUBackend)(), COSTS[name])
    # the fresh passes walk the forest again level by level; the resumed ones go on from it
    assert levels["resumed"] <= levels["fresh"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", COSTS)
def test_the_resumed_forward_pass_reaches_what_a_fresh_one_does_on_the_gpu(name):
    import cupy

    from dlap.backends.gpu import GPUBackend

    assert_resumed_pass_is_the_fresh_one(checked(GPUBackend)(), COSTS[name], cupy)
