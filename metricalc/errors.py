"""Exceptions and warnings raised by metricalc.

Every validation failure raises :class:`InvalidInputError`, a :class:`ValueError`, with a message
that names the offending argument (or file and line) and says what was expected.
"""

from __future__ import annotations

__all__ = ["InvalidInputError", "MetricalcError", "MissingExtraError", "UndefinedMetricWarning"]


class MetricalcError(Exception):
    """Base class of every error metricalc raises on purpose."""


class InvalidInputError(ValueError, MetricalcError):
    """An argument, file or value does not meet what the function expects.

    The message names the argument (or file and line), the offending value and what was expected.
    """


class MissingExtraError(ImportError, MetricalcError):
    """A feature needs an optional dependency that is not installed.

    The message names the library and the extra that installs it (``pip install
    "metricalc[vision]"``); :mod:`metricalc.lazy` raises it (docs/installation.md lists the
    extras).
    """


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined for some inputs (a zero denominator) and was filled by policy.

    Emitted only under ``zero_division="warn"``.
    """
