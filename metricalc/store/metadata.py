"""DescriptorWorkbench metadata strings: ``key=value;`` pairs sorted by key (docs/store.md).

DescriptorWorkbench keeps every metric of a result in the ``metadata`` text column of its results
table. :func:`format_metadata` writes that format, :func:`parse_metadata` reads it back
(``parse_metadata(format_metadata(x)) == x``), and :func:`metadata_for` builds one descriptor's
string from a metric set and its per-scene metrics: exactly the keys DescriptorWorkbench writes,
under its names, and every other value under the :data:`METRICALC_PREFIX` namespace. The results
database (:mod:`metricalc.store`) fills its ``metadata`` column with them, and the workbench
import reads the per-scene keys (:data:`SCENE_KEYS`) back into a descriptor x scene cube.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError

__all__ = [
    "METRICALC_PREFIX",
    "SCENE_KEYS",
    "WORKBENCH_K",
    "format_metadata",
    "metadata_for",
    "parse_metadata",
]

SCENE_KEYS = ("true_map", "true_map_with_zeros", "query_count", "excluded_count")
"""Per-scene keys of the metadata string, ``<scene>_<key>`` (as in the real export)."""

METRICALC_PREFIX = "metricalc_"
"""Prefix of the metadata keys DescriptorWorkbench does not write (``metricalc_true_map_micro``,
``metricalc_<scene>_excluded_count``, ...); readers of DescriptorWorkbench keys skip them."""

WORKBENCH_K = (1, 5, 10)
"""The ``k`` of the ``precision_at_<k>`` / ``recall_at_<k>`` keys DescriptorWorkbench writes
(its ``precision_at_<k>`` is the hit rate, the metric set's ``hit_rate_at_<k>``)."""

_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|nan|inf)")


def _parse_value(text: str) -> object:
    """A metadata value: true/false -> bool, integer -> int, decimal/nan/inf -> float, else str."""
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _format_value(key: str, value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6f}"
    if isinstance(value, str):
        if ";" in value or "=" in value:
            raise InvalidInputError(
                f"format_metadata: the value of {key!r} ({value!r}) contains ';' or '=', which "
                "the key=value; format cannot hold"
            )
        if not isinstance(_parse_value(value), str):
            raise InvalidInputError(
                f"format_metadata: the string value of {key!r} ({value!r}) would read back as "
                f"{type(_parse_value(value)).__name__}; strings must not look like a number, "
                "nan, inf, true or false"
            )
        return value
    raise InvalidInputError(
        f"format_metadata: the value of {key!r} has type {type(value).__name__}; expected "
        "bool, int, float or str"
    )


def format_metadata(values: Mapping[str, object]) -> str:
    """The DescriptorWorkbench metadata string: ``key=value;`` pairs sorted by key.

    Floats are written with 6 decimals (``f"{v:.6f}"``, so NaN is ``nan``), ints as ints, bools
    as ``true`` / ``false``, strings as they are; every pair ends with ``;`` (the real export
    ends with one too). :func:`parse_metadata` reads it back: ``parse_metadata(format_metadata(x))
    == x`` for ints, bools, strings and floats already rounded to 6 decimals.

    Raises
    ------
    InvalidInputError
        A key that is not a non-empty string or holds ``;`` / ``=``; a string value holding ``;``
        or ``=``, or one that would read back as another type (``"12"``, ``"0.5"``, ``"true"``,
        ``"nan"``); a value of another type.

    Examples
    --------
    >>> from metricalc.store.metadata import format_metadata
    >>> format_metadata({"r0_rate": 0.094528, "success": True, "total_queries_processed": 101938,
    ...                  "i_dome_true_map": 0.177321})
    'i_dome_true_map=0.177321;r0_rate=0.094528;success=true;total_queries_processed=101938;'
    """
    if not isinstance(values, Mapping):
        raise InvalidInputError(
            f"format_metadata: values must be a mapping of str to values; got "
            f"{type(values).__name__}"
        )
    parts = []
    for key in values:
        if not isinstance(key, str) or not key or ";" in key or "=" in key:
            raise InvalidInputError(
                f"format_metadata: key {key!r} must be a non-empty string without ';' or '='"
            )
    for key in sorted(values):
        parts.append(f"{key}={_format_value(key, values[key])};")
    return "".join(parts)


