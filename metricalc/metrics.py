"""The DescriptorWorkbench metric set over a QueryCube (PROTOCOLS.md section 3, seed 000).

Every metric of the DescriptorWorkbench set, under the seed's names, computed from a QueryCube
(``metricalc.cube``): an :class:`xarray.Dataset` over ``descriptor`` x ``query`` with the query
coordinates ``scene``, ``split`` and ``pair``. Every reduction is an xarray operation (masked
sums, ``groupby`` over scenes and image pairs, ``xr.dot``), so a dask-backed cube (``open_cube(...,
chunks=...)``) stays lazy until ``.compute()``; only the string coordinates that define the
groups (``scene``, ``split``, ``pair``, a few bytes per query) are loaded.

Besides the metric set (:func:`metric_set`, :func:`scene_metrics`) the module computes
matching metrics from the nearest-neighbour fields of the cube: the mean matching accuracy of
D2-Net's HPatches-sequences benchmark (:func:`matching_accuracy`, with the counts it prints,
:func:`matching_counts`) and the precision-recall curve of the ratio test
(:func:`matching_pr_curve`). ``docs/metric_set.md`` lists every formula. The metadata strings of
the DescriptorWorkbench database (``format_metadata``, ``parse_metadata``, ``metadata_for``) live
in :mod:`metricalc.store.metadata`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.confusion import counts_at_thresholds, fpr, precision, tpr, youden_j
from metricalc.core.curves import with_start_point
from metricalc.core.ranking import hit_rate_at_k, precision_at_k, rank_from_rank_stats
from metricalc.errors import InvalidInputError
from metricalc.hpatches import HPATCHES_PAIRS, select_sequences
from metricalc.validation import (
    TIE_POLICIES,
    ZeroDivision,
    check_choice,
    check_zero_division,
    fill_value,
    warn_undefined,
)

__all__ = [
    "BOJANIC_METRICS",
    "MAP_METRICS",
    "MMA_CONVENTIONS",
    "MMA_SPLITS",
    "RANK_BINS",
    "matching_accuracy",
    "matching_counts",
    "matching_pr_curve",
    "matching_roc_curve",
    "metric_set",
    "scene_metrics",
]

RANK_BINS: tuple[tuple[str, float, float], ...] = (
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4", 4, 4),
    ("5", 5, 5),
    ("6-10", 6, 10),
    ("11-20", 11, 20),
    ("21-50", 21, 50),
    ("51-100", 51, 100),
    (">100", 101, math.inf),
)
"""Bins of the rank histogram: (label, lowest rank, highest rank). A rank r falls in the bin
with ``upper(previous bin) < r <= upper(bin)``, so fractional ranks are binned too."""

MAP_METRICS = (
    "mean_precision",
    "legacy_macro_precision_by_scene",
    "true_map_micro",
    "true_map_macro_by_scene",
    "viewpoint_map",
    "illumination_map",
    "viewpoint_map_micro",
    "illumination_map_micro",
    "true_map_micro_including_zeros",
    "true_map_macro_by_scene_including_zeros",
    "viewpoint_map_including_zeros",
    "illumination_map_including_zeros",
    "image_retrieval_map",
)
"""The mAP and legacy precision metrics of the set, in the order of the output."""

SPLIT_LETTERS = (("viewpoint", "v"), ("illumination", "i"))
"""DescriptorWorkbench's split of the scenes (``ExperimentMetrics::addQueryAP``): a scene whose
name starts with ``v`` is a viewpoint scene, with ``i`` an illumination scene (HPatches ``v_*`` /
``i_*``); any other scene belongs to neither."""

WORKBENCH_COUNTS = ("total_matches", "total_keypoints")
"""DescriptorWorkbench's match and keypoint counts (``ExperimentMetrics::addImageResult``)."""

BOJANIC_METRICS = (
    "keypoint_verification_ap",
    "verification_viewpoint_ap",
    "verification_illumination_ap",
    "keypoint_retrieval_ap",
    "retrieval_viewpoint_ap",
    "retrieval_illumination_ap",
    "keypoint_verification_ap_per_keypoint",
    "verification_viewpoint_ap_per_keypoint",
    "verification_illumination_ap_per_keypoint",
    "keypoint_retrieval_ap_per_keypoint",
    "retrieval_viewpoint_ap_per_keypoint",
    "retrieval_illumination_ap_per_keypoint",
)
"""Bojanic et al. APs: means over the ``sequence`` dim of the cube (all, ``v_*``, ``i_*``).

The first six are DescriptorWorkbench's (``KeypointVerification.cpp``): means of the per-scene
APs of each scene's pooled list (cube variables ``verification_ap``, ``retrieval_ap``). The
``*_per_keypoint`` six are metricalc's decomposable variant: means of the per-scene means of
per-keypoint APs (``verification_ap_per_keypoint``, ``retrieval_ap_per_keypoint``).
:mod:`metricalc.keypoints.bojanic` defines both."""

BOJANIC_COUNTS = (
    "retrieval_num_true_positives",
    "retrieval_num_hard_negatives",
    "retrieval_num_distractors",
)
"""Bojanic et al. retrieval counts (DescriptorWorkbench's label counts of the pooled lists):
sums over the ``sequence`` dim."""

_BOJANIC_TASKS = (
    ("verification_ap", "keypoint_verification_ap", "verification", ""),
    ("retrieval_ap", "keypoint_retrieval_ap", "retrieval", ""),
    ("verification_ap_per_keypoint", "keypoint_verification_ap", "verification", "_per_keypoint"),
    ("retrieval_ap_per_keypoint", "keypoint_retrieval_ap", "retrieval", "_per_keypoint"),
)
"""Cube variable on ``(descriptor, sequence)``, the metric name of its mean over all scenes,
the prefix of its split means and the suffix of all three."""

_QUERY_VARS = ("better", "ties", "n_relevant", "ap")
_GROUP_COORDS = ("scene", "split", "pair")
_UNIT = "_pair_unit"  # scene + "/" + pair: one image pair (scene folder names cannot hold "/")


# --------------------------------------------------------------------------------------------
# Cube checks and small helpers
# --------------------------------------------------------------------------------------------


def _prepare(cube: Any, needed: Iterable[str], what: str) -> xr.Dataset:
    """Check the parts of the QueryCube schema ``what`` uses; return the cube with its grouping
    coordinates loaded (NumPy strings) and the image-pair key ``_pair_unit`` added."""
    if not isinstance(cube, xr.Dataset):
        raise InvalidInputError(
            f"{what}: cube must be an xarray.Dataset (a QueryCube); got {type(cube).__name__}"
        )
    missing_dims = [d for d in ("descriptor", "query") if d not in cube.dims]
    if missing_dims:
        raise InvalidInputError(
            f"{what}: the cube has no dim(s) {missing_dims}; a QueryCube has dims descriptor and "
            f"query (got {tuple(cube.dims)})"
        )
    missing = [v for v in needed if v not in cube.data_vars]
    if missing:
        raise InvalidInputError(
            f"{what}: the cube lacks the variable(s) {missing}; expected the QueryCube schema "
            "(metricalc.cube)"
        )
    for name in needed:
        if cube[name].dims != ("descriptor", "query"):
            raise InvalidInputError(
                f"{what}: cube variable {name!r} has dims {cube[name].dims}; expected "
                "('descriptor', 'query')"
            )
    coords = {}
    for name in _GROUP_COORDS:
        if name not in cube.coords or cube[name].dims != ("query",):
            raise InvalidInputError(
                f"{what}: the cube lacks the coordinate {name!r} on dim 'query'; expected "
                "scene, split and pair coordinates (metricalc.cube)"
            )
        # grouping needs the labels in memory (dask cannot group by a lazy array); these are
        # small string arrays, the data variables stay lazy
        coords[name] = ("query", np.asarray(cube[name].values).astype(str))
    unit = np.char.add(np.char.add(coords["scene"][1], "/"), coords["pair"][1])
    coords[_UNIT] = ("query", unit)
    return cube.assign_coords(coords)


