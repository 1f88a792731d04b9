"""Input checks shared by every package: declared options (:func:`validate_params`), labels,
scores, counts, and the memory a request needs (:func:`check_memory`).

The one place where an option or an input is checked. A public function declares what each
scalar option accepts (:class:`Choice`, :class:`Integer`, :class:`Real`, ...) with
:func:`validate_params`; arrays, files and cubes are checked by the ``as_*`` / ``check_*``
functions. Each check raises :class:`~metricalc.errors.InvalidInputError` naming the argument,
the offending value (and its index) and what was expected, before any NumPy routine can fail
deep inside.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Literal, ParamSpec, TypeGuard, TypeVar

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


class Constraint(ABC):
    """What one parameter accepts, declared with :func:`validate_params`.

    :meth:`accepts` tells whether a value is allowed, :attr:`expected` says what is in words (the
    error reads ``"<name> must be <expected>; got <value>"``) and :meth:`invalid_values` gives
    values it refuses, so that one test can feed them to every public function.
    """

    expected: str

    @abstractmethod
    def accepts(self, value: object) -> bool:
        """Whether ``value`` is allowed."""

    @abstractmethod
    def candidates(self) -> tuple[object, ...]:
        """Values close to the allowed ones (wrong type, just out of range); some may be allowed."""

    def invalid_values(self) -> tuple[object, ...]:
        """The :meth:`candidates` this constraint refuses."""
        return tuple(value for value in self.candidates() if not self.accepts(value))

    def check(self, name: str, value: object) -> None:
        """Raise :class:`~metricalc.errors.InvalidInputError` unless ``value`` is accepted."""
        if not self.accepts(value):
            shown = " ".join(repr(value).split())  # one line, also for an array
            shown = shown if len(shown) <= 80 else f"{shown[:76]} ..."
            raise InvalidInputError(f"{name} must be {self.expected}; got {shown}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.expected})"


class Choice(Constraint):
    """One of a few values (strings, or numbers where a policy mixes both).

    >>> Choice(("holm", "bonferroni")).check("correction", "hochberg")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: correction must be one of 'holm', 'bonferroni'; got 'hochberg'
    """  # noqa: E501

    def __init__(self, choices: Iterable[object]) -> None:
        self.choices = tuple(choices)
        self.expected = "one of " + ", ".join(repr(c) for c in self.choices)
        self._texts = frozenset(c for c in self.choices if isinstance(c, str))
        self._numbers = tuple(c for c in self.choices if not isinstance(c, str))

    def accepts(self, value: object) -> bool:
        """A string equals a string choice only; a number (not a bool) a number choice only."""
        if isinstance(value, str):
            return value in self._texts
        return is_real(value) and any(value == choice for choice in self._numbers)

    def candidates(self) -> tuple[object, ...]:
        return ("-".join(str(c) for c in self.choices) + "?", -1, 0.5)


def _bounds_text(kind: str, low: float | None, high: float | None, closed: str = "both") -> str:
    if low is not None and high is not None and closed == "both":
        return f"{kind} between {low} and {high}"
    if low is not None and high is not None and closed == "neither":
        return f"{kind} strictly between {low} and {high}"
    parts = []
    if low is not None:
        parts.append(f">= {low}" if closed in ("both", "left") else f"> {low}")
    if high is not None:
        parts.append(f"<= {high}" if closed in ("both", "right") else f"< {high}")
    return " ".join([kind, " and ".join(parts)]) if parts else kind


class Integer(Constraint):
    """A Python or NumPy integer (not a bool) with ``low <= value <= high``, each bound optional.

    >>> Integer(1, None).check("k", 0)
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: k must be an integer >= 1; got 0
    """

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high
        self.expected = _bounds_text("an integer", low, high)

    def accepts(self, value: object) -> bool:
        return bool(
            is_integer(value)
            and (self.low is None or value >= self.low)
            and (self.high is None or value <= self.high)
        )

    def candidates(self) -> tuple[object, ...]:
        below = () if self.low is None else (self.low - 1,)
        above = () if self.high is None else (self.high + 1,)
        return (*below, *above, 1.5, True, "1")


class Real(Constraint):
    """A finite Python or NumPy number (not a bool) within ``low`` and ``high``.

    ``closed`` says which bounds are allowed: ``"both"``, ``"left"``, ``"right"`` or
    ``"neither"``.

    >>> Real(0, None, closed="neither").check("tau", 0)
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: tau must be a finite number > 0; got 0
    """

    def __init__(
        self, low: float | None = None, high: float | None = None, *, closed: str = "both"
    ) -> None:
        self.low, self.high, self.closed = low, high, closed
        self.expected = _bounds_text("a finite number", low, high, closed)

    def accepts(self, value: object) -> bool:
        if not is_real(value) or not math.isfinite(value):
            return False
        low_in = self.closed in ("both", "left")
        high_in = self.closed in ("both", "right")
        return bool(
            self.low is None or value > self.low or (low_in and value == self.low)
        ) and bool(self.high is None or value < self.high or (high_in and value == self.high))

    def candidates(self) -> tuple[object, ...]:
        edges = [e for e in (self.low, self.high) if e is not None]
        return (*edges, *(e - 1 for e in edges[:1]), *(e + 1 for e in edges[1:]),
                float("nan"), float("inf"), True, "1")


class Fraction(Real):
    """A number strictly between 0 and 1 (a level, an alpha, a power).

    >>> Fraction().check("alpha", 5)
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: alpha must be a number strictly between 0 and 1; got 5
    """

    def __init__(self) -> None:
        super().__init__(0, 1, closed="neither")
        self.expected = "a number strictly between 0 and 1"


class Boolean(Constraint):
    """``True`` or ``False`` (a NumPy bool too); not a number or a string such as ``"no"``."""

    expected = "True or False"

    def accepts(self, value: object) -> bool:
        return isinstance(value, bool | np.bool_)

    def candidates(self) -> tuple[object, ...]:
        return ("no", 2)


class Text(Constraint):
    """A string (a name, a label), non-empty unless ``empty``."""

    def __init__(self, *, empty: bool = False) -> None:
        self.empty = empty
        self.expected = "a string" if empty else "a non-empty string"

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and (self.empty or value != "")

    def candidates(self) -> tuple[object, ...]:
        return ("", 1)


class Function(Constraint):
    """A callable."""

    expected = "a callable"

    def accepts(self, value: object) -> bool:
        return callable(value)

    def candidates(self) -> tuple[object, ...]:
        return ("mean", 1)


class ListOf(Constraint):
    """A non-empty list, tuple, range or 1-D array whose items ``each`` accepts (an iterator
    is refused: checking it would consume it).

    >>> ListOf(Real(0, None)).check("thresholds", [1, -2])
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: thresholds must be a non-empty list, each a finite number >= 0; got [1, -2]
    """  # noqa: E501

    def __init__(self, each: Constraint) -> None:
        self.each = each
        self.expected = f"a non-empty list, each {each.expected}"

    def accepts(self, value: object) -> bool:
        if isinstance(value, np.ndarray):
            return value.ndim == 1 and value.size > 0 and all(map(self.each.accepts, value))
        if isinstance(value, str) or not isinstance(value, Sequence):
            return False
        return len(value) > 0 and all(map(self.each.accepts, value))

    def candidates(self) -> tuple[object, ...]:
        return ([], "1", iter([1]), *([bad] for bad in self.each.invalid_values()))


class Nullable(Constraint):
    """``None`` or what ``constraint`` accepts."""

    def __init__(self, constraint: Constraint) -> None:
        self.constraint = constraint
        self.expected = f"None or {constraint.expected}"

    def accepts(self, value: object) -> bool:
        return value is None or self.constraint.accepts(value)

    def candidates(self) -> tuple[object, ...]:
        return self.constraint.candidates()


class OneOf(Constraint):
    """What any of ``constraints`` accepts (e.g. one cutoff or a list of cutoffs)."""

    def __init__(self, *constraints: Constraint) -> None:
        self.constraints = constraints
        self.expected = " or ".join(c.expected for c in constraints)

    def accepts(self, value: object) -> bool:
        return any(c.accepts(value) for c in self.constraints)

    def candidates(self) -> tuple[object, ...]:
        return tuple(value for c in self.constraints for value in c.candidates())


ZERO_DIVISION = Choice(("nan", "warn", 0, 1))
"""The ``zero_division`` policies: see :data:`ZeroDivision`."""

_P = ParamSpec("_P")
_R = TypeVar("_R")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def validate_params(
    **constraints: Constraint,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Check the named arguments of a function against their constraints at each call.

    At decoration time every name must be a parameter of the function and every default must
    satisfy its constraint (a :class:`TypeError` at import otherwise: a typo or a rename cannot
    go unnoticed). At call time each given argument is checked before the function runs; an
    argument left at its default is not checked again. The declarations are kept on the
    function (:func:`param_constraints`); the signature, docstring and type hints are those of
    the function.

    Examples
    --------
    >>> @validate_params(k=Integer(1, None), tie_policy=Choice(TIE_POLICIES))
    ... def hits(ranks, k=1, *, tie_policy="expected"):
    ...     return sum(r < k for r in ranks)
    >>> hits([0, 3], 2)
    1
    >>> hits([0, 3], tie_policy="random")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: tie_policy must be one of 'optimistic', ...; got 'random'
    >>> validate_params(top_k=Integer(1, None))(hits)
    Traceback (most recent call last):
    ...
    TypeError: validate_params on hits: top_k is not a parameter of hits
    """
    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        where = f"validate_params on {function.__qualname__}"
        parameters = inspect.signature(function).parameters
        for name, constraint in constraints.items():
            parameter = parameters.get(name)
            if parameter is None or parameter.kind in (parameter.VAR_POSITIONAL,
                                                       parameter.VAR_KEYWORD):
                raise TypeError(f"{where}: {name} is not a parameter of {function.__name__}")
            default = parameter.default
            if default is not parameter.empty and not constraint.accepts(default):
                raise TypeError(f"{where}: the default {name}={default!r} is not "
                                f"{constraint.expected}")
        positional = [
            (index, name, constraints[name])
            for index, (name, parameter) in enumerate(parameters.items())
            if name in constraints and parameter.kind in _POSITIONAL
        ]
        keyword = {
            name: constraint for name, constraint in constraints.items()
            if parameters[name].kind != parameters[name].POSITIONAL_ONLY
        }

        @functools.wraps(function)
        def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            for index, name, constraint in positional:
                if index < len(args):
                    constraint.check(name, args[index])
            for name, value in kwargs.items():
                if name in keyword:
                    keyword[name].check(name, value)
            return function(*args, **kwargs)

        checked.__param_constraints__ = MappingProxyType(dict(constraints))  # type: ignore[attr-defined]
        return checked

    return decorate


