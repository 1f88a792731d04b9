"""Scene-level metrics: the per-scene mAPs of DescriptorWorkbench and :func:`scene_metrics`.

A scene's queries give its AP sum and its R = 1 and R = 0 counts (:func:`scene_sums`); the
scene-based mAPs of the metric set and their viewpoint / illumination splits
(:data:`SPLIT_LETTERS`) are means over the scenes (:func:`scene_maps`). The legacy precision of
an image pair (:func:`pair_precision`) is the mean of ``nn_correct`` over its queries.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.metrics.reductions import (
    PAIR_UNIT,
    QUERY_VARS,
    group_nanmean,
    group_sum,
    nanmean,
    partition,
    prepare_cube,
    ratio,
    unit_scene,
)

__all__ = [
    "SCENE_METRICS",
    "SPLIT_LETTERS",
    "pair_precision",
    "precision_of_pairs",
    "scene_maps",
    "scene_metrics",
    "scene_sums",
]

SPLIT_LETTERS = (("viewpoint", "v"), ("illumination", "i"))
"""DescriptorWorkbench's split of the scenes (``ExperimentMetrics::addQueryAP``): a scene whose
name starts with ``v`` is a viewpoint scene, with ``i`` an illumination scene (HPatches ``v_*`` /
``i_*``); any other scene belongs to neither."""

SCENE_METRICS = (
    "true_map",
    "true_map_with_zeros",
    "query_count",
    "excluded_count",
    "image_count",
    "mean_precision",
)
"""The variables of :func:`scene_metrics`, in their order."""


def pair_precision(cube: xr.Dataset) -> xr.DataArray:
    """Legacy precision of every image pair: mean of ``nn_correct`` over the pair's queries
    (over ``descriptor`` x ``_pair_unit``, with coordinate ``_unit_scene``)."""
    correct = group_sum(cube["nn_correct"] == 1, PAIR_UNIT)
    counted = group_sum(cube["nn_correct"] >= 0, PAIR_UNIT)
    return precision_of_pairs(correct, counted)


def precision_of_pairs(correct: xr.DataArray, counted: xr.DataArray) -> xr.DataArray:
    """:func:`pair_precision` from the counts of every image pair (over ``descriptor`` x
    ``_pair_unit``): its queries with ``nn_correct == 1`` and with ``nn_correct >= 0``."""
    result = ratio(correct, counted)
    return result.assign_coords(_unit_scene=(PAIR_UNIT, unit_scene(result[PAIR_UNIT].values)))


def _ap_sums(cube: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """AP over R = 1 queries (NaN elsewhere), and the R = 1 and R = 0 masks."""
    r1 = cube["n_relevant"] == 1
    r0 = cube["n_relevant"] == 0
    return cube["ap"].where(r1), r1, r0


def scene_sums(cube: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Per scene: the AP sum over R = 1 queries and the R = 1 and R = 0 counts (one grouped
    sum each; :func:`~metricalc.metrics.metric_set` derives its totals from them)."""
    ap, r1, r0 = _ap_sums(cube)
    return group_sum(ap.fillna(0), "scene"), group_sum(r1, "scene"), group_sum(r0, "scene")


def scene_maps(ap_sum: xr.DataArray, n1: xr.DataArray, n0: xr.DataArray) -> dict[str, xr.DataArray]:
    r"""The scene-based mAPs of DescriptorWorkbench (``ExperimentMetrics::calculateMeanPrecision``)
    and the query-weighted ``*_map_micro`` split variants.

    Per scene :math:`s` (the arguments, from :func:`scene_sums`): the AP sum :math:`S_s`, the
    R = 1 and R = 0 counts :math:`n^1_s`, :math:`n^0_s`; :math:`m_s = S_s / n^1_s` and
    :math:`z_s = S_s / (n^1_s + n^0_s)`; then means over the scenes, a split being the scenes
    whose name starts with ``v`` / ``i`` (:data:`SPLIT_LETTERS`). A mean over no scene is NaN.
    """
    scene_map = ratio(ap_sum, n1)  # NaN for a scene without R = 1 queries
    with_zeros = ratio(ap_sum, n1 + n0)  # NaN for a scene without any query
    names = np.asarray(ap_sum["scene"].values).astype(str)
    out = {
        "true_map_macro_by_scene": nanmean(scene_map, "scene"),
        # DescriptorWorkbench averages over its per_scene_ap map: scenes with an R = 1 query
        "true_map_macro_by_scene_including_zeros": nanmean(with_zeros.where(n1 > 0), "scene"),
    }
    for split, letter in SPLIT_LETTERS:
        part = xr.DataArray(
            np.char.startswith(names, letter), dims="scene", coords={"scene": ap_sum["scene"]}
        )
        out[f"{split}_map"] = nanmean(scene_map.where(part), "scene")
        out[f"{split}_map_micro"] = ratio(
            ap_sum.where(part, 0).sum("scene"), n1.where(part, 0).sum("scene")
        )
        out[f"{split}_map_including_zeros"] = nanmean(with_zeros.where(part), "scene")
    return out


