"""Curves of matching quality: ratio-test PR curves, the ROC graph with Youden points, MMA.

Each function takes the computed curves (:func:`metricalc.matching_pr_curve`,
:func:`metricalc.matching_roc_curve`, :func:`metricalc.matching_accuracy`) and ``ax=None``, and
returns the Axes; one line per descriptor, labelled with its display name (the legend right of
the axes). Rates are drawn in percent, as the tables show them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.axes import Axes

from metricalc.errors import InvalidInputError
from metricalc.plotting.figures import axes_or_new, label_axes, legend_outside
from metricalc.plotting.labels import display_name

__all__ = ["plot_mma", "plot_pr_curves", "plot_roc"]


def _check(data: object, needed: tuple[str, ...], what: str, source: str) -> None:
    if not isinstance(data, (xr.Dataset, xr.DataArray)) or "descriptor" not in data.dims:
        raise InvalidInputError(f"{what}: expected the output of {source}; got {type(data)}")
    if isinstance(data, xr.Dataset):
        missing = [n for n in needed if n not in data.variables]
        if missing:
            raise InvalidInputError(f"{what}: {missing} missing; expected the output of {source}")


def _points(curves: xr.Dataset, descriptor: Any, x: str, y: str) -> tuple[np.ndarray, ...]:
    """The defined points of one descriptor's curve; the padding (repeats of the final point,
    marked by a NaN ``cutoff``) is left out."""
    one = curves.sel(descriptor=descriptor)
    xs, ys = np.asarray(one[x].values, float), np.asarray(one[y].values, float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    if "cutoff" in one.coords:
        defined = np.flatnonzero(~np.isnan(np.asarray(one["cutoff"].values, float)))
        keep &= np.arange(xs.size) <= (defined[-1] if defined.size else -1)
    return xs[keep], ys[keep]


def _percent(points: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    return tuple(100 * p for p in points)


def _draw_lines(
    ax: Axes,
    curves: xr.Dataset | xr.DataArray,
    points: Any,
    names: Mapping[str, str] | None,
    *,
    legend: Callable[[str], str] | None = None,
    **style: Any,
) -> dict[str, Any]:
    """One line per descriptor in seaborn's palette (label ``legend(display name)``, gid
    ``curve:<descriptor>``); returns the colour of each descriptor."""
    descriptors = [str(d) for d in curves["descriptor"].values.tolist()]
    colours = dict(zip(descriptors, sns.color_palette(n_colors=len(descriptors)), strict=True))
    for d in descriptors:
        xs, ys = points(d)
        label = legend(d) if legend is not None else display_name(d, names)
        ax.plot(xs, ys, color=colours[d], label=label, gid=f"curve:{d}", **style)
    if descriptors:
        ax.legend(title=None)
        legend_outside(ax)
    return colours


def plot_pr_curves(
    pr: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Precision (y) against recall (x) of the ratio test, one curve per descriptor.

    ``pr`` is :func:`metricalc.matching_pr_curve` of a cube: each point is one ratio threshold.
    Both axes in percent.
    """
    _check(pr, ("precision", "recall"), "plot_pr_curves", "metricalc.matching_pr_curve")
    ax = axes_or_new(ax, size=(6.5, 4.5))
    _draw_lines(ax, pr, lambda d: _percent(_points(pr, d, "recall", "precision")), names)
    return label_axes(ax, "Ratio-test precision-recall", xlabel="recall (%)",
                      ylabel="precision (%)", xlim=(0, 100), ylim=(0, 102))  # fmt: skip


def plot_roc(
    roc: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """ROC graph of the ratio-test classifier (docs/metrics.md): TPR (y) against FPR (x), one curve
    per descriptor, the chance diagonal dashed, and each descriptor's Youden point (maximal
    J = TPR - FPR) marked; the legend gives J and its ratio threshold. Rates in percent.

    ``roc`` is :func:`metricalc.matching_roc_curve` of a cube.
    """
    needed = ("fpr", "tpr", "best_fpr", "best_tpr", "best_j", "best_ratio")
    _check(roc, needed, "plot_roc", "metricalc.matching_roc_curve")
    ax = axes_or_new(ax, size=(7.5, 4.5))

    def legend(d: str) -> str:
        one = roc.sel(descriptor=d)
        j, ratio = float(one["best_j"]), float(one["best_ratio"])
        name = display_name(d, names)
        return f"{name} (J = {j:.2f} at ratio {ratio:.2f})" if np.isfinite(j) else name

    colours = _draw_lines(
        ax, roc, lambda d: _percent(_points(roc, d, "fpr", "tpr")), names, legend=legend
    )
    ax.plot([0, 100], [0, 100], linestyle="--", color="gray", linewidth=1, gid="chance")
    for d in roc["descriptor"].values.tolist():
        one = roc.sel(descriptor=d)
        x, y = float(one["best_fpr"]), float(one["best_tpr"])
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        ax.plot(
            [100 * x],
            [100 * y],
            marker="o",
            markersize=8,
            color=colours[str(d)],
            linestyle="none",
            gid=f"youden:{d}",
        )
    return label_axes(ax, "ROC of the ratio test, Youden J points",
                      xlabel="false positive rate (%)", ylabel="true positive rate (%)",
                      xlim=(0, 100), ylim=(0, 102))  # fmt: skip


def plot_mma(
    mma: xr.DataArray, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Mean matching accuracy (y, percent) against the pixel threshold (x), one line per
    descriptor. ``mma`` is :func:`metricalc.matching_accuracy` of a cube."""
    _check(mma, (), "plot_mma", "metricalc.matching_accuracy")
    if not isinstance(mma, xr.DataArray) or "threshold" not in mma.dims:
        raise InvalidInputError("plot_mma: expected the DataArray of metricalc.matching_accuracy")
    ax = axes_or_new(ax, size=(6.5, 4.5))
    thresholds = np.asarray(mma["threshold"].values, float)

    def points(d: str) -> tuple[np.ndarray, np.ndarray]:
        values = 100 * np.asarray(mma.sel(descriptor=d).values, float)
        keep = np.isfinite(values)
        return thresholds[keep], values[keep]

    _draw_lines(ax, mma, points, names, marker="o")
    return label_axes(ax, "Mean matching accuracy", xlabel="threshold (px)", ylabel="MMA (%)",
                      ylim=(0, 100))  # fmt: skip
