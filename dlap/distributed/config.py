"""dlap's Dask settings (``dlap.yaml``, dask.config's ``dlap`` namespace): their defaults are
loaded into dask.config when this module is imported, and read at the moment they are needed,
so ``dask.config.set`` (or a YAML file, or a ``DASK_DLAP__...`` variable) changes the next solve."""

from __future__ import annotations

from importlib import resources

import dask
import yaml
from dask.utils import parse_bytes, parse_timedelta

with resources.files("dlap.distributed").joinpath("dlap.yaml").open() as _defaults:
    dask.config.update_defaults(yaml.safe_load(_defaults))


def _get(key: str):
    return dask.config.get(f"dlap.{key}")


def seconds(key: str) -> float:
    """A duration setting in seconds (``"10s"``, ``"2 minutes"`` or a number); ValueError unless positive."""
    value = parse_timedelta(_get(key), default="seconds")
    if not value > 0:
        raise ValueError(f"dask.config dlap.{key} must be a positive duration; got {_get(key)!r}")
    return float(value)


def nbytes(key: str) -> int:
    """A size setting in bytes (``"256 MiB"`` or a number); ValueError unless positive."""
    raw = _get(key)
    value = parse_bytes(raw) if isinstance(raw, str) else int(raw)
    if not value > 0:
        raise ValueError(f"dask.config dlap.{key} must be a positive size; got {raw!r}")
    return value


def number(key: str) -> float:
    """A numeric setting; ValueError unless it is a positive number."""
    raw = _get(key)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not raw > 0:
        raise ValueError(f"dask.config dlap.{key} must be a positive number; got {raw!r}")
    return raw
