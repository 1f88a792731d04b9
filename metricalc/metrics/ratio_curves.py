"""Lowe's ratio test as a classifier of nearest-neighbour matches: its PR and ROC curves.

A query's nearest neighbour is accepted when the ratio of its first to its second
nearest-neighbour distance is at most a threshold (:func:`ratio_score`); sweeping the threshold
over the distinct scores gives :func:`matching_pr_curve` and :func:`matching_roc_curve` (with
each descriptor's Youden point).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.confusion import counts_at_thresholds, fpr, precision, tpr, youden_j
from metricalc.core.curves import with_start_point
from metricalc.errors import InvalidInputError
from metricalc.metrics.reductions import QUERY_VARS, prepare_cube, ratio

__all__ = ["matching_pr_curve", "matching_roc_curve", "ratio_score"]

_COUNTS = ("tp", "fp", "fn", "tn")


def ratio_score(cube: xr.Dataset) -> xr.DataArray:
    """-(nn_distance / nn2_distance); the worst score -1 (ratio 1) where the ratio is undefined."""
    nn, nn2 = cube["nn_distance"], cube["nn2_distance"]
    defined = np.isfinite(nn) & np.isfinite(nn2) & (nn2 > 0)
    return -(nn.where(defined) / nn2.where(defined)).fillna(1.0)


_RATIO_SCORE = "-(nn_distance / nn2_distance); undefined ratio -> 1"


def _descriptor_counts(
    y_true: xr.DataArray, y_score: xr.DataArray, present: np.ndarray
) -> list[xr.Dataset | None]:
    """Confusion counts (and coordinate ``cutoff`` as a variable) at each distinct score of
    every descriptor over its queries present; None for a descriptor without queries."""
    curves: list[xr.Dataset | None] = []
    for i in range(present.shape[0]):
        keep = np.flatnonzero(present[i])
        if keep.size == 0:
            curves.append(None)
            continue
        counts = counts_at_thresholds(
            y_true.isel(descriptor=i, query=keep).drop_vars(list(y_true.coords)),
            y_score.isel(descriptor=i, query=keep).drop_vars(list(y_score.coords)),
            dim="query",
        )
        curves.append(counts[list(_COUNTS)].reset_coords("cutoff"))
    return curves


def _padded(curve: xr.Dataset | None, length: int) -> xr.Dataset:
    """``curve`` extended to ``length`` thresholds by repeating its final counts with ``cutoff``
    NaN (all counts 0 for None)."""
    if curve is None:
        return xr.Dataset(
            {
                **{n: ("threshold", np.zeros(length, np.int64)) for n in _COUNTS},
                "cutoff": ("threshold", np.full(length, np.nan)),
            }
        )
    extra = length - curve.sizes["threshold"]
    return xr.Dataset(
        {
            **{n: curve[n].pad(threshold=(0, extra), mode="edge") for n in _COUNTS},
            "cutoff": curve["cutoff"].pad(threshold=(0, extra), constant_values=np.nan),
        }
    )


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
    needed = (*QUERY_VARS, "nn_correct", "nn_distance", "nn2_distance")
    cube, ok = prepare_cube(cube, needed, what)
    present = np.asarray((cube["n_relevant"] >= 0).values)
    curves = _descriptor_counts(cube["nn_correct"] == 1, ratio_score(cube), present)
    length = max((c.sizes["threshold"] for c in curves if c is not None), default=0)
    padded = [_padded(curve, length) for curve in curves]
    index = pd.Index(cube["descriptor"].values, name="descriptor")
    combined = xr.concat(padded, dim=index) if padded else xr.Dataset()
    combined = combined.assign({n: combined[n].astype(np.int64) for n in _COUNTS})
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
            "recall": ratio(tp, n_matchable).where(ok),
            "tp": tp,
            "fp": fp,
            "n_matchable": xr.where(ok, n_matchable, 0).astype(np.int64),  # type: ignore[no-untyped-call]
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
    its ROC curve above the chance diagonal (docs/metrics.md).

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
    confusion = {n: counts[n] for n in _COUNTS}
    j = youden_j(confusion).where(ok)
    best = j.fillna(-np.inf).argmax("threshold")
    rates = {"fpr": fpr(confusion).where(ok), "tpr": tpr(confusion).where(ok), "youden_j": j}
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
