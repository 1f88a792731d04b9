r"""Homography estimation from matches and the Glue Factory HPatches metrics (docs/experiments.md).

Per image pair (image 1 -> image k, ground truth :math:`H`), from the matched keypoints
:math:`(p_i, q_i)`:

- **symmetric reprojection error** of a match,
  :math:`e_i = \tfrac12 (\lVert \pi(H p_i) - q_i \rVert + \lVert \pi(H^{-1} q_i) - p_i \rVert)`
  (:math:`\pi` divides by the homogeneous coordinate); ``prec@1px`` and ``prec@3px`` are the
  fractions of matches with :math:`e_i < 1` and :math:`e_i < 3` (strict; 0 for a pair without
  matches);
- **corner error** of an estimate :math:`\hat H`: the mean distance between the four image
  corners :math:`c_j` of image 1 mapped by :math:`\hat H` and by :math:`H`,
  :math:`\tfrac14 \sum_j \lVert \pi(\hat H c_j) - \pi(H c_j) \rVert`, and :math:`+\infty` when the
  estimation fails;
- estimates by plain DLT over all matches (:func:`dlt_homography`; Glue Factory's variant,
  kornia's solver, is :func:`kornia_dlt_homography`, see :data:`DLT_METHODS`) and by OpenCV's
  robust estimators (:data:`ROBUST_ESTIMATORS`: ``RANSAC``, ``USAC_MAGSAC``, ``USAC_DEFAULT``,
  ``LMEDS``), at one or several inlier thresholds (``ransac_th``).

Over all pairs, :func:`error_auc` is the area under the recall-versus-error curve up to a
threshold divided by the threshold (AUC at 1, 3 and 5 px), and :func:`summarize` picks the
threshold with the best mean AUC (by the rule of :data:`RANSAC_SELECTIONS`) and reports the
medians of the per-pair values as ``m*`` keys.

Coordinates follow the rest of :mod:`metricalc.keypoints`: OpenCV's convention, pixel centres
at integers, so the outer corners of a ``W x H`` image are :math:`(-\tfrac12, -\tfrac12)`,
:math:`(W - \tfrac12, -\tfrac12)`, :math:`(W - \tfrac12, H - \tfrac12)` and
:math:`(-\tfrac12, H - \tfrac12)` (the physical corners Glue Factory writes as
:math:`(0, 0) .. (W, H)` in its top-left-corner convention). ``docs/experiments.md`` has the
formulas with a worked example.

This module holds the per-pair metrics and their summary, and is the public face of the three
modules below them: :mod:`~metricalc.keypoints.homography_errors` (the errors and the AUC),
:mod:`~metricalc.keypoints.dlt` (the plain DLT estimates) and
:mod:`~metricalc.keypoints.estimators` (estimators by name, pluggable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.keypoints.dlt import (
    DLT_METHODS,
    _dlt_estimate,
    dlt_homography,
    kornia_dlt_homography,
)
from metricalc.keypoints.estimators import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MAX_ITERS,
    DEFAULT_RANSAC_THRESHOLDS,
    ESTIMATORS,
    ROBUST_ESTIMATORS,
    Estimate,
    available_estimators,
    estimate_homography,
    ransac_thresholds,
    register_estimator,
)
from metricalc.keypoints.homography_errors import (
    AUC_THRESHOLDS,
    PRECISION_THRESHOLDS,
    _homography,
    corner_error,
    error_auc,
    image_corners,
    symmetric_error,
)
from metricalc.validation import as_points

__all__ = [
    "AUC_THRESHOLDS",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_MAX_ITERS",
    "DEFAULT_RANSAC_THRESHOLDS",
    "DLT_METHODS",
    "ESTIMATORS",
    "RANSAC_SELECTIONS",
    "ROBUST_ESTIMATORS",
    "Estimate",
    "available_estimators",
    "best_threshold",
    "corner_error",
    "dlt_homography",
    "error_auc",
    "estimate_homography",
    "image_corners",
    "kornia_dlt_homography",
    "pair_homography_metrics",
    "ransac_thresholds",
    "register_estimator",
    "summarize",
    "symmetric_error",
]

RANSAC_SELECTIONS: tuple[str, ...] = ("unrounded", "gluefactory")
"""How :func:`best_threshold` compares the thresholds of a ``ransac_th`` sweep: by the mean of
the unrounded AUCs (``"unrounded"``), or by the mean of the AUCs rounded to 4 decimals as Glue
Factory's ``eval_poses`` does (``"gluefactory"``); the first threshold wins a tie in both."""

