"""`import dlap` stays light: NumPy only; Numba, CuPy, Dask and SciPy load when needed."""

import subprocess
import sys


def test_import_dlap_imports_no_heavy_dependency():
    code = (
        "import sys, dlap; heavy = [m for m in ('numba', 'cupy', 'dask', 'distributed', 'scipy', 'zarr')"
        " if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
