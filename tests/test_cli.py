"""The dlap command: solve, generate, demo, bench, and its error path."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlap import cli, generate


def run(*argv):
    return cli.main(list(argv))


def test_demo_prints_objective_time_and_check(capsys):
    assert run("demo", "--n", "300") == 0
    out = capsys.readouterr().out
    assert "objective" in out and "time" in out and "check      optimal" in out


_LOADED_BEFORE_THE_CLOCK = """
import sys
from dlap import cli, generate, solve
from tests.helpers import kernel_versions
cost = generate.family(sys.argv[1], int(sys.argv[2]), seed=3, m=int(sys.argv[3]) if sys.argv[3:] else None)
cli._load_kernels(cost, True, "cpu")
before = kernel_versions()
solve(cost, device="cpu")
print(sorted(k for k, count in kernel_versions().items() if count != before.get(k, 0)))
"""


@pytest.mark.parametrize("family, n, m", [("uniform", 1100, None), ("geometric", 700, None), ("float", 90, None),
                                          ("geometric", 2000, None), ("geometric-disjoint", 2000, 2100)])
def test_the_timed_solve_of_a_command_loads_no_kernel(family, n, m):
    """The commands load the kernels before their clock starts (a corner of the matrix, its
    ε-scaling solve where auto may hand over, the sparse engine where auto may give it the
    matrix, the thread team's twins past 2**20 entries): in a fresh process, the timed solve
    adds no kernel version."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", _LOADED_BEFORE_THE_CLOCK, family, str(n), *([str(m)] if m else [])],
                         capture_output=True,
                         text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("suffix", [".npy", ".csv", ".zarr"])
def test_generate_then_solve_a_file(tmp_path, capsys, suffix):
    path = tmp_path / f"m{suffix}"
    assert run("generate", "--family", "uniform", "--n", "50", "--f", "10", "--out", str(path)) == 0
    out_npz = tmp_path / "solution.npz"
    assert run("solve", str(path), "--json", "--out", str(out_npz)) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    cost = generate.uniform(50, 10, seed=0)
    from scipy.optimize import linear_sum_assignment

    r, c = linear_sum_assignment(cost)
    assert info["objective"] == cost[r, c].sum() and info["optimal"]
    saved = np.load(out_npz)
    assert cost[saved["row_ind"], saved["col_ind"]].sum() == info["objective"]
    assert not list(tmp_path.glob(".*")), "no temporary file left behind"


def test_solve_generated_with_options(capsys):
    assert run("solve", "--family", "geometric", "--n", "80", "--method", "classical", "--maximize") == 0
    assert "dlap classical on cpu" in capsys.readouterr().out


def test_solve_with_dgs_reports_the_heuristic_and_writes_its_solution(tmp_path, capsys):
    out_npz = tmp_path / "dgs.npz"
    assert run("solve", "--family", "geometric", "--n", "60", "--method", "dgs", "--start", "random",
               "--switching", "sequential", "--time-limit", "5", "--json", "--out", str(out_npz)) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["heuristic"] and info["method"] == "dgs" and info["lower_bound"] <= info["objective"]
    saved = np.load(out_npz)
    cost = generate.geometric(60, seed=0)
    assert cost[saved["row_ind"], saved["col_ind"]].sum() == pytest.approx(info["objective"], rel=1e-12)


