"""``dlap bench``'s suites run end to end at small sizes: records, tables, agreement."""

import json
import statistics
import subprocess
import sys

from dlap import cli
from dlap.bench import deadlines


def test_the_deadlines_suite_measures_each_promise(tmp_path):
    out = tmp_path / "d.jsonl"
    records = deadlines.run(repeat=2, loads=("idle",), out=str(out), echo=lambda *a: None, first_calls=1)
    kinds = {r["kind"] for r in records}
    assert {"dgs first call", "dgs loaded"} <= kinds and any("threads" in k for k in kinds)
    assert all(r["load"] == "idle" and r["suite"] == "deadlines" for r in records)
    assert len(out.read_text().splitlines()) == len(records)
    for r in records:
        values = r.get("over_ms", r.get("ms"))
        assert values and all(isinstance(v, float) for v in values)
    assert deadlines.table(records).count("\n") == len(records) + 1


def test_the_batch_and_dgs_suites_run_from_the_command(tmp_path, capsys):
    out = tmp_path / "b.jsonl"
    assert cli.main(["bench", "--suite", "dgs", "--n", "60", "--families", "geometric", "--device", "cpu",
                     "--json", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["n"] == 60 for r in records)
    assert "| geometric" in capsys.readouterr().out
    from dlap.bench import batch

    small = [("small float32", 6, 8, 9, "float32"), ("ragged 0-100 targets", 3, None, 12, "float32")]
    records = batch.run(["scipy-loop", "dlap-cpu"], repeat=1, out=str(tmp_path / "batch.jsonl"), echo=lambda *a: None,
                        cases=small)
    assert len(records) == 4 and all(r["agrees"] for r in records)
    assert len((tmp_path / "batch.jsonl").read_text().splitlines()) == 4


def test_the_dgs_suites_timed_solves_load_no_kernel():
    """The DGS suite's warm-up reaches every kernel its timed solves run, in a fresh process: the
    exact solver's method="auto" picks by the instance, and the warm-up's instance (another seed)
    was handed to ε-scaling where the first timed one ran the tree variant, whose kernels then
    compiled inside the exact solver's time."""
    script = """
import dlap.bench.dgs as dgs
from tests.helpers import kernel_versions
loaded, warmed = [], []
solve, for_large_solves = dgs.solve, dgs.for_large_solves
def watched(*args, **kwargs):
    before = kernel_versions()
    result = solve(*args, **kwargs)
    if warmed:
        loaded.extend(k for k, count in kernel_versions().items() if count != before.get(k, 0))
    return result
dgs.solve = watched
dgs.for_large_solves = lambda *args: (for_large_solves(*args), warmed.append(True))
assert dgs.run([60], ["geometric"], device="cpu", seed=0, echo=lambda *a: None)
assert warmed and not loaded, loaded
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_points_suite_runs_from_the_command(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    assert cli.main(["bench", "--suite", "points", "--n", "300", "--json", str(out)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["n"] == 300 and record["optimal"] and record["same_optimum"] and record["family"] == "uniform"
    assert record["phase_counts"]["pricing_rounds"] >= 1
    assert "| uniform | 300 | cpu |" in capsys.readouterr().out
    assert cli.main(["bench", "--suite", "points", "--n", "200", "--families", "shifted", "embeddings"]) == 0
    shown = capsys.readouterr().out
    assert "| shifted | 200 | cpu |" in shown and "| embeddings | 200 | cpu |" in shown and "NO" not in shown
    for ratio, m in ((0.8, 160), (1.25, 250)):  # rectangular, both orientations
        assert cli.main(["bench", "--suite", "points", "--n", "200", "--m-ratio", str(ratio), "--families", "shifted"]) == 0
        shown = capsys.readouterr().out
        assert f"| shifted | 200 x {m} | cpu |" in shown and "NO" not in shown
    out.unlink()
    assert cli.main(["bench", "--suite", "points", "--n", "200", "--families", "uniform:sqeuclidean",
                     "--repeat", "2", "--json", str(out)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["metric"] == "sqeuclidean" and record["optimal"] and record["same_optimum"]
    assert len(record["repeat"]) == 2 and abs(statistics.median(record["repeat"]) - record["solve_s"]) < 1e-3
    assert cli.main(["bench", "--suite", "points", "--n", "200", "--families", "uniform:hamming"]) == 2
    assert "unknown metric 'hamming'" in capsys.readouterr().err


def test_the_first_calls_suite_times_fresh_processes(tmp_path):
    from dlap.bench import first_calls

    out = tmp_path / "f.jsonl"
    records = first_calls.run(repeat=1, out=str(out), echo=lambda *a: None, paths=("batch",))
    assert [(r["solver"], r["cache"]) for r in records] == [("dlap", "cached"), ("dlap", "empty"), ("scipy", "")]
    assert all(len(r["first_s"]) == 1 and r["first_s"][0] > 0 for r in records)
    cached, empty, _ = (r["compile_s"][0] for r in records)
    assert 0 < empty < records[1]["first_s"][0] and cached < empty  # an empty cache compiles
    assert len(out.read_text().splitlines()) == 3
    assert first_calls.table(records).count("\n") == 4


def test_the_progress_suite_sets_the_estimate_beside_matched_rows(tmp_path):
    from dlap.bench import progress

    out = tmp_path / "p.jsonl"
    cases = {"scaling": ("geometric", 400, {"method": "scaling"}), "points": ("points", 300, {})}
    records = progress.run(cases, out=str(out), echo=lambda *a: None)
    assert [r["case"] for r in records] == ["scaling", "points"] and len(out.read_text().splitlines()) == 2
    for record in records:
        fractions = [report[1] for report in record["reports"]]
        assert fractions == sorted(fractions) and fractions[-1] == 1.0 and record["seconds"] > 0
        assert set(progress.gaps(record)["eta"]) == {0.25, 0.5, 0.75}
    assert progress.table(records).count("\n") == 3


def test_a_small_benchmark_compiles_nothing_for_large_solves(monkeypatch):
    """Below dlap.threads.SERIAL_MAX_ENTRIES entries (or pairs of points) every solve of a
    benchmark runs on one thread: it compiles none of the thread team's kernels (a first ``dlap
    bench --n 20`` compiled all of them); from that size on it does."""
    from dlap.backends.cpu import numba_setup, points
    from dlap.bench import batch, dgs, grid, progress
    from dlap.bench import points as points_suite
    from dlap.threads import SERIAL_MAX_ENTRIES
    from dlap.warmup import for_large_solves

    compiled = []
    monkeypatch.setattr(numba_setup, "compile_team_twins", lambda share=(0, 1): compiled.append("twins"))
    monkeypatch.setattr(points, "compile_team_kernels", lambda: compiled.append("core"))
    quiet = {"echo": lambda *a: None}
    assert grid.run([("uniform", 1.0, 20)], ["dlap"], repeat=1, **quiet)
    assert points_suite.run([20], **quiet)
    assert dgs.run([30], ["geometric"], device="cpu", switchings=["parallel"], **quiet)
    assert batch.run(["dlap-cpu"], repeat=1, cases=[("ragged 0-100 targets", 3, None, 12, "float32")], **quiet)
    assert progress.run({"points": ("points", 40, {}), "floats": ("float", 30, {})}, **quiet)
    assert compiled == []
    assert batch.run(["dlap-cpu"], repeat=1, cases=[("large", 1, 1024, 1024, "float32")], **quiet)
    assert compiled == ["twins", "core"]
    compiled.clear()
    for_large_solves("gpu", SERIAL_MAX_ENTRIES)  # (the GPU's: no ε-scaling copies to make on the host)
    assert compiled == ["twins", "core"]
