"""Experiments read back from the results database: :func:`list_experiments`,
:func:`get_experiment` and its :class:`Experiment` (the stored metric set and per-scene rows as
Datasets again). ``docs/store.md`` describes the tables.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.store import codec
from metricalc.store.database import open_db
from metricalc.store.frames import read_frame
from metricalc.store.inputs import check_text
from metricalc.store.rows import COLUMN_SOURCES
from metricalc.store.schema import SCENE_COLUMNS, SEED_COLUMNS

__all__ = ["Experiment", "get_experiment", "list_experiments"]

_FLAT_KEY = re.compile(r"(?P<name>.+)\[(?P<dim>[^=\[\]]+)=(?P<label>[^\[\]]*)\]")


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
    check_text("tag", tag)
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
    located = f"{db}: experiments row {row['benchmark']}/{tag}"
    return Experiment(
        id=int(row["id"]),
        benchmark=str(row["benchmark"]),
        tag=str(row["tag"]),
        status=str(row["status"]),
        error=str(row["error"]),
        config=codec.loads(row["config"], f"{located}, column config"),
        config_hash=str(row["config_hash"]),
        metricalc_version=str(row["metricalc_version"]),
        versions=codec.loads(row["versions"], f"{located}, column versions"),
        timings=codec.loads(row["timings"], f"{located}, column timings"),
        protocol=codec.loads(row["protocol"], f"{located}, column protocol"),
        created_at=str(row["created_at"]),
        updated_at=str(row["updated_at"]),
        results=results.drop(columns=["benchmark", "tag"]).reset_index(drop=True),
        scenes=scenes.drop(columns=["benchmark", "tag"]).reset_index(drop=True),
    )
