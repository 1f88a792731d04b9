"""The tables of a ``patches`` run: per benchmark file, per group of files, the metric set.

:func:`file_table` gives the patch and image retrieval mAP of every benchmark file (the cube's
``keypoint_set``), :func:`group_table` their means per split, difficulty and size (as
:meth:`metricalc.benchmarks.hpatches_patches.folder.FolderEvaluation.groups`), and
:func:`patch_metrics` the metric
set and per-sequence metrics of a patch-retrieval cube.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.benchmarks.hpatches_patches.folder import GROUPS, NAME, FolderEvaluation
from metricalc.metrics import MAP_METRICS, metric_set, scene_metrics

__all__ = ["METRIC_SET_KEPT", "file_summaries", "file_table", "group_table", "patch_metrics"]

METRIC_SET_KEPT = (
    *(
        name
        for name in MAP_METRICS
        if name.startswith(("true_map", "viewpoint_map", "illumination_map"))
        and not name.endswith("including_zeros")
    ),
    "total_queries_processed",
    "total_queries_excluded",
    "r0_rate",
    "processing_time_ms",
    "status",
    "error",
)
"""The variables of :func:`metricalc.metric_set` kept in a patch run's metric set (the others
need rank statistics or keypoint tasks, which a patch-retrieval cube does not have): the mAPs
without the queries of no relevant patch, ``true_map_micro``, ``true_map_macro_by_scene``,
``viewpoint_map``, ``illumination_map``, ``viewpoint_map_micro``, ``illumination_map_micro``,
then the counts, time and status."""


def _mean(values: np.ndarray) -> float:
    """The mean from an exactly rounded sum (:func:`math.fsum`): the same value whatever the
    order or memory layout of ``values`` (NaN for none)."""
    return math.fsum(values) / len(values) if len(values) else math.nan


def file_table(cube: xr.Dataset) -> xr.Dataset:
    r"""Per benchmark file (the cube's ``keypoint_set``) and descriptor: queries and the patch
    and image retrieval mAP, :math:`\mathrm{mAP}_f = \frac{1}{Q_f} \sum_{q \in f} AP_q`.

    Returns
    -------
    xarray.Dataset
        Over ``(descriptor, file)``: ``patch_retrieval_map``, ``image_retrieval_map``
        (float64); over ``file``: ``n_queries`` (int64) and the coordinates ``split``,
        ``difficulty``, ``size`` parsed from release-style names (``""`` otherwise).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> cube = xr.Dataset(
    ...     {"ap": (("descriptor", "query"), [[1.0, 0.5, 0.0]]),
    ...      "image_ap": (("descriptor", "query"), [[1.0, 1.0, 0.5]])},
    ...     coords={"descriptor": ["d"],
    ...             "keypoint_set": ("query", ["train_easy_2s_00", "train_easy_2s_00", "x"])})
    >>> t = file_table(cube)
    >>> t.patch_retrieval_map.values.tolist(), t.n_queries.values.tolist(), t.split.values.tolist()
    ([[0.75, 0.0]], [2, 1], ['train', ''])
    """
    stems = np.asarray(cube["keypoint_set"].values).astype(str)
    files = sorted(set(stems.tolist()))
    masks = [stems == stem for stem in files]
    out: dict[str, Any] = {}
    for name, source in (("patch_retrieval_map", "ap"), ("image_retrieval_map", "image_ap")):
        values = np.asarray(cube[source].transpose("descriptor", "query").values, np.float64)
        out[name] = (
            ("descriptor", "file"),
            np.array([[_mean(row[mask]) for mask in masks] for row in values]),
        )
    out["n_queries"] = ("file", np.array([int(mask.sum()) for mask in masks], np.int64))
    parsed = [NAME.fullmatch(stem) for stem in files]
    coords: dict[str, Any] = {"descriptor": cube["descriptor"].values, "file": files}
    for group in GROUPS:
        coords[group] = ("file", [m.group(group) if m else "" for m in parsed])
    return xr.Dataset(out, coords=coords)


def group_table(files: xr.Dataset, descriptor: str) -> pd.DataFrame:
    """Mean per-file mAPs per split, difficulty and size of one descriptor
    (:meth:`metricalc.benchmarks.hpatches_patches.folder.FolderEvaluation.groups`)."""
    one = files.sel(descriptor=descriptor)
    table = pd.DataFrame(
        {
            "descriptor": descriptor,
            "file": one["file"].values,
            **{g: [v or None for v in one[g].values.tolist()] for g in GROUPS},
            "n_queries": one["n_queries"].values,
            "patch_retrieval_map": one["patch_retrieval_map"].values,
            "image_retrieval_map": one["image_retrieval_map"].values,
        }
    )
    return FolderEvaluation(table, descriptor=descriptor).groups()


def retrieval_metrics(cube: xr.Dataset, files: xr.Dataset) -> xr.Dataset:
    """The patch-specific variables of the metric set (docs/experiments.md)."""
    descriptors = [str(d) for d in cube["descriptor"].values]
    tables = [group_table(files, d) for d in descriptors]
    labels = tables[0]["group"].tolist()
    data: dict[str, Any] = {}
    for name in ("patch_retrieval_map", "image_retrieval_map"):
        per_file = files[name].transpose("descriptor", "file").values
        data[name] = ("descriptor", [_mean(row) for row in per_file])
        data[f"{name}_by_file"] = files[name].transpose("descriptor", "file")
        data[f"{name}_by_group"] = (
            ("descriptor", "group"),
            np.array([t[name].to_numpy(np.float64) for t in tables]).reshape(len(tables), -1),
        )
    image_ap = cube["image_ap"].transpose("descriptor", "query").values
    data["image_retrieval_map_micro"] = ("descriptor", [_mean(row) for row in image_ap])
    data["n_files"] = ("descriptor", np.full(len(descriptors), files.sizes["file"], np.int64))
    data["n_files_by_group"] = (
        ("descriptor", "group"),
        np.array([t["files"].to_numpy(np.int64) for t in tables]).reshape(len(tables), -1),
    )
    return xr.Dataset(
        data, coords={"descriptor": descriptors, "file": files["file"].values, "group": labels}
    )


def patch_metrics(cube: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    """The metric set and per-sequence metrics of a patch-retrieval cube.

    Metric set: the variables of :func:`metricalc.metric_set` in :data:`METRIC_SET_KEPT`
    (``true_map_micro`` is the patch retrieval mAP over all queries, ``viewpoint_map`` and
    ``illumination_map`` the mean over the ``v_`` / ``i_`` sequences of their mAP, the
    ``*_map_micro`` variants over their queries) plus ``patch_retrieval_map``,
    ``image_retrieval_map`` (means of the per-file mAPs, HPatches' figure),
    ``image_retrieval_map_micro``, ``n_files`` and, over the dims ``file`` / ``group``,
    ``*_by_file`` and ``*_by_group``. Scene metrics: :func:`metricalc.scene_metrics`
    (``true_map`` and ``query_count`` per sequence) plus ``image_retrieval_map``.
    """
    full = metric_set(cube)
    kept = full[[name for name in METRIC_SET_KEPT if name in full.data_vars]]
    metrics = kept.assign(retrieval_metrics(cube, file_table(cube)).data_vars)
    scenes = scene_metrics(cube)[["true_map", "true_map_with_zeros", "query_count",
                                  "excluded_count"]]  # fmt: skip
    labels = np.asarray(cube["scene"].values).astype(str)
    image_ap = np.asarray(cube["image_ap"].transpose("descriptor", "query").values)
    scenes["image_retrieval_map"] = (
        ("descriptor", "scene"),
        np.array(
            [[_mean(row[labels == scene]) for scene in scenes["scene"].values] for row in image_ap]
        ).reshape(scenes.sizes["descriptor"], scenes.sizes["scene"]),
    )
    return metrics, scenes


def file_summaries(files: xr.Dataset, groups: pd.DataFrame) -> dict[str, Any]:
    """The ``files`` and ``groups`` entries of a run's ``summaries.json``: per benchmark file of
    one descriptor's :func:`file_table` and per row of its :func:`group_table`, the number of
    queries (files) and the two mAPs."""
    return {
        "files": {
            stem: {
                "n_queries": int(files["n_queries"].sel(file=stem)),
                "patch_retrieval_map": float(files["patch_retrieval_map"].sel(file=stem)),
                "image_retrieval_map": float(files["image_retrieval_map"].sel(file=stem)),
            }
            for stem in files["file"].values.tolist()
        },
        "groups": {
            row["group"]: {
                "files": int(row["files"]),
                "patch_retrieval_map": float(row["patch_retrieval_map"]),
                "image_retrieval_map": float(row["image_retrieval_map"]),
            }
            for row in groups.to_dict(orient="records")
        },
    }