def _tie_policy(cube: xr.Dataset) -> str:
    """The cube's tie policy (attrs ``tie_policy``, default ``"expected"``)."""
    return check_choice(
        "cube.attrs['tie_policy']", cube.attrs.get("tie_policy", "expected"), TIE_POLICIES
    )


def _ok(cube: xr.Dataset) -> xr.DataArray:
    """True for descriptors whose evaluation succeeded (``status`` is not ``"error"``)."""
    if "status" not in cube.data_vars:
        return xr.DataArray(
            np.ones(cube.sizes["descriptor"], bool),
            dims="descriptor",
            coords={"descriptor": cube["descriptor"]},
        )
    return cube["status"] != "error"


def _ratio(numerator: xr.DataArray, denominator: xr.DataArray) -> xr.DataArray:
    """numerator / denominator, NaN where the denominator is 0 (no division warning)."""
    return numerator / denominator.where(denominator > 0)


def _nanmean(values: xr.DataArray, dim: str) -> xr.DataArray:
    """Mean over ``dim`` of the defined (non-NaN) values; NaN if there is none."""
    return _ratio(values.sum(dim, skipna=True), values.notnull().sum(dim))


def _group_sum(values: xr.DataArray, key: str) -> xr.DataArray:
    """Sum of ``values`` within the groups of coordinate ``key`` (a new dim named ``key``).

    ``groupby`` refuses an empty dim (a cube without queries, e.g. every descriptor failed);
    that case gives an empty group dim here."""
    (dim,) = values[key].dims
    if values.sizes[dim] > 0:
        return values.groupby(key).sum()
    kept = [d for d in values.dims if d != dim]
    coords = {d: values[d].values for d in kept if d in values.coords}
    dtype = np.int64 if values.dtype == bool else values.dtype
    shape = [values.sizes[d] for d in kept] + [0]
    return xr.DataArray(
        np.zeros(shape, dtype), dims=[*kept, key], coords={**coords, key: np.array([], str)}
    )


def _group_max(values: xr.DataArray, key: str) -> xr.DataArray:
    """Largest of ``values`` within the groups of coordinate ``key`` (empty dim allowed)."""
    (dim,) = values[key].dims
    if values.sizes[dim] > 0:
        return values.groupby(key).max()
    return _group_sum(values, key)


def _group_nanmean(values: xr.DataArray, key: str) -> xr.DataArray:
    """Mean of the defined values within each group of coordinate ``key``."""
    return _ratio(_group_sum(values.fillna(0), key), _group_sum(values.notnull(), key))


