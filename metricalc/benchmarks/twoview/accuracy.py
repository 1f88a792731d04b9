r"""Summaries of pose errors over pairs: SuperGlue's pose AUC and the IMC's mAA.

**Pose AUC** (SuperGlue ``models/utils.py``: ``pose_auc``; Glue Factory
``gluefactory/eval/utils.py``: ``cal_error_auc``, the same with ``np.round(auc, 4)``). The errors
:math:`e_{(1)} \le \dots \le e_{(n)}` sorted, with recall :math:`r_k = k / n`, and the curve
:math:`(0, 0), (e_{(1)}, r_1), \dots` cut at the threshold :math:`\tau`: with
:math:`L = \#\{k : e_{(k)} < \tau\}`, the trapezoid area

.. math::

    \mathrm{AUC}@\tau = \frac{1}{\tau}\left[\sum_{k=1}^{L} (e_{(k)} - e_{(k-1)})
    \frac{r_k + r_{k-1}}{2} + (\tau - e_{(L)})\, r_L\right],
    \qquad e_{(0)} = r_0 = 0.

Failed estimates enter as :math:`e = \infty` (SuperGlue's convention): they lower the recall.

**mAA** (the Image Matching Challenge 2020 / 2021, ``ubc-vision/image-matching-benchmark``
``utils/pack_helper.py``: ``compute_qt_auc``, the value ``qt_auc_10``). The pose errors in degrees
(infinite ones set to :math:`10^6`) binned by ``np.histogram`` into ``[0, 1), [1, 2), ...,
[9, 10]`` (NumPy's last bin is closed), accumulated and divided by :math:`n`:

.. math::

    A_k = \frac{\#\{i : e_i < k\}}{n} \;(k = 1..9), \qquad A_{10} = \frac{\#\{i : e_i \le 10\}}{n},
    \qquad \mathrm{mAA}@10 = \frac{1}{10}\sum_{k=1}^{10} A_k;

``qt_auc_05`` is :math:`\frac{1}{5}\sum_{k=1}^{5} A_k` (strict :math:`e < 5`).

**Weighted forms** (:func:`weighted_pose_auc`, :func:`weighted_imc_maa`), for the cluster
bootstrap and swap test of :mod:`metricalc.stats.clustered`: an integer weight :math:`w_i`
counts pair :math:`i` :math:`w_i` times, and the value is the plain one of that repeated data
set. Summing the trapezoids of the AUC by parts gives, with :math:`n = \sum_i w_i` and
:math:`e_L` the largest error below :math:`\tau` of a pair with :math:`w_i > 0` (0 if none),

.. math::

    \mathrm{AUC}@\tau = \frac{1}{n}\sum_i w_i \left(1 - \frac{e_i}{\tau}\right)_+
    + \frac{e_L}{2 n \tau}:

the mean of the per-pair scores :math:`(1 - e_i/\tau)_+` plus the triangle the curve's start at
:math:`(0, 0)` leaves out (at most :math:`1/(2n)`); the mAA is the mean of the per-pair scores
:math:`\frac{1}{10}(\#\{k \le 9 : e_i < k\} + [e_i \le 10])`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import Integer, Nullable, validate_params

__all__ = [
    "IMC_THRESHOLDS",
    "POSE_AUC_THRESHOLDS",
    "imc_accuracies",
    "imc_maa",
    "pose_auc",
    "weighted_imc_maa",
    "weighted_pose_auc",
]

POSE_AUC_THRESHOLDS: tuple[float, ...] = (5.0, 10.0, 20.0)
"""The thresholds in degrees of SuperGlue's and Glue Factory's pose AUC tables."""
IMC_THRESHOLDS: tuple[int, ...] = tuple(range(1, 11))
"""The thresholds in degrees of the IMC's accuracies :math:`A_1 .. A_{10}`."""
_IMC_INF = 1e6  # the benchmark sets infinite errors to 1e6 before its histogram


