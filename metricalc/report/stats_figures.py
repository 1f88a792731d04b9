"""Figures of significance results: the forest plot of differences and the CD diagram.

:func:`plot_forest` draws a :func:`metricalc.stats.compare` Dataset (mean differences with their
bootstrap CIs), :func:`plot_cd_diagram` a :func:`metricalc.stats.rank_systems` Dataset (average
ranks, the critical difference, and bars joining systems it does not separate). The CD diagram is
drawn by hand with matplotlib: no maintained library draws one from precomputed ranks and a CD.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from metricalc.plotting.comparisons import comparison_pairs, interval_name
from metricalc.plotting.figures import axes_or_new, wrap_label
from metricalc.plotting.labels import compared_metric_phrase, display_name, is_fraction_metric
from metricalc.report.summary import _check_ranking, cd_groups

__all__ = ["plot_cd_diagram", "plot_forest"]


def _phrase(attrs: Mapping[Hashable, object], metric_phrase: str | None) -> str:
    """``metric_phrase``, else the phrase of the tested metric and split of ``attrs``."""
    return metric_phrase or compared_metric_phrase(
        str(attrs.get("metric", "ap")), str(attrs.get("split", "") or "")
    )


def plot_forest(
    comparison: xr.Dataset,
    ax: Axes | None = None,
    *,
    names: Mapping[str, str] | None = None,
    metric_phrase: str | None = None,
) -> Axes:
    """Forest plot: one row per comparison, the mean difference (descriptor minus baseline) as
    a point and its bootstrap CI as a bar, a vertical line at 0.

    Filled points are significant after the correction (``reject``) with a verdict, hollow
    points are not; a comparison whose test rejects against its mean difference (its
    ``caveat``: a Wilcoxon or sign test asked for) is hollow and labelled "(no verdict)"; a
    comparison that was not tested (its ``note``: e.g. two identical systems) is a grey cross,
    labelled "(not tested)". Differences of metrics in [0, 1] are drawn in percentage points.
    """
    pairs = comparison_pairs(comparison, "plot_forest: comparison")
    attrs = comparison.attrs
    metric = str(attrs.get("metric", "ap"))
    scale = 100.0 if is_fraction_metric(metric) else 1.0
    diff = scale * np.asarray(comparison["mean_diff"].values, float)
    low = scale * np.asarray(comparison["ci_low"].values, float)
    high = scale * np.asarray(comparison["ci_high"].values, float)
    reject = np.asarray(comparison["reject"].values, bool)
    notes = (
        [str(n) for n in comparison["note"].values.tolist()]
        if "note" in comparison.data_vars
        else [""] * len(pairs)
    )
    caveats = (
        [bool(str(c)) for c in comparison["caveat"].values.tolist()]
        if "caveat" in comparison.data_vars
        else [False] * len(pairs)
    )
    labels = [
        wrap_label(
            f"{display_name(d, names)} - {display_name(b, names)}"
            + (" (not tested)" if note else " (no verdict)" if caveat else ""),
            36,
        )
        for (d, b), note, caveat in zip(pairs, notes, caveats, strict=True)
    ]
    lines = max((label.count("\n") + 1 for label in labels), default=1)
    ax = axes_or_new(ax, size=(7.0, (0.28 + 0.17 * lines) * len(pairs) + 1.6))
    y = np.arange(len(pairs))[::-1]
    ax.axvline(0, color="gray", linestyle="--", linewidth=1)
    for i, significant in enumerate(reject):
        if notes[i]:
            if np.isfinite(diff[i]):
                ax.plot(diff[i], y[i], "x", color="gray", gid=f"comparison:{i}")
            continue
        ax.errorbar(
            diff[i],
            y[i],
            xerr=[[max(diff[i] - low[i], 0.0)], [max(high[i] - diff[i], 0.0)]],
            fmt="o",
            color="C0",
            markerfacecolor="C0" if significant and not caveats[i] else "white",
            capsize=3,
            gid=f"comparison:{i}",
        )
    ax.set_yticks(y)
    ax.set_yticklabels(labels)
    level = float(attrs.get("confidence_level", 0.95))
    unit = "percentage points" if scale == 100.0 else "units"
    ax.set_xlabel(f"difference ({unit}), {100 * level:g}% {interval_name(attrs)} CI")
    ax.set_title(f"Differences in {_phrase(attrs, metric_phrase)} (filled: significant)")
    ax.set_ylim(-0.8, len(pairs) - 0.2)
    return ax


def plot_cd_diagram(
    ranking: xr.Dataset,
    ax: Axes | None = None,
    *,
    names: Mapping[str, str] | None = None,
    metric_phrase: str | None = None,
) -> Axes:
    """Critical-difference diagram (Demsar 2006) of a :func:`metricalc.stats.rank_systems`
    Dataset.

    An axis of average ranks from 1 (best, left) to k; each system a tick at its average rank,
    joined by an elbow line to its name (the better half on the left, the rest on the right);
    above the axis a bar of length CD; below it, a thick bar under each group of systems the CD
    does not separate (:func:`~metricalc.report.summary.cd_groups`).
    """
    _check_ranking(ranking, "plot_cd_diagram: ranking")
    systems = [str(s) for s in ranking["descriptor"].values.tolist()]
    ranks = np.asarray(ranking["average_rank"].values, float)
    k = len(systems)
    order = list(np.argsort(ranks, kind="stable"))
    n_left = (k + 1) // 2
    rows = max(n_left, k - n_left)
    if ax is None:
        longest = max((len(display_name(s, names)) for s in systems), default=0) + 7
        width = max(7.0, 3.5 + 2 * 0.075 * longest)  # the names on both sides, 9 pt
        ax = Figure(figsize=(width, 1.6 + 0.32 * rows), layout="constrained").subplots()
    step = 0.35
    ax.hlines(0, 1, k, color="black", linewidth=1.2)
    for r in range(1, k + 1):
        ax.vlines(r, 0, 0.1, color="black", linewidth=1)
        ax.text(r, 0.16, str(r), ha="center", va="bottom", fontsize=9)
    left_edge, right_edge = 1 - 0.35 * max(1, k / 4), k + 0.35 * max(1, k / 4)
    for position, i in enumerate(order):
        name = display_name(systems[i], names)
        if position < n_left:
            depth = -step * (position + 1) - 0.2
            x_end, align = left_edge, "right"
        else:
            depth = -step * (k - position) - 0.2
            x_end, align = right_edge, "left"
        ax.plot(
            [ranks[i], ranks[i], x_end],
            [0, depth, depth],
            color="black",
            linewidth=0.8,
            gid=f"system:{systems[i]}",
        )
        gap = -0.05 if align == "right" else 0.05
        ax.text(
            x_end + gap,
            depth,
            f"{name} ({ranks[i]:.2f})",
            ha=align,
            va="center",
            fontsize=9,
        )
    if "critical_difference" in ranking:
        cd = float(ranking["critical_difference"])
        if np.isfinite(cd):
            ax.hlines(0.55, 1, 1 + cd, color="C3", linewidth=2, gid="cd")
            ax.vlines([1, 1 + cd], 0.5, 0.6, color="C3", linewidth=1)
            ax.text(1 + cd / 2, 0.64, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
    rank_of = dict(zip(systems, ranks, strict=True))
    for g, group in enumerate(cd_groups(ranking)):
        y = -0.1 - 0.06 * g
        low, high = min(rank_of[s] for s in group), max(rank_of[s] for s in group)
        ax.hlines(y, low - 0.03, high + 0.03, color="C0", linewidth=3.5, gid=f"group:{g}")
    ax.set_xlim(left_edge - 0.2, right_edge + 0.2)
    ax.set_ylim(-step * rows - 0.45, 0.95)
    ax.axis("off")
    attrs = ranking.attrs
    phrase = _phrase(attrs, metric_phrase)
    ax.set_title(f"Average ranks on {phrase} (Nemenyi, alpha {float(attrs.get('alpha', 0.05)):g})")
    return ax
