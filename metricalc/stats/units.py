"""The paired units of a comparison: one value of a cube's metric per system and unit.

A *system* is a descriptor of a QueryCube (or ``"<descriptor> (<label>)"`` when several cubes
are given as a mapping ``{label: cube}``, e.g. locked and native keypoints). A *unit* is what two
systems are paired on (docs/stats.md): a query (identified by ``scene, pair,
keypoint_set, query_keypoint``), an image pair (``scene, pair``) or a scene. The metric is
first averaged per unit (NaN skipped) with an xarray ``groupby``; a unit without a value for a
system holds NaN there.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc import cube as qc
from metricalc.core.kernels import hit_probability
from metricalc.cube.io import query_codes
from metricalc.errors import InvalidInputError
from metricalc.metrics.reductions import PAIR_UNIT, group_sum, partition, prepare_cube, ratio
from metricalc.validation import Choice, Nullable, Text, validate_params

__all__ = [
    "PAIR_BY",
    "SPLITS",
    "SYSTEM_ATTRS",
    "cube_parts",
    "merged_protocol",
    "metric_values",
    "split_values",
    "system_label",
    "unit_values",
]

PAIR_BY = ("query", "pair", "scene")
"""The units a comparison pairs on."""

SPLITS = ("viewpoint", "illumination")
"""The query splits a comparison can be restricted to (``split=None``: all queries)."""

SYSTEM_ATTRS = ("keypoints", "distance")
"""Protocol attrs that describe the systems rather than the comparison: the cubes of a mapping
may differ in them (the result then says ``"mixed"``); every other protocol attr must agree."""

UNIT = "unit"
_AT_K = re.compile(r"^(hit|precision)@([1-9][0-9]*)$")
_UNIT_LEVELS = {
    "query": qc.QUERY_IDENTITY,
    "pair": ("scene", "pair"),
    "scene": ("scene",),
}


def _available(cube: xr.Dataset) -> list[str]:
    """Names of the numeric (descriptor, query) variables of ``cube``, then ``hit@K`` and
    ``precision@K``."""
    names = sorted(
        str(name)
        for name, variable in cube.data_vars.items()
        if variable.dims == (qc.DESCRIPTOR, qc.QUERY) and variable.dtype.kind in "biuf"
    )
    return [*names, "hit@K", "precision@K"]


def metric_values(cube: xr.Dataset, metric: str) -> xr.DataArray:
    r"""The values of ``metric`` over (descriptor, query) as float64, NaN where there is none.

    ``metric`` is a numeric (descriptor, query) variable of the cube (its -1 sentinels and NaN
    mean "no value"), or ``"hit@K"``: the probability that the query's relevant item ranks
    within the top K under the cube's tie policy, from its rank statistics ``better`` (b) and
    ``ties`` (t):

    .. math::

        \mathrm{hit@K} =
        \begin{cases}
        \mathrm{clip}(K - b,\ 0,\ t + 1) / (t + 1) & \text{policy } \texttt{expected},\\
        [\,\mathrm{rank}(b, t) \le K\,] & \text{otherwise}
        \end{cases}

    (:func:`metricalc.hit_rate_at_k` of the query alone; the rank is
    :func:`metricalc.rank_from_rank_stats`). It is 0 or 1 except under ``expected`` for a
    query whose tied items straddle rank K (b < K < b + t + 1), which counts the share of the
    random orders of the tied items that put the relevant one in the top K. The mean of
    ``hit@K`` over a descriptor's R = 1 queries is therefore the metric set's
    ``hit_rate_at_K`` (:func:`metricalc.metric_set`). ``"precision@K"`` is
    :math:`\mathrm{hit@K} / K`, the query's precision at K (hits / K), whose mean is the metric
    set's ``precision_at_K``. NaN where the query has no relevant item (R != 1) or no rank
    statistics.

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> from metricalc.stats.units import metric_values
    >>> c = qc.new_cube(["sift"], {"scene": ["i_a"] * 3, "pair": ["1-2"] * 3,
    ...                            "keypoint_set": ["sift"] * 3, "query_keypoint": [0, 1, 2]},
    ...                 {"better": [[0, 3, -1]], "ties": [[1, 0, -1]]}, attrs=qc.DEFAULT_ATTRS)
    >>> metric_values(c, "hit@1").values.tolist(), metric_values(c, "hit@4").values.tolist()
    ([[0.5, 0.0, nan]], [[1.0, 1.0, nan]])
    >>> metric_values(c.assign_attrs(tie_policy="optimistic"), "hit@1").values.tolist()
    [[1.0, 0.0, nan]]
    >>> metric_values(c, "precision@4").values.tolist()
    [[0.25, 0.25, nan]]
    >>> metric_values(c, "ap").values.round(3).tolist()
    [[0.75, 0.25, nan]]
    """
    available = _available(cube)
    hit = _AT_K.match(metric) if isinstance(metric, str) else None
    if hit is None and metric not in available[:-2]:
        raise InvalidInputError(
            f"metric {metric!r} is not in the cube; available: {', '.join(available)} "
            "(hit@K or precision@K with K a positive integer, e.g. hit@1)"
        )
    template = cube["ap"] if "ap" in cube.data_vars else cube[available[0]]
    if hit is not None:
        better = np.asarray(cube["better"].values)
        ties = np.asarray(cube["ties"].values)
        ranked = (better >= 0) & (np.asarray(cube["n_relevant"].values) == 1)
        if not ranked.any():
            raise InvalidInputError(
                f"metric {metric!r} needs the rank statistics better/ties, and this cube has "
                "none (the cubes of the HPatches patch tasks hold AP only); use metric='ap'"
            )
        tie_policy = str(qc.plain_value(cube.attrs["tie_policy"]))
        k = np.array([int(hit.group(2))])
        values = hit_probability(
            np.where(ranked, better, -1), np.where(ranked, ties, -1), k, tie_policy
        )[..., 0]
        if hit.group(1) == "precision":
            values = values / k[0]
    else:  # xarray operations: a lazy cube's values stay lazy (reduced per unit later)
        raw = cube[metric].astype(np.float64)
        return raw.where(raw != -1).rename(metric)
    return template.copy(deep=False, data=values).rename(metric)


def _unit_index(coords: Mapping[str, np.ndarray], pair_by: str) -> pd.MultiIndex:
    levels = _UNIT_LEVELS[pair_by]
    return pd.MultiIndex.from_arrays([coords[name] for name in levels], names=levels)


def system_label(descriptor: str, label: str | None) -> str:
    """The system name of a descriptor of a labelled cube: ``"<descriptor> (<label>)"``."""
    return descriptor if label is None else f"{descriptor} ({label})"


def split_values(
    cube: xr.Dataset, metric: str, split: str | None, label: str | None
) -> tuple[xr.DataArray, list[str]]:
    """(descriptor, query) values of ``metric`` of the descriptors that did not fail, restricted
    to ``split``, and the names of the failed ones; the cube validated first."""
    where = "the cube" if label is None else f"cube {label!r}"
    try:
        qc.validate(cube)
    except InvalidInputError as error:
        raise InvalidInputError(f"{where} is not a valid QueryCube: {error}") from None
    status = np.asarray(cube["status"].values).astype(str)
    names = np.asarray(cube[qc.DESCRIPTOR].values).astype(str)
    excluded = names[status == "error"].tolist()
    values = metric_values(cube, metric).isel(descriptor=status != "error")
    if split is not None:
        codes, labels = query_codes(cube["split"])  # a lazy cube's split never read as text
        values = values.isel(query=np.flatnonzero(labels[np.asarray(codes)] == split))
        if values.sizes[qc.QUERY] == 0:
            raise InvalidInputError(f"{where} has no queries of the split {split!r}")
    if values.sizes[qc.QUERY] == 0:
        raise InvalidInputError(f"{where} has no queries")
    return values, excluded


def _cube_units(
    cube: xr.Dataset, metric: str, pair_by: str, split: str | None, label: str | None
) -> tuple[xr.DataArray, list[str]]:
    """Units of one cube: (descriptor, unit) values of its ok descriptors, and the failed ones."""
    values, excluded = split_values(cube, metric, split, label)
    if pair_by == "query":
        coords = {name: np.asarray(values[name].values) for name in qc.QUERY_IDENTITY}
        coords = {k: v.astype(str) if k != "query_keypoint" else v for k, v in coords.items()}
        index = _unit_index(coords, pair_by)
        data = values.drop_vars([c for c in values.coords if c != qc.DESCRIPTOR])
        data = data.rename({qc.QUERY: UNIT}).load()
    else:
        data, index = _group_means(values, pair_by)
    data = data.assign_coords(xr.Coordinates.from_pandas_multiindex(index, UNIT))
    return data.transpose(qc.DESCRIPTOR, UNIT), excluded


def _group_means(values: xr.DataArray, pair_by: str) -> tuple[xr.DataArray, pd.MultiIndex]:
    """Mean of the defined values per scene or image pair (``scene/pair``: scene folder names
    cannot hold "/"), from the groups' integer codes (:func:`metricalc.metrics.reductions.
    prepare_cube`; per chunk for a lazy cube). The sums are sequential per group (bincount), so
    missing values between a unit's queries do not change its mean in the last bit: identical
    systems of different cubes (locked and native SIFT) then tie exactly."""
    coded, _ = prepare_cube(values.to_dataset(name="_values"), ["_values"], "compare")
    key = "scene" if pair_by == "scene" else PAIR_UNIT
    values = coded["_values"]
    means = ratio(group_sum(values.fillna(0), key), group_sum(values.notnull(), key))
    data = means.compute().drop_vars([c for c in means.coords if c not in (qc.DESCRIPTOR, key)])
    labels = np.asarray(data[key].values).astype(str)
    scene, _, pair = partition(labels, "/")
    index = _unit_index({"scene": scene, "pair": pair}, pair_by)
    return data.drop_vars(key).rename({key: UNIT}), index


def merged_protocol(cubes: Mapping[str, xr.Dataset]) -> dict[str, Any]:
    """The protocol attrs of the cubes, equal except :data:`SYSTEM_ATTRS` (then ``"mixed"``)."""
    labels = list(cubes)
    attrs = {label: qc.plain_attrs(cubes[label].attrs) for label in labels}
    first = attrs[labels[0]]
    merged = {name: first.get(name) for name in qc.PROTOCOL_ATTRS}
    for label in labels[1:]:
        for name in qc.PROTOCOL_ATTRS:
            value = attrs[label].get(name)
            if value == merged[name]:
                continue
            if name in SYSTEM_ATTRS:
                merged[name] = "mixed"
            else:
                raise InvalidInputError(
                    f"cannot compare cubes with different protocols: attr {name!r} is "
                    f"{first.get(name)!r} in cube {labels[0]!r} but {value!r} in cube {label!r}"
                )
    return merged


def cube_parts(cube: xr.Dataset | Mapping[str, xr.Dataset]) -> dict[str | None, xr.Dataset]:
    """The cubes of a comparison by label (``None`` for a single cube), checked to be cubes."""
    parts: dict[str | None, xr.Dataset] = {}
    if isinstance(cube, xr.Dataset):
        parts[None] = cube
    elif isinstance(cube, Mapping):
        if not cube:
            raise InvalidInputError("the mapping of cubes is empty; give at least one cube")
        for label, one in cube.items():
            if not isinstance(label, str) or not label:
                raise InvalidInputError(
                    f"cube labels must be non-empty strings (e.g. 'locked'); got {label!r}"
                )
            if not isinstance(one, xr.Dataset):
                raise InvalidInputError(
                    f"cube {label!r} must be an xarray.Dataset (a QueryCube); got "
                    f"{type(one).__name__}"
                )
            parts[label] = one
    else:
        raise InvalidInputError(
            "cube must be a QueryCube (xarray.Dataset) or a mapping {label: QueryCube}; got "
            f"{type(cube).__name__}"
        )
    return parts


@validate_params(metric=Text(), pair_by=Choice(PAIR_BY), split=Nullable(Choice(SPLITS)))
def unit_values(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
    *,
    metric: str = "ap",
    pair_by: str = "query",
    split: str | None = None,
) -> xr.DataArray:
    """The metric of every system on every unit: a DataArray over (descriptor, unit).

    Parameters
    ----------
    cube : QueryCube or mapping of label -> QueryCube
        One cube (systems = its descriptors), or several (systems named
        ``"<descriptor> (<label>)"``), whose protocol attrs must be equal except ``keypoints``
        and ``distance``. Descriptors with status ``"error"`` are left out.
    metric : str
        A numeric (descriptor, query) variable (``ap``, ``nn_correct``, ``image_ap``, ...) or
        ``"hit@K"`` or ``"precision@K"``; see :func:`metric_values`.
    pair_by : {"query", "pair", "scene"}
        The unit: a query, an image pair (scene and pair) or a scene. For pairs and scenes the
        metric is the mean over the unit's queries, NaN skipped:

        .. math:: v_{s,u} = \\frac{1}{|Q_{s,u}|} \\sum_{q \\in Q_{s,u}} m_{s,q},

        :math:`Q_{s,u}` the queries of unit *u* where system *s* has a value.
    split : {"viewpoint", "illumination"}, optional
        Only the queries of that split.

    Returns
    -------
    xarray.DataArray
        float64 over (``descriptor``, ``unit``), NaN where a system has no value on a unit. The
        ``unit`` index is a MultiIndex of ``scene, pair, keypoint_set, query_keypoint``
        (queries), ``scene, pair`` (image pairs), or ``scene``. attrs: ``metric``, ``pair_by``,
        ``split`` (``""`` for all), ``excluded_descriptors`` and the protocol attrs
        (:data:`metricalc.cube.PROTOCOL_ATTRS`; ``keypoints``/``distance`` may be ``"mixed"``).

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> from metricalc.stats import unit_values
    >>> c = qc.new_cube(["sift", "orb"],
    ...                 {"scene": ["i_a", "i_a", "v_b"], "pair": ["1-2", "1-3", "1-2"],
    ...                  "keypoint_set": ["sift"] * 3, "query_keypoint": [0, 0, 0]},
    ...                 {"ap": [[1.0, 0.5, 0.2], [0.5, 0.5, 0.1]]}, attrs=qc.DEFAULT_ATTRS)
    >>> units = unit_values(c, pair_by="scene")
    >>> units.scene.values.tolist(), units.values.tolist()
    (['i_a', 'v_b'], [[0.75, 0.2], [0.5, 0.1]])
    """
    parts = cube_parts(cube)
    tables, excluded = [], []
    for label, one in parts.items():
        table, failed = _cube_units(one, metric, pair_by, split, label)
        if label is not None:
            table = table.assign_coords(
                descriptor=[f"{d} ({label})" for d in table[qc.DESCRIPTOR].values.tolist()]
            )
            failed = [f"{d} ({label})" for d in failed]
        tables.append(table)
        excluded += failed
    protocol = merged_protocol({str(k): v for k, v in parts.items()})
    units = tables[0] if len(tables) == 1 else xr.concat(tables, qc.DESCRIPTOR, join="outer")
    if units.sizes[qc.DESCRIPTOR] == 0:
        raise InvalidInputError(
            "no system to compare: every descriptor failed (status 'error': "
            f"{', '.join(excluded)})"
        )
    if not np.isfinite(units.values).any():
        raise InvalidInputError(
            f"metric {metric!r} has no value in the cube"
            + (f" for the {split} queries" if split else "")
            + " (every value is NaN or the -1 sentinel)"
        )
    attrs: dict[Hashable, Any] = {
        "metric": metric,
        "pair_by": pair_by,
        "split": split or "",
        "excluded_descriptors": excluded,
    }
    attrs.update(protocol)
    units.attrs = attrs
    return units.rename(metric)
