"""QueryCube files: :func:`save` and :func:`open_cube` (netCDF-4/HDF5 through h5netcdf)."""

from __future__ import annotations

import io
import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import xarray as xr

from metricalc.cube.checks import validate
from metricalc.cube.model import (
    DESCRIPTOR,
    QUERY,
    SEQUENCE,
    _is_str_dtype,
    plain_attrs,
    sentinel_array,
)
from metricalc.errors import InvalidInputError
from metricalc.fileio import hdf5_target

_LATER_SEQUENCE_VARIABLES = ("image_retrieval_ap", "image_retrieval_relevant")
"""Per-sequence variables that joined the schema after the others: :func:`open_cube` adds them
(at their sentinels) to a file written without them."""

_STORAGE_CHUNKS = {DESCRIPTOR: 1, QUERY: 10_000}
"""HDF5 chunk shape of the numeric variables: one descriptor by 10,000 queries. Lazy opening is
fastest (and quiet) when ``chunks=`` along ``query`` is a multiple of 10,000."""

READ_ERRORS = (OSError, ValueError, KeyError, TypeError, RuntimeError, IndexError)
"""What h5py / h5netcdf / xarray raise on a file that is not a readable netCDF-4 file (a
damaged HDF5 file raises KeyError or RuntimeError deep inside the library)."""


def hdf5_error(path: str | os.PathLike[str]) -> Exception | None:
    """Why ``path`` is not a readable HDF5 file (None when its root group reads).

    Checked with h5py before xarray opens the file: h5netcdf's ``File`` leaves a half-built
    object behind on a damaged file, whose clean-up prints a second traceback."""
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            dict(handle.attrs)
            list(handle.keys())
    except READ_ERRORS as error:
        return error
    return None


def _unicode(variables: Mapping[Hashable, xr.DataArray]) -> dict[Hashable, xr.DataArray]:
    """The in-memory string variables read as objects (character arrays), as NumPy unicode."""
    return {
        name: variable.astype(str)
        for name, variable in variables.items()
        if variable.dtype == object and variable.chunks is None
    }


def _text_apart(path: Path, chunks: Any) -> list[str]:
    """For a lazy open, the string variables over ``query`` stored as character arrays: they
    are left out of the dask open (dask cannot size their object dtype for ``chunks="auto"``)
    and read into memory by :func:`_text_back`, as every coordinate is."""
    if chunks is None:
        return []
    with xr.open_dataset(path, engine="h5netcdf") as plain:  # lazily indexed: nothing read yet
        return [str(n) for n, v in plain.variables.items() if v.dtype == object and QUERY in v.dims]


def _text_back(cube: xr.Dataset, path: Path, names: list[str]) -> xr.Dataset:
    """``cube`` with the variables ``names`` of ``path`` read into memory and put back."""
    if not names:
        return cube
    with xr.open_dataset(path, engine="h5netcdf") as plain:
        text = {name: plain[name].load() for name in names}
        coords = {name for name in names if name in plain.coords}
    cube = cube.assign_coords({n: v for n, v in text.items() if n in coords})
    return cube.assign({n: v for n, v in text.items() if n not in coords})


def save(cube: xr.Dataset, path: str | os.PathLike[str] | io.BytesIO) -> None:
    """Write ``cube`` to a netCDF-4 (HDF5) file with the h5netcdf engine, atomically.

    The cube is validated first, written to a temporary file next to ``path`` (or into memory,
    :func:`metricalc.fileio.hdf5_target`) and renamed over it (:func:`os.replace`), so
    ``path`` never holds a half-written cube, and a full disk is an ``OSError`` that leaves the
    old file. ``path`` may also be a :class:`io.BytesIO` to write into. The string
    coordinates over ``query`` (``scene``, ``pair``, ``keypoint_set``, ``split``) are stored as
    gzip-compressed UTF-8 character arrays (netCDF ``char`` with a ``string<N>`` dimension and
    ``_Encoding = "utf-8"``, the CF convention), the other strings as variable-length UTF-8
    (netCDF-4 ``string``); both are readable by netCDF-C, h5py and xarray. Numeric variables
    are gzip-compressed (level 1, shuffle). Lazy (dask) cubes are written chunk by chunk.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from metricalc import cube as qc
    >>> c = qc.error_record("sift", "failed", attrs=qc.DEFAULT_ATTRS)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     qc.save(c, pathlib.Path(tmp) / "cube.nc")
    ...     qc.open_cube(pathlib.Path(tmp) / "cube.nc").identical(c)
    True
    """
    validate(cube)
    out = cube.copy(deep=False)
    encoding: dict[Hashable, dict[str, Any]] = {}
    for name, variable in out.variables.items():
        variable.encoding = {}
        if _is_str_dtype(variable.dtype) and QUERY in variable.dims and variable.size:
            # one value per query, few distinct ones: fixed-width UTF-8 characters, compressed
            # (as variable-length strings each value costs ~40 bytes, most of a native cube)
            encoding[name] = {"dtype": "S1", "zlib": True, "complevel": 1}
        elif _is_str_dtype(variable.dtype):
            encoding[name] = {"dtype": str}
        elif variable.size and name not in cube.dims:
            chunks = tuple(
                min(size, _STORAGE_CHUNKS.get(str(dim), size))
                for dim, size in zip(variable.dims, variable.shape, strict=True)
            )
            encoding[name] = {"zlib": True, "complevel": 1, "shuffle": True, "chunksizes": chunks}
    out.attrs = plain_attrs(out.attrs)
    if isinstance(path, io.BytesIO):
        out.to_netcdf(path, engine="h5netcdf", encoding=encoding)
        return
    with hdf5_target(path, estimate=int(out.nbytes)) as target:  # a full disk: an OSError
        out.to_netcdf(target, engine="h5netcdf", encoding=encoding)


