"""``results.h5``: the per-query QueryCube and the per-unit metrics of a run, one file.

Layout (netCDF-4 / HDF5, written with h5netcdf)::

    /          the QueryCube (metricalc.cube schema): dims descriptor (= the tag) x query, the
               per-query variables (better, ties, n_relevant, ap, nn_correct, nn_error, ...),
               the query coordinates (scene, split, pair, keypoint_set, query_keypoint, x, y)
               and the protocol attrs. metricalc.cube.open_cube("results.h5") opens it, and
               `metricalc metrics results.h5` prints its metric set.
    /pairs     per image pair, over the dim image_pair (e.g. "v_coffee/1-3"): coordinates scene,
               split, pair, image0, image1, match_image (the PNG, relative to the run folder);
               one variable per metric (prec@1px, num_matches, H_error_ransac, true_map, ...);
               xarray.open_dataset("results.h5", group="pairs") opens it.
    /files     (the ``patches`` benchmark instead of /pairs) per benchmark file, over the dim
               file: coordinates split, difficulty, size; n_queries, patch_retrieval_map,
               image_retrieval_map.

The file is written to a temporary name and renamed over ``results.h5``.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.fileio import hdf5_target

__all__ = ["PAIRS_GROUP", "open_pairs", "write_results_h5"]

PAIRS_GROUP = "pairs"
"""The HDF5 group of the per-pair metrics (a benchmark's ``units_group``)."""


def _plain(value: Any) -> Any:
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, list | tuple):
        return np.asarray(value)
    return value


def write_results_h5(
    path: Path, cube: xr.Dataset, pairs: xr.Dataset, *, group: str = PAIRS_GROUP
) -> None:
    """Write a run's ``results.h5``: the cube (root group) and the per-unit metrics (group
    ``group``), atomically."""
    with hdf5_target(path, estimate=int(cube.nbytes + pairs.nbytes)) as target:
        cubes.save(cube, target)
        out = pairs.copy(deep=False)
        encoding: dict[Hashable, dict[str, Any]] = {}
        for name, variable in out.variables.items():
            variable.encoding = {}
            if variable.dtype.kind in "UO":
                encoding[name] = {"dtype": str}
        out.attrs = {k: _plain(v) for k, v in out.attrs.items()}
        if not isinstance(target, Path):
            target.seek(0)  # append the group to the file in memory
        out.to_netcdf(target, mode="a", group=group, engine="h5netcdf", encoding=encoding)


def open_pairs(path: Path, *, group: str = PAIRS_GROUP) -> xr.Dataset:
    """The per-unit metrics of a ``results.h5`` (in memory): group ``pairs`` (image pairs) or
    ``files`` (benchmark files)."""
    try:
        with xr.open_dataset(path, group=group, engine="h5netcdf") as pairs:
            return pairs.load()
    except (OSError, ValueError, KeyError) as error:
        raise InvalidInputError(
            f"{path} has no readable group {group!r}: {error}; rerun with --overwrite_eval"
        ) from error
