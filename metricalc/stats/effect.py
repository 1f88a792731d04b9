"""Effect sizes of a paired comparison: matched-pairs rank-biserial correlation and Cohen's d_z."""

from __future__ import annotations

import numpy as np
import scipy.stats

__all__ = ["cohens_dz", "rank_biserial"]


def rank_biserial(differences: np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation of paired differences (King & Minium; Kerby 2014).

    Zero differences are dropped; the absolute values of the others are ranked (average ranks
    for ties) and

    .. math::

        r = \\frac{T^+ - T^-}{T^+ + T^-},

    with :math:`T^\\pm` the rank sums of the positive and the negative differences
    (:math:`T^+ + T^- = n'(n'+1)/2` for the :math:`n'` non-zero differences). It lies in
    [-1, 1]: 1 when every non-zero difference is positive. NaN when all differences are zero.

    Examples
    --------
    >>> from metricalc.stats import rank_biserial
    >>> rank_biserial([0.3, 0.1, -0.2, 0.0])   # ranks 3, 1, 2: (3 + 1 - 2) / 6
    0.3333333333333333
    """
    d = np.asarray(differences, dtype=np.float64)
    nonzero = d[d != 0]
    if nonzero.size == 0:
        return float("nan")
    ranks = scipy.stats.rankdata(np.abs(nonzero))
    return float((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum())


def cohens_dz(differences: np.ndarray) -> float:
    """Cohen's :math:`d_z`: the mean paired difference in units of its standard deviation.

    .. math:: d_z = \\frac{\\bar d}{s_d}, \\qquad
        s_d = \\sqrt{\\tfrac{1}{n-1} \\textstyle\\sum_i (d_i - \\bar d)^2}.

    :math:`\\pm\\infty` for constant non-zero differences, NaN for all-zero ones (or n < 2).

    Examples
    --------
    >>> from metricalc.stats import cohens_dz
    >>> cohens_dz([1.0, 2.0, 3.0])   # mean 2, sd 1
    2.0
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return float("nan")
    mean = d.mean()
    sd = 0.0 if (d == d[0]).all() else d.std(ddof=1)  # exactly 0 for constant differences
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(mean) / sd)
