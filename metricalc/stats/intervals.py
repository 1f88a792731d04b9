"""The confidence intervals of the mean paired difference that :func:`~metricalc.stats.compare`
reports: the BCa bootstrap interval (the default, :mod:`metricalc.stats.bootstrap`) or the
Student t interval, which needs no resampling.

The t interval is scipy's: the ``confidence_interval`` of
:func:`scipy.stats.ttest_rel(x, y) <scipy.stats.ttest_rel>` (that is, of
:func:`scipy.stats.ttest_1samp` of the differences against 0), two-sided:

.. math::

    \\bar d \\pm t_{n-1,\\, 1 - \\alpha} \\, \\frac{s_d}{\\sqrt n}, \\qquad
    \\alpha = \\frac{1 - \\text{level}}{2},

with :math:`s_d` the standard deviation of the differences (``ddof=1``) and
:math:`t_{n-1,\\,q}` the q quantile of Student's t with n - 1 degrees of freedom
(:func:`scipy.special.stdtrit`). Constant differences give :math:`[c, c]` (scipy's interval is
NaN there, after a warning), as the BCa interval does.
"""

from __future__ import annotations

import numpy as np
from scipy.special import stdtrit

from metricalc.errors import InvalidInputError
from metricalc.validation import check_fraction

__all__ = ["INTERVALS", "t_interval"]

INTERVALS = ("bca", "t")
"""The intervals of :func:`metricalc.stats.compare`: ``bca`` (default) and ``t``."""


def t_interval(differences: np.ndarray, *, confidence_level: float = 0.95) -> tuple[float, float]:
    """Two-sided Student t confidence interval of the mean of ``differences``.

    Parameters
    ----------
    differences : array of float, shape (n,)
        The paired differences (finite), n >= 2.
    confidence_level : float
        Two-sided level of the interval.

    Returns
    -------
    (low, high) : floats
        :math:`\\bar d \\pm t_{n-1,\\,1-\\alpha}\\, s_d/\\sqrt n` (module description), the
        ``confidence_interval`` of :func:`scipy.stats.ttest_rel`; ``(c, c)`` for constant
        differences c.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.intervals import t_interval
    >>> # mean 0.2, s_d = 0.0816, n = 4: 0.2 -+ 3.182 * 0.0408
    >>> [round(v, 4) for v in t_interval(np.array([0.1, 0.2, 0.3, 0.2]))]
    [0.0701, 0.3299]
    """
    level = check_fraction("confidence_level", confidence_level)
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size < 2 or not np.isfinite(d).all():
        raise InvalidInputError(
            f"differences must be a finite 1-D array of at least 2 values; got shape {d.shape}"
        )
    if (d == d[0]).all():
        return float(d[0]), float(d[0])
    mean = float(d.mean())
    error = float(np.sqrt(d.var(ddof=1) / d.size))
    tail = (1 - level) / 2
    low, high = stdtrit(d.size - 1, np.array([tail, 1 - tail]))
    return float(low * error + mean), float(high * error + mean)
