"""What a benchmark provides to a run, what a run gives it, and the value checks of configs.

A benchmark (``metricalc/benchmarks/hpatches_sequences/experiment.py``, ...) has a name, default
configuration
(``data``, ``model``, ``eval``), a check of a merged configuration, an ``export`` step that
writes the run's ``predictions.h5`` (resuming an interrupted export) and an ``evaluate`` step
that reads only the cached predictions and returns an :class:`Evaluation`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import xarray as xr
from matplotlib.axes import Axes

from metricalc.datasets.sequences import DEFAULT_SIZE
from metricalc.experiment.config import Config
from metricalc.experiment.rundir import RunDir
from metricalc.experiment.scheduler import Scheduler
from metricalc.validation import is_integer
from metricalc.version import __version__

__all__ = [
    "DATASET_DEFAULTS",
    "Benchmark",
    "Context",
    "Evaluation",
    "Values",
    "check_dataset_keys",
    "data_defaults",
    "scalar_summary",
]

DATASET_DEFAULTS: dict[str, Any] = {"quick": False, "scenes": None, "seed": 0, "size": DEFAULT_SIZE}
"""The defaults of the data keys every benchmark has (:func:`check_dataset_keys`): all scenes
of the synthetic dataset of seed 0 and the default image size."""


def data_defaults(folder: str, **own: Any) -> dict[str, Any]:
    """The defaults of a benchmark's ``data`` section: its data folder key ``folder`` (null:
    the synthetic data), the keys every benchmark has (:data:`DATASET_DEFAULTS`), then its own.

    Examples
    --------
    >>> data_defaults("root", border=40.0)["root"], data_defaults("root", border=40.0)["border"]
    (None, 40.0)
    """
    return {folder: None, **DATASET_DEFAULTS, **own}


@dataclass
class Context:
    """Everything a benchmark step needs: the run folder, the configuration and the scheduler."""

    rundir: RunDir
    conf: dict[str, Any]
    tag: str
    benchmark: str
    scheduler: Scheduler
    export_hash: str
    progress: bool = False

    @property
    def outputs(self) -> Path:
        """The outputs root (``<outputs>/results/...``, ``<outputs>/data/...``)."""
        return self.rundir.outputs

    def export_attrs(self, **own: Any) -> dict[str, Any]:
        """The attrs of the run's ``predictions.h5``: benchmark, tag, export hash, metricalc
        version, then the benchmark's own."""
        return {
            "benchmark": self.benchmark,
            "tag": self.tag,
            "export_hash": self.export_hash,
            "metricalc_version": __version__,
            **own,
        }


@dataclass
class Evaluation:
    """What an evaluation computed.

    Attributes
    ----------
    cube : xarray.Dataset
        The QueryCube (per-query results), one descriptor named after the tag.
    pairs : xarray.Dataset
        Per-unit metrics, written to the group ``units_group`` of ``results.h5``: per image
        pair over the dim ``image_pair`` (``hpatches``), per benchmark file over the dim
        ``file`` (``patches``).
    summaries : dict
        Aggregates, name -> value (JSON-safe after :func:`metricalc.fileio.json_safe`).
    metrics, scenes : xarray.Dataset
        The metric set and per-scene metrics of the cube.
    figures : dict
        File stem -> Axes, saved under ``plots/``.
    """

    cube: xr.Dataset
    pairs: xr.Dataset
    summaries: dict[str, Any]
    metrics: xr.Dataset
    scenes: xr.Dataset
    figures: dict[str, Axes] = field(default_factory=dict)


class Benchmark(Protocol):
    """The interface of a benchmark (module docstring)."""

    name: str
    default_conf: Mapping[str, Any]
    units_group: str  # the results.h5 group of Evaluation.pairs ("pairs", "files")

    def validate(self, conf: Config) -> None: ...

    def export(self, ctx: Context) -> None: ...

    def evaluate(self, ctx: Context) -> Evaluation: ...

    def metrics(self, cube: xr.Dataset, conf: Mapping[str, Any]) -> tuple[xr.Dataset, xr.Dataset]:
        """Metric set and per-scene metrics of a cached cube."""
        ...


class Values:
    """Checks of merged config values; each failure names the key, value and origin."""

    def __init__(self, conf: Config) -> None:
        self.conf = conf

    def get(self, key: str) -> Any:
        return self.conf.get(key)

    def boolean(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            raise self.conf.fail(key, "true or false")
        return value

    def number(
        self, key: str, *, low: float | None = None, high: float | None = None, strict: bool = False
    ) -> float:
        value = self.get(key)
        ok = (
            not isinstance(value, bool)
            and isinstance(value, int | float)
            and math.isfinite(value)
            and (low is None or (value > low if strict else value >= low))
            and (high is None or value <= high)
        )
        if not ok:
            bounds = []
            if low is not None:
                bounds.append(f"{'>' if strict else '>='} {low:g}")
            if high is not None:
                bounds.append(f"<= {high:g}")
            shown = f" {' and '.join(bounds)}" if bounds else ""
            raise self.conf.fail(key, f"a finite number{shown}")
        return float(value)

    def integer(self, key: str, *, low: int = 0, optional: bool = False) -> int | None:
        value = self.get(key)
        if value is None and optional:
            return None
        if not is_integer(value) or value < low:
            raise self.conf.fail(key, f"an integer >= {low}" + (" or null" if optional else ""))
        return int(value)

    def choice(self, key: str, choices: Any, *, optional: bool = False) -> Any:
        value = self.get(key)
        if value is None and optional:
            return None
        if value not in list(choices):
            shown = ", ".join(map(str, choices)) + (" or null" if optional else "")
            raise self.conf.fail(key, f"one of {shown}")
        return value

    def text(self, key: str, *, optional: bool = False) -> str | None:
        value = self.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            raise self.conf.fail(key, "a non-empty string" + (" or null" if optional else ""))
        return value

    def texts(self, key: str, *, optional: bool = False) -> list[str] | None:
        value = self.get(key)
        if value is None and optional:
            return None
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and v for v in value)
        ):
            raise self.conf.fail(
                key, "a non-empty list of strings" + (" or null" if optional else "")
            )
        return value

    def integers(self, key: str, *, low: int = 1) -> list[int]:
        value = self.get(key)
        values = [value] if is_integer(value) else value
        if (
            not isinstance(values, list)
            or not values
            or not all(is_integer(v) and v >= low for v in values)
        ):
            raise self.conf.fail(key, f"an integer >= {low} or a non-empty list of them")
        return values


def check_dataset_keys(values: Values, folder: str) -> None:
    """Check the data keys of every benchmark: the data folder key ``folder`` (null for the
    synthetic data), ``data.quick``, ``data.scenes``, ``data.seed`` and ``data.size``."""
    values.text(folder, optional=True)
    values.boolean("data.quick")
    values.texts("data.scenes", optional=True)
    values.integer("data.seed", low=0)
    values.integer("data.size", low=32)


def scalar_summary(metrics: xr.Dataset, descriptor: str) -> dict[str, Any]:
    """The scalar numeric variables of a metric set for one descriptor, name -> value.

    Examples
    --------
    >>> ds = xr.Dataset({"m": ("descriptor", [0.5]), "s": ("descriptor", ["ok"])},
    ...                 coords={"descriptor": ["sift"]})
    >>> scalar_summary(ds, "sift")
    {'m': 0.5}
    """
    row = metrics.sel(descriptor=descriptor)
    return {
        str(name): row[name].values[()].item()
        for name, variable in row.data_vars.items()
        if variable.ndim == 0 and variable.dtype.kind in "iuf"
    }
