"""Reading a :func:`metricalc.stats.compare` Dataset: its pairs and rows, the Dataset from its
long table, and the names of its tests, corrections and units that tables and sentences print.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.stats.intervals import BCA_MAX_UNITS

__all__ = [
    "CORRECTION_NAMES",
    "INTERVAL_NAMES",
    "PAIR_UNITS",
    "READ_VARIABLES",
    "TEST_NAMES",
    "comparison_from_frame",
    "comparison_pairs",
    "comparison_row",
    "interval_name",
]

TEST_NAMES = {
    "auto": "paired randomization test of the mean difference (McNemar test for 0/1 outcomes)",
    "wilcoxon": "Wilcoxon signed-rank test",
    "ttest": "paired t-test",
    "randomization": "paired randomization test",
    "sign": "sign test",
    "mcnemar": "McNemar test",
}
"""Long names of the tests of :func:`metricalc.stats.compare`."""

INTERVAL_NAMES = {
    "auto": (
        "paired cluster bootstrap CIs (BCa, widened for few clusters; over single queries BCa, "
        f"Student t where a comparison pairs over {BCA_MAX_UNITS:,} units)"
    ),
    "bca": "BCa bootstrap CIs",
    "t": "Student t CIs",
}
"""Names of the confidence intervals of :func:`metricalc.stats.compare` (plural, as a report
states them)."""

def interval_name(attrs: Mapping[Hashable, object]) -> str:
    """The confidence interval a compare Dataset computed (its ``interval`` attr), as captions and
    axis labels name it.

    Examples
    --------
    >>> interval_name({"interval": "t"}), interval_name({"interval": "bca"})
    ('Student t', 'BCa bootstrap')
    >>> interval_name({"interval": "cluster"})
    'cluster bootstrap'
    """
    names = {"t": "Student t", "cluster": "cluster bootstrap"}
    return names.get(str(attrs.get("interval")), "BCa bootstrap")


CORRECTION_NAMES = {
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "fdr_bh": "Benjamini-Hochberg FDR",
    "none": "no",
}
"""Names of the multiple-comparison corrections."""

READ_VARIABLES = ("reject", "favours", "mean_diff")
"""Variables of a compare Dataset the table and the sentences read (``favours``: the side of a
significant comparison, decided by :func:`metricalc.stats.compare`)."""

PAIR_UNITS = {"query": "query", "pair": "image pair", "scene": "scene"}
"""How a caption names the unit of ``pair_by``."""

def comparison_from_frame(
    frame: pd.DataFrame, attrs: Mapping[str, Any] | None = None
) -> xr.Dataset:
    """A Dataset in the layout of :func:`metricalc.stats.compare` from its long table.

    ``frame`` has one row per comparison, indexed by (or with columns) ``descriptor`` and
    ``baseline``; every other column becomes a variable over the ``comparison`` dim (the
    inverse of ``compare(...).to_dataframe()``).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"descriptor": ["orb"], "baseline": ["sift"], "mean_diff": [-0.1]})
    >>> ds = comparison_from_frame(frame, {"metric": "ap"})
    >>> float(ds.sel(descriptor="orb", baseline="sift").mean_diff)
    -0.1
    """
    if {"descriptor", "baseline"} <= set(frame.columns):
        frame = frame.set_index(["descriptor", "baseline"])
    if list(frame.index.names) != ["descriptor", "baseline"]:
        raise InvalidInputError(
            "comparison_from_frame: expected columns or index levels descriptor and baseline; "
            f"got index {list(frame.index.names)} and columns {list(frame.columns)}"
        )
    index = pd.MultiIndex.from_arrays(
        [frame.index.get_level_values(0).astype(str), frame.index.get_level_values(1).astype(str)],
        names=["descriptor", "baseline"],
    )
    data = {str(name): ("comparison", frame[name].to_numpy(copy=True)) for name in frame.columns}
    coords = xr.Coordinates.from_pandas_multiindex(index, "comparison")
    return xr.Dataset(data, coords=coords, attrs=dict(attrs or {}))


def comparison_row(comparison: xr.Dataset, i: int) -> dict[str, Any]:
    """The values of comparison ``i`` of a compare Dataset: ``{variable: value}``."""
    return {
        str(name): variable.values[i]
        for name, variable in comparison.data_vars.items()
        if variable.dims == ("comparison",)
    }


def comparison_pairs(
    comparison: xr.Dataset, what: str, *, needs: tuple[str, ...] = ("reject", "mean_diff")
) -> list[tuple[str, str]]:
    """``(descriptor, baseline)`` of every comparison of a :func:`metricalc.stats.compare`
    Dataset (its ``comparison`` MultiIndex); a clear error for anything else, or for a Dataset
    without the variables ``needs``."""
    if not isinstance(comparison, xr.Dataset) or "comparison" not in comparison.dims:
        raise InvalidInputError(
            f"{what} must be a Dataset from metricalc.stats.compare (dim 'comparison'); got "
            f"{type(comparison).__name__}"
        )
    index = comparison.get_index("comparison")
    if not isinstance(index, pd.MultiIndex) or list(index.names) != ["descriptor", "baseline"]:
        raise InvalidInputError(
            f"{what}: the 'comparison' dim must be indexed by a MultiIndex with levels "
            f"descriptor and baseline; got {list(index.names)}"
        )
    missing = [v for v in needs if v not in comparison.data_vars]
    if missing:
        raise InvalidInputError(f"{what} lacks the variable(s) {missing} (metricalc.stats.compare)")
    return [(str(d), str(b)) for d, b in index]
