"""Checks of the numeric options shared by the statistics functions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError


def check_int(name: str, value: Any, *, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_fraction(name: str, value: Any) -> float:
    """``value`` as a float strictly between 0 and 1 (a level, an alpha, a power)."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
        or not 0 < value < 1
    ):
        raise InvalidInputError(f"{name} must be a number strictly between 0 and 1; got {value!r}")
    return float(value)
