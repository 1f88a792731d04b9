"""NumPy arrays from and to pyarrow arrays through their buffers.

pyarrow's own conversions (``Array.to_numpy``, ``pa.array(ndarray)``, Python scalars as
arguments) pass through its pandas bridge, which imports pandas on first use: 0.2 to 0.3 s that
``metricalc trec-eval`` on a small run would spend on a library it never uses. The arrays
exchanged here are plain fixed-width numbers (and validity bitmaps), whose buffers NumPy reads
and writes without a copy, so going through the buffers is as fast and needs no pandas.

Arrow's compute functions are called by name (:func:`call`) through ``pyarrow._compute``, the
extension module that ``pyarrow.compute`` wraps: importing ``pyarrow.compute`` writes a Python
function with a parsed docstring for each of several hundred kernels (and loads ``pydoc``),
about a tenth of a second that every ``metricalc trec-eval`` on a large run paid for the eight
kernels it calls (``Array.take`` imports it too, so :func:`take` is here).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

try:  # the extension module pyarrow.compute wraps (see above); the public module otherwise
    from pyarrow._compute import SetLookupOptions, call_function
except ImportError:  # pragma: no cover - a pyarrow that moved its extension module
    from pyarrow.compute import SetLookupOptions, call_function

__all__ = ["call", "from_bytes", "from_numpy", "index_in", "take", "to_numpy"]


def call(name: str, *args: Any, options: Any = None) -> Any:
    """The Arrow compute function ``name`` (``pyarrow.compute.<name>``) of ``args``.

    Examples
    --------
    >>> call("min", from_numpy(np.array([3, 1, 2]))).as_py()
    1
    """
    return call_function(name, list(args), options)


def take(values: pa.Array, indices: np.ndarray) -> pa.Array:
    """``values[indices]`` (``Array.take``).

    Examples
    --------
    >>> take(pa.array([b"a", b"b", b"c"]), np.array([2, 0])).to_pylist()
    [b'c', b'a']
    """
    return call("take", values, from_numpy(indices))


def to_numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The numbers of ``values`` (integers or floats, no nulls) as a read-only NumPy array.

    Examples
    --------
    >>> to_numpy(from_numpy(np.array([3, 1, 2]))[1:]).tolist()
    [1, 2]
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if values.null_count:
        raise ValueError("to_numpy takes arrays without nulls")
    dtype = np.dtype(values.type.to_pandas_dtype())
    data = values.buffers()[1]
    if data is None:  # an empty array may have no buffer
        return np.zeros(0, dtype=dtype)
    result: np.ndarray = np.frombuffer(data, dtype=dtype, count=len(values),
                                       offset=values.offset * dtype.itemsize)
    return result


def from_numpy(values: np.ndarray) -> pa.Array:
    """A pyarrow array of the numbers of ``values`` (one-dimensional), sharing its memory."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size,
                                 [None, pa.py_buffer(values)])


def from_bytes(values: np.ndarray) -> pa.Array:
    """A pyarrow binary array of the values of a NumPy bytes array (without the NUL bytes that
    pad them, as NumPy reads them).

    Examples
    --------
    >>> from_bytes(np.array([b"q1", b"q10", b""])).to_pylist()
    [b'q1', b'q10', b'']
    """
    values = np.ascontiguousarray(values)
    width = values.dtype.itemsize
    length = np.strings.str_len(values).astype(np.int64)
    chars = values.view(np.uint8).reshape(values.size, width)
    data = chars[np.arange(width) < length[:, None]]
    offsets = np.r_[0, np.cumsum(length)].astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), values.size,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def index_in(values: pa.Array | pa.ChunkedArray, value_set: pa.Array) -> np.ndarray:
    """Index of each of ``values`` in ``value_set`` (a hash lookup), -1 where absent.

    Examples
    --------
    >>> index_in(from_numpy(np.array([5, 7, 9])), from_numpy(np.array([9, 5]))).tolist()
    [1, -1, 0]
    """
    found = call("index_in", values, options=SetLookupOptions(value_set))
    if isinstance(found, pa.ChunkedArray):
        found = found.combine_chunks()
    n, offset = len(found), found.offset
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    index = np.frombuffer(found.buffers()[1], dtype=np.int32, count=offset + n)[offset:]
    index = index.astype(np.int64)
    if found.null_count:
        bits = np.frombuffer(found.buffers()[0], dtype=np.uint8)
        valid = np.unpackbits(bits, count=offset + n, bitorder="little")[offset:]
        index[valid == 0] = -1
    return index