# --------------------------------------------------------------------------------------------
# Per pair and summary
# --------------------------------------------------------------------------------------------


def pair_homography_metrics(
    keypoints0: Any,
    keypoints1: Any,
    matches0: Any,
    H_true: Any,
    shape0: tuple[int, int],
    *,
    estimator: str = "RANSAC",
    thresholds: Sequence[float] = (3.0,),
    max_iters: int = DEFAULT_MAX_ITERS,
    confidence: float = DEFAULT_CONFIDENCE,
    dlt: str = "svd",
    scores0: Any = None,
) -> dict[str, Any]:
    """The Glue Factory metrics of one image pair.

    Parameters
    ----------
    keypoints0, keypoints1 : array-like (N0, 2), (N1, 2)
        Keypoints of image 1 and image k.
    matches0 : array-like of int (N0,)
        Index into ``keypoints1`` of each keypoint of image 1, -1 where unmatched.
    H_true : ndarray (3, 3)
        Ground truth image 1 -> image k.
    shape0 : (height, width)
        Size of image 1 (for the corner error).
    estimator, thresholds, max_iters, confidence
        The robust estimator and its inlier thresholds (one estimate per threshold).
    dlt : str
        The estimate of ``H_error_dlt`` (:data:`DLT_METHODS`): ``"svd"`` (:func:`dlt_homography`),
        ``"kornia"`` or ``"gluefactory"`` (:func:`kornia_dlt_homography`, the latter weighted by
        ``scores0``).
    scores0 : array-like of float (N0,), optional
        The matching score of each keypoint of image 1 (read where matched); needed by
        ``dlt="gluefactory"``.

    Returns
    -------
    dict
        ``prec@1px``, ``prec@3px``, ``num_matches``, ``num_keypoints`` (mean of the two images'
        counts), ``H_error_dlt`` (floats), and ``H_error_ransac``, ``ransac_inl``,
        ``ransac_inl%`` as float arrays over ``thresholds``.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[1.0, 0, 10], [0, 1, 5], [0, 0, 1]])
    >>> k0 = np.array([[50.0, 50], [150, 60], [140, 170], [60, 150], [100, 100]])
    >>> k1 = k0 + [10, 5]
    >>> m = pair_homography_metrics(k0, k1, np.arange(5), H, (200, 200), estimator="DLT")
    >>> m["prec@1px"], m["num_matches"], round(m["H_error_dlt"], 9), m["H_error_ransac"].round(9)
    (1.0, 5, 0.0, array([0.]))
    """
    k0, k1 = as_points("keypoints0", keypoints0), as_points("keypoints1", keypoints1)
    m0 = np.asarray(matches0).reshape(-1)
    if m0.shape != (len(k0),) or not np.issubdtype(m0.dtype, np.integer):
        raise InvalidInputError(
            f"matches0 has shape {m0.shape} and dtype {m0.dtype}; expected {len(k0)} integers"
        )
    if (m0 >= len(k1)).any() or (m0 < -1).any():
        raise InvalidInputError(f"matches0 holds indices outside -1 .. {len(k1) - 1}")
    if dlt not in DLT_METHODS:
        raise InvalidInputError(f"dlt={dlt!r}; expected one of {', '.join(DLT_METHODS)}")
    truth = _homography(H_true, "H_true")
    matched = m0 >= 0
    p0, p1 = k0[matched], k1[m0[matched]]
    scores = None
    if scores0 is not None:
        all_scores = np.asarray(scores0, dtype=np.float64).reshape(-1)
        if all_scores.shape != (len(k0),):
            raise InvalidInputError(
                f"scores0 has shape {all_scores.shape}; expected ({len(k0)},), one per keypoint"
            )
        scores = all_scores[matched]
    errors = symmetric_error(p0, p1, truth)
    result: dict[str, Any] = {}
    for t in PRECISION_THRESHOLDS:
        result[f"prec@{t:g}px"] = float(np.mean(errors < t)) if errors.size else 0.0
    result["num_matches"] = int(matched.sum())
    result["num_keypoints"] = (len(k0) + len(k1)) / 2.0
    result["H_error_dlt"] = corner_error(_dlt_estimate(dlt, p0, p1, scores), truth, shape0)
    H_error, inl, share = [], [], []
    for t in thresholds:
        found = estimate_homography(
            p0, p1, estimator=estimator, threshold=t, max_iters=max_iters, confidence=confidence
        )
        H_error.append(corner_error(found.H, truth, shape0))
        inl.append(float(found.inliers.sum()))
        share.append(float(found.inliers.sum()) / max(len(p0), 1))
    result["H_error_ransac"] = np.asarray(H_error)
    result["ransac_inl"] = np.asarray(inl)
    result["ransac_inl%"] = np.asarray(share)
    return result


