"""What ``metricalc compare`` does alike for every kind of per-unit records (pose, homography,
MMA, COCO): refuse the options only cubes take, print one table (or JSON rows) per column."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "STATISTIC_OPTIONS",
    "print_columns",
    "print_json_rows",
    "refuse_cube_options",
    "statistic_options",
]

STATISTIC_OPTIONS = ("baseline", "correction", "alpha", "seed", "n_resamples", "confidence_level")
"""The options of ``metricalc compare`` that every comparison of records hands to
:func:`metricalc.stats.compare.compare_statistic` under the same names."""


def statistic_options(args: argparse.Namespace) -> dict[str, Any]:
    """``{name: value}`` of :data:`STATISTIC_OPTIONS` as given on the command line."""
    return {name: getattr(args, name) for name in STATISTIC_OPTIONS}


_NOT_FOR_RECORDS = {"test": ("auto", "randomization"), "mean_over": (None,), "split": (None,),
                    "interval": ("auto",)}
"""Options of ``metricalc compare`` that per-pair records (pose, homography) do not take: the
values allowed."""


def refuse_cube_options(args: argparse.Namespace, what: str) -> None:
    """One line for an option of ``metricalc compare`` that only cubes take, given for per-pair
    records (``what``: e.g. "pose results (FILE)"), and for a unit they do not have."""
    from metricalc.errors import InvalidInputError

    for name, allowed in _NOT_FOR_RECORDS.items():
        if getattr(args, name) not in allowed:
            raise InvalidInputError(
                f"--{name.replace('_', '-')} does not apply to {what}: their columns are tested "
                "by the paired cluster bootstrap and the swap test"
            )
    if args.pair_by not in (None, "scene", "pair"):
        raise InvalidInputError(
            f"--pair-by {args.pair_by}: {what} pair by scene (default) or image pair"
        )


def print_columns(
    compared: Mapping[str, xr.Dataset],
    *,
    json_output: bool,
    title: str,
    unit: str,
    systems: str = "descriptor",
) -> None:
    """The comparisons of each column of a table (``compare_pose``, ``compare_homography``):
    one terminal table per column titled ``"<title>: <column>"``, or (``json_output``) one JSON
    list of their rows, each with its ``column``."""
    from metricalc.plotting.terminal import print_comparisons

    if json_output:
        print_json_rows(compared)
        return
    for column, result in compared.items():
        print_comparisons(result, title=f"{title}: {column}", unit=unit, systems=systems)


def print_json_rows(compared: xr.Dataset | Mapping[str, xr.Dataset]) -> None:
    """The rows of a comparison Dataset as one JSON list on stdout (NaN as null); of a mapping
    column -> Dataset, the rows of every column, each with its ``column``."""
    import xarray as xr

    from metricalc.fileio import json_safe

    def rows(result: xr.Dataset) -> list[dict[Any, Any]]:
        found: list[dict[Any, Any]] = result.to_dataframe().reset_index().to_dict("records")
        return found

    if isinstance(compared, xr.Dataset):
        listed = rows(compared)
    else:
        listed = [{"column": column, **row} for column, one in compared.items()
                  for row in rows(one)]  # fmt: skip
    print(json.dumps(json_safe(listed), indent=2))
