r"""HPatches CVPR'17 verification pairs as a pair cube: one unit per pair, its distance and label.

The verification numbers are pooled statistics (a ROC AUC and an AP over a whole list of
pairs), not means over units, so the pairs are not QueryCube queries: a pair cube is its own
small labeled Dataset, and :func:`verification_from_cube` recomputes the reference's numbers
from it exactly (:func:`metricalc.benchmarks.hpatches_cvpr17.evaluate.verification_scores`).

Layout (one file holds one or more descriptors evaluated on the same pairs):

- dims ``descriptor``, ``level`` (``easy``, ``hard``, ``tough``), ``pair``;
- ``pair`` runs over the rows of ``verif_neg_inter``, then ``verif_neg_intra``, then
  ``verif_pos`` (:data:`KINDS`), each in file order; coordinates ``kind`` (the file) and
  ``row`` (the 0-based row in it): the file order matters, the imbalanced list is a prefix;
- ``distance`` (descriptor, level, pair), float64: the pair's descriptor distance at that
  level; ``label`` (pair,), int8: 1 for a positive pair, 0 for a negative one;
- ``first_sequence``, ``second_sequence`` (pair,), int32: the sequences of the pair's two
  patches, as indices into the coordinate ``sequence`` (dim ``sequence``, the names sorted).
  A pair's *sequence* is that of its first patch (:func:`pair_sequences`): positive and intra
  negative pairs lie in one sequence, an inter negative pair spans two and counts as its first
  patch's (the independent units of :mod:`metricalc.benchmarks.hpatches_cvpr17.statistic`). Files
  written
  before they were added lack both; they are still read, but not compared;
- attrs: ``task="verification"``, ``split``, ``distance`` (``l2`` / ``l1``),
  ``tie_policy="input_order"`` (per list the negatives come first and a stable sort keeps a
  tied negative ahead of a positive), ``ap_method="trapezoid"``, ``auc_method`` (the
  trapezoid of the per-item ROC), ``imbalanced`` (the prefix rule), ``pairs_source`` and
  ``pairs_sha256`` (a fingerprint of the six columns of the three pair files: two cubes with
  the same fingerprint scored the same pairs), ``metricalc_version``; and, in files written
  since it was added, ``dataset``: ``"hpatches-cvpr17 verification, split X"``, after
  ``"<data>: "`` for data metricalc generated (as the QueryCubes of
  :mod:`metricalc.benchmarks.hpatches_cvpr17.cube` say it).

Per level and negative file (``inter``, ``intra``) the reference's list is (negatives,
positives): ``balanced`` = ROC AUC over all of it, ``imbalanced`` = AP over its first
:math:`n_{pos} + \lfloor 0.2\,n_{pos} \rfloor` items.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc.benchmarks.hpatches_cvpr17.evaluate import (
    LEVEL_NAMES,
    VerificationDistances,
    summarise_verification,
)
from metricalc.benchmarks.hpatches_cvpr17.files import LEVELS, PairSet, dataset_attr
from metricalc.errors import InvalidInputError
from metricalc.fileio import hdf5_target
from metricalc.version import __version__

__all__ = [
    "KINDS",
    "PAIR_CUBE_ATTRS",
    "open_pair_cube",
    "pair_cube",
    "pair_lists",
    "pair_sequences",
    "pairs_fingerprint",
    "save_pair_cube",
    "validate_pair_cube",
    "verification_from_cube",
]

KINDS: tuple[str, ...] = ("neg_inter", "neg_intra", "pos")
"""The pair files in the order of the ``pair`` dim."""

PAIR_CUBE_ATTRS: tuple[str, ...] = (
    "task",
    "split",
    "distance",
    "tie_policy",
    "ap_method",
    "auc_method",
    "imbalanced",
    "pairs_source",
    "pairs_sha256",
    "metricalc_version",
)
"""The attrs every pair cube holds."""

_FIXED = {
    "task": "verification",
    "tie_policy": "input_order",
    "ap_method": "trapezoid",
    "auc_method": "trapezoid of the per-item ROC",
    "imbalanced": "first n_pos + int(0.2 n_pos) items of (negatives, positives)",
}
_COLUMNS = ("s1", "t1", "idx1", "s2", "t2", "idx2")


def pairs_fingerprint(pairs: PairSet) -> str:
    """SHA-256 of the pair files' columns (sequence names as UTF-8 lines, integers as int64)."""
    digest = hashlib.sha256()
    for kind in KINDS:
        digest.update(kind.encode())
        for name, column in zip(_COLUMNS, pairs.pairs[kind], strict=True):
            values = np.asarray(column)
            if name.startswith("s"):
                digest.update("\n".join(values.astype(str).tolist()).encode())
            else:
                digest.update(values.astype("<i8").tobytes())
    return digest.hexdigest()


