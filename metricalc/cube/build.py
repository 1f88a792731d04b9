"""Building QueryCubes from plain arrays: :func:`new_cube` and :func:`error_record`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.ranking import ap_from_rank_stats
from metricalc.cube import model
from metricalc.cube.checks import _check_attrs, validate
from metricalc.cube.model import (
    _FLOAT_ATTRS,
    DESCRIPTOR,
    QUERY,
    SEQUENCE,
    _as_dtype,
    _as_str,
    _storage_dtype,
    plain_attrs,
    sentinel_array,
    split_of,
)
from metricalc.errors import InvalidInputError
from metricalc.validation import Boolean, validate_params
from metricalc.version import __version__


def _complete_query_data(
    data: dict[str, np.ndarray], shape: tuple[int, int], tie_policy: str
) -> dict[str, np.ndarray]:
    """Derive n_relevant and ap where they are not given, fill the rest with sentinels."""
    if ("better" in data) != ("ties" in data):
        given, other = ("better", "ties") if "better" in data else ("ties", "better")
        raise InvalidInputError(f"data has {given!r} but not {other!r}; give both or neither")
    if "n_relevant" not in data:
        if "better" in data:
            data["n_relevant"] = (data["better"] >= 0).astype(np.int8)
        elif "ap" in data:
            data["n_relevant"] = np.isfinite(data["ap"]).astype(np.int8)
    if "ap" not in data and "better" in data:
        ranked = data["better"] >= 0
        ap = np.full(shape, np.nan)
        if ranked.any():
            ap[ranked] = ap_from_rank_stats(
                data["better"][ranked], data["ties"][ranked], tie_policy=tie_policy
            )
        data["ap"] = ap
    for name in model.QUERY_VARIABLES:
        if name not in data:
            data[name] = sentinel_array(name, shape)
    return {name: data[name] for name in model.QUERY_VARIABLES}


def _protocol(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(attrs, Mapping):
        raise InvalidInputError(f"attrs must be a mapping of protocol parameters; got {attrs!r}")
    out = plain_attrs(attrs)
    for name in _FLOAT_ATTRS:
        value = out.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = float(value)
    out["metricalc_version"] = __version__
    _check_attrs(out)
    return out


@validate_params(copy=Boolean())
def new_cube(
    descriptors: Sequence[str],
    query_coords: Mapping[str, Any],
    data: Mapping[str, Any],
    *,
    attrs: Mapping[str, Any],
    per_descriptor: Mapping[str, Any] | None = None,
    per_sequence: Mapping[str, Any] | None = None,
    sequences: Sequence[str] | None = None,
    copy: bool = True,
) -> xr.Dataset:
    """Build a validated QueryCube from plain arrays, filling what is not given.

    Parameters
    ----------
    descriptors : sequence of str
        Descriptor names (unique), the ``descriptor`` coordinate.
    query_coords : mapping
        Arrays over the queries: ``scene``, ``pair``, ``keypoint_set``, ``query_keypoint``
        (required) and ``split`` (default: from the scene prefix, :func:`split_of`), ``x``,
        ``y`` (default NaN). Queries keep the order given.
    data : mapping
        Arrays of shape (descriptor, query) for any of :data:`QUERY_VARIABLES`; converted to the
        schema dtype (integers must be integral and fit). Missing variables are filled:
        ``n_relevant`` = 1 where ``better >= 0`` (else 0) when ``better``/``ties`` are given,
        else 1 where ``ap`` is finite (else 0), else -1 (missing); ``ap`` from
        ``ap_from_rank_stats(better, ties)`` under ``attrs["tie_policy"]``; every other variable
        its sentinel (-1 or NaN). With several descriptors of a native run, pass ``n_relevant``
        (-1 where a descriptor lacks the query).
    attrs : mapping
        Every protocol parameter of :data:`PROTOCOL_ATTRS` (e.g. ``dict(DEFAULT_ATTRS)``);
        extra attrs are kept; ``metricalc_version`` is set to the running version.
    per_descriptor : mapping, optional
        Arrays over the descriptors: ``processing_time_ms`` (default NaN), ``status`` (default
        ``"ok"``) and ``error`` (default ``""``).
    per_sequence : mapping, optional
        Arrays of shape (descriptor, sequence) for any of :data:`SEQUENCE_VARIABLES` (others are
        filled with sentinels); needs ``sequences``.
    sequences : sequence of str, optional
        Scene names of the ``sequence`` dim (only then does the cube have that dim).
    copy : bool, default True
        Copy the arrays of ``data``. With False, an array that already has its variable's
        dtype becomes the cube's variable as it is (no second copy of a large cube; the cube
        then shares memory with the caller's array).

    Returns
    -------
    xarray.Dataset
        The QueryCube, checked by :func:`validate`.

    Examples
    --------
    Two queries of one image pair: the first has its relevant keypoint behind 2 better and 3
    tied candidates, the second has no ground truth (R = 0).

    >>> from metricalc import cube as qc
    >>> c = qc.new_cube(
    ...     ["sift"],
    ...     {"scene": ["i_a", "i_a"], "pair": ["1-2", "1-2"], "keypoint_set": ["sift", "sift"],
    ...      "query_keypoint": [0, 1]},
    ...     {"better": [[2, -1]], "ties": [[3, -1]]},
    ...     attrs=qc.DEFAULT_ATTRS,
    ... )
    >>> c.n_relevant.values.tolist(), c.ap.values.round(4).tolist()
    ([[1, 0]], [[0.2375, nan]])
    >>> c.split.values.tolist(), str(c.status.values[0])
    (['illumination', 'illumination'], 'ok')
    """
    attrs = _protocol(attrs)
    names = _names("descriptors", descriptors)
    if names.ndim != 1:
        raise InvalidInputError(f"descriptors must be a 1-D sequence of names; got {names.shape}")
    coords = _query_coords(query_coords)
    coords[DESCRIPTOR] = (DESCRIPTOR, names)
    shape = (len(names), len(coords["scene"][1]))
    variables = _query_variables(data, shape, attrs["tie_policy"], copy)
    variables.update(_descriptor_variables(per_descriptor or {}, len(names)))
    if per_sequence is not None and sequences is None:
        raise InvalidInputError("per_sequence needs sequences= (the scene names of its columns)")
    if sequences is not None:
        scene_names = _names("sequences", sequences)
        coords[SEQUENCE] = (SEQUENCE, scene_names)
        variables.update(_sequence_variables(per_sequence or {}, (len(names), len(scene_names))))
    return validate(xr.Dataset(variables, coords=coords, attrs=attrs))


def _names(what: str, names: Sequence[str]) -> np.ndarray:
    """A ``<U`` array of the names (descriptors or sequences)."""
    return _as_str(what, list(names) if not isinstance(names, np.ndarray) else names)


def _check_known(what: str, given: Mapping[str, Any], known: Mapping[str, Any]) -> None:
    unknown = [k for k in given if k not in known]
    if unknown:
        raise InvalidInputError(
            f"{what} has unknown variable {unknown[0]!r}; expected some of {list(known)}"
        )


def _query_coords(query_coords: Mapping[str, Any]) -> dict[str, Any]:
    """The coordinates over ``query``: the given ones converted, the others filled."""
    if not isinstance(query_coords, Mapping):
        raise InvalidInputError("query_coords must be a mapping of coordinate name -> array")
    unknown = [k for k in query_coords if k not in model.QUERY_COORDS]
    if unknown:
        raise InvalidInputError(
            f"query_coords has unknown coordinate {unknown[0]!r}; expected "
            f"{list(model.QUERY_COORDS)}"
        )
    for name in model.QUERY_IDENTITY:
        if name not in query_coords:
            raise InvalidInputError(
                f"query_coords lacks {name!r} (required: {model.QUERY_IDENTITY})"
            )
    n_query = len(np.asarray(query_coords["scene"]))
    coords: dict[str, Any] = {}
    for name, field in model.QUERY_COORDS.items():
        if name in query_coords:
            values = _as_dtype(
                f"query_coords[{name!r}]", query_coords[name], field.dtype, (n_query,)
            )
        elif name == "split":
            values = split_of(coords["scene"][1])
        else:
            values = sentinel_array(name, n_query)
        coords[name] = (QUERY, values)
    return coords


def _query_variables(
    data: Mapping[str, Any], shape: tuple[int, int], tie_policy: str, copy: bool
) -> dict[str, Any]:
    """The (descriptor, query) variables: the given ones converted, the others derived or
    filled (:func:`_complete_query_data`)."""
    if not isinstance(data, Mapping):
        raise InvalidInputError("data must be a mapping of variable name -> (descriptor, query)")
    _check_known("data", data, model.QUERY_VARIABLES)
    arrays = {
        name: _as_dtype(
            f"data[{name!r}]", data[name], model.QUERY_VARIABLES[name].dtype, shape, copy=copy
        )
        for name in data
    }
    arrays = _complete_query_data(arrays, shape, tie_policy)
    return {k: ((DESCRIPTOR, QUERY), v) for k, v in arrays.items()}


def _descriptor_variables(per_descriptor: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The (descriptor,) variables: the given ones converted, the others at their defaults."""
    per_descriptor = dict(per_descriptor)
    _check_known("per_descriptor", per_descriptor, model.DESCRIPTOR_VARIABLES)
    variables: dict[str, Any] = {}
    for name, field in model.DESCRIPTOR_VARIABLES.items():
        if name in per_descriptor:
            values = _as_dtype(f"per_descriptor[{name!r}]", per_descriptor[name], field.dtype, (n,))
        else:
            values = sentinel_array(name, n)
        variables[name] = (DESCRIPTOR, values)
    return variables


