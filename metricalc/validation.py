"""Input checks shared by every package: choices, integers, numbers, labels, scores, counts,
and the memory a request needs (:func:`check_memory`).

The one place where an option or an input is checked. Each check raises
:class:`~metricalc.errors.InvalidInputError` naming the argument, the offending value (and its
index) and what was expected, before any NumPy routine can fail deep inside.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Sequence
from typing import Literal, TypeGuard

import numpy as np

from metricalc.errors import InvalidInputError, UndefinedMetricWarning

ZeroDivision = Literal["nan", "warn"] | int | float
"""The policy for an undefined value: ``"nan"``, ``0``, ``1`` or ``"warn"`` (0 and a warning)."""

TIE_POLICIES = ("optimistic", "pessimistic", "workbench", "expected")
"""How a tie between a relevant item and others is resolved when only rank statistics are known."""

CUBE_TIE_POLICIES = (*TIE_POLICIES, "input_order")
"""The tie policies a cube may record: :data:`TIE_POLICIES` and ``"input_order"`` (tied items keep
the order in which the list was given, a stable sort: hpatches-benchmark's ``metrics.tpfp``).
Rank statistics (better, ties) do not hold that order, so under ``input_order`` they define a
rank only where ``ties == 0``."""

MEMORY_LIMIT_ENV = "METRICALC_MEMORY_LIMIT"
"""Environment variable holding the memory one request may use, in bytes or with a binary
suffix (``512M``, ``8G``, ``1.5T``); unset, half of this machine's physical memory."""

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def format_bytes(nbytes: float) -> str:
    """A byte count for a person to read, in binary units.

    Examples
    --------
    >>> format_bytes(512), format_bytes(3 * 2**30), format_bytes(2.4e13)
    ('512 B', '3.0 GiB', '21.8 TiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.0f} B" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def memory_limit() -> int:
    """The bytes one request may use: :data:`MEMORY_LIMIT_ENV` if set, else half the physical
    memory (:func:`os.sysconf`; 4 GiB where the platform does not tell).

    Examples
    --------
    >>> import os
    >>> os.environ[MEMORY_LIMIT_ENV] = "1.5G"
    >>> memory_limit() == 1.5 * 2**30
    True
    >>> del os.environ[MEMORY_LIMIT_ENV]
    """
    text = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if text:
        found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", text, flags=re.IGNORECASE)
        if not found or float(found.group(1)) <= 0:
            raise InvalidInputError(
                f"{MEMORY_LIMIT_ENV}={text!r}; expected a positive number of bytes, optionally "
                "with K, M, G or T (e.g. 8G)"
            )
        return int(float(found.group(1)) * _UNITS[found.group(2).upper()])
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX platforms
        return 4 * 2**30
    return int(physical // 2)


def check_memory(request: str, nbytes: float) -> None:
    """Refuse, before it is attempted, a request that needs more than :func:`memory_limit`.

    ``request`` says what is asked and how the bytes are counted; the error names both sizes.

    Examples
    --------
    >>> check_memory("n_resamples=10", 80)
    >>> check_memory("n_resamples=10**12 (3 comparisons x 10**12 means x 8 bytes)", 2.4e13)
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: n_resamples=10**12 (3 comparisons x 10**12 means x 8 bytes) needs 21.8 TiB of memory; ...
    """  # noqa: E501
    limit = memory_limit()
    if nbytes > limit:
        raise InvalidInputError(
            f"{request} needs {format_bytes(nbytes)} of memory; at most {format_bytes(limit)} "
            f"may be used (half this machine's memory, or {MEMORY_LIMIT_ENV}): ask for less"
        )


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise InvalidInputError(f"{name} must be one of {allowed}; got {value!r}")
    return value


def is_integer(value: object) -> TypeGuard[int | np.integer]:
    """Whether ``value`` is a Python or NumPy integer (bools are not)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def is_real(value: object) -> TypeGuard[int | float | np.integer | np.floating]:
    """Whether ``value`` is a Python or NumPy integer or float (bools are not)."""
    return is_integer(value) or isinstance(value, float | np.floating)


def _bounds_text(kind: str, minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} between {minimum} and {maximum}"
    if minimum is not None:
        return f"{kind} >= {minimum}"
    if maximum is not None:
        return f"{kind} <= {maximum}"
    return kind


def check_integer(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an int with ``minimum <= value <= maximum`` (each bound optional).

    Bools are refused; NumPy integers are accepted.

    >>> check_integer("k", 3, minimum=1)
    3
    >>> check_integer("k", 0, minimum=1)
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: k must be an integer >= 1; got 0
    """
    if (
        not is_integer(value)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        expected = _bounds_text("an integer", minimum, maximum)
        raise InvalidInputError(f"{name} must be {expected}; got {value!r}")
    return int(value)


def check_number(
    name: str, value: object, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    """``value`` as a finite float with ``minimum <= value <= maximum`` (each bound optional).

    >>> check_number("tau", 2)
    2.0
    >>> check_number("tau", float("nan"))
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: tau must be a finite number; got nan
    """
    if (
        not is_real(value)
        or not math.isfinite(value)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        expected = _bounds_text("a finite number", minimum, maximum)
        raise InvalidInputError(f"{name} must be {expected}; got {value!r}")
    return float(value)


def check_fraction(name: str, value: object) -> float:
    """``value`` as a float strictly between 0 and 1 (a level, an alpha, a power).

    >>> check_fraction("alpha", 0.05)
    0.05
    """
    if not is_real(value) or not math.isfinite(value) or not 0 < value < 1:
        raise InvalidInputError(f"{name} must be a number strictly between 0 and 1; got {value!r}")
    return float(value)


def check_zero_division(value: object) -> ZeroDivision:
    """Validate a ``zero_division`` policy (``"nan"``, ``"warn"``, 0 or 1)."""
    if isinstance(value, str):
        return "nan" if check_choice("zero_division", value, ("nan", "warn")) == "nan" else "warn"
    is_number = isinstance(value, (int, float, np.integer, np.floating))
    if is_number and not isinstance(value, bool) and value in (0, 1):
        return value
    raise InvalidInputError(f"zero_division must be 'nan', 'warn', 0 or 1; got {value!r}")


def fill_value(zero_division: ZeroDivision) -> float:
    """The number that replaces an undefined value under ``zero_division``."""
    if zero_division == "nan":
        return float("nan")
    if zero_division == "warn":
        return 0.0
    return float(zero_division)


def warn_undefined(
    what: str, count: int, zero_division: ZeroDivision, *, stacklevel: int = 3
) -> None:
    """Emit :class:`UndefinedMetricWarning` when ``zero_division="warn"`` and ``count > 0``.

    ``stacklevel`` as :func:`warnings.warn`: the default 3 reports the caller of the function
    that calls this one.
    """
    if zero_division == "warn" and count > 0:
        warnings.warn(
            f"{what} is undefined (zero denominator) for {count} element(s); set to 0.0. "
            "Pass zero_division='nan', 0 or 1 to choose a value and silence this warning.",
            UndefinedMetricWarning,
            stacklevel=stacklevel,
        )


def first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def as_labels(name: str, values: object) -> np.ndarray:
    """Convert binary labels (bool or 0/1 numbers) to a boolean array."""
    arr = np.asarray(values)
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind not in "iuf":
        raise InvalidInputError(
            f"{name} must hold binary labels (bool or 0/1 numbers); got dtype {arr.dtype}"
        )
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        where = first_index(bad)
        raise InvalidInputError(
            f"{name} must hold binary labels (bool or 0/1); found {arr[where].item()!r} "
            f"at index {where}"
        )
    return arr.astype(bool)


def as_scores(name: str, values: object) -> np.ndarray:
    """Convert scores or distances to a numeric array without NaN."""
    arr = np.asarray(values)
    if arr.dtype == bool:
        arr = arr.astype(np.int8)
    if arr.dtype.kind not in "iuf":
        raise InvalidInputError(f"{name} must be numeric; got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():
            raise InvalidInputError(
                f"{name} must not contain NaN; found NaN at index {first_index(nan)}"
            )
    return arr


def as_points(name: str, values: object) -> np.ndarray:
    """Image points as a finite float64 ``N x 2`` array of ``(x, y)``.

    Examples
    --------
    >>> as_points("points0", [[1, 2], [3, 4]]).dtype
    dtype('float64')
    >>> as_points("points0", [1, 2])
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: points0 has shape (2,); expected N x 2 (x, y)
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise InvalidInputError(f"{name} has shape {array.shape}; expected N x 2 (x, y)")
    if not np.isfinite(array).all():
        raise InvalidInputError(f"{name} contains non-finite values")
    return array


def as_numbers(name: str, values: object) -> np.ndarray:
    """Convert to a float64 array (NaN allowed), refusing non-numeric input."""
    arr = np.asarray(values)
    if arr.dtype != bool and arr.dtype.kind not in "iuf":
        raise InvalidInputError(f"{name} must be numeric; got dtype {arr.dtype}")
    return arr.astype(np.float64)


def check_samples(y_true: np.ndarray, y_score: np.ndarray) -> None:
    """Require equal shapes and at least one sample along the last (sample) axis."""
    if y_true.shape != y_score.shape:
        raise InvalidInputError(
            f"y_true has shape {y_true.shape} but y_score has shape {y_score.shape}; "
            "they must match (samples along the last axis or along dim=)"
        )
    if y_score.ndim == 0:
        raise InvalidInputError("y_score is a scalar; expected samples along the last axis")
    if y_score.shape[-1] == 0:
        raise InvalidInputError("empty input: y_true and y_score have no samples")


def as_counts(name: str, values: object) -> np.ndarray:
    """Convert non-negative counts (or sums of weights) to int64, or float64 when fractional.

    Small integer and boolean dtypes are widened first, so that sums of counts cannot wrap
    around (uint8 200 + 100) or turn into logical ORs (True + True).
    """
    arr = np.asarray(values)
    if arr.dtype == bool or arr.dtype.kind in "iu":
        arr = arr.astype(np.float64 if arr.dtype == np.uint64 else np.int64)
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
    else:
        raise InvalidInputError(f"{name} must hold numeric counts; got dtype {arr.dtype}")
    bad = ~(arr >= 0)
    if bad.any():
        where = first_index(bad) if arr.ndim else ()
        value = (arr[where] if arr.ndim else arr).item()
        raise InvalidInputError(
            f"{name} must hold non-negative counts; found {value!r} at index {where}"
        )
    return arr
