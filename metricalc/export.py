"""Export of metric sets: CSV (one row per descriptor) and JSON (descriptor -> metric -> value)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr


def _json_value(value: Any) -> Any:
    """A JSON-safe Python value: NaN and infinities become null."""
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()]
    return value.item() if hasattr(value, "item") else value


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
                row[str(name)] = _json_value(variable.values[()])
            elif variable.ndim == 1:
                labels = variable[variable.dims[0]].values.tolist()
                row[str(name)] = {
                    str(k): _json_value(v) for k, v in zip(labels, variable.values, strict=True)
                }
        result[str(d)] = row
    return result


def _atomic_write(path: Path, text: str | bytes) -> None:
    """Write text (or bytes) to ``path`` through a temporary file in its folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_metric_set(metrics: xr.Dataset, stem: str | Path) -> list[Path]:
    """Write ``<stem>.csv`` (scalar metrics, one row per descriptor) and ``<stem>.json``."""
    stem = Path(stem)
    table = metrics[[n for n, v in metrics.data_vars.items() if v.dims == ("descriptor",)]]
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    _atomic_write(csv_path, table.to_dataframe().to_csv())
    _atomic_write(json_path, json.dumps(metric_set_to_dict(metrics), indent=2, sort_keys=False))
    return [csv_path, json_path]
