"""The paired tests of two systems on the same units, by the reference libraries.

Each test takes the two systems' values ``x`` (descriptor) and ``y`` (baseline) on the n paired
units, differences :math:`d_i = x_i - y_i`, and returns the test statistic and the two-sided
p-value:

- ``wilcoxon``: :func:`scipy.stats.wilcoxon(x, y) <scipy.stats.wilcoxon>` with scipy's defaults
  (zero differences dropped, ``method="auto"``: exact for small samples without ties, else the
  normal approximation); statistic :math:`\\min(T^+, T^-)`.
- ``ttest``: :func:`scipy.stats.ttest_rel(x, y) <scipy.stats.ttest_rel>`; statistic
  :math:`t = \\bar d / (s_d / \\sqrt n)`.
- ``sign``: :func:`scipy.stats.binomtest` of the wins :math:`w = \\#\\{d_i > 0\\}` among the
  :math:`w + l` non-zero differences, p = 1/2, two-sided; statistic :math:`w`.
- ``mcnemar``: :func:`statsmodels.stats.contingency_tables.mcnemar` of the 2 x 2 table of binary
  outcomes; exact binomial when the discordant count :math:`b + c` is below
  :data:`MCNEMAR_EXACT_BELOW`, else the chi-square statistic with continuity correction
  :math:`(|b - c| - 1)^2 / (b + c)`.
- ``randomization``: the sign-flip test, run for all comparisons of a call at once by
  :func:`metricalc.stats.randomization.sign_flip_pvalues`.

``auto`` (the default of :func:`metricalc.stats.compare`, :func:`default_test`) chooses for the
quantity a results table shows, the mean: McNemar's test for binary outcomes (0 or 1 per query),
the randomization test of the mean difference otherwise. The Wilcoxon and sign tests test other
quantities (the location, i.e. the pseudo-median, of the differences; the median difference), so
they can reject in favour of the system with the lower mean.
"""

from __future__ import annotations

import numpy as np
import scipy.stats
from statsmodels.stats.contingency_tables import mcnemar

from metricalc.errors import InvalidInputError
from metricalc.validation import Choice, validate_params

__all__ = [
    "MCNEMAR_EXACT_BELOW",
    "MEAN_TESTS",
    "NEEDS_NONZERO",
    "TESTS",
    "default_test",
    "is_binary",
    "is_binary_metric",
    "paired_test",
    "untestable",
]

TESTS = ("auto", "randomization", "ttest", "wilcoxon", "sign", "mcnemar")
"""The paired tests :func:`metricalc.stats.compare` runs (``auto``: :func:`default_test`)."""

MEAN_TESTS = ("randomization", "ttest")
"""Tests of the mean difference: their statistic always points the way of the means."""

NEEDS_NONZERO = ("wilcoxon", "ttest", "sign", "mcnemar")
"""Tests that are undefined when every difference is zero (the randomization test gives 1)."""

MCNEMAR_EXACT_BELOW = 25
"""McNemar's test is the exact binomial test when fewer units than this are discordant."""

# Differences whose spread is within this many machine epsilons of their largest magnitude are
# constant up to the rounding of the subtraction x - y (e.g. (s + 0.125) - s); the t statistic
# of such differences is rounding noise (scipy warns of catastrophic cancellation).
_ROUNDING = 8 * np.finfo(np.float64).eps


def is_binary(values: np.ndarray) -> bool:
    """True when every value is 0 or 1."""
    return bool(np.isin(values, (0.0, 1.0)).all())


def is_binary_metric(metric: str) -> bool:
    """True for the metrics that are a hit or a miss per query: ``hit@K`` and ``nn_correct``."""
    return metric.startswith("hit@") or metric == "nn_correct"


def default_test(metric: str, pair_by: str, values: np.ndarray) -> str:
    """The test ``test="auto"`` runs: ``"mcnemar"`` for binary outcomes, else ``"randomization"``.

    Binary outcomes are a binary metric (:func:`is_binary_metric`) paired by query whose present
    values are all 0 or 1 (``hit@K`` under a tie policy where no tie straddles rank K, or the
    ``optimistic`` / ``pessimistic`` policy). Every other case (AP, unit means, fractional hit
    probabilities) is a mean metric, tested on the mean difference.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.paired import default_test
    >>> default_test("hit@1", "query", np.array([[1.0, 0.0], [0.0, np.nan]]))
    'mcnemar'
    >>> default_test("hit@1", "query", np.array([[1.0, 0.5]]))
    'randomization'
    >>> default_test("ap", "query", np.ones(2))
    'randomization'
    """
    present = np.asarray(values, dtype=np.float64)
    present = present[np.isfinite(present)]
    if is_binary_metric(metric) and pair_by == "query" and is_binary(present):
        return "mcnemar"
    return "randomization"