def _errors(errors: Any) -> np.ndarray:
    array = np.asarray(errors, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise InvalidInputError(
            f"errors has shape {array.shape}; expected a non-empty 1-D array (one per pair)"
        )
    bad = np.isnan(array) | (array < 0)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(
            f"errors[{index}] = {array[index]!r}; expected a number >= 0 (inf for a failed "
            "estimate)"
        )
    return array


def _thresholds(thresholds: Iterable[float]) -> np.ndarray:
    values = np.asarray(list(thresholds), dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or not (np.isfinite(values) & (values > 0)).all():
        raise InvalidInputError(
            f"thresholds {values.tolist()!r}; expected one or more finite numbers > 0"
        )
    return values


@validate_params(decimals=Nullable(Integer(0)))
def pose_auc(
    errors: Any,
    thresholds: Iterable[float] = POSE_AUC_THRESHOLDS,
    *,
    decimals: int | None = None,
) -> np.ndarray:
    r"""Area under the recall-error curve up to each threshold, normalised (SuperGlue's
    ``pose_auc``).

    .. math:: \mathrm{AUC}@\tau = \frac{1}{\tau}\left[\sum_{k=1}^{L} (e_{(k)} - e_{(k-1)})
        \frac{r_k + r_{k-1}}{2} + (\tau - e_{(L)})\, r_L\right]

    with :math:`L` the number of errors strictly below :math:`\tau` (module docstring).

    Parameters
    ----------
    errors : array_like (n,)
        Pose errors in degrees, >= 0; ``inf`` for failed estimates.
    thresholds : iterable of float
        :math:`\tau` in degrees (default 5, 10, 20).
    decimals : int, optional
        Round each AUC to this many decimals: 4 gives Glue Factory's ``cal_error_auc``; None
        (default) gives SuperGlue's unrounded value.

    Returns
    -------
    ndarray of float64
        One AUC in [0, 1] per threshold.

    Examples
    --------
    >>> pose_auc([0.0, 2.0, np.inf, 30.0], [5, 10]).tolist()
    [0.45, 0.475]
    """
    values = np.sort(_errors(errors))
    taus = _thresholds(thresholds)
    n = values.size
    # Beyond the largest threshold an error only matters as "not below it": cap it there so the
    # segment areas stay finite (inf - inf would be NaN); searchsorted's "left" side keeps the
    # capped errors out of every cut, as it keeps errors equal to the threshold out.
    x = np.concatenate(([0.0], np.minimum(values, taus.max())))
    recall = np.arange(n + 1, dtype=np.float64) / n
    segments = np.diff(x) * (recall[1:] + recall[:-1]) / 2.0
    area = np.concatenate(([0.0], np.cumsum(segments)))
    last = np.searchsorted(x, taus, side="left") - 1  # e_(L): the last error below tau
    auc = (area[last] + (taus - x[last]) * recall[last]) / taus
    return np.asarray(np.round(auc, decimals) if decimals is not None else auc)


def imc_accuracies(errors: Any) -> np.ndarray:
    r"""The IMC's accuracies :math:`A_1, \dots, A_{10}` (``np.cumsum`` of ``qt_hist``).

    .. math:: A_k = \#\{i : e_i < k\} / n \;(k < 10), \qquad A_{10} = \#\{i : e_i \le 10\} / n

    Examples
    --------
    >>> imc_accuracies([0.5, 1.0, 10.0, np.inf]).tolist()
    [0.25, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.75]
    """
    values = np.sort(_errors(errors))
    values[np.isinf(values)] = _IMC_INF
    below = np.searchsorted(values, np.arange(1.0, 10.0), side="left")
    at_most_ten = np.searchsorted(values, 10.0, side="right")
    return np.append(below, at_most_ten).astype(np.float64) / values.size


@validate_params(max_threshold=Integer(1, 10))
def imc_maa(errors: Any, *, max_threshold: int = 10) -> float:
    r"""Mean average accuracy of the Image Matching Challenge 2020 / 2021 (``qt_auc_10``;
    ``max_threshold=5`` gives ``qt_auc_05``).

    .. math:: \mathrm{mAA}@m = \frac{1}{m}\sum_{k=1}^{m} A_k

    Parameters
    ----------
    errors : array_like (n,)
        Pose errors :math:`\max(e_R, e_t)` in degrees; ``inf`` for failed estimates.
    max_threshold : int
        :math:`m` in 1..10.

    Examples
    --------
    >>> imc_maa([0.5, 1.0, 10.0, np.inf])
    0.5
    """
    return float(np.mean(imc_accuracies(errors)[:max_threshold]))


def weighted_pose_auc(errors: Any, weights: Any, threshold: float) -> np.ndarray:
    r""":func:`pose_auc` at one threshold with pair :math:`i` counted :math:`w_i` times, over the
    last axis (leading axes: resamples).

    .. math:: \mathrm{AUC}@\tau = \frac{1}{n}\sum_i w_i \left(1 - \frac{e_i}{\tau}\right)_+
        + \frac{e_L}{2 n \tau}, \qquad n = \sum_i w_i

    (module docstring; :math:`e_L` the largest error below :math:`\tau` of a pair with
    :math:`w_i > 0`).

    Parameters
    ----------
    errors : array_like (..., n)
        Pose errors in degrees, >= 0 (``inf`` or any value >= the threshold for a failure).
    weights : array_like (..., n)
        Non-negative multiplicities, broadcast against ``errors``.
    threshold : float
        :math:`\tau` in degrees.

    Returns
    -------
    ndarray
        The AUC per leading index; NaN where the weights sum to 0.

    Examples
    --------
    >>> errors = np.array([0.0, 2.0, np.inf, 30.0])
    >>> weighted_pose_auc(errors, np.array([[1, 1, 1, 1], [2, 0, 1, 0]]), 5.0).tolist()
    [0.45, 0.6666666666666666]
    >>> pose_auc([0.0, 0.0, np.inf], [5.0]).tolist()
    [0.6666666666666666]
    """
    e = np.asarray(errors, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    tau = float(threshold)
    below = e < tau
    gaps = np.where(below, tau - np.where(below, e, 0.0), 0.0)  # tau * (1 - e / tau)_+
    last = np.where(below & (w > 0), e, 0.0).max(axis=-1)
    total = w.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(
            total > 0, ((w * gaps).sum(axis=-1) + last / 2.0) / (tau * total), np.nan
        )
    return out


@validate_params(max_threshold=Integer(1, 10))
def weighted_imc_maa(errors: Any, weights: Any, *, max_threshold: int = 10) -> np.ndarray:
    r""":func:`imc_maa` with pair :math:`i` counted :math:`w_i` times, over the last axis: the
    weighted mean of the per-pair scores

    .. math:: s_i = \frac{1}{m}\left(\#\{k \le \min(m, 9) : e_i < k\}
        + [m = 10,\ e_i \le 10]\right).

    Examples
    --------
    >>> errors = np.array([0.5, 1.0, 10.0, np.inf])
    >>> weighted_imc_maa(errors, np.array([[1, 1, 1, 1], [0, 2, 1, 0]])).round(4).tolist()
    [0.5, 0.6333]
    >>> round(imc_maa([1.0, 1.0, 10.0]), 4)
    0.6333
    """
    e = np.asarray(errors, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    strict = min(max_threshold, 9)  # #{k <= strict : e < k} = strict - floor(e), clipped
    passed = np.clip(strict - np.floor(e), 0.0, strict)
    if max_threshold == 10:
        passed += e <= 10.0
    total = w.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(
            total > 0, (w * passed).sum(axis=-1) / (max_threshold * total), np.nan
        )
    return out
