"""The union of QueryCubes over descriptors, queries and sequences: :func:`combine`."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from metricalc.cube.checks import validate
from metricalc.cube.identity import _describe_query, _groups, _identity_keys, _identity_text
from metricalc.cube.model import (
    DESCRIPTOR,
    DESCRIPTOR_VARIABLES,
    MERGED_ATTRS,
    PROTOCOL_ATTRS,
    QUERY,
    QUERY_COORDS,
    QUERY_IDENTITY,
    SEQUENCE,
    SEQUENCE_VARIABLES,
    STR,
    _field,
    _first,
    _generic_sentinel,
    _is_sentinel,
    _is_str_dtype,
    _same,
    _storage_dtype,
    is_lazy,
    plain_attrs,
    plain_value,
)
from metricalc.errors import InvalidInputError

Layout = dict[str, tuple[tuple[str, ...], np.dtype]]
"""Dims and dtype of every data variable of a union."""


def _dataset_label(attrs: Mapping[Hashable, Any]) -> str:
    """``'sha256:...'`` and, when the cube records it, ``(read from <dataset_path>)``."""
    path = attrs.get("dataset_path")
    return f"{attrs['dataset']!r}" + (f" (read from {path})" if path else "")


def _check_protocols(cubes: Sequence[xr.Dataset]) -> None:
    first = plain_attrs(cubes[0].attrs)
    for i, cube in enumerate(cubes[1:], start=1):
        other = plain_attrs(cube.attrs)
        if first["dataset"] != other["dataset"]:
            raise InvalidInputError(
                "cannot combine cubes of different data: cube 0 was evaluated on dataset "
                f"{_dataset_label(first)} but cube {i} on {_dataset_label(other)}; cubes combine "
                "only when evaluated on the same data (for metricalc's keypoint evaluation, "
                "dataset is a fingerprint of the images and homographies)"
            )
        for name in PROTOCOL_ATTRS:
            if name not in MERGED_ATTRS and first[name] != other[name]:
                raise InvalidInputError(
                    f"cannot combine cubes with different protocols: attr {name!r} is "
                    f"{first[name]!r} in cube 0 but {other[name]!r} in cube {i}"
                )


def _union_queries(
    cubes: Sequence[xr.Dataset],
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """All queries of ``cubes`` once, in canonical order, and each cube's positions in them.

    The coordinates that are not part of the identity (split, x, y) must agree.
    """
    tables = [{name: cube[name].values for name in QUERY_COORDS} for cube in cubes]
    keys = _identity_keys(tables)
    group, first = _groups(np.concatenate(keys))
    every = {name: np.concatenate([t[name] for t in tables]) for name in QUERY_COORDS}
    origin = np.repeat(np.arange(len(cubes)), [len(k) for k in keys])
    for name in QUERY_COORDS:
        if name in QUERY_IDENTITY:
            continue
        clash = ~_same(every[name], every[name][first][group])
        if clash.any():
            later = int(np.flatnonzero(clash)[0])
            earlier = int(first[group[later]])
            raise InvalidInputError(
                "cannot combine: query "
                + _identity_text(every, later)
                + f" has {name}={every[name][earlier].item()!r} in cube {origin[earlier]} but "
                f"{name}={every[name][later].item()!r} in cube {origin[later]}"
            )
    offsets = np.cumsum([0, *(len(k) for k in keys)])
    positions = [group[offsets[c] : offsets[c + 1]] for c in range(len(cubes))]
    return {name: values[first] for name, values in every.items()}, positions


def _variable_layout(cubes: Sequence[xr.Dataset]) -> Layout:
    """Dims and dtype of every data variable of the union."""
    layout: Layout = {}
    for i, cube in enumerate(cubes):
        extra = [c for c in cube.coords if c not in (*QUERY_COORDS, DESCRIPTOR, SEQUENCE)]
        if extra:
            raise InvalidInputError(
                f"cannot combine: cube {i} has the coordinate {extra[0]!r}, which is not part of "
                "the QueryCube schema; drop it first (cube.drop_vars(...))"
            )
        for name, variable in cube.data_vars.items():
            dims = tuple(str(d) for d in variable.dims)
            if dims not in ((DESCRIPTOR, QUERY), (DESCRIPTOR,), (DESCRIPTOR, SEQUENCE)):
                raise InvalidInputError(
                    f"cannot combine: variable {name!r} of cube {i} has dims {dims}; expected "
                    "(descriptor, query), (descriptor,) or (descriptor, sequence)"
                )
            name = str(name)
            schema = _field(name)
            dtype = schema.dtype if schema is not None else variable.dtype
            if name in layout:
                if layout[name][0] != dims:
                    raise InvalidInputError(
                        f"cannot combine: variable {name!r} has dims {layout[name][0]} in an "
                        f"earlier cube but {dims} in cube {i}"
                    )
                if schema is None:
                    dtype = np.result_type(layout[name][1], dtype)
            layout[name] = (dims, dtype)
    return layout


def combine(cubes: Sequence[xr.Dataset]) -> xr.Dataset:
    """Union of QueryCubes over descriptors, queries and sequences.

    - The protocol attrs (:data:`PROTOCOL_ATTRS`) must be equal; otherwise the error names the
      attr and both values. ``metricalc_version`` lists the distinct versions (joined by
      ``", "``); other attrs are taken from the first cube that has them.
    - A query is identified by ``(scene, pair, keypoint_set, query_keypoint)``; its ``split``,
      ``x`` and ``y`` must agree between cubes.
    - A (descriptor, query) cell is *present* in a cube where ``n_relevant != -1``; present in
      two cubes, every variable must be equal (NaN equals NaN), else the error names the
      descriptor, the query and both values. Cells present nowhere hold the sentinels (a
      native-keypoint union: -1 / NaN where a descriptor lacks the query). Per-sequence cells
      (present where any variable is not its sentinel) combine the same way.
    - Per-descriptor variables are carried: ``status`` is ``"error"`` if any part failed (its
      messages joined by ``"; "``), ``processing_time_ms`` is the sum over the parts that added
      cells (an identical duplicate adds no time). Other data variables over the schema's
      dims are combined like the schema's own (sentinel -1, NaN or ``""`` by dtype).
    - Order: descriptors by first appearance; queries by scene, pair (numerically), keypoint_set,
      query_keypoint; sequences by name.

    The work is done in memory (lazy cubes are computed).

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> def one(name, scene, better):
    ...     coords = {"scene": [scene], "pair": ["1-2"], "keypoint_set": ["sift"],
    ...               "query_keypoint": [0]}
    ...     return qc.new_cube([name], coords, {"better": [[better]], "ties": [[0]]},
    ...                        attrs=qc.DEFAULT_ATTRS)
    >>> c = qc.combine([one("sift", "v_b", 1), one("sift", "i_a", 0), one("orb", "i_a", 3),
    ...                 qc.error_record("brief", "failed", attrs=qc.DEFAULT_ATTRS)])
    >>> c.descriptor.values.tolist(), c.scene.values.tolist()
    (['sift', 'orb', 'brief'], ['i_a', 'v_b'])
    >>> c.ap.values.tolist()
    [[1.0, 0.5], [0.25, nan], [nan, nan]]
    >>> c.n_relevant.values.tolist(), c.status.values.tolist()
    ([[1, 1], [1, -1], [-1, -1]], ['ok', 'ok', 'error'])
    """
    cubes = _prepared(cubes)
    labels = _Labels.of(cubes)
    layout = _variable_layout(cubes)
    if labels.sequences:
        for name, schema in SEQUENCE_VARIABLES.items():
            layout.setdefault(name, ((DESCRIPTOR, SEQUENCE), schema.dtype))
    union = _Union(labels, layout)
    for c, cube in enumerate(cubes):
        union.add(c, cube)
    coords = labels.coords()
    values = union.variables()
    variables = {name: (dims, values[name]) for name, (dims, _) in layout.items()}
    return validate(xr.Dataset(variables, coords=coords, attrs=_combined_attrs(cubes)))


def _prepared(cubes: Sequence[xr.Dataset] | xr.Dataset) -> list[xr.Dataset]:
    """The cubes validated, of one protocol, in memory and without a ``query`` variable."""
    if isinstance(cubes, xr.Dataset):
        cubes = [cubes]
    cubes = list(cubes)
    if not cubes:
        raise InvalidInputError("combine needs at least one cube; got none")
    for i, cube in enumerate(cubes):
        try:
            validate(cube)
        except InvalidInputError as error:
            raise InvalidInputError(f"cannot combine: cube {i} is invalid: {error}") from None
    _check_protocols(cubes)
    cubes = [cube.compute() if is_lazy(cube) else cube for cube in cubes]
    return [c.drop_vars(QUERY) if QUERY in c.variables else c for c in cubes]  # renumbered


@dataclass
class _Labels:
    """The labels of the union: descriptors, queries and sequences, and where each cube's are."""

    descriptors: list[str]
    queries: dict[str, np.ndarray]
    query_positions: list[np.ndarray]
    sequences: list[str]

    @classmethod
    def of(cls, cubes: Sequence[xr.Dataset]) -> _Labels:
        descriptors = list(dict.fromkeys(d for c in cubes for d in c[DESCRIPTOR].values.tolist()))
        queries, query_positions = _union_queries(cubes)
        sequences = sorted(
            {s for c in cubes if SEQUENCE in c.dims for s in c[SEQUENCE].values.tolist()}
        )
        return cls(descriptors, queries, query_positions, sequences)

    def sizes(self) -> dict[str, int]:
        return {
            DESCRIPTOR: len(self.descriptors),
            QUERY: len(self.queries["scene"]),
            SEQUENCE: len(self.sequences),
        }

    def positions(self, c: int, cube: xr.Dataset) -> dict[str, np.ndarray]:
        """Positions in the union of the descriptors, queries (and sequences) of cube ``c``."""
        d_index = {d: i for i, d in enumerate(self.descriptors)}
        axes = {
            DESCRIPTOR: np.array(
                [d_index[d] for d in cube[DESCRIPTOR].values.tolist()], dtype=np.int64
            ),
            QUERY: self.query_positions[c],
        }
        if SEQUENCE in cube.dims:
            s_index = {s: i for i, s in enumerate(self.sequences)}
            axes[SEQUENCE] = np.array(
                [s_index[s] for s in cube[SEQUENCE].values.tolist()], dtype=np.int64
            )
        return axes

    def describe(self, dim: str, position: int) -> str:
        """The query or sequence at ``position`` of the union, for a message."""
        if dim == QUERY:
            return _describe_query(self.queries, position)
        return f"sequence {self.sequences[position]!r}"

    def coords(self) -> dict[str, Any]:
        coords: dict[str, Any] = {DESCRIPTOR: (DESCRIPTOR, np.array(self.descriptors, dtype=str))}
        for name, schema in QUERY_COORDS.items():
            values = self.queries[name]
            coords[name] = (
                QUERY,
                values.astype(str) if schema.dtype == STR else values.astype(schema.dtype),
            )
        if self.sequences:
            coords[SEQUENCE] = (SEQUENCE, np.array(self.sequences, dtype=str))
        return coords


