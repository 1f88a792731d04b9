r"""Import of DescriptorWorkbench exports: its CSV files into a descriptor x scene cube, a check of
its summary columns against its own per-scene values, and experiments in the results database.

A DescriptorWorkbench export is a CSV file with one row per workbench experiment (one descriptor
configuration run on one dataset): an ``experiment_id``, a ``descriptor_type``, summary columns
(``true_map_macro``, ``true_map_micro``, their ``_with_zeros`` variants, ``precision_at_1``, ...)
and, in the detailed export, a ``metadata`` string (``key=value;``, :mod:`metricalc.store.metadata`)
holding per-scene keys ``<scene>_true_map``, ``<scene>_true_map_with_zeros``,
``<scene>_query_count`` and ``<scene>_excluded_count``.

:func:`read_workbench` parses the file and recomputes each summary from the scenes:

.. math::

    \text{true\_map\_macro} = \operatorname{mean}_{s : q_s > 0} m_s, \qquad
    \text{true\_map\_micro} = \frac{\sum_s m_s q_s}{\sum_s q_s}

    \text{true\_map\_macro\_with\_zeros} = \operatorname{mean}_{s : q_s > 0} z_s, \qquad
    \text{true\_map\_micro\_with\_zeros} = \frac{\sum_s m_s q_s}{\sum_s (q_s + e_s)}

    \text{viewpoint\_map} = \operatorname{mean}_{s \in V : q_s > 0} m_s, \qquad
    \text{viewpoint\_map\_including\_zeros} = \operatorname{mean}_{s \in V : q_s + e_s > 0} z_s,
    \qquad \text{viewpoint\_map\_micro} = \frac{\sum_{s \in V} m_s q_s}{\sum_{s \in V} q_s}

with :math:`m_s`, :math:`z_s`, :math:`q_s`, :math:`e_s` the scene's ``true_map``,
``true_map_with_zeros``, ``query_count`` and ``excluded_count``, and :math:`V` the scenes whose
name starts with ``v`` (``illumination_*`` likewise over those starting with ``i``): the
definitions of :func:`metricalc.metric_set`, which are DescriptorWorkbench's. The export has no
split columns, so the split mAPs (:data:`SPLIT_MAPS`) are recomputed and stored, not checked.
DescriptorWorkbench writes the keys of a scene only when it has an R = 1 query, so a scene
whose queries all have R = 0 is absent from its metadata. The metadata holds each
:math:`m_s` rounded to 6 decimals (error at most :math:`5 \cdot 10^{-7}`), and a mean or a
weighted mean with weights summing to at most 1 keeps that bound, so a recomputed value must be
within :data:`MAP_TOLERANCE` = :math:`5 \cdot 10^{-7}` of the file's full-precision column; the
per-scene counts must add up exactly to ``total_queries_processed`` / ``total_queries_excluded``.
A row that does not is reported (and stored with status ``mismatch``).
:func:`import_workbench` also stores every row as an experiment of benchmark
:data:`WORKBENCH_BENCHMARK` (``docs/store.md``, "The DescriptorWorkbench import").
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe, temporary_path
from metricalc.metrics import SPLIT_LETTERS
from metricalc.store.database import open_db, transaction
from metricalc.store.metadata import SCENE_KEYS, parse_metadata
from metricalc.store.records import _experiment_row, _ResultRow, _write
from metricalc.store.schema import SEED_COLUMNS
from metricalc.store.workbench_cube import HIT_RATES, WORKBENCH_FORMAT

__all__ = [
    "MAP_TOLERANCE",
    "SPLIT_MAPS",
    "WORKBENCH_BENCHMARK",
    "WorkbenchExport",
    "import_workbench",
    "read_workbench",
    "write_cube",
]

WORKBENCH_BENCHMARK = "descriptorworkbench"
"""The benchmark name of imported experiments."""

MAP_TOLERANCE = 5e-7
"""Largest accepted ``abs(file - recomputed)`` of an mAP: half a unit of the metadata's 6th
decimal (each per-scene value is rounded to 6 decimals; a mean keeps that bound)."""

_SLACK = 1e-12  # floating-point error of the recomputation itself

REQUIRED_COLUMNS = ("experiment_id", "descriptor_type", "true_map_macro")
"""Columns every export must have."""

METRIC_COLUMNS: dict[str, str] = {
    "true_map_micro": "true_map_micro",
    "true_map_macro": "true_map_macro",
    "precision_at_1": "precision_at_1",
    "precision_at_5": "precision_at_5",
    "mean_average_precision": "mean_average_precision",
    "processing_time_ms": "processing_time_ms",
    "true_map_macro_with_zeros": "true_map_macro_by_scene_including_zeros",
    "true_map_micro_with_zeros": "true_map_micro_including_zeros",
    "legacy_mean_precision": "mean_precision",
    "recall_at_1": "recall_at_1",
    "recall_at_5": "recall_at_5",
    "total_matches": "total_matches",
    "total_keypoints": "total_keypoints",
    "macro_map": "macro_map",
    "micro_map": "micro_map",
    "macro_map_with_zeros": "macro_map_with_zeros",
    "micro_map_with_zeros": "micro_map_with_zeros",
    "map_per_second": "map_per_second",
}
"""File column -> stored name for the numeric result columns an export may have: a seed column
of ``results`` (:data:`metricalc.store.SEED_COLUMNS`) or, for the others, a key of the row's
extra metrics (under the metric set's name where there is one). ``processing_time_s`` (the
summary export) is stored as ``processing_time_ms``. Every other column except ``metadata`` is
configuration."""

METADATA_METRICS = (
    "precision_at_10",
    "recall_at_10",
    "r0_rate",
    "total_queries_processed",
    "total_queries_excluded",
)
"""Metadata keys copied to the extra metrics (the others stay in the verbatim string)."""

METADATA_TIMINGS = {
    "detect_time_ms": "detect",
    "compute_time_ms": "compute",
    "match_time_ms": "match",
}
"""Metadata keys (milliseconds) recorded as the experiment's timings (seconds)."""

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
"""Columns of :attr:`WorkbenchExport.checks`."""

