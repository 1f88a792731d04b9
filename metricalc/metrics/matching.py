"""Matching metrics from the nearest-neighbour fields of a QueryCube.

The mean matching accuracy of D2-Net's HPatches-sequences benchmark (:func:`matching_accuracy`,
and the previous ``"matched_pairs"`` convention) and the keypoint and match counts it prints
(:func:`matching_counts`), over a set of image pairs (every pair of the cube, D2-Net's 108
sequences, all 116, or a list; :mod:`metricalc.hpatches`) and its illumination / viewpoint
splits (:data:`MMA_SPLITS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.hpatches import HPATCHES_PAIRS, select_sequences
from metricalc.metrics.reductions import (
    PAIR_UNIT,
    QUERY_VARS,
    group_max,
    group_sum,
    nanmean,
    pair_keypoints,
    prepare_cube,
    ratio,
    unit_scene,
)
from metricalc.validation import Boolean, Choice, ListOf, Nullable, Real, validate_params

__all__ = [
    "MMA_CONVENTIONS",
    "MMA_SPLITS",
    "matching_accuracy",
    "matching_counts",
    "pair_matching_accuracy",
]

MMA_CONVENTIONS = ("d2net", "matched_pairs")
"""Conventions of :func:`matching_accuracy`: ``"d2net"`` (the default) and ``"matched_pairs"``."""

MMA_SPLITS = ("overall", "illumination", "viewpoint")
"""Labels of the ``split`` dim of :func:`matching_accuracy` and :func:`matching_counts`
(``by_split=True``): every image pair, the ``illumination`` pairs, the ``viewpoint`` pairs."""


def _mma_thresholds(thresholds: Iterable[float]) -> xr.DataArray:
    values = np.asarray(list(thresholds), dtype=np.float64)
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
        split = np.array([scene_split[s] for s in unit_scene(units).tolist()], dtype=str)
        rows = [np.ones(units.size, bool), split == "illumination", split == "viewpoint"]
        matrix = np.array(rows, dtype=np.int64).reshape(len(MMA_SPLITS), units.size)
        return xr.DataArray(
            matrix, dims=("split", PAIR_UNIT), coords={"split": list(MMA_SPLITS), PAIR_UNIT: units}
        )

    if scenes is None:
        units = np.unique(cube[PAIR_UNIT].values)
        n_pairs = member(units).sum(PAIR_UNIT).values
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


@validate_params(
    thresholds=ListOf(Real()),
    convention=Choice(MMA_CONVENTIONS),
    mutual=Nullable(Boolean()),
    by_split=Boolean(),
)
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
    d2net = convention == "d2net"
    mutual = _mutual(convention, mutual)
    needed = (*QUERY_VARS, "nn_error", *(("nn_mutual",) if mutual else ()))
    cube, ok = prepare_cube(cube, needed, "matching_accuracy")
    attrs = {**cube.attrs, "convention": convention, "mutual": int(mutual)}
    cube, member, n_pairs, attrs["sequences"] = _pair_set(cube, sequences, "matching_accuracy")
    per_pair = _pair_accuracy(cube, _mma_thresholds(thresholds), d2net=d2net, mutual=mutual)
    members = member(per_pair[PAIR_UNIT].values.astype(str))
    total = xr.dot(per_pair.fillna(0), members, dim=PAIR_UNIT)
    if d2net:
        pairs = xr.DataArray(n_pairs, dims="split", coords={"split": list(MMA_SPLITS)})
    else:
        pairs = xr.dot(per_pair.notnull().astype(np.int64), members, dim=PAIR_UNIT)
    mma = ratio(total, pairs).where(ok)
    mma = mma.transpose("descriptor", "split", "threshold").rename("mma")
    return _split_result(mma, n_pairs, by_split, attrs)


def _mutual(convention: str, mutual: bool | None) -> bool:
    """Whether a convention's matches are mutual nearest neighbours (``mutual`` as asked)."""
    d2net = convention == "d2net"
    if mutual is None:
        return d2net
    if d2net and not mutual:
        raise InvalidInputError(
            "matching_accuracy: convention='d2net' matches mutual nearest neighbours; for all "
            "nearest neighbours use convention='matched_pairs' (mutual=False)"
        )
    return mutual