def param_constraints(function: object) -> Mapping[str, Constraint]:
    """The constraints :func:`validate_params` declared on ``function`` (empty if none)."""
    found: Mapping[str, Constraint] = getattr(function, "__param_constraints__", {})
    return found


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming ``name``."""
    Choice(choices).check(name, value)
    return str(value)


def is_integer(value: object) -> TypeGuard[int | np.integer]:
    """Whether ``value`` is a Python or NumPy integer (bools are not)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def is_real(value: object) -> TypeGuard[int | float | np.integer | np.floating]:
    """Whether ``value`` is a Python or NumPy integer or float (bools are not)."""
    return is_integer(value) or isinstance(value, float | np.floating)


def check_integer(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an int with ``minimum <= value <= maximum`` (each bound optional).

    Bools are refused; NumPy integers are accepted.

    >>> check_integer("k", 3, minimum=1)
    3
    """
    Integer(minimum, maximum).check(name, value)
    return int(value)  # type: ignore[call-overload,no-any-return]


def check_number(
    name: str, value: object, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    """``value`` as a finite float with ``minimum <= value <= maximum`` (each bound optional).

    >>> check_number("tau", 2)
    2.0
    """
    Real(minimum, maximum).check(name, value)
    return float(value)  # type: ignore[arg-type]


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