SPLIT_MAPS = tuple(
    f"{split}_map{suffix}"
    for suffix in ("", "_including_zeros", "_micro")
    for split, _ in SPLIT_LETTERS
)
"""The split mAPs recomputed from the per-scene metadata and stored with each imported row
(the export has no such columns): ``viewpoint_map`` / ``illumination_map`` in ``results``, the
others among the row's extra metrics."""

_INTEGER_COLUMNS = frozenset(("total_matches", "total_keypoints"))
_SUFFIXES = tuple(f"_{key}" for key in sorted(SCENE_KEYS, key=len, reverse=True))
_INTEGER = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class _Row:
    """One parsed row of an export."""

    line: int
    experiment_id: int
    descriptor: str
    config: dict[str, str]
    values: dict[str, float | None]
    metadata: str | None
    meta: dict[str, object]
    scenes: dict[str, tuple[float, float, int, int]]


@dataclass(frozen=True)
class WorkbenchExport:
    """A DescriptorWorkbench export read by :func:`read_workbench`.

    Attributes
    ----------
    path : Path
    rows : list
        The parsed rows (internal form).
    checks : pandas.DataFrame
        One row per (file row, check): ``line``, ``experiment_id``, ``descriptor``, ``check``
        (a name of :data:`CHECKS`), ``file`` (the file's value), ``recomputed`` (from the
        scenes), ``difference`` (file - recomputed), ``tolerance`` (:data:`MAP_TOLERANCE`, 0 for
        counts), ``n_scenes``, ``ok``. Empty without metadata.
    cube : xarray.Dataset or None
        Over ``(descriptor, scene)`` (None when no row has per-scene metadata): ``true_map``,
        ``true_map_with_zeros`` (NaN where a row lacks the scene), ``query_count``,
        ``excluded_count`` (0 there); over ``descriptor``: each checked mAP as in the file and
        as ``<name>_recomputed``, ``status`` (``ok`` | ``mismatch`` | ``error``); coordinates
        ``experiment_id``, ``line`` (descriptor) and ``split`` (scene). A ``descriptor_type``
        found on several rows is labelled ``<descriptor_type>#<experiment_id>``.
    tags : tuple of str
        The tags the rows were stored under (set by :func:`import_workbench`).
    recomputed : dict
        Per file line, the values recomputed from the row's scenes (the checks and the split
        mAPs of :data:`SPLIT_MAPS` stored with the import).
    """

    path: Path
    rows: list[_Row]
    checks: pd.DataFrame
    cube: xr.Dataset | None
    tolerance: float = MAP_TOLERANCE
    tags: tuple[str, ...] = field(default=())
    recomputed: dict[int, dict[str, float]] = field(default_factory=dict, repr=False)

    @property
    def mismatches(self) -> pd.DataFrame:
        """The failed checks (rows of :attr:`checks` with ``ok`` false)."""
        return self.checks[~self.checks["ok"]].reset_index(drop=True)

    @property
    def checked_rows(self) -> int:
        """Number of file rows with per-scene metadata (the rows that could be checked)."""
        return sum(1 for row in self.rows if row.scenes)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _where(path: Path, line: int, column: str | None = None) -> str:
    return f"{path} line {line}" + (f", column {column!r}" if column else "")


