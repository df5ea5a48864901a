"""Shared fixtures: the solver configurations every correctness test runs, and the GPU marker."""

import pytest

#: every way of running the CPU solvers that a user can ask for
CONFIGS = [
    pytest.param({"method": "auto"}, id="auto"),
    pytest.param({"method": "tree", "init": "reduction", "roots": "all"}, id="tree-paper"),
    pytest.param({"method": "tree", "init": "jv", "roots": "one"}, id="tree-jv-one"),
    pytest.param({"method": "tree", "init": "jv", "roots": "all"}, id="tree-jv-all"),
    pytest.param({"method": "classical", "init": "reduction"}, id="classical-paper"),
    pytest.param({"method": "classical", "init": "jv"}, id="classical-jv"),
    pytest.param({"method": "hybrid"}, id="hybrid"),
    pytest.param({"method": "scaling"}, id="scaling"),
]


def _gpu_visible() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_visible():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
