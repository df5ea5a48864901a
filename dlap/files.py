"""Files of the ``dlap`` command: cost matrices in, solutions and reports out.

A file the command writes is checked before any work starts (its format, from the extension, and
its folder), so a solve is never lost to a typo in ``--out``. It is written whole or not at all:
into a temporary file beside it, then moved into place; a failure removes the temporary file. It
gets the permissions of any file the user creates (``0666`` less the umask).

Errors are ``FileError`` (a ``ValueError``): the command prints them on one line and exits 2.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import re
import secrets
import shutil
import signal
import threading
import warnings
from pathlib import Path

import numpy as np

_log = logging.getLogger(__name__)

MATRIX_FORMATS = (".npy", ".csv", ".zarr")
#: a solution: .npz (row_ind, col_ind, row_duals, col_duals), .csv (row,col lines), .json (all
#: of it and the objective)
SOLUTION_FORMATS = (".npz", ".csv", ".json")
#: the attribute of a Zarr store dlap writes: false until its last chunk is written (stores from
#: elsewhere have none and are read as they are)
COMPLETE = "dlap_complete"


class FileError(ValueError):
    """A file the command cannot read or write, named with the reason."""


def _zarr():
    try:
        import zarr
    except ImportError:
        raise FileError("Zarr stores need zarr: pip install 'dlap[distributed]'") from None
    return zarr


def read_matrix(path: str) -> np.ndarray:
    """A cost matrix from ``.npy``, ``.csv`` or a Zarr store (a folder)."""
    p = Path(path)
    if not p.exists():
        raise FileError(f"no such file: {path}")
    if p.is_dir() or p.suffix == ".zarr":
        try:
            matrix = np.asarray(open_store(str(p))[...])
        except FileError:
            raise
        except Exception as e:  # zarr's errors for a folder that holds no array
            raise FileError(f"{path}: not a Zarr array ({e})") from None
        _check_numbers(path, matrix)
        return matrix
    if p.suffix not in (".npy", ".csv"):
        raise FileError(f"{path}: unknown matrix format {p.suffix!r} (use {', '.join(MATRIX_FORMATS)})")
    if p.stat().st_size == 0:
        raise FileError(f"{path}: the file is empty")
    try:
        if p.suffix == ".npy":
            return _read_npy(p)
        return _read_csv(p)
    except (ValueError, EOFError, OSError, UserWarning) as e:
        if isinstance(e, FileError):
            raise
        raise FileError(f"{path}: not a {p.suffix} matrix ({' '.join(str(e).split())})") from None


def _read_npy(p: Path) -> np.ndarray:
    """A ``.npy`` matrix of numbers, memory-mapped (issue 37: a text file named .npy got numpy's
    advice about pickles, an array of strings an error that named no file)."""
    with open(p, "rb") as f:
        if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise FileError(f"{p}: not a .npy file (no NumPy header; a text matrix is read from .csv)")
    matrix = np.load(p, mmap_mode="r", allow_pickle=False)
    _check_numbers(p, matrix)
    return matrix


_NPY_MAGIC = b"\x93NUMPY"


def _check_numbers(path, matrix) -> None:
    """A matrix file of anything but numbers is refused by name (scipy's TypeError otherwise)."""
    if matrix.dtype.kind not in "biuf" or matrix.dtype.itemsize > 8:
        raise FileError(f"{path}: holds {matrix.dtype} entries, not real numbers")


#: integers beyond this magnitude are not all float64 numbers
_FLOAT_EXACT = 2**53
_INTEGER_TOKEN = re.compile(r"^\s*[+-]?\d+\s*$")


def _read_csv(p: Path) -> np.ndarray:
    """A CSV matrix: int64 where every entry is an integer within int64 (issue 37: integers were
    read as float64, and 2**60 + 9 rounded to 2**60), float64 otherwise; refused where an entry
    written as an integer cannot be read either way (beyond int64 in a matrix of integers, or
    beyond 2**53 beside entries that are not integers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and returns an empty array, on a file of no rows
        try:
            return np.loadtxt(p, delimiter=",", ndmin=2, dtype=np.int64)
        except (ValueError, OverflowError):
            matrix = np.loadtxt(p, delimiter=",", ndmin=2)
    if np.any((abs(matrix) >= _FLOAT_EXACT) & np.isfinite(matrix)):
        tokens = (t for line in p.read_text().splitlines() for t in line.split(","))
        inexact = next((t.strip() for t in tokens if _INTEGER_TOKEN.match(t) and abs(int(t)) > _FLOAT_EXACT), None)
        if inexact is not None:
            raise FileError(
                f"{p}: the integer {inexact} cannot be read exactly: integer matrices are read as int64, and this "
                "one has entries beyond int64 or entries that are not integers, which make it float64, exact "
                "for integers up to 2**53 only")
    return matrix


def check_writable(path: str, formats: tuple[str, ...], what: str) -> Path:
    """Refuse, before any work, an output path whose format is not one of ``formats`` or whose
    folder is missing or not writable, or that names a folder (a Zarr store excepted)."""
    p = Path(path)
    if p.suffix not in formats:
        raise FileError(f"{what} {path}: unknown format {p.suffix or '(no extension)'!r} (use {', '.join(formats)})")
    folder = p.parent
    if not folder.is_dir():
        raise FileError(f"{what} {path}: no such folder {str(folder)!r}")
    if p.is_dir() and p.suffix != ".zarr":
        raise FileError(f"{what} {path}: is a folder")
    if p.suffix == ".zarr" and (p.exists() or p.is_symlink()) and not _written_by_dlap(p):
        raise FileError(f"{what} {path}: exists and is not a Zarr store dlap wrote; dlap replaces only its own "
                        "stores: remove it or choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileError(f"{what} {path}: the folder {str(folder)!r} is not writable")
    return p


def _written_by_dlap(p: Path) -> bool:
    """Whether ``p`` is a Zarr store dlap wrote (complete or not: it carries :data:`COMPLETE`)."""
    if not p.is_dir() or p.is_symlink():
        return False
    try:
        return COMPLETE in _zarr().open_array(str(p), mode="r").attrs
    except Exception:  # not a Zarr array at all
        return False


def _temporary(target: Path, kind: str) -> Path:
    """The hidden name a write to ``target`` works under: this process's id in it, so that the
    next write to ``target`` can tell a leftover of a killed one (:func:`remove_leftovers`)."""
    return target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.{kind}")


def remove_leftovers(target: Path) -> None:
    """Remove what writes to ``target`` by processes no longer alive left beside it (a SIGKILL
    during ``--out``), saying so in the ``dlap`` log."""
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*-*.*"):
        pid, _, rest = leftover.name[len(target.name) + 2:].partition("-")
        if not pid.isdigit() or rest.rpartition(".")[2] not in ("tmp", "old") or _alive(int(pid)):
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
        _log.warning("removed %s, left by an interrupted write to %s", leftover, target)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_file(path: str, write) -> None:
    """Call ``write(file)`` on a binary file beside ``path``, then move it to ``path``."""
    target = Path(path)
    remove_leftovers(target)
    tmp = _temporary(target, "tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any new file
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_matrix(path: str, matrix: np.ndarray) -> None:
    """``matrix`` to ``.npy``, ``.csv`` or a Zarr store (checked with :func:`check_writable` first)."""
    p = Path(path)
    if p.suffix == ".npy":
        write_file(path, lambda f: np.save(f, matrix))
    elif p.suffix == ".csv":
        fmt = "%d" if matrix.dtype.kind in "iub" else "%.17g"
        write_file(path, lambda f: np.savetxt(f, matrix, delimiter=",", fmt=fmt))
    else:
        write_store(path, matrix)


def write_store(path: str, matrix: np.ndarray) -> None:
    """``matrix`` as a Zarr store at ``path``, whole or not at all: written into a temporary store
    beside it and marked complete (:data:`COMPLETE`) once every chunk is there, then moved into
    place; an old store at ``path`` is removed only after that (an interrupted write used to leave
    the old store destroyed and a readable, zero-filled one in its place)."""
    zarr = _zarr()
    target = Path(path)
    if (target.exists() or target.is_symlink()) and not _written_by_dlap(target):  # (check_writable said so first)
        raise FileError(f"{path}: exists and is not a Zarr store dlap wrote")
    remove_leftovers(target)
    tmp, old = _temporary(target, "tmp"), _temporary(target, "old")
    try:
        chunk = (max(1, min(matrix.shape[0], 4096)), max(1, min(matrix.shape[1], 4096)))
        with _signals_between_calls():
            z = zarr.create_array(str(tmp), shape=matrix.shape, chunks=chunk, dtype=matrix.dtype,
                                  attributes={COMPLETE: False})  # marked from its first byte
        for a in range(0, matrix.shape[0], chunk[0]):  # a band of chunks at a time
            with _signals_between_calls():
                z[a : a + chunk[0]] = matrix[a : a + chunk[0]]
        with _signals_between_calls():
            z.attrs[COMPLETE] = True
        if target.exists():
            os.replace(target, old)
        try:
            os.replace(tmp, target)
        except BaseException:
            if old.exists():
                os.replace(old, target)
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _signals_between_calls():
    """SIGINT and SIGTERM that arrive during the body are raised after it: Zarr writes through an
    event loop in its own thread, and an exception raised into the wait for it leaves that loop
    running at exit ("Cannot close a running event loop"). In the main thread only (where signal
    handlers run); elsewhere the body runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived = []
    previous = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in arrived:
            signal.raise_signal(sig)


def open_store(path: str):
    """The Zarr array at ``path`` (read only), refusing a store dlap began and never finished."""
    array = _zarr().open_array(str(path), mode="r")
    if array.attrs.get(COMPLETE) is False:
        raise FileError(f"{path}: an incomplete Zarr store (writing it was interrupted); write it again")
    return array


def write_solution(path: str, result) -> None:
    """An :class:`~dlap.Assignment`'s rows, columns and duals in the format of ``path``'s
    extension (:data:`SOLUTION_FORMATS`)."""
    arrays = {name: np.asarray(getattr(result, name)) for name in ("row_ind", "col_ind", "row_duals", "col_duals")}
    suffix = Path(path).suffix
    if suffix == ".npz":
        write_file(path, lambda f: np.savez(f, **arrays))
    elif suffix == ".csv":
        pairs = np.column_stack([arrays["row_ind"], arrays["col_ind"]])
        write_file(path, lambda f: np.savetxt(f, pairs, fmt="%d", delimiter=",", header="row,col", comments=""))
    else:
        document = {"objective": result.objective, **{k: v.tolist() for k, v in arrays.items()}}
        write_file(path, lambda f: f.write(json.dumps(document).encode()))
