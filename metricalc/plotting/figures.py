"""Seaborn figures of a metric set. Each function takes ``ax=None`` and returns the Axes.

Figures are built on :class:`matplotlib.figure.Figure` (no pyplot state, any backend), and
:func:`save_figure` writes PNG and SVG atomically.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

from metricalc.fileio import temporary_path
from metricalc.plotting.labels import display_name

MAP_COLUMNS = {
    "true_map_macro_by_scene": "all scenes",
    "viewpoint_map": "viewpoint (v_*)",
    "illumination_map": "illumination (i_*)",
}
"""The bars of :func:`plot_map_by_split`: means over scenes of scene mAPs, as the paper table's
mAP columns (the query-weighted ``true_map_micro`` stands in for the first where a metric set
has no ``true_map_macro_by_scene``)."""


def axes_or_new(ax: Axes | None, size: tuple[float, float] = (7.0, 4.0)) -> Axes:
    """``ax``, or the Axes of a new constrained-layout Figure of ``size`` inches (not registered
    with pyplot, so no figure is left open) for the plotting functions' ``ax=None``."""
    return ax if ax is not None else Figure(figsize=size, layout="constrained").subplots()


def root_figure(ax: Axes) -> Figure:
    """The Figure ``ax`` is drawn on (for an Axes of a subfigure, the figure holding it)."""
    figure: Figure | SubFigure = ax.figure
    return figure if isinstance(figure, Figure) else figure.figure


def display_names(values: Iterable[object], names: Mapping[str, str] | None) -> list[str]:
    """The display name (:func:`~metricalc.plotting.labels.display_name`) of each system."""
    return [display_name(str(v), names) for v in values]


def legend_outside(ax: Axes, *, title: str | None = None, width: int = 32) -> None:
    """Move the legend of ``ax`` (if any) to the right of the axes, where it covers no data
    and no label (the constrained layout of the figure makes room for it), its entries wrapped
    onto lines of at most ``width`` characters."""
    legend = ax.get_legend()
    if legend is None:
        return
    sns.move_legend(
        ax, "upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, title=title, frameon=False
    )
    moved = ax.get_legend()  # move_legend makes a new legend
    if moved is None:
        return
    for text in moved.get_texts():
        text.set_text(wrap_label(text.get_text(), width))
    if ax.get_figure() is None:
        return
    figure = root_figure(ax)
    figure.draw_without_rendering()  # a legend taller than the figure: the figure grows to hold it
    needed = moved.get_window_extent().height / figure.dpi + 0.4
    if needed > figure.get_figheight():
        figure.set_figheight(needed)


