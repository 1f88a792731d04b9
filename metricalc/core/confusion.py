"""Confusion counts and the rates built from them.

Counts first: every rate is a ratio of the four counts tp, fp, fn, tn, so the same function works
on a single 2x2 table, a whole threshold sweep from :func:`counts_at_thresholds`, or a
descriptor x scene cube of counts, NumPy or xarray (lazy dask arrays stay lazy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from metricalc.core import kernels
from metricalc.core.labeled import (
    apply_kernel,
    check_aligned,
    fill_undefined,
    is_labeled,
    is_lazy,
    resolve_dim,
    unwrap,
    where,
)
from metricalc.errors import InvalidInputError
from metricalc.validation import (
    ZERO_DIVISION,
    Choice,
    Fraction,
    Nullable,
    Text,
    ZeroDivision,
    as_counts,
    as_labels,
    as_scores,
    check_samples,
    validate_params,
)

if TYPE_CHECKING:  # imported where a Dataset is built: a rate of plain counts needs no xarray
    import xarray as xr

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

Counts: TypeAlias = "xr.Dataset | Mapping[str, Any]"
"""A Dataset or mapping holding some of ``tp``, ``fp``, ``fn``, ``tn`` (arrays of any shape)."""


def _counts_kernel(
    y_true: np.ndarray, y_score: np.ndarray, *, pad_to: int | None
) -> tuple[np.ndarray, ...]:
    labels = as_labels("y_true", y_true)
    scores = as_scores("y_score", y_score)
    check_samples(labels, scores)
    return kernels.confusion_counts(labels, scores, pad_to=pad_to)


@validate_params(dim=Nullable(Text()))
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
    import xarray as xr

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


PROPORTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tpr": (("tp",), ("tp", "fn")),
    "recall": (("tp",), ("tp", "fn")),
    "fpr": (("fp",), ("fp", "tn")),
    "tnr": (("tn",), ("fp", "tn")),
    "precision": (("tp",), ("tp", "fp")),
    "accuracy": (("tp", "tn"), ("tp", "fp", "fn", "tn")),
}
"""Rate name -> (counts summed in the numerator, counts summed in the denominator)."""


def _count(counts: Counts, name: str) -> Any:
    """Fetch one count from a Dataset or mapping as int64 (float64 for fractional counts),
    checking it is non-negative (lazily, at compute time, for dask-backed counts)."""
    try:
        value = counts[name]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"counts has no {name!r}; expected a Dataset or mapping holding tp, fp, fn, tn"
        ) from None
    if not is_labeled(value):
        return as_counts(name, value)
    check = partial(as_counts, name)
    if is_lazy(value):
        dtype = np.float64 if value.dtype.kind == "f" else np.int64
        return value.copy(data=value.data.map_blocks(check, dtype=dtype))
    return value.copy(data=check(value.values))


def _fetch(counts: Counts, names: Sequence[str]) -> list[Any]:
    """The named counts, checked to broadcast (NumPy) or align (DataArrays) with each other."""
    values = [_count(counts, name) for name in names]
    named = dict(zip(names, values, strict=True))
    if is_labeled(*values):
        check_aligned(named)
        return values
    try:
        np.broadcast_shapes(*(np.shape(v) for v in values))
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in named.items())
        raise InvalidInputError(f"counts must have broadcastable shapes; got {shapes}") from None
    return values


def _fill_undefined(
    undefined: Any, value: Any, zero_division: ZeroDivision, what: str, labeled: bool
) -> Any:
    """Replace ``value`` by the ``zero_division`` value where ``undefined``."""
    return unwrap(fill_undefined(undefined, value, zero_division, what), labeled)


def _proportion(counts: Counts, rate: str) -> tuple[Any, Any]:
    """(numerator, denominator) of ``rate``: the sums of its counts in ``PROPORTIONS``."""
    numerator_names, denominator_names = PROPORTIONS[rate]
    names = sorted(set(numerator_names + denominator_names))
    fetched = dict(zip(names, _fetch(counts, names), strict=True))
    return (
        sum(fetched[k] for k in numerator_names),
        sum(fetched[k] for k in denominator_names),
    )


def _rate(counts: Counts, rate: str, zero_division: ZeroDivision) -> Any:
    """numerator / denominator of ``rate``, ``zero_division`` where the denominator is 0."""
    numerator, denominator = _proportion(counts, rate)
    labeled = is_labeled(numerator, denominator)
    undefined = denominator == 0
    value = numerator / where(undefined, 1, denominator)
    return _fill_undefined(undefined, value, zero_division, rate, labeled)


@validate_params(zero_division=ZERO_DIVISION)
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
    return _rate(counts, "tpr", zero_division)


@validate_params(zero_division=ZERO_DIVISION)
def recall(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Recall, identical to :func:`tpr`: :math:`TP / (TP + FN)`.

    Examples
    --------
    >>> import metricalc as mc
    >>> counts = {"tp": [3, 0], "fn": [1, 0]}  # no positives in the second table
    >>> mc.recall(counts).tolist()
    [0.75, nan]
    """
    return _rate(counts, "recall", zero_division)


