"""The schema of the results database and its migrations (``PRAGMA user_version``).

The database is versioned by SQLite's ``user_version`` header field: 0 is an empty file, ``n``
means migrations 1..n have been applied. :data:`MIGRATIONS` lists every migration in order; a
database is brought to :data:`SCHEMA_VERSION` by applying the missing ones in one transaction
(:func:`metricalc.store.database.connect` does it when it opens the file), so a database written
by an older metricalc is upgraded in place and keeps its data. Migrations only ever append:
version ``n`` is never edited once released, a change is a new migration.

``docs/store.md`` describes every column.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from metricalc.metrics.scenes import SCENE_METRICS
from metricalc.store import codec
from metricalc.store.metadata import parse_metadata

__all__ = [
    "EXPERIMENT_COLUMNS",
    "MIGRATIONS",
    "RESULT_COLUMNS",
    "SCENE_COLUMNS",
    "SCHEMA_VERSION",
    "SEED_COLUMNS",
    "TABLES",
]

SEED_COLUMNS = (
    "true_map_micro",
    "true_map_macro",
    "viewpoint_map",
    "illumination_map",
    "keypoint_verification_ap",
    "keypoint_retrieval_ap",
    "hit_rate_at_1",
    "hit_rate_at_5",
    "mean_average_precision",
    "processing_time_ms",
)
"""The REAL columns of the DescriptorWorkbench results table (docs/store.md, schema v3.3), in its
order; its ``metadata`` TEXT column follows them. DescriptorWorkbench's ``precision_at_1`` /
``precision_at_5`` are hit rates: version 3 names them ``hit_rate_at_1`` / ``hit_rate_at_5``."""

EXPERIMENT_COLUMNS = (
    "benchmark",
    "tag",
    "status",
    "error",
    "config_hash",
    "config",
    "metricalc_version",
    "versions",
    "timings",
    "protocol",
    "created_at",
    "updated_at",
)
"""The columns of ``experiments`` a row is written with (besides its id), in the order of
:func:`metricalc.store.to_dataframe`'s frame (the table has ``protocol`` last: version 2 added
it)."""

RESULT_COLUMNS = ("descriptor", "status", "error", *SEED_COLUMNS, "metadata", "extra")
"""The columns of ``results`` a row is written with (besides its ids)."""

SCENE_COLUMNS = ("scene", *SCENE_METRICS)
"""The columns of ``scenes`` a row is written with (besides its ids): the scene and
:func:`metricalc.scene_metrics`' variables, in their order."""

TABLES = ("experiments", "results", "scenes")
"""The tables of the database."""

_VERSION_1 = """
CREATE TABLE experiments (
    id                INTEGER PRIMARY KEY,
    benchmark         TEXT NOT NULL CHECK (length(benchmark) > 0),
    tag               TEXT NOT NULL CHECK (length(tag) > 0),
    status            TEXT NOT NULL,
    error             TEXT NOT NULL DEFAULT '',
    config_hash       TEXT NOT NULL,
    config            TEXT NOT NULL,
    metricalc_version TEXT NOT NULL,
    versions          TEXT NOT NULL DEFAULT '{}',
    timings           TEXT NOT NULL DEFAULT '{}',
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    UNIQUE (benchmark, tag)
);
CREATE TABLE results (
    id                       INTEGER PRIMARY KEY,
    experiment_id            INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    descriptor               TEXT NOT NULL CHECK (length(descriptor) > 0),
    true_map_micro           REAL,
    true_map_macro           REAL,
    viewpoint_map            REAL,
    illumination_map         REAL,
    keypoint_verification_ap REAL,
    keypoint_retrieval_ap    REAL,
    precision_at_1           REAL,
    precision_at_5           REAL,
    mean_average_precision   REAL,
    processing_time_ms       REAL,
    metadata                 TEXT,
    UNIQUE (experiment_id, descriptor)
);
CREATE TABLE scenes (
    id                  INTEGER PRIMARY KEY,
    result_id           INTEGER NOT NULL REFERENCES results (id) ON DELETE CASCADE,
    scene               TEXT NOT NULL CHECK (length(scene) > 0),
    true_map            REAL,
    true_map_with_zeros REAL,
    query_count         INTEGER NOT NULL CHECK (query_count >= 0),
    excluded_count      INTEGER NOT NULL CHECK (excluded_count >= 0),
    UNIQUE (result_id, scene)
);
"""

