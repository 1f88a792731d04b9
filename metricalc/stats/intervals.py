"""The confidence intervals of the mean paired difference that :func:`~metricalc.stats.compare`
reports: the BCa bootstrap interval (:mod:`metricalc.stats.bootstrap`) or the Student t
interval, which needs no resampling. The default, ``auto``, is BCa up to :data:`BCA_MAX_UNITS`
paired units and t above: there the bootstrap would cost several times the sign flips of the test
while the distribution of a mean of so many differences is normal to well within the resampling
error of 10,000 resamples, so the two intervals agree (:func:`resolved_interval`).

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
from metricalc.validation import Fraction, validate_params

__all__ = ["BCA_MAX_UNITS", "INTERVALS", "resolved_interval", "t_interval"]

INTERVALS = ("auto", "bca", "t")
"""The intervals of :func:`metricalc.stats.compare`: ``auto`` (default: :func:`resolved_interval`),
``bca`` and ``t``."""

BCA_MAX_UNITS = 100_000
"""Above this many paired units ``auto`` gives the t interval instead of the BCa bootstrap."""


def resolved_interval(interval: str, n_units: int) -> str:
    """The interval ``interval`` stands for when a comparison pairs ``n_units`` units.

    ``auto`` is ``bca`` for :math:`n \\le` :data:`BCA_MAX_UNITS` and ``t`` above; ``bca`` and
    ``t`` are themselves.

    Examples
    --------
    >>> from metricalc.stats.intervals import resolved_interval
    >>> resolved_interval("auto", 5_000), resolved_interval("auto", 1_000_000)
    ('bca', 't')
    >>> resolved_interval("bca", 1_000_000)
    'bca'
    """
    if interval != "auto":
        return interval
    return "bca" if n_units <= BCA_MAX_UNITS else "t"


@validate_params(confidence_level=Fraction())
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
    level = float(confidence_level)
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
