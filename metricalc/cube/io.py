"""QueryCube files: :func:`save` and :func:`open_cube` (netCDF-4/HDF5 through h5netcdf)."""

from __future__ import annotations

import io
import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc.cube.checks import validate
from metricalc.cube.identity import _encode
from metricalc.cube.labels import (
    TEXT_ENCODING,
    code_dtype,
    is_char_labels,
    label_bytes,
    read_labels,
    words_of,
)
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
from metricalc.validation import is_integer

_LATER_SEQUENCE_VARIABLES = ("image_retrieval_ap", "image_retrieval_relevant")
"""Per-sequence variables that joined the schema after the others: :func:`open_cube` adds them
(at their sentinels) to a file written without them."""

_STORAGE_CHUNKS = {DESCRIPTOR: 1, QUERY: 10_000}
"""HDF5 chunk shape of the numeric variables: one descriptor by 10,000 queries. A lazy open with
``chunks=`` along ``query`` a multiple of 10,000 reads them directly; any other number is read at
the stored chunks and rechunked (:func:`_opened`)."""

FORMAT_ATTR = "metricalc_file_format"
"""Root attribute of a cube file: the layout version (absent: the layout before version 2)."""

FILE_FORMAT = 3
"""Layout version 3: every string variable over ``query`` alone (``scene``, ``split``,
``pair``, ``keypoint_set``, ...) is stored as a compressed UTF-8 character array, which xarray
and netCDF tools show as text (:mod:`metricalc.cube.labels`). Version 2 stored unsigned integer
codes beside a vocabulary variable; :func:`open_cube` reads every version."""

VOCABULARY = "vocabulary"
"""Key of a lazily opened cube's string coordinate ``encoding``: the sorted vocabulary its
values come from (:func:`query_codes` reads the integer codes back through it)."""

_VOCABULARY_OF = "vocabulary_variable"
"""Attribute of a coded variable in a file of layout 2: the name of its vocabulary variable."""

_FILE_CODES = "file_codes"
"""Key of a lazily opened string coordinate's ``encoding``: (name of its decoded dask array,
the codes read at the open), so that :func:`query_codes` reuses the codes while the labels are
unchanged."""

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


class _Labels:
    """A label variable read from its character array: codes, sorted vocabulary, attrs, and
    whether it is a coordinate."""

    def __init__(self, variable: xr.Variable, name: Hashable, coordinate: bool) -> None:
        self.codes, self.vocabulary = read_labels(variable, name)
        self.attrs = {k: v for k, v in variable.attrs.items() if k != TEXT_ENCODING}
        self.coordinate = coordinate


def _opened(path: Path, chunks: Any) -> tuple[xr.Dataset, list[str], dict[Hashable, _Labels]]:
    """``path`` opened by xarray with ``chunks=``, with its label character arrays read apart
    as codes (:class:`_Labels`) and, for a lazy open, the names of the variable-length string
    variables over ``query`` (the first layout): both are left out of the open (dask cannot size
    an object dtype for ``chunks="auto"``), the second read into memory by :func:`_text_back`.

    An integer number of queries per chunk that would cut the file's stored (HDF5) chunks apart
    is applied after the open: the file is opened at its stored chunks along ``query`` and
    rechunked, so every stored chunk is read and decompressed once, not once per dask chunk that
    overlaps it (the cost xarray warns about when the chunks are given to the open)."""
    # lazily indexed, characters as stored: a label column is read block by block
    with xr.open_dataset(path, engine="h5netcdf", concat_characters=False) as plain:
        labels = {
            name: _Labels(variable, name, name in plain.coords)
            for name, variable in plain.variables.items()
            if is_char_labels(variable)
        }
        apart = [
            str(n) for n, v in plain.variables.items() if v.dtype == object and QUERY in v.dims
        ]
        queries = _cutting_query_chunk(plain, chunks)
    drop = list(map(str, labels))
    if chunks is None:
        return xr.open_dataset(path, engine="h5netcdf", drop_variables=drop), [], labels
    drop += apart
    if queries is None:
        cube = xr.open_dataset(path, engine="h5netcdf", chunks=chunks, drop_variables=drop)
        return cube, apart, labels
    stored = {**chunks, QUERY: None}  # None: the stored chunks along query
    cube = xr.open_dataset(path, engine="h5netcdf", chunks=stored, drop_variables=drop)
    return cube.chunk({QUERY: queries}), apart, labels


