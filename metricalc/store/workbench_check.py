r"""The check of a DescriptorWorkbench export: each row's summaries recomputed from its own
per-scene values (:func:`recompute`, the formulas of :mod:`metricalc.store.workbench`) and
compared with the file's columns (:func:`check_rows`), and the status a row is stored with
(:func:`row_status`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from metricalc.errors import InvalidInputError
from metricalc.metrics import SPLIT_LETTERS
from metricalc.store.workbench_file import WorkbenchRow, where
from metricalc.validation import is_integer

__all__ = [
    "CHECKS",
    "CHECK_COLUMNS",
    "MAP_TOLERANCE",
    "SPLIT_MAPS",
    "check_rows",
    "failed_by_line",
    "recompute",
    "row_status",
]

MAP_TOLERANCE = 5e-7
"""Largest accepted ``abs(file - recomputed)`` of an mAP: half a unit of the metadata's 6th
decimal (each per-scene value is rounded to 6 decimals; a mean keeps that bound)."""

_SLACK = 1e-12  # floating-point error of the recomputation itself

CHECKS = (
    "true_map_macro",
    "true_map_micro",
    "true_map_macro_with_zeros",
    "true_map_micro_with_zeros",
    "total_queries_processed",
    "total_queries_excluded",
)
"""What is recomputed from the scenes (the mAPs against the file's columns, the counts against
the metadata's totals), each where the file has it."""

CHECK_COLUMNS = (
    "line",
    "experiment_id",
    "descriptor",
    "check",
    "file",
    "recomputed",
    "difference",
    "tolerance",
    "n_scenes",
    "ok",
)
"""Columns of :attr:`metricalc.store.workbench.WorkbenchExport.checks`."""

SPLIT_MAPS = tuple(
    f"{split}_map{suffix}"
    for suffix in ("", "_including_zeros", "_micro")
    for split, _ in SPLIT_LETTERS
)
"""The split mAPs recomputed from the per-scene metadata and stored with each imported row
(the export has no such columns): ``viewpoint_map`` / ``illumination_map`` in ``results``, the
others among the row's extra metrics."""

def recompute(row: WorkbenchRow) -> dict[str, float]:
    """The summaries of :data:`CHECKS` (and the split mAPs) recomputed from a row's scenes."""
    names = np.array(list(row.scenes))
    m, z, q, e = (np.array(v, dtype=np.float64) for v in zip(*row.scenes.values(), strict=True))
    ap_sum = np.where(q > 0, m * q, 0.0)  # a scene without queries has true_map NaN, sum 0
    out = {
        "true_map_macro": _mean(m, q > 0),
        "true_map_micro": _ratio(float(ap_sum.sum()), float(q.sum())),
        # DescriptorWorkbench averages over the scenes with an R = 1 query (its per_scene_ap)
        "true_map_macro_with_zeros": _mean(z, q > 0),
        "true_map_micro_with_zeros": _ratio(float(ap_sum.sum()), float((q + e).sum())),
        "total_queries_processed": float(q.sum()),
        "total_queries_excluded": float(e.sum()),
    }
    for split, letter in SPLIT_LETTERS:
        part = np.char.startswith(names, letter)
        out[f"{split}_map"] = _mean(m, part & (q > 0))
        out[f"{split}_map_including_zeros"] = _mean(z, part & (q + e > 0))
        out[f"{split}_map_micro"] = _ratio(float(ap_sum[part].sum()), float(q[part].sum()))
    return out


def _mean(values: npt.NDArray[np.float64], keep: npt.NDArray[np.bool_]) -> float:
    return float(values[keep].mean()) if keep.any() else math.nan


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.nan


def check_rows(
    rows: list[WorkbenchRow], tolerance: float, path: Path
) -> tuple[pd.DataFrame, dict[int, dict[str, float]]]:
    """The checks of the rows with scenes (a frame of :data:`CHECK_COLUMNS`) and, per file line,
    the values :func:`recompute` gives.

    Raises
    ------
    InvalidInputError
        A summary mAP of the file is ``nan`` where the row's scenes define it (``path`` and the
        line in the message): not a value DescriptorWorkbench writes, and no number to store.
    """
    records = []
    recomputed_by_line: dict[int, dict[str, float]] = {}
    for row in rows:
        if not row.scenes:
            continue
        recomputed = recompute(row)
        recomputed_by_line[row.line] = recomputed
        for name in CHECKS:
            _refuse_undefined(row, name, recomputed[name], path)
            record = _check(row, name, recomputed[name], tolerance)
            if record is not None:
                records.append(record)
    frame = pd.DataFrame.from_records(records, columns=list(CHECK_COLUMNS))
    frame["ok"] = frame["ok"].astype(bool)
    return frame, recomputed_by_line


def _refuse_undefined(row: WorkbenchRow, name: str, value: float, path: Path) -> None:
    """A file mAP that is NaN although the row's scenes give ``value`` is refused."""
    given = row.values.get(name)
    if name.startswith("total_") or given is None or not math.isnan(given):
        return
    if not math.isnan(value):
        raise InvalidInputError(
            f"{where(path, row.line, name)}: 'nan', but the row's {len(row.scenes)} scenes give "
            f"{value:.6f}; expected that mAP, a fraction in [0, 1]"
        )


def _check(
    row: WorkbenchRow, name: str, value: float, tolerance: float
) -> dict[str, Any] | None:
    """One check of a row (None where the file has no value to check)."""
    counts = name.startswith("total_")
    given = row.meta.get(name) if counts else row.values.get(name)
    if given is None or (counts and not is_integer(given)):
        return None
    given = float(given)  # type: ignore[arg-type]
    limit = 0.0 if counts else tolerance
    if math.isnan(given) or math.isnan(value):
        ok = math.isnan(given) and math.isnan(value)
        difference = math.nan
    else:
        difference = given - value
        ok = abs(difference) <= limit + (0.0 if counts else _SLACK)
    return {
        "line": row.line,
        "experiment_id": row.experiment_id,
        "descriptor": row.descriptor,
        "check": name,
        "file": given,
        "recomputed": value,
        "difference": difference,
        "tolerance": limit,
        "n_scenes": len(row.scenes),
        "ok": ok,
    }


def failed_by_line(checks: pd.DataFrame) -> dict[int, list[dict[str, Any]]]:
    """The failed checks of each file line (one pass over the checks)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for record in checks[~checks["ok"]].to_dict("records"):
        out.setdefault(int(record["line"]), []).append({str(k): v for k, v in record.items()})
    return out


def row_status(row: WorkbenchRow, failed: list[dict[str, Any]]) -> tuple[str, str]:
    """(status, error) of a row: ``error`` if the workbench says it failed, ``mismatch`` if a
    check failed, else ``ok``."""
    problems = [
        f"{r['check']}: file {r['file']:.9g}, recomputed {r['recomputed']:.9g} from "
        f"{r['n_scenes']} scenes (|difference| {abs(r['difference']):.3g} > {r['tolerance']:g})"
        for r in failed
    ]
    if row.meta.get("success") is False:
        return "error", "; ".join(["DescriptorWorkbench reported success=false", *problems])
    if problems:
        return "mismatch", "; ".join(problems)
    return "ok", ""
