"""scipy's own tests of ``linear_sum_assignment``, run against ``dlap.linear_sum_assignment``.

A drop-in must pass its model's tests. The file is scipy's installed
``scipy/optimize/tests/test_linear_assignment.py``, unchanged: each of its test functions is
rebound here, once per solver configuration, to globals where ``linear_sum_assignment`` is dlap's
with that configuration. Its parametrisations come along; pytest collects the copies as tests of
this module. Every exact CPU configuration runs in CI; the GPU ones run where a GPU is visible.
"""

from __future__ import annotations

import functools
import types

import pytest
from scipy.optimize.tests import test_linear_assignment as scipy_tests

import dlap

from .configs import CONFIGS

GPU_CONFIGS = [
    pytest.param({"device": "gpu", "method": method}, id=f"gpu-{method}")
    for method in ("auto", "classical", "tree", "hybrid", "scaling")
]


def _scipy_test_functions():
    return {name: f for name, f in vars(scipy_tests).items() if name.startswith("test_") and callable(f)}


@functools.cache
def _marks(test) -> list:
    """``test``'s pytest marks, with parametrisations over an iterator (scipy's small-input
    cases are a generator) made lists, so that every copy sees all the cases."""
    marks = []
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize":
            names, values = mark.args
            mark = pytest.mark.parametrize(names, list(values), **mark.kwargs).mark
        marks.append(mark)
    return marks


def _rebind(test, solver, name: str):
    """``test`` with ``linear_sum_assignment`` in its globals replaced by ``solver``; its pytest
    marks (the parametrisations) are kept."""
    namespace = dict(test.__globals__, linear_sum_assignment=solver)
    copy = types.FunctionType(test.__code__, namespace, name, test.__defaults__, test.__closure__)
    copy.__dict__.update(test.__dict__)
    copy.pytestmark = list(_marks(test))
    copy.__doc__ = f"scipy's {test.__name__}, against dlap.linear_sum_assignment({solver.keywords})"
    return copy


def _install(configs, marks=()):
    for config in configs:
        options = config.values[0]
        solver = functools.partial(dlap.linear_sum_assignment, **options)
        for name, test in _scipy_test_functions().items():
            copy_name = f"{name}__{config.id.replace('-', '_')}"
            copy = _rebind(test, solver, copy_name)
            for mark in marks:
                copy = mark(copy)
            globals()[copy_name] = copy


_install(CONFIGS)
_install(GPU_CONFIGS, marks=(pytest.mark.gpu,))


def test_every_scipy_test_runs_for_every_configuration():
    """The rebinding found scipy's tests (a renamed module would otherwise pass by running none)."""
    names = _scipy_test_functions()
    assert {"test_constant_cost_matrix", "test_linear_sum_assignment_input_string"} <= set(names)
    for config in CONFIGS + GPU_CONFIGS:
        for name in names:
            assert f"{name}__{config.id.replace('-', '_')}" in globals()
