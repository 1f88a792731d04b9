"""JSON text of the database's JSON columns (config, versions, timings, protocol, extra).

One canonical form: keys sorted (except in ``extra``, which keeps the metric set's order), no
whitespace, NaN and infinities as ``null`` (JSON has no non-finite numbers), NumPy scalars and
arrays as Python numbers and lists, tuples as lists, paths as strings. The canonical text of a
config is what its hash is taken of, so two configs that differ only in key order or container
type have the same hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe


def plain(value: Any, where: str) -> Any:
    """``value`` as plain JSON types (dict with str keys, list, str, int, float, bool, None).

    Raises
    ------
    InvalidInputError
        A mapping key that is not a string, or a value of a type JSON cannot hold (the message
        names ``where``, the path of the value, e.g. ``config['model']['name']``).
    """
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(
                    f"{where}: key {key!r} is a {type(key).__name__}; keys must be strings"
                )
            out[key] = plain(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, (list, tuple, np.ndarray)):
        items = value.tolist() if isinstance(value, np.ndarray) else value
        return [plain(item, f"{where}[{i}]") for i, item in enumerate(items)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, (str, bool, int, float, np.generic)):
        return json_safe(value)
    raise InvalidInputError(
        f"{where} has type {type(value).__name__}; expected str, int, float, bool, None, a "
        "mapping or a sequence of them"
    )


def dumps(value: Any, where: str, *, sort_keys: bool = True) -> str:
    """The canonical JSON text of ``value`` (see the module docstring); ``sort_keys=False``
    keeps the mapping's order (the extra metrics keep the metric set's order)."""
    return json.dumps(
        plain(value, where), sort_keys=sort_keys, separators=(",", ":"), allow_nan=False
    )


def loads(text: str | bytes | None, where: str) -> Any:
    """The value of a JSON column (``{}`` for NULL or an empty string).

    A value that is not JSON text (a damaged database, a BLOB in a text column) raises
    :class:`~metricalc.errors.InvalidInputError` naming ``where`` (the database, table, row and
    column).

    Examples
    --------
    >>> loads('{"a":1}', "x"), loads(None, "x")
    ({'a': 1}, {})
    >>> loads("{bad", "db.sqlite: experiments row dw-1, column config")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: db.sqlite: experiments row dw-1, column config: not valid JSON (...
    """  # noqa: E501
    if not text:
        return {}
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError as error:
        raise InvalidInputError(f"{where}: not UTF-8 text ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            f"{where}: not valid JSON ({error.msg} at character {error.pos}); the database "
            "was changed outside metricalc or is damaged"
        ) from None


def sha256(text: str) -> str:
    """Hex SHA-256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