def _partition(values: np.ndarray, sep: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``str.partition`` of every string (before, sep or "", after); empty input allowed."""
    values = np.asarray(values).astype(str)
    if values.size == 0:  # np.char.partition cannot size an empty array
        empty = np.array([], str)
        return empty, empty, empty
    parts = np.char.partition(values, sep)
    return parts[:, 0], parts[:, 1], parts[:, 2]


def _unit_scene(units: np.ndarray) -> np.ndarray:
    """Scene of each image-pair key ``scene/pair``."""
    return _partition(units, "/")[0]


def _pair_precision(cube: xr.Dataset) -> xr.DataArray:
    """Legacy precision of every image pair: mean of ``nn_correct`` over the pair's queries
    (over ``descriptor`` x ``_pair_unit``, with coordinate ``_unit_scene``)."""
    correct = _group_sum(cube["nn_correct"] == 1, _UNIT)
    counted = _group_sum(cube["nn_correct"] >= 0, _UNIT)
    result = _ratio(correct, counted)
    return result.assign_coords(_unit_scene=(_UNIT, _unit_scene(result[_UNIT].values)))


def _ap_sums(cube: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """AP over R = 1 queries (NaN elsewhere), and the R = 1 and R = 0 masks."""
    r1 = cube["n_relevant"] == 1
    r0 = cube["n_relevant"] == 0
    return cube["ap"].where(r1), r1, r0


def _check_k(k: Any) -> list[int]:
    values = [k] if isinstance(k, (int, np.integer)) else list(k)
    if not values or any(
        isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1
        for v in values
    ):
        raise InvalidInputError(f"k must be a positive integer or a sequence of them; got {k!r}")
    return sorted({int(v) for v in values})


def _rank_histogram(
    better: xr.DataArray, ties: xr.DataArray, r1: xr.DataArray, policy: str
) -> xr.DataArray:
    """Counts of R = 1 queries (with rank statistics) per rank bin (:data:`RANK_BINS`).

    Under ``expected`` a tied query spreads its unit weight evenly over its tied ranks
    b + 1 .. b + t + 1.
    """
    edges = xr.DataArray([upper for _, _, upper in RANK_BINS[:-1]], dims="rank_bin")
    if policy == "expected":
        b, t = better.where(r1), ties.where(r1)
        cumulative = np.minimum(np.maximum(edges - b, 0), t + 1) / (t + 1)  # P(rank <= edge)
    else:
        rank = rank_from_rank_stats(better, ties, policy=policy).where(r1)
        cumulative = (rank <= edges).where(r1)
    below = cumulative.sum("query", skipna=True)  # (descriptor, rank_bin): 9 cumulative counts
    total = r1.sum("query").astype(np.float64).expand_dims(rank_bin=1, axis=-1)
    cumulative = xr.concat([below, total], dim="rank_bin")
    histogram = cumulative - cumulative.shift(rank_bin=1, fill_value=0.0)
    labels = [label for label, _, _ in RANK_BINS]
    return histogram.transpose("descriptor", "rank_bin").assign_coords(rank_bin=labels)


def _descriptor_constant(cube: xr.Dataset, value: float | int) -> xr.DataArray:
    """``value`` for every descriptor of the cube."""
    names = cube["descriptor"].values
    return xr.DataArray(np.full(len(names), value), dims="descriptor", coords={"descriptor": names})


def _scene_sums(cube: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Per scene: the AP sum over R = 1 queries and the R = 1 and R = 0 counts (one grouped
    sum each; :func:`metric_set` derives its totals from them)."""
    ap, r1, r0 = _ap_sums(cube)
    return _group_sum(ap.fillna(0), "scene"), _group_sum(r1, "scene"), _group_sum(r0, "scene")


def _scene_maps(
    ap_sum: xr.DataArray, n1: xr.DataArray, n0: xr.DataArray
) -> dict[str, xr.DataArray]:
    r"""The scene-based mAPs of DescriptorWorkbench (``ExperimentMetrics::calculateMeanPrecision``)
    and the query-weighted ``*_map_micro`` split variants.

    Per scene :math:`s` (the arguments, from :func:`_scene_sums`): the AP sum :math:`S_s`, the
    R = 1 and R = 0 counts :math:`n^1_s`, :math:`n^0_s`; :math:`m_s = S_s / n^1_s` and
    :math:`z_s = S_s / (n^1_s + n^0_s)`; then means over the scenes, a split being the scenes
    whose name starts with ``v`` / ``i`` (:data:`SPLIT_LETTERS`). A mean over no scene is NaN.
    """
    scene_map = _ratio(ap_sum, n1)  # NaN for a scene without R = 1 queries
    with_zeros = _ratio(ap_sum, n1 + n0)  # NaN for a scene without any query
    names = np.asarray(ap_sum["scene"].values).astype(str)
    out = {
        "true_map_macro_by_scene": _nanmean(scene_map, "scene"),
        # DescriptorWorkbench averages over its per_scene_ap map: scenes with an R = 1 query
        "true_map_macro_by_scene_including_zeros": _nanmean(with_zeros.where(n1 > 0), "scene"),
    }
    for split, letter in SPLIT_LETTERS:
        part = xr.DataArray(
            np.char.startswith(names, letter), dims="scene", coords={"scene": ap_sum["scene"]}
        )
        out[f"{split}_map"] = _nanmean(scene_map.where(part), "scene")
        out[f"{split}_map_micro"] = _ratio(
            ap_sum.where(part, 0).sum("scene"), n1.where(part, 0).sum("scene")
        )
        out[f"{split}_map_including_zeros"] = _nanmean(with_zeros.where(part), "scene")
    return out


def _match_counts(cube: xr.Dataset) -> dict[str, xr.DataArray]:
    """DescriptorWorkbench's ``total_matches`` and ``total_keypoints`` (-1 without the
    ``nn_mutual`` and ``n_candidates`` variables).

    Summed over the image pairs with at least one match (``addImageResult`` is called only for
    them): the matches of cross-checked brute-force matching, i.e. the queries whose nearest
    neighbour is mutual, and the keypoints of the pair's target image (``n_candidates``; -1 if
    that is unknown for a matched pair)."""
    if any(name not in cube.data_vars for name in ("nn_mutual", "n_candidates")):
        unknown = _descriptor_constant(cube, -1).astype(np.int64)
        return dict.fromkeys(WORKBENCH_COUNTS, unknown)
    present = cube["n_relevant"] >= 0
    matches = _group_sum(present & (cube["nn_mutual"] == 1), _UNIT)
    known = present & (cube["n_candidates"] >= 0)
    # n_candidates is one number per image pair: the mean over the pair's queries is that number
    keypoints = _ratio(
        _group_sum(cube["n_candidates"].where(known, 0), _UNIT), _group_sum(known, _UNIT)
    )
    total_keypoints = keypoints.where(matches > 0, 0).sum(_UNIT, skipna=False)
    return {
        "total_matches": matches.sum(_UNIT),
        # a matched pair whose n_candidates is unknown (-1) leaves the total unknown
        "total_keypoints": total_keypoints.fillna(-1),
    }


def _image_retrieval_map(cube: xr.Dataset, zero_division: ZeroDivision) -> xr.DataArray:
    r"""DescriptorWorkbench's ``image_retrieval_map``: the mean over the scenes of the cube's
    ``image_retrieval_ap`` (one query per scene, its reference image).

    With :math:`Q` the scenes with a query (``image_retrieval_relevant >= 0``) and :math:`D`
    those whose query has a relevant image (AP defined; ``image_retrieval_relevant > 0``):

    .. math::

        \text{image\_retrieval\_map} = \frac{1}{|D|} \sum_{s \in D} AP_s

    and under ``zero_division`` 0 / 1 / ``"warn"`` the queries of :math:`Q \setminus D` count
    with that value (DescriptorWorkbench: AP 0, ``zero_division=0``). NaN when nothing counts
    (no scene with a query; by default also none whose query has a relevant image) or the cube
    lacks the variable (DescriptorWorkbench writes -1 without queries). Without
    ``image_retrieval_relevant`` every NaN AP counts as no query.
    """
    if "image_retrieval_ap" not in cube.data_vars:
        return _descriptor_constant(cube, np.nan)
    values = cube["image_retrieval_ap"]
    if values.dims != ("descriptor", "sequence"):
        raise InvalidInputError(
            f"metric_set: cube variable 'image_retrieval_ap' has dims {values.dims}; expected "
            "('descriptor', 'sequence')"
        )
    if zero_division == "nan" or "image_retrieval_relevant" not in cube.data_vars:
        return _nanmean(values, "sequence")
    undefined = values.isnull() & (cube["image_retrieval_relevant"] == 0)
    if zero_division == "warn":
        warn_undefined("metric_set: image_retrieval_ap", int(undefined.sum()), zero_division)
    return _nanmean(values.where(~undefined, fill_value(zero_division)), "sequence")


_NOT_FILLED = frozenset(("image_retrieval_map",))  # DescriptorWorkbench's sentinel there is -1


def _fill_empty_means(
    metrics: dict[str, xr.DataArray], ok: xr.DataArray, zero_division: ZeroDivision
) -> dict[str, xr.DataArray]:
    """Replace the NaN of an empty mean (descriptors with status ``ok``) by the
    ``zero_division`` value (DescriptorWorkbench writes 0.0: ``zero_division=0``)."""
    if zero_division == "nan":
        return metrics
    out = dict(metrics)
    value = fill_value(zero_division)
    for name, values in metrics.items():
        if name in _NOT_FILLED:
            continue
        undefined = values.isnull() & ok
        if zero_division == "warn":
            warn_undefined(f"metric_set: {name}", int(undefined.sum()), zero_division)
        out[name] = values.where(~undefined, value)
    return out


def _bojanic(cube: xr.Dataset) -> dict[str, xr.DataArray]:
    r"""The Bojanic et al. aggregates: NaN APs and zero counts without a ``sequence`` dim.

    Each AP is the mean over scenes (all, names starting ``v_``, names starting ``i_``) of a
    per-scene value, NaN scenes skipped (DescriptorWorkbench skips scenes without candidates;
    its AP of a scene with candidates but no correspondence is 0 and counts):

    .. math::

        \mathrm{keypoint\_verification\_ap} = \frac{1}{|S|} \sum_{s \in S} AP^{pool}_s

    with :math:`S` the scenes whose ``verification_ap`` is not NaN. An empty mean is NaN where
    DescriptorWorkbench writes 0.0. The counts sum the scenes that have them (-1: none). Without
    a ``sequence`` dim, or with one (from the image retrieval) but none of the Bojanic
    variables, the APs are NaN and the counts 0; Bojanic variables at their sentinels (Bojanic
    tasks off) give the same.
    """
    needed = [task for task, *_ in _BOJANIC_TASKS] + list(BOJANIC_COUNTS)
    missing = [v for v in needed if v not in cube.data_vars]
    if "sequence" not in cube.dims or len(missing) == len(needed):
        coords = {"descriptor": cube["descriptor"].values}
        nan = xr.DataArray(
            np.full(len(coords["descriptor"]), np.nan), dims="descriptor", coords=coords
        )
        zero = xr.zeros_like(nan, dtype=np.int64)
        return {**dict.fromkeys(BOJANIC_METRICS, nan), **dict.fromkeys(BOJANIC_COUNTS, zero)}
    if missing:
        raise InvalidInputError(
            f"metric_set: the cube has a 'sequence' dim but lacks {missing}; expected the "
            "Bojanic variables of the QueryCube schema"
        )
    names = np.asarray(cube["sequence"].values).astype(str)
    split = {
        part: xr.DataArray(
            np.char.startswith(names, prefix), dims="sequence", coords={"sequence": names}
        )
        for part, prefix in (("viewpoint", "v_"), ("illumination", "i_"))
    }
    out: dict[str, xr.DataArray] = {}
    for task, overall, prefix, suffix in _BOJANIC_TASKS:
        values = cube[task].assign_coords(sequence=names)
        out[overall + suffix] = _nanmean(values, "sequence")
        for part, mask in split.items():
            out[f"{prefix}_{part}_ap{suffix}"] = _nanmean(values.where(mask), "sequence")
    for name in BOJANIC_COUNTS:
        out[name] = cube[name].where(cube[name] >= 0, 0).sum("sequence").astype(np.int64)
    return out


# --------------------------------------------------------------------------------------------
# The metric set
# --------------------------------------------------------------------------------------------


def metric_set(
    cube: xr.Dataset,
    *,
    k: int | Sequence[int] = (1, 5, 10),
    zero_division: ZeroDivision = "nan",
) -> xr.Dataset:
    r"""The DescriptorWorkbench metric set of every descriptor of a QueryCube.

    With :math:`Q_1` the queries with one relevant item (``n_relevant == 1``), :math:`Q_0` those
    without ground truth (``n_relevant == 0``; missing queries, -1, never count), :math:`s` the
    scenes, :math:`p` the image pairs and :math:`AP_q` the cube's ``ap`` (tie policy of the
    cube's attrs):

    .. math::

        \text{true\_map\_micro} = \frac{1}{|Q_1|}\sum_{q \in Q_1} AP_q, \qquad
        \text{true\_map\_micro\_including\_zeros} = \frac{1}{|Q_1| + |Q_0|}
            \sum_{q \in Q_1} AP_q

        m_s = \frac{1}{|Q_1^s|}\sum_{q \in Q_1^s} AP_q, \qquad
        z_s = \frac{1}{|Q_1^s| + |Q_0^s|}\sum_{q \in Q_1^s} AP_q

        \text{true\_map\_macro\_by\_scene} = \operatorname{mean}_{s : |Q_1^s| > 0} m_s, \qquad
        \text{true\_map\_macro\_by\_scene\_including\_zeros} =
            \operatorname{mean}_{s : |Q_1^s| > 0} z_s

        \text{viewpoint\_map} = \operatorname{mean}_{s \in V : |Q_1^s| > 0} m_s, \qquad
        \text{viewpoint\_map\_including\_zeros} =
            \operatorname{mean}_{s \in V : |Q_1^s| + |Q_0^s| > 0} z_s, \qquad
        \text{viewpoint\_map\_micro} = \frac{\sum_{s \in V}\sum_{q \in Q_1^s} AP_q}
            {\sum_{s \in V} |Q_1^s|}

        \text{mean\_precision} = \operatorname{mean}_p P_p, \quad
        P_p = \frac{\#\{q \in p : \text{nn\_correct}_q = 1\}}{\#\{q \in p\}}, \quad
        \text{legacy\_macro\_precision\_by\_scene} = \operatorname{mean}_s
            \operatorname{mean}_{p \in s} P_p

        \text{precision\_at\_k} = \text{recall\_at\_k} = HR@k, \quad
        \text{ir\_precision\_at\_k} = HR@k / k, \quad
        \text{r0\_rate} = \frac{|Q_0|}{|Q_1| + |Q_0|}

    These are DescriptorWorkbench's definitions (``ExperimentMetrics::calculateMeanPrecision``):
    :math:`V` (:math:`I`) are the scenes whose name starts with ``v`` (``i``), the HPatches
    ``v_*`` / ``i_*`` sequences (:data:`SPLIT_LETTERS`; ``illumination_*`` likewise over
    :math:`I`); a scene whose queries all have R = 0 enters only the split
    ``*_map_including_zeros`` means (as a 0). ``*_map_micro`` (query-weighted) is metricalc's
    variant. ``precision_at_k`` is the seed's definition, a hit rate
    (:func:`metricalc.hit_rate_at_k` with the cube's tie policy); the IR precision (hits / k,
    :func:`metricalc.precision_at_k`) is ``ir_precision_at_k``.

    ``image_retrieval_map`` is the mean over the scenes (``sequence``) of the cube's
    ``image_retrieval_ap`` (the AP of each scene's reference image ranking all other images of
    the dataset by their number of cross-checked matches with it, relevant = same scene;
    :mod:`metricalc.keypoints.image_retrieval`), NaN without it. ``total_matches`` /
    ``total_keypoints`` (``addImageResult``) sum, over the image pairs with at least one match,
    the mutual nearest neighbours (``nn_mutual == 1``; DescriptorWorkbench matches with
    cross-checked brute force) and the target image's keypoints (``n_candidates``); -1 when the
    cube lacks those variables.

    An empty mean (no scene, pair or query of that kind for the descriptor) is NaN by default;
    DescriptorWorkbench writes 0.0 there, which ``zero_division=0`` reproduces
    (``image_retrieval_map`` and the Bojanic APs stay NaN: DescriptorWorkbench's -1.0 sentinel).
    The AP of an image-retrieval query without a relevant image is undefined too: left out of
    ``image_retrieval_map`` by default, counted as the ``zero_division`` value otherwise
    (DescriptorWorkbench counts it as 0).

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube (``metricalc.cube``). Uses ``better``, ``ties``, ``n_relevant``, ``ap``,
        ``nn_correct`` (and ``status``, ``error``, ``processing_time_ms``, the Bojanic and
        image retrieval variables on ``(descriptor, sequence)`` when present).
    k : int or sequence of int
        Cut-offs of ``precision_at_k``, ``recall_at_k`` and ``ir_precision_at_k``.
    zero_division : {"nan", "warn", 0, 1}
        Value of an empty mean (descriptors with status ``ok``): NaN (default), or 0 / 1
        (``"warn"``: 0 and an :class:`metricalc.errors.UndefinedMetricWarning`). ``0`` gives
        DescriptorWorkbench's values.

    Returns
    -------
    xarray.Dataset
        Over ``descriptor``: one variable per metric name (float64; the counts
        ``total_queries_processed``, ``total_queries_excluded``, ``total_matches``,
        ``total_keypoints`` and ``retrieval_num_*`` int64), ``rank_histogram`` over
        ``(descriptor, rank_bin)`` (counts of R = 1 queries per :data:`RANK_BINS` bin; a query
        tied over several ranks under ``expected`` adds its share to each), and ``status`` /
        ``error`` when the cube has them. attrs: the cube's attrs (protocol), ``tie_policy``
        and ``k``. A descriptor with status ``"error"`` gets NaN metrics and zero counts
        (``processing_time_ms`` and the error string are kept). Without Bojanic results (no
        ``sequence`` dim, or its Bojanic variables at their sentinels) the Bojanic APs are NaN
        and their counts 0.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import metric_set
    >>> m = metric_set(example_cube())
    >>> float(m.true_map_micro.sel(descriptor="sift"))   # APs 1 and 1/2 (R = 1), one R = 0 query
    0.75
    >>> float(m.true_map_micro_including_zeros.sel(descriptor="sift"))  # (1 + 1/2) / 3
    0.5
    >>> float(m.precision_at_1.sel(descriptor="sift")), float(m.r0_rate.sel(descriptor="sift"))
    (0.5, 0.3333333333333333)
    """
    ks = _check_k(k)
    policy_zero = check_zero_division(zero_division)
    cube = _prepare(cube, (*_QUERY_VARS, "nn_correct"), "metric_set")
    policy = _tie_policy(cube)
    ok = _ok(cube)
    r1 = cube["n_relevant"] == 1
    by_scene = _scene_sums(cube)
    ap_sum, n1, n0 = (values.sum("scene") for values in by_scene)
    pair_precision = _pair_precision(cube)
    scene_precision = _group_nanmean(pair_precision, "_unit_scene")

    metrics: dict[str, xr.DataArray] = {
        "mean_precision": _nanmean(pair_precision, _UNIT),
        "legacy_macro_precision_by_scene": _nanmean(scene_precision, "_unit_scene"),
        "true_map_micro": _ratio(ap_sum, n1),
        "true_map_micro_including_zeros": _ratio(ap_sum, n1 + n0),
        **_scene_maps(*by_scene),
        "image_retrieval_map": _image_retrieval_map(cube, policy_zero),
    }
    metrics = {name: metrics[name] for name in MAP_METRICS}

    better = cube["better"].where(r1, -1)
    ties = cube["ties"].where(r1, -1)
    hits = hit_rate_at_k(better, ties, ks, policy=policy, dim="query")
    ir = precision_at_k(better, ties, ks, policy=policy, dim="query")
    for name, values in (("precision_at", hits), ("recall_at", hits), ("ir_precision_at", ir)):
        for kk in ks:
            metrics[f"{name}_{kk}"] = values.sel(k=kk, drop=True)

    counts = {"total_queries_processed": n1, "total_queries_excluded": n0, **_match_counts(cube)}
    metrics["r0_rate"] = _ratio(n0, n1 + n0)
    metrics = _fill_empty_means(metrics, ok, policy_zero)
    metrics.update(_bojanic(cube))
    # queries brought with an AP only (better = -1) have no rank to put in a bin
    metrics["rank_histogram"] = _rank_histogram(better, ties, r1 & (better >= 0), policy)

    out: dict[str, xr.DataArray] = {}
    for name, values in metrics.items():
        if name in BOJANIC_COUNTS:
            out[name] = xr.where(ok, values, 0).astype(np.int64)
        else:
            out[name] = values.where(ok).astype(np.float64)
    for name, values in counts.items():
        out[name] = xr.where(ok, values, 0).astype(np.int64)
    if "processing_time_ms" in cube.data_vars:
        out["processing_time_ms"] = cube["processing_time_ms"].astype(np.float64)
    else:
        out["processing_time_ms"] = xr.full_like(ok, np.nan, dtype=np.float64)
    for name in ("status", "error"):
        if name in cube.data_vars:
            out[name] = cube[name]
    order = [*MAP_METRICS]
    order += [
        f"{name}_{kk}" for name in ("precision_at", "recall_at", "ir_precision_at") for kk in ks
    ]
    order += ["total_queries_processed", "total_queries_excluded", "r0_rate", "processing_time_ms"]
    order += [*WORKBENCH_COUNTS]
    order += [*BOJANIC_METRICS, *BOJANIC_COUNTS, "rank_histogram"]
    measures = _retrieval_means(cube, ok)
    out.update(measures)
    order += [*measures]
    order += [n for n in ("status", "error") if n in out]
    attrs = {**cube.attrs, "tie_policy": policy, "k": ks}
    result = xr.Dataset({name: out[name] for name in order}, attrs=attrs)
    return result.drop_vars([c for c in result.coords if c not in ("descriptor", "rank_bin")])


def scene_metrics(cube: xr.Dataset) -> xr.Dataset:
    r"""Per-scene metrics of every descriptor (the metadata's ``<scene>_*`` keys and more).

    For scene :math:`s` with R = 1 queries :math:`Q_1^s` and R = 0 queries :math:`Q_0^s`:

    .. math::

        \text{true\_map} = \frac{1}{|Q_1^s|}\sum_{q \in Q_1^s} AP_q, \qquad
        \text{true\_map\_with\_zeros} = \frac{1}{|Q_1^s| + |Q_0^s|}\sum_{q \in Q_1^s} AP_q

    ``query_count`` = :math:`|Q_1^s|` (the seed's ``<scene>_query_count``: processed queries),
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
    cube = _prepare(cube, (*_QUERY_VARS, "nn_correct"), "scene_metrics")
    ok = _ok(cube)
    ap_sum, n1, n0 = _scene_sums(cube)
    pair_precision = _pair_precision(cube)
    scene_precision = _group_nanmean(pair_precision, "_unit_scene").rename(_unit_scene="scene")
    floats = {
        "true_map": _ratio(ap_sum, n1),
        "true_map_with_zeros": _ratio(ap_sum, n1 + n0),
        "mean_precision": scene_precision.reindex(scene=n1["scene"].values),
    }
    counts = {
        "query_count": n1,
        "excluded_count": n0,
        "image_count": _image_count(cube).reindex(scene=n1["scene"].values, fill_value=0),
    }
    data = {name: v.where(ok).astype(np.float64) for name, v in floats.items()}
    data.update({name: xr.where(ok, v, 0).astype(np.int64) for name, v in counts.items()})
    order = (
        "true_map",
        "true_map_with_zeros",
        "query_count",
        "excluded_count",
        "image_count",
        "mean_precision",
    )
    result = xr.Dataset(
        {n: data[n].transpose("descriptor", "scene") for n in order}, attrs=dict(cube.attrs)
    )
    return result.drop_vars([c for c in result.coords if c not in ("descriptor", "scene")])


def _image_count(cube: xr.Dataset) -> xr.DataArray:
    """Distinct images per (descriptor, scene) among the image pairs holding the descriptor's
    queries: a (pair x image) incidence matrix, applied with ``xr.dot`` (stays lazy)."""
    present = _group_sum(cube["n_relevant"] >= 0, _UNIT) > 0  # (descriptor, pair unit)
    # queries without an image pair (pair "", the patch-retrieval cubes) hold no images
    present = present.isel({_UNIT: ~np.char.endswith(present[_UNIT].values.astype(str), "/")})
    units = present[_UNIT].values.astype(str)
    scene, _, pair = _partition(units, "/")
    first, dash, second = _partition(pair, "-")
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
    matrix = xr.DataArray(incidence, dims=(_UNIT, "_image"), coords={_UNIT: units})
    used = xr.dot(present.astype(np.int64), matrix, dim=_UNIT) > 0  # (descriptor, image)
    used = used.assign_coords(scene=("_image", _unit_scene(images)))
    return _group_sum(used, "scene").astype(np.int64)


# --------------------------------------------------------------------------------------------
# Matching metrics
# --------------------------------------------------------------------------------------------


MMA_CONVENTIONS = ("d2net", "matched_pairs")
"""Conventions of :func:`matching_accuracy`: ``"d2net"`` (the default) and ``"matched_pairs"``."""

MMA_SPLITS = ("overall", "illumination", "viewpoint")
"""Labels of the ``split`` dim of :func:`matching_accuracy` and :func:`matching_counts`
(``by_split=True``): every image pair, the ``illumination`` pairs, the ``viewpoint`` pairs."""


def _mma_thresholds(thresholds: Iterable[float]) -> xr.DataArray:
    values = np.asarray(list(thresholds), dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or not np.isfinite(values).all():
        raise InvalidInputError(
            f"matching_accuracy: thresholds must be a non-empty sequence of finite numbers; got "
            f"{values.tolist()}"
        )
    return xr.DataArray(values, dims="threshold", coords={"threshold": values})


def _first_of(keys: np.ndarray, values: np.ndarray) -> dict[str, str]:
    """``{key: value}`` from two parallel arrays, the first value of every key."""
    unique, first = np.unique(keys, return_index=True)
    return dict(zip(unique.tolist(), values[first].tolist(), strict=True))


def _pair_set(
    cube: xr.Dataset, sequences: str | Iterable[str] | None, what: str
) -> tuple[xr.Dataset, Callable[[np.ndarray], xr.DataArray], np.ndarray, str]:
    """The image pairs that count: the cube restricted to them, a function giving the
    ``(split, pair unit)`` membership matrix of a list of pair units, the number of pairs of
    each of :data:`MMA_SPLITS`, and a label of the pair set for the attrs."""
    scene_split = _first_of(cube["scene"].values, cube["split"].values)
    if sequences is None:
        scenes = None
        label = ""
    else:
        scenes = select_sequences(sequences, scene_split, where=f"the cube ({what})")
        keep = np.isin(cube["scene"].values, scenes) & np.isin(cube["pair"].values, HPATCHES_PAIRS)
        cube = cube.isel(query=np.flatnonzero(keep))
        label = sequences if isinstance(sequences, str) else f"{len(scenes)} listed"

    def member(units: np.ndarray) -> xr.DataArray:
        split = np.array([scene_split[s] for s in _unit_scene(units).tolist()], dtype=str)
        rows = [np.ones(units.size, bool), split == "illumination", split == "viewpoint"]
        matrix = np.array(rows, dtype=np.int64).reshape(len(MMA_SPLITS), units.size)
        return xr.DataArray(
            matrix, dims=("split", _UNIT), coords={"split": list(MMA_SPLITS), _UNIT: units}
        )

    if scenes is None:
        units = np.unique(cube[_UNIT].values)
        n_pairs = member(units).sum(_UNIT).values
    else:
        split = np.array([scene_split[s] for s in scenes], dtype=str)
        per_scene = len(HPATCHES_PAIRS)
        n_pairs = per_scene * np.array(
            [split.size, (split == "illumination").sum(), (split == "viewpoint").sum()]
        )
    return cube, member, np.asarray(n_pairs, np.int64), label


def _split_result(
    result: xr.DataArray, n_pairs: np.ndarray, by_split: bool, attrs: dict[str, Any]
) -> xr.DataArray:
    """``result`` over ``split`` (with the coordinate ``n_pairs``), or its overall row."""
    result = result.assign_coords(n_pairs=("split", n_pairs))
    if not by_split:
        attrs = {**attrs, "n_pairs": int(n_pairs[0])}
        result = result.sel(split="overall", drop=True)
    keep = ("descriptor", "threshold", "split", "n_pairs")
    result = result.drop_vars([c for c in result.coords if c not in keep])
    result.attrs = attrs
    return result


def matching_accuracy(
    cube: xr.Dataset,
    thresholds: Iterable[float] = range(1, 11),
    *,
    convention: str = "d2net",
    sequences: str | Iterable[str] | None = None,
    mutual: bool | None = None,
    by_split: bool = False,
) -> xr.DataArray:
    r"""Mean matching accuracy (MMA) at pixel thresholds; D2-Net's HPatches evaluation by default.

    The matches :math:`M_p` of an image pair :math:`p` are its queries' nearest neighbours; with
    :math:`e_q` the reprojection error ``nn_error`` (pixels between the match in image :math:`k`
    and the query projected by the ground-truth homography :math:`H_{1k}`), the accuracy of a
    pair is the share of its matches within :math:`t` pixels, averaged over a set of image
    pairs :math:`P`:

    .. math::

        \operatorname{acc}_p(t) = \frac{\#\{q \in M_p : e_q \le t\}}{|M_p|}, \qquad
        MMA(t) = \frac{1}{|P|} \sum_{p \in P} \operatorname{acc}_p(t)

    The conventions differ in :math:`M_p` and :math:`P`:

    - ``"d2net"`` (default): D2-Net's ``HPatches-Sequences-Matching-Benchmark.ipynb``
      (``benchmark_features``). :math:`M_p` are the mutual nearest neighbours (``nn_mutual ==
      1``); :math:`P` is **every** image pair, and a pair without a match has
      :math:`\operatorname{acc}_p = 0` (D2-Net replaces its empty error list by ``[inf]``). A
      match whose error is undefined (a projection at infinity, ``nn_error`` NaN) is a wrong
      match, as ``nan <= t`` is in D2-Net's code. A pair the cube lacks for a descriptor (no
      query there) counts 0 for it.
    - ``"matched_pairs"``: :math:`M_p` are the nearest neighbours with a finite ``nn_error``
      (only the mutual ones with ``mutual=True``); :math:`P` is the pairs with at least one match
      (a pair without matches has no accuracy and is left out). This was metricalc's
      ``matching_accuracy`` before the D2-Net convention became the default.

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube with ``nn_error`` and (``"d2net"`` or ``mutual=True``) ``nn_mutual``.
    thresholds : iterable of float
        Pixel thresholds :math:`t` (inclusive), default 1..10 (D2-Net's plots).
    convention : {"d2net", "matched_pairs"}
        See above.
    sequences : str or sequence of str, optional
        The pairs :math:`P`: by default every image pair of the cube (over all descriptors).
        ``"d2net"`` for D2-Net's 108 HPatches sequences x 5 pairs (540 pairs; 260
        illumination, 280 viewpoint, the ``n_i * 5`` and ``n_v * 5`` that D2-Net divides by),
        ``"full"`` for all 116, or a list of sequence names: pairs ``1-2`` .. ``1-6`` of each
        (:mod:`metricalc.hpatches`). Queries of other scenes are left out; a sequence the cube
        lacks raises :class:`~metricalc.errors.InvalidInputError` naming it.
    mutual : bool, optional
        Mutual nearest neighbours only. ``"d2net"`` always matches mutually (``False`` is
        refused); ``"matched_pairs"`` defaults to ``False``.
    by_split : bool
        Add a leading ``split`` dim over :data:`MMA_SPLITS`: ``overall``, ``illumination``
        (pairs of ``i_*`` scenes), ``viewpoint`` (``v_*``), as D2-Net's three plots.

    Returns
    -------
    xarray.DataArray
        ``mma`` over ``(descriptor, threshold)`` (``(descriptor, split, threshold)`` with
        ``by_split``; coordinate ``n_pairs`` on ``split`` = :math:`|P|` of each, where the
        ``"matched_pairs"`` mean still leaves out pairs without matches); NaN for descriptors
        with status ``"error"`` and for an empty :math:`P`. Attrs: the cube's, ``convention``,
        ``mutual``, ``sequences`` and (without ``by_split``) ``n_pairs``.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import matching_accuracy
    >>> cube = example_cube()   # one pair; errors 0.5, 2.0, 4.0 px; the 1st and 3rd mutual
    >>> matching_accuracy(cube, [1, 3]).sel(descriptor="sift").values.tolist()
    [0.5, 0.5]
    >>> old = matching_accuracy(cube, [1, 3], convention="matched_pairs")
    >>> old.sel(descriptor="sift").values.round(4).tolist()
    [0.3333, 0.6667]
    """
    threshold = _mma_thresholds(thresholds)
    check_choice("matching_accuracy: convention", convention, MMA_CONVENTIONS)
    d2net = convention == "d2net"
    if mutual is None:
        mutual = d2net
    if d2net and not mutual:
        raise InvalidInputError(
            "matching_accuracy: convention='d2net' matches mutual nearest neighbours; for all "
            "nearest neighbours use convention='matched_pairs' (mutual=False)"
        )
    needed = (*_QUERY_VARS, "nn_error", *(("nn_mutual",) if mutual else ()))
    cube = _prepare(cube, needed, "matching_accuracy")
    attrs = {**cube.attrs, "convention": convention, "mutual": int(mutual)}
    cube, member, n_pairs, attrs["sequences"] = _pair_set(cube, sequences, "matching_accuracy")
    error = cube["nn_error"]
    matched = cube["nn_mutual"] == 1 if d2net else np.isfinite(error)
    if mutual and not d2net:
        matched = matched & (cube["nn_mutual"] == 1)
    accurate = (error <= threshold) & matched  # NaN error: never accurate
    per_pair = _ratio(_group_sum(accurate, _UNIT), _group_sum(matched, _UNIT))
    members = member(per_pair[_UNIT].values.astype(str))
    total = xr.dot(per_pair.fillna(0), members, dim=_UNIT)
    if d2net:
        pairs = xr.DataArray(n_pairs, dims="split", coords={"split": list(MMA_SPLITS)})
    else:
        pairs = xr.dot(per_pair.notnull().astype(np.int64), members, dim=_UNIT)
    mma = _ratio(total, pairs).where(_ok(cube))
    mma = mma.transpose("descriptor", "split", "threshold").rename("mma")
    return _split_result(mma, n_pairs, by_split, attrs)


def matching_counts(
    cube: xr.Dataset, *, sequences: str | Iterable[str] | None = None
) -> xr.Dataset:
    r"""The keypoint and match counts that D2-Net's HPatches benchmark prints (``summary``).

    - ``matches_per_pair`` over ``(descriptor, split)``: mutual nearest-neighbour matches
      summed over the image pairs :math:`P` of each of :data:`MMA_SPLITS`, divided by
      :math:`|P|` (a pair without matches counts 0): D2-Net's ``# Matches: Overall ...,
      Illumination ..., Viewpoint ...``.
    - ``keypoints_mean``, ``keypoints_min``, ``keypoints_max`` over ``descriptor``: keypoints
      per image, over image 1 of every scene and image :math:`k` of every pair: D2-Net's
      ``# Features: mean - [min, max]``. The cube holds image 1's keypoints as the queries of
      each pair and image :math:`k`'s as ``n_candidates``, both after the border filter
      (evaluate with ``border=0`` for D2-Net's counts); image :math:`k` of a pair where the
      descriptor has no query is not in the cube and is left out.

    ``sequences`` selects :math:`P` as in :func:`matching_accuracy`.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import matching_counts
    >>> cube = example_cube()   # one pair, three queries, two of them mutual
    >>> cube["n_candidates"] = ("descriptor", "query"), [[4, 4, 4]]   # image 2: 4 keypoints
    >>> counts = matching_counts(cube)
    >>> counts.matches_per_pair.sel(descriptor="sift", split="overall").item()
    2.0
    >>> counts.keypoints_mean.sel(descriptor="sift").item()   # images 1 and 2: (3 + 4) / 2
    3.5
    """
    cube = _prepare(cube, (*_QUERY_VARS, "nn_mutual", "n_candidates"), "matching_counts")
    cube, member, n_pairs, label = _pair_set(cube, sequences, "matching_counts")
    ok = _ok(cube)
    matches = _group_sum(cube["nn_mutual"] == 1, _UNIT)
    members = member(matches[_UNIT].values.astype(str))
    pairs = xr.DataArray(n_pairs, dims="split", coords={"split": list(MMA_SPLITS)})
    per_pair = _ratio(xr.dot(matches, members, dim=_UNIT), pairs).where(ok)
    present = cube["n_relevant"] >= 0
    queries = _group_sum(present, _UNIT)  # image 1's keypoints: the same in every pair
    candidates = _ratio(_group_sum(cube["n_candidates"].where(present, 0), _UNIT), queries)
    scene_of = _unit_scene(queries[_UNIT].values.astype(str))
    queries = queries.assign_coords(_unit_scene=(_UNIT, scene_of))
    reference = _group_max(queries, "_unit_scene")  # pairs of one scene share image 1
    images = xr.concat(
        [
            reference.rename(_unit_scene="_image").drop_vars("_image"),
            candidates.rename({_UNIT: "_image"}).drop_vars("_image"),
        ],
        dim="_image",
    )
    seen = images.notnull().sum("_image") > 0
    if images.sizes["_image"]:
        low, high = images.fillna(np.inf).min("_image"), images.fillna(-np.inf).max("_image")
    else:  # no image at all: no min / max
        low = high = _nanmean(images, "_image")
    result = xr.Dataset(
        {
            "matches_per_pair": per_pair.transpose("descriptor", "split"),
            "keypoints_mean": _nanmean(images, "_image").where(ok),
            "keypoints_min": low.where(seen & ok),
            "keypoints_max": high.where(seen & ok),
        },
        attrs={**cube.attrs, "sequences": label},
    )
    result = result.assign_coords(n_pairs=("split", n_pairs))
    keep = ("descriptor", "split", "n_pairs")
    return result.drop_vars([c for c in result.coords if c not in keep])


def ratio_score(cube: xr.Dataset) -> xr.DataArray:
    """-(nn_distance / nn2_distance); the worst score -1 (ratio 1) where the ratio is undefined."""
    nn, nn2 = cube["nn_distance"], cube["nn2_distance"]
    defined = np.isfinite(nn) & np.isfinite(nn2) & (nn2 > 0)
    return -(nn.where(defined) / nn2.where(defined)).fillna(1.0)


_RATIO_SCORE = "-(nn_distance / nn2_distance); undefined ratio -> 1"


def _ratio_test_counts(
    cube: xr.Dataset, what: str
) -> tuple[xr.Dataset, xr.DataArray, xr.DataArray, dict[Any, Any]]:
    """Confusion counts of the ratio-test classifier of every descriptor, at each of its
    distinct scores (:func:`metricalc.counts_at_thresholds` over the queries present), padded
    to one ``threshold`` length by repeating the final counts with ``cutoff`` NaN.

    Returns the counts (``tp``, ``fp``, ``fn``, ``tn`` int64 and coordinate ``cutoff`` over
    ``(descriptor, threshold)``), the ok mask, the matchable (R = 1) count per descriptor and the
    cube's attrs.
    """
    needed = (*_QUERY_VARS, "nn_correct", "nn_distance", "nn2_distance")
    cube = _prepare(cube, needed, what)
    ok = _ok(cube)
    present = np.asarray((cube["n_relevant"] >= 0).values)
    y_true = cube["nn_correct"] == 1
    y_score = ratio_score(cube)
    names = ("tp", "fp", "fn", "tn")
    curves = []
    for i in range(cube.sizes["descriptor"]):
        keep = np.flatnonzero(present[i])
        if keep.size == 0:
            curves.append(None)
            continue
        counts = counts_at_thresholds(
            y_true.isel(descriptor=i, query=keep).drop_vars(list(y_true.coords)),
            y_score.isel(descriptor=i, query=keep).drop_vars(list(y_score.coords)),
            dim="query",
        )
        curves.append(counts[list(names)].reset_coords("cutoff"))
    length = max((c.sizes["threshold"] for c in curves if c is not None), default=0)
    padded = []
    for curve in curves:
        if curve is None:
            curve = xr.Dataset(
                {
                    **{n: ("threshold", np.zeros(length, np.int64)) for n in names},
                    "cutoff": ("threshold", np.full(length, np.nan)),
                }
            )
        else:
            extra = length - curve.sizes["threshold"]
            curve = xr.Dataset(
                {
                    **{n: curve[n].pad(threshold=(0, extra), mode="edge") for n in names},
                    "cutoff": curve["cutoff"].pad(threshold=(0, extra), constant_values=np.nan),
                }
            )
        padded.append(curve)
    index = pd.Index(cube["descriptor"].values, name="descriptor")
    combined = xr.concat(padded, dim=index) if padded else xr.Dataset()
    combined = combined.assign({n: combined[n].astype(np.int64) for n in names})
    combined = combined.set_coords("cutoff").transpose("descriptor", "threshold")
    n_matchable = (cube["n_relevant"] == 1).sum("query")
    n_matchable = n_matchable.drop_vars([c for c in n_matchable.coords if c != "descriptor"])
    return combined, ok, n_matchable, dict(cube.attrs)


def matching_pr_curve(cube: xr.Dataset) -> xr.Dataset:
    r"""Precision-recall curve of nearest-neighbour matching under the ratio test.

    A query's nearest neighbour is accepted when its ratio
    :math:`\rho = \text{nn\_distance} / \text{nn2\_distance}` is at most a threshold; the score is
    :math:`-\rho` (higher = more confident). An undefined ratio (``nn2_distance`` 0 or NaN: a
    single candidate, or both distances 0; or no nearest neighbour) counts as :math:`\rho = 1`,
    the worst score, accepted only at the loosest threshold. Over the queries present for the
    descriptor (``n_relevant >= 0``), a match is correct when ``nn_correct == 1``; the counts come
    from :func:`metricalc.counts_at_thresholds` (one threshold per distinct score):

    .. math::

        \text{precision}(c) = \frac{TP(c)}{TP(c) + FP(c)}, \qquad
        \text{recall}(c) = \frac{TP(c)}{\#\{q : n\_relevant_q = 1\}}

    so a match of a query with nothing relevant (R = 0) is a false positive, and recall is
    measured against every matchable query.

    Returns
    -------
    xarray.Dataset
        ``precision``, ``recall`` (float64) and ``tp``, ``fp`` (int64) over
        ``(descriptor, threshold)``, ``n_matchable`` over ``descriptor``, and the coordinates
        ``cutoff`` (score threshold :math:`-\rho`) and ``ratio`` (:math:`\rho`) over
        ``(descriptor, threshold)``. Descriptors with fewer distinct scores than the longest
        curve are padded by repeating their final point with ``cutoff`` NaN; a descriptor
        without queries (or with status ``"error"``) has NaN precision and recall. The presence
        masks are computed (the curve lengths depend on the data); the scores stay lazy.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import matching_pr_curve
    >>> pr = matching_pr_curve(example_cube()).sel(descriptor="sift")
    >>> pr.ratio.values.tolist(), pr.precision.values.tolist(), pr.recall.values.tolist()
    ([0.25, 0.5, 1.0], [1.0, 0.5, 0.3333333333333333], [0.5, 0.5, 0.5])
    """
    combined, ok, n_matchable, attrs = _ratio_test_counts(cube, "matching_pr_curve")
    tp, fp = combined["tp"], combined["fp"]
    result = xr.Dataset(
        {
            "precision": precision({"tp": tp, "fp": fp}).where(ok),
            "recall": _ratio(tp, n_matchable).where(ok),
            "tp": tp,
            "fp": fp,
            "n_matchable": xr.where(ok, n_matchable, 0).astype(np.int64),
        },
        coords={"cutoff": combined["cutoff"], "ratio": -combined["cutoff"]},
        attrs={**attrs, "score": _RATIO_SCORE},
    )
    return result.transpose("descriptor", "threshold")


def matching_roc_curve(cube: xr.Dataset) -> xr.Dataset:
    r"""ROC graph of the ratio-test classifier, and each descriptor's Youden J point.

    The classifier of :func:`matching_pr_curve` (accept a query's nearest neighbour when its
    ratio :math:`\rho` is at most a threshold; score :math:`-\rho`) seen as a binary classifier
    of matches: over the queries present for the descriptor, a positive is a query whose nearest
    neighbour is correct (``nn_correct == 1``), a negative any other. From the confusion counts
    at every distinct score (:func:`metricalc.counts_at_thresholds`), starting at the point
    where nothing is accepted (cutoff :math:`+\infty`, as :func:`metricalc.roc_curve`):

    .. math::

        TPR(c) = \frac{TP(c)}{\#P}, \qquad FPR(c) = \frac{FP(c)}{\#N}, \qquad
        J(c) = TPR(c) - FPR(c)

    The Youden point of a descriptor is the threshold of maximal :math:`J`
    (:func:`metricalc.youden_j`; the first, i.e. strictest, among equal maxima): the height of
    its ROC curve above the chance diagonal (seed 003).

    Returns
    -------
    xarray.Dataset
        ``fpr``, ``tpr``, ``youden_j`` over ``(descriptor, threshold)`` with coordinates
        ``cutoff`` and ``ratio`` (padding as :func:`matching_pr_curve`); over ``descriptor``:
        ``best_fpr``, ``best_tpr``, ``best_j``, ``best_ratio`` (the Youden point) and
        ``n_positive``, ``n_negative``. Undefined rates (no positives or no negatives) and
        descriptors with status ``"error"`` are NaN.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import matching_roc_curve
    >>> roc = matching_roc_curve(example_cube()).sel(descriptor="sift")
    >>> roc.fpr.values.tolist(), roc.tpr.values.tolist()   # 1 correct, 2 wrong matches
    ([0.0, 0.0, 0.5, 1.0], [0.0, 1.0, 1.0, 1.0])
    >>> float(roc.best_j), float(roc.best_ratio)
    (1.0, 0.25)
    """
    combined, ok, _, attrs = _ratio_test_counts(cube, "matching_roc_curve")
    if combined.sizes.get("threshold", 0) == 0:
        raise InvalidInputError(
            "matching_roc_curve: no queries in the cube, so no ROC curve can be drawn"
        )
    counts = with_start_point(combined)
    j = youden_j(counts).where(ok)
    best = j.fillna(-np.inf).argmax("threshold")
    rates = {"fpr": fpr(counts).where(ok), "tpr": tpr(counts).where(ok), "youden_j": j}
    ratio = -counts["cutoff"]
    result = xr.Dataset(
        {
            **rates,
            **{
                f"best_{k}": v.isel(threshold=best)
                for k, v in (("fpr", rates["fpr"]), ("tpr", rates["tpr"]), ("j", j))
            },
            "best_ratio": ratio.isel(threshold=best).where(ok).reset_coords(drop=True),
            "n_positive": (counts["tp"] + counts["fn"]).isel(threshold=0),
            "n_negative": (counts["fp"] + counts["tn"]).isel(threshold=0),
        },
        coords={"ratio": ratio},
        attrs={**attrs, "score": _RATIO_SCORE},
    )
    best_vars = [
        n for n in result.data_vars if str(n).startswith("best_") or str(n).startswith("n_")
    ]
    result = result.assign({n: result[n].reset_coords(drop=True) for n in best_vars})
    return result.transpose("descriptor", "threshold")


# --------------------------------------------------------------------------------------------
# A tiny cube for the examples
# --------------------------------------------------------------------------------------------


def _retrieval_means(cube: xr.Dataset, ok: xr.DataArray) -> dict[str, xr.DataArray]:
    r"""The trec_eval measures of a retrieval cube (attr ``benchmark = "trec_eval"``,
    :func:`metricalc.retrieval.querycube.retrieval_cube`): per measure of the attr ``measures``
    the mean of its variable over the queries where the run has a value (``map``: ``ap``),

    .. math:: \bar m = \frac{1}{|Q_r|} \sum_{q \in Q_r} m_q,

    trec_eval's ``all`` (up to the order of the sum; counts such as ``num_ret``, whose ``all`` is a
    sum, are means here too). Empty for any other cube."""
    if str(cube.attrs.get("benchmark", "")) != "trec_eval":
        return {}
    out = {}
    for measure in str(cube.attrs.get("measures", "")).split():
        variable = "ap" if measure == "map" else measure  # retrieval.querycube.cube_variable
        if variable in cube.data_vars:
            out[measure] = cube[variable].mean("query", skipna=True).where(ok).astype(np.float64)
    return out
