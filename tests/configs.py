"""The solver configurations the correctness tests run: every way a user can ask for a solve."""

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
#: the same on a GPU
GPU_CONFIGS = [
    pytest.param({"device": "gpu"}, id="gpu-auto"),
    pytest.param({"device": "gpu", "method": "tree", "init": "jv"}, id="gpu-tree-jv"),
    pytest.param({"device": "gpu", "method": "tree", "init": "reduction"}, id="gpu-tree-paper"),
    pytest.param({"device": "gpu", "method": "classical", "init": "jv"}, id="gpu-classical-jv"),
    pytest.param({"device": "gpu", "method": "classical", "init": "reduction"}, id="gpu-classical-paper"),
    pytest.param({"device": "gpu", "method": "hybrid", "init": "reduction"}, id="gpu-hybrid-paper"),
    pytest.param({"device": "gpu", "method": "scaling"}, id="gpu-scaling"),
]