def _sequence_variables(per_sequence: Mapping[str, Any], shape: tuple[int, int]) -> dict[str, Any]:
    """The (descriptor, sequence) variables: the given ones converted, the others at their
    sentinels."""
    per_sequence = dict(per_sequence)
    _check_known("per_sequence", per_sequence, model.SEQUENCE_VARIABLES)
    variables: dict[str, Any] = {}
    for name, field in model.SEQUENCE_VARIABLES.items():
        if name in per_sequence:
            values = _as_dtype(f"per_sequence[{name!r}]", per_sequence[name], field.dtype, shape)
        else:
            values = sentinel_array(name, shape)
        variables[name] = ((DESCRIPTOR, SEQUENCE), values)
    return variables


def error_record(descriptor: str, message: str, *, attrs: Mapping[str, Any]) -> xr.Dataset:
    """A cube holding one failed descriptor: no queries, ``status="error"`` and its message.

    :func:`combine` merges it with the other descriptors' cubes; the failed descriptor then has
    ``n_relevant = -1`` (missing) for every query, and the metric set gives it NaN.

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> c = qc.error_record("orb", "ValueError: no keypoints", attrs=qc.DEFAULT_ATTRS)
    >>> dict(c.sizes), str(c.status.values[0]), str(c.error.values[0])
    ({'descriptor': 1, 'query': 0}, 'error', 'ValueError: no keypoints')
    """
    if not isinstance(message, str) or not message:
        raise InvalidInputError(f"error_record needs a non-empty message string; got {message!r}")
    empty = {
        name: np.empty(0, dtype=_storage_dtype(model.QUERY_COORDS[name].dtype))
        for name in model.QUERY_IDENTITY
    }
    return new_cube(
        [descriptor],
        empty,
        {},
        attrs=attrs,
        per_descriptor={"status": [model.STATUSES[1]], "error": [message]},
    )
