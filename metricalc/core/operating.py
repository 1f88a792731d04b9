r"""The false positive rate at a fixed recall (FPR95), read off the ROC counts.

Patch verification papers (PhotoTour, Brown et al.; HPatches verification pairs) report the false
positive rate at 95 % recall: accept pairs from the most to the least similar until 95 % of the
matching pairs are accepted, and report the share of non-matching pairs accepted so far. The
public code that produced the published numbers differs in three choices, and each choice is a
variant here, named after the code it reproduces:

- **where the sweep stops inside a group of tied scores**: at the tie group's end (a threshold on
  the score cannot split a tie) or at the positive that reaches the recall, the group read in input
  order (what a stable sort gives);
- **which ROC points exist**: every distinct score, or only the bends of the curve (scikit-learn's
  ``roc_curve(drop_intermediate=True)``);
- **the ratio reported**: FP / N (a false positive rate) or FP / (FP + TP) (MatchNet's "error
  rate", a false discovery rate).

No variant interpolates between ROC points: each reads the FPR at the first point whose recall
reaches the target.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from metricalc.core.confusion import counts_at_thresholds
from metricalc.core.curves import roc_curve
from metricalc.errors import InvalidInputError
from metricalc.validation import as_labels, as_scores, check_choice, check_samples, is_real

__all__ = ["FPR_AT_RECALL_VARIANTS", "fpr_at_recall"]

FPR_AT_RECALL_VARIANTS = ("hardnet", "matchnet", "threshold", "sklearn")
"""The variants of :func:`fpr_at_recall`; ``"hardnet"`` is the default."""


def _check_recall(recall: object) -> float:
    if not is_real(recall) or not math.isfinite(recall) or not 0 < recall <= 1:
        raise InvalidInputError(f"recall must be a number in (0, 1]; got {recall!r}")
    return float(recall)


def _checked(y_true: Any, y_score: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    labels = as_labels("y_true", y_true)
    scores = as_scores("y_score", y_score)
    check_samples(labels, scores)
    if scores.ndim != 1:
        raise InvalidInputError(
            f"y_score has shape {scores.shape}; expected one list of pair scores (1-D)"
        )
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0:
        raise InvalidInputError(
            f"y_true has no positive (matching) pair among {labels.size}; the FPR at a recall "
            "needs at least one"
        )
    if n_neg == 0:
        raise InvalidInputError(
            f"y_true has no negative (non-matching) pair among {labels.size}; the FPR at a "
            "recall needs at least one"
        )
    return labels, scores, n_pos, n_neg


def _fp_in_input_order(labels: np.ndarray, scores: np.ndarray, k: int) -> int:
    """Negatives ranked before the k-th positive when ties keep their input order."""
    counts = counts_at_thresholds(labels, scores)
    tp, fp, cutoff = counts.tp.values, counts.fp.values, counts.cutoff.values
    group = int(np.argmax(tp >= k))  # the tie group holding the k-th positive
    tp_before = int(tp[group - 1]) if group else 0
    fp_before = int(fp[group - 1]) if group else 0
    tied = labels[scores == cutoff[group]]  # the group, in input order
    j = k - tp_before  # the positive wanted is the group's j-th
    position = int(np.flatnonzero(tied)[j - 1])
    return fp_before + position - (j - 1)


def _fpr_at_roc_point(labels: np.ndarray, scores: np.ndarray, recall: float, drop: bool) -> float:
    roc = roc_curve(labels, scores, drop_intermediate=drop)
    point = int(np.argmax(roc.tpr.values >= recall))
    return float(roc.fpr.values[point])


def fpr_at_recall(
    y_true: Any, y_score: Any, *, recall: float = 0.95, variant: str = "hardnet"
) -> float:
    r"""False positive rate at the first operating point whose recall reaches ``recall``.

    Pairs are ranked by decreasing score (pass ``-distance`` for distances). With :math:`P`
    positives, :math:`N` negatives and :math:`k = \lceil r P \rceil` (the product in float64, as
    in every reference), the variants are:

    - ``"hardnet"`` (the default): HardNet's ``ErrorRateAt95Recall`` (``code/EvalMetrics.py`` of
      DagnyT/hardnet, the most common definition: many later repositories copy it),

      .. math:: \mathrm{FPR}_r = FP_k / N,

      :math:`FP_k` the negatives ranked before the :math:`k`-th positive. Tied scores keep their
      input order (a stable sort); HardNet's ``np.argsort`` leaves the order of ties to the NumPy
      build, so on tied scores its value is not reproducible and this one is. K. Simonyan's
      ``script_ROC_desc.m`` (``TPR >= 0.95`` on a stable MATLAB sort) gives the same value.
    - ``"matchnet"``: MatchNet's ``ErrorRateAt95Recall`` (``eval_metrics.py`` of hanxf/matchnet),

      .. math:: FP_k / (FP_k + k),

      the same stopping point and tie order, but the share of false matches among the accepted
      pairs (a false discovery rate), which MatchNet's ``evaluate_matchnet.py`` prints as the
      "error rate at 95% recall".
    - ``"threshold"``: a threshold on the score, as Brown et al. sweep it (scikit-learn's
      ``roc_curve(drop_intermediate=False)`` read at the first ``tpr >= r``),

      .. math:: FP(c^*) / N, \qquad c^* = \max\{c : TP(c) / P \ge r\},

      the counts of :func:`~metricalc.counts_at_thresholds`: a tie group is accepted whole.
    - ``"sklearn"``: ``fpr[argmax(tpr >= r)]`` of scikit-learn's default
      ``roc_curve(drop_intermediate=True)``: as ``"threshold"`` but over the ROC points
      scikit-learn keeps (the bends), so a point inside a straight run of tie groups moves to the
      run's end.

    Without ties ``"hardnet"`` and ``"threshold"`` agree; ``"sklearn"`` agrees with them too.

    Parameters
    ----------
    y_true : array-like of bool or {0, 1}
        1 for a matching pair; one list (1-D).
    y_score : array-like
        Similarity scores, higher means more likely matching.
    recall : float
        The target recall :math:`r` in (0, 1].
    variant : {"hardnet", "matchnet", "threshold", "sklearn"}
        Whose definition (above).

    Returns
    -------
    float

    Raises
    ------
    InvalidInputError
        If there is no positive or no negative pair, the labels are not binary, a score is NaN,
        the input is not one list, or ``recall`` / ``variant`` is not one of the above.

    Examples
    --------
    >>> from metricalc.core.operating import fpr_at_recall
    >>> y = [1, 0, 1, 0, 1, 0]
    >>> s = [0.9, 0.8, 0.7, 0.7, 0.6, 0.1]
    >>> fpr_at_recall(y, s, recall=0.5)  # 2nd positive: 1 negative ranked before it
    0.3333333333333333
    >>> fpr_at_recall(y, s, recall=0.5, variant="threshold")  # the tie at 0.7 accepted whole
    0.6666666666666666
    >>> fpr_at_recall(y, s, recall=0.5, variant="matchnet")  # 1 false among 3 accepted
    0.3333333333333333
    """
    recall = _check_recall(recall)
    variant = check_choice("variant", variant, FPR_AT_RECALL_VARIANTS)
    labels, scores, n_pos, n_neg = _checked(y_true, y_score)
    if variant in ("threshold", "sklearn"):
        return _fpr_at_roc_point(labels, scores, recall, drop=variant == "sklearn")
    k = math.ceil(recall * n_pos)
    fp = _fp_in_input_order(labels, scores, k)
    return fp / n_neg if variant == "hardnet" else fp / (fp + k)
