"""The ``dlap`` command's error path: every bad input, missing extra, unreachable cluster and
interrupt ends in one line on stderr and exit status 2 (130 for Ctrl-C), found before any
solve whose result it would lose, and leaves no file behind."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from dlap import cli, generate
from dlap.device import gpu_available
from dlap.files import read_matrix


def fails(capsys, *argv, match: str) -> str:
    """Run the command in-process; it must exit 2 with one line ``dlap: ...`` containing
    ``match`` on stderr and print nothing on stdout (no solve ran)."""
    assert cli.main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "", "the error must be found before any work"
    assert err.count("\n") == 1 and err.startswith("dlap: ") and match in err, err
    return err


def command(*argv, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlap", *argv], capture_output=True, text=True, **kwargs)


@pytest.mark.parametrize("name", ["sol", "sol.txt", "sol.npy"])
def test_out_with_an_unknown_format_is_refused_before_solving(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    fails(capsys, "solve", "--n", "30", "--out", name, match="unknown format")
    assert list(tmp_path.iterdir()) == []


def test_out_in_a_missing_folder_or_on_a_folder_is_refused_before_solving(tmp_path, capsys):
    fails(capsys, "solve", "--n", "30", "--out", str(tmp_path / "missing" / "s.npz"), match="no such folder")
    (tmp_path / "d.npz").mkdir()
    fails(capsys, "solve", "--n", "30", "--out", str(tmp_path / "d.npz"), match="is a folder")
    fails(capsys, "generate", "--n", "30", "--out", str(tmp_path / "missing" / "m.npy"), match="no such folder")
    assert [p.name for p in tmp_path.iterdir()] == ["d.npz"]


def test_out_in_a_read_only_folder_is_refused(tmp_path, capsys):

    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    fails(capsys, "solve", "--n", "30", "--out", str(folder / "s.npz"), match="not writable")


def test_a_failed_write_leaves_no_file(tmp_path):
    from dlap.files import write_file

    def broken(f):
        f.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_file(str(tmp_path / "s.npz"), broken)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content, match", [
    (b"", "the file is empty"),
    (b"\n\n", "not a .csv matrix"),
    (b"1,2\n3\n", "not a .csv matrix"),
    (b"1,x\n3,4\n", "not a .csv matrix"),
])
def test_bad_csv_files(tmp_path, capsys, content, match):
    path = tmp_path / "m.csv"
    path.write_bytes(content)
    fails(capsys, "solve", str(path), match=match)


@pytest.mark.parametrize("matrix, match", [
    (None, "m.npy: the file is empty"),  # a 0-byte file (a 0 x 0 array saved by numpy is a valid empty matrix)
    (np.ones((3, 3), dtype=complex), "m.npy: holds complex128 entries, not real numbers"),
    (np.array([["a", "b"], ["c", "d"]]), "m.npy: holds <U1 entries, not real numbers"),
    (np.ones((2, 2), dtype=np.longdouble), "m.npy: holds float128 entries, not real numbers"),
])
def test_bad_npy_files(tmp_path, capsys, matrix, match):
    """Issue 37: a .npy of strings or complex numbers got scipy's TypeError, naming no file."""
    path = tmp_path / "m.npy"
    if matrix is None:
        path.write_bytes(b"")
    else:
        np.save(path, matrix)
    fails(capsys, "solve", str(path), match=match)


def test_npy_that_is_not_numpy_or_holds_objects(tmp_path, capsys):
    """Issue 37: a text file named .npy got numpy's advice about pickled data."""
    path = tmp_path / "m.npy"
    path.write_bytes(b"not a numpy file")
    fails(capsys, "solve", str(path), match="m.npy: not a .npy file (no NumPy header; a text matrix is read from .csv)")
    path.write_text("1,2\n3,4\n")
    err = fails(capsys, "solve", str(path), match="not a .npy file")
    assert "pickle" not in err
    np.save(path, np.array([[1, None]], dtype=object), allow_pickle=True)
    fails(capsys, "solve", str(path), match="not a .npy matrix")


def test_missing_file_and_unknown_input_format(tmp_path, capsys):
    fails(capsys, "solve", str(tmp_path / "nope.npy"), match="no such file")
    other = tmp_path / "m.txt"
    other.write_text("1")
    fails(capsys, "solve", str(other), match="unknown matrix format '.txt'")