def _overlap(texts: list[Text]) -> bool:
    boxes = [t.get_window_extent() for t in texts if t.get_visible() and t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def wrap_label(text: str, width: int) -> str:
    """``text`` wrapped at spaces onto lines of at most ``width`` characters (a longer word
    stays whole, a hyphen never breaks)."""
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def untangle_ticklabels(ax: Axes, *, width: int = 16) -> None:
    """Tick labels of the x axis that do not overlap: wrapped at spaces onto lines of at most
    ``width`` characters, then turned by 30, 60 or 90 degrees as far as needed."""
    ticks = ax.get_xticks()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    if not labels:
        return
    ax.set_xticks(ticks, [wrap_label(t, width) for t in labels])
    for angle in (30, 60, 90):
        root_figure(ax).draw_without_rendering()
        if not _overlap(list(ax.get_xticklabels())):
            return
        ax.tick_params(axis="x", labelrotation=angle)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")


def spread_labels(ax: Axes, labels: list[Annotation], *, step: float = 11.0) -> None:
    """Shift point labels up or down (in steps of ``step`` points, a thin line back to the
    point once moved) until none overlaps another, staying inside the axes where possible."""
    root_figure(ax).draw_without_rendering()
    frame = ax.get_window_extent()
    placed: list[Bbox] = []
    for label in labels:
        x, y = label.xyann
        chosen = None
        for k in range(80):
            label.xyann = (x, y + step * ((k + 1) // 2) * (1 if k % 2 else -1))
            box = label.get_window_extent().padded(2)
            if any(box.overlaps(other) for other in placed):
                continue
            chosen = chosen or label.xyann
            if frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1):
                chosen = label.xyann
                break
        label.xyann = chosen or (x, y)
        if label.xyann != (x, y):
            ax.annotate(
                "",
                label.xy,
                xytext=label.xyann,
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "gray", "linewidth": 0.6},
            )
        placed.append(label.get_window_extent().padded(2))


def label_axes(
    ax: Axes,
    title: str,
    *,
    xlabel: str | None = None,
    ylabel: str | None = None,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
) -> Axes:
    """Set the title of ``ax`` and those of its labels and limits that are given; return ``ax``.

    Examples
    --------
    >>> ax = label_axes(axes_or_new(None), "Rank histogram", xlabel="rank", ylim=(0, 100))
    >>> ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), tuple(map(float, ax.get_ylim()))
    ('Rank histogram', 'rank', '', (0.0, 100.0))
    """
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    return ax


def _percent_axes(ax: Axes, xlabel: str, ylabel: str, title: str) -> Axes:
    """Finish a seaborn plot of percentages by descriptor: the legend right of the axes, y from
    0 to 100, the labels and title, untangled x tick labels."""
    legend_outside(ax)
    label_axes(ax, title, xlabel=xlabel, ylabel=ylabel, ylim=(0, 100))
    untangle_ticklabels(ax)
    return ax


def plot_map_by_split(
    metrics: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Bars of true mAP (in percent) per descriptor: all scenes, viewpoint and illumination,
    each the mean over those scenes of the scene mAPs (:data:`MAP_COLUMNS`)."""
    ax = axes_or_new(ax, size=(max(7.0, 1.1 * metrics.sizes["descriptor"] + 3), 4.0))
    if "true_map_macro_by_scene" not in metrics:
        metrics = metrics.assign(true_map_macro_by_scene=metrics["true_map_micro"])
    table = (
        metrics[list(MAP_COLUMNS)]
        .to_dataframe()
        .reset_index()
        .melt(
            id_vars="descriptor", value_vars=list(MAP_COLUMNS), var_name="split", value_name="mAP"
        )
    )
    table["split"] = table["split"].map(MAP_COLUMNS)
    table["descriptor"] = display_names(table["descriptor"], names)
    table["mAP"] = 100 * table["mAP"].astype(float)
    sns.barplot(data=table, x="descriptor", y="mAP", hue="split", ax=ax)
    return _percent_axes(ax, "", "true mAP (%)", "True mAP (R = 1 queries) by scene type")


def plot_rank_histogram(
    metrics: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Share of R = 1 queries (percent) per rank bin of the relevant item, one line per
    descriptor."""
    ax = axes_or_new(ax, size=(8.0, 4.0))
    counts = metrics["rank_histogram"]
    share = 100 * counts / counts.sum("rank_bin")
    table = share.to_dataframe(name="share").reset_index()
    table["descriptor"] = display_names(table["descriptor"], names)
    sns.pointplot(data=table, x="rank_bin", y="share", hue="descriptor", ax=ax)
    xlabel, ylabel = "rank of the relevant keypoint", "share of queries (%)"
    return _percent_axes(ax, xlabel, ylabel, "Rank histogram")


def plot_scene_map(
    scenes: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Heatmap of the per-scene true mAP in percent (descriptor x scene)."""
    n_scenes = scenes.sizes.get("scene", 1)
    table = pd.DataFrame(100 * scenes["true_map"].to_pandas())
    table.index = display_names(table.index, names)
    longest = max((len(n) for n in table.index), default=0)  # the row names, 10 pt
    size = (max(6.0, 0.45 * n_scenes + 2.5 + 0.085 * longest), 0.5 * len(table) + 2)
    ax = axes_or_new(ax, size=size)
    sns.heatmap(
        table,
        annot=n_scenes <= 12,
        fmt=".1f",
        vmin=0,
        vmax=100,
        ax=ax,
        cmap="viridis",
        cbar_kws={"label": "true mAP (%)"},
    )
    ax.tick_params(axis="y", labelrotation=0)
    return label_axes(ax, "True mAP per scene", ylabel="")


def plot_split_scatter(
    metrics: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Viewpoint mAP (x) against illumination mAP (y) in percent, one labelled point per
    descriptor, with the diagonal where both are equal.

    A point above the diagonal is better under illumination changes than under viewpoint
    changes. Descriptors without both values (NaN) are not drawn. Labels of nearby points are
    moved apart (:func:`spread_labels`).
    """
    ax = axes_or_new(ax, size=(5.5, 5.0))
    table = pd.DataFrame(
        {
            "descriptor": display_names(metrics["descriptor"].values.tolist(), names),
            "viewpoint mAP (%)": 100 * np.asarray(metrics["viewpoint_map"].values, float),
            "illumination mAP (%)": 100 * np.asarray(metrics["illumination_map"].values, float),
        }
    ).dropna()
    sns.scatterplot(
        data=table, x="viewpoint mAP (%)", y="illumination mAP (%)", hue="descriptor", s=80, ax=ax
    )
    ax.plot([0, 100], [0, 100], linestyle="--", color="gray", linewidth=1, gid="diagonal")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_aspect("equal")
    legend = ax.get_legend()
    if legend is not None:
        legend.remove()
    ax.set_title("Viewpoint vs illumination mAP")
    labels = [
        ax.annotate(
            row["descriptor"],
            (row["viewpoint mAP (%)"], row["illumination mAP (%)"]),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            ha="left" if row["viewpoint mAP (%)"] < 60 else "right",
        )
        for _, row in table.sort_values("illumination mAP (%)", ascending=False).iterrows()
    ]
    for label in labels:  # labels right of points on the left half, left of those on the right
        if label.get_horizontalalignment() == "right":
            label.xyann = (-6, 0)
    spread_labels(ax, labels)
    return ax


def save_figure(ax: Axes, path: str | Path) -> list[Path]:
    """Save the figure of ``ax`` as ``<path>.png`` and ``<path>.svg`` (atomic); return the paths."""
    stem = Path(path).with_suffix("")
    written = []
    for suffix in (".png", ".svg"):
        target = stem.with_suffix(suffix)
        with temporary_path(target, suffix=suffix) as tmp:  # savefig's format: the suffix
            root_figure(ax).savefig(tmp, dpi=120)
        written.append(target)
    return written
