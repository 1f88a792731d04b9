r"""Pairs of images to per-pair pose errors, and their summary.

:func:`evaluate_pairs` extracts each image once per method (built-in detectors through
:func:`metricalc.keypoints.extraction.extract_image`, or your own ``.npz`` features), matches
mutual nearest neighbours (:func:`metricalc.keypoints.matching.nn_matches`), estimates the pose
(:func:`~metricalc.benchmarks.twoview.estimation.estimate_relative_pose`) and measures
:math:`e_R, e_t, e = \max(e_R, e_t)` against the pair's :math:`T_{0\to1}`; a failed estimate
has infinite errors. The result is a Dataset over ``descriptor x pair``; :func:`summarize`
reduces it to the pose AUCs at 5 / 10 / 20 degrees (SuperGlue) and the mAA at 10 degrees (IMC)
per descriptor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import xarray as xr

from metricalc.benchmarks.twoview.accuracy import POSE_AUC_THRESHOLDS, imc_maa, pose_auc
from metricalc.benchmarks.twoview.angular import pose_error, relative_pose_error
from metricalc.benchmarks.twoview.estimation import PoseSettings, estimate_relative_pose
from metricalc.benchmarks.twoview.pairs import PosePair
from metricalc.errors import InvalidInputError
from metricalc.keypoints.estimators import DEFAULT_RANSAC_THRESHOLDS
from metricalc.keypoints.extraction import MAX_KEYPOINTS, extract_image
from metricalc.keypoints.feature_files import load_image_features
from metricalc.keypoints.featureset import Features
from metricalc.keypoints.homography import RANSAC_SELECTIONS, best_threshold
from metricalc.keypoints.matching import nn_matches
from metricalc.validation import Choice, validate_params
from metricalc.version import __version__

__all__ = [
    "RESULT_VARIABLES",
    "SWEEP_THRESHOLDS",
    "at_best_threshold",
    "builtin_source",
    "evaluate_pairs",
    "npz_source",
    "pair_result",
    "summarize",
]

RESULT_VARIABLES: tuple[str, ...] = (
    "pose_error", "R_error", "t_error", "n_inliers", "n_matches", "success"
)
"""The per-pair variables of :func:`evaluate_pairs`: errors in degrees (inf on failure),
inlier and match counts, whether an estimate was found."""

SWEEP_THRESHOLDS: tuple[float, ...] = DEFAULT_RANSAC_THRESHOLDS
"""Glue Factory's sweep of pixel thresholds (0.5, 1.0, ..., 3.0) for ``ransac_th: -1``."""

FeatureSource = Callable[[str, str], Features]
"""``source(method, image_name) -> Features`` of one image."""


def pair_result(
    pair: PosePair, points0: Any, points1: Any, settings: PoseSettings | None = None
) -> dict[str, float]:
    """The per-pair variables of matched points ``points0[i] <-> points1[i]`` of ``pair``.

    Examples
    --------
    >>> from metricalc.benchmarks.twoview.generator import synthetic_correspondences
    >>> c = synthetic_correspondences(n_points=100, seed=1)
    >>> r = pair_result(PosePair("a", "b", c.K0, c.K1, c.T_0to1), c.points0, c.points1)
    >>> r["n_matches"], r["success"], bool(r["pose_error"] < 5)
    (100.0, 1.0, True)
    """
    estimate = estimate_relative_pose(points0, points1, pair.K0, pair.K1, settings)
    result = {"n_matches": float(len(estimate.inliers)),
              "n_inliers": float(estimate.inliers.sum()), "success": float(estimate.success)}
    if estimate.R is None or estimate.t is None:
        return {**result, "pose_error": np.inf, "R_error": np.inf, "t_error": np.inf}
    t_err, R_err = relative_pose_error(pair.T_0to1, estimate.R, estimate.t)
    error = float(pose_error(R_err, t_err))
    return {**result, "pose_error": error, "R_error": float(R_err), "t_error": float(t_err)}


def _read_gray(path: Path) -> np.ndarray:
    if not path.is_file():
        raise InvalidInputError(f"image {path} does not exist")
    image = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    if image is None:
        raise InvalidInputError(f"cannot read image {path}; expected a PNG or JPEG file")
    return np.asarray(image)


def builtin_source(images: str | Path, *, max_keypoints: int | None = MAX_KEYPOINTS
                   ) -> FeatureSource:
    """Features of ``images/<name>`` by a built-in method (every keypoint, no border)."""
    folder = Path(images)

    def source(method: str, name: str) -> Features:
        gray = _read_gray(folder / name)
        return extract_image(gray, method, max_keypoints=max_keypoints, border=0.0)[method]

    return source


def npz_source(features: str | Path) -> FeatureSource:
    """Your own features, ``features/<method>/<name>.npz`` (arrays ``keypoints``,
    ``descriptors``; the layout of :func:`metricalc.keypoints.save_features` per image)."""
    folder = Path(features)

    def source(method: str, name: str) -> Features:
        path = folder / method / f"{name}.npz"
        if not path.is_file():
            raise InvalidInputError(f"feature file {path} does not exist")
        return load_image_features(path)

    return source


