"""``dlap warmup``: after it, no solve of the CPU's public paths compiles a kernel."""

import numpy as np
import pytest
from numba.core import event

import dlap
from dlap import cli, generate
from dlap.warmup import WORKING_DTYPES, warmup

from .helpers import Compiles, kernel_versions


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
    yield "points, 40-D, cosine", lambda: dlap.solve_points(rng.random((120, 40)), rng.random((90, 40)), "cosine",
                                                            device="cpu")
    side = 1030  # above dlap.threads.SERIAL_MAX_ENTRIES: the kernels' thread-team twins
    yield "uniform, thread team", lambda: dlap.solve(generate.uniform(side, 1.0, seed=3), device="cpu")
    yield "geometric, thread team", lambda: dlap.solve(generate.geometric(side, seed=3), device="cpu")
    c, d = generate.points("uniform", 10000, seed=5)  # dlap.backends.cpu.points.TEAM_AUCTION_ROWS: bids on the team
    yield "points, thread team", lambda: dlap.solve_points(c, d, device="cpu")
    wide = 1500  # above dlap.backends.cpu.backend.NARROW_MIN_ENTRIES: the ε-phases' half-width copy
    yield "int64 geometric, half-width copy", lambda: dlap.solve(
        np.rint(generate.geometric(wide, seed=4) * 1e6).astype(np.int64), method="scaling", device="cpu")


def test_after_warmup_the_public_cpu_paths_compile_nothing(capsys):
    """``dlap warmup --quiet`` (which prints nothing), then each public path: no kernel compiled,
    no version loaded that the warm-up did not load."""
    assert cli.main(["warmup", "--device", "cpu", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    compiles = Compiles()
    event.register("numba:compile", compiles)
    try:
        for name, call in _calls():
            before, versions = len(compiles.kernels), kernel_versions()
            call()
            assert len(compiles.kernels) == before, f"{name} compiled {compiles.kernels[before:]}"
            added = {kernel for kernel, count in kernel_versions().items() if count != versions.get(kernel, 0)}
            assert not added, f"{name} loaded versions of {added} that the warm-up did not"
    finally:
        event.unregister("numba:compile", compiles)


def test_the_command_reports_each_path_and_the_cache(capsys):
    """Two processes (``--jobs 2``): every path is reported once, and each process's share of
    what large solves add."""
    assert cli.main(["warmup", "--device", "cpu", "--jobs", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    paths = [line.rsplit(":", 1)[0] for line in lines[:-1]]
    assert len(paths) == len(set(paths)) and {"cpu large solves 1/2", "cpu large solves 2/2"} <= set(paths)
    assert {f"cpu {dtype} {method} 48x48 {{}}" for dtype in WORKING_DTYPES for method in ("classical", "sparse")} <= set(paths)
    assert any(line.startswith("cpu points d=9") for line in lines)
    assert lines[-1].startswith("dlap's kernels compiled or loaded in") and "numba" in lines[-1]


def test_a_device_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="device must be one of"):
        warmup("tpu")
    with pytest.raises(ValueError, match="jobs must be a positive integer, got 0"):
        warmup("cpu", jobs=0)
