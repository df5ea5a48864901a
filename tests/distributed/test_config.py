"""dlap's Dask settings (dlap/distributed/dlap.yaml): defaults under dask.config's ``dlap``
namespace, overridden as any Dask setting, checked where they are read."""

import os
import subprocess
import sys

import pytest

dask = pytest.importorskip("dask")
pytest.importorskip("distributed")

from dlap.distributed import config  # noqa: E402


def test_the_defaults_are_dask_settings():
    assert dask.config.get("dlap.solve-lease") == "10s"
    assert config.seconds("solve-lease") == 10.0 and config.seconds("abort-grace") == 20.0
    assert config.nbytes("placement.piece-bytes") == 256 * 2**20
    assert config.number("auto.one-rank-memory-share.gpu") == 0.85
    assert config.number("auto.split-min-entries") == 80000 * 80000


def test_an_override_is_read_when_needed_and_checked():
    with dask.config.set({"dlap.solve-lease": "2 minutes", "dlap.placement.buffer-bytes": "64 kiB"}):
        assert config.seconds("solve-lease") == 120.0
        assert config.nbytes("placement.buffer-bytes") == 65536
    for key, value, read in (("solve-lease", "0s", config.seconds), ("placement.piece-bytes", "-1 B", config.nbytes),
                             ("auto.split-min-entries", "many", config.number)):
        with dask.config.set({f"dlap.{key}": value}), pytest.raises(ValueError, match=f"dlap.{key}"):
            read(key)


def test_an_environment_variable_sets_one():
    """Dask's own convention: DASK_DLAP__... in the environment (read when dask is imported)."""
    code = "from dlap.distributed import config; print(config.seconds('solve-lease'), config.nbytes('placement.piece-bytes'))"
    kept = {key: os.environ[key] for key in ("PATH", "PYTHONPATH") if key in os.environ}  # (where dask is)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**kept, "DASK_DLAP__SOLVE_LEASE": "30s", "DASK_DLAP__PLACEMENT__PIECE_BYTES": "1 MiB"})
    assert run.stdout.split() == ["30.0", "1048576"]
