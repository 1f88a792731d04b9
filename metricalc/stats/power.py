"""Power and sample size of the paired t-test (statsmodels ``TTestPower``).

For n paired units with mean difference :math:`\\delta` and standard deviation of the
differences :math:`\\sigma`, the effect size is :math:`d_z = \\delta / \\sigma` and the paired
t statistic follows a noncentral t distribution with n - 1 degrees of freedom and noncentrality
:math:`d_z \\sqrt n`. Its power at level :math:`\\alpha` (two-sided) is

.. math::

    1 - \\beta = P(|T_{n-1, d_z \\sqrt n}| > t_{1 - \\alpha/2, n - 1}).

Given any two of n, power and effect size, :func:`power` solves for the third, as
:meth:`statsmodels.stats.power.TTestPower.solve_power` does, but finite everywhere:

- the power is statsmodels' expression (:func:`statsmodels.stats.power.ttest_power`: the two
  tails of the noncentral t, ``1 - scipy.special.nctdtr(df, nc, t_crit)`` and
  ``nctdtr(df, nc, -t_crit)``), bit for bit where that is finite. ``nctdtr`` returns NaN for
  some far tails (a large noncentrality: the power near 1, or a tail near 0, e.g. d_z = 2 with
  n = 30), which statsmodels passes on; such a tail is computed here by quadrature instead
  (:func:`noncentral_t_sf`), so the power is a number in [0, 1] for every input;
- n and the effect are solved by :func:`scipy.optimize.brentq` on that power (statsmodels'
  solver returns NaN where its power does), to 12 significant digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.integrate
import scipy.optimize
import scipy.special
import scipy.stats

from metricalc.errors import InvalidInputError
from metricalc.validation import Choice, Fraction, Nullable, Real, validate_params

__all__ = ["ALTERNATIVES", "PowerResult", "noncentral_t_sf", "power", "ttest_power"]

ALTERNATIVES = ("two-sided", "larger", "smaller")
"""statsmodels' names of the alternatives (``larger``: the mean difference is positive)."""


@dataclass(frozen=True)
class PowerResult:
    """A solved power analysis of the paired t-test.

    ``n`` is the (fractional) number of paired units statsmodels solves for; ``n_required``
    rounds it up. ``diff`` and ``sd`` are None when only the effect size was given.
    """

    n: float
    power: float
    effect_size: float
    diff: float | None
    sd: float | None
    alpha: float
    alternative: str

    @property
    def n_required(self) -> int:
        """The number of paired units to collect: ``ceil(n)``."""
        return math.ceil(self.n - 1e-9)


def noncentral_t_sf(x: float, df: float, nc: float) -> float:
    r""":math:`P(T > x)` of the noncentral t with ``df`` degrees of freedom and noncentrality
    ``nc``, by quadrature over the normal numerator: with :math:`T = (Z + nc) / S`,
    :math:`S = \sqrt{V / df}`, :math:`V \sim \chi^2_{df}` and :math:`Z` standard normal, for
    :math:`x > 0`

    .. math:: P(T > x) = \int_{-nc}^{\infty} \varphi(z) \, F_S\!\left(\frac{z + nc}{x}\right) dz,
              \qquad F_S(s) = P\!\left(\chi^2_{df} \le df \, s^2\right)
              = \mathrm{gammainc}\!\left(\tfrac{df}{2}, \tfrac{df \, s^2}{2}\right),

    and :math:`P(T > x) = 1 - P(T' > -x)` for :math:`x \le 0`, with :math:`T'` of noncentrality
    :math:`-nc` (:math:`P(T > 0) = \Phi(nc)`). Slower than :func:`scipy.special.nctdtr`, which
    :func:`ttest_power` uses first, but never NaN: the integrand is a probability density times
    a probability, so the result lies in [0, 1], and tails far below machine epsilon keep their
    relative accuracy.

    Examples
    --------
    >>> import scipy.special
    >>> from metricalc.stats.power import noncentral_t_sf
    >>> expected = 1 - float(scipy.special.nctdtr(10, 0.8, 1.5))
    >>> abs(noncentral_t_sf(1.5, 10, 0.8) - expected) < 1e-12
    True
    >>> noncentral_t_sf(-3.0, 29, 5.5) + noncentral_t_sf(3.0, 29, -5.5) == 1.0
    True
    """
    if x == 0:
        return float(scipy.special.ndtr(nc))
    if x < 0:
        return 1.0 - noncentral_t_sf(-x, df, -nc)
    low, high = max(-nc, -_NORMAL_RANGE), _NORMAL_RANGE
    if low >= high:
        return 0.0
    half = df / 2.0

    def integrand(z: float) -> float:
        s = (z + nc) / x
        return _phi(z) * float(scipy.special.gammainc(half, half * s * s))

    # where F_S rises: S between its 1e-12 and 1 - 1e-12 quantiles, i.e. z = x s - nc
    quantiles = np.sqrt(scipy.stats.chi2.ppf([1e-12, 0.5, 1 - 1e-12], df) / df)
    points = sorted({float(z) for z in x * quantiles - nc if low < z < high})
    value, _ = scipy.integrate.quad(
        integrand, low, high, points=points or None, epsabs=0.0, epsrel=1e-11, limit=500
    )
    return min(max(float(value), 0.0), 1.0)


_NORMAL_RANGE = 40.0
"""The normal density beyond +-40 is below 1e-300: the integrals of :func:`noncentral_t_sf`
stop there."""


