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


def test_numba_caches_outside_the_installed_package(tmp_path):
    """The compiled CPU kernels are cached in the user's cache folder: files left inside the
    package survived `pip uninstall` and shadowed a later editable install (`import dlap` had no
    `solve` after the README's two commands ran in one venv)."""
    from pathlib import Path

    import dlap

    package = Path(dlap.__file__).parent
    code = (
        "import numba, dlap, numpy as np; dlap.solve(np.arange(16.0).reshape(4, 4), device='cpu');"
        "print(numba.config.CACHE_DIR)"
    )
    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == str(tmp_path / "dlap" / "numba")
    assert list((tmp_path / "dlap" / "numba").rglob("*.nbi")), "no kernel was cached there"
    assert not Path(out.stdout.strip()).is_relative_to(package)


def test_the_dask_engine_without_dask_says_what_to_install():
    code = "import sys; sys.modules['distributed'] = None; import dlap.distributed"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0 and "pip install 'dlap[distributed]'" in out.stderr


def test_a_cluster_without_its_extra_says_what_to_install():
    """GPU workers without dask-cuda, UCX without distributed-ucxx: the extra to install, not a
    bare ModuleNotFoundError (checked in a process where those modules cannot be found)."""
    code = (
        "import sys; sys.modules['dask_cuda'] = None; sys.modules['distributed_ucxx'] = None\n"
        "import importlib.util as u; find = u.find_spec\n"
        "u.find_spec = lambda name, *a: None if name in ('dask_cuda', 'distributed_ucxx') else find(name, *a)\n"
        "from dlap.distributed.cluster import start_cluster\n"
        "for kw in ({'gpu': True}, {'gpu': False, 'protocol': 'ucx'}):\n"
        "    try:\n"
        "        start_cluster(1, **kw)\n"
        "    except ImportError as e:\n"
        "        print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "pip install 'dlap[cuda]'" in out.stdout and "pip install 'dlap[ucx]'" in out.stdout, out.stderr
