"""Query identity: integer keys of ``(scene, pair, keypoint_set, query_keypoint)``, grouping and
repeats.

:func:`~metricalc.cube.validate` uses them to find a query given twice,
:func:`~metricalc.cube.combine` to match the queries of several cubes and
:func:`~metricalc.cube.from_dataframe` to turn table rows into cube cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from metricalc.cube.model import _PAIR, QUERY_IDENTITY


def _encode(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values of a 1-D array and the code of every element.

    Cube coordinates come in long runs of equal values (one scene, one pair), so only the heads
    of the runs are sorted; NumPy (not pandas) keeps fixed-width strings fast.
    """
    values = np.asarray(values)
    if values.size == 0:
        return values[:0], np.empty(0, dtype=np.int64)
    heads = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    uniques, inverse = np.unique(values[heads], return_inverse=True)
    lengths = np.diff(np.r_[heads, values.size])
    return uniques, np.repeat(inverse.astype(np.int64), lengths)


class _Words:
    """A string column encoded once: the code of every row (a small integer type) and the
    distinct words (``<U``)."""

    def __init__(self, codes: np.ndarray, words: np.ndarray) -> None:
        self.codes = codes
        self.words = words

    @classmethod
    def constant(cls, n: int, word: str) -> _Words:
        """``word`` in every one of ``n`` rows."""
        return cls(np.zeros(n, dtype=np.int8), np.array([word]))

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The ``<U`` words of ``rows``."""
        words: np.ndarray = self.words[self.codes[rows]]
        return words


def _pair_sort_key(pair: str) -> tuple[int, int, str]:
    """Pairs sort numerically ("1-10" after "1-9"); labels that are not "a-b" come first."""
    match = _PAIR.match(pair)
    return (int(match.group(1)), int(match.group(2)), pair) if match else (-1, -1, pair)


def _identity_keys(tables: Sequence[Mapping[str, np.ndarray]]) -> list[np.ndarray]:
    """Integer keys (n, 4) of the query identities of several tables.

    Columns: codes of scene, pair and keypoint_set in one vocabulary shared by all tables and
    sorted canonically (pairs numerically), then query_keypoint; sorting the keys sorts the
    queries by scene, pair, keypoint_set, query_keypoint.
    """
    columns: list[list[np.ndarray]] = []
    for name in ("scene", "pair", "keypoint_set"):
        encoded = [_encode(table[name]) for table in tables]
        words = {w for uniques, _ in encoded for w in uniques.tolist()}
        ordered = sorted(words, key=_pair_sort_key) if name == "pair" else sorted(words)
        code_of = {w: i for i, w in enumerate(ordered)}
        columns.append(
            [
                np.array([code_of[w] for w in uniques.tolist()], dtype=np.int64)[codes]
                for uniques, codes in encoded
            ]
        )
    return [
        np.column_stack(
            [columns[0][i], columns[1][i], columns[2][i], np.asarray(t["query_keypoint"], np.int64)]
        ).reshape(-1, 4)
        for i, t in enumerate(tables)
    ]


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group the equal rows of an integer key array.

    Returns the group of every row and the first (earliest) row of every group; groups are
    numbered in sorted key order.
    """
    if len(keys) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.lexsort(keys.T[::-1])  # stable: the earliest row of a group comes first
    ordered = keys[order]
    new = np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)]
    group = np.empty(len(keys), dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    return group, order[new]


def _repeated(keys: np.ndarray) -> tuple[int, int] | None:
    """(earlier row, later row) of the first repeated key, or None."""
    group, first = _groups(keys)
    repeat = first[group] != np.arange(len(group))
    if not repeat.any():
        return None
    later = int(np.flatnonzero(repeat)[0])
    return int(first[group[later]]), later


def _describe_query(coords: Mapping[str, np.ndarray], j: int) -> str:
    parts = ", ".join(f"{k}={coords[k][j].item()!r}" for k in QUERY_IDENTITY if k in coords)
    return f"query {j} ({parts})"


def _identity_text(coords: Mapping[str, np.ndarray], j: int) -> str:
    """``scene=..., pair=..., keypoint_set=..., query_keypoint=...`` of query (or row) ``j``."""
    return ", ".join(f"{k}={coords[k][j].item()!r}" for k in QUERY_IDENTITY)


def _first_appearances(codes: np.ndarray) -> np.ndarray:
    """The first row of every code, for codes numbered in order of first appearance (as
    :func:`pandas.factorize` numbers them): row i is a first exactly when its code exceeds every
    earlier code."""
    if len(codes) == 0:
        return np.empty(0, dtype=np.int64)
    seen = np.maximum.accumulate(codes)
    return np.flatnonzero(np.r_[True, codes[1:] > seen[:-1]])


def _canonical_ranks(name: str, words: Sequence[str]) -> np.ndarray:
    """The rank of every word in the canonical order of coordinate ``name`` (pairs numerically,
    the others as strings), the order :func:`_identity_keys` sorts queries in."""
    key = _pair_sort_key if name == "pair" else None
    order = sorted(range(len(words)), key=lambda i: key(words[i]) if key else words[i])
    ranks = np.empty(len(words), dtype=np.int64)
    ranks[order] = np.arange(len(words))
    return ranks


def _row_groups(columns: Sequence[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_groups` of the rows of integer columns (value, number of distinct values), each
    column in ``0 .. size - 1``, without building the (n, k) key array.

    The columns are folded into one int64 key (mixed radix, first column most significant) when
    the product of the sizes fits; equal keys are found by hashing (:func:`pandas.factorize`)
    and only the distinct keys are sorted.
    """
    total = 1
    for _, size in columns:
        total *= max(size, 1)
    if total >= 2**62:
        return _groups(np.column_stack([np.asarray(c, np.int64) for c, _ in columns]))
    key = np.zeros(len(columns[0][0]), dtype=np.int64)
    for values, size in columns:
        key *= max(size, 1)
        key += values
    codes, distinct = pd.factorize(key, use_na_sentinel=False)
    first = _first_appearances(codes)
    order = np.argsort(distinct, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], first[order]