_VERSION_2 = """
ALTER TABLE experiments ADD COLUMN protocol TEXT NOT NULL DEFAULT '{}';
ALTER TABLE results ADD COLUMN status TEXT NOT NULL DEFAULT 'ok';
ALTER TABLE results ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN extra TEXT NOT NULL DEFAULT '{}';
ALTER TABLE scenes ADD COLUMN image_count INTEGER CHECK (image_count >= 0);
ALTER TABLE scenes ADD COLUMN mean_precision REAL;
CREATE INDEX results_by_descriptor ON results (descriptor);
"""

_METADATA_METRICS = (
    "true_map_macro_by_scene",
    "precision_at_10",
    "recall_at_1",
    "recall_at_5",
    "recall_at_10",
    "r0_rate",
    "total_queries_processed",
    "total_queries_excluded",
)
"""Metric-set values a version-1 row kept only in its metadata string; version 2 copies them
into the row's ``extra`` JSON so that they are columns of :func:`metricalc.store.to_dataframe`."""


def _migrate_1(connection: sqlite3.Connection) -> None:
    """Version 1: experiments, results (DescriptorWorkbench's columns) and per-scene rows."""
    _script(connection, _VERSION_1)


def _migrate_2(connection: sqlite3.Connection) -> None:
    """Version 2: the metric set's protocol attrs per experiment, status / error / extra metrics
    per descriptor, image count and legacy precision per scene; ``extra`` of existing rows filled
    from their metadata strings (a string that does not parse leaves ``extra`` empty)."""
    _script(connection, _VERSION_2)
    rows = connection.execute(
        "SELECT id, metadata FROM results WHERE metadata IS NOT NULL AND metadata <> ''"
    ).fetchall()
    for row_id, text in rows:
        try:
            meta = parse_metadata(text)
        except ValueError:
            continue
        extra = {
            k: meta[k]
            for k in _METADATA_METRICS
            if isinstance(meta.get(k), (int, float)) and not isinstance(meta.get(k), bool)
        }
        if extra:
            connection.execute(
                "UPDATE results SET extra = ? WHERE id = ?",
                (codec.dumps(extra, "extra"), row_id),
            )


_RENAMED_AT_K = re.compile(r"(ir_)?precision_at_([0-9]+)")


def _renamed_at_k(key: str) -> str:
    """The version-3 name of an extra metric: the hit rate ``precision_at_<k>`` becomes
    ``hit_rate_at_<k>``, the precision ``ir_precision_at_<k>`` (hits / k) ``precision_at_<k>``;
    other keys are kept."""
    match = _RENAMED_AT_K.fullmatch(key)
    if match is None:
        return key
    return f"{'precision' if match[1] else 'hit_rate'}_at_{match[2]}"


_VERSION_3 = """
ALTER TABLE results RENAME COLUMN precision_at_1 TO hit_rate_at_1;
ALTER TABLE results RENAME COLUMN precision_at_5 TO hit_rate_at_5;
"""


def _migrate_3(connection: sqlite3.Connection) -> None:
    """Version 3: one name per concept (docs/metric_set.md): the hit rates stored under
    DescriptorWorkbench's ``precision_at_<k>`` (the columns ``precision_at_1`` /
    ``precision_at_5``, keys of ``extra``) are renamed ``hit_rate_at_<k>``, and
    ``ir_precision_at_<k>`` (hits / k) ``precision_at_<k>``."""
    _script(connection, _VERSION_3)
    rows = connection.execute(
        "SELECT id, extra FROM results WHERE extra LIKE '%precision_at_%'"
    ).fetchall()
    for row_id, text in rows:
        extra = codec.loads(text, f"results row {row_id}, column extra")
        if not isinstance(extra, dict):
            continue
        renamed = {_renamed_at_k(str(k)): v for k, v in extra.items()}
        connection.execute(
            "UPDATE results SET extra = ? WHERE id = ?",
            (codec.dumps(renamed, "extra", sort_keys=False), row_id),
        )


def _script(connection: sqlite3.Connection, script: str) -> None:
    """Run the statements of ``script`` one by one (``executescript`` would commit the open
    transaction, and a migration must be one transaction)."""
    for statement in script.split(";"):
        if statement.strip():
            connection.execute(statement)


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migrate_1,
    _migrate_2,
    _migrate_3,
)
"""``MIGRATIONS[n - 1]`` brings a database from version ``n - 1`` to ``n``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this metricalc writes."""
