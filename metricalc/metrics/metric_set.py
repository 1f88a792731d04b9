"""The DescriptorWorkbench metric set of a QueryCube (docs/metric_set.md).

Every metric of the DescriptorWorkbench set, under its names, computed from a QueryCube
(:mod:`metricalc.cube`) by :func:`metric_set`: the mAPs (micro, by scene, per split, including
zeros), the legacy precision, the hit rates at k, the query and match counts, the image
retrieval mAP, the Bojanic et al. aggregates and the rank histogram. ``docs/metric_set.md``
lists every formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.metrics.bojanic import BOJANIC_COUNTS, BOJANIC_METRICS, bojanic_means
from metricalc.metrics.fused import MATCH_VARS, query_sums
from metricalc.metrics.ranks import (
    AT_K_METRICS,
    HISTOGRAM_CUTOFFS,
    at_k_from_sums,
    at_k_metrics,
    rank_histogram,
    rank_histogram_from_sums,
)
from metricalc.metrics.reductions import (
    PAIR_UNIT,
    QUERY_VARS,
    cube_tie_policy,
    descriptor_constant,
    group_nanmean,
    group_sum,
    nanmean,
    pair_keypoints,
    prepare_cube,
    ratio,
)
from metricalc.metrics.retrieval import hpatches17_means, retrieval_means
from metricalc.metrics.scenes import pair_precision, precision_of_pairs, scene_maps, scene_sums
from metricalc.validation import (
    ZERO_DIVISION,
    Integer,
    ListOf,
    OneOf,
    ZeroDivision,
    fill_value,
    validate_params,
    warn_undefined,
)

__all__ = ["MAP_METRICS", "WORKBENCH_COUNTS", "metric_set"]

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

WORKBENCH_COUNTS = ("total_matches", "total_keypoints")
"""DescriptorWorkbench's match and keypoint counts (``ExperimentMetrics::addImageResult``)."""


def match_counts(cube: xr.Dataset) -> dict[str, xr.DataArray]:
    """DescriptorWorkbench's ``total_matches`` and ``total_keypoints`` (-1 without the
    ``nn_mutual`` and ``n_candidates`` variables).

    Summed over the image pairs with at least one match (``addImageResult`` is called only for
    them): the matches of cross-checked brute-force matching, i.e. the queries whose nearest
    neighbour is mutual, and the keypoints of the pair's target image (``n_candidates``; -1 if
    that is unknown for a matched pair)."""
    if any(name not in cube.data_vars for name in MATCH_VARS):
        return _unknown_match_counts(cube)
    present = cube["n_relevant"] >= 0
    matches = group_sum(present & (cube["nn_mutual"] == 1), PAIR_UNIT)
    return _match_totals(matches, pair_keypoints(cube))


def _unknown_match_counts(cube: xr.Dataset) -> dict[str, xr.DataArray]:
    unknown = descriptor_constant(cube, -1).astype(np.int64)
    return dict.fromkeys(WORKBENCH_COUNTS, unknown)


def _match_totals(matches: xr.DataArray, keypoints: xr.DataArray) -> dict[str, xr.DataArray]:
    """The totals of :func:`match_counts` from the matches and keypoints of every image pair
    (over ``(descriptor, PAIR_UNIT)``)."""
    total_keypoints = keypoints.where(matches > 0, 0).sum(PAIR_UNIT, skipna=False)
    return {
        "total_matches": matches.sum(PAIR_UNIT),
        # a matched pair whose n_candidates is unknown (-1) leaves the total unknown
        "total_keypoints": total_keypoints.fillna(-1),
    }


def image_retrieval_map(cube: xr.Dataset, zero_division: ZeroDivision) -> xr.DataArray:
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
        return descriptor_constant(cube, np.nan)
    values = cube["image_retrieval_ap"]
    if values.dims != ("descriptor", "sequence"):
        raise InvalidInputError(
            f"metric_set: cube variable 'image_retrieval_ap' has dims {values.dims}; expected "
            "('descriptor', 'sequence')"
        )
    if zero_division == "nan" or "image_retrieval_relevant" not in cube.data_vars:
        return nanmean(values, "sequence")
    undefined = values.isnull() & (cube["image_retrieval_relevant"] == 0)
    if zero_division == "warn":
        warn_undefined("metric_set: image_retrieval_ap", int(undefined.sum()), zero_division)
    return nanmean(values.where(~undefined, fill_value(zero_division)), "sequence")


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


