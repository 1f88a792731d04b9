"""Experiments written to the results database: record one (the transaction and its SQL).

An experiment is one run of one benchmark under a tag (``metricalc run hpatches --tag TAG``, or a
row imported from DescriptorWorkbench): a row of ``experiments``, one row of ``results`` per
descriptor and one row of ``scenes`` per (descriptor, scene). :func:`record_experiment` writes (or
replaces) all of it in one transaction; :func:`~metricalc.store.list_experiments` and
:func:`~metricalc.store.get_experiment` read it back (:mod:`metricalc.store.reading`). The rows
written are built and checked in :mod:`metricalc.store.rows`; ``docs/store.md`` describes the
tables.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import xarray as xr

from metricalc.store import codec
from metricalc.store.database import open_db, transaction
from metricalc.store.rows import ExperimentRow, ResultRow, SceneRow, experiment_row, result_rows
from metricalc.store.schema import EXPERIMENT_COLUMNS, RESULT_COLUMNS, SCENE_COLUMNS, SEED_COLUMNS

__all__ = ["record_experiment", "write_experiment"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def write_experiment(
    connection: sqlite3.Connection, experiment: ExperimentRow, results: Sequence[ResultRow]
) -> int:
    """Upsert ``experiment`` by (benchmark, tag) and replace its results and scenes; inside the
    caller's transaction. Returns the experiment id."""
    now = _now()
    (experiment_id,) = connection.execute(
        f"INSERT INTO experiments ({', '.join(EXPERIMENT_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(EXPERIMENT_COLUMNS))}) "
        "ON CONFLICT (benchmark, tag) DO UPDATE SET status = excluded.status, "
        "error = excluded.error, config_hash = excluded.config_hash, config = excluded.config, "
        "metricalc_version = excluded.metricalc_version, versions = excluded.versions, "
        "timings = excluded.timings, protocol = excluded.protocol, "
        "updated_at = excluded.updated_at "
        "RETURNING id",
        (
            experiment.benchmark,
            experiment.tag,
            experiment.status,
            experiment.error,
            experiment.config_hash,
            experiment.config,
            experiment.versions["metricalc"],
            codec.dumps(experiment.versions, "versions"),
            codec.dumps(experiment.timings, "timings"),
            codec.dumps(experiment.protocol, "protocol"),
            now,
            now,
        ),
    ).fetchone()
    connection.execute("DELETE FROM results WHERE experiment_id = ?", (experiment_id,))
    names = ("experiment_id", *RESULT_COLUMNS)
    insert_result = (
        f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
        "RETURNING id"
    )
    scene_names = ("result_id", *SCENE_COLUMNS)
    insert_scene = (
        f"INSERT INTO scenes ({', '.join(scene_names)}) "
        f"VALUES ({', '.join('?' * len(scene_names))})"
    )
    for row in results:
        values = (
            experiment_id,
            row.descriptor,
            row.status,
            row.error,
            *(row.columns.get(c) for c in SEED_COLUMNS),
            row.metadata,
            codec.dumps(row.extra, f"extra of {row.descriptor!r}", sort_keys=False),
        )
        (result_id,) = connection.execute(insert_result, values).fetchone()
        _insert_scenes(connection, result_id, row.scenes, insert_scene)
    return int(experiment_id)


def _insert_scenes(
    connection: sqlite3.Connection, result_id: int, rows: Sequence[SceneRow], statement: str
) -> None:
    connection.executemany(statement, [(result_id, *row) for row in rows])


