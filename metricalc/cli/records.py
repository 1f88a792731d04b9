"""What ``metricalc compare`` does alike for every kind of per-unit records (pose, homography,
MMA, COCO): refuse the options only cubes take, print one table (or JSON rows) per column."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["print_columns", "refuse_cube_options"]

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
    from metricalc.fileio import json_safe
    from metricalc.plotting.terminal import print_comparisons

    if json_output:
        rows = [{"column": column, **row} for column, result in compared.items()
                for row in result.to_dataframe().reset_index().to_dict(orient="records")]
        print(json.dumps(json_safe(rows), indent=2))
        return
    for column, result in compared.items():
        print_comparisons(result, title=f"{title}: {column}", unit=unit, systems=systems)