@validate_params(zero_division=ZERO_DIVISION)
def fpr(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""False positive rate (fall-out, false alarm rate).

    .. math:: FPR = \frac{FP}{FP + TN} = \frac{FP}{\#N}

    Examples
    --------
    >>> import metricalc as mc
    >>> sweep = mc.counts_at_thresholds([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> mc.fpr(sweep).values.tolist()
    [0.0, 0.5, 0.5, 1.0]
    >>> float(mc.fpr({"fp": 1, "tn": 3}))
    0.25
    """
    return _rate(counts, "fpr", zero_division)


@validate_params(zero_division=ZERO_DIVISION)
def tnr(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""True negative rate (specificity), :math:`TNR = TN / (TN + FP) = 1 - FPR`.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.tnr({"fp": 1, "tn": 3})), float(mc.tnr({"fp": 0, "tn": 0}, zero_division=1))
    (0.75, 1.0)
    """
    return _rate(counts, "tnr", zero_division)


@validate_params(zero_division=ZERO_DIVISION)
def precision(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Precision, the share of positives among the selected items.

    .. math:: precision = \frac{TP}{TP + FP}

    Examples
    --------
    >>> import metricalc as mc
    >>> mc.precision({"tp": [3, 0], "fp": [1, 0]}, zero_division=0).tolist()
    [0.75, 0.0]
    """
    return _rate(counts, "precision", zero_division)


@validate_params(zero_division=ZERO_DIVISION)
def accuracy(counts: Counts, *, zero_division: ZeroDivision = "nan") -> Any:
    r"""Accuracy (Rand index), the share of correct decisions.

    .. math:: A = \frac{TP + TN}{TP + FP + FN + TN}

    Examples
    --------
    >>> import metricalc as mc
    >>> counts = {"tp": 3, "fp": 1, "fn": 1, "tn": 5}
    >>> float(mc.accuracy(counts))
    0.8
    """
    return _rate(counts, "accuracy", zero_division)


@validate_params(zero_division=ZERO_DIVISION)
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
    tp, fp, fn, tn = _fetch(counts, ("tp", "fp", "fn", "tn"))
    positives, negatives = tp + fn, fp + tn
    labeled = is_labeled(positives, negatives)
    undefined = (positives == 0) | (negatives == 0)
    j = tp / where(positives == 0, 1, positives) - fp / where(negatives == 0, 1, negatives)
    return _fill_undefined(undefined, j, zero_division, "youden_j", labeled)


@validate_params(zero_division=ZERO_DIVISION)
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
    tp, fp, fn = _fetch(counts, ("tp", "fp", "fn"))
    denominator = 2 * tp + fp + fn
    labeled = is_labeled(denominator)
    undefined = denominator == 0
    value = 2 * tp / where(undefined, 1, denominator)
    return _fill_undefined(undefined, value, zero_division, "f1", labeled)


# --------------------------------------------------------------------------------------------
# Confidence intervals of rates
# --------------------------------------------------------------------------------------------

CONFINT_METHODS = ("wilson", "beta", "agresti_coull", "jeffreys", "normal")


def _confint_kernel(
    successes: np.ndarray, trials: np.ndarray, *, alpha: float, method: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # statsmodels is imported here, not at module level: it costs about a second of import time
    # that every other use of metricalc (and every CLI start) would pay.
    from statsmodels.stats.proportion import proportion_confint

    k, n = np.broadcast_arrays(np.asarray(successes, float), np.asarray(trials, float))
    estimate, low, high = (np.full(k.shape, np.nan) for _ in range(3))
    ok = n > 0
    estimate[ok] = k[ok] / n[ok]
    low[ok], high[ok] = proportion_confint(k[ok], n[ok], alpha=alpha, method=method)
    return estimate, low, high


@validate_params(rate=Choice(PROPORTIONS), alpha=Fraction(), method=Choice(CONFINT_METHODS))
def rate_confint(
    counts: Counts, rate: str = "tpr", *, alpha: float = 0.05, method: str = "wilson"
) -> xr.Dataset:
    r"""Confidence interval of a rate seen as a binomial proportion (Wilson score by default).

    A rate over few elements misleads (docs/metrics.md): 2 of 2 and 2000 of 2000 are both 100 %. The
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
    import xarray as xr

    successes, trials = _proportion(counts, rate)
    outputs = apply_kernel(
        _confint_kernel,
        {"successes": successes, "trials": trials},
        output_core_dims=[[], [], []],
        output_dtypes=[np.float64] * 3,
        kwargs={"alpha": alpha, "method": method},
    )
    if not is_labeled(successes, trials):
        outputs = [xr.DataArray(o, dims=[f"dim_{i}" for i in range(np.ndim(o))]) for o in outputs]
    estimate, low, high = outputs
    result = xr.Dataset({"estimate": estimate, "low": low, "high": high})
    result.attrs.update(rate=rate, alpha=alpha, method=method)
    return result
