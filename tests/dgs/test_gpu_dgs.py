"""Deep Greedy Switching on the GPU (skipped where no GPU is visible): the same properties as on
the CPU, and the same choices as the CPU's parallel switching, exchange for exchange."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import dlap
from dlap import generate

from ..strategies import STRATEGIES
from .dgs_checks import FAMILIES, assert_dgs_result, check_dgs_strategy

pytestmark = pytest.mark.gpu

GPU_DGS = [
    pytest.param({"start": "greedy"}, id="gpu-greedy"),
    pytest.param({"start": "random", "seed": 3}, id="gpu-random"),
]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("options", GPU_DGS)
@pytest.mark.parametrize("strategy", list(STRATEGIES), ids=list(STRATEGIES))
def test_gpu_dgs_properties(options, strategy):
    check_dgs_strategy(strategy, {"device": "gpu", **options}, SETTINGS)


@pytest.mark.parametrize("options", GPU_DGS)
@pytest.mark.parametrize("family", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_gpu_dgs_makes_the_cpu_choices(options, family):
    """Same deltas, same tie-breaking: the GPU's parallel switching reproduces the CPU's."""
    _, make, maximize = family
    cost = make()
    gpu = dlap.solve(cost, maximize=maximize, method="dgs", device="gpu", **options)
    cpu = dlap.solve(cost, maximize=maximize, method="dgs", device="cpu", **options)
    assert_dgs_result(gpu, cost, maximize)
    np.testing.assert_array_equal(gpu.col_ind, cpu.col_ind)
    assert gpu.stats.switches == cpu.stats.switches
    assert gpu.lower_bound == pytest.approx(cpu.lower_bound, rel=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_gpu_dgs_every_dtype_larger(dtype):
    cost = (generate.geometric(1500, seed=21) * 10).astype(dtype)
    gpu = dlap.solve(cost, method="dgs", device="gpu")
    cpu = dlap.solve(cost, method="dgs", device="cpu")
    np.testing.assert_array_equal(gpu.col_ind, cpu.col_ind)
    assert len(np.unique(gpu.col_ind)) == 1500


def test_gpu_dgs_on_cupy_input():
    import cupy

    cost = generate.geometric(400, seed=22, same_points=True)
    on_gpu = cupy.asarray(cost)
    before = on_gpu.copy()
    result = dlap.solve(on_gpu, maximize=True, method="dgs")
    assert isinstance(result.col_ind, cupy.ndarray) and result.stats.device == "gpu"
    assert bool((on_gpu == before).all())
    host = dlap.solve(cost, maximize=True, method="dgs", device="cpu")
    np.testing.assert_array_equal(result.col_ind.get(), host.col_ind)
    assert result.verify().gap >= 0


def test_gpu_dgs_time_limit_and_sequential_refused():
    cost = generate.geometric(6000, seed=23)
    dlap.solve(cost[:200, :200], method="dgs", device="gpu", start="random")
    capped = dlap.solve(cost, method="dgs", device="gpu", start="random", time_limit=0.3)
    free = dlap.solve(cost, method="dgs", device="gpu", start="random")
    assert len(np.unique(capped.col_ind)) == 6000
    assert free.objective <= capped.objective
    with pytest.raises(ValueError, match="sequential' runs on the CPU"):
        dlap.solve(cost[:10, :10], method="dgs", device="gpu", switching="sequential")


def test_gpu_dgs_float32_subnormals_count():
    cost = np.array([[0.0, -1.95e-43], [-2e-45, 0.0]], dtype=np.float32)
    gpu = dlap.solve(cost, method="dgs", device="gpu")
    cpu = dlap.solve(cost, method="dgs", device="cpu")
    np.testing.assert_array_equal(gpu.col_ind, cpu.col_ind)
    assert gpu.objective == cpu.objective < 0


@pytest.mark.parametrize("seed", range(6))
def test_gpu_dgs_holds_float32_subnormals_exactly(seed):
    """The held costs after a random start keep float32 subnormals (CuPy's conversion to float64
    flushed 5e-44 to zero, so a row started on it saw no gain in moving to 0: found by the
    property test on an H200)."""
    cost = np.array([[0.0, 5e-44]], dtype=np.float32)
    result = dlap.solve(cost, method="dgs", device="gpu", start="random", seed=seed)
    assert result.col_ind.tolist() == [0] and result.objective == 0.0
    cost = np.array([[5e-44, 0.0, 3e-44], [0.0, 4e-44, 5e-44]], dtype=np.float32)
    gpu = dlap.solve(cost, method="dgs", device="gpu", start="random", seed=seed)
    cpu = dlap.solve(cost, method="dgs", device="cpu", start="random", seed=seed)
    assert gpu.col_ind.tolist() == cpu.col_ind.tolist() == [1, 0]


FIRST_CALLS = """
import os, sys
import cupy, numpy as np
import dlap
from dlap import generate

def compiled():
    return sum(len(files) for _, _, files in os.walk(os.environ["CUPY_CACHE_DIR"]))

dtype = sys.argv[1]
dlap.load_dgs_kernels(dtype, "gpu")
cupy.cuda.get_current_stream().synchronize()
before = compiled()
cost = cupy.asarray(generate.uniform(600, 1.0, seed=4).astype(dtype))
for maximize in (False, True):
    result = dlap.solve(cost, method="dgs", maximize=maximize, time_limit=5.0, device="gpu")
    assert result.stats.switches > 0 and "kernels_loading" not in result.stats.phase_counts, result.stats
cupy.cuda.get_current_stream().synchronize()
print(before, compiled())
"""


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_after_loading_a_first_call_on_a_cupy_matrix_compiles_no_cupy_kernel(tmp_path, dtype):
    """``load_dgs_kernels`` makes each answer as a call does, so a first call's answer on a CuPy
    matrix (its arange, indexing, duals and bound) compiles none of CuPy's kernels past its
    deadline: a fresh process with an empty CuPy kernel cache, whose files are the kernels
    compiled, gains none in the call."""
    env = {**os.environ, "CUPY_CACHE_DIR": str(tmp_path / "cupy")}
    run = subprocess.run([sys.executable, "-c", FIRST_CALLS, dtype], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    before, after = map(int, run.stdout.split())
    assert before > 0 and after == before, f"the first calls compiled {after - before} of CuPy's kernels"