@validate_params(k=OneOf(Integer(1), ListOf(Integer(1))), zero_division=ZERO_DIVISION)
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

        \text{hit\_rate\_at\_k} = \text{recall\_at\_k} = HR@k, \quad
        \text{precision\_at\_k} = HR@k / k, \quad
        \text{r0\_rate} = \frac{|Q_0|}{|Q_1| + |Q_0|}

    These are DescriptorWorkbench's definitions (``ExperimentMetrics::calculateMeanPrecision``):
    :math:`V` (:math:`I`) are the scenes whose name starts with ``v`` (``i``), the HPatches
    ``v_*`` / ``i_*`` sequences (:data:`~metricalc.metrics.SPLIT_LETTERS`; ``illumination_*``
    likewise over :math:`I`); a scene whose queries all have R = 0 enters only the split
    ``*_map_including_zeros`` means (as a 0). ``*_map_micro`` (query-weighted) is metricalc's
    variant. ``hit_rate_at_k`` is a hit rate (:func:`metricalc.hit_rate_at_k` with the cube's
    tie policy), the value DescriptorWorkbench calls ``precision_at_k``; ``precision_at_k`` is
    the IR precision (hits / k, :func:`metricalc.precision_at_k`), at most 1/k here.

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
        Cut-offs of ``hit_rate_at_k``, ``recall_at_k`` and ``precision_at_k``.
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
        ``(descriptor, rank_bin)`` (counts of R = 1 queries per
        :data:`~metricalc.metrics.RANK_BINS` bin; a query tied over several ranks under
        ``expected`` adds its share to each), and ``status`` /
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
    >>> float(m.hit_rate_at_1.sel(descriptor="sift")), float(m.r0_rate.sel(descriptor="sift"))
    (0.5, 0.3333333333333333)
    """
    ks = sorted({int(v) for v in np.atleast_1d(k)})
    cube, ok = prepare_cube(cube, (*QUERY_VARS, "nn_correct"), "metric_set")
    tie_policy = cube_tie_policy(cube)
    lazy = cube["better"].chunks is not None
    sums = _streamed(cube, ks, tie_policy) if lazy else _in_memory(cube, ks, tie_policy)
    totals = tuple(values.sum("scene") for values in sums.by_scene)  # AP sum, R = 1, R = 0
    n1, n0 = totals[1:]
    metrics = _map_metrics(sums, totals, cube, zero_division)
    metrics.update(sums.at_k)
    counts = {"total_queries_processed": n1, "total_queries_excluded": n0, **sums.match_counts}
    metrics["r0_rate"] = ratio(n0, n1 + n0)
    metrics = _fill_empty_means(metrics, ok, zero_division)
    metrics.update(bojanic_means(cube))
    metrics["rank_histogram"] = sums.rank_histogram
    out = _typed(metrics, counts, cube, ok)
    measures = {**retrieval_means(cube, ok), **hpatches17_means(cube, ok)}
    out.update(measures)
    attrs = {**cube.attrs, "tie_policy": tie_policy, "k": ks}
    order = _output_order(ks, [*measures], out)
    result = xr.Dataset({name: out[name] for name in order}, attrs=attrs)
    return result.drop_vars([c for c in result.coords if c not in ("descriptor", "rank_bin")])


@dataclass(frozen=True)
class _Sums:
    """What the metric set derives from the queries: the per-scene AP sums and R = 1 / R = 0
    counts (:func:`~metricalc.metrics.scenes.scene_sums`), the legacy precision of every image
    pair, the match counts, the metrics at k and the rank histogram."""

    by_scene: tuple[xr.DataArray, xr.DataArray, xr.DataArray]
    by_pair: xr.DataArray
    match_counts: dict[str, xr.DataArray]
    at_k: dict[str, xr.DataArray]
    rank_histogram: xr.DataArray


def _in_memory(cube: xr.Dataset, ks: list[int], tie_policy: str) -> _Sums:
    """:class:`_Sums` of a cube in memory (grouped sums over its arrays)."""
    r1 = cube["n_relevant"] == 1
    better = cube["better"].where(r1, -1)
    ties = cube["ties"].where(r1, -1)
    return _Sums(
        by_scene=scene_sums(cube),
        by_pair=pair_precision(cube),
        match_counts=match_counts(cube),
        at_k=at_k_metrics(better, ties, ks, tie_policy),
        # queries brought with an AP only (better = -1) have no rank to put in a bin
        rank_histogram=rank_histogram(better, ties, r1 & (better >= 0), tie_policy),
    )


def _streamed(cube: xr.Dataset, ks: list[int], tie_policy: str) -> _Sums:
    """:class:`_Sums` of a dask-backed cube, from the sums of one pass over its chunks
    (:func:`~metricalc.metrics.fused.query_sums`): the same formulas on the same sums."""
    sums = query_sums(cube, sorted({*ks, *HISTOGRAM_CUTOFFS}), tie_policy)
    if sums.matches is None or sums.candidates is None or sums.known is None:
        counts = _unknown_match_counts(cube)
    else:
        counts = _match_totals(sums.matches, ratio(sums.candidates, sums.known))
    return _Sums(
        by_scene=(sums.ap_sum, sums.n1, sums.n0),
        by_pair=precision_of_pairs(sums.correct, sums.counted),
        match_counts=counts,
        at_k=at_k_from_sums(sums.hits, sums.ranked, ks),
        rank_histogram=rank_histogram_from_sums(sums.hits, sums.ranked),
    )


def _map_metrics(
    sums: _Sums,
    totals: tuple[xr.DataArray, ...],
    cube: xr.Dataset,
    zero_division: ZeroDivision,
) -> dict[str, xr.DataArray]:
    """The metrics of :data:`MAP_METRICS`, in that order; ``totals`` are the sums over scenes
    of ``sums.by_scene`` (AP sum, R = 1 and R = 0 queries per descriptor)."""
    ap_sum, n1, n0 = totals
    by_pair = sums.by_pair
    scene_precision = group_nanmean(by_pair, "_unit_scene")
    metrics: dict[str, xr.DataArray] = {
        "mean_precision": nanmean(by_pair, PAIR_UNIT),
        "legacy_macro_precision_by_scene": nanmean(scene_precision, "_unit_scene"),
        "true_map_micro": ratio(ap_sum, n1),
        "true_map_micro_including_zeros": ratio(ap_sum, n1 + n0),
        **scene_maps(*sums.by_scene),
        "image_retrieval_map": image_retrieval_map(cube, zero_division),
    }
    return {name: metrics[name] for name in MAP_METRICS}


def _typed(
    metrics: dict[str, xr.DataArray],
    counts: dict[str, xr.DataArray],
    cube: xr.Dataset,
    ok: xr.DataArray,
) -> dict[str, xr.DataArray]:
    """The metrics as float64 (the Bojanic counts and ``counts`` as int64), NaN (counts 0) for
    descriptors with status ``"error"``; ``processing_time_ms``, ``status`` and ``error``."""
    out: dict[str, xr.DataArray] = {}
    for name, values in metrics.items():
        if name in BOJANIC_COUNTS:
            out[name] = xr.where(ok, values, 0).astype(np.int64)  # type: ignore[no-untyped-call]
        else:
            out[name] = values.where(ok).astype(np.float64)
    for name, values in counts.items():
        out[name] = xr.where(ok, values, 0).astype(np.int64)  # type: ignore[no-untyped-call]
    if "processing_time_ms" in cube.data_vars:
        out["processing_time_ms"] = cube["processing_time_ms"].astype(np.float64)
    else:
        out["processing_time_ms"] = xr.full_like(ok, np.nan, dtype=np.float64)
    for name in ("status", "error"):
        if name in cube.data_vars:
            out[name] = cube[name]
    return out


def _output_order(ks: list[int], measures: list[str], out: dict[str, xr.DataArray]) -> list[str]:
    """The variables of the metric set in their order (``measures``: a retrieval cube's)."""
    order = [*MAP_METRICS]
    order += [f"{name}_{kk}" for name in AT_K_METRICS for kk in ks]
    order += ["total_queries_processed", "total_queries_excluded", "r0_rate", "processing_time_ms"]
    order += [*WORKBENCH_COUNTS]
    order += [*BOJANIC_METRICS, *BOJANIC_COUNTS, "rank_histogram"]
    order += measures
    order += [n for n in ("status", "error") if n in out]
    return order