def evaluate_pairs(
    pairs: Sequence[PosePair],
    source: FeatureSource,
    methods: Iterable[str],
    *,
    settings: PoseSettings | None = None,
    ratio: float | None = None,
    thresholds: Sequence[float] | None = None,
    seeds: Sequence[int] | None = None,
) -> xr.Dataset:
    """Every method on every pair: the per-pair variables over ``descriptor x pair``.

    With ``thresholds``, every pair is estimated at each pixel threshold of the sweep (the
    matches computed once) and the variables are over ``descriptor x threshold x pair``
    (Glue Factory's ``ransac_th: -1`` runs :data:`SWEEP_THRESHOLDS`); :func:`summarize` then
    keeps each descriptor's best threshold. With ``seeds``, every pair is estimated once per
    seed of the random estimator (the matches computed once), over ``descriptor x seed x pair``.

    Parameters
    ----------
    pairs : sequence of PosePair
        From :func:`~metricalc.benchmarks.twoview.pairs.read_pairs`.
    source : callable
        ``source(method, image_name) -> Features``: :func:`builtin_source` or
        :func:`npz_source`.
    methods : iterable of str
        The descriptors (built-in method names or feature subfolders).
    settings : PoseSettings, optional
        The estimator's settings (recorded in the attrs).
    ratio : float, optional
        Lowe's ratio test on top of mutual nearest neighbours (recorded; None: none).
    thresholds : sequence of float, optional
        A sweep of pixel thresholds (replacing ``settings.threshold``; attr
        ``pose_threshold = "sweep"``, coordinate ``threshold``).
    seeds : sequence of int, optional
        Seeds of the estimator (replacing ``settings.seed``; coordinate ``seed``); not with
        ``thresholds``.

    Returns
    -------
    xarray.Dataset
        :data:`RESULT_VARIABLES` over ``(descriptor, pair)``; coords ``name0``, ``name1`` and
        ``scene`` (:attr:`~metricalc.benchmarks.twoview.pairs.PosePair.scene`, ``""`` for none) on
        ``pair``;
        attrs: every setting (``pose_*``), ``matcher``, ``ratio``.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.benchmarks.twoview.generator import make_twoview_dataset
    >>> from metricalc.benchmarks.twoview.pairs import read_pairs
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     pairs = read_pairs(make_twoview_dataset(folder, n_pairs=2))
    ...     results = evaluate_pairs(pairs, builtin_source(folder + "/images"), ["orb"])
    >>> results.sizes["pair"], results.attrs["pose_estimator"]
    (2, 'ransac')
    """
    settings = settings or PoseSettings()
    names = list(dict.fromkeys(methods))
    if not names or not pairs:
        raise InvalidInputError("evaluate_pairs needs at least one method and one pair")
    if thresholds is not None and seeds is not None:
        raise InvalidInputError(
            "give a threshold sweep or several seeds, not both (the seeds' spread is measured "
            "at one threshold)"
        )
    axis, runs = "threshold", [settings]
    if thresholds is not None:
        runs = [replace(settings, threshold=float(t)) for t in _distinct(thresholds, "thresholds")]
    if seeds is not None:
        axis, runs = "seed", [replace(settings, seed=s) for s in _distinct(seeds, "seeds")]
    rows = {name: _evaluate_method(pairs, source, name, runs, ratio) for name in names}
    dims: tuple[str, ...] = ("descriptor", axis, "pair")
    data = {key: (dims, np.array([[[r[key] for r in per] for per in rows[n]] for n in names]))
            for key in RESULT_VARIABLES}
    coords: dict[str, Any] = {
        "descriptor": names,
        axis: [getattr(s, axis) for s in runs],
        "pair": [p.name for p in pairs],
        "name0": ("pair", [p.name0 for p in pairs]),
        "name1": ("pair", [p.name1 for p in pairs]),
        "scene": ("pair", [p.scene for p in pairs]),
    }
    attrs = {**settings.attrs(), "matcher": "mutual_nn", "ratio": "none" if ratio is None
             else float(ratio), "metricalc_version": __version__}
    results = xr.Dataset(data, coords=coords, attrs=attrs)
    if thresholds is None and seeds is None:
        return results.isel(threshold=0, drop=True)
    if seeds is None:
        results.attrs["pose_threshold"] = "sweep"
    else:
        results.attrs["pose_seed"] = "seeds"
    return results


def _distinct(values: Sequence[Any], what: str) -> list[Any]:
    """The pixel thresholds (floats) or seeds (integers) of a run, one or more, distinct."""
    kind = int if what == "seeds" else float
    out = [kind(v) for v in values]
    if not out or len(set(out)) != len(out):
        raise InvalidInputError(f"{what} {out!r}; expected one or more distinct {what}")
    return out


