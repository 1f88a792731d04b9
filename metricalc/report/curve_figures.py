"""Curves of matching quality: ratio-test PR curves, the ROC graph with Youden points, MMA.

Each function takes the computed curves (:func:`metricalc.matching_pr_curve`,
:func:`metricalc.matching_roc_curve`, :func:`metricalc.matching_accuracy`) and ``ax=None``, and
returns the Axes; one line per descriptor, labelled with its display name.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.axes import Axes

from metricalc.errors import InvalidInputError
from metricalc.report.figures import _axes
from metricalc.report.labels import display_name

__all__ = ["plot_mma", "plot_pr_curves", "plot_roc"]


def _check(data: object, needed: tuple[str, ...], what: str, source: str) -> None:
    if not isinstance(data, (xr.Dataset, xr.DataArray)) or "descriptor" not in data.dims:
        raise InvalidInputError(f"{what}: expected the output of {source}; got {type(data)}")
    if isinstance(data, xr.Dataset):
        missing = [n for n in needed if n not in data.variables]
        if missing:
            raise InvalidInputError(f"{what}: {missing} missing; expected the output of {source}")


def _curve_table(
    curves: xr.Dataset, x: str, y: str, names: Mapping[str, str] | None
) -> pd.DataFrame:
    """Long table (descriptor, x, y) of the defined points of every descriptor's curve, padded
    points (repeats of the final point) included only once."""
    frames = []
    for d in curves["descriptor"].values.tolist():
        one = curves.sel(descriptor=d)
        xs, ys = np.asarray(one[x].values, float), np.asarray(one[y].values, float)
        keep = np.isfinite(xs) & np.isfinite(ys)
        if "cutoff" in one.coords:  # padding repeats the last point with cutoff NaN
            cutoff = np.asarray(one["cutoff"].values, float)
            last = np.flatnonzero(~np.isnan(cutoff))
            keep &= np.arange(xs.size) <= (last[-1] if last.size else -1)
        frames.append(
            pd.DataFrame({"descriptor": display_name(str(d), names), x: xs[keep], y: ys[keep]})
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[x, y])


def plot_pr_curves(
    pr: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Precision (y) against recall (x) of the ratio test, one curve per descriptor.

    ``pr`` is :func:`metricalc.matching_pr_curve` of a cube: each point is one ratio threshold.
    """
    _check(pr, ("precision", "recall"), "plot_pr_curves", "metricalc.matching_pr_curve")
    ax = _axes(ax, size=(6.0, 4.5))
    table = _curve_table(pr, "recall", "precision", names)
    sns.lineplot(
        data=table, x="recall", y="precision", hue="descriptor", estimator=None, sort=False, ax=ax
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title("Ratio-test precision-recall")
    return ax


def plot_roc(
    roc: xr.Dataset, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """ROC graph of the ratio-test classifier (seed 003): TPR (y) against FPR (x), one curve
    per descriptor, the chance diagonal dashed, and each descriptor's Youden point (maximal
    J = TPR - FPR) marked and labelled with J and its ratio threshold.

    ``roc`` is :func:`metricalc.matching_roc_curve` of a cube.
    """
    needed = ("fpr", "tpr", "best_fpr", "best_tpr", "best_j", "best_ratio")
    _check(roc, needed, "plot_roc", "metricalc.matching_roc_curve")
    ax = _axes(ax, size=(5.5, 5.0))
    table = _curve_table(roc, "fpr", "tpr", names)
    sns.lineplot(data=table, x="fpr", y="tpr", hue="descriptor", estimator=None, sort=False, ax=ax)
    ax.plot([0, 1], [0, 1], linestyle="--", color="gray", linewidth=1, gid="chance")
    palette = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for d in roc["descriptor"].values.tolist():
        one = roc.sel(descriptor=d)
        x, y = float(one["best_fpr"]), float(one["best_tpr"])
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        name = display_name(str(d), names)
        ax.plot(
            [x],
            [y],
            marker="o",
            markersize=8,
            color=palette.get(name, "black"),
            linestyle="none",
            gid=f"youden:{d}",
        )
        ax.annotate(
            f"{name}: J = {float(one['best_j']):.2f} (ratio {float(one['best_ratio']):.2f})",
            (x, y),
            xytext=(8, -12),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("ROC of the ratio test, Youden J points")
    return ax


def plot_mma(
    mma: xr.DataArray, ax: Axes | None = None, *, names: Mapping[str, str] | None = None
) -> Axes:
    """Mean matching accuracy (y, percent) against the pixel threshold (x), one line per
    descriptor. ``mma`` is :func:`metricalc.matching_accuracy` of a cube."""
    _check(mma, (), "plot_mma", "metricalc.matching_accuracy")
    if not isinstance(mma, xr.DataArray) or "threshold" not in mma.dims:
        raise InvalidInputError("plot_mma: expected the DataArray of metricalc.matching_accuracy")
    ax = _axes(ax, size=(6.0, 4.5))
    frames = [
        pd.DataFrame(
            {
                "descriptor": display_name(str(d), names),
                "threshold (px)": mma["threshold"].values,
                "MMA (%)": 100 * np.asarray(mma.sel(descriptor=d).values, float),
            }
        )
        for d in mma["descriptor"].values.tolist()
    ]
    table = pd.concat(frames, ignore_index=True).dropna()
    sns.lineplot(data=table, x="threshold (px)", y="MMA (%)", hue="descriptor", marker="o", ax=ax)
    ax.set_ylim(0, 100)
    ax.set_title("Mean matching accuracy")
    return ax