def record_experiment(
    db: str | os.PathLike[str],
    *,
    tag: str,
    benchmark: str,
    config: Any,
    status: str = "ok",
    error: str = "",
    timings: Mapping[str, float] | None = None,
    versions: Mapping[str, str] | None = None,
    metrics: xr.Dataset | None = None,
    scenes: xr.Dataset | None = None,
) -> int:
    """Record one experiment in the database ``db``, replacing any earlier one of the same
    (benchmark, tag); returns its id.

    Everything is written in one transaction: the experiment row, one ``results`` row per
    descriptor of ``metrics`` and one ``scenes`` row per (descriptor, scene) with queries. An
    error at any point (a bad value, a full disk, Ctrl-C) leaves the database as it was, the
    earlier experiment of that tag included. The id of an experiment is kept when it is
    replaced; ``created_at`` too, ``updated_at`` is set to now (UTC).

    Parameters
    ----------
    db : path
        The database file (created with its folder if missing; ``DEFAULT_DB`` is
        ``outputs/metricalc.sqlite``).
    tag, benchmark : str
        Non-empty; together they name the experiment (e.g. ``"sift"``, ``"hpatches"``).
    config : mapping, OmegaConf config or YAML text
        The run's merged configuration. Stored as canonical JSON (keys sorted), with
        ``config_hash`` = SHA-256 of that text, so equal configs have equal hashes whatever their
        key order.
    status : {"ok", "error", "mismatch"}
        ``"error"`` for a failed run (then ``error`` says why, and ``metrics`` may be None).
    error : str
        The error message; must be empty for ``"ok"`` and non-empty otherwise.
    timings : mapping of str to float, optional
        Seconds per step, e.g. ``{"export": 12.5, "eval": 3.1}``.
    versions : mapping of str to str, optional
        Versions to record on top of :func:`library_versions` (metricalc, Python, SQLite, numpy,
        ...), which are always recorded; a key given here replaces the detected one.
    metrics : xarray.Dataset, optional
        The metric set, as :func:`metricalc.metric_set` returns it (over ``descriptor``; may be
        dask-backed or read back from netCDF). The seed's columns are filled per
        :data:`COLUMN_SOURCES`; every other numeric variable goes to the row's ``extra`` JSON
        (a variable over ``(descriptor, d)``, e.g. ``rank_histogram``, as keys
        ``name[d=label]``); ``status`` / ``error`` give each descriptor's status; the Dataset's
        attrs (the protocol) go to the experiment's ``protocol``. ``metadata`` is the
        DescriptorWorkbench string of :func:`metricalc.store.metadata.metadata_for` (NULL for a
        Dataset without the metric set's keys). NaN and infinities are stored as NULL.
    scenes : xarray.Dataset, optional
        The per-scene metrics of the same cube (:func:`metricalc.scene_metrics`, over
        ``(descriptor, scene)``): one ``scenes`` row per descriptor and scene with
        ``query_count + excluded_count > 0``, and the per-scene keys of ``metadata``.

    Returns
    -------
    int
        The experiment's id (the ``experiments.id`` column).

    Raises
    ------
    InvalidInputError
        A bad argument (named in the message); nothing is written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import metricalc as mc
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.store import get_experiment, record_experiment
    >>> cube = example_cube()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     db = pathlib.Path(tmp) / "results.sqlite"
    ...     record_experiment(db, tag="demo", benchmark="hpatches", config={"model": "sift"},
    ...                       metrics=mc.metric_set(cube), scenes=mc.scene_metrics(cube))
    ...     row = get_experiment(db, "demo").results.iloc[0]
    1
    >>> row.descriptor, float(row.true_map_micro), int(row.total_queries_excluded)
    ('sift', 0.75, 1)
    >>> row.metadata[:55]
    'i_x_excluded_count=1;i_x_query_count=2;i_x_true_map=0.7'
    """
    protocol = dict(metrics.attrs) if isinstance(metrics, xr.Dataset) else {}
    experiment = experiment_row(
        tag=tag,
        benchmark=benchmark,
        config=config,
        status=status,
        error=error,
        timings=timings,
        versions=versions,
        protocol=protocol,
    )
    rows = result_rows(metrics, scenes)
    with open_db(db) as connection, transaction(connection):
        return write_experiment(connection, experiment, rows)