def parse_metadata(text: str) -> dict[str, object]:
    """Read a ``key=value;`` metadata string (the inverse of :func:`format_metadata`).

    Values: ``true`` / ``false`` -> bool; an integer (``-?[0-9]+`` without leading zeros) -> int;
    a decimal number, ``nan`` or ``inf`` (optionally negative) -> float; anything else -> str.
    The final ``;`` is optional.

    Raises
    ------
    InvalidInputError
        A pair without ``=`` (or with a second ``=``), an empty key, an empty pair (``;;``) or a
        key given twice; the message names the pair and its position.

    Examples
    --------
    >>> from metricalc.store.metadata import parse_metadata
    >>> parse_metadata("experiment_name=sift_baseline;precision_at_1=0.171487;success=true;"
    ...                "total_images=60;")
    {'experiment_name': 'sift_baseline', 'precision_at_1': 0.171487, 'success': True, 'total_images': 60}
    """  # noqa: E501
    if not isinstance(text, str):
        raise InvalidInputError(f"parse_metadata: text must be a str; got {type(text).__name__}")
    body = text[:-1] if text.endswith(";") else text
    if not body:
        return {}
    result: dict[str, object] = {}
    for position, pair in enumerate(body.split(";"), start=1):
        key, eq, value = pair.partition("=")
        if not eq or not key or "=" in value:
            raise InvalidInputError(
                f"parse_metadata: pair {position} ({pair!r}) is not of the form key=value "
                "(one '=', a non-empty key)"
            )
        if key in result:
            raise InvalidInputError(
                f"parse_metadata: key {key!r} occurs twice (again in pair {position})"
            )
        result[key] = _parse_value(value)
    return result


def _scalar(values: xr.Dataset, name: str, kind: type) -> Any:
    return kind(values[name].values[()])


def metadata_for(
    metrics: xr.Dataset, scenes: xr.Dataset | None, descriptor: str
) -> dict[str, object]:
    """The metadata of one descriptor, ready for :func:`format_metadata`.

    DescriptorWorkbench's keys, under its names and only where it writes them:
    ``precision_at_<k>`` (the metric set's hit rate ``hit_rate_at_<k>``), ``recall_at_<k>``
    (``k`` in :data:`WORKBENCH_K` and in the metric set),
    ``r0_rate`` (floats); ``total_queries_processed``, ``total_queries_excluded`` (ints); and for
    every scene with at least one R = 1 query (``query_count > 0``; DescriptorWorkbench skips the
    others) ``<scene>_true_map``, ``<scene>_true_map_with_zeros`` (floats),
    ``<scene>_query_count``, ``<scene>_excluded_count`` (ints).

    metricalc's own values, under :data:`METRICALC_PREFIX`: ``metricalc_true_map_micro``,
    ``metricalc_true_map_macro_by_scene``, ``metricalc_processing_time_ms`` (columns of
    DescriptorWorkbench's results table, not metadata keys there), ``metricalc_hit_rate_at_<k>``
    and ``metricalc_recall_at_<k>`` for the other ``k``, and ``metricalc_<scene>_excluded_count``
    for a scene whose queries all have R = 0.

    Parameters
    ----------
    metrics : xarray.Dataset
        From :func:`metricalc.metric_set`.
    scenes : xarray.Dataset or None
        From :func:`metricalc.scene_metrics` of the same cube; None gives no per-scene keys.
    descriptor : str

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.metrics import metric_set, scene_metrics
    >>> from metricalc.store.metadata import metadata_for
    >>> cube = example_cube()
    >>> meta = metadata_for(metric_set(cube), scene_metrics(cube), "sift")
    >>> meta["i_x_query_count"], meta["i_x_true_map"], meta["metricalc_true_map_micro"]
    (2, 0.75, 0.75)
    """
    _check_given(metrics, scenes, descriptor)
    m = metrics.sel(descriptor=descriptor)
    float_keys = _float_keys(m)
    int_keys = ["total_queries_processed", "total_queries_excluded"]
    missing = [n for n in (*float_keys, *int_keys) if n not in m.data_vars]
    if scenes is not None:
        missing += [n for n in SCENE_KEYS if n not in scenes.data_vars]
    if missing:
        raise InvalidInputError(
            f"metadata_for: {missing} missing; pass the outputs of metric_set and scene_metrics"
        )
    # floats rounded to the 6 decimals of the string, so parse(format(x)) == x holds
    out: dict[str, object] = {
        _key(n): round(_scalar(m, n, float), 6) for n in float_keys
    }
    out.update({n: _scalar(m, n, int) for n in int_keys})
    if scenes is not None:
        out.update(_scene_keys(scenes, descriptor))
    return out