def _with_labels(cube: xr.Dataset, labels: Mapping[Hashable, _Labels]) -> xr.Dataset:
    """``cube`` with the labels read apart: ``<U`` arrays, or for a lazy cube dask arrays
    decoded chunk by chunk (along the cube's chunks) from the codes held in memory."""
    if not labels:
        return cube
    chunks = next(
        (v.chunksizes[QUERY] for v in cube.variables.values() if v.chunks and QUERY in v.dims),
        None,  # a cube in memory
    )
    coords: dict[Hashable, xr.Variable] = {}
    variables: dict[Hashable, xr.Variable] = {}
    for name, read in labels.items():
        codes: Any = read.codes
        if chunks is not None:
            import dask.array as da

            codes = da.from_array(codes, chunks=(chunks,))  # type: ignore[no-untyped-call]
        target = coords if read.coordinate else variables
        target[name] = _label_variable(codes, read.vocabulary, read.attrs)
    return cube.assign_coords(coords).assign(variables)


def _label_variable(codes: Any, vocabulary: np.ndarray, attrs: Mapping[Any, Any]) -> xr.Variable:
    """The labels ``vocabulary[codes]`` over ``query``; for dask codes a dask array whose
    ``encoding`` keeps the vocabulary and the codes (:func:`query_codes`)."""
    data = words_of(codes, vocabulary)
    variable = xr.Variable((QUERY,), data, dict(attrs))
    if not isinstance(codes, np.ndarray):
        variable.encoding = {VOCABULARY: vocabulary, _FILE_CODES: (data.name, codes)}
    return variable


def _cutting_query_chunk(plain: xr.Dataset, chunks: Any) -> int | None:
    """The number of queries per chunk in ``chunks`` when it cuts the stored chunks of a variable
    of ``plain`` apart (it is neither a multiple of them nor the whole ``query`` dim), else None.
    """
    queries = chunks.get(QUERY) if isinstance(chunks, Mapping) else None
    if not is_integer(queries) or int(queries) < 1:
        return None  # "auto", -1, a tuple of sizes: xarray's own handling
    for variable in plain.variables.values():
        stored = variable.encoding.get("preferred_chunks", {}).get(QUERY)
        if stored and int(queries) < variable.sizes.get(QUERY, 0) and int(queries) % stored:
            return int(queries)
    return None


def _text_back(cube: xr.Dataset, path: Path, names: list[str]) -> xr.Dataset:
    """``cube`` with the variables ``names`` of ``path`` read into memory and put back."""
    if not names:
        return cube
    with xr.open_dataset(path, engine="h5netcdf") as plain:
        text = {name: plain[name].load() for name in names}
        coords = {name for name in names if name in plain.coords}
    cube = cube.assign_coords({n: v for n, v in text.items() if n in coords})
    return cube.assign({n: v for n, v in text.items() if n not in coords})


def _encode_block(
    block: np.ndarray, vocabulary: np.ndarray, code_type: np.dtype, coordinate: str
) -> np.ndarray:
    """The codes of ``block`` in the sorted ``vocabulary`` of ``coordinate``; every value
    must be in it."""
    codes = np.searchsorted(vocabulary, block)
    if not block.size:
        return codes.astype(code_type)
    found = vocabulary[np.minimum(codes, max(vocabulary.size - 1, 0))] == block
    if vocabulary.size == 0 or not found.all():
        bad = block.reshape(-1)[np.argmin(found.reshape(-1)) if vocabulary.size else 0]
        raise InvalidInputError(
            f"query coordinate {coordinate!r}: label {str(bad)!r} is not in its vocabulary "
            f"({vocabulary.size} labels); expected one of the labels the file recorded"
        )
    return codes.astype(code_type)


