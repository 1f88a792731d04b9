"""The rows of a DescriptorWorkbench export CSV, parsed and checked (:func:`read_rows`): the
file's identity, metric and configuration columns and the per-scene values of its ``metadata``
string. :mod:`metricalc.store.workbench` builds the cube and the checks from them.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from metricalc.errors import InvalidInputError
from metricalc.store.metadata import METRICALC_PREFIX, SCENE_KEYS, parse_metadata
from metricalc.validation import is_integer, is_real

__all__ = [
    "METRIC_COLUMNS", "REQUIRED_COLUMNS", "SceneValues", "WorkbenchRow", "read_rows", "where"
]

REQUIRED_COLUMNS = ("experiment_id", "descriptor_type", "true_map_macro", "true_map_micro")
"""Columns every export must have (both real exports have both mAPs)."""

METRIC_COLUMNS: dict[str, str] = {
    "true_map_micro": "true_map_micro",
    "true_map_macro": "true_map_macro",
    "precision_at_1": "hit_rate_at_1",
    "precision_at_5": "hit_rate_at_5",
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
extra metrics (under the metric set's name where there is one). DescriptorWorkbench's
``precision_at_1`` / ``precision_at_5`` are hit rates, stored as ``hit_rate_at_1`` /
``hit_rate_at_5``. ``processing_time_s`` (the
summary export) is stored as ``processing_time_ms``. Every other column except ``metadata`` is
configuration."""

COUNT_COLUMNS = frozenset({"total_matches", "total_keypoints"})
"""Numeric columns that are counts: whole numbers in [0, 2**53] (exact as floats)."""

NONNEGATIVE_COLUMNS = COUNT_COLUMNS | {"processing_time_ms", "processing_time_s", "map_per_second"}
"""Numeric columns that are counts, times or rates (finite, >= 0); every other numeric column
is a fraction in [0, 1]."""

_INT64 = (-(2**63), 2**63 - 1)  # DescriptorWorkbench's ids are SQLite INTEGERs

_SUFFIXES = tuple(f"_{key}" for key in sorted(SCENE_KEYS, key=len, reverse=True))
_INTEGER = re.compile(r"-?[0-9]+")

SceneValues = tuple[float, float, int, int]
"""A scene's ``true_map``, ``true_map_with_zeros``, ``query_count`` and ``excluded_count``."""


@dataclass(frozen=True)
class WorkbenchRow:
    """One parsed row of an export: its file line, identity, configuration columns, metric
    columns (``values``), the metadata string and its parsed mapping (``meta``), and the
    per-scene values by scene name (sorted)."""

    line: int
    experiment_id: int
    descriptor: str
    config: dict[str, str]
    values: dict[str, float | None]
    metadata: str | None
    meta: dict[str, object]
    scenes: dict[str, SceneValues]


def where(path: Path, line: int, column: str | None = None) -> str:
    """``<path> line <line>[, column '<column>']`` for messages."""
    return f"{path} line {line}" + (f", column {column!r}" if column else "")


def _float(text: str, where: str, *, required: bool, column: str) -> float | None:
    """The number of a cell: a fraction in [0, 1], a count (:data:`COUNT_COLUMNS`) or a finite
    number >= 0 (:data:`NONNEGATIVE_COLUMNS`); NaN (DescriptorWorkbench's "not computed") is
    kept."""
    if text.strip() == "":
        if required:
            raise InvalidInputError(f"{where}: empty; expected a number")
        return None
    try:
        number = float(text)
    except ValueError:
        raise InvalidInputError(f"{where}: {text!r} is not a number") from None
    if math.isnan(number):
        return number
    if column in COUNT_COLUMNS:
        if not (0 <= number <= 2**53 and number.is_integer()):
            raise InvalidInputError(f"{where}: {text!r}; expected a count, 0 .. 2**53")
    elif column in NONNEGATIVE_COLUMNS:
        if not (math.isfinite(number) and number >= 0):
            raise InvalidInputError(f"{where}: {text!r}; expected a finite number >= 0")
    elif not 0 <= number <= 1:
        raise InvalidInputError(f"{where}: {text!r}; expected a fraction in [0, 1]")
    return number