@pytest.mark.parametrize("flags", [["--time-limit", "0.1"], ["--start", "random"], ["--switching", "sequential"]])
def test_dgs_options_without_method_dgs_are_refused(capsys, flags):
    fails(capsys, "solve", "--n", "20", *flags, match=f"{flags[0]} is an option of --method dgs")
    fails(capsys, "solve", "--n", "20", "--method", "tree", *flags, match="of --method dgs")


@pytest.mark.skipif(gpu_available(), reason="a GPU is visible")
def test_device_gpu_without_a_gpu(capsys):
    fails(capsys, "solve", "--n", "20", "--device", "gpu", match="needs CuPy and a CUDA GPU")
    pytest.importorskip("distributed")
    fails(capsys, "solve", "--n", "20", "--device", "gpu", "--workers", "1", match="needs CuPy and a CUDA GPU")


def test_bench_plot_without_matplotlib_is_refused_before_the_benchmark(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    fails(capsys, "bench", "--n", "20", "--solvers", "dlap", "--repeat", "1", "--plot", str(tmp_path / "p.png"),
          match="pip install 'dlap[plot]'")
    fails(capsys, "bench", "--n", "20", "--plot", str(tmp_path / "p.jpg"), match="unknown format '.jpg'")
    fails(capsys, "bench", "--n", "20", "--json", str(tmp_path / "no" / "b.jsonl"), match="no such folder")


def test_bench_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    assert cli.main(["bench", "--n", "20", "--families", "uniform:1", "--solvers", "dlap", "--repeat", "1",
                     "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.png"]


def test_bench_without_scipy_skips_it(capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "scipy" or m.startswith("scipy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "scipy", None)
    assert cli.main(["bench", "--n", "20", "--families", "uniform:1", "--solvers", "dlap", "scipy",
                     "--repeat", "1"]) == 0
    assert "scipy is not installed (pip install scipy): skipped" in capsys.readouterr().out


def test_an_unreachable_scheduler_is_one_line():
    pytest.importorskip("distributed")
    with socket.socket() as s:  # a port no one listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = command("solve", "--n", "20", "--scheduler", f"tcp://127.0.0.1:{port}", timeout=120,
                   env={**os.environ, "DASK_DLAP__CONNECT_TIMEOUT": "2s"})  # dask.config dlap.connect-timeout
    assert done.returncode == 2
    assert done.stderr.startswith(f"dlap: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}")
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_ctrl_c_during_a_solve_is_one_line_and_exit_130():
    """SIGINT once the solve is under way (its progress bar shows after a second of solving):
    Machol-Wien n = 2000 by the classical variant takes minutes. Its kernels are compiled first:
    a signal that lands while Numba compiles (a fresh clone's first solve) is not seen until the
    compiler returns to Python. The child gets SIGINT's default disposition, as a command typed at
    a terminal does: a shell ignores SIGINT in its background jobs, and that setting is inherited
    (a suite run in the background would otherwise test a child that cannot be interrupted)."""
    from dlap import solve

    solve(generate.machol_wien(50), method="classical")  # compiles into the disk cache the child loads
    child = subprocess.Popen([sys.executable, "-m", "dlap", "solve", "--family", "machol-wien", "--n", "2000",
                              "--method", "classical"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = b""
        while b"dlap solve" not in seen:  # the progress bar: the solve is under way
            chunk = os.read(child.stderr.fileno(), 4096)
            assert chunk, seen.decode()  # the child ended before its bar showed
            seen += chunk
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
        err = seen + err
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == 130
    assert err.decode().rstrip().endswith("dlap: interrupted") and b"Traceback" not in err
    assert out == b""


def test_errors_show_the_traceback_on_request(tmp_path):
    done = command("solve", str(tmp_path / "nope.npy"), env={**os.environ, "DLAP_TRACEBACK": "1"})
    assert done.returncode == 1 and "Traceback" in done.stderr and "FileError: no such file" in done.stderr


def test_a_generated_empty_matrix_is_solved_not_refused(capsys):
    assert cli.main(["solve", "--n", "0", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["shape"] == [0, 0] and info["objective"] == 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "sigint"])
def test_an_interrupted_zarr_generate_keeps_the_old_store(tmp_path, sig):
    """Issue 14: ``dlap generate --out g.zarr`` interrupted at any point destroyed the old store
    and left a readable, zero-filled one that ``dlap solve`` accepted. The store is written beside
    the old one and moved into place once complete; a store left unfinished is refused."""
    pytest.importorskip("zarr")
    store = tmp_path / "g.zarr"
    assert command("generate", "--n", "40", "--out", str(store)).returncode == 0
    old = read_matrix(str(store))
    child = subprocess.Popen([sys.executable, "-m", "dlap", "generate", "--n", "6000", "--out", str(store)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.perf_counter() + 120
        while not list(tmp_path.glob(".g.zarr.*.tmp/zarr.json")):  # the new store is being written
            assert child.poll() is None and time.perf_counter() < deadline, "the write ended before it was seen"
            time.sleep(0.005)
        child.send_signal(sig)
        child.wait(30)
    finally:
        child.kill()
        child.wait()
        child.stderr.close()
    assert np.array_equal(read_matrix(str(store)), old), "the old store was touched"
    left = list(tmp_path.glob(".g.zarr.*.tmp"))
    if sig == signal.SIGINT:
        assert child.returncode == 130 and left == []  # the interrupted write cleans up after itself
    else:
        assert left, "SIGKILL leaves the temporary store"  # (it is hidden, and refused:)
        done = command("solve", str(left[0]))
        assert done.returncode == 2 and "incomplete Zarr store" in done.stderr


def test_an_integer_csv_is_read_exactly(tmp_path, capsys):
    """Issue 37: 2**60 + 9 was read as float64 (2**60) and the wrong assignment certified, exit 0."""
    big = 2**60
    path = tmp_path / "m.csv"
    path.write_text(f"{big + 9},{big}\n{big},{big + 9}\n")
    assert read_matrix(str(path)).dtype == np.int64
    assert cli.main(["solve", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["objective"] == 2 * big and info["optimal"]
    path.write_text(f"1.5,{big + 9}\n3,4\n")  # floats beside an integer float64 cannot hold
    fails(capsys, "solve", str(path), match=f"the integer {big + 9} cannot be read exactly")
    path.write_text("1,99999999999999999999999\n3,4\n")  # beyond int64
    fails(capsys, "solve", str(path), match="the integer 99999999999999999999999 cannot be read exactly")
    path.write_text("1.5,1e300\n3,-4\n")
    assert read_matrix(str(path)).dtype == np.float64


@pytest.mark.parametrize("f, match", [("inf", "got inf"), ("-1", "got -1.0"), ("nan", "got nan"), ("0", "got 0.0")])
def test_a_cost_range_that_is_not_positive_and_finite_is_refused(tmp_path, capsys, f, match):
    """Issue 37: --f inf gave a traceback, --f -1 an all-zero matrix with exit 0."""
    fails(capsys, "generate", "--n", "5", "--f", f, "--out", str(tmp_path / "m.npy"),
          match=f"f must be a positive, finite number (costs lie in [0, f * n)); {match}")
    fails(capsys, "solve", "--n", "5", "--f", f, match="f must be a positive, finite number")
    fails(capsys, "solve", "--n", "5", "--family", "geometric", "--f", "2", match="family geometric takes no f")
    fails(capsys, "solve", "--n", "5", "--family", "ties", "--f", "2.5", match="must be a whole number")
    assert list(tmp_path.iterdir()) == []


def test_options_of_a_generated_instance_beside_an_input_file_are_refused(tmp_path, capsys):
    """Issue 37: dlap solve m.npy --n 5000 --family geometric ignored both options."""
    path = tmp_path / "m.npy"
    np.save(path, np.eye(3))
    fails(capsys, "solve", str(path), "--n", "5000", "--family", "geometric",
          match=f"--family, --n describe a generated instance; they do not apply to the input file {path}")
    for flag, value in (("--m", "4"), ("--f", "2"), ("--seed", "1")):
        fails(capsys, "solve", str(path), flag, value, match=f"{flag} describe")
    assert cli.main(["solve", str(path), "--json"]) == 0


def test_generate_never_replaces_a_folder_dlap_did_not_write(tmp_path, capsys):
    """Issue 37: dlap generate --out foo.zarr deleted an existing folder that was not a Zarr store,
    with whatever was in it. Only dlap's own stores are replaced."""
    pytest.importorskip("zarr")
    import zarr

    folder = tmp_path / "foo.zarr"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    fails(capsys, "generate", "--n", "4", "--out", str(folder), match="exists and is not a Zarr store dlap wrote")
    assert (folder / "thesis.tex").read_text() == "precious"
    foreign = tmp_path / "foreign.zarr"
    zarr.create_array(str(foreign), shape=(2, 2), dtype="f8")[...] = 1.0
    fails(capsys, "generate", "--n", "4", "--out", str(foreign), match="not a Zarr store dlap wrote")
    assert zarr.open_array(str(foreign), mode="r")[0, 0] == 1.0
    (tmp_path / "file.zarr").write_text("a file")
    fails(capsys, "generate", "--n", "4", "--out", str(tmp_path / "file.zarr"), match="not a Zarr store dlap wrote")
    mine = tmp_path / "mine.zarr"
    for n in (4, 5):  # dlap's own store is replaced
        assert cli.main(["generate", "--n", str(n), "--out", str(mine)]) == 0
    assert read_matrix(str(mine)).shape == (5, 5)


@pytest.mark.parametrize("out", ["m.npy", "m.zarr"])
def test_what_a_killed_write_leaves_is_removed_by_the_next_write(tmp_path, out):
    """Issue 37: SIGKILL (and SIGTERM) during --out left hidden temporary files and stores. SIGTERM
    now removes them as the command ends; a SIGKILL's are removed by the next write to that path,
    which says where they were."""
    if out.endswith(".zarr"):
        pytest.importorskip("zarr")
    target = tmp_path / out
    for sig in (signal.SIGKILL, signal.SIGTERM):
        child = subprocess.Popen([sys.executable, "-m", "dlap", "generate", "--n", "6000", "--out", str(target)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(f".{out}.*")) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the write has begun
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
        leftovers = list(tmp_path.glob(f".{out}.*"))
        if sig == signal.SIGTERM:
            # -15: the signal came after the command had written the file and given back the signal
            assert child.returncode in (143, 0, -signal.SIGTERM) and not leftovers, (err, leftovers)
            if child.returncode == 143:
                assert err.decode().strip().endswith("dlap: terminated")
            else:
                assert read_matrix(str(target)).shape == (6000, 6000)
        elif child.returncode == -signal.SIGKILL and leftovers:
            done = command("generate", "--n", "5", "--out", str(target), timeout=120)
            assert done.returncode == 0 and not list(tmp_path.glob(f".{out}.*"))
            assert all(f"removed {p}, left by an interrupted write to {target}" in done.stderr for p in leftovers)


#: a process that writes a matrix with --out, np.save behaving as numpy's ndarray.tofile does where
#: the signal's handler raises inside its check of the file (the handler's exception lost, a TypeError)
_SAVE_AS_NUMPY_DID = """
import os, signal, sys, time
import numpy as np
from dlap import cli

def save(file, arr):
    try:
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        time.sleep(30)
    except BaseException:
        os.fspath(file)

np.save = save
sys.exit(cli.main(["generate", "--n", "4", "--out", sys.argv[1]]))
"""


@pytest.mark.parametrize("sig, status, says", [("SIGTERM", 143, "terminated"), ("SIGINT", 130, "interrupted")])
def test_a_signal_that_a_library_turns_into_another_error_ends_the_command_as_the_signal_says(tmp_path, sig, status,
                                                                                               says):
    """numpy's ndarray.tofile asks whether its file is an os.PathLike without checking that the
    question raised, so a SIGTERM whose handler raised there surfaced as "dlap: expected str,
    bytes or os.PathLike object, not BufferedWriter" and exit status 2 (the test above, once in a
    suite's run). A command that got SIGTERM (SIGINT) says it was terminated (interrupted),
    whatever error it ended in, exits 143 (130) and leaves nothing beside its target."""
    done = subprocess.run([sys.executable, "-c", _SAVE_AS_NUMPY_DID, str(tmp_path / "m.npy"), sig],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == status and done.stderr.strip().endswith(f"dlap: {says}"), done.stderr
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_a_solve_on_workers_is_one_line_and_exit_130():
    """Issue 37: Ctrl-C during dlap solve --workers 2 printed 71 lines with four tracebacks (the
    aborted ranks' errors, logged by their workers) and exited 2 with "dlap: dlap: worker ... left
    the cluster". The aborted ranks now end quietly, and the command says it was interrupted."""
    pytest.importorskip("distributed")
    child = subprocess.Popen([sys.executable, "-m", "dlap", "solve", "--family", "machol-wien", "--n", "3000",
                              "--method", "classical", "--workers", "2", "--device", "cpu"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = b""
        while b"dlap distributed solve" not in seen:  # the ranks' progress: the solve is under way
            chunk = os.read(child.stderr.fileno(), 4096)
            assert chunk, seen.decode()
            seen += chunk
        time.sleep(1)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        err = (seen + err).decode()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == 130, err
    assert err.rstrip().endswith("dlap: interrupted") and "Traceback" not in err and "dlap: dlap:" not in err
    assert "Compute Failed" not in err and out == b""