def untestable(differences: np.ndarray, *, test: str) -> str:
    """Why ``test`` cannot be run on these paired differences; ``""`` when it can.

    Every test but the randomization test needs a non-zero difference (with all differences
    zero the statistic is undefined, and the two systems are identical on the units); the
    t-test also needs differences that are not all equal (zero standard deviation), up to the
    rounding of the subtraction: a spread of at most 8 machine epsilons times the largest
    magnitude counts as constant.

    Examples
    --------
    >>> from metricalc.stats.paired import untestable
    >>> untestable([0.0, 0.0, 0.0], test="wilcoxon")
    'all 3 paired differences are zero (the systems give identical values on every unit): the wilcoxon test needs a non-zero difference'
    >>> untestable([0.1, 0.1, 0.1], test="ttest")
    "all 3 paired differences equal 0.1: the t statistic is undefined (zero standard deviation); use test='randomization'"
    >>> untestable([0.0, 0.0], test="randomization"), untestable([0.1, 0.2], test="ttest")
    ('', '')
    """  # noqa: E501
    d = np.asarray(differences, dtype=np.float64)
    if test in NEEDS_NONZERO and d.size and not (d != 0).any():
        return (
            f"all {d.size:,} paired differences are zero (the systems give identical values on "
            f"every unit): the {test} test needs a non-zero difference"
        )
    if test == "ttest" and d.size and np.ptp(d) <= _ROUNDING * np.abs(d).max():
        return (
            f"all {d.size:,} paired differences equal {d[0]:.6g}: the t statistic is undefined "
            "(zero standard deviation); use test='randomization'"
        )
    return ""


@validate_params(test=Choice(t for t in TESTS if t not in ("auto", "randomization")))
def paired_test(x: np.ndarray, y: np.ndarray, *, test: str) -> tuple[float, float]:
    """Statistic and two-sided p-value of a paired test of ``x`` against ``y``.

    Parameters
    ----------
    x, y : array of float, shape (n,)
        The two systems' values on the same n units (finite).
    test : {"wilcoxon", "ttest", "sign", "mcnemar"}
        See the module description; ``"randomization"`` runs through
        :func:`~metricalc.stats.randomization.sign_flip_pvalues`.

    Raises
    ------
    InvalidInputError
        When all differences are zero, for ``ttest`` when the differences are constant, and for
        ``mcnemar`` on values other than 0 and 1.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.paired import paired_test
    >>> x = np.array([0.9, 0.8, 0.7, 0.95, 0.6, 0.85])
    >>> y = np.array([0.5, 0.6, 0.65, 0.7, 0.62, 0.8])
    >>> paired_test(x, y, test="wilcoxon")   # 5 of 6 differences positive, exact p = 2 * 2/64
    (1.0, 0.0625)
    >>> paired_test(x, y, test="sign")
    (5.0, 0.21875)
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    reason = untestable(x - y, test=test)
    if reason:
        raise InvalidInputError(reason)
    if test == "mcnemar" and not (is_binary(x) and is_binary(y)):
        raise InvalidInputError(
            "the mcnemar test needs binary outcomes (0 or 1 per unit, e.g. metric='hit@1' or "
            "'nn_correct' with pair_by='query'); found other values"
        )
    if test == "wilcoxon":
        result = scipy.stats.wilcoxon(x, y)
        return float(result.statistic), float(result.pvalue)
    if test == "ttest":
        result = scipy.stats.ttest_rel(x, y)
        return float(result.statistic), float(result.pvalue)
    if test == "sign":
        d = x - y
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        return float(wins), float(scipy.stats.binomtest(wins, wins + losses, 0.5).pvalue)
    table = np.array(
        [
            [np.sum((x == 1) & (y == 1)), np.sum((x == 1) & (y == 0))],
            [np.sum((x == 0) & (y == 1)), np.sum((x == 0) & (y == 0))],
        ]
    )
    discordant = int(table[0, 1] + table[1, 0])
    result = mcnemar(table, exact=discordant < MCNEMAR_EXACT_BELOW, correction=True)
    return float(result.statistic), float(result.pvalue)
