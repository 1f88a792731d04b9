"""Experiments in the results database: record one, list them, read one back.

An experiment is one run of one benchmark under a tag (``metricalc eval hpatches --tag TAG``, or a
row imported from DescriptorWorkbench): a row of ``experiments``, one row of ``results`` per
descriptor and one row of ``scenes`` per (descriptor, scene). :func:`record_experiment` writes (or
replaces) all of it in one transaction; :func:`list_experiments` and :func:`get_experiment` read
it back. ``docs/store.md`` describes the tables.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import os
import platform
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.store import codec
from metricalc.store.database import open_db, transaction
from metricalc.store.frames import read_frame
from metricalc.store.metadata import SCENE_KEYS, format_metadata, metadata_for
from metricalc.store.schema import RESULT_COLUMNS, SCENE_COLUMNS, SEED_COLUMNS

__all__ = [
    "COLUMN_SOURCES",
    "STATUSES",
    "Experiment",
    "get_experiment",
    "library_versions",
    "list_experiments",
    "record_experiment",
]

STATUSES = ("ok", "error", "mismatch")
"""Experiment and descriptor statuses: ``ok``; ``error`` (the run or descriptor failed, the
message in ``error``); ``mismatch`` (an imported row whose own summary disagrees with its
per-scene values, the differences in ``error``)."""

COLUMN_SOURCES: dict[str, str] = {
    "true_map_micro": "true_map_micro",
    "true_map_macro": "true_map_macro_by_scene",
    "viewpoint_map": "viewpoint_map",
    "illumination_map": "illumination_map",
    "keypoint_verification_ap": "keypoint_verification_ap",
    "keypoint_retrieval_ap": "keypoint_retrieval_ap",
    "precision_at_1": "precision_at_1",
    "precision_at_5": "precision_at_5",
    "mean_average_precision": "true_map_macro_by_scene",
    "processing_time_ms": "processing_time_ms",
}
"""The metric-set variable (:func:`metricalc.metric_set`) each seed column of ``results`` is
filled from. ``mean_average_precision`` is the seed's legacy column; in the real
DescriptorWorkbench export it equals ``true_map_macro`` on every row, so it is filled with the
same value."""

_LIBRARIES = (
    "numpy",
    "scipy",
    "pandas",
    "xarray",
    "scikit-learn",
    "opencv-python-headless",
    "scikit-image",
    "h5py",
    "h5netcdf",
    "dask",
)
_FLAT_KEY = re.compile(r"(?P<name>.+)\[(?P<dim>[^=\[\]]+)=(?P<label>[^\[\]]*)\]")
_NO_MESSAGE = "(no error message was recorded)"
_EXTRA_RESERVED = frozenset((*RESULT_COLUMNS, "benchmark", "tag"))


# --------------------------------------------------------------------------------------------
# Validation of plain values
# --------------------------------------------------------------------------------------------


def _text(name: str, value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        what = "a string" if empty else "a non-empty string"
        raise InvalidInputError(f"{name} must be {what}; got {value!r}")
    return value


def _status(status: Any, error: Any, where: str) -> tuple[str, str]:
    if status not in STATUSES:
        raise InvalidInputError(f"{where}status must be one of {list(STATUSES)}; got {status!r}")
    error = _text(f"{where}error", error, empty=True)
    if status != "ok" and not error.strip():
        raise InvalidInputError(
            f"{where}status {status!r} needs an error message saying what went wrong"
        )
    if status == "ok" and error:
        raise InvalidInputError(
            f"{where}error is {error!r} but status is 'ok'; give status='error' for a failure"
        )
    return status, error


def _config(config: Any) -> tuple[str, str]:
    """Canonical JSON text of a config and its SHA-256."""
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        config = OmegaConf.to_container(config, resolve=True)
    elif isinstance(config, str):
        import yaml

        try:
            parsed = yaml.safe_load(config)
        except yaml.YAMLError as error:
            raise InvalidInputError(f"config is a string but not valid YAML: {error}") from error
        if not isinstance(parsed, Mapping):
            raise InvalidInputError(
                f"config text must hold a mapping (YAML or JSON object); got "
                f"{type(parsed).__name__}"
            )
        config = parsed
    if not isinstance(config, Mapping):
        raise InvalidInputError(
            f"config must be a mapping, an OmegaConf config or YAML text; got "
            f"{type(config).__name__}"
        )
    text = codec.dumps(config, "config")
    return text, codec.sha256(text)


def _timings(timings: Any) -> dict[str, float]:
    if timings is None:
        return {}
    if not isinstance(timings, Mapping):
        raise InvalidInputError(
            f"timings must be a mapping of step name to seconds; got {type(timings).__name__}"
        )
    out = {}
    for key, value in timings.items():
        _text("timings key", key)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidInputError(f"timings[{key!r}] must be a number of seconds; got {value!r}")
        if not math.isfinite(float(value)) or float(value) < 0:
            raise InvalidInputError(
                f"timings[{key!r}] must be a finite number of seconds >= 0; got {value!r}"
            )
        out[key] = float(value)
    return out


def library_versions() -> dict[str, str]:
    """Versions of metricalc, Python, SQLite and the installed libraries metricalc uses.

    Looked up once per process (reading package metadata takes milliseconds per package).

    Examples
    --------
    >>> from metricalc.store import library_versions
    >>> sorted(library_versions())[:3]
    ['dask', 'h5netcdf', 'h5py']
    """
    return dict(_detected_versions())


@functools.cache
def _detected_versions() -> tuple[tuple[str, str], ...]:
    import metricalc

    out = {
        "metricalc": metricalc.__version__,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    for name in _LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(out.items())


def _versions(versions: Any) -> dict[str, str]:
    out = library_versions()
    if versions is None:
        return out
    if not isinstance(versions, Mapping):
        raise InvalidInputError(
            f"versions must be a mapping of name to version string; got {type(versions).__name__}"
        )
    for key, value in versions.items():
        _text("versions key", key)
        out[key] = _text(f"versions[{key!r}]", value)
    return out


# --------------------------------------------------------------------------------------------
# Rows from the metric-set and scene-metrics Datasets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ResultRow:
    """One ``results`` row and its ``scenes`` rows, ready to insert."""

    descriptor: str
    status: str = "ok"
    error: str = ""
    columns: dict[str, float | None] = field(default_factory=dict)
    metadata: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    scenes: list[tuple[Any, ...]] = field(default_factory=list)


def _number(value: Any) -> float | int | None:
    """A Python number for the database; NaN and infinities (undefined) are NULL."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _str(value: Any) -> str:
    """A label or status as text (netCDF may give bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _labels(data: xr.Dataset, dim: str, what: str) -> list[str]:
    labels = [_str(v) for v in data[dim].values.tolist()]
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


def _metric_values(metrics: xr.Dataset, descriptors: list[str]) -> tuple[dict, dict, dict]:
    """Per descriptor: the seed columns, the extra metrics, and (status, error)."""
    columns: dict[str, dict[str, float | None]] = {d: {} for d in descriptors}
    extra: dict[str, dict[str, Any]] = {d: {} for d in descriptors}
    status = {d: ("ok", "") for d in descriptors}
    sources = set(COLUMN_SOURCES.values())
    for name, variable in metrics.data_vars.items():
        name = str(name)
        if "descriptor" not in variable.dims or variable.ndim > 2:
            raise InvalidInputError(
                f"metrics variable {name!r} has dims {variable.dims}; expected ('descriptor',) "
                "or ('descriptor', <one more dim>)"
            )
        variable = variable.transpose("descriptor", ...)
        if name in ("status", "error"):
            continue
        if variable.dtype.kind not in "biuf":
            raise InvalidInputError(
                f"metrics variable {name!r} has dtype {variable.dtype}; expected numbers (only "
                "'status' and 'error' may be strings)"
            )
        if variable.ndim == 1 and name in sources:
            for d, value in zip(descriptors, variable.values, strict=True):
                for column, source in COLUMN_SOURCES.items():
                    if source == name:
                        columns[d][column] = _number(value)
            continue
        if variable.ndim == 1:
            if name in _EXTRA_RESERVED:
                raise InvalidInputError(
                    f"metrics variable {name!r} has the name of a results column; rename it"
                )
            for d, value in zip(descriptors, variable.values, strict=True):
                extra[d][name] = _number(value)
            continue
        dim = str(variable.dims[1])
        labels = (
            [_str(v) for v in variable[dim].values.tolist()]
            if dim in variable.coords
            else [str(i) for i in range(variable.shape[1])]
        )
        for d, row in zip(descriptors, variable.values, strict=True):
            for label, value in zip(labels, row, strict=True):
                extra[d][f"{name}[{dim}={label}]"] = _number(value)
    if "status" in metrics.data_vars:
        errors = (
            metrics["error"].values.tolist()
            if "error" in metrics.data_vars
            else [""] * len(descriptors)
        )
        for d, s, e in zip(descriptors, metrics["status"].values.tolist(), errors, strict=True):
            s, e = _str(s), "" if e is None else _str(e)
            if s != "ok" and not e.strip():
                e = _NO_MESSAGE  # a failure reported without a message is still recorded
            status[d] = _status(s, e, f"metrics descriptor {d!r}: ")
    return columns, extra, status


def _scene_rows(scenes: xr.Dataset, descriptors: list[str]) -> dict[str, list[tuple]]:
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
    arrays = {}
    for key in SCENE_COLUMNS[1:]:
        if key in scenes.data_vars:
            arrays[key] = scenes[key].transpose("descriptor", "scene").values
    for key in ("query_count", "excluded_count", "image_count"):
        if key not in arrays:
            continue
        values = np.asarray(arrays[key], dtype=np.float64)
        if not (np.isfinite(values).all() and (values >= 0).all() and (values % 1 == 0).all()):
            raise InvalidInputError(
                f"scenes variable {key!r} must hold integers >= 0; got {values.tolist()}"
            )
    out: dict[str, list[tuple]] = {d: [] for d in descriptors}
    for i, d in enumerate(scene_descriptors):
        for j, scene in enumerate(names):
            if arrays["query_count"][i, j] + arrays["excluded_count"][i, j] == 0:
                continue
            row = [scene]
            for key in SCENE_COLUMNS[1:]:
                row.append(_number(arrays[key][i, j]) if key in arrays else None)
            out[d].append(tuple(row))
    return out


def _result_rows(metrics: Any, scenes: Any) -> list[_ResultRow]:
    """The ``results`` rows (with their scene rows) of one metric set."""
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
    columns, extra, status = _metric_values(metrics, descriptors)
    scene_rows = _scene_rows(scenes, descriptors) if scenes is not None else {}
    rows = []
    for d in descriptors:
        try:
            metadata: str | None = format_metadata(metadata_for(metrics, scenes, d))
        except InvalidInputError:
            metadata = None  # not a metric_set output (no DescriptorWorkbench keys)
        rows.append(
            _ResultRow(
                descriptor=d,
                status=status[d][0],
                error=status[d][1],
                columns=columns[d],
                metadata=metadata,
                extra=extra[d],
                scenes=scene_rows.get(d, []),
            )
        )
    return rows


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ExperimentRow:
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


def _experiment_row(
    *,
    tag: Any,
    benchmark: Any,
    config: Any,
    status: Any,
    error: Any,
    timings: Any,
    versions: Any,
    protocol: Mapping[str, Any],
) -> _ExperimentRow:
    status, error = _status(status, error, "")
    text, digest = _config(config)
    return _ExperimentRow(
        benchmark=_text("benchmark", benchmark),
        tag=_text("tag", tag),
        status=status,
        error=error,
        config=text,
        config_hash=digest,
        versions=_versions(versions),
        timings=_timings(timings),
        protocol=codec.plain(dict(protocol), "protocol"),
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _write(
    connection: sqlite3.Connection, experiment: _ExperimentRow, results: Sequence[_ResultRow]
) -> int:
    """Upsert ``experiment`` by (benchmark, tag) and replace its results and scenes; inside the
    caller's transaction. Returns the experiment id."""
    now = _now()
    (experiment_id,) = connection.execute(
        "INSERT INTO experiments (benchmark, tag, status, error, config_hash, config, "
        "metricalc_version, versions, timings, protocol, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
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
    connection: sqlite3.Connection, result_id: int, rows: Sequence[tuple], statement: str
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
    experiment = _experiment_row(
        tag=tag,
        benchmark=benchmark,
        config=config,
        status=status,
        error=error,
        timings=timings,
        versions=versions,
        protocol=protocol,
    )
    rows = _result_rows(metrics, scenes)
    with open_db(db) as connection, transaction(connection):
        return _write(connection, experiment, rows)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def list_experiments(db: str | os.PathLike[str], *, benchmark: str | None = None) -> pd.DataFrame:
    """The experiments of ``db`` (optionally of one benchmark), one row each, sorted by
    benchmark and tag.

    Columns: ``id``, ``benchmark``, ``tag``, ``status``, ``error``, ``descriptors`` (number of
    results rows), ``config_hash``, ``metricalc_version``, ``created_at``, ``updated_at``.

    Raises
    ------
    InvalidInputError
        No database at ``db``.
    """
    with open_db(db, create=False) as connection:
        frame = read_frame(connection, "experiments", benchmark=benchmark)
        counts = dict(connection.execute("SELECT experiment_id, COUNT(*) FROM results GROUP BY 1"))
    frame["descriptors"] = np.array([counts.get(i, 0) for i in frame["id"]], dtype=np.int64)
    return frame[
        [
            "id",
            "benchmark",
            "tag",
            "status",
            "error",
            "descriptors",
            "config_hash",
            "metricalc_version",
            "created_at",
            "updated_at",
        ]
    ]


@dataclass(frozen=True)
class Experiment:
    """One experiment read back from the database (:func:`get_experiment`).

    ``config``, ``versions``, ``timings`` and ``protocol`` are the stored JSON as Python values;
    ``results`` is the experiment's part of ``to_dataframe(db, "results")`` (one row per
    descriptor) and ``scenes`` of ``to_dataframe(db, "scenes")``.
    """

    id: int
    benchmark: str
    tag: str
    status: str
    error: str
    config: dict[str, Any]
    config_hash: str
    metricalc_version: str
    versions: dict[str, str]
    timings: dict[str, float]
    protocol: dict[str, Any]
    created_at: str
    updated_at: str
    results: pd.DataFrame
    scenes: pd.DataFrame

    def metric_set(self) -> xr.Dataset:
        """The stored metric set as a Dataset over ``descriptor``, under the metric set's names
        (``true_map_macro`` read back as ``true_map_macro_by_scene``; ``mean_average_precision``,
        a copy, left out; ``name[d=label]`` extras as variables over ``(descriptor, d)``);
        attrs = the protocol. NULL reads as NaN."""
        frame = self.results.set_index("descriptor")
        index = pd.Index(frame.index.astype(str), name="descriptor")
        data: dict[str, Any] = {}
        for column, source in COLUMN_SOURCES.items():
            if column != "mean_average_precision":
                data[source] = ("descriptor", frame[column].to_numpy(np.float64))
        grouped: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        fixed = {"benchmark", "tag", "status", "error", "metadata", *SEED_COLUMNS}
        for column in frame.columns:
            if column in fixed:
                continue
            values = frame[column]
            array = (
                values.to_numpy(np.int64)
                if str(values.dtype) == "Int64" and not values.isna().any()
                else values.to_numpy(np.float64, na_value=np.nan)
            )
            flat = _FLAT_KEY.fullmatch(column)
            if flat:
                grouped.setdefault((flat["name"], flat["dim"]), {})[flat["label"]] = array
            else:
                data[column] = ("descriptor", array)
        for (name, dim), by_label in grouped.items():
            labels = list(by_label)
            stacked = np.stack([by_label[label] for label in labels], axis=1)
            data[name] = xr.DataArray(
                stacked, dims=("descriptor", dim), coords={"descriptor": index, dim: labels}
            )
        data["status"] = ("descriptor", frame["status"].to_numpy(object))
        data["error"] = ("descriptor", frame["error"].to_numpy(object))
        return xr.Dataset(data, coords={"descriptor": index}, attrs=dict(self.protocol))

    def scene_metrics(self) -> xr.Dataset:
        """The stored per-scene rows as a Dataset over ``(descriptor, scene)``: NaN (floats)
        and 0 (counts) where a descriptor has no row for a scene; ``image_count`` /
        ``mean_precision`` only when stored."""
        frame = self.scenes.set_index(["descriptor", "scene"])
        descriptors = self.results["descriptor"].astype(str).tolist()
        names = sorted(set(frame.index.get_level_values("scene").astype(str)))
        full = pd.MultiIndex.from_product([descriptors, names], names=["descriptor", "scene"])
        data = {}
        for key in SCENE_COLUMNS[1:]:
            column = frame[key]
            if column.isna().all() and key in ("image_count", "mean_precision"):
                continue
            counts = key.endswith("_count")
            values = column.reindex(full)
            if counts:
                array = values.fillna(0).to_numpy(np.int64)
            else:
                array = values.to_numpy(np.float64, na_value=np.nan)
            data[key] = (("descriptor", "scene"), array.reshape(len(descriptors), len(names)))
        return xr.Dataset(data, coords={"descriptor": descriptors, "scene": names})


def get_experiment(
    db: str | os.PathLike[str], tag: str, *, benchmark: str | None = None
) -> Experiment:
    """The experiment ``tag`` (of ``benchmark``, needed when several benchmarks have that tag).

    Raises
    ------
    InvalidInputError
        No database at ``db``; no such experiment (the message lists the tags there are); a tag
        of several benchmarks without ``benchmark``.
    """
    _text("tag", tag)
    with open_db(db, create=False) as connection:
        connection.execute("BEGIN")  # one snapshot for the three reads
        try:
            experiments = read_frame(connection, "experiments", benchmark=benchmark, tags=[tag])
            if len(experiments) == 0:
                known = read_frame(connection, "experiments", benchmark=benchmark)
                listed = sorted(set(known["tag"]))
                where = f" of benchmark {benchmark!r}" if benchmark is not None else ""
                raise InvalidInputError(
                    f"no experiment with tag {tag!r}{where} in {db}; it has "
                    f"{listed[:20]}{' ...' if len(listed) > 20 else ''}"
                )
            if len(experiments) > 1:
                raise InvalidInputError(
                    f"tag {tag!r} exists in benchmarks {sorted(experiments['benchmark'])}; "
                    "name one (benchmark= or --benchmark)"
                )
            row = experiments.iloc[0]
            chosen = {"benchmark": row["benchmark"], "tags": [tag]}
            results = read_frame(connection, "results", **chosen)
            scenes = read_frame(connection, "scenes", **chosen)
        finally:
            connection.execute("COMMIT")
    return Experiment(
        id=int(row["id"]),
        benchmark=str(row["benchmark"]),
        tag=str(row["tag"]),
        status=str(row["status"]),
        error=str(row["error"]),
        config=codec.loads(row["config"]),
        config_hash=str(row["config_hash"]),
        metricalc_version=str(row["metricalc_version"]),
        versions=codec.loads(row["versions"]),
        timings=codec.loads(row["timings"]),
        protocol=codec.loads(row["protocol"]),
        created_at=str(row["created_at"]),
        updated_at=str(row["updated_at"]),
        results=results.drop(columns=["benchmark", "tag"]).reset_index(drop=True),
        scenes=scenes.drop(columns=["benchmark", "tag"]).reset_index(drop=True),
    )