@dataclass
class _Union:
    """The variables of the union, filled cube by cube (:meth:`add`)."""

    labels: _Labels
    layout: Layout
    out: dict[str, np.ndarray] = field(init=False)
    owner: dict[str, np.ndarray] = field(init=False)
    time_ms: np.ndarray = field(init=False)
    failed: list[list[str]] = field(init=False)
    seen: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        sizes = self.labels.sizes()
        self.out = {
            name: _filled(name, dims, dtype, sizes) for name, (dims, dtype) in self.layout.items()
        }
        self.owner = {
            other: np.full((sizes[DESCRIPTOR], sizes[other]), -1, dtype=np.int32)
            for other in (QUERY, SEQUENCE)
        }
        self.time_ms = np.full(sizes[DESCRIPTOR], np.nan)
        self.failed = [[] for _ in range(sizes[DESCRIPTOR])]
        self.seen = np.zeros(sizes[DESCRIPTOR], bool)

    def add(self, c: int, cube: xr.Dataset) -> None:
        """Add the cells, status and per-descriptor variables of cube ``c``."""
        axes = self.labels.positions(c, cube)
        added = np.zeros(len(axes[DESCRIPTOR]), bool)
        for other, present in ((QUERY, _query_present), (SEQUENCE, _sequence_present)):
            if other in axes:
                added |= self._add_cells(c, cube, axes, other, present(cube))
        self._add_status(cube, axes[DESCRIPTOR], added)
        self._add_descriptor_variables(c, cube, axes[DESCRIPTOR])

    def _add_cells(
        self,
        c: int,
        cube: xr.Dataset,
        axes: Mapping[str, np.ndarray],
        other: str,
        present: np.ndarray,
    ) -> np.ndarray:
        """Copy the present (descriptor, ``other``) cells of cube ``c``; cells present in an
        earlier cube must be equal. Returns, per descriptor of the cube, whether it added a cell."""
        di = axes[DESCRIPTOR]
        names = [
            n
            for n, (dims, _) in self.layout.items()
            if dims == (DESCRIPTOR, other) and n in cube.data_vars
        ]
        index = np.ix_(di, axes[other])
        previous = self.owner[other][index]
        overlap = present & (previous >= 0)
        for name in names:
            new = cube[name].values
            old = self.out[name][index]
            clash = overlap & ~_same(old, new)
            if clash.any():
                i, j = _first(clash)
                raise InvalidInputError(
                    f"cannot combine: {name} of descriptor {self.labels.descriptors[di[i]]!r} at "
                    f"{self.labels.describe(other, int(axes[other][j]))} is {old[i, j].item()!r} "
                    f"in cube {previous[i, j]} but {new[i, j].item()!r} in cube {c}"
                )
            self.out[name][index] = np.where(present, new, old)
        self.owner[other][index] = np.where(present & (previous < 0), c, previous)
        added: np.ndarray = (present & (previous < 0)).any(axis=1)
        return added

    def _add_status(self, cube: xr.Dataset, di: np.ndarray, added: np.ndarray) -> None:
        """Collect the error messages; add the time of parts that added cells."""
        status, error = cube["status"].values, cube["error"].values
        part_time = cube["processing_time_ms"].values
        for k, target in enumerate(di):
            if status[k] == "error" and str(error[k]) not in self.failed[target]:
                self.failed[target].append(str(error[k]))
            if (added[k] or not self.seen[target]) and not np.isnan(part_time[k]):
                self.time_ms[target] = np.nansum([self.time_ms[target], part_time[k]])
            self.seen[target] = True

    def _add_descriptor_variables(self, c: int, cube: xr.Dataset, di: np.ndarray) -> None:
        """Per-descriptor variables outside the schema: values other than the sentinel must
        agree between cubes."""
        for name, (dims, _) in self.layout.items():
            if dims != (DESCRIPTOR,) or name in DESCRIPTOR_VARIABLES or name not in cube.data_vars:
                continue
            new = cube[name].values
            old = self.out[name][di]
            clash = ~_is_sentinel(name, old) & ~_is_sentinel(name, new) & ~_same(old, new)
            if clash.any():
                k = int(np.flatnonzero(clash)[0])
                raise InvalidInputError(
                    f"cannot combine: {name} of descriptor {self.labels.descriptors[di[k]]!r} is "
                    f"{old[k].item()!r} in an earlier cube but {new[k].item()!r} in cube {c}"
                )
            self.out[name][di] = np.where(_is_sentinel(name, new), old, new)

    def variables(self) -> dict[str, np.ndarray]:
        """The combined values, with the status, error and time of every descriptor."""
        out = dict(self.out)
        out["processing_time_ms"] = self.time_ms
        out["status"] = np.array(["error" if f else "ok" for f in self.failed], dtype=object)
        out["error"] = np.array(["; ".join(f) for f in self.failed], dtype=object)
        return {name: v.astype(str) if v.dtype == object else v for name, v in out.items()}


