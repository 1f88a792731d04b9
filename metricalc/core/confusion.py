"""Confusion counts and the rates built from them.

Counts first: every rate is a ratio of the four counts tp, fp, fn, tn, so the same function works
on a single 2x2 table, a whole threshold sweep from :func:`counts_at_thresholds`, or a
descriptor x scene cube of counts, NumPy or xarray (lazy dask arrays stay lazy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr
from statsmodels.stats.proportion import proportion_confint

from metricalc.core import _kernels
from metricalc.core._labeled import apply_kernel, is_labeled, is_lazy, resolve_dim, unwrap
from metricalc.core._validate import (
    ZeroDivision,
    as_counts,
    as_labels,
    as_scores,
    check_choice,
    check_samples,
    check_zero_division,
    fill_value,
    warn_undefined,
)
from metricalc.errors import InvalidInputError

__all__ = [
    "accuracy",
    "counts_at_thresholds",
    "f1",
    "fpr",
    "precision",
    "rate_confint",
    "recall",
    "tnr",
    "tpr",
    "youden_j",
]

Counts = Mapping[str, Any]
"""A Dataset or mapping holding some of ``tp``, ``fp``, ``fn``, ``tn`` (arrays of any shape)."""


def _counts_kernel(
    y_true: np.ndarray, y_score: np.ndarray, *, pad_to: int | None
) -> tuple[np.ndarray, ...]:
    labels = as_labels("y_true", y_true)
    scores = as_scores("y_score", y_score)
    check_samples(labels, scores)
    return _kernels.confusion_counts(labels, scores, pad_to=pad_to)


def counts_at_thresholds(y_true: Any, y_score: Any, *, dim: str | None = None) -> xr.Dataset:
    r"""Confusion counts at every distinct score threshold, thresholds decreasing.

    At threshold :math:`c` a sample is predicted positive when :math:`s \ge c`:

    .. math::

        TP(c) = \#\{i : y_i = 1, s_i \ge c\}, \quad FP(c) = \#\{i : y_i = 0, s_i \ge c\},
        \quad FN = P - TP, \quad TN = N - FP.

    The thresholds are the distinct scores, so the result equals
    ``sklearn.metrics.confusion_matrix_at_thresholds``.

    Parameters
    ----------
    y_true : array-like or DataArray of bool or {0, 1}
        Labels, samples on the last axis (NumPy) or along ``dim`` (DataArray).
    y_score : array-like or DataArray
        Scores, higher means more likely positive (pass ``-distance`` for distances).
    dim : str, optional
        Sample dimension of DataArray inputs; the other dims are kept.

    Returns
    -------
    xarray.Dataset
        ``tp``, ``fp``, ``fn``, ``tn`` (int64) along the new dim ``threshold``, and the coordinate
        ``cutoff`` (the score threshold). With several lists (extra dims) the threshold dim is as
        long as the list with the most distinct scores (the number of samples for lazy dask
        inputs); shorter lists are padded by repeating their final point (tp = P, fp = N) with
        ``cutoff`` NaN, which adds nothing to any area or AP computed along the curve.

    Examples
    --------
    >>> import metricalc as mc
    >>> c = mc.counts_at_thresholds([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> c.tp.values.tolist(), c.fp.values.tolist()
    ([1, 1, 2, 2], [0, 1, 1, 2])
    """
    named = {"y_true": y_true, "y_score": y_score}
    labeled = is_labeled(y_true, y_score)
    lazy = any(is_lazy(v) for v in named.values())
    pad_to = None
    sizes = None
    if lazy:  # dask needs the output size up front: pad every list to the number of samples
        sample_dim = resolve_dim(named, tuple(named), dim)
        pad_to = next(v.sizes[sample_dim] for v in named.values() if isinstance(v, xr.DataArray))
        sizes = {"threshold": pad_to}
    outputs = apply_kernel(
        _counts_kernel,
        named,
        core=("y_true", "y_score"),
        dim=dim,
        output_core_dims=[["threshold"]] * 5,
        output_dtypes=[np.int64] * 4 + [np.float64],
        output_sizes=sizes,
        kwargs={"pad_to": pad_to},
    )
    if not labeled:
        batch_dims = [f"dim_{i}" for i in range(outputs[0].ndim - 1)]
        outputs = [xr.DataArray(o, dims=[*batch_dims, "threshold"]) for o in outputs]
    tp, fp, fn, tn, cutoff = outputs
    return xr.Dataset({"tp": tp, "fp": fp, "fn": fn, "tn": tn}, coords={"cutoff": cutoff})


# --------------------------------------------------------------------------------------------
# Rates
# --------------------------------------------------------------------------------------------


def _count(counts: Counts, name: str) -> Any:
    """Fetch one count from a Dataset or mapping, checking it is a non-negative number."""
    try:
        value = counts[name]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"counts has no {name!r}; expected a Dataset or mapping holding tp, fp, fn, tn"
        ) from None
    if isinstance(value, xr.DataArray):
        if not is_lazy(value):
            as_counts(name, value.values)
        return value
    return as_counts(name, value)


def _ratio(numerator: Any, denominator: Any, zero_division: ZeroDivision, what: str) -> Any:
    """numerator / denominator, with ``zero_division`` where the denominator is 0."""
    policy = check_zero_division(zero_division)
    undefined = denominator == 0
    labeled = is_labeled(numerator, denominator)
    where = xr.where if labeled else np.where
    value = numerator / where(undefined, 1, denominator)
    if policy == "warn":
        warn_undefined(what, int(undefined.sum()), policy)
    return unwrap(where(undefined, fill_value(policy), value), labeled)


def tpr(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""True positive rate (recall, sensitivity, hit rate).

    .. math:: TPR = \frac{TP}{TP + FN} = \frac{TP}{\#P}

    Parameters
    ----------
    counts : Dataset or mapping
        Holds ``tp`` and ``fn`` of any (matching or broadcastable) shape.
    zero_division : {"nan", "warn", 0, 1}
        Value where :math:`TP + FN = 0`; ``"warn"`` gives 0 and an ``UndefinedMetricWarning``.

    Returns
    -------
    DataArray, ndarray or float
        Same kind and shape as the counts.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.tpr({"tp": 8, "fn": 2}))
    0.8
    """
    tp, fn = _count(counts, "tp"), _count(counts, "fn")
    return _ratio(tp, tp + fn, zero_division, "tpr")


def recall(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Recall, identical to :func:`tpr`: :math:`TP / (TP + FN)`.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.recall({"tp": 3, "fn": 1}))
    0.75
    """
    tp, fn = _count(counts, "tp"), _count(counts, "fn")
    return _ratio(tp, tp + fn, zero_division, "recall")


def fpr(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""False positive rate (fall-out, false alarm rate).

    .. math:: FPR = \frac{FP}{FP + TN} = \frac{FP}{\#N}

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.fpr({"fp": 1, "tn": 3}))
    0.25
    """
    fp, tn = _count(counts, "fp"), _count(counts, "tn")
    return _ratio(fp, fp + tn, zero_division, "fpr")


def tnr(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""True negative rate (specificity), :math:`TNR = TN / (TN + FP) = 1 - FPR`.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.tnr({"fp": 1, "tn": 3}))
    0.75
    """
    fp, tn = _count(counts, "fp"), _count(counts, "tn")
    return _ratio(tn, fp + tn, zero_division, "tnr")


def precision(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Precision, the share of positives among the selected items.

    .. math:: precision = \frac{TP}{TP + FP}

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.precision({"tp": 3, "fp": 1}))
    0.75
    """
    tp, fp = _count(counts, "tp"), _count(counts, "fp")
    return _ratio(tp, tp + fp, zero_division, "precision")


def accuracy(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Accuracy (Rand index), the share of correct decisions.

    .. math:: A = \frac{TP + TN}{TP + FP + FN + TN}

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.accuracy({"tp": 3, "fp": 1, "fn": 1, "tn": 5}))
    0.8
    """
    tp, fp, fn, tn = (_count(counts, k) for k in ("tp", "fp", "fn", "tn"))
    return _ratio(tp + tn, tp + fp + fn + tn, zero_division, "accuracy")


def youden_j(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Youden's J statistic (informedness): sensitivity + specificity - 1.

    .. math:: J = \frac{TP}{TP + FN} + \frac{TN}{TN + FP} - 1 = TPR - FPR

    J is the height of a ROC point above the chance diagonal. It is undefined (and takes the
    ``zero_division`` value) where either :math:`TP + FN` or :math:`TN + FP` is 0.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.youden_j({"tp": 8, "fn": 2, "fp": 1, "tn": 3}))
    0.55
    """
    tp, fp, fn, tn = (_count(counts, k) for k in ("tp", "fp", "fn", "tn"))
    positives, negatives = tp + fn, fp + tn
    defined = (positives > 0) & (negatives > 0)
    j = tpr(counts, zero_division=0) - fpr(counts, zero_division=0)
    # one denominator for both checks: 1 where defined, 0 where either rate is undefined
    return _ratio(j * 1.0, defined * 1, zero_division, "youden_j")


def f1(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""F1 score, the harmonic mean of precision and recall.

    .. math:: F_1 = \frac{2 TP}{2 TP + FP + FN}

    Undefined where :math:`TP + FP + FN = 0` (as ``sklearn.metrics.f1_score``).

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.f1({"tp": 3, "fp": 1, "fn": 1}))
    0.75
    """
    tp, fp, fn = (_count(counts, k) for k in ("tp", "fp", "fn"))
    return _ratio(2 * tp, 2 * tp + fp + fn, zero_division, "f1")


# --------------------------------------------------------------------------------------------
# Confidence intervals of rates
# --------------------------------------------------------------------------------------------

PROPORTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tpr": (("tp",), ("tp", "fn")),
    "recall": (("tp",), ("tp", "fn")),
    "fpr": (("fp",), ("fp", "tn")),
    "tnr": (("tn",), ("fp", "tn")),
    "precision": (("tp",), ("tp", "fp")),
    "accuracy": (("tp", "tn"), ("tp", "fp", "fn", "tn")),
}
"""Rate name -> (counts summed for the successes, counts summed for the trials)."""

CONFINT_METHODS = ("wilson", "beta", "agresti_coull", "jeffreys", "normal")


def _confint_kernel(
    successes: np.ndarray, trials: np.ndarray, *, alpha: float, method: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k, n = np.broadcast_arrays(np.asarray(successes, float), np.asarray(trials, float))
    estimate, low, high = (np.full(k.shape, np.nan) for _ in range(3))
    ok = n > 0
    estimate[ok] = k[ok] / n[ok]
    low[ok], high[ok] = proportion_confint(k[ok], n[ok], alpha=alpha, method=method)
    return estimate, low, high


def rate_confint(
    counts: Counts, rate: str = "tpr", *, alpha: float = 0.05, method: str = "wilson"
) -> xr.Dataset:
    r"""Confidence interval of a rate seen as a binomial proportion (Wilson score by default).

    A rate over few elements misleads (seed 003): 2 of 2 and 2000 of 2000 are both 100 %. The
    interval makes the sample size visible. For :math:`k` successes in :math:`n` trials and
    :math:`z = \Phi^{-1}(1 - \alpha / 2)`, the Wilson interval is

    .. math::

        \frac{\hat p + \frac{z^2}{2n} \pm z \sqrt{\frac{\hat p (1 - \hat p)}{n} + \frac{z^2}{4n^2}}}
             {1 + \frac{z^2}{n}}, \qquad \hat p = k / n,

    computed by ``statsmodels.stats.proportion.proportion_confint(method="wilson")``.

    Parameters
    ----------
    counts : Dataset or mapping
        Holds the counts the rate needs (``tp``, ``fp``, ``fn``, ``tn``).
    rate : {"tpr", "recall", "fpr", "tnr", "precision", "accuracy"}
        The proportion: TPR = TP / (TP + FN), FPR = FP / (FP + TN), TNR = TN / (TN + FP),
        precision = TP / (TP + FP), accuracy = (TP + TN) / total. (Youden J and F1 are not
        proportions of one count set and have no binomial interval.)
    alpha : float
        1 - confidence level (0.05 gives a 95 % interval).
    method : {"wilson", "beta", "agresti_coull", "jeffreys", "normal"}
        Any interval of ``proportion_confint``; "beta" is Clopper-Pearson.

    Returns
    -------
    xarray.Dataset
        ``estimate``, ``low``, ``high`` with the shape of the counts; NaN where there are no trials.

    Examples
    --------
    >>> import metricalc as mc
    >>> ci = mc.rate_confint({"tp": 2, "fn": 0}, "tpr")
    >>> round(float(ci.low), 3), float(ci.high)
    (0.342, 1.0)
    """
    check_choice("rate", rate, tuple(PROPORTIONS))
    check_choice("method", method, CONFINT_METHODS)
    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1 (exclusive); got {alpha!r}")
    success_names, trial_names = PROPORTIONS[rate]
    successes = sum(_count(counts, k) for k in success_names)
    trials = sum(_count(counts, k) for k in trial_names)
    labeled = is_labeled(successes, trials)
    kwargs = {"alpha": alpha, "method": method}
    if labeled:
        outputs = xr.apply_ufunc(
            _confint_kernel,
            successes,
            trials,
            output_core_dims=[[], [], []],
            dask="parallelized",
            output_dtypes=[np.float64] * 3,
            kwargs=kwargs,
        )
    else:
        outputs = _confint_kernel(successes, trials, **kwargs)
    estimate, low, high = (
        o if labeled else xr.DataArray(o, dims=[f"dim_{i}" for i in range(np.ndim(o))])
        for o in outputs
    )
    result = xr.Dataset({"estimate": estimate, "low": low, "high": high})
    result.attrs.update(rate=rate, alpha=alpha, method=method)
    return result
