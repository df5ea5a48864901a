"""``dlap warmup``: after it, no solve of the CPU's public paths compiles a kernel."""

import numpy as np
import pytest
from numba.core import event

import dlap
from dlap import cli, generate
from dlap.warmup import warmup


class _Compiles(event.Listener):
    """The Numba kernels compiled (not loaded from the cache) while it is registered."""

    def __init__(self):
        self.kernels = []

    def on_start(self, ev):
        self.kernels.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass


def _calls():
    rng = np.random.default_rng(1)
    a, b = rng.random((300, 3)), rng.random((250, 3))
    yield "uniform", lambda: dlap.solve(generate.uniform(300, 1.0, seed=1), device="cpu")
    yield "floats, wide", lambda: dlap.solve(rng.random((200, 260)), device="cpu")
    yield "geometric", lambda: dlap.solve(generate.geometric(300, seed=1), device="cpu")
    yield "int64, tall, maximised", lambda: dlap.solve(rng.integers(-50, 50, (260, 200)), maximize=True, device="cpu")
    yield "float32 scaling", lambda: dlap.solve(rng.random((150, 150), dtype=np.float32), method="scaling", device="cpu")
    for method in ("classical", "tree", "hybrid"):
        yield method, lambda method=method: dlap.solve(generate.uniform(120, 10.0, seed=2), method=method, device="cpu")
    yield "dgs", lambda: dlap.solve(rng.random((100, 100)), method="dgs", time_limit=0.5, device="cpu")
    yield "batch", lambda: dlap.solve_batch(rng.random((20, 9, 12)), device="cpu")
    yield "int32 batch", lambda: dlap.solve_batch(rng.integers(0, 9, (20, 9, 9)).astype(np.int32), device="cpu")
    yield "points", lambda: dlap.solve_points(a, b, device="cpu").verify()
    yield "points, 12-D, float32", lambda: dlap.solve_points(rng.random((200, 12), dtype=np.float32),
                                                             rng.random((150, 12), dtype=np.float32), device="cpu")
    yield "points, cityblock", lambda: dlap.solve_points(b, a, "cityblock", device="cpu")


def test_after_warmup_the_public_cpu_paths_compile_nothing():
    warmup("cpu")
    compiles = _Compiles()
    event.register("numba:compile", compiles)
    try:
        for name, call in _calls():
            before = len(compiles.kernels)
            call()
            assert len(compiles.kernels) == before, f"{name} compiled {compiles.kernels[before:]}"
    finally:
        event.unregister("numba:compile", compiles)


def test_the_command_reports_each_path_and_the_cache(capsys):
    assert cli.main(["warmup", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("cpu classical 48x48") for line in lines)
    assert any(line.startswith("cpu points d=9") for line in lines)
    assert lines[-1].startswith("dlap's kernels compiled or loaded in") and "numba" in lines[-1]
    assert cli.main(["warmup", "--device", "cpu", "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_a_device_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="device must be one of"):
        warmup("tpu")
