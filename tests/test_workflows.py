"""The end-to-end workflows (workflows/*.py) run as a user runs them, at a small size."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"

pytestmark = pytest.mark.distributed


def run(script: str, *args, cwd) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(WORKFLOWS / script), *map(str, args)], capture_output=True,
                          text=True, timeout=600, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_generate_to_zarr_solve_on_a_cluster_write_the_solution(tmp_path):
    pytest.importorskip("zarr")
    store = tmp_path / "lap.zarr"
    done = run("solve_zarr.py", "--n", "300", "--f", "10", "--store", store, "--workers", "2", cwd=tmp_path)
    assert "optimal" in done.stdout
    assert (store / "solution").exists()


@pytest.mark.parametrize("persist", [False, True], ids=["generated per solve", "persisted"])
def test_the_papers_scaling_tables_on_cpu_workers(tmp_path, persist):
    out = tmp_path / "scaling.jsonl"
    run("scaling.py", "strong", "--n", "300", "--ranks", "1", "2", "--cpu", "--repeat", "1", "--out", out,
        *(["--persist"] if persist else []), cwd=tmp_path)
    records = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    assert {r["ranks"] for r in records} >= {1, 2} and all(r["optimal"] for r in records)
    assert all(r["persisted"] == persist for r in records)


def _load_workflow(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, WORKFLOWS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("maximum", [255, 1023])
def test_colour_transfer_between_two_images(tmp_path, maximum):
    """Two small PPM images (8 and 16 bits a channel): the workflow's optimum is scipy's on the
    matrix of the same (r, g, b, x, y) costs, and the smaller image is written with the colours of
    the pixels it was given."""
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    workflow = _load_workflow("colour_transfer")
    rng = np.random.default_rng(maximum)
    first, second = rng.integers(0, maximum + 1, (9, 12, 3)), rng.integers(0, maximum + 1, (14, 10, 3))
    workflow.write_ppm(tmp_path / "b.ppm", first, maximum)  # the larger image first: the workflow swaps them
    workflow.write_ppm(tmp_path / "a.ppm", second, maximum)
    pixels, read_maximum = workflow.read_ppm(tmp_path / "a.ppm")
    assert read_maximum == maximum and np.array_equal(pixels, second)
    small, large = workflow.points(first, maximum), workflow.points(second, maximum)
    assert small[13] == pytest.approx([*(first[1, 1] / maximum), 1 / 11, 1 / 8])  # pixel (row 1, column 1)
    done = run("colour_transfer.py", tmp_path / "a.ppm", tmp_path / "b.ppm", "--out", tmp_path / "t.ppm",
               "--device", "cpu", cwd=tmp_path)
    record = json.loads(done.stdout.splitlines()[-1])
    cost = cdist(small, large, "sqeuclidean")
    rows, cols = linear_sum_assignment(cost)
    assert record["optimal"] and record["pixels"] == [108, 140]
    assert record["objective"] == pytest.approx(cost[rows, cols].sum(), rel=1e-12)
    transferred, _ = workflow.read_ppm(tmp_path / "t.ppm")
    assert transferred.shape == first.shape
    given = {tuple(c) for c in second.reshape(-1, 3)}
    assert all(tuple(c) in given for c in transferred.reshape(-1, 3))


def test_match_two_generated_point_clouds_from_a_dask_client(tmp_path):
    """The clouds made by a task on a local cluster's workers, the matching written to Zarr: the
    optimum dlap.solve_points finds in one process."""
    zarr = pytest.importorskip("zarr")
    import dlap
    from dlap import generate

    store = tmp_path / "match.zarr"
    done = run("match_point_clouds.py", "--n", "2500", "--m", "2800", "--family", "clustered", "--seed", "3",
               "--workers", "2", "--device", "cpu", "--out", store, cwd=tmp_path)
    record = json.loads(done.stdout.splitlines()[-1])
    assert record["optimal"] and record["workers"] == 2 and (record["n"], record["m"], record["d"]) == (2500, 2800, 2)
    a, b = generate.points("clustered", 2500, 2800, seed=3)
    alone = dlap.solve_points(a, b, device="cpu")
    assert record["objective"] == pytest.approx(alone.objective, rel=1e-12)
    written = zarr.open_group(str(store), mode="r")
    cols = np.asarray(written["col_ind"])
    assert np.array_equal(np.asarray(written["row_ind"]), np.arange(2500)) and np.unique(cols).size == 2500
    assert np.linalg.norm(a - b[cols], axis=1).sum() == pytest.approx(alone.objective, rel=1e-12)
    assert written.attrs["optimal"] is True and written.attrs["metric"] == "euclidean"


def test_match_point_clouds_read_from_zarr(tmp_path):
    """--points: a store's arrays a and b (the longer first), matched under another metric."""
    zarr = pytest.importorskip("zarr")
    import dlap

    rng = np.random.default_rng(5)
    a, b = rng.random((900, 3)), rng.random((700, 3)) + 0.2
    clouds = zarr.open_group(str(tmp_path / "clouds.zarr"), mode="w")
    clouds.create_array("a", data=a, chunks=(300, 3))
    clouds.create_array("b", data=b, chunks=(300, 3))
    done = run("match_point_clouds.py", "--points", tmp_path / "clouds.zarr", "--metric", "cityblock",
               "--workers", "2", "--device", "cpu", cwd=tmp_path)
    record = json.loads(done.stdout.splitlines()[-1])
    assert record["optimal"] and (record["n"], record["m"], record["d"]) == (900, 700, 3) and record["out"] is None
    assert record["objective"] == pytest.approx(dlap.solve_points(a, b, "cityblock", device="cpu").objective, rel=1e-12)