def query_codes(labels: xr.DataArray) -> tuple[Any, np.ndarray]:
    """Integer codes and sorted vocabulary of string labels over ``query``: ``vocabulary[codes]``
    is ``labels``.

    In-memory labels are encoded once (the runs of equal labels, then their distinct values
    sorted). Lazy labels of a cube opened with ``chunks=`` are never materialised as strings:
    straight from the file the codes are those read at the open (a dask array); after a
    selection they are looked up chunk by chunk in the vocabulary read at the open. Lazy labels
    without a known vocabulary (a cube chunked in memory) are read into memory and encoded.

    Examples
    --------
    >>> codes, vocabulary = query_codes(xr.DataArray(["b", "a", "b"], dims="query"))
    >>> codes.tolist(), vocabulary.tolist()
    ([1, 0, 1], ['a', 'b'])
    """
    data = labels.data
    vocabulary = labels.encoding.get(VOCABULARY)
    if labels.chunks is None or vocabulary is None:
        values = np.asarray(labels.values)
        vocabulary, codes = _encode(values.reshape(-1).astype(str, copy=False))
        return codes.reshape(labels.shape).astype(code_dtype(vocabulary.size)), vocabulary
    raw = labels.encoding.get(_FILE_CODES)
    if raw is not None and raw[0] == data.name:
        return raw[1], vocabulary
    dtype = code_dtype(vocabulary.size)
    return data.map_blocks(
        _encode_block,
        vocabulary=vocabulary,
        code_type=dtype,
        coordinate=str(labels.name),
        dtype=dtype,
        meta=np.array((), dtype),
    ), vocabulary


def _is_label(variable: xr.Variable) -> bool:
    """Stored as a label column (:func:`_labelled`): a string variable over ``query`` alone."""
    return variable.dims == (QUERY,) and _is_str_dtype(variable.dtype) and variable.size > 0


def _labelled(cube: xr.Dataset) -> tuple[xr.Dataset, dict[Hashable, dict[str, Any]]]:
    """``cube`` with its string variables over ``query`` as UTF-8 bytes (``_Encoding`` in
    their attrs: xarray writes them as character arrays on a ``string<N>`` dim and decodes
    them to text on reading), and their encodings: gzip level 1, HDF5 chunks of 10,000 queries.
    The bytes are taken from the encoded vocabulary by code, never encoded label by label."""
    encoding: dict[Hashable, dict[str, Any]] = {}
    coords: dict[Hashable, xr.Variable] = {}
    variables: dict[Hashable, xr.Variable] = {}
    for name, variable in cube.variables.items():
        if not _is_label(variable):
            continue
        data = label_bytes(*query_codes(xr.DataArray(variable)))
        target = coords if name in cube.coords else variables
        target[name] = xr.Variable((QUERY,), data, {**variable.attrs, TEXT_ENCODING: "utf-8"})
        chunk = (min(variable.size, _STORAGE_CHUNKS[QUERY]), data.dtype.itemsize)
        encoding[name] = {"zlib": True, "complevel": 1, "chunksizes": chunk}
    return cube.assign_coords(coords).assign(variables), encoding


def _decoded(cube: xr.Dataset) -> xr.Dataset:
    """A file cube of layout 2 with its coded variables decoded: ``vocabulary[codes]`` in
    memory; for a lazy cube a dask array decoded chunk by chunk (:func:`_label_variable`)."""
    coded = _coded_variables(cube)
    coords: dict[Hashable, xr.Variable] = {}
    variables: dict[Hashable, xr.Variable] = {}
    for name, dim in coded.items():
        vocabulary = np.asarray(cube[dim].values).astype(str)
        variable = cube.variables[name]
        attrs = {k: v for k, v in variable.attrs.items() if k != _VOCABULARY_OF}
        codes = variable.data
        if variable.chunks is None:
            codes = np.asarray(codes)
            if codes.size and not (codes.min() >= 0 and codes.max() < vocabulary.size):
                raise InvalidInputError(
                    f"query coordinate {str(name)!r}: codes {int(codes.min())} .. "
                    f"{int(codes.max())}, but its vocabulary {dim!r} has {vocabulary.size} "
                    "labels; expected codes 0 .. (labels - 1)"
                )
        target = coords if name in cube.coords else variables
        target[name] = _label_variable(codes, vocabulary, attrs)
    cube = cube.drop_vars(list(coded.values()))
    return cube.assign_coords(coords).assign(variables)


def _coded_variables(cube: xr.Dataset) -> dict[Hashable, str]:
    """The coded variables of a file cube and their vocabulary variables: those that name it in
    their attrs, and those that lost the attr to an edit with plain xarray (which drops attrs
    when a coordinate is replaced): integer codes ``<name>`` over ``query`` beside a vocabulary
    ``<name>_vocabulary`` on its own dim, as :func:`save` of layout 2 named them."""
    coded = {
        n: str(v.attrs[_VOCABULARY_OF])
        for n, v in cube.variables.items()
        if _VOCABULARY_OF in v.attrs
    }
    for name, variable in cube.variables.items():
        if name in coded or variable.dims != (QUERY,) or variable.dtype.kind not in "iu":
            continue
        dim = f"{name}_vocabulary"
        vocabulary = cube.variables.get(dim)
        if vocabulary is not None and vocabulary.dims == (dim,) and dim not in coded.values():
            coded[name] = dim
    return coded