def _evaluate_method(
    pairs: Sequence[PosePair], source: FeatureSource, method: str,
    sweep: Sequence[PoseSettings], ratio: float | None,
) -> list[list[dict[str, float]]]:
    """Per setting of the sweep (thresholds or seeds), the results of every pair (matches
    computed once)."""
    cache: dict[str, Features] = {}
    results: list[list[dict[str, float]]] = [[] for _ in sweep]
    for pair in pairs:  # one estimation per pair and setting: RANSAC is sequential anyway
        for name in (pair.name0, pair.name1):
            if name not in cache:
                cache[name] = source(method, name)
        first, second = cache[pair.name0], cache[pair.name1]
        if first.descriptors.shape[1] != second.descriptors.shape[1]:
            raise InvalidInputError(
                f"method {method!r}: {pair.name0} has descriptors of dimension "
                f"{first.descriptors.shape[1]}, {pair.name1} of {second.descriptors.shape[1]}; "
                "expected the same"
            )
        matches, _ = nn_matches(first.descriptors, second.descriptors, mutual=True, ratio=ratio)
        keep = matches >= 0
        points0, points1 = first.keypoints[keep], second.keypoints[matches[keep]]
        for row, settings in zip(results, sweep, strict=True):
            row.append(pair_result(pair, points0, points1, settings))
    return results


@validate_params(selection=Choice(RANSAC_SELECTIONS))
def summarize(
    results: xr.Dataset,
    thresholds: Iterable[float] = POSE_AUC_THRESHOLDS,
    *,
    selection: str = "gluefactory",
) -> xr.Dataset:
    """Per descriptor: ``auc@<t>`` (SuperGlue's pose AUC, unrounded), ``mAA@10`` (IMC),
    ``failures`` (pairs without an estimate) and ``n_pairs``; the results' attrs.

    Results of a threshold sweep (a ``threshold`` dimension) are summarised at each
    descriptor's best threshold, reported as the variable ``threshold``: the one with the
    highest mean of its AUCs, by :func:`metricalc.keypoints.homography.best_threshold`'s
    ``selection`` rule (``"gluefactory"``, the default: the AUCs rounded to 4 decimals first, as
    Glue Factory's ``eval_poses``; the first of equal scores wins). Results over several seeds
    (a ``seed`` dimension) give the mean over seeds of each column (``failures`` too).

    Examples
    --------
    >>> import xarray as xr
    >>> r = xr.Dataset({"pose_error": (("descriptor", "pair"), [[1.0, 3.0, float("inf")]]),
    ...                 "success": (("descriptor", "pair"), [[1.0, 1.0, 0.0]])},
    ...                coords={"descriptor": ["sift"]})
    >>> s = summarize(r, [5.0])
    >>> round(float(s["auc@5"][0]), 4), round(float(s["mAA@10"][0]), 4), int(s["failures"][0])
    (0.5, 0.5333, 1)
    """
    taus = [float(t) for t in thresholds]
    if "seed" in results.dims:
        per_seed = [summarize(results.isel(seed=k, drop=True), taus, selection=selection)
                    for k in range(results.sizes["seed"])]
        mean = xr.concat(per_seed, "seed").mean("seed")
        mean["n_pairs"] = per_seed[0]["n_pairs"]
        return mean.assign_attrs(per_seed[0].attrs)
    if "threshold" in results.dims:
        results = at_best_threshold(results, taus, selection)
    errors = np.asarray(results["pose_error"].values, dtype=np.float64)
    aucs = np.array([pose_auc(row, taus) for row in errors])  # one row per descriptor
    data: dict[str, Any] = {
        f"auc@{t:g}": ("descriptor", aucs[:, k]) for k, t in enumerate(taus)
    }
    data["mAA@10"] = ("descriptor", [imc_maa(row) for row in errors])
    data["failures"] = ("descriptor", (results["success"].values == 0).sum(axis=1))
    data["n_pairs"] = ("descriptor", np.full(len(errors), errors.shape[1]))
    if "threshold" in results.coords:
        data["threshold"] = ("descriptor", np.asarray(results["threshold"].values, float))
    return xr.Dataset(data, coords={"descriptor": results["descriptor"].values},
                      attrs=dict(results.attrs))


def at_best_threshold(
    results: xr.Dataset,
    thresholds: Iterable[float] = POSE_AUC_THRESHOLDS,
    selection: str = "gluefactory",
) -> xr.Dataset:
    """Each descriptor's results at its best pixel threshold of a sweep (:func:`summarize`),
    the coordinate ``threshold`` then over ``descriptor``; results without a sweep unchanged."""
    if "threshold" not in results.dims:
        return results
    taus = [float(t) for t in thresholds]
    errors = results["pose_error"].transpose("descriptor", "threshold", "pair").values
    best = [best_threshold([pose_auc(row, taus) for row in per], selection) for per in errors]
    picked = xr.DataArray(best, dims="descriptor")
    return results.isel(threshold=picked)