def pair_cube(
    distances: VerificationDistances,
    pairs: PairSet,
    *,
    descriptor: str,
    split: str,
    distance: str = "l2",
    data: str = "",
) -> xr.Dataset:
    """The pair cube of one descriptor from its verification distances
    (:func:`metricalc.benchmarks.hpatches_cvpr17.evaluate.verification_distances`) and their pairs;
    ``data``
    names generated data (``""``: the HPatches release)."""
    dataset = f"hpatches-cvpr17 verification, split {split}"
    sizes = [np.asarray(distances[LEVELS[0]][kind]).size for kind in KINDS]
    values = np.stack(
        [np.concatenate([np.asarray(distances[lv][k], np.float64) for k in KINDS]) for lv in LEVELS]
    )
    kind = np.repeat(np.array(KINDS), sizes)
    first = np.concatenate([np.asarray(pairs.pairs[k][0]).astype(str) for k in KINDS])
    second = np.concatenate([np.asarray(pairs.pairs[k][3]).astype(str) for k in KINDS])
    names, codes = np.unique(np.concatenate([first, second]), return_inverse=True)
    cube = xr.Dataset(
        {
            "distance": (("descriptor", "level", "pair"), values[None]),
            "label": ("pair", (kind == "pos").astype(np.int8)),
            "first_sequence": ("pair", codes[: first.size].astype(np.int32)),
            "second_sequence": ("pair", codes[first.size :].astype(np.int32)),
        },
        coords={
            "sequence": names,
            "descriptor": np.array([descriptor], dtype=str),
            "level": np.array(list(LEVEL_NAMES.values()), dtype=str),
            "kind": ("pair", kind),
            "row": ("pair", np.concatenate([np.arange(n, dtype=np.int64) for n in sizes])),
        },
        attrs={
            **_FIXED,
            "split": split,
            "distance": distance,
            "dataset": dataset_attr(data, dataset),
            "pairs_source": pairs.source,
            "pairs_sha256": pairs_fingerprint(pairs),
            "metricalc_version": __version__,
        },
    )
    return validate_pair_cube(cube)


def _fail(where: str, message: str) -> InvalidInputError:
    return InvalidInputError(f"{where}: {message}")


def _check_layout(cube: xr.Dataset, where: str) -> None:
    expected: dict[str, tuple[str, ...]] = {
        "distance": ("descriptor", "level", "pair"),
        "label": ("pair",),
        "kind": ("pair",),
        "row": ("pair",),
        "descriptor": ("descriptor",),
        "level": ("level",),
    }
    for name, dims in expected.items():
        if name not in cube.variables:
            raise _fail(where, f"lacks the variable {name!r} over {dims} (not a pair cube)")
        if cube.variables[name].dims != dims:
            raise _fail(where, f"variable {name!r} must have dims {dims}; got "
                               f"{cube.variables[name].dims}")  # fmt: skip
    for name in PAIR_CUBE_ATTRS:
        if name not in cube.attrs:
            raise _fail(where, f"lacks the attr {name!r} (not a pair cube)")
    if cube.attrs["task"] != "verification":
        raise _fail(where, f"attr task must be 'verification'; got {cube.attrs['task']!r}")
    levels = np.asarray(cube["level"].values).astype(str).tolist()
    if levels != list(LEVEL_NAMES.values()):
        raise _fail(where, f"level must be {list(LEVEL_NAMES.values())}; got {levels}")
    names = np.asarray(cube["descriptor"].values).astype(str)
    if names.size == 0 or len(set(names.tolist())) != names.size:
        raise _fail(where, f"descriptor names must be unique, at least one; got {names.tolist()}")


