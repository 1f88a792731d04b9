"""Paired comparisons of descriptors' HPatches CVPR'17 verification numbers over sequences.

Each column of the verification summary (:data:`~metricalc.benchmarks.hpatches_cvpr17.verification.
COLUMNS`) is compared as every table statistic is (docs/stats.md): the difference of the
column's own pooled statistic, its paired cluster-bootstrap interval and the within-cluster
swap test, both resampling whole **sequences**
(:func:`metricalc.stats.compare.compare_statistic`,
:mod:`metricalc.benchmarks.hpatches_cvpr17.verification`). With fewer than
:data:`~metricalc.stats.compare.MIN_UNITS` sequences nothing is tested: the values only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc.benchmarks.hpatches_cvpr17.pairs import (
    pair_sequences,
    validate_pair_cube,
    verification_from_cube,
)
from metricalc.benchmarks.hpatches_cvpr17.verification import (
    COLUMNS,
    VerificationColumn,
    column_name,
    verification_statistics,
)
from metricalc.errors import InvalidInputError
from metricalc.stats.clustered import inference_steps
from metricalc.stats.compare import MIN_UNITS, compare_statistic

__all__ = [
    "compare_verification",
    "comparison_steps",
    "merge_pair_cubes",
    "not_tested",
    "select_descriptors",
    "verification_values",
]


def merge_pair_cubes(cubes: Sequence[xr.Dataset], where: Sequence[str]) -> xr.Dataset:
    """One pair cube of the descriptors of ``cubes`` (pair cubes of the same pairs: equal
    ``split``, ``pairs_sha256`` and sequences), named ``where`` in errors."""
    if not cubes:
        raise InvalidInputError("no pair cube given")
    first = cubes[0]
    for cube, name in zip(cubes, where, strict=True):
        validate_pair_cube(cube, name)
        pair_sequences(cube, name)
        for attr in ("split", "pairs_sha256"):
            if cube.attrs[attr] != first.attrs[attr]:
                raise InvalidInputError(
                    f"{name} and {where[0]} were scored on different verification pairs ({attr} "
                    "differs): evaluate both on the same split and pair files"
                )
    found = [str(n) for cube in cubes for n in np.asarray(cube["descriptor"].values).astype(str)]
    if len(set(found)) < len(found):
        twice = next(n for n in found if found.count(n) > 1)
        raise InvalidInputError(f"descriptor {twice!r} is in the pair cubes more than once")
    if len(cubes) == 1:
        return first
    distance = np.concatenate([np.asarray(c["distance"].values) for c in cubes])
    merged = first.drop_vars("distance").drop_dims("descriptor").assign_coords(descriptor=found)
    return merged.assign(distance=(("descriptor", "level", "pair"), distance))


def select_descriptors(cube: xr.Dataset, descriptors: Sequence[str] | None) -> xr.Dataset:
    """The pair cube of the two ``descriptors`` (all of them for None); at least two."""
    names = np.asarray(cube["descriptor"].values).astype(str).tolist()
    if descriptors is None:
        if len(names) < 2:
            raise InvalidInputError(
                f"the pair cubes hold the descriptor {names}; a comparison needs two: give the "
                "pair cube of another descriptor"
            )
        return cube
    if len(descriptors) != 2 or descriptors[0] == descriptors[1]:
        raise InvalidInputError(f"descriptors: expected two different names, got {descriptors}")
    for name in descriptors:
        if name not in names:
            raise InvalidInputError(f"descriptor {name!r}: expected one of {names}")
    return cube.sel(descriptor=list(descriptors))


def verification_values(cube: xr.Dataset) -> dict[str, list[float]]:
    """Column name -> the value of each descriptor: the evaluation's numbers
    (:func:`~metricalc.benchmarks.hpatches_cvpr17.pairs.verification_from_cube`) and their means."""
    numbers = verification_from_cube(cube)
    out = {}
    for level, measure, side in COLUMNS:
        if level == "mean":
            out[column_name(level, measure, side)] = [
                float(np.mean([v[lv][measure][sd] for lv in v for sd in ("inter", "intra")]))
                for v in numbers.values()
            ]
        else:
            out[column_name(level, measure, side)] = [
                v[level][measure][side] for v in numbers.values()
            ]
    return out


def not_tested(cube: xr.Dataset) -> str:
    """``""`` when the pairs span enough sequences for a test, else the one line saying why
    not."""
    codes = pair_sequences(cube)[1]
    count = int(np.unique(codes).size)
    if count >= MIN_UNITS:
        return ""
    return (
        f"not tested: the pairs lie in {count} sequence{'' if count == 1 else 's'} (the "
        f"independent units); a paired test needs at least {MIN_UNITS}"
    )


def comparison_steps(cube: xr.Dataset, columns: int, comparisons: int, n_resamples: int) -> int:
    """The resamples and swap patterns of a :func:`compare_verification` call (progress)."""
    clusters = int(np.unique(pair_sequences(cube)[1]).size)
    return columns * comparisons * inference_steps(clusters, n_resamples, MIN_UNITS)


def compare_verification(
    cube: xr.Dataset,
    *,
    descriptors: Sequence[str] | None = None,
    columns: Sequence[tuple[str, str, str]] = COLUMNS,
    **options: Any,
) -> dict[str, xr.Dataset]:
    """Compare the descriptors of a pair cube on each verification column, over sequences.

    Parameters
    ----------
    cube : pair cube
        (:func:`merge_pair_cubes` of several files); its pairs' sequences are the clusters.
    descriptors : (A, B), optional
        Only these two (A - B); default: every pair of descriptors (or each against
        ``baseline``).
    columns : sequence of (level, measure, negatives)
        Default: all of :data:`~metricalc.benchmarks.hpatches_cvpr17.verification.COLUMNS`.
    **options
        ``baseline``, ``correction``, ``alpha``, ``seed``, ``n_resamples``,
        ``confidence_level``, ``tick``: as :func:`metricalc.stats.compare.compare_statistic`
        (each column its own correction family, with the same resamples).

    Returns
    -------
    dict of str -> xarray.Dataset
        Column name -> the comparisons (the variables of :func:`metricalc.stats.compare`;
        ``pair_by`` is ``"sequence"``).

    Raises
    ------
    InvalidInputError
        Fewer than :data:`~metricalc.stats.compare.MIN_UNITS` sequences (:func:`not_tested`),
        an unknown descriptor or column.
    """
    cube = select_descriptors(cube, descriptors)
    reason = not_tested(cube)
    if reason:
        raise InvalidInputError(reason)
    statistics: list[VerificationColumn] = verification_statistics(cube, columns)
    attrs = {k: cube.attrs[k] for k in ("split", "distance", "pairs_sha256") if k in cube.attrs}
    out = {}
    for stat in statistics:
        out[stat.name] = compare_statistic(
            stat, pair_by="sequence", attrs={**attrs, "task": "verification"}, **options
        )
    return out
