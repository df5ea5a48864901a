"""The documentation builds without a warning, and every Python example in it and in the README runs.

A ```python block is a whole program, run in a fresh interpreter in an empty folder; a block whose
first line is ``# needs a GPU`` runs only where CuPy sees one.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlap.device import gpu_available

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
NEEDS_GPU = "# needs a GPU"


def _examples():
    for page in PAGES:
        for number, match in enumerate(BLOCK.finditer(page.read_text()), 1):
            code = match.group(1)
            marks = [pytest.mark.gpu] if code.startswith(NEEDS_GPU) else []
            yield pytest.param(code, id=f"{page.relative_to(ROOT)}#{number}", marks=marks)


EXAMPLES = list(_examples())


def test_every_page_has_its_examples_collected():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code, tmp_path):
    if code.startswith(NEEDS_GPU) and not gpu_available():
        pytest.skip("the example needs a GPU")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.slow
def test_the_documentation_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("myst_parser")
    pytest.importorskip("pydata_sphinx_theme")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, build.stderr[-5000:]
    assert (tmp_path / "html" / "api.html").read_text().count('class="sig-name descname"') >= 30
