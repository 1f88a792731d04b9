"""The QueryCube: per-query results of every descriptor as one :class:`xarray.Dataset`.

A QueryCube holds, for every descriptor and every query (a keypoint of image 1 matched against
image k of a scene), the rank statistics of its relevant item and the nearest-neighbour facts the
metric set needs (docs/cube.md, docs/keypoints.md). Schema:

- dims ``descriptor`` (str coordinate), ``query`` (flat index over all queries, no coordinate)
  and, for the per-scene results of the Bojanic tasks and the image retrieval, ``sequence`` (str
  coordinate: scene names);
- coords on ``query``: ``scene``, ``split``, ``pair``, ``keypoint_set`` (str), ``query_keypoint``
  (int64), ``x``, ``y`` (float64); a query's identity is
  ``(scene, pair, keypoint_set, query_keypoint)`` (:data:`QUERY_IDENTITY`);
- data variables (:data:`QUERY_VARIABLES`, :data:`DESCRIPTOR_VARIABLES`,
  :data:`SEQUENCE_VARIABLES`) with fixed dtypes and sentinels for "missing" (-1 or NaN);
- attrs: every protocol parameter (:data:`PROTOCOL_ATTRS`) and ``metricalc_version``.

Strings are held as NumPy unicode arrays (``<U``) in memory; :func:`save` writes the string
coordinates over ``query`` as compressed UTF-8 character arrays and the others as variable-length
UTF-8 strings (netCDF-4 ``string``), and :func:`open_cube` reads both back as ``<U``.
docs/cube.md has the full table.

The package has one module per job: :mod:`~metricalc.cube.model` (the schema),
:mod:`~metricalc.cube.identity` (query identities), :mod:`~metricalc.cube.checks`
(:func:`validate`), :mod:`~metricalc.cube.build` (:func:`new_cube`, :func:`error_record`),
:mod:`~metricalc.cube.frame` (:func:`from_dataframe`), :mod:`~metricalc.cube.union`
(:func:`combine`), :mod:`~metricalc.cube.io` (:func:`save`, :func:`open_cube`) and
:mod:`~metricalc.cube.labels` (the query labels in files: text on disk, codes in memory).
"""

from metricalc.cube.build import error_record, new_cube
from metricalc.cube.checks import validate
from metricalc.cube.frame import from_dataframe
from metricalc.cube.io import READ_ERRORS, open_cube, save
from metricalc.cube.model import (
    DEFAULT_ATTRS,
    DESCRIPTOR,
    DESCRIPTOR_VARIABLES,
    DISTANCES,
    MERGED_ATTRS,
    PROTOCOL_ATTRS,
    QUERY,
    QUERY_COORDS,
    QUERY_IDENTITY,
    QUERY_VARIABLES,
    SEQUENCE,
    SEQUENCE_VARIABLES,
    SPLITS,
    STATUSES,
    STR,
    Y0_POLICIES,
    Field,
    is_lazy,
    plain_attrs,
    plain_value,
    sentinel_array,
    split_of,
)
from metricalc.cube.union import combine

__all__ = [
    "DEFAULT_ATTRS",
    "DESCRIPTOR",
    "DESCRIPTOR_VARIABLES",
    "DISTANCES",
    "MERGED_ATTRS",
    "PROTOCOL_ATTRS",
    "QUERY",
    "QUERY_COORDS",
    "QUERY_IDENTITY",
    "QUERY_VARIABLES",
    "READ_ERRORS",
    "SEQUENCE",
    "SEQUENCE_VARIABLES",
    "SPLITS",
    "STATUSES",
    "STR",
    "Y0_POLICIES",
    "Field",
    "combine",
    "error_record",
    "from_dataframe",
    "is_lazy",
    "new_cube",
    "open_cube",
    "plain_attrs",
    "plain_value",
    "save",
    "sentinel_array",
    "split_of",
    "validate",
]
