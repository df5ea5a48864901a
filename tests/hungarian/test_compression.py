"""The classical variant's compression after a dual update (``Backend.recompress``).

It makes the zero-slack graph from the previous one (section 4.4's shift changes two kinds of
entry only) and scans again just the forest rows at slack theta. Each one is checked here against
the full compression of the matrix (section 3.3) with the same duals, on every dual update of
whole solves: integer costs give the same edges, row by row; float costs may differ only on
entries the zero-slack test cannot tell from zero (its tolerance, a few ulps).
"""

import numpy as np
import pytest

from dlap.backends.cpu import CPUBackend

from .classical_checks import COSTS, checked, solve_classical_to_scipy


def assert_recompression_is_the_compression(backend, cost, xp=np):
    solve_classical_to_scipy(backend, cost, xp)
    assert type(backend).updates > 0  # the solve made dual updates, each one checked
    if np.issubdtype(np.asarray(cost).dtype, np.integer):
        assert type(backend).differences == []
    for slack, tolerance in type(backend).differences:
        assert abs(slack) <= 4 * tolerance


@pytest.mark.parametrize("name", COSTS)
def test_recompression_is_the_compression_on_the_cpu(name):
    assert_recompression_is_the_compression(checked(CPUBackend)(), COSTS[name])


@pytest.mark.gpu
@pytest.mark.parametrize("name", COSTS)
def test_recompression_is_the_compression_on_the_gpu(name):
    import cupy

    from dlap.backends.gpu import GPUBackend

    assert_recompression_is_the_compression(checked(GPUBackend)(), COSTS[name], cupy)
