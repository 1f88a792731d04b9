"""A DescriptorWorkbench export stored in the results database: each file row as an experiment
of benchmark :data:`WORKBENCH_BENCHMARK` with one ``results`` row and its scene rows
(``docs/store.md``, "The DescriptorWorkbench import"), all in one transaction
(:func:`store_rows`).
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.store.database import open_db, transaction
from metricalc.store.records import write_experiment
from metricalc.store.rows import ExperimentRow, ResultRow, experiment_row
from metricalc.store.schema import SEED_COLUMNS
from metricalc.store.workbench_check import SPLIT_MAPS, row_status
from metricalc.store.workbench_file import METRIC_COLUMNS, WorkbenchRow
from metricalc.validation import is_real

__all__ = ["METADATA_METRICS", "METADATA_TIMINGS", "WORKBENCH_BENCHMARK", "store_rows"]

WORKBENCH_BENCHMARK = "descriptorworkbench"
"""The benchmark name of imported experiments."""

METADATA_METRICS = {
    "precision_at_10": "hit_rate_at_10",
    "recall_at_10": "recall_at_10",
    "r0_rate": "r0_rate",
    "total_queries_processed": "total_queries_processed",
    "total_queries_excluded": "total_queries_excluded",
}
"""Metadata key -> extra metric it is copied to, under the metric set's name
(DescriptorWorkbench's ``precision_at_10`` is the hit rate ``hit_rate_at_10``); the other keys
stay in the verbatim string."""

METADATA_TIMINGS = {
    "detect_time_ms": "detect",
    "compute_time_ms": "compute",
    "match_time_ms": "match",
}
"""Metadata keys (milliseconds) recorded as the experiment's timings (seconds)."""

_INTEGER_COLUMNS = frozenset(("total_matches", "total_keypoints"))


Planned = tuple[ExperimentRow, ResultRow]
"""An experiment to write and its one ``results`` row."""


def store_rows(
    db: str | os.PathLike[str],
    rows: Sequence[WorkbenchRow],
    *,
    source: str,
    failed: Mapping[int, list[dict[str, Any]]],
    recomputed: Mapping[int, dict[str, float]],
    tag_prefix: str,
    overwrite: bool,
) -> list[str]:
    """Store every row as an experiment tagged ``<tag_prefix><experiment_id>``, in one
    transaction, and return the tags. ``source`` is the file name recorded in each config,
    ``failed`` the failed checks per file line, ``recomputed`` the recomputed values per line.

    Raises
    ------
    InvalidInputError
        Without ``overwrite``, a tag that holds a different import (another config hash).
    """
    planned = [
        _planned(row, source, row_status(row, failed.get(row.line, [])),
                 recomputed.get(row.line), tag_prefix)
        for row in rows
    ]
    with open_db(db) as connection, transaction(connection):
        if not overwrite:
            _refuse_clashes(connection, planned)
        for experiment, result in planned:
            write_experiment(connection, experiment, [result])
    return [experiment.tag for experiment, _ in planned]


def _planned(
    row: WorkbenchRow,
    source: str,
    status: tuple[str, str],
    recomputed: dict[str, float] | None,
    tag_prefix: str,
) -> Planned:
    """The experiment and ``results`` rows of one file row."""
    experiment = experiment_row(
        tag=f"{tag_prefix}{row.experiment_id}",
        benchmark=WORKBENCH_BENCHMARK,
        config={"source": source, **row.config},
        status=status[0],
        error=status[1],
        timings=_timings(row),
        versions=None,
        protocol={"source_format": "DescriptorWorkbench export"},
    )
    return experiment, _result_row(row, status, recomputed)


def _result_row(
    row: WorkbenchRow, status: tuple[str, str], recomputed: dict[str, float] | None
) -> ResultRow:
    """The ``results`` row (and scene rows) of one file row (docs/store.md, "What is stored")."""
    columns, extra = _file_values(row)
    if recomputed is not None:
        for name in SPLIT_MAPS:
            if name in SEED_COLUMNS:
                columns[name] = json_safe(recomputed[name])
            else:
                extra[name] = json_safe(recomputed[name])
    for key, name in METADATA_METRICS.items():
        value = row.meta.get(key)
        if is_real(value):
            extra.setdefault(name, value)
    scenes: list[tuple[Any, ...]] = [
        (s, json_safe(m), json_safe(z), q, e, None, None) for s, (m, z, q, e) in row.scenes.items()
    ]
    return ResultRow(
        descriptor=row.descriptor,
        status=status[0],
        error=status[1],
        columns={k: json_safe(v) for k, v in columns.items()},
        metadata=row.metadata,
        extra={k: json_safe(v) if isinstance(v, float) else v for k, v in extra.items()},
        scenes=scenes,
    )


def _file_values(row: WorkbenchRow) -> tuple[dict[str, float | None], dict[str, Any]]:
    """The file's metric columns of a row: (seed columns, extra metrics) under their stored
    names (:data:`~metricalc.store.workbench_file.METRIC_COLUMNS`)."""
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
    return columns, extra


def _timings(row: WorkbenchRow) -> dict[str, float]:
    """The experiment's timings (seconds) from the metadata and the processing-time column."""
    out: dict[str, float] = {}
    for key, name in METADATA_TIMINGS.items():
        value = row.meta.get(key)
        if is_real(value) and value >= 0:
            out[name] = float(value) / 1000.0
    processing_ms = row.values.get("processing_time_ms")
    processing_s = row.values.get("processing_time_s")
    if processing_ms is not None:
        out["processing"] = processing_ms / 1000.0
    elif processing_s is not None:
        out["processing"] = processing_s
    return {k: v for k, v in out.items() if math.isfinite(v) and v >= 0}


def _refuse_clashes(connection: sqlite3.Connection, planned: list[Planned]) -> None:
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