def open_cube(path: str | os.PathLike[str], *, chunks: Any = None) -> xr.Dataset:
    """Open a cube written by :func:`save` and validate it.

    Parameters
    ----------
    path : path
        The ``.nc`` file.
    chunks : optional
        ``None`` (default) reads everything into memory and closes the file. Anything else
        (``{}``, ``"auto"``, ``{"query": 100_000}``) is passed to :func:`xarray.open_dataset`:
        the variables are lazy dask arrays, reductions run chunk by chunk, and the file stays
        open for dask. A lazy cube is validated for structure, dtypes and attrs only (see
        :func:`validate`).

    Raises
    ------
    InvalidInputError
        Naming the file, when it is missing, not a netCDF/HDF5 file, or not a valid QueryCube.

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> qc.open_cube("no/such/cube.nc")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: cube file no/such/cube.nc does not exist
    """
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"cube file {path} does not exist")
    if not path.is_file():
        raise InvalidInputError(f"cube file {path} is not a file")
    damaged = hdf5_error(path)
    if damaged is not None:
        raise InvalidInputError(
            f"cube file {path} is not a readable netCDF-4/HDF5 file: {type(damaged).__name__}: "
            f"{damaged}"
        )
    try:
        apart = _text_apart(path, chunks)
        cube = xr.open_dataset(path, engine="h5netcdf", chunks=chunks, drop_variables=apart)
    except READ_ERRORS as error:
        raise InvalidInputError(
            f"cube file {path} is not a readable netCDF-4/HDF5 file: {type(error).__name__}: "
            f"{error}"
        ) from error
    cube = _load_all(cube, path) if chunks is None else _load_small(cube, path, apart)
    cube = cube.assign_coords(_unicode(cube.coords)).assign(_unicode(cube.data_vars))
    cube.attrs = plain_attrs(cube.attrs)
    cube = _add_later_variables(cube)
    try:
        return validate(cube)
    except InvalidInputError as error:
        cube.close()
        raise InvalidInputError(f"cube file {path} is not a valid QueryCube: {error}") from None


def _unreadable(path: Path, error: Exception) -> InvalidInputError:
    return InvalidInputError(f"cube file {path} could not be read: {type(error).__name__}: {error}")


def _load_all(cube: xr.Dataset, path: Path) -> xr.Dataset:
    """``cube`` read into memory, its file closed."""
    try:
        cube.load()
    except READ_ERRORS as error:
        raise _unreadable(path, error) from error
    finally:
        cube.close()
    return cube


def _load_small(cube: xr.Dataset, path: Path, apart: list[str]) -> xr.Dataset:
    """A lazy ``cube`` with its coordinates (groupby needs them in memory), the small
    per-descriptor and per-sequence variables and the text variables ``apart`` read now; only
    the (descriptor, query) data stay lazy."""
    small = [
        name
        for name, variable in cube.variables.items()
        if variable.chunks is not None
        and (name in cube.coords or not {QUERY} & set(map(str, variable.dims)))
    ]
    try:
        loaded = {name: cube[name].compute() for name in small}
    except READ_ERRORS as error:
        cube.close()
        raise _unreadable(path, error) from error
    cube = cube.assign_coords({n: v for n, v in loaded.items() if n in cube.coords})
    cube = cube.assign({n: v for n, v in loaded.items() if n not in cube.coords})
    try:
        return _text_back(cube, path, apart)
    except READ_ERRORS as error:
        cube.close()
        raise _unreadable(path, error) from error


def _add_later_variables(cube: xr.Dataset) -> xr.Dataset:
    """The :data:`_LATER_SEQUENCE_VARIABLES` a cube with a ``sequence`` dim lacks, at their
    sentinels (a file written before they joined the schema)."""
    if SEQUENCE not in cube.dims:
        return cube
    shape = (cube.sizes[DESCRIPTOR], cube.sizes[SEQUENCE])
    missing = [name for name in _LATER_SEQUENCE_VARIABLES if name not in cube.variables]
    added = {name: ((DESCRIPTOR, SEQUENCE), sentinel_array(name, shape)) for name in missing}
    return cube.assign(added)
