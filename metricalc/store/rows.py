"""The rows an experiment is written as: one ``experiments`` row (:class:`ExperimentRow`), and
per descriptor of a metric set one ``results`` row with its ``scenes`` rows (:class:`ResultRow`),
built from the metric-set and scene-metrics Datasets and checked. Nothing here touches the
database: :mod:`metricalc.store.records` writes the rows, :mod:`metricalc.store.workbench`
builds them from a DescriptorWorkbench export.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.store import codec
from metricalc.store.inputs import (
    check_status,
    check_text,
    check_timings,
    check_versions,
    config_json,
)
from metricalc.store.metadata import SCENE_KEYS, format_metadata, metadata_for
from metricalc.store.schema import RESULT_COLUMNS, SCENE_COLUMNS

__all__ = [
    "COLUMN_SOURCES",
    "ExperimentRow",
    "ResultRow",
    "SceneRow",
    "experiment_row",
    "result_rows",
]

COLUMN_SOURCES: dict[str, str] = {
    "true_map_micro": "true_map_micro",
    "true_map_macro": "true_map_macro_by_scene",
    "viewpoint_map": "viewpoint_map",
    "illumination_map": "illumination_map",
    "keypoint_verification_ap": "keypoint_verification_ap",
    "keypoint_retrieval_ap": "keypoint_retrieval_ap",
    "hit_rate_at_1": "hit_rate_at_1",
    "hit_rate_at_5": "hit_rate_at_5",
    "mean_average_precision": "true_map_macro_by_scene",
    "processing_time_ms": "processing_time_ms",
}
"""The metric-set variable (:func:`metricalc.metric_set`) each seed column of ``results`` is
filled from. ``mean_average_precision`` is DescriptorWorkbench's legacy column; in the real
DescriptorWorkbench export it equals ``true_map_macro`` on every row, so it is filled with the
same value."""

_NO_MESSAGE = "(no error message was recorded)"
_EXTRA_RESERVED = frozenset((*RESULT_COLUMNS, "benchmark", "tag"))
_SOURCES = frozenset(COLUMN_SOURCES.values())

SceneRow = tuple[Any, ...]
"""One ``scenes`` row: the values of :data:`~metricalc.store.schema.SCENE_COLUMNS`, in order."""


@dataclass(frozen=True)
class ResultRow:
    """One ``results`` row and its ``scenes`` rows, ready to insert."""

    descriptor: str
    status: str = "ok"
    error: str = ""
    columns: dict[str, float | None] = field(default_factory=dict)
    metadata: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    scenes: list[SceneRow] = field(default_factory=list)


@dataclass(frozen=True)
class ExperimentRow:
    """One ``experiments`` row, validated, ready to upsert."""

    benchmark: str
    tag: str
    status: str
    error: str
    config: str
    config_hash: str
    versions: dict[str, str]
    timings: dict[str, float]
    protocol: dict[str, Any]


def experiment_row(
    *,
    tag: Any,
    benchmark: Any,
    config: Any,
    status: Any,
    error: Any,
    timings: Any,
    versions: Any,
    protocol: Mapping[str, Any],
) -> ExperimentRow:
    """The checked ``experiments`` row of the arguments of
    :func:`~metricalc.store.record_experiment` (the protocol: the metric set's attrs)."""
    status, error = check_status(status, error, "")
    text, digest = config_json(config)
    return ExperimentRow(
        benchmark=check_text("benchmark", benchmark),
        tag=check_text("tag", tag),
        status=status,
        error=error,
        config=text,
        config_hash=digest,
        versions=check_versions(versions),
        timings=check_timings(timings),
        protocol=codec.plain(dict(protocol), "protocol"),
    )


def _number(value: Any) -> float | int | None:
    """A Python number for the database; NaN and infinities (undefined) are NULL."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def label_text(value: Any) -> str:
    """A label or status as text (netCDF may give bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _labels(data: xr.Dataset, dim: str, what: str) -> list[str]:
    labels = [label_text(v) for v in data[dim].values.tolist()]
    if any(not label for label in labels) or len(set(labels)) != len(labels):
        raise InvalidInputError(
            f"{what}: the {dim!r} labels must be unique non-empty strings; got {labels}"
        )
    return labels


def _check_dataset(data: Any, what: str, dims: tuple[str, ...], producer: str) -> xr.Dataset:
    if not isinstance(data, xr.Dataset):
        raise InvalidInputError(
            f"{what} must be an xarray.Dataset (from {producer}); got {type(data).__name__}"
        )
    missing = [d for d in dims if d not in data.dims]
    if missing:
        raise InvalidInputError(
            f"{what} has dims {tuple(data.dims)}; expected {dims} (the output of {producer})"
        )
    return data.compute()


def _metric_values(metrics: xr.Dataset, descriptors: list[str]) -> _MetricValues:
    """Per descriptor: the seed columns, the extra metrics, and (status, error)."""
    values = _MetricValues(
        columns={d: {} for d in descriptors},
        extra={d: {} for d in descriptors},
        status={d: ("ok", "") for d in descriptors},
    )
    for key, variable in metrics.data_vars.items():
        name = str(key)
        numbers = _numeric_variable(name, variable)
        if numbers is None:
            continue
        if numbers.ndim == 1 and name in _SOURCES:
            values.add_columns(name, numbers, descriptors)
        elif numbers.ndim == 1:
            values.add_extra(name, numbers, descriptors)
        else:
            values.add_flattened(name, numbers, descriptors)
    if "status" in metrics.data_vars:
        values.status.update(_statuses(metrics, descriptors))
    return values


@dataclass(frozen=True)
class _MetricValues:
    """The values of a metric set by descriptor: seed columns, extra metrics, status."""

    columns: dict[str, dict[str, float | None]]
    extra: dict[str, dict[str, Any]]
    status: dict[str, tuple[str, str]]

    def add_columns(self, name: str, variable: xr.DataArray, descriptors: list[str]) -> None:
        """A metric-set variable filling the seed columns of :data:`COLUMN_SOURCES`."""
        for d, value in zip(descriptors, variable.values, strict=True):
            for column, source in COLUMN_SOURCES.items():
                if source == name:
                    self.columns[d][column] = _number(value)

    def add_extra(self, name: str, variable: xr.DataArray, descriptors: list[str]) -> None:
        """A variable over ``descriptor`` kept among the extra metrics."""
        if name in _EXTRA_RESERVED:
            raise InvalidInputError(
                f"metrics variable {name!r} has the name of a results column; rename it"
            )
        for d, value in zip(descriptors, variable.values, strict=True):
            self.extra[d][name] = _number(value)

    def add_flattened(self, name: str, variable: xr.DataArray, descriptors: list[str]) -> None:
        """A variable over ``(descriptor, dim)`` as extra metrics ``name[dim=label]``."""
        dim = str(variable.dims[1])
        labels = (
            [label_text(v) for v in variable[dim].values.tolist()]
            if dim in variable.coords
            else [str(i) for i in range(variable.shape[1])]
        )
        for d, row in zip(descriptors, variable.values, strict=True):
            for label, value in zip(labels, row, strict=True):
                self.extra[d][f"{name}[{dim}={label}]"] = _number(value)


def _numeric_variable(name: str, variable: xr.DataArray) -> xr.DataArray | None:
    """A metric-set variable with ``descriptor`` first, checked (None for status and error)."""
    if "descriptor" not in variable.dims or variable.ndim > 2:
        raise InvalidInputError(
            f"metrics variable {name!r} has dims {variable.dims}; expected ('descriptor',) "
            "or ('descriptor', <one more dim>)"
        )
    variable = variable.transpose("descriptor", ...)
    if name in ("status", "error"):
        return None
    if variable.dtype.kind not in "biuf":
        raise InvalidInputError(
            f"metrics variable {name!r} has dtype {variable.dtype}; expected numbers (only "
            "'status' and 'error' may be strings)"
        )
    return variable


def _statuses(metrics: xr.Dataset, descriptors: list[str]) -> dict[str, tuple[str, str]]:
    """(status, error) of each descriptor from the metric set's ``status`` and ``error``."""
    errors = (
        metrics["error"].values.tolist()
        if "error" in metrics.data_vars
        else [""] * len(descriptors)
    )
    out = {}
    for d, s, e in zip(descriptors, metrics["status"].values.tolist(), errors, strict=True):
        s, e = label_text(s), "" if e is None else label_text(e)
        if s != "ok" and not e.strip():
            e = _NO_MESSAGE  # a failure reported without a message is still recorded
        out[d] = check_status(s, e, f"metrics descriptor {d!r}: ")
    return out


def scene_rows(scenes: xr.Dataset, descriptors: list[str]) -> dict[str, list[SceneRow]]:
    """Per descriptor, the ``scenes`` rows (in :data:`SCENE_COLUMNS` order) of the scenes in
    which it has queries (``query_count + excluded_count > 0``)."""
    missing = [k for k in SCENE_KEYS if k not in scenes.data_vars]
    if missing:
        raise InvalidInputError(
            f"scenes lacks {missing}; expected the output of metricalc.scene_metrics"
        )
    scene_descriptors = _labels(scenes, "descriptor", "scenes")
    unknown = sorted(set(scene_descriptors) - set(descriptors))
    if unknown:
        raise InvalidInputError(
            f"scenes has descriptors {unknown} that metrics lacks; pass the scene metrics of "
            "the same cube"
        )
    names = _labels(scenes, "scene", "scenes")
    arrays: dict[str, np.ndarray] = {}
    for key in SCENE_COLUMNS[1:]:
        if key in scenes.data_vars:
            arrays[key] = scenes[key].transpose("descriptor", "scene").values
    _check_counts(arrays)
    out: dict[str, list[SceneRow]] = {d: [] for d in descriptors}
    for i, d in enumerate(scene_descriptors):
        for j, scene in enumerate(names):
            if arrays["query_count"][i, j] + arrays["excluded_count"][i, j] == 0:
                continue
            row: list[Any] = [scene]
            for key in SCENE_COLUMNS[1:]:
                row.append(_number(arrays[key][i, j]) if key in arrays else None)
            out[d].append(tuple(row))
    return out


def _check_counts(arrays: Mapping[str, np.ndarray]) -> None:
    """The per-scene counts must be integers >= 0."""
    for key in ("query_count", "excluded_count", "image_count"):
        if key not in arrays:
            continue
        values = np.asarray(arrays[key], dtype=np.float64)
        if not (np.isfinite(values).all() and (values >= 0).all() and (values % 1 == 0).all()):
            raise InvalidInputError(
                f"scenes variable {key!r} must hold integers >= 0; got {values.tolist()}"
            )


def result_rows(metrics: Any, scenes: Any) -> list[ResultRow]:
    """The ``results`` rows (with their scene rows) of one metric set and its scene metrics
    (either may be None: no rows; scenes without metrics are refused)."""
    if metrics is None:
        if scenes is not None:
            raise InvalidInputError("scenes given without metrics; pass both (or neither)")
        return []
    metrics = _check_dataset(metrics, "metrics", ("descriptor",), "metricalc.metric_set")
    descriptors = _labels(metrics, "descriptor", "metrics")
    metrics = metrics.assign_coords(descriptor=descriptors)
    if scenes is not None:
        scenes = _check_dataset(
            scenes, "scenes", ("descriptor", "scene"), "metricalc.scene_metrics"
        )
        scenes = scenes.assign_coords(descriptor=_labels(scenes, "descriptor", "scenes"))
    values = _metric_values(metrics, descriptors)
    by_descriptor = scene_rows(scenes, descriptors) if scenes is not None else {}
    rows: list[ResultRow] = []
    for d in descriptors:
        try:
            metadata: str | None = format_metadata(metadata_for(metrics, scenes, d))
        except InvalidInputError:
            metadata = None  # not a metric_set output (no DescriptorWorkbench keys)
        rows.append(
            ResultRow(
                descriptor=d,
                status=values.status[d][0],
                error=values.status[d][1],
                columns=values.columns[d],
                metadata=metadata,
                extra=values.extra[d],
                scenes=by_descriptor.get(d, []),
            )
        )
    return rows