def _check_pairs(cube: xr.Dataset, where: str) -> None:
    kind = np.asarray(cube["kind"].values).astype(str)
    row = np.asarray(cube["row"].values)
    label = np.asarray(cube["label"].values)
    bad = ~np.isin(kind, KINDS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(where, f"kind must be one of {KINDS}; got {kind[i]!r} at pair {i}")
    codes = np.searchsorted(np.array(KINDS), kind)  # KINDS is sorted
    if (np.diff(codes) < 0).any():
        raise _fail(where, f"pairs must be grouped by kind in the order {KINDS}")
    starts = np.searchsorted(codes, codes, side="left")
    off = row != np.arange(row.size) - starts
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise _fail(where, f"row must count 0, 1, ... within each kind; got {row[i]} at pair {i}")
    wrong = label != (kind == "pos")
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise _fail(where, f"label must be 1 exactly for kind 'pos'; got {label[i]} at pair {i}")
    d = np.asarray(cube["distance"].values)
    if d.dtype != np.float64 or not (np.isfinite(d) & (d >= 0)).all():
        raise _fail(where, "distance must hold finite float64 values >= 0")
    _check_sequences(cube, where)


def _check_sequences(cube: xr.Dataset, where: str) -> None:
    """The pairs' sequences, where the file has them: indices into ``sequence``."""
    names = ("first_sequence", "second_sequence")
    held = [name in cube.variables for name in names]
    if not any(held):
        return
    if not all(held) or "sequence" not in cube.coords:
        raise _fail(where, f"must hold all of {names} and the coordinate 'sequence', or none")
    count = cube.sizes["sequence"]
    for name in names:
        codes = np.asarray(cube[name].values)
        if cube[name].dims != ("pair",) or not np.issubdtype(codes.dtype, np.integer):
            raise _fail(where, f"variable {name!r} must be integers over ('pair',)")
        bad = (codes < 0) | (codes >= count)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _fail(where, f"{name} must index the {count} sequences; got {codes[i]} at "
                               f"pair {i}")  # fmt: skip


def validate_pair_cube(cube: xr.Dataset, where: str = "pair cube") -> xr.Dataset:
    """Check the layout, attrs and values of a pair cube (module docstring); return it.

    Errors are one-line :class:`~metricalc.errors.InvalidInputError` starting with ``where``.
    """
    if not isinstance(cube, xr.Dataset):
        raise _fail(where, f"expected an xarray.Dataset; got {type(cube).__name__}")
    _check_layout(cube, where)
    _check_pairs(cube, where)
    return cube


def save_pair_cube(cube: xr.Dataset, path: str | os.PathLike[str] | io.BytesIO) -> None:
    """Write a pair cube to netCDF-4 (h5netcdf), atomically (a temporary file renamed over
    ``path``); ``kind`` as compressed characters, numbers gzip-compressed."""
    validate_pair_cube(cube)
    out = cube.copy(deep=False)
    encoding: dict[Hashable, dict[str, Any]] = {"kind": {"dtype": "S1", "zlib": True}}
    for name in ("distance", "label", "row"):
        encoding[name] = {"zlib": True, "complevel": 1, "shuffle": True}
    for name in ("descriptor", "level", "sequence"):
        if name in out.variables:
            encoding[name] = {"dtype": str}
    for name in ("first_sequence", "second_sequence"):
        if name in out.variables:
            encoding[name] = {"zlib": True, "complevel": 1, "shuffle": True}
    if isinstance(path, io.BytesIO):
        out.to_netcdf(path, engine="h5netcdf", encoding=encoding)
        return
    with hdf5_target(path, estimate=int(out.nbytes)) as target:
        out.to_netcdf(target, engine="h5netcdf", encoding=encoding)


def open_pair_cube(path: str | os.PathLike[str]) -> xr.Dataset:
    """Read a pair cube written by :func:`save_pair_cube` and check it (errors name the file)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"pair cube file {path} does not exist")
    try:
        with xr.open_dataset(path, engine="h5netcdf") as handle:
            cube = handle.load()
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"{path}: not a netCDF-4 file ({error})") from None
    for name in ("descriptor", "level", "kind", "sequence"):
        if name in cube.variables:
            cube[name] = cube[name].astype(str)
    return validate_pair_cube(cube, str(path))


def pair_lists(cube: xr.Dataset, descriptor: str) -> dict[str, dict[str, np.ndarray]]:
    """A descriptor's distances per level name and kind, in file order."""
    names = np.asarray(cube["descriptor"].values).astype(str).tolist()
    if descriptor not in names:
        raise InvalidInputError(f"descriptor: expected one of {names}, got {descriptor!r}")
    kind = np.asarray(cube["kind"].values).astype(str)
    d = np.asarray(cube["distance"].values)[names.index(descriptor)]
    return {
        level: {k: d[li, kind == k] for k in KINDS} for li, level in enumerate(LEVEL_NAMES.values())
    }


def pair_sequences(cube: xr.Dataset, where: str = "pair cube") -> tuple[np.ndarray, np.ndarray]:
    """The sequence names and, per pair, the index of its sequence: that of its first patch
    (module docstring). A file written before the pairs' sequences were recorded: a one-line
    error saying to run ``patches hpatches-eval --out`` again.

    >>> from metricalc.benchmarks.hpatches_cvpr17.files import PairSet
    >>> d = {lv: {k: np.array([0.5]) for k in KINDS} for lv in LEVELS}
    >>> pairs = PairSet({"neg_inter": (["v_b"], [0], [0], ["i_a"], [1], [0]),
    ...                  "neg_intra": (["i_a"], [0], [0], ["i_a"], [1], [1]),
    ...                  "pos": (["v_b"], [0], [2], ["v_b"], [3], [2])}, "x")
    >>> names, codes = pair_sequences(pair_cube(d, pairs, descriptor="sift", split="a"))
    >>> names.tolist(), codes.tolist()
    (['i_a', 'v_b'], [1, 0, 1])
    """
    if "first_sequence" not in cube.variables:
        raise InvalidInputError(
            f"{where}: lacks the pairs' sequences (written by an older metricalc); run "
            "`metricalc patches hpatches-eval --out` again to compare it by sequence"
        )
    names = np.asarray(cube["sequence"].values).astype(str)
    return names, np.asarray(cube["first_sequence"].values, dtype=np.int64)


def verification_from_cube(
    cube: xr.Dataset, descriptors: Sequence[str] | None = None
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """The reference's verification numbers recomputed from a pair cube:
    ``{descriptor: {level: {balanced|imbalanced: {inter, intra}}}}``, equal to
    :func:`metricalc.benchmarks.hpatches_cvpr17.evaluate.verification` on the same pairs."""
    validate_pair_cube(cube)
    names = np.asarray(cube["descriptor"].values).astype(str).tolist()
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name in names if descriptors is None else descriptors:
        lists = pair_lists(cube, name)  # by level name; the summary reads level letters
        out[name] = summarise_verification({k: lists[v] for k, v in LEVEL_NAMES.items()})
    return out
