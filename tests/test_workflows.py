"""The end-to-end workflows (workflows/*.py) run as a user runs them, at a small size."""

import json
import subprocess
import sys
from pathlib import Path

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


def test_the_papers_scaling_tables_on_cpu_workers(tmp_path):
    out = tmp_path / "scaling.jsonl"
    run("scaling.py", "strong", "--n", "300", "--ranks", "1", "2", "--cpu", "--repeat", "1", "--out", out,
        cwd=tmp_path)
    records = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    assert {r["ranks"] for r in records} >= {1, 2} and all(r["optimal"] for r in records)
