"""Where Numba keeps the CPU kernels it compiles: in the user's cache folder, not in the package.

With ``cache=True`` Numba writes its cache next to a module's source by default, that is inside
``site-packages/dlap``. Those files are no part of what pip installed, so ``pip uninstall`` (or the
reinstall that ``pip install -e .`` makes after ``pip install .``) leaves them behind in a
``dlap/`` folder without ``__init__.py``, which then shadows the editable install: ``import dlap``
found no ``solve``. Every module with Numba kernels imports this one first. A user's own choice
(``NUMBA_CACHE_DIR``) stands; where the folder cannot be written, Numba falls back to its defaults.
Numba has one cache folder per process, so other ``cache=True`` functions compiled after
``import dlap`` are cached there too (each under a path named after its source file, so nothing
collides); set ``NUMBA_CACHE_DIR`` to keep them elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import numba


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/dlap/numba``, or ``~/.cache/dlap/numba``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dlap" / "numba"


if not numba.config.CACHE_DIR:
    numba.config.CACHE_DIR = str(cache_dir())