def _check_given(metrics: xr.Dataset, scenes: xr.Dataset | None, descriptor: str) -> None:
    """Both Datasets must be over ``descriptor`` and hold ``descriptor``."""
    given = [("metrics", metrics)] + ([("scenes", scenes)] if scenes is not None else [])
    for name, data in given:
        if not isinstance(data, xr.Dataset) or "descriptor" not in data.dims:
            raise InvalidInputError(
                f"metadata_for: {name} must be a Dataset over 'descriptor' (from "
                f"{'metric_set' if name == 'metrics' else 'scene_metrics'})"
            )
        if descriptor not in data["descriptor"].values.tolist():
            raise InvalidInputError(
                f"metadata_for: descriptor {descriptor!r} is not in {name}; it has "
                f"{data['descriptor'].values.tolist()}"
            )


def _float_keys(m: xr.Dataset) -> list[str]:
    """The float variables of one descriptor's metric set written as metadata: every ``k`` of
    ``hit_rate_at_<k>``."""
    ks = sorted(
        int(str(n).rsplit("_", 1)[1])
        for n in m.data_vars
        if re.fullmatch(r"hit_rate_at_[0-9]+", str(n))
    )
    return [
        "true_map_micro",
        "true_map_macro_by_scene",
        *(f"hit_rate_at_{k}" for k in ks),
        *(f"recall_at_{k}" for k in ks),
        "r0_rate",
        "processing_time_ms",
    ]


def _key(name: str) -> str:
    """DescriptorWorkbench's key of the metric-set variable ``name`` where it writes one (the hit
    rate ``hit_rate_at_<k>`` as ``precision_at_<k>``), else ``metricalc_<name>``."""
    workbench = {
        "r0_rate": "r0_rate",
        **{f"hit_rate_at_{k}": f"precision_at_{k}" for k in WORKBENCH_K},
        **{f"recall_at_{k}": f"recall_at_{k}" for k in WORKBENCH_K},
    }
    return workbench.get(name, METRICALC_PREFIX + name)


def _scene_keys(scenes: xr.Dataset, descriptor: str) -> dict[str, object]:
    """The per-scene keys of one descriptor: DescriptorWorkbench's four for the scenes with an
    R = 1 query, ``metricalc_<scene>_excluded_count`` for those whose queries all have R = 0."""
    out: dict[str, object] = {}
    s = scenes.sel(descriptor=descriptor)[list(SCENE_KEYS)].compute()
    for scene in s["scene"].values.tolist():
        one = s.sel(scene=scene)
        if int(one["query_count"]) == 0:
            if int(one["excluded_count"]) > 0:
                out[f"{METRICALC_PREFIX}{scene}_excluded_count"] = int(one["excluded_count"])
            continue
        out[f"{scene}_true_map"] = round(float(one["true_map"]), 6)
        out[f"{scene}_true_map_with_zeros"] = round(float(one["true_map_with_zeros"]), 6)
        out[f"{scene}_query_count"] = int(one["query_count"])
        out[f"{scene}_excluded_count"] = int(one["excluded_count"])
    return out
