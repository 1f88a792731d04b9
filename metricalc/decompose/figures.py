"""Seaborn figures of a decomposition. Each function takes ``ax=None`` and returns the Axes.

Figures are built on :class:`matplotlib.figure.Figure` (no pyplot state); save them with
:func:`metricalc.plotting.figures.save_figure` (PNG and SVG, atomic). Precision, recall and AP are
drawn in percent, as the tables show them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.container import BarContainer

from metricalc.decompose.ap import interpolated_precision
from metricalc.decompose.chain import STAGE
from metricalc.decompose.whatif import PERFECT_STAGE
from metricalc.errors import InvalidInputError
from metricalc.plotting.figures import (
    axes_or_new,
    display_names,
    legend_outside,
    untangle_ticklabels,
)

__all__ = [
    "plot_detector_or_descriptor",
    "plot_factor_curves",
    "plot_keypoint_factors",
    "plot_what_if",
]

COMPOSED = "composed $P_D$, $R_D$"
WHAT_IF_TITLE = "What if one stage were perfect?\n(" + PERFECT_STAGE.replace(", ", ",\n") + ")"
PRODUCT = "product of the factors"


def _mean_curve(precision: xr.DataArray, recall: xr.DataArray) -> xr.DataArray:
    """Interpolated precision at COCO's recall levels, averaged over every chain (NaN chains,
    without ground truth, left out)."""
    values = interpolated_precision(precision, recall)
    other = [d for d in values.dims if d not in ("recall_level", STAGE)]
    return values.mean(other, skipna=True) if other else values


def plot_factor_curves(curves: xr.Dataset, *, ax: Axes | None = None, title: str = "") -> Axes:
    """Factor precision-recall curves, their product and the composed curve.

    Each curve is COCO's interpolated precision :math:`\\max\\{P_n : R_n \\ge r\\}` at the 101
    recall levels, averaged over the chains of ``curves`` (categories, IoU thresholds,
    descriptors); the product of the factors lies on the composed curve (the identity).

    Parameters
    ----------
    curves : xarray.Dataset
        The output of :func:`~metricalc.decompose.decompose` (select a subset first to plot
        one chain).
    ax : matplotlib Axes, optional
    title : str

    Examples
    --------
    >>> from metricalc.decompose import decompose
    >>> from metricalc.decompose.figures import plot_factor_curves
    >>> ax = plot_factor_curves(decompose([0.9, 0.8, 0.7], [[1, 1], [1, 0], [0, 0]], 2))
    >>> [line.get_label() for line in ax.get_legend().get_lines()][:2]
    ['factor L', 'factor C|L']
    """
    ax = axes_or_new(ax, (8.0, 4.5))
    frames = []
    factors = _mean_curve(curves["factor_precision"], curves["factor_recall"])
    for stage in curves[STAGE].values.tolist():
        one = factors.sel({STAGE: stage})
        frames.append(
            pd.DataFrame(
                {
                    "recall": 100 * one["recall_level"].values,
                    "precision": 100 * one.values,
                    "curve": f"factor {stage}",
                }
            )
        )
    # recall to 12 decimals: a product such as 0.3 * (1/3) falls one unit in the last place
    # below a recall level the composed 0.1 reaches, and would draw a step that is not there
    composed = interpolated_precision(curves["precision"], curves["recall"].round(12))
    product = interpolated_precision(
        curves["product_precision"], curves["product_recall"].round(12)
    )
    # a chain whose product is undefined everywhere has composed precision 0 (as what_if)
    product = xr.where(product.isnull() & composed.notnull(), 0.0, product)  # type: ignore[no-untyped-call]
    for label, values in ((COMPOSED, composed), (PRODUCT, product)):
        other = [d for d in values.dims if d != "recall_level"]
        one = values.mean(other, skipna=True) if other else values
        frames.append(
            pd.DataFrame(
                {
                    "recall": 100 * one["recall_level"].values,
                    "precision": 100 * one.values,
                    "curve": label,
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    style = {label: (4, 2) if label == PRODUCT else "" for label in table["curve"].unique()}
    sns.lineplot(
        data=table, x="recall", y="precision", hue="curve", style="curve", dashes=style, ax=ax
    )
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 102)
    ax.set_xlabel("recall (%) (factor recall for the factors)")
    ax.set_ylabel("interpolated precision (%)")
    ax.set_title(title or "Factor precision-recall curves and their product")
    legend_outside(ax)
    return ax


def plot_what_if(table: pd.DataFrame, *, ax: Axes | None = None, title: str = "") -> Axes:
    """Bars: the composed AP (percent) now and with each stage made perfect (the what-if
    table); the title says what "perfect" assumes.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`~metricalc.decompose.what_if_table` (index stage; columns ``ap``,
        ``ap_if_perfect``).

    Examples
    --------
    >>> from metricalc.decompose import decompose, what_if_table
    >>> from metricalc.decompose.figures import plot_what_if
    >>> ax = plot_what_if(what_if_table(decompose([0.9, 0.8], [[1, 1], [1, 0]], 2)))
    >>> [label.get_text() for label in ax.get_xticklabels()]
    ['now', 'perfect L', 'perfect C|L']
    """
    if not {"ap", "ap_if_perfect"} <= set(table.columns):
        raise InvalidInputError("plot_what_if needs the what_if_table (columns ap, ap_if_perfect)")
    ax = axes_or_new(ax, (6.0, 4.0))
    rows = [("now", float(table["ap"].iloc[0]))] + [
        (f"perfect {stage}", float(value)) for stage, value in table["ap_if_perfect"].items()
    ]
    frame = pd.DataFrame(rows, columns=["scenario", "AP"])
    frame["AP"] = 100 * frame["AP"]
    sns.barplot(data=frame, x="scenario", y="AP", hue="scenario", legend=False, ax=ax)
    for container in ax.containers:
        if isinstance(container, BarContainer):
            ax.bar_label(container, fmt="%.1f")
    ax.set_ylim(0, 110)
    ax.set_xlabel("")
    ax.set_ylabel("composed AP (%)")
    ax.set_title(title or WHAT_IF_TITLE)
    untangle_ticklabels(ax)
    return ax


FACTORS = {
    "repeatability": "repeatability (L, the detector)",
    "correct_over_repeatable": "correct among repeatable (C|L, the descriptor)",
    "matching_score": "matching score (L x C|L)",
}
"""Legend of :func:`plot_detector_or_descriptor`: the two factors and their product."""


def plot_detector_or_descriptor(
    table: xr.Dataset, *, ax: Axes | None = None, names: Mapping[str, str] | None = None
) -> Axes:
    """Bars per descriptor (display names), in percent: the repeatability (L), the share of
    correct matches among repeatable queries (C|L) and their product, the matching score; the
    stage that limits the descriptor (the lower factor) under its name.

    Parameters
    ----------
    table : xarray.Dataset
        ``DetectorDescriptorSection.table`` (:func:`~metricalc.decompose.detector_or_descriptor`).
    names : mapping, optional
        Display names of the descriptors.

    Examples
    --------
    >>> from metricalc.decompose import detector_or_descriptor
    >>> from metricalc.datasets import example_cube
    >>> ax = detector_or_descriptor(example_cube()).plot()
    >>> ax.get_title(), [t.get_text().replace("\\n", " ") for t in ax.get_xticklabels()]
    ('Detector or descriptor?', ['sift limited by the descriptor'])
    """
    needed = (*FACTORS, "limited_by")
    if any(v not in table for v in needed):
        raise InvalidInputError(f"plot_detector_or_descriptor needs {list(needed)} per descriptor")
    ax = axes_or_new(ax, (max(7.0, 1.2 * table.sizes["descriptor"] + 4), 4.0))
    descriptors = table["descriptor"].values.tolist()
    shown = display_names(descriptors, names)
    verdicts = {
        "detector": "limited by the detector",
        "descriptor": "limited by the descriptor",
        "both": "limited by both equally",
    }
    labels = {
        d: f"{name}\n{verdicts[v]}" if v in verdicts else name
        for d, name, v in zip(descriptors, shown, table["limited_by"].values.tolist(), strict=True)
    }
    frame = (
        table[list(FACTORS)]
        .to_dataframe()
        .reset_index()
        .melt(id_vars="descriptor", value_vars=list(FACTORS), var_name="rate", value_name="value")
    )
    frame["rate"] = frame["rate"].map(FACTORS)
    frame["descriptor"] = frame["descriptor"].map(labels)
    frame["value"] = 100 * frame["value"].astype(float)
    sns.barplot(data=frame, x="descriptor", y="value", hue="rate", ax=ax)
    ax.set_ylim(0, 105)
    ax.set_xlabel("")
    ax.set_ylabel("rate (%)")
    ax.set_title("Detector or descriptor?")
    legend_outside(ax)
    untangle_ticklabels(ax)
    return ax


KEPT_LEVELS = 100
"""Points per line of :func:`plot_keypoint_factors` (1 % steps of the queries kept)."""


def plot_keypoint_factors(
    chains: xr.Dataset, *, ax: Axes | None = None, names: Mapping[str, str] | None = None
) -> Axes:
    r"""The two factors of every descriptor along the confidence threshold: with the most
    confident matches kept, the share of them that is repeatable, :math:`T_L / T_0` (L), and the
    share of the repeatable ones matched correctly, :math:`T_{C|L} / T_L` (C|L), against the share
    of queries kept, :math:`T_0 / Q`, in percent. At 100 % kept they are the table's
    repeatability and correct among repeatable (every query with a nearest neighbour kept).

    Parameters
    ----------
    chains : xarray.Dataset
        :func:`~metricalc.decompose.keypoint_chains` (over ``descriptor``, ``stage`` L, C|L).
    names : mapping, optional
        Display names of the descriptors (the legend).

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.decompose import keypoint_chains
    >>> from metricalc.decompose.figures import plot_keypoint_factors
    >>> ax = plot_keypoint_factors(keypoint_chains(example_cube()))
    >>> [t.get_text().replace("\n", " ") for t in ax.get_legend().get_texts()][1::2]
    ['sift', 'L, repeatable among kept']
    >>> ax.get_legend().get_texts()[-1].get_text().replace("\n", " ")
    'C|L, correct among kept repeatable'
    """
    if STAGE not in chains.dims or chains[STAGE].values.tolist() != ["L", "C|L"]:
        raise InvalidInputError("plot_keypoint_factors needs keypoint_chains (stages L, C|L)")
    ax = axes_or_new(ax, (8.0, 4.5))
    frames = []
    descriptors = chains["descriptor"].values.tolist()
    for descriptor, shown in zip(descriptors, display_names(descriptors, names), strict=True):
        one = chains.sel(descriptor=descriptor)
        selected = one["n_selected"].values
        queries = int(one["n_ground_truth"].values[0])
        if queries == 0 or selected[-1] == 0:
            continue
        # the first threshold keeping each percent of the queries that are ever kept
        wanted = np.linspace(selected[-1] / KEPT_LEVELS, selected[-1], KEPT_LEVELS)
        at = np.searchsorted(selected, wanted - 1e-9)
        kept = selected[at].astype(np.float64)
        through_l, through_c = (one["tp"].sel({STAGE: s}).values[at] for s in ("L", "C|L"))
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {
                "L, repeatable among kept": through_l / kept,
                "C|L, correct among kept repeatable": through_c / through_l,
            }
        for factor, value in values.items():
            frames.append(
                pd.DataFrame(
                    {
                        "kept": 100 * kept / queries,
                        "share": 100 * value,
                        "descriptor": shown,
                        "factor": factor,
                    }
                )
            )
    if not frames:
        raise InvalidInputError("plot_keypoint_factors: no descriptor has a match")
    frame = pd.concat(frames, ignore_index=True)
    sns.lineplot(
        data=frame, x="kept", y="share", hue="descriptor", style="factor",
        estimator=None, errorbar=None, ax=ax,
    )  # fmt: skip
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 102)
    ax.set_xlabel("matches kept, most confident first (% of queries)")
    ax.set_ylabel("share (%)")
    confidence = chains.attrs.get("confidence", "")
    ax.set_title(f"Detector and descriptor factors ({confidence} confidence)")
    legend_outside(ax)
    return ax

