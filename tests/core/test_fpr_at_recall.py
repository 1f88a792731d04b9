"""fpr_at_recall against slow, line-by-line ports of each reference it names.

The ports are written here from reading the public code (not copied): HardNet's
``code/EvalMetrics.py::ErrorRateAt95Recall`` (with a stable sort, the tie order metricalc fixes),
MatchNet's ``eval_metrics.py::ErrorRateAt95Recall`` (Python's stable sort), K. Simonyan's
``script_ROC_desc.m`` and scikit-learn's ``roc_curve`` read at ``argmax(tpr >= r)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_curve as sk_roc_curve

from metricalc.core.operating import FPR_AT_RECALL_VARIANTS, fpr_at_recall
from metricalc.errors import InvalidInputError


def hardnet_port(labels: np.ndarray, distances: np.ndarray, recall: float) -> float:
    """HardNet: sort by distance (stable), first index where the positives' running count reaches
    recall * P, negatives strictly before it over all negatives."""
    ordered = labels[np.argsort(distances, kind="stable")]
    index = int(np.argmax(np.cumsum(ordered) >= recall * np.sum(ordered)))
    fp = int(np.sum(ordered[:index] == 0))
    tn = int(np.sum(ordered[index:] == 0))
    return fp / (fp + tn)


def matchnet_port(labels: np.ndarray, scores: np.ndarray, recall: float) -> float:
    """MatchNet: Python's stable sort by score, descending; walk until tp >= recall * P;
    return (count - tp) / count."""
    ranked = sorted(zip(labels.tolist(), scores.tolist(), strict=True), key=lambda x: x[1],
                    reverse=True)  # fmt: skip
    needed = recall * sum(1 for label, _ in ranked if label == 1)
    tp = count = 0
    for label, _ in ranked:
        count += 1
        tp += label == 1
        if tp >= needed:
            break
    return (count - tp) / count


def simonyan_port(labels: np.ndarray, distances: np.ndarray, recall: float) -> float:
    """K. Simonyan's MATLAB: stable ascending sort, TPR = cumsum / nPos, FPR = cumsum / nNeg,
    FPR at the first TPR >= recall (in double precision)."""
    ordered = labels[np.argsort(distances, kind="stable")]
    tpr = np.cumsum(ordered == 1) / np.sum(ordered == 1)
    fpr = np.cumsum(ordered == 0) / np.sum(ordered == 0)
    return float(fpr[np.flatnonzero(tpr >= recall)[0]])


def sklearn_port(labels: np.ndarray, scores: np.ndarray, recall: float, drop: bool) -> float:
    fpr, tpr, _ = sk_roc_curve(labels, scores, drop_intermediate=drop)
    return float(fpr[np.argmax(tpr >= recall)])


def _random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(2, 60))
    labels = rng.integers(0, 2, n)
    labels[rng.integers(n)] = 1
    labels[(rng.integers(n - 1) + 1 + np.flatnonzero(labels)[0]) % n] = 0
    levels = int(rng.integers(1, 8)) if rng.random() < 0.6 else n * 10
    distances = rng.integers(0, levels, n).astype(np.float64)  # many ties, or nearly none
    return labels, distances


RECALLS = (0.95, 0.5, 0.9, 1.0, 0.01, 0.333)


def test_every_variant_equals_its_reference_on_random_cases_with_ties() -> None:
    rng = np.random.default_rng(18)
    for case in range(300):
        labels, distances = _random_case(rng)
        recall = RECALLS[case % len(RECALLS)]
        scores = -distances
        expected = {
            "hardnet": hardnet_port(labels, distances, recall),
            "matchnet": matchnet_port(labels, scores, recall),
            "threshold": sklearn_port(labels, scores, recall, drop=False),
            "sklearn": sklearn_port(labels, scores, recall, drop=True),
        }
        for variant, value in expected.items():
            got = fpr_at_recall(labels, scores, recall=recall, variant=variant)
            assert got == value, (case, variant, labels, distances, recall)
        assert simonyan_port(labels, distances, recall) == expected["hardnet"]


def test_default_is_hardnet_and_large_tie_free_lists_agree_with_numpy_default_sort() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 20000)
    distances = rng.random(20000) + 0.3 * (1 - labels)  # no ties: the sort kind cannot matter
    original = labels[np.argsort(distances)]  # HardNet's own (unstable) argsort
    index = int(np.argmax(np.cumsum(original) >= 0.95 * np.sum(original)))
    reference = np.sum(original[:index] == 0) / np.sum(original == 0)
    assert fpr_at_recall(labels, -distances) == pytest.approx(reference, abs=0)
    for variant in ("threshold", "sklearn"):  # without ties they agree
        assert fpr_at_recall(labels, -distances, variant=variant) == reference


def test_hand_computed_tie_conventions() -> None:
    # ranked by distance: 0 (+), 1 (-), 1 (+), 1 (-), 2 (+), 3 (-); P = N = 3
    labels = np.array([1, 0, 1, 0, 1, 0])
    distances = np.array([0, 1, 1, 1, 2, 3])
    # recall 2/3 -> k = 2: the 2nd positive is the 2nd item of the tie at 1, after one negative
    assert fpr_at_recall(labels, -distances, recall=0.6) == 1 / 3
    assert fpr_at_recall(labels, -distances, recall=0.6, variant="matchnet") == 1 / 3
    # a threshold at distance 1 accepts the whole tie: 2 negatives
    assert fpr_at_recall(labels, -distances, recall=0.6, variant="threshold") == 2 / 3
    # the input order inside the tie decides HardNet's and MatchNet's value
    swapped = np.array([1, 1, 0, 0, 1, 0])
    assert fpr_at_recall(swapped, -distances, recall=0.6) == 0.0
    assert fpr_at_recall(swapped, -distances, recall=0.6, variant="threshold") == 2 / 3


def test_sklearn_variant_moves_along_straight_runs() -> None:
    # three tie groups of one positive and one negative: a straight diagonal run of ROC points
    labels = np.array([1, 0, 1, 0, 1, 0, 0])
    distances = np.array([1, 1, 2, 2, 3, 3, 9])
    assert fpr_at_recall(labels, -distances, recall=0.6, variant="threshold") == 0.5
    assert fpr_at_recall(labels, -distances, recall=0.6, variant="sklearn") == 0.75


def test_all_equal_scores() -> None:
    labels = np.array([0, 1, 0, 1, 1, 0, 0])
    scores = np.zeros(7)
    for variant in FPR_AT_RECALL_VARIANTS:
        got = fpr_at_recall(labels, scores, variant=variant)
        if variant == "hardnet":
            assert got == hardnet_port(labels, -scores, 0.95) == 0.5
        elif variant == "matchnet":
            assert got == matchnet_port(labels, scores, 0.95) == 2 / 5
        else:
            assert got == 1.0


@pytest.mark.parametrize(
    ("labels", "scores", "message"),
    [
        ([0, 0, 0], [1, 2, 3], "no positive"),
        ([1, 1], [1, 2], "no negative"),
        ([1, 2], [1, 2], "binary labels"),
        ([1, 0], [1, np.nan], "NaN"),
        ([], [], "empty"),
        ([[1, 0]], [[1, 2]], "1-D"),
        ([1, 0], [1, 2, 3], "shape"),
    ],
)
def test_bad_input_is_one_clear_error(labels: object, scores: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        fpr_at_recall(labels, scores)


@pytest.mark.parametrize("recall", [0, -0.1, 1.5, float("nan"), "0.95", True])
def test_bad_recall(recall: object) -> None:
    with pytest.raises(InvalidInputError, match="recall must be a number in"):
        fpr_at_recall([1, 0], [1, 0], recall=recall)  # type: ignore[arg-type]


def test_bad_variant() -> None:
    with pytest.raises(InvalidInputError, match="variant must be one of 'hardnet'"):
        fpr_at_recall([1, 0], [1, 0], variant="brown")
