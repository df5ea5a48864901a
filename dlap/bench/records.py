"""The JSON lines a suite appends to ``--json``: one writer for all, and the machine a run was
measured on."""

from __future__ import annotations

import json
import os
import platform


class Records:
    """Appends each record to ``out`` (a path; None: nowhere) as one JSON line, flushed at once,
    so that a run stopped midway keeps what it measured. A context manager."""

    def __init__(self, out: str | None):
        self._file = open(out, "a") if out else None

    def write(self, record: dict) -> None:
        if self._file:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc) -> None:
        if self._file:
            self._file.close()


def append(out: str | None, records: list[dict]) -> None:
    """Append ``records`` to ``out`` at once (a suite that has them all only at its end)."""
    with Records(out) as sink:
        for record in records:
            sink.write(record)


def machine() -> dict:
    """The host, the cores this process may run on, and the Python version."""
    return {"host": platform.node(), "cores": len(os.sched_getaffinity(0)), "python": platform.python_version()}