def save(cube: xr.Dataset, path: str | os.PathLike[str] | io.BytesIO) -> None:
    """Write ``cube`` to a netCDF-4 (HDF5) file with the h5netcdf engine, atomically.

    The cube is validated first, written to a temporary file next to ``path`` (or into memory,
    :func:`metricalc.fileio.hdf5_target`) and renamed over it (:func:`os.replace`), so
    ``path`` never holds a half-written cube, and a full disk is an ``OSError`` that leaves the
    old file. ``path`` may also be a :class:`io.BytesIO` to write into. The string
    coordinates over ``query`` (``scene``, ``pair``, ``keypoint_set``, ``split``) are stored as
    gzip-compressed UTF-8 character arrays (netCDF ``char`` with a ``string<N>`` dimension and
    ``_Encoding = "utf-8"``, the CF convention: plain xarray and netCDF tools show them as
    text; :mod:`metricalc.cube.labels`), the other strings as variable-length UTF-8 (netCDF-4
    ``string``); both are readable by netCDF-C, h5py and xarray. Numeric variables are
    gzip-compressed (level 1, shuffle). Lazy (dask) cubes are written chunk by chunk.

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
    out, encoding = _labelled(cube.copy(deep=False))
    for name, variable in out.variables.items():
        variable.encoding = {}
        if name in encoding:
            continue
        if _is_str_dtype(variable.dtype) and QUERY in variable.dims and variable.size:
            # strings over (descriptor, query) and more: fixed-width UTF-8 characters, compressed
            # (as variable-length strings each value costs ~40 bytes)
            encoding[name] = {"dtype": "S1", "zlib": True, "complevel": 1}
        elif _is_str_dtype(variable.dtype):
            encoding[name] = {"dtype": str}
        elif variable.size and name not in cube.dims:
            chunks = tuple(
                min(size, _STORAGE_CHUNKS.get(str(dim), size))
                for dim, size in zip(variable.dims, variable.shape, strict=True)
            )
            encoding[name] = {"zlib": True, "complevel": 1, "shuffle": True, "chunksizes": chunks}
    out.attrs = {**plain_attrs(out.attrs), FORMAT_ATTR: FILE_FORMAT}
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
        cube, apart, labels = _opened(path, chunks)
    except InvalidInputError as error:
        raise InvalidInputError(f"cube file {path} is not a valid QueryCube: {error}") from None
    except READ_ERRORS as error:
        raise InvalidInputError(
            f"cube file {path} is not a readable netCDF-4/HDF5 file: {type(error).__name__}: "
            f"{error}"
        ) from error
    if chunks is None:
        cube = _load_all(cube, path)
    try:
        cube = _with_labels(_decoded(cube), labels)
    except InvalidInputError as error:
        cube.close()
        raise InvalidInputError(f"cube file {path} is not a valid QueryCube: {error}") from None
    if chunks is not None:
        cube = _load_small(cube, path, apart)
    cube = cube.assign_coords(_unicode(cube.coords)).assign(_unicode(cube.data_vars))
    cube.attrs = {k: v for k, v in plain_attrs(cube.attrs).items() if k != FORMAT_ATTR}
    cube = _add_later_variables(cube)
    try:
        return validate(cube)
    except InvalidInputError as error:
        cube.close()
        hint = _PAIR_CUBE_HINT if cube.attrs.get("task") == "verification" else ""
        message = f"cube file {path} is not a valid QueryCube: {error}{hint}"
        raise InvalidInputError(message) from None


_PAIR_CUBE_HINT = (
    "; it is an HPatches CVPR'17 verification pair cube: "
    "metricalc compare reads it (and patches hpatches-compare)"
)
"""Said of a verification pair cube (``patches hpatches-eval --out``) opened as a QueryCube."""


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
    """A lazy ``cube`` with the small per-descriptor and per-sequence variables, the string
    variables of the layout before version 2 (variable-length strings over ``query``) and the
    text variables ``apart`` read now; the data and coordinates over ``query`` stay lazy (the
    string coordinates decoded chunk by chunk, :func:`_decoded`)."""
    small = [
        name
        for name, variable in cube.variables.items()
        if variable.chunks is not None
        and VOCABULARY not in variable.encoding
        and (not {QUERY} & set(map(str, variable.dims)) or variable.dtype == object)
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
