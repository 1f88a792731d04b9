"""Export of metric sets: CSV (one row per descriptor) and JSON (descriptor -> metric -> value)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import xarray as xr

from metricalc.fileio import atomic_write, csv_text, json_safe


def metric_set_to_dict(metrics: xr.Dataset) -> dict[str, dict[str, Any]]:
    """``{descriptor: {metric name: value}}`` of the scalar metrics (one value per descriptor).

    Variables with more dims than ``descriptor`` (e.g. ``rank_histogram``) become
    ``{label: value}`` mappings over their extra dimension.
    """
    result: dict[str, dict[str, Any]] = {}
    for d in metrics["descriptor"].values.tolist():
        row: dict[str, Any] = {}
        one = metrics.sel(descriptor=d)
        for name, variable in one.data_vars.items():
            if variable.ndim == 0:
                row[str(name)] = json_safe(variable.values[()])
            elif variable.ndim == 1:
                labels = variable[variable.dims[0]].values.tolist()
                row[str(name)] = {
                    str(k): json_safe(v) for k, v in zip(labels, variable.values, strict=True)
                }
        result[str(d)] = row
    return result


def write_metric_set(metrics: xr.Dataset, stem: str | Path) -> list[Path]:
    """Write ``<stem>.csv`` (scalar metrics, one row per descriptor) and ``<stem>.json``."""
    stem = Path(stem)
    table = metrics[[n for n, v in metrics.data_vars.items() if v.dims == ("descriptor",)]]
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    atomic_write(csv_path, csv_text(table.to_dataframe(), index=True))
    atomic_write(json_path, json.dumps(metric_set_to_dict(metrics), indent=2, sort_keys=False))
    return [csv_path, json_path]
