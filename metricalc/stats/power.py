"""Power and sample size of the paired t-test (statsmodels ``TTestPower``).

For n paired units with mean difference :math:`\\delta` and standard deviation of the
differences :math:`\\sigma`, the effect size is :math:`d_z = \\delta / \\sigma` and the paired
t statistic follows a noncentral t distribution with n - 1 degrees of freedom and noncentrality
:math:`d_z \\sqrt n`. Its power at level :math:`\\alpha` (two-sided) is

.. math::

    1 - \\beta = P(|T_{n-1, d_z \\sqrt n}| > t_{1 - \\alpha/2, n - 1}).

Given any two of n, power and effect size, :func:`power` solves for the third
(:meth:`statsmodels.stats.power.TTestPower.solve_power`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.power import TTestPower

from metricalc.core._validate import check_choice
from metricalc.errors import InvalidInputError
from metricalc.stats._checks import check_fraction

__all__ = ["ALTERNATIVES", "PowerResult", "power"]

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


def _number(name: str, value: object, *, positive: bool = False) -> float:
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)  # Python and NumPy ints and floats
        or not math.isfinite(value)
        or (positive and value <= 0)
    ):
        wanted = "a finite number > 0" if positive else "a finite number"
        raise InvalidInputError(f"{name} must be {wanted}; got {value!r}")
    return float(value)


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
    alpha = check_fraction("alpha", alpha)
    check_choice("alternative", alternative, ALTERNATIVES)
    if sd is not None:
        sd = _number("sd", sd, positive=True)
    if effect_size is not None and diff is not None:
        raise InvalidInputError("give effect_size or diff (with sd), not both")
    if diff is not None:
        if sd is None:
            raise InvalidInputError("diff needs sd (the standard deviation of the differences)")
        effect_size = _number("diff", diff) / sd
    elif effect_size is not None:
        effect_size = _number("effect_size", effect_size)
    if effect_size == 0:
        raise InvalidInputError("the effect (diff or effect_size) must not be zero")
    if n is not None:
        n = _number("n", n)
        if n < 2:
            raise InvalidInputError(f"n must be at least 2 paired units; got {n!r}")
    if power is not None:
        power = check_fraction("power", power)
        if power <= alpha:
            raise InvalidInputError(f"power must exceed alpha ({alpha}); got {power}")
    given = (("effect", effect_size), ("n", n), ("power", power))
    unknown = [name for name, value in given if value is None]
    if len(unknown) != 1:
        raise InvalidInputError(
            "leave exactly one of the effect (diff/effect_size), n and power unknown; "
            f"unknown now: {unknown or 'none'}"
        )
    solved = float(
        TTestPower().solve_power(
            effect_size=effect_size, nobs=n, alpha=alpha, power=power, alternative=alternative
        )
    )
    if unknown == ["effect"]:
        effect_size = solved
        diff = effect_size * sd if sd is not None else None
    elif unknown == ["n"]:
        n = solved
    else:
        power = solved
    return PowerResult(
        n=float(n),  # type: ignore[arg-type]
        power=float(power),  # type: ignore[arg-type]
        effect_size=float(effect_size),  # type: ignore[arg-type]
        diff=None if diff is None else float(diff),
        sd=sd,
        alpha=alpha,
        alternative=alternative,
    )
