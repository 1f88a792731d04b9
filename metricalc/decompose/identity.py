"""The identity check of a decomposition: the composed curve against the product of its factors.

The factor curves are ratios of consecutive counts, so their products telescope to the composed
curve exactly; :func:`verify` measures how exactly in floating point.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import xarray as xr

from metricalc.decompose.chain import STAGE
from metricalc.errors import InvalidInputError
from metricalc.validation import Real, validate_params

__all__ = ["Verification", "verify"]


@dataclass(frozen=True)
class Verification:
    """Result of :func:`verify`: the largest deviation of the composed curve from the product."""

    precision_deviation: float
    """Largest absolute difference of P_D and the product of the precision factors, over the
    points where every factor is defined."""
    recall_deviation: float
    """Largest absolute difference of R_D and the product of the recall factors, over the points
    where every factor is defined."""
    points_checked: int
    """Curve points where precision and recall factors are all defined."""
    points_undefined: int
    """Curve points skipped (a factor after a stage that nothing passed)."""
    tolerance: float

    @property
    def max_deviation(self) -> float:
        """The larger of the two deviations."""
        return max(self.precision_deviation, self.recall_deviation)

    @property
    def ok(self) -> bool:
        """True when the identity holds within ``tolerance`` (vacuously when nothing is defined)."""
        return self.max_deviation < self.tolerance

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values, ``max_deviation`` and ``ok`` included."""
        return {**asdict(self), "max_deviation": self.max_deviation, "ok": self.ok}


@validate_params(tolerance=Real(0, None))
def verify(curves: xr.Dataset, *, tolerance: float = 1e-12) -> Verification:
    r"""Check :math:`P_D = \prod_k P_k` and :math:`R_D = \prod_k R_k` at every defined point.

    Parameters
    ----------
    curves : xarray.Dataset
        The output of :func:`decompose` (any batch dims).
    tolerance : float
        The deviation below which the identity counts as holding.

    Returns
    -------
    Verification
        The largest absolute deviations over the points where every factor of precision and of
        recall is defined, how many points that is, and ``ok``.

    Examples
    --------
    >>> from metricalc.decompose import decompose, verify
    >>> check = verify(decompose([0.9, 0.8, 0.7], [[1, 1], [1, 0], [0, 0]], 2))
    >>> check.ok, check.points_checked, check.max_deviation
    (True, 3, 0.0)
    """
    needed = ("precision", "recall", "factor_precision", "factor_recall")
    missing = [v for v in needed if v not in curves]
    if missing:
        raise InvalidInputError(f"verify: curves lacks {missing}; pass the output of decompose")
    fp, fr = curves["factor_precision"], curves["factor_recall"]
    defined = (fp.notnull().all(STAGE) & fr.notnull().all(STAGE)).values
    defined &= curves["precision"].notnull().values & curves["recall"].notnull().values
    p_dev = np.abs(curves["precision"].values - fp.prod(STAGE, skipna=False).values)[defined]
    r_dev = np.abs(curves["recall"].values - fr.prod(STAGE, skipna=False).values)[defined]
    return Verification(
        precision_deviation=float(p_dev.max(initial=0.0)),
        recall_deviation=float(r_dev.max(initial=0.0)),
        points_checked=int(defined.sum()),
        points_undefined=int(defined.size - defined.sum()),
        tolerance=float(tolerance),
    )
