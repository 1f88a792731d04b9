"""Query labels in cube files: the string coordinates over ``query`` (``scene``, ``split``,
``pair``, ``keypoint_set``) as compressed UTF-8 character arrays that plain xarray and netCDF
tools show as text, read back by metricalc as integer codes into a sorted vocabulary.

A label column has a few distinct values in long runs (one scene, one pair), so both ways only
touch the distinct values as Python strings: :func:`label_bytes` encodes the vocabulary and takes
it by code; :func:`read_labels` finds the runs of equal labels block by block, decodes the
distinct ones and keeps one small integer code per query (:func:`code_dtype`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from metricalc.cube.model import QUERY
from metricalc.errors import InvalidInputError

TEXT_ENCODING = "_Encoding"
"""Attribute of a netCDF character array naming the encoding of its bytes (CF; xarray decodes
it)."""

_BLOCK_BYTES = 16 * 2**20
"""Bytes of characters read at a time by :func:`read_labels`."""


def code_dtype(size: int) -> np.dtype:
    """The smallest unsigned integer dtype holding the codes of a vocabulary of ``size``.

    Examples
    --------
    >>> str(code_dtype(256)), str(code_dtype(257))
    ('uint8', 'uint16')
    """
    return np.min_scalar_type(max(size - 1, 0))


def label_bytes(codes: Any, vocabulary: np.ndarray) -> Any:
    """The UTF-8 bytes (fixed width ``S<n>``, ``n`` the longest label's bytes) of the labels
    ``vocabulary[codes]``: only the vocabulary is encoded, the labels are taken from it by code
    (per block for dask codes).

    Examples
    --------
    >>> labels = label_bytes(np.array([1, 0, 1]), np.array(["a", "ñ"]))
    >>> labels.tolist(), str(labels.dtype)
    ([b'\\xc3\\xb1', b'a', b'\\xc3\\xb1'], '|S2')
    """
    encoded = np.array([word.encode("utf-8") for word in vocabulary.tolist()] or [b""])
    return words_of(codes, encoded)


def words_of(codes: Any, words: np.ndarray) -> Any:
    """``words[codes]``: at once for NumPy codes, block by block (a dask array) for dask codes.

    Examples
    --------
    >>> words_of(np.array([2, 0]), np.array(["a", "b", "c"])).tolist()
    ['c', 'a']
    """
    if isinstance(codes, np.ndarray):
        return _take(codes, words)
    return codes.map_blocks(_take, words, dtype=words.dtype, meta=np.array((), words.dtype))


def _take(codes: np.ndarray, words: np.ndarray) -> np.ndarray:
    taken: np.ndarray = words[codes]
    return taken


def is_char_labels(variable: xr.Variable) -> bool:
    """A character array (netCDF ``char``, NumPy ``S1``) of one label per query, as xarray
    opens it with ``concat_characters=False``: dims ``(query, <string dim>)``."""
    return variable.dtype == np.dtype("S1") and variable.ndim == 2 and variable.dims[0] == QUERY


def read_labels(variable: xr.Variable, name: Hashable) -> tuple[np.ndarray, np.ndarray]:
    """Codes and sorted ``<U`` vocabulary of a character array of labels (:func:`is_char_labels`),
    read in blocks of about 16 MiB from a lazily indexed file variable.

    In each block the runs of equal labels are found (:func:`_run_heads`); their first labels,
    as fixed-width bytes (trailing NUL characters are padding, as in netCDF), give the block's
    distinct labels, which are merged over the blocks, decoded with the variable's
    ``_Encoding`` (UTF-8 when absent) and sorted by code point: ``vocabulary[codes]`` are the
    labels.

    Raises
    ------
    InvalidInputError
        Naming the variable, when a label is not text in its encoding.

    Examples
    --------
    >>> chars = xr.Variable(("query", "string3"), np.array([b"b", b"a", b"ab"]).view("S1")
    ...                     .reshape(3, 2)[:, [0, 1, 1]])
    >>> codes, vocabulary = read_labels(chars, "scene")
    >>> vocabulary[codes].tolist()
    ['b', 'a', 'abb']
    """
    n, width = variable.shape
    if width == 0:  # no characters: every label is empty
        return np.zeros(n, dtype=np.uint8), np.array([""])
    step = max(_BLOCK_BYTES // width, 1)
    blocks = []
    for start in range(0, n, step):
        chars = np.ascontiguousarray(np.asarray(variable[start : start + step].values))
        heads = _run_heads(chars)
        words, inverse = np.unique(chars[heads].view(f"S{width}")[:, 0], return_inverse=True)
        lengths = np.diff(np.append(heads, len(chars)))
        blocks.append((words, np.repeat(inverse.astype(code_dtype(words.size)), lengths)))
    distinct = np.unique(np.concatenate([words for words, _ in blocks] or [np.array([b""])]))
    vocabulary = _decoded_words(distinct, str(variable.attrs.get(TEXT_ENCODING, "utf-8")), name)
    order = np.argsort(vocabulary, kind="stable")
    rank = np.empty(order.size, dtype=code_dtype(order.size))
    rank[order] = np.arange(order.size)
    parts = [rank[np.searchsorted(distinct, words)][codes] for words, codes in blocks]
    codes = np.concatenate(parts) if parts else np.empty(0, dtype=rank.dtype)
    sorted_words: np.ndarray = vocabulary[order]
    return codes, sorted_words


def _run_heads(chars: np.ndarray) -> np.ndarray:
    """Rows of a C-contiguous ``(m, width)`` character block that start the runs of equal
    rows: row 0 and every row that differs from the one before, and possibly more rows (a run
    cut in two; its label is the same).

    The block's bytes are compared with themselves shifted by one row, 8 bytes (one uint64) at
    a time; a differing word marks every row its 8 bytes touch. Labels come in long runs, so
    few words differ."""
    m, width = chars.shape
    flat = chars.view(np.uint8).reshape(-1)
    later, earlier = flat[width:], flat[:-width]  # byte i of row r + 1, of row r
    whole = later.size // 8 * 8
    words = np.flatnonzero(later[:whole].view(np.uint64) != earlier[:whole].view(np.uint64))
    tail = np.flatnonzero(later[whole:] != earlier[whole:]) + whole
    touched = np.concatenate([(8 * words[:, None] + np.arange(8)).reshape(-1), tail])
    rows = touched // width + 1
    return np.unique(np.r_[0, rows[rows < m]]) if m else np.empty(0, dtype=np.int64)


def _decoded_words(words: np.ndarray, encoding: str, name: Hashable) -> np.ndarray:
    """The ``<U`` text of byte strings in ``encoding``."""
    text = []
    for word in words.tolist():
        try:
            text.append(word.decode(encoding))
        except (UnicodeDecodeError, LookupError) as error:
            raise InvalidInputError(
                f"query coordinate {str(name)!r}: label {word!r} is not {encoding} text "
                f"({error}); expected labels encoded as its attribute _Encoding says"
            ) from None
    return np.array(text, dtype=str)