def test_bad_matrix_gives_scipy_message_and_exit_code(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("1,nan\n2,3\n")
    assert run("solve", str(path)) == 2
    assert "matrix contains invalid numeric entries" in capsys.readouterr().err


def test_bench_writes_json_records_and_a_table(tmp_path, capsys):
    out = tmp_path / "bench.jsonl"
    code = run("bench", "--n", "60", "--families", "uniform:1", "float", "--solvers", "dlap",
               "dlap-classical", "scipy", "lap", "--repeat", "2", "--json", str(out))
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 * 4
    for r in records:
        assert {"solver", "method", "device", "family", "n", "f", "dtype", "seconds", "objective",
                "timing"} <= set(r)
        assert r["agrees"] and r["timing"] == "host" and len(r["repeat"]) == 2
    table = capsys.readouterr().out
    assert "| uniform f=1 | 60 |" in table and "dlap-auto / lap" in table


def test_bench_hard_suite_maximises_benefit_and_agrees(tmp_path, capsys, monkeypatch):
    """--suite hard: the structured families, a benefit matrix maximised by every solver (lap
    gets the negated matrix), the same optimum everywhere, no anchors column on a CPU run."""
    monkeypatch.delenv("DLAP_LAPX_DIR", raising=False)
    out = tmp_path / "hard.jsonl"
    assert run("bench", "--suite", "hard", "--n", "40", "--solvers", "dlap", "dlap-scaling", "scipy", "lap",
               "--repeat", "1", "--json", str(out)) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    families = {r["family"] for r in records}
    assert families == {"geometric", "geometric-int", "geometric-3d", "geometric-disjoint", "geometric-benefit",
                        "machol-wien", "ties"}
    assert all(r["agrees"] for r in records)
    # every dlap answer's certificate is recomputed after its timed runs; the peers have none
    assert all(r["certified"] is (True if r["solver"].startswith("dlap") else None) for r in records)
    benefit = [r for r in records if r["family"] == "geometric-benefit"]
    assert all(r["maximize"] for r in benefit) and len({round(r["objective"], 6) for r in benefit}) == 1
    cost = generate.geometric(40, seed=0, same_points=True)
    from scipy.optimize import linear_sum_assignment

    r, c = linear_sum_assignment(cost, maximize=True)
    assert benefit[0]["objective"] == pytest.approx(cost[r, c].sum(), rel=1e-12)
    table = capsys.readouterr().out
    assert "| ties levels=4 | 40 |" in table and "best peer" not in table
    assert all(line.endswith("| yes | yes |") for line in table.splitlines() if line.startswith("| ") and "| 40 |" in line)


def test_bench_hard_suite_on_rectangular_matrices(tmp_path, capsys, monkeypatch):
    """--m-ratio: every family n x round(n * ratio), lap given its extended cost, the same optimum
    everywhere; a GPU run's table (the anchors column) takes rectangular records too."""
    from dlap.bench import grid

    monkeypatch.delenv("DLAP_LAPX_DIR", raising=False)
    out = tmp_path / "hard.jsonl"
    assert run("bench", "--suite", "hard", "--n", "40", "--m-ratio", "1.2", "--families", "geometric-disjoint",
               "geometric-benefit", "--solvers", "dlap", "dlap-sparse", "scipy", "lap", "--repeat", "1",
               "--json", str(out)) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["n"], r["m"]) for r in records} == {(40, 48)} and all(r["agrees"] for r in records)
    assert "| geometric-disjoint | 40 x 48 |" in capsys.readouterr().out
    on_gpu = [dict(r, device="gpu") for r in records] + [dict(records[0], family="geometric", n=10000, m=10000)]
    assert "| geometric-disjoint | 40 x 48 |" in grid.table(on_gpu) and "best peer" in grid.table(on_gpu)


def test_solve_a_benefit_family_maximises_it(capsys):
    assert run("solve", "--family", "geometric-benefit", "--n", "70", "--json") == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    cost = generate.geometric(70, seed=0, same_points=True)
    from scipy.optimize import linear_sum_assignment

    r, c = linear_sum_assignment(cost, maximize=True)
    assert info["optimal"] and info["objective"] == pytest.approx(cost[r, c].sum(), rel=1e-12)
    assert "maximised" in info["instance"]


def test_console_script_entry_point_demo_json_prints_only_json():
    done = subprocess.run([sys.executable, "-m", "dlap", "demo", "--n", "100", "--json"],
                          capture_output=True, text=True, check=True)
    info = json.loads(done.stdout)  # the whole of stdout: one JSON document, no banner before it
    assert info["optimal"] and info["shape"] == [100, 100]


