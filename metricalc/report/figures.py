"""Seaborn figures of a metric set. Each function takes ``ax=None`` and returns the Axes.

Figures are built on :class:`matplotlib.figure.Figure` (no pyplot state, any backend), and
:func:`save_figure` writes PNG and SVG atomically.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from metricalc._io import temporary_path
from metricalc.report.labels import display_name

MAP_COLUMNS = {
    "true_map_micro": "all scenes",
    "viewpoint_map": "viewpoint (v_*)",
    "illumination_map": "illumination (i_*)",
}


def axes_or_new(ax: Axes | None, size: tuple[float, float] = (7.0, 4.0)) -> Axes:
    """``ax``, or the Axes of a new constrained-layout Figure of ``size`` inches (not registered
    with pyplot, so no figure is left open) for the plotting functions' ``ax=None``."""
    return ax if ax is not None else Figure(figsize=size, layout="constrained").subplots()


def plot_map_by_split(metrics: xr.Dataset, ax: Axes | None = None) -> Axes:
    """Bars of true mAP (micro) per descriptor: all scenes, viewpoint and illumination."""
    ax = axes_or_new(ax)
    table = (
        metrics[list(MAP_COLUMNS)]
        .to_dataframe()
        .reset_index()
        .melt(
            id_vars="descriptor", value_vars=list(MAP_COLUMNS), var_name="split", value_name="mAP"
        )
    )
    table["split"] = table["split"].map(MAP_COLUMNS)
    sns.barplot(data=table, x="descriptor", y="mAP", hue="split", ax=ax)
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, title=None)
    ax.set_ylim(0, 1)
    ax.set_title("True mAP (R = 1 queries) by scene type")
    return ax


def plot_rank_histogram(metrics: xr.Dataset, ax: Axes | None = None) -> Axes:
    """Share of R = 1 queries per rank bin of the relevant item, one line per descriptor."""
    ax = axes_or_new(ax)
    counts = metrics["rank_histogram"]
    share = counts / counts.sum("rank_bin")
    table = share.to_dataframe(name="share").reset_index()
    sns.pointplot(data=table, x="rank_bin", y="share", hue="descriptor", ax=ax)
    ax.set_xlabel("rank of the relevant keypoint")
    ax.set_ylabel("share of queries")
    ax.set_title("Rank histogram")
    return ax


def plot_scene_map(scenes: xr.Dataset, ax: Axes | None = None) -> Axes:
    """Heatmap of the per-scene true mAP (descriptor x scene)."""
    n_scenes = scenes.sizes.get("scene", 1)
    ax = axes_or_new(ax, size=(max(6.0, 0.45 * n_scenes + 2), 0.5 * scenes.sizes["descriptor"] + 2))
    table = scenes["true_map"].to_pandas()
    sns.heatmap(
        pd.DataFrame(table), annot=n_scenes <= 12, fmt=".2f", vmin=0, vmax=1, ax=ax, cmap="viridis"
    )
    ax.set_title("True mAP per scene")
    return ax


def plot_split_scatter(
    metrics: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Viewpoint mAP (x) against illumination mAP (y) in percent, one labelled point per
    descriptor, with the diagonal where both are equal.

    A point above the diagonal is better under illumination changes than under viewpoint
    changes. Descriptors without both values (NaN) are not drawn.
    """
    ax = axes_or_new(ax, size=(5.5, 5.0))
    table = pd.DataFrame(
        {
            "descriptor": [
                display_name(str(d), names) for d in metrics["descriptor"].values.tolist()
            ],
            "viewpoint mAP (%)": 100 * np.asarray(metrics["viewpoint_map"].values, float),
            "illumination mAP (%)": 100 * np.asarray(metrics["illumination_map"].values, float),
        }
    ).dropna()
    sns.scatterplot(
        data=table, x="viewpoint mAP (%)", y="illumination mAP (%)", hue="descriptor", s=80, ax=ax
    )
    for _, row in table.iterrows():
        ax.annotate(
            row["descriptor"],
            (row["viewpoint mAP (%)"], row["illumination mAP (%)"]),
            xytext=(5, 5),
            textcoords="offset points",
        )
    ax.plot([0, 100], [0, 100], linestyle="--", color="gray", linewidth=1, gid="diagonal")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_aspect("equal")
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    ax.set_title("Viewpoint vs illumination mAP")
    return ax


def save_figure(ax: Axes, path: str | Path) -> list[Path]:
    """Save the figure of ``ax`` as ``<path>.png`` and ``<path>.svg`` (atomic); return the paths."""
    stem = Path(path).with_suffix("")
    written = []
    for suffix in (".png", ".svg"):
        target = stem.with_suffix(suffix)
        with temporary_path(target, suffix=suffix) as tmp:  # savefig's format: the suffix
            ax.figure.savefig(tmp, dpi=120)
        written.append(target)
    return written
