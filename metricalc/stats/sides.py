"""The side a rejected paired comparison favours: the test's own statistic (:func:`direction`),
the system called better (:func:`verdict`: only where the mean difference agrees), and the words
for a disagreement (:func:`disagreement`). :func:`metricalc.stats.compare` uses all three.
"""

from __future__ import annotations

import math

import numpy as np

from metricalc.stats.paired import MEAN_TESTS

__all__ = ["TEST_QUANTITIES", "direction", "disagreement", "verdict"]


def direction(test: str, *, mean_diff: float, rank_biserial: float, wins: int, losses: int) -> int:
    r"""The side a two-sided paired test's own statistic points to: +1 the descriptor, -1 the
    baseline, 0 none.

    A two-sided test rejects "no difference" when its own statistic lies far out in either
    tail; the tail tells which system the evidence is for. That is the sign of

    - the mean difference :math:`\bar d` for the t-test (:math:`t = \bar d / (s_d/\sqrt n)`)
      and the randomization test (statistic :math:`\sum_i d_i`);
    - :math:`T^+ - T^-` for the Wilcoxon test, the sign of the matched-pairs rank-biserial r
      (the same zero-dropping ranks as :func:`scipy.stats.wilcoxon`);
    - wins - losses for the sign test and McNemar's test (the discordant counts b - c).

    The mean difference can point the other way than a rank or sign test (many small wins
    against a few large losses): the Wilcoxon test then points to the system with the lower
    mean. :func:`~metricalc.stats.compare` calls a system better only where this side and the
    mean difference agree (:func:`verdict`). 0 when the statistic is at its null centre or
    undefined.

    Examples
    --------
    >>> from metricalc.stats.sides import direction
    >>> direction("wilcoxon", mean_diff=0.001, rank_biserial=-0.22, wins=40, losses=60)
    -1
    >>> direction("ttest", mean_diff=0.001, rank_biserial=-0.22, wins=40, losses=60)
    1
    >>> direction("sign", mean_diff=-0.2, rank_biserial=-0.1, wins=30, losses=10)
    1
    """
    if test in MEAN_TESTS:
        value = float(mean_diff)
    elif test == "wilcoxon":
        value = float(rank_biserial)
    else:
        value = float(wins - losses)
    return int(np.sign(value)) if math.isfinite(value) else 0


def verdict(side: int, mean_diff: float) -> int:
    """The system a rejected comparison calls better: ``side`` (:func:`direction`) where the
    mean difference has the same sign, else 0 (no verdict: a system with the lower or an equal
    mean is never called better).

    Examples
    --------
    >>> from metricalc.stats.sides import verdict
    >>> verdict(1, 0.02), verdict(-1, 0.009), verdict(1, 0.0), verdict(0, -0.3)
    (1, 0, 0, 0)
    """
    mean_side = int(np.sign(mean_diff)) if math.isfinite(mean_diff) else 0
    return side if side == mean_side else 0


TEST_QUANTITIES = {
    "wilcoxon": "the location (pseudo-median) of the differences",
    "sign": "the count of wins and losses",
    "mcnemar": "the discordant outcomes",
}
"""What a test other than a test of the mean difference finds in favour of a system."""


def disagreement(test: str, side: int, mean_diff: float, descriptor: str, baseline: str) -> str:
    """Why a rejected comparison calls no system better: its test's statistic points to one
    system and the mean difference does not (``""`` when they agree).

    Examples
    --------
    >>> from metricalc.stats.sides import disagreement
    >>> print(disagreement("wilcoxon", 1, -0.009, "sift", "orb"))
    the wilcoxon test rejects in favour of 'sift' on the location (pseudo-median) of the differences, but the mean difference favours 'orb' (-0.009, sift minus orb): neither is called better; the mean difference is tested by test='randomization'
    """  # noqa: E501
    if side == 0 or verdict(side, mean_diff) != 0:
        return ""
    found, other = (descriptor, baseline) if side > 0 else (baseline, descriptor)
    if math.isfinite(mean_diff) and mean_diff != 0:
        means = (
            f"the mean difference favours {other!r} ({mean_diff:+.4g}, {descriptor} minus "
            f"{baseline})"
        )
    else:
        means = "the two means are equal"
    quantity = TEST_QUANTITIES.get(test, "its statistic")
    return (
        f"the {test} test rejects in favour of {found!r} on {quantity}, but {means}: neither is "
        "called better; the mean difference is tested by test='randomization'"
    )