def _filled(
    name: str, dims: tuple[str, ...], dtype: np.dtype, sizes: Mapping[str, int]
) -> np.ndarray:
    """An array over ``dims`` holding the sentinel of variable ``name``."""
    schema = _field(name)
    sentinel = schema.sentinel if schema is not None else _generic_sentinel(dtype)
    # strings accumulate as objects: fixed-width arrays would truncate longer values
    storage = object if _is_str_dtype(np.dtype(dtype)) else _storage_dtype(dtype, sentinel)
    return np.full(tuple(sizes[d] for d in dims), sentinel, dtype=storage)


def _combined_attrs(cubes: Sequence[xr.Dataset]) -> dict[Hashable, Any]:
    """The first cube's attrs, completed by the others'; the distinct versions; merged attrs."""
    attrs: dict[Hashable, Any] = {}
    versions: list[str] = []
    for cube in cubes:
        for key, value in plain_attrs(cube.attrs).items():
            attrs.setdefault(key, value)
        for version in str(plain_value(cube.attrs["metricalc_version"])).split(", "):
            if version not in versions:
                versions.append(version)
    attrs["metricalc_version"] = ", ".join(versions)
    for name in MERGED_ATTRS:
        values = {str(plain_value(cube.attrs[name])) for cube in cubes}
        attrs[name] = values.pop() if len(values) == 1 else "mixed"
    return attrs


def _query_present(cube: xr.Dataset) -> np.ndarray:
    present: np.ndarray = cube["n_relevant"].values != -1
    return present


def _sequence_present(cube: xr.Dataset) -> np.ndarray:
    present = np.zeros((cube.sizes[DESCRIPTOR], cube.sizes[SEQUENCE]), bool)
    for name in SEQUENCE_VARIABLES:
        present |= ~_is_sentinel(name, cube[name].values)
    return present