def test_version():
    import dlap

    done = subprocess.run([sys.executable, "-m", "dlap", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"dlap {dlap.__version__}"


def test_generate_a_rectangular_instance_and_solve_it(tmp_path, capsys):
    path = tmp_path / "r.npy"
    assert run("generate", "--family", "geometric", "--n", "30", "--m", "45", "--out", str(path)) == 0
    assert "30 x 45" in capsys.readouterr().out
    cost = np.load(path)
    assert cost.shape == (30, 45)
    np.testing.assert_array_equal(cost, generate.geometric(30, m=45, seed=0))
    assert run("solve", "--family", "uniform", "--n", "30", "--m", "20", "--f", "10", "--json") == 0
    info = json.loads(capsys.readouterr().out)
    from scipy.optimize import linear_sum_assignment

    wide = generate.uniform(30, 10, m=20, seed=0)
    r, c = linear_sum_assignment(wide)
    assert info["shape"] == [30, 20] and info["objective"] == wide[r, c].sum() and info["optimal"]


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".json"])
def test_out_writes_exactly_the_named_file_in_its_format(tmp_path, capsys, suffix):
    out = tmp_path / f"solution{suffix}"
    assert run("solve", "--n", "40", "--f", "10", "--json", "--out", str(out)) == 0
    objective = json.loads(capsys.readouterr().out)["objective"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
    cost = generate.uniform(40, 10, seed=0)
    if suffix == ".npz":
        saved = np.load(out)
        rows, cols = saved["row_ind"], saved["col_ind"]
        assert saved["row_duals"].shape == (40,) and saved["col_duals"].shape == (40,)
    elif suffix == ".csv":
        lines = out.read_text().splitlines()
        assert lines[0] == "row,col" and len(lines) == 41
        rows, cols = np.loadtxt(out, delimiter=",", skiprows=1, dtype=int).T
    else:
        saved = json.loads(out.read_text())
        rows, cols = np.array(saved["row_ind"]), np.array(saved["col_ind"])
        assert saved["objective"] == objective and len(saved["row_duals"]) == 40
    assert cost[rows, cols].sum() == objective


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_out_files_get_the_users_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        assert run("solve", "--n", "20", "--out", str(tmp_path / "s.npz")) == 0
        assert run("generate", "--n", "20", "--out", str(tmp_path / "m.csv")) == 0
    finally:
        os.umask(old)
    for name in ("s.npz", "m.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask


def test_solve_on_a_dask_cluster(tmp_path, capsys):
    """--workers starts a local cluster; --scheduler attaches to one; a .zarr input is read by the
    workers; the answer equals the single-machine solver's."""
    distributed = pytest.importorskip("distributed")
    from dlap import solve

    # made here and scattered; generated on the workers (the same matrices)
    for family in ("uniform", "uniform-counter", "geometric-benefit"):
        f = ("--f", "10") if family.startswith("uniform") else ()
        options = ("--family", family, "--n", "120", *f, "--method", "tree", "--json")
        assert run("solve", *options) == 0
        alone = json.loads(capsys.readouterr().out)
        assert run("solve", *options, "--workers", "2", "--device", "cpu") == 0
        info = json.loads(capsys.readouterr().out)
        cost = generate.family(family, 120, 10.0 if f else None)
        maximize = family in generate.MAXIMIZE
        assert info["method"] == "distributed-tree" and info["device"] == "2 x cpu" and info["optimal"]
        assert info["objective"] == alone["objective"] == solve(cost, maximize=maximize).objective, family
        assert ("generated on the workers" in info["instance"]) == (family != "uniform")
    np.testing.assert_array_equal(generate.uniform_counter(120, 10.0), generate.uniform_block((0, 120), (0, 120), 120, 1200, 0))
    path = tmp_path / "m.zarr"
    assert run("generate", "--family", "uniform", "--n", "90", "--f", "10", "--out", str(path)) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        assert run("solve", str(path), "--scheduler", cluster.scheduler_address, "--json") == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # one rank, on the device its worker chose ("auto": a GPU where the workers see one)
    alone = solve(generate.uniform(90, 10), device="gpu" if "gpu" in info["device"] else "cpu")
    assert info["method"] == f"distributed-{alone.stats.method}" and info["objective"] == alone.objective  # one rank
    assert run("solve", "--workers", "2", "--method", "dgs") == 2
    assert "runs --method auto, classical, hybrid, scaling, tree" in capsys.readouterr().err
