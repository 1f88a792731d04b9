"""The plain values an experiment is recorded with, checked: tag and benchmark, status and
error, the config (as canonical JSON and its hash), timings and library versions.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import platform
import sqlite3
from collections.abc import Mapping
from typing import Any

from metricalc.errors import InvalidInputError
from metricalc.store import codec
from metricalc.validation import is_real
from metricalc.version import __version__

__all__ = [
    "STATUSES",
    "check_status",
    "check_text",
    "check_timings",
    "check_versions",
    "config_json",
    "library_versions",
]

STATUSES = ("ok", "error", "mismatch")
"""Experiment and descriptor statuses: ``ok``; ``error`` (the run or descriptor failed, the
message in ``error``); ``mismatch`` (an imported row whose own summary disagrees with its
per-scene values, the differences in ``error``)."""

_LIBRARIES = (
    "numpy",
    "scipy",
    "pandas",
    "xarray",
    "scikit-learn",
    "opencv-python-headless",
    "opencv-contrib-python-headless",
    "scikit-image",
    "h5py",
    "h5netcdf",
    "dask",
)


def check_text(name: str, value: Any, *, empty: bool = False) -> str:
    """``value`` if it is a string (non-empty unless ``empty``), else an InvalidInputError."""
    if not isinstance(value, str) or (not empty and not value.strip()):
        what = "a string" if empty else "a non-empty string"
        raise InvalidInputError(f"{name} must be {what}; got {value!r}")
    return value


def check_status(status: Any, error: Any, where: str) -> tuple[str, str]:
    """A status of :data:`STATUSES` with its error message (empty exactly for ``ok``);
    ``where`` prefixes the messages."""
    if status not in STATUSES:
        raise InvalidInputError(f"{where}status must be one of {list(STATUSES)}; got {status!r}")
    error = check_text(f"{where}error", error, empty=True)
    if status != "ok" and not error.strip():
        raise InvalidInputError(
            f"{where}status {status!r} needs an error message saying what went wrong"
        )
    if status == "ok" and error:
        raise InvalidInputError(
            f"{where}error is {error!r} but status is 'ok'; give status='error' for a failure"
        )
    return status, error


def config_json(config: Any) -> tuple[str, str]:
    """Canonical JSON text of a config and its SHA-256."""
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        config = OmegaConf.to_container(config, resolve=True)
    elif isinstance(config, str):
        import yaml

        try:
            parsed = yaml.safe_load(config)
        except yaml.YAMLError as error:
            raise InvalidInputError(f"config is a string but not valid YAML: {error}") from error
        if not isinstance(parsed, Mapping):
            raise InvalidInputError(
                f"config text must hold a mapping (YAML or JSON object); got "
                f"{type(parsed).__name__}"
            )
        config = parsed
    if not isinstance(config, Mapping):
        raise InvalidInputError(
            f"config must be a mapping, an OmegaConf config or YAML text; got "
            f"{type(config).__name__}"
        )
    text = codec.dumps(config, "config")
    return text, codec.sha256(text)


def check_timings(timings: Any) -> dict[str, float]:
    """Seconds per step as floats (None: none), each a finite number >= 0."""
    if timings is None:
        return {}
    if not isinstance(timings, Mapping):
        raise InvalidInputError(
            f"timings must be a mapping of step name to seconds; got {type(timings).__name__}"
        )
    out = {}
    for key, value in timings.items():
        check_text("timings key", key)
        if not is_real(value):
            raise InvalidInputError(f"timings[{key!r}] must be a number of seconds; got {value!r}")
        if not math.isfinite(float(value)) or float(value) < 0:
            raise InvalidInputError(
                f"timings[{key!r}] must be a finite number of seconds >= 0; got {value!r}"
            )
        out[key] = float(value)
    return out


def library_versions() -> dict[str, str]:
    """Versions of metricalc, Python, SQLite and the installed libraries metricalc uses.

    Looked up once per process (reading package metadata takes milliseconds per package).

    Examples
    --------
    >>> from metricalc.store import library_versions
    >>> sorted(library_versions())[:3]
    ['dask', 'h5netcdf', 'h5py']
    """
    return dict(_detected_versions())


@functools.cache
def _detected_versions() -> tuple[tuple[str, str], ...]:
    out = {
        "metricalc": __version__,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    for name in _LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(out.items())


def check_versions(versions: Any) -> dict[str, str]:
    """:func:`library_versions` with ``versions`` (name -> version string) on top."""
    out = library_versions()
    if versions is None:
        return out
    if not isinstance(versions, Mapping):
        raise InvalidInputError(
            f"versions must be a mapping of name to version string; got {type(versions).__name__}"
        )
    for key, value in versions.items():
        check_text("versions key", key)
        out[key] = check_text(f"versions[{key!r}]", value)
    return out
