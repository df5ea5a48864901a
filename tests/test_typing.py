"""The public API's types, checked by mypy: exact return types, and the option values a type
checker refuses (tests/data/typing_public_api.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

CHECKED = Path(__file__).parent / "data" / "typing_public_api.py"


def test_mypy_reads_the_public_api_as_documented(tmp_path):
    root = Path(__file__).parent.parent
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path), str(CHECKED)],
        capture_output=True, text=True, env={**os.environ, "MYPYPATH": str(root)}, cwd=tmp_path,
    )
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    refused = [n for n, line in enumerate(CHECKED.read_text().splitlines(), 1) if line.endswith("# refused")]
    assert sorted({int(line.split(":")[1]) for line in errors}) == refused, run.stdout + run.stderr