SCALAR_KEYS = ("prec@1px", "prec@3px", "num_matches", "num_keypoints", "H_error_dlt")
"""Per-pair values that do not depend on the robust threshold."""

SWEEP_KEYS = ("H_error_ransac", "ransac_inl", "ransac_inl%")
"""Per-pair values of the robust estimator, one per threshold."""


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else float("nan")


def best_threshold(aucs: Any, selection: str = "unrounded") -> int:
    r"""Index of the best threshold of a ``ransac_th`` sweep, from its AUCs.

    Threshold :math:`j` scores the mean of its AUCs,
    :math:`\tfrac1T \sum_t \mathrm{AUC}_{j,t}` (``"unrounded"``, metricalc's rule) or
    :math:`\tfrac1T \sum_t \mathrm{round}(\mathrm{AUC}_{j,t}, 4)` (``"gluefactory"``: Glue
    Factory's ``cal_error_auc`` returns ``np.round(auc, 4)`` and ``eval_poses`` picks
    ``max(mAAs, key=mAAs.get)`` over their means). The first threshold with the highest score
    wins (as Python's ``max``: a later one must score strictly higher).

    Parameters
    ----------
    aucs : array-like (thresholds, auc thresholds)
        The AUCs of each threshold of the sweep, in sweep order.
    selection : str
        ``"unrounded"`` or ``"gluefactory"`` (:data:`RANSAC_SELECTIONS`).

    Examples
    --------
    >>> aucs = [[0.12349, 0.5, 0.7], [0.12344, 0.50004, 0.70004]]  # rounding flips the pick
    >>> best_threshold(aucs), best_threshold(aucs, "gluefactory")
    (1, 0)
    >>> aucs = [[0.40004, 0.6, 0.8], [0.40001, 0.60004, 0.8]]  # rounding ties them: the first
    >>> best_threshold(aucs), best_threshold(aucs, "gluefactory")
    (1, 0)
    """
    if selection not in RANSAC_SELECTIONS:
        raise InvalidInputError(
            f"selection={selection!r}; expected one of {', '.join(RANSAC_SELECTIONS)}"
        )
    values = np.asarray(aucs, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0:
        raise InvalidInputError(f"aucs has shape {values.shape}; expected (thresholds, AUCs)")
    if selection == "gluefactory":
        values = np.round(values, 4)
    scores = values.mean(axis=1)
    best = 0
    for j in range(1, len(scores)):  # a handful of thresholds; Python max's tie rule
        if scores[j] > scores[best]:
            best = j
    return best


def summarize(
    pairs: Mapping[str, Any],
    thresholds: Sequence[float],
    *,
    auc_thresholds: Sequence[float] = AUC_THRESHOLDS,
    selection: str = "unrounded",
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    r"""Aggregate per-pair metrics the way Glue Factory's HPatches benchmark does.

    For every robust threshold :math:`\theta`, the AUCs of ``H_error_ransac`` at
    ``auc_thresholds`` and their mean (``mAA``); the best :math:`\theta` is the one with the
    highest mean AUC, by :func:`best_threshold` with ``selection`` (``"unrounded"``, or
    ``"gluefactory"``: the AUCs rounded to 4 decimals before the mean; the first on ties); the
    reported values are never rounded. Reported at it: ``H_error_ransac@<t>px``,
    ``H_error_ransac_mAA``, ``ransac_th``; always: ``H_error_dlt@<t>px``; and the medians of the
    per-pair values as ``m<key>`` (``mprec@1px``, ``mnum_matches``, ``mH_error_dlt``,
    ``mH_error_ransac``, ``mransac_inl%``, ...).

    Parameters
    ----------
    pairs : mapping
        :data:`SCALAR_KEYS` -> array over pairs, :data:`SWEEP_KEYS` -> array (pair, threshold).
    thresholds : sequence of float
        The robust thresholds, in the order of the sweep columns.
    selection : str
        The rule of :func:`best_threshold` (:data:`RANSAC_SELECTIONS`).

    Returns
    -------
    summary : dict
        Key -> float (inf or NaN possible: a median of failed estimates).
    sweep : dict
        ``str(threshold)`` -> ``{"H_error_ransac@<t>px": ..., "H_error_ransac_mAA": ...}``.

    Examples
    --------
    >>> import numpy as np
    >>> pairs = {"prec@1px": np.array([1.0, 0.5]), "prec@3px": np.array([1.0, 1.0]),
    ...          "num_matches": np.array([10, 20]), "num_keypoints": np.array([50.0, 60.0]),
    ...          "H_error_dlt": np.array([0.5, np.inf]),
    ...          "H_error_ransac": np.array([[0.5, 4.0], [2.0, 0.2]]),
    ...          "ransac_inl": np.array([[8.0, 9.0], [15.0, 18.0]]),
    ...          "ransac_inl%": np.array([[0.8, 0.9], [0.75, 0.9]])}
    >>> summary, sweep = summarize(pairs, [1.0, 3.0])
    >>> summary["ransac_th"], summary["mH_error_ransac"], summary["mnum_matches"]
    (1.0, 1.25, 15.0)
    """
    ths = [float(t) for t in thresholds]
    sweep_values = {key: np.asarray(pairs[key], dtype=np.float64) for key in SWEEP_KEYS}
    for key, values in sweep_values.items():
        if values.ndim != 2 or values.shape[1] != len(ths):
            raise InvalidInputError(
                f"pairs[{key!r}] has shape {values.shape}; expected (pairs, {len(ths)})"
            )
    labels = [f"@{t:g}px" for t in auc_thresholds]
    sweep: dict[str, dict[str, float]] = {}
    all_aucs = []
    for j, th in enumerate(ths):
        aucs = error_auc(sweep_values["H_error_ransac"][:, j], auc_thresholds)
        entry = {f"H_error_ransac{label}": float(a) for label, a in zip(labels, aucs, strict=True)}
        entry["H_error_ransac_mAA"] = float(np.mean(aucs))
        sweep[f"{th:g}"] = entry
        all_aucs.append(aucs)
    best = best_threshold(all_aucs, selection)
    summary: dict[str, float] = {}
    for key in SCALAR_KEYS:
        summary[f"m{key}"] = _median(np.asarray(pairs[key], dtype=np.float64))
    for key in SWEEP_KEYS:
        summary[f"m{key}"] = _median(sweep_values[key][:, best])
    dlt = error_auc(np.asarray(pairs["H_error_dlt"], dtype=np.float64), auc_thresholds)
    for label, value in zip(labels, dlt, strict=True):
        summary[f"H_error_dlt{label}"] = float(value)
    summary.update(sweep[f"{ths[best]:g}"])
    summary["ransac_th"] = ths[best]
    return summary, sweep