def _pair_accuracy(
    cube: xr.Dataset, threshold: xr.DataArray, *, d2net: bool, mutual: bool
) -> xr.DataArray:
    """:math:`\\operatorname{acc}_p(t)` over (descriptor, pair unit, threshold) of a prepared
    cube; NaN for a pair without matches."""
    error = cube["nn_error"]
    matched = cube["nn_mutual"] == 1 if d2net else cast(xr.DataArray, np.isfinite(error))
    if mutual and not d2net:
        matched = matched & (cube["nn_mutual"] == 1)
    accurate = (error <= threshold) & matched  # NaN error: never accurate
    return ratio(group_sum(accurate, PAIR_UNIT), group_sum(matched, PAIR_UNIT))


@validate_params(threshold=Real(), convention=Choice(MMA_CONVENTIONS))
def pair_matching_accuracy(
    cube: xr.Dataset, threshold: float, *, convention: str = "d2net"
) -> xr.DataArray:
    r"""The accuracy :math:`\operatorname{acc}_p(t)` of every image pair of the cube at one
    threshold (:func:`matching_accuracy`), the units whose mean is the MMA.

    Returns
    -------
    xarray.DataArray
        Over (``descriptor``, ``pair``), the coordinates ``pair`` (``"scene/pair"``, sorted)
        and ``scene``; ``"d2net"``: 0 for a pair without a mutual match (every pair counts);
        ``"matched_pairs"``: NaN there (left out of the mean). The mean over ``pair`` (NaN
        skipped) is :func:`matching_accuracy` of the cube's pairs.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> pair_matching_accuracy(example_cube(), 3.0).values.tolist()
    [[0.5]]
    """
    d2net = convention == "d2net"
    mutual = _mutual(convention, None)
    needed = (*QUERY_VARS, "nn_error", *(("nn_mutual",) if mutual else ()))
    cube, ok = prepare_cube(cube, needed, "pair_matching_accuracy")
    per_pair = _pair_accuracy(cube, _mma_thresholds([threshold]), d2net=d2net, mutual=mutual)
    per_pair = per_pair.isel(threshold=0, drop=True)
    if d2net:
        per_pair = per_pair.fillna(0.0)
    units = np.asarray(per_pair[PAIR_UNIT].values).astype(str)
    out = per_pair.where(ok).rename({PAIR_UNIT: "pair"}).transpose("descriptor", "pair")
    out = out.drop_vars([c for c in out.coords if c not in ("descriptor",)])
    return out.assign_coords(pair=units, scene=("pair", unit_scene(units)))


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
    cube, ok = prepare_cube(cube, (*QUERY_VARS, "nn_mutual", "n_candidates"), "matching_counts")
    cube, member, n_pairs, label = _pair_set(cube, sequences, "matching_counts")
    matches = group_sum(cube["nn_mutual"] == 1, PAIR_UNIT)
    members = member(matches[PAIR_UNIT].values.astype(str))
    pairs = xr.DataArray(n_pairs, dims="split", coords={"split": list(MMA_SPLITS)})
    per_pair = ratio(xr.dot(matches, members, dim=PAIR_UNIT), pairs).where(ok)
    present = cube["n_relevant"] >= 0
    # only the selected pairs' images: the group codes also name pairs the selection dropped
    units = {PAIR_UNIT: np.unique(np.asarray(cube[PAIR_UNIT].values).astype(str))}
    queries = group_sum(present, PAIR_UNIT).sel(units)  # image 1's keypoints, in every pair
    candidates = pair_keypoints(cube).sel(units)  # NaN where unknown (-1): left out
    scene_of = unit_scene(queries[PAIR_UNIT].values.astype(str))
    queries = queries.assign_coords(_unit_scene=(PAIR_UNIT, scene_of))
    reference = group_max(queries, "_unit_scene")  # pairs of one scene share image 1
    images = xr.concat(
        [
            reference.rename(_unit_scene="_image").drop_vars("_image"),
            candidates.rename({PAIR_UNIT: "_image"}).drop_vars("_image"),
        ],
        dim="_image",
    )
    seen = images.notnull().sum("_image") > 0
    if images.sizes["_image"]:
        low, high = images.fillna(np.inf).min("_image"), images.fillna(-np.inf).max("_image")
    else:  # no image at all: no min / max
        low = high = nanmean(images, "_image")
    result = xr.Dataset(
        {
            "matches_per_pair": per_pair.transpose("descriptor", "split"),
            "keypoints_mean": nanmean(images, "_image").where(ok),
            "keypoints_min": low.where(seen & ok),
            "keypoints_max": high.where(seen & ok),
        },
        attrs={**cube.attrs, "sequences": label},
    )
    result = result.assign_coords(n_pairs=("split", n_pairs))
    keep = ("descriptor", "split", "n_pairs")
    return result.drop_vars([c for c in result.coords if c not in keep])