def _phi(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _upper_tail(x: float, df: float, nc: float) -> float:
    """:math:`P(T > x)`: statsmodels' ``1 - nctdtr(df, nc, x)``, by quadrature where NaN."""
    value = 1.0 - float(scipy.special.nctdtr(df, nc, x))
    return value if 0.0 <= value <= 1.0 else noncentral_t_sf(x, df, nc)


def _lower_tail(x: float, df: float, nc: float) -> float:
    r""":math:`P(T \le x)`: statsmodels' ``nctdtr(df, nc, x)``, by quadrature where NaN
    (:math:`P(T \le x) = P(T' > -x)`, :math:`T'` of noncentrality :math:`-nc`)."""
    value = float(scipy.special.nctdtr(df, nc, x))
    return value if 0.0 <= value <= 1.0 else noncentral_t_sf(-x, df, -nc)


def ttest_power(effect_size: float, n: float, alpha: float, alternative: str) -> float:
    """Power of the paired t-test: statsmodels' :func:`~statsmodels.stats.power.ttest_power`
    where that is finite, a number in [0, 1] everywhere (see the module description).

    Examples
    --------
    >>> from metricalc.stats.power import ttest_power
    >>> round(ttest_power(0.1, 1000, 0.05, "two-sided"), 3)
    0.885
    >>> ttest_power(2.0, 30, 0.05, "two-sided")     # statsmodels: nan
    1.0
    """
    df = n - 1.0
    nc = effect_size * math.sqrt(n)
    half = alpha / 2.0 if alternative == "two-sided" else alpha
    total = 0.0
    if alternative in ("two-sided", "larger"):
        total += _upper_tail(float(scipy.stats.t.isf(half, df)), df, nc)
    if alternative in ("two-sided", "smaller"):
        total += _lower_tail(float(scipy.stats.t.ppf(half, df)), df, nc)
    return min(total, 1.0)


def _bracket(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of the increasing ``f`` above ``low``: ``high`` doubled until ``f(high) > 0``."""
    while f(high) <= 0:
        low, high = high, 2.0 * high
        if high > 1e15:
            raise InvalidInputError("the power equation has no solution below 1e15")
    return float(scipy.optimize.brentq(f, low, high, xtol=1e-14, rtol=1e-12, maxiter=500))


def _solve_n(effect_size: float, alpha: float, target: float, alternative: str) -> float:
    """The n (at least 2) at which the power reaches ``target``."""

    def short(n: float) -> float:
        return ttest_power(effect_size, n, alpha, alternative) - target

    if short(2.0) >= 0:
        return 2.0
    return _bracket(short, 2.0, 4.0)


def _solve_effect(n: float, alpha: float, target: float, alternative: str) -> float:
    """The effect size (negative for ``smaller``) at which the power reaches ``target``."""
    sign = -1.0 if alternative == "smaller" else 1.0

    def short(size: float) -> float:
        return ttest_power(sign * size, n, alpha, alternative) - target

    return sign * _bracket(short, 0.0, 1.0)


@validate_params(
    diff=Nullable(Real()),
    sd=Nullable(Real(0, None, closed="neither")),
    effect_size=Nullable(Real()),
    n=Nullable(Real(2, None)),
    power=Nullable(Fraction()),
    alpha=Fraction(),
    alternative=Choice(ALTERNATIVES),
)
def power(
    *,
    diff: float | None = None,
    sd: float | None = None,
    effect_size: float | None = None,
    n: float | None = None,
    power: float | None = None,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> PowerResult:
    """Solve the paired t-test's power equation for n, power or the detectable difference.

    Give the effect as ``effect_size`` (Cohen's :math:`d_z`) or as ``diff`` with ``sd`` (the
    mean difference and the standard deviation of the differences, :math:`d_z = diff / sd`),
    and leave exactly one of effect, ``n`` and ``power`` unknown. With ``sd`` alone the solved
    effect is also given as a detectable difference ``diff = d_z * sd``.

    Examples
    --------
    How many queries to detect a mean AP difference of 0.01 when the per-query differences
    have a standard deviation of 0.25, at alpha 0.05 with power 0.8?

    >>> from metricalc import stats
    >>> stats.power(diff=0.01, sd=0.25, power=0.8).n_required
    4908
    >>> round(stats.power(sd=0.25, n=1000, power=0.8).diff, 4)   # detectable with 1,000
    0.0222
    >>> round(stats.power(effect_size=0.1, n=1000).power, 3)
    0.885
    """
    if effect_size is not None and diff is not None:
        raise InvalidInputError("give effect_size or diff (with sd), not both")
    if diff is not None:
        if sd is None:
            raise InvalidInputError("diff needs sd (the standard deviation of the differences)")
        effect_size = diff / sd
    if effect_size == 0:
        raise InvalidInputError("the effect (diff or effect_size) must not be zero")
    if power is not None and power <= alpha:
        raise InvalidInputError(f"power must exceed alpha ({alpha}); got {power}")
    given = (("effect", effect_size), ("n", n), ("power", power))
    unknown = [name for name, value in given if value is None]
    if len(unknown) != 1:
        raise InvalidInputError(
            "leave exactly one of the effect (diff/effect_size), n and power unknown; "
            f"unknown now: {unknown or 'none'}"
        )
    if unknown == ["effect"]:
        effect_size = _solve_effect(n, alpha, power, alternative)  # type: ignore[arg-type]
        diff = effect_size * sd if sd is not None else None
    elif unknown == ["n"]:
        n = _solve_n(effect_size, alpha, power, alternative)  # type: ignore[arg-type]
    else:
        power = ttest_power(effect_size, n, alpha, alternative)  # type: ignore[arg-type]
    return PowerResult(
        n=float(n),  # type: ignore[arg-type]
        power=float(power),  # type: ignore[arg-type]
        effect_size=float(effect_size),  # type: ignore[arg-type]
        diff=None if diff is None else float(diff),
        sd=None if sd is None else float(sd),
        alpha=float(alpha),
        alternative=alternative,
    )