def _float(text: str, where: str, *, required: bool) -> float | None:
    if text.strip() == "":
        if required:
            raise InvalidInputError(f"{where}: empty; expected a number")
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidInputError(f"{where}: {text!r} is not a number") from None


def _scenes(meta: Mapping[str, object], where: str) -> dict[str, tuple[float, float, int, int]]:
    """The per-scene values of one metadata mapping, by scene name (sorted)."""
    found: dict[str, dict[str, object]] = {}
    for key, value in meta.items():
        for suffix in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                found.setdefault(key[: -len(suffix)], {})[suffix[1:]] = value
                break
    out = {}
    for scene in sorted(found):
        values = found[scene]
        missing = [f"{scene}_{k}" for k in SCENE_KEYS if k not in values]
        if missing:
            present = sorted(f"{scene}_{k}" for k in values)
            raise InvalidInputError(
                f"{where}: metadata has {present} but not {missing}; each scene needs "
                f"{[f'<scene>_{k}' for k in SCENE_KEYS]}"
            )
        maps = []
        for key in ("true_map", "true_map_with_zeros"):
            value = values[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInputError(
                    f"{where}: metadata key {scene}_{key}={value!r}; expected a number in [0, 1]"
                )
            if not (math.isnan(value) or 0 <= value <= 1):
                raise InvalidInputError(
                    f"{where}: metadata key {scene}_{key}={value!r} is outside [0, 1]"
                )
            maps.append(float(value))
        counts = []
        for key in ("query_count", "excluded_count"):
            value = values[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"{where}: metadata key {scene}_{key}={value!r}; expected an integer >= 0"
                )
            counts.append(value)
        out[scene] = (maps[0], maps[1], counts[0], counts[1])
    return out


def _parse_row(path: Path, line: int, cells: dict[str, str], header: list[str]) -> _Row:
    text = cells["experiment_id"].strip()
    if not _INTEGER.fullmatch(text):
        raise InvalidInputError(
            f"{_where(path, line, 'experiment_id')}: {text!r} is not an integer"
        )
    descriptor = cells["descriptor_type"].strip()
    if not descriptor:
        raise InvalidInputError(f"{_where(path, line, 'descriptor_type')}: empty")
    values: dict[str, float | None] = {}
    for column in header:
        if column in METRIC_COLUMNS or column == "processing_time_s":
            required = column in REQUIRED_COLUMNS
            values[column] = _float(cells[column], _where(path, line, column), required=required)
    config = {c: cells[c] for c in header if c not in values and c != "metadata" and c != ""}
    metadata = cells.get("metadata")
    meta: dict[str, object] = {}
    scenes: dict[str, tuple[float, float, int, int]] = {}
    if metadata is not None and metadata.strip():
        where = _where(path, line, "metadata")
        try:
            meta = parse_metadata(metadata)
        except InvalidInputError as error:
            raise InvalidInputError(f"{where}: {error}") from None
        scenes = _scenes(meta, where)
    return _Row(
        line=line,
        experiment_id=int(text),
        descriptor=descriptor,
        config=config,
        values=values,
        metadata=metadata if metadata and metadata.strip() else None,
        meta=meta,
        scenes=scenes,
    )


def _read_rows(path: Path) -> list[_Row]:
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file (expected a DescriptorWorkbench CSV)")
    rows: list[_Row] = []
    seen: dict[int, int] = {}
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise InvalidInputError(f"{path}: empty file; expected a CSV header line") from None
        except (csv.Error, UnicodeDecodeError) as error:
            raise InvalidInputError(f"{path} line 1: not a CSV header ({error})") from None
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise InvalidInputError(
                f"{path} line 1: missing column(s) {missing}; a DescriptorWorkbench export has "
                f"{list(REQUIRED_COLUMNS)} and optionally {sorted(METRIC_COLUMNS)} and metadata"
            )
        duplicated = sorted({c for c in header if header.count(c) > 1})
        if duplicated:
            raise InvalidInputError(f"{path} line 1: column(s) {duplicated} appear twice")
        try:
            for cells in reader:
                if not cells:
                    continue  # a blank line
                if len(cells) != len(header):
                    raise InvalidInputError(
                        f"{path} line {reader.line_num}: {len(cells)} fields, the header has "
                        f"{len(header)}"
                    )
                row = _parse_row(
                    path, reader.line_num, dict(zip(header, cells, strict=True)), header
                )
                if row.experiment_id in seen:
                    raise InvalidInputError(
                        f"{_where(path, row.line, 'experiment_id')}: experiment_id "
                        f"{row.experiment_id} already on line {seen[row.experiment_id]}"
                    )
                seen[row.experiment_id] = row.line
                rows.append(row)
        except (csv.Error, UnicodeDecodeError) as error:
            raise InvalidInputError(f"{path} line {reader.line_num}: {error}") from None
    if not rows:
        raise InvalidInputError(f"{path}: a header but no rows")
    return rows


# --------------------------------------------------------------------------------------------
# Recomputation from the scenes
# --------------------------------------------------------------------------------------------


def _recompute(row: _Row) -> dict[str, float]:
    """The summaries of :data:`CHECKS` (and the split mAPs) recomputed from a row's scenes."""
    names = np.array(list(row.scenes))
    m, z, q, e = (np.array(v, dtype=np.float64) for v in zip(*row.scenes.values(), strict=True))
    ap_sum = np.where(q > 0, m * q, 0.0)  # a scene without queries has true_map NaN, sum 0

    def mean(values: np.ndarray, keep: np.ndarray) -> float:
        return float(values[keep].mean()) if keep.any() else math.nan

    def ratio(numerator: float, denominator: float) -> float:
        return numerator / denominator if denominator > 0 else math.nan

    out = {
        "true_map_macro": mean(m, q > 0),
        "true_map_micro": ratio(float(ap_sum.sum()), float(q.sum())),
        # DescriptorWorkbench averages over the scenes with an R = 1 query (its per_scene_ap)
        "true_map_macro_with_zeros": mean(z, q > 0),
        "true_map_micro_with_zeros": ratio(float(ap_sum.sum()), float((q + e).sum())),
        "total_queries_processed": float(q.sum()),
        "total_queries_excluded": float(e.sum()),
    }
    for split, letter in SPLIT_LETTERS:
        part = np.char.startswith(names, letter)
        out[f"{split}_map"] = mean(m, part & (q > 0))
        out[f"{split}_map_including_zeros"] = mean(z, part & (q + e > 0))
        out[f"{split}_map_micro"] = ratio(float(ap_sum[part].sum()), float(q[part].sum()))
    return out


def _checks(rows: list[_Row], tolerance: float) -> tuple[pd.DataFrame, dict[int, dict]]:
    records = []
    recomputed_by_line: dict[int, dict[str, float]] = {}
    for row in rows:
        if not row.scenes:
            continue
        recomputed = _recompute(row)
        recomputed_by_line[row.line] = recomputed
        for name in CHECKS:
            counts = name.startswith("total_")
            source = row.meta if counts else row.values
            given = source.get(name)
            if given is None or (
                counts and (isinstance(given, bool) or not isinstance(given, int))
            ):
                continue
            given = float(given)
            value = recomputed[name]
            limit = 0.0 if counts else tolerance
            if math.isnan(given) or math.isnan(value):
                ok = math.isnan(given) and math.isnan(value)
                difference = math.nan
            else:
                difference = given - value
                ok = abs(difference) <= limit + (0.0 if counts else _SLACK)
            records.append(
                {
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
            )
    frame = pd.DataFrame.from_records(records, columns=list(CHECK_COLUMNS))
    frame["ok"] = frame["ok"].astype(bool)
    return frame, recomputed_by_line


def _failed_by_line(checks: pd.DataFrame) -> dict[int, list[dict[str, Any]]]:
    """The failed checks of each file line (one pass over the checks)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for record in checks[~checks["ok"]].to_dict("records"):
        out.setdefault(int(record["line"]), []).append(record)
    return out


def _status(row: _Row, failed: list[dict[str, Any]]) -> tuple[str, str]:
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


def _labels(rows: list[_Row]) -> list[str]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.descriptor] = counts.get(row.descriptor, 0) + 1
    return [
        row.descriptor if counts[row.descriptor] == 1 else f"{row.descriptor}#{row.experiment_id}"
        for row in rows
    ]


def _number_or_nan(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return math.nan


def _cube(
    path: Path,
    rows: list[_Row],
    checks: pd.DataFrame,
    recomputed: dict[int, dict[str, float]],
    tolerance: float,
) -> xr.Dataset | None:
    rows = [row for row in rows if row.scenes]
    if not rows:
        return None
    failed = _failed_by_line(checks)
    labels = _labels(rows)
    scenes = sorted({s for row in rows for s in row.scenes})
    column = {s: j for j, s in enumerate(scenes)}
    shape = (len(rows), len(scenes))
    maps = np.full((2, *shape), np.nan)
    counts = np.zeros((2, *shape), np.int64)
    for i, row in enumerate(rows):
        for scene, (m, z, q, e) in row.scenes.items():
            j = column[scene]
            maps[:, i, j] = (m, z)
            counts[:, i, j] = (q, e)
    two = ("descriptor", "scene")
    data: dict[str, Any] = {
        "true_map": (two, maps[0]),
        "true_map_with_zeros": (two, maps[1]),
        "query_count": (two, counts[0]),
        "excluded_count": (two, counts[1]),
    }
    checked = [c for c in CHECKS if not c.startswith("total_") and c in rows[0].values]
    for name in checked:
        data[name] = (
            "descriptor",
            np.array([np.nan if r.values[name] is None else r.values[name] for r in rows]),
        )
        data[f"{name}_recomputed"] = (
            "descriptor",
            np.array([recomputed[r.line][name] for r in rows]),
        )
    for name in HIT_RATES.values():
        hits = [r.values.get(name, r.meta.get(name)) for r in rows]
        if any(isinstance(h, (int, float)) and not isinstance(h, bool) for h in hits):
            data[name] = ("descriptor", np.array([_number_or_nan(h) for h in hits]))
    data["status"] = (
        "descriptor",
        np.array([_status(r, failed.get(r.line, []))[0] for r in rows]),
    )
    letters = {letter: split for split, letter in SPLIT_LETTERS}
    splits = [letters.get(s[:1], "other") for s in scenes]
    return xr.Dataset(
        data,
        coords={
            "descriptor": labels,
            "scene": scenes,
            "experiment_id": ("descriptor", np.array([r.experiment_id for r in rows], np.int64)),
            "line": ("descriptor", np.array([r.line for r in rows], np.int64)),
            "split": ("scene", splits),
        },
        attrs={
            "source": str(path),
            "format": WORKBENCH_FORMAT,
            "tolerance": tolerance,
            "checked": checked,
        },
    )


def read_workbench(
    path: str | os.PathLike[str], *, tolerance: float = MAP_TOLERANCE
) -> WorkbenchExport:
    """Read a DescriptorWorkbench export CSV, build its descriptor x scene cube and check its
    summary columns against its per-scene metadata.

    Parameters
    ----------
    path : path
        The CSV file (e.g. ``descriptor_performance_analysis.csv``; a file without a
        ``metadata`` column, like ``experiment_summary_full.csv``, is read but has no cube and
        nothing to check).
    tolerance : float
        Largest accepted ``abs(file - recomputed)`` of an mAP (default :data:`MAP_TOLERANCE`, the
        rounding bound of the metadata's 6 decimals).

    Returns
    -------
    WorkbenchExport
        The rows, the checks (:attr:`WorkbenchExport.checks`, failures in
        :attr:`WorkbenchExport.mismatches`) and the cube.

    Raises
    ------
    InvalidInputError
        A missing or empty file, a missing column, a row with the wrong number of fields, a
        value that is not a number, a repeated ``experiment_id``, a metadata string that does not
        parse, a scene lacking one of its four keys, or a scene value of the wrong type or range;
        the message names the file, the line and the column or key.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from metricalc.store.workbench import read_workbench
    >>> text = ("experiment_id,descriptor_type,true_map_macro,metadata\\n"
    ...         "7,sift,0.55,i_a_excluded_count=0;i_a_query_count=10;i_a_true_map=0.500000;"
    ...         "i_a_true_map_with_zeros=0.500000;v_b_excluded_count=5;v_b_query_count=5;"
    ...         "v_b_true_map=0.600000;v_b_true_map_with_zeros=0.300000;\\n")
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     csv_path = pathlib.Path(tmp) / "export.csv"
    ...     _ = csv_path.write_text(text)
    ...     export = read_workbench(csv_path)
    >>> export.cube.true_map.sel(descriptor="sift").values.tolist()
    [0.5, 0.6]
    >>> export.checks[["check", "file", "recomputed", "ok"]].to_dict("records")
    [{'check': 'true_map_macro', 'file': 0.55, 'recomputed': 0.55, 'ok': True}]
    """
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, (int, float))
        or not (math.isfinite(tolerance) and tolerance >= 0)
    ):
        raise InvalidInputError(f"tolerance must be a finite number >= 0; got {tolerance!r}")
    path = Path(path)
    rows = _read_rows(path)
    checks, recomputed = _checks(rows, float(tolerance))
    cube = _cube(path, rows, checks, recomputed, float(tolerance))
    return WorkbenchExport(path, rows, checks, cube, float(tolerance), recomputed=recomputed)


def write_cube(cube: xr.Dataset, path: str | os.PathLike[str]) -> Path:
    """Write the cube of a :class:`WorkbenchExport` to a netCDF-4 file (h5netcdf), atomically."""
    target = Path(path)
    if target.is_dir():
        raise InvalidInputError(f"cube path {target} is a directory; expected a file name (.nc)")
    with temporary_path(target) as tmp:
        cube.to_netcdf(tmp, engine="h5netcdf")
    return target


# --------------------------------------------------------------------------------------------
# Storing
# --------------------------------------------------------------------------------------------


def _result_row(
    row: _Row, status: tuple[str, str], recomputed: dict[str, float] | None
) -> _ResultRow:
    """The ``results`` row (and scene rows) of one file row (docs/store.md, "What is stored")."""
    columns: dict[str, float | None] = {}
    extra: dict[str, Any] = {}
    for column, value in row.values.items():
        if column == "processing_time_s":
            columns["processing_time_ms"] = None if value is None else 1000.0 * value
            continue
        target = METRIC_COLUMNS[column]
        if target in SEED_COLUMNS:
            columns[target] = value
        elif column in _INTEGER_COLUMNS and value is not None and float(value).is_integer():
            extra[target] = int(value)
        else:
            extra[target] = value
    if recomputed is not None:
        for name in SPLIT_MAPS:
            if name in SEED_COLUMNS:
                columns[name] = json_safe(recomputed[name])
            else:
                extra[name] = json_safe(recomputed[name])
    for key in METADATA_METRICS:
        value = row.meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            extra.setdefault(key, value)
    scenes = [
        (s, json_safe(m), json_safe(z), q, e, None, None) for s, (m, z, q, e) in row.scenes.items()
    ]
    columns = {k: json_safe(v) for k, v in columns.items()}
    extra = {k: json_safe(v) if isinstance(v, float) else v for k, v in extra.items()}
    return _ResultRow(
        descriptor=row.descriptor,
        status=status[0],
        error=status[1],
        columns=columns,
        metadata=row.metadata,
        extra=extra,
        scenes=scenes,
    )


def _timings(row: _Row) -> dict[str, float]:
    out = {}
    for key, name in METADATA_TIMINGS.items():
        value = row.meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            out[name] = value / 1000.0
    if row.values.get("processing_time_ms") is not None:
        out["processing"] = row.values["processing_time_ms"] / 1000.0
    elif row.values.get("processing_time_s") is not None:
        out["processing"] = row.values["processing_time_s"]
    return {k: v for k, v in out.items() if math.isfinite(v) and v >= 0}


def import_workbench(
    path: str | os.PathLike[str] | WorkbenchExport,
    *,
    db: str | os.PathLike[str],
    tag_prefix: str = "dw-",
    overwrite: bool = False,
    tolerance: float = MAP_TOLERANCE,
) -> WorkbenchExport:
    """Read (:func:`read_workbench`) and store a DescriptorWorkbench export in the database.

    Every row becomes one experiment of benchmark :data:`WORKBENCH_BENCHMARK` tagged
    ``<tag_prefix><experiment_id>`` (DescriptorWorkbench's own unit: one experiment, one
    descriptor), with one ``results`` row (descriptor = ``descriptor_type``) and its scene rows;
    see ``docs/store.md`` for where each column goes. The whole file is one transaction: all
    rows are stored or none.

    Parameters
    ----------
    path : path or WorkbenchExport
        The CSV file, or an export already read.
    db : path
        The database file.
    tag_prefix : str
        Prefix of the tags (``dw-`` gives ``dw-42``).
    overwrite : bool
        Replace experiments of the same tag that came from a different source or row (a
        different config hash). Without it such a clash is refused, naming the tags; a tag whose
        stored config is the same (the same file imported again) is replaced quietly.
    tolerance : float
        See :func:`read_workbench`.

    Returns
    -------
    WorkbenchExport
        With :attr:`~WorkbenchExport.tags` set.
    """
    export = (
        path if isinstance(path, WorkbenchExport) else read_workbench(path, tolerance=tolerance)
    )
    if not isinstance(tag_prefix, str):
        raise InvalidInputError(f"tag_prefix must be a string; got {tag_prefix!r}")
    planned = []
    failed = _failed_by_line(export.checks)
    for row in export.rows:
        status = _status(row, failed.get(row.line, []))
        config = {"source": export.path.name, **row.config}
        experiment = _experiment_row(
            tag=f"{tag_prefix}{row.experiment_id}",
            benchmark=WORKBENCH_BENCHMARK,
            config=config,
            status=status[0],
            error=status[1],
            timings=_timings(row),
            versions=None,
            protocol={"source_format": "DescriptorWorkbench export"},
        )
        planned.append((experiment, _result_row(row, status, export.recomputed.get(row.line))))
    tags = [experiment.tag for experiment, _ in planned]
    with open_db(db) as connection, transaction(connection):
        if not overwrite:
            _refuse_clashes(connection, planned)
        for experiment, result in planned:
            _write(connection, experiment, [result])
    return replace(export, tags=tuple(tags))


def _refuse_clashes(connection: Any, planned: list) -> None:
    """Refuse to replace stored experiments whose config differs from the import's."""
    by_tag = {experiment.tag: experiment.config_hash for experiment, _ in planned}
    clashes = []
    tags = list(by_tag)
    for start in range(0, len(tags), 500):  # bounded number of bound parameters per query
        chunk = tags[start : start + 500]
        query = (
            "SELECT tag, config_hash FROM experiments WHERE benchmark = ? AND tag IN "
            f"({', '.join('?' * len(chunk))})"
        )
        for tag, digest in connection.execute(query, (WORKBENCH_BENCHMARK, *chunk)):
            if digest != by_tag[tag]:
                clashes.append(tag)
    if clashes:
        shown = ", ".join(sorted(clashes)[:5]) + (" ..." if len(clashes) > 5 else "")
        raise InvalidInputError(
            f"{len(clashes)} tag(s) of benchmark {WORKBENCH_BENCHMARK!r} already hold a "
            f"different import ({shown}); give another --tag-prefix (tag_prefix=) or "
            "--overwrite (overwrite=True) to replace them"
        )