def _scenes(meta: Mapping[str, object], at: str) -> dict[str, SceneValues]:
    """The per-scene values of one metadata mapping, by scene name (sorted): DescriptorWorkbench's
    four keys per scene, and a scene whose queries all have R = 0 from metricalc's
    ``metricalc_<scene>_excluded_count`` (DescriptorWorkbench writes nothing for it)."""
    found, without_r1 = _scene_keys(meta)
    out: dict[str, SceneValues] = {}
    for scene in sorted(found):
        values = found[scene]
        missing = [f"{scene}_{k}" for k in SCENE_KEYS if k not in values]
        if missing:
            present = sorted(f"{scene}_{k}" for k in values)
            raise InvalidInputError(
                f"{at}: metadata has {present} but not {missing}; each scene needs "
                f"{[f'<scene>_{k}' for k in SCENE_KEYS]}"
            )
        m, z = (_scene_map(values[key], f"{scene}_{key}", at)
                for key in ("true_map", "true_map_with_zeros"))
        q, e = (_scene_count(values[key], f"{scene}_{key}", at)
                for key in ("query_count", "excluded_count"))
        out[scene] = (m, z, q, e)
    for scene, value in without_r1.items():
        key = f"{METRICALC_PREFIX}{scene}_excluded_count"
        if scene in out:
            raise InvalidInputError(
                f"{at}: metadata has both {key} and the keys of scene {scene!r}; a scene is "
                "either one with R = 1 queries or one without"
            )
        out[scene] = (math.nan, 0.0, 0, _scene_count(value, key, at))
    return dict(sorted(out.items()))


def _scene_keys(
    meta: Mapping[str, object],
) -> tuple[dict[str, dict[str, object]], dict[str, object]]:
    """The per-scene keys of a metadata mapping: scene -> {key: value} for DescriptorWorkbench's
    keys, and scene -> excluded count for metricalc's ``metricalc_<scene>_excluded_count``
    (other keys of metricalc's namespace, :data:`~metricalc.store.metadata.METRICALC_PREFIX`,
    are not per-scene values)."""
    found: dict[str, dict[str, object]] = {}
    without_r1: dict[str, object] = {}
    for key, value in meta.items():
        if key.startswith(METRICALC_PREFIX):
            scene = key.removeprefix(METRICALC_PREFIX).removesuffix("_excluded_count")
            if key.endswith("_excluded_count") and scene:
                without_r1[scene] = value
            continue
        for suffix in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                found.setdefault(key[: -len(suffix)], {})[suffix[1:]] = value
                break
    return found, without_r1


def _scene_map(value: object, key: str, at: str) -> float:
    """A scene's mAP: a number in [0, 1] (or NaN)."""
    if not is_real(value):
        raise InvalidInputError(
            f"{at}: metadata key {key}={value!r}; expected a number in [0, 1]"
        )
    number = float(value)
    if not (math.isnan(number) or 0 <= number <= 1):
        raise InvalidInputError(f"{at}: metadata key {key}={value!r} is outside [0, 1]")
    return number


def _scene_count(value: object, key: str, at: str) -> int:
    """A scene's count: an integer >= 0."""
    if not is_integer(value) or value < 0:
        raise InvalidInputError(
            f"{at}: metadata key {key}={value!r}; expected an integer >= 0"
        )
    return value  # type: ignore[return-value]


def _parse_row(path: Path, line: int, cells: dict[str, str], header: list[str]) -> WorkbenchRow:
    text = cells["experiment_id"].strip()
    if not _INTEGER.fullmatch(text):
        raise InvalidInputError(
            f"{where(path, line, 'experiment_id')}: {text!r} is not an integer"
        )
    if not _INT64[0] <= int(text) <= _INT64[1]:
        raise InvalidInputError(
            f"{where(path, line, 'experiment_id')}: {text} is outside the 64-bit integers "
            "DescriptorWorkbench's ids are"
        )
    descriptor = cells["descriptor_type"].strip()
    if not descriptor:
        raise InvalidInputError(f"{where(path, line, 'descriptor_type')}: empty")
    values: dict[str, float | None] = {}
    for column in header:
        if column in METRIC_COLUMNS or column == "processing_time_s":
            required = column in REQUIRED_COLUMNS
            values[column] = _float(
                cells[column], where(path, line, column), required=required, column=column
            )
    config = {c: cells[c] for c in header if c not in values and c != "metadata" and c != ""}
    metadata = cells.get("metadata")
    meta: dict[str, object] = {}
    scenes: dict[str, SceneValues] = {}
    if metadata is not None and metadata.strip():
        at = where(path, line, "metadata")
        try:
            meta = parse_metadata(metadata)
        except InvalidInputError as error:
            raise InvalidInputError(f"{at}: {error}") from None
        scenes = _scenes(meta, at)
    return WorkbenchRow(
        line=line,
        experiment_id=int(text),
        descriptor=descriptor,
        config=config,
        values=values,
        metadata=metadata if metadata and metadata.strip() else None,
        meta=meta,
        scenes=scenes,
    )


def read_rows(path: Path) -> list[WorkbenchRow]:
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file (expected a DescriptorWorkbench CSV)")
    rows: list[WorkbenchRow] = []
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
                        f"{where(path, row.line, 'experiment_id')}: experiment_id "
                        f"{row.experiment_id} already on line {seen[row.experiment_id]}"
                    )
                seen[row.experiment_id] = row.line
                rows.append(row)
        except (csv.Error, UnicodeDecodeError) as error:
            raise InvalidInputError(f"{path} line {reader.line_num}: {error}") from None
    if not rows:
        raise InvalidInputError(f"{path}: a header but no rows")
    return rows
