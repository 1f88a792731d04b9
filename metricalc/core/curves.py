"""ROC and precision-recall curves as counts along the ``threshold`` dim, and their areas."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.confusion import counts_at_thresholds, fpr, precision, tpr
from metricalc.core.labeled import apply_kernel, fill_undefined, is_labeled, unwrap
from metricalc.errors import InvalidInputError
from metricalc.validation import (
    ZERO_DIVISION,
    Boolean,
    Nullable,
    Text,
    ZeroDivision,
    as_numbers,
    first_index,
    validate_params,
)

__all__ = ["auc", "pr_curve", "roc_auc", "roc_curve"]


def with_start_point(counts: xr.Dataset) -> xr.Dataset:
    """Prepend the point at cutoff +inf where nothing is predicted positive (tp = fp = 0)."""
    last = counts.isel(threshold=-1)
    start = xr.Dataset(
        {
            "tp": xr.zeros_like(last.tp),
            "fp": xr.zeros_like(last.fp),
            "fn": last.tp + last.fn,
            "tn": last.fp + last.tn,
        },
        coords={"cutoff": xr.full_like(last.cutoff, np.inf)},
    )
    curve = xr.concat([start.expand_dims("threshold"), counts], dim="threshold")
    return curve.transpose(*counts.tp.dims)  # concat puts "threshold" first


def _drop_collinear(counts: xr.Dataset) -> xr.Dataset:
    """Keep the first, the last and every point where the ROC curve bends (as scikit-learn)."""
    if counts.tp.ndim != 1:
        raise InvalidInputError(
            "drop_intermediate=True needs a single curve (1-D scores); curves over several "
            "lists share one threshold dim and keep every point"
        )
    fp, tp = counts.fp.values, counts.tp.values
    if fp.size <= 2:
        return counts
    bends = np.logical_or(np.diff(fp, 2), np.diff(tp, 2))
    keep = np.flatnonzero(np.r_[True, bends, True])
    return counts.isel(threshold=keep)


@validate_params(dim=Nullable(Text()), drop_intermediate=Boolean(), zero_division=ZERO_DIVISION)
def roc_curve(
    y_true: Any,
    y_score: Any,
    *,
    dim: str | None = None,
    drop_intermediate: bool = False,
    zero_division: ZeroDivision = "nan",
) -> xr.Dataset:
    r"""Receiver operating characteristic: (FPR, TPR) at every threshold, from the counts.

    .. math:: FPR(c) = \frac{FP(c)}{\#N}, \qquad TPR(c) = \frac{TP(c)}{\#P}

    The first point is cutoff :math:`+\infty` (nothing selected, (0, 0)); then one point per
    distinct score, decreasing, ending at (1, 1). This is ``sklearn.metrics.roc_curve`` with the
    same ``drop_intermediate`` rule (scikit-learn's default is True, ours False so the curve keeps
    every threshold).

    Parameters
    ----------
    y_true, y_score, dim
        As :func:`counts_at_thresholds`.
    drop_intermediate : bool
        Drop points on straight segments (single curves only).
    zero_division : {"nan", "warn", 0, 1}
        TPR when there are no positives, FPR when there are no negatives.

    Returns
    -------
    xarray.Dataset
        ``fpr``, ``tpr`` along ``threshold``, coordinate ``cutoff``, and the counts.

    Examples
    --------
    >>> import metricalc as mc
    >>> roc = mc.roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> roc.fpr.values.tolist(), roc.tpr.values.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    counts = counts_at_thresholds(y_true, y_score, dim=dim)
    if drop_intermediate:
        counts = _drop_collinear(counts)
    counts = with_start_point(counts)
    return counts.assign(
        fpr=fpr(counts, zero_division=zero_division), tpr=tpr(counts, zero_division=zero_division)
    )


@validate_params(dim=Nullable(Text()), zero_division=ZERO_DIVISION)
def pr_curve(
    y_true: Any, y_score: Any, *, dim: str | None = None, zero_division: ZeroDivision = "nan"
) -> xr.Dataset:
    r"""Precision-recall curve: one point per distinct score threshold, thresholds decreasing.

    .. math:: P(c) = \frac{TP(c)}{TP(c) + FP(c)}, \qquad R(c) = \frac{TP(c)}{\#P}

    Every threshold selects at least one item, so precision is always defined; recall is
    undefined without positives (``zero_division``; scikit-learn sets it to 1, i.e.
    ``zero_division=1``). ``sklearn.metrics.precision_recall_curve`` returns the same points in
    increasing threshold order followed by the extra point (recall 0, precision 1).

    Parameters
    ----------
    y_true, y_score, dim
        As :func:`counts_at_thresholds`.
    zero_division : {"nan", "warn", 0, 1}
        Recall when there are no positives.

    Returns
    -------
    xarray.Dataset
        ``precision`` and ``recall`` (the TPR) along ``threshold``, the coordinate ``cutoff``,
        and the counts.

    Examples
    --------
    >>> import metricalc as mc
    >>> pr = mc.pr_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> pr.precision.values.round(3).tolist(), pr.recall.values.tolist()
    ([1.0, 0.5, 0.667, 0.5], [0.5, 0.5, 1.0, 1.0])
    """
    counts = counts_at_thresholds(y_true, y_score, dim=dim)
    return counts.assign(
        precision=precision(counts, zero_division=zero_division),
        recall=tpr(counts, zero_division=zero_division),
    )


def _trapezoid_kernel(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    x, y = as_numbers("x", x), as_numbers("y", y)
    if x.shape != y.shape or x.ndim == 0 or x.shape[-1] < 2:
        raise InvalidInputError(
            f"x and y must have the same shape with at least 2 points along the curve; "
            f"got {x.shape} and {y.shape}"
        )
    dx = np.diff(x, axis=-1)
    decreasing = np.any(dx < 0, axis=-1)
    mixed = decreasing & np.any(dx > 0, axis=-1)
    if mixed.any():
        raise InvalidInputError(
            "x must be monotonic (non-decreasing or non-increasing) along the curve; the curve "
            f"at index {first_index(mixed)} goes both ways"
        )
    area = np.trapezoid(y, x, axis=-1)
    signed: np.ndarray = np.where(decreasing, -area, area)
    return signed


@validate_params(dim=Text())
def auc(x: Any, y: Any, *, dim: str = "threshold") -> Any:
    r"""Area under a curve by the trapezoidal rule (``sklearn.metrics.auc``).

    .. math:: \mathrm{AUC} = \sum_i (x_{i+1} - x_i) \frac{y_{i+1} + y_i}{2}

    ``x`` must be monotonic along ``dim`` (each curve on its own); a decreasing ``x`` gives a
    positive area too. Repeated points (the padding of :func:`counts_at_thresholds`) add nothing.

    Parameters
    ----------
    x, y : DataArray or array-like
        Curve coordinates; NumPy inputs along the last axis (one area per leading index).
    dim : str
        The curve dimension of DataArray inputs.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.auc([0, 0.5, 1], [0, 1, 1]))
    0.75
    """
    labeled = is_labeled(x, y)
    area = apply_kernel(
        _trapezoid_kernel, {"y": y, "x": x}, core=("y", "x"), dim=dim if labeled else None
    )
    return unwrap(area, labeled)


@validate_params(dim=Nullable(Text()), zero_division=ZERO_DIVISION)
def roc_auc(
    y_true: Any, y_score: Any, *, dim: str | None = None, zero_division: ZeroDivision = "nan"
) -> Any:
    r"""Area under the ROC curve (``sklearn.metrics.roc_auc_score`` for binary labels).

    .. math:: \mathrm{AUC} = \int_0^1 TPR \, d(FPR)

    computed by the trapezoidal rule over :func:`roc_curve` (ties give the diagonal segment, so
    the AUC equals the Mann-Whitney probability P(s+ > s-) + P(s+ = s-) / 2). Undefined when the
    labels hold one class only; that list takes the ``zero_division`` value (scikit-learn raises).

    Returns
    -------
    float, ndarray or DataArray
        One AUC per list (the sample dim removed).

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]))
    0.75
    """
    curve = roc_curve(y_true, y_score, dim=dim, zero_division=0)
    area = auc(curve.fpr, curve.tpr, dim="threshold")
    last = curve.isel(threshold=-1).reset_coords(drop=True)
    undefined = (last.tp == 0) | (last.fp == 0)
    area = fill_undefined(undefined, area, zero_division, "roc_auc")

    return unwrap(area, is_labeled(y_true, y_score))