def scene_metrics(cube: xr.Dataset) -> xr.Dataset:
    r"""Per-scene metrics of every descriptor (the metadata's ``<scene>_*`` keys and more).

    For scene :math:`s` with R = 1 queries :math:`Q_1^s` and R = 0 queries :math:`Q_0^s`:

    .. math::

        \text{true\_map} = \frac{1}{|Q_1^s|}\sum_{q \in Q_1^s} AP_q, \qquad
        \text{true\_map\_with\_zeros} = \frac{1}{|Q_1^s| + |Q_0^s|}\sum_{q \in Q_1^s} AP_q

    ``query_count`` = :math:`|Q_1^s|` (DW's ``<scene>_query_count``: processed queries),
    ``excluded_count`` = :math:`|Q_0^s|`, ``image_count`` = the distinct images of the scene in
    the image pairs the descriptor has queries in (image 1 plus each target image: 6 for a full
    HPatches scene; queries without an image pair, ``pair == ""`` as in patch-retrieval cubes,
    count none), ``mean_precision`` = mean legacy precision of the scene's image pairs.

    Returns
    -------
    xarray.Dataset
        Over ``(descriptor, scene)``; counts int64, the rest float64 (NaN where undefined and
        for descriptors with status ``"error"``, whose counts are 0). attrs as the cube.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import scene_metrics
    >>> s = scene_metrics(example_cube()).sel(descriptor="sift", scene="i_x")
    >>> int(s.query_count), int(s.excluded_count), int(s.image_count), float(s.true_map)
    (2, 1, 2, 0.75)
    """
    cube, ok = prepare_cube(cube, (*QUERY_VARS, "nn_correct"), "scene_metrics")
    ap_sum, n1, n0 = scene_sums(cube)
    by_pair = pair_precision(cube)
    scene_precision = group_nanmean(by_pair, "_unit_scene").rename(_unit_scene="scene")
    floats = {
        "true_map": ratio(ap_sum, n1),
        "true_map_with_zeros": ratio(ap_sum, n1 + n0),
        "mean_precision": scene_precision.reindex(scene=n1["scene"].values),
    }
    counts = {
        "query_count": n1,
        "excluded_count": n0,
        "image_count": _image_count(cube).reindex(scene=n1["scene"].values, fill_value=0),
    }
    data = {name: v.where(ok).astype(np.float64) for name, v in floats.items()}
    data.update(
        {name: xr.where(ok, v, 0).astype(np.int64) for name, v in counts.items()}  # type: ignore[no-untyped-call]
    )
    result = xr.Dataset(
        {n: data[n].transpose("descriptor", "scene") for n in SCENE_METRICS},
        attrs=dict(cube.attrs),
    )
    return result.drop_vars([c for c in result.coords if c not in ("descriptor", "scene")])


def _image_count(cube: xr.Dataset) -> xr.DataArray:
    """Distinct images per (descriptor, scene) among the image pairs holding the descriptor's
    queries: a (pair x image) incidence matrix, applied with ``xr.dot`` (stays lazy)."""
    present = group_sum(cube["n_relevant"] >= 0, PAIR_UNIT) > 0  # (descriptor, pair unit)
    # queries without an image pair (pair "", the patch-retrieval cubes) hold no images
    pairless = np.char.endswith(present[PAIR_UNIT].values.astype(str), "/")
    present = present.isel({PAIR_UNIT: ~pairless})
    units = present[PAIR_UNIT].values.astype(str)
    scene, _, pair = partition(units, "/")
    first, dash, second = partition(pair, "-")
    bad = (dash != "-") | (first == "") | (second == "")
    if bad.any():
        raise InvalidInputError(
            f"scene_metrics: pair coordinate {pair[np.argmax(bad)]!r} (scene "
            f"{scene[np.argmax(bad)]!r}) is not of the form 'a-b' (e.g. '1-3')"
        )
    keys_first = np.char.add(np.char.add(scene, "/"), first)
    keys_second = np.char.add(np.char.add(scene, "/"), second)
    images = np.unique(np.concatenate([keys_first, keys_second]))
    incidence = np.zeros((units.size, images.size), np.int64)
    rows = np.arange(units.size)
    incidence[rows, np.searchsorted(images, keys_first)] = 1
    incidence[rows, np.searchsorted(images, keys_second)] = 1
    matrix = xr.DataArray(incidence, dims=(PAIR_UNIT, "_image"), coords={PAIR_UNIT: units})
    used = xr.dot(present.astype(np.int64), matrix, dim=PAIR_UNIT) > 0  # (descriptor, image)
    used = used.assign_coords(scene=("_image", unit_scene(images)))
    return group_sum(used, "scene").astype(np.int64)
