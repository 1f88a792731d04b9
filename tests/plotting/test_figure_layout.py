"""The figures with long names and many systems: names as the user chose them, no label
overlapping another or leaving the figure, rates in percent as in the tables.

Every text of a figure (tick labels, axis labels, titles, legend entries, annotations) is
measured after drawing (Agg) and every pair of boxes is checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

import metricalc as mc
from metricalc.decompose import decompose, detector_or_descriptor, what_if_table
from metricalc.decompose.figures import (
    plot_detector_or_descriptor,
    plot_factor_curves,
    plot_keypoint_factors,
    plot_what_if,
)
from metricalc.experiment.plots import plot_cumulative_errors, plot_retrieval_map
from metricalc.plotting.curve_figures import plot_mma, plot_pr_curves, plot_roc
from metricalc.plotting.figures import (
    plot_map_by_split,
    plot_rank_histogram,
    plot_scene_map,
    plot_split_scatter,
)
from metricalc.report.stats_figures import plot_cd_diagram, plot_forest

# eight systems, close in quality (their points and bars crowd), with long names
QUALITY = {f"desc_{i}": 0.5 + 0.01 * i for i in range(8)}
NAMES = {d: f"My Descriptor Variant {i} (fine-tuned, v2)" for i, d in enumerate(QUALITY)}
NAMES["desc_0"] = "SIFT"  # capitals kept: never lower-cased, never the internal key


def texts_of(ax: Axes) -> list[Text]:
    """Every visible, non-empty text of the figure of ``ax``, after an Agg draw."""
    figure = ax.figure
    FigureCanvasAgg(figure).draw()
    found: list[Text] = [*figure.texts]
    for one in figure.axes:
        found += [one.title, *one.texts]
        legend = one.get_legend()
        if legend is not None:
            found += [*legend.get_texts(), legend.get_title()]
        if not one.axison:  # axis("off"): no ticks, no axis labels drawn
            continue
        found += [one.xaxis.label, one.yaxis.label]
        for ticks, labels, (low, high) in (
            (one.get_xticks(), one.get_xticklabels(), sorted(one.get_xlim())),
            (one.get_yticks(), one.get_yticklabels(), sorted(one.get_ylim())),
        ):  # the labels of ticks outside the limits are not drawn
            found += [t for x, t in zip(ticks, labels, strict=True) if low <= x <= high]
    return [t for t in found if t.get_visible() and t.get_text().strip()]


def assert_no_overlap(ax: Axes) -> list[str]:
    """No two texts overlap and none is cut by the figure's edge; returns the texts."""
    texts = texts_of(ax)
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    page = ax.figure.bbox
    for text, box in zip(texts, boxes, strict=True):
        inside = box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1
        assert inside and box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1, (
            f"{text.get_text()!r} leaves the figure"
        )
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            assert not a.overlaps(boxes[j]), (
                f"{texts[i].get_text()!r} overlaps {texts[j].get_text()!r}"
            )
    return [t.get_text().replace("\n", " ") for t in texts]


@pytest.fixture(scope="module")
def cube(make_query_cube):
    return make_query_cube(QUALITY, per_pair=10)


@pytest.fixture(scope="module")
def metrics(cube):
    return mc.metric_set(cube)


def assert_names(shown: list[str]) -> None:
    """Every display name in full (a wrapped label joined again), no internal key."""
    joined = " | ".join(" ".join(s.split()) for s in shown)
    for key, name in NAMES.items():
        assert name in joined, f"{name!r} is not shown in {joined}"
        assert key not in joined, f"the internal key {key!r} is shown"


def test_bars_scatter_heatmap_and_histogram(metrics, cube):
    ax = plot_map_by_split(metrics, names=NAMES)
    assert_names(assert_no_overlap(ax))
    assert ax.get_ylabel() == "true mAP (%)" and ax.get_ylim() == (0, 100)
    heights = [p.get_height() for p in ax.patches if np.isfinite(p.get_height())]
    assert max(heights) > 1  # percent, not fractions
    ax = plot_split_scatter(metrics, names=NAMES)
    assert_names(assert_no_overlap(ax))
    ax = plot_scene_map(mc.scene_metrics(cube), names=NAMES)
    assert_names(assert_no_overlap(ax))
    assert ax.figure.axes[-1].get_ylabel() == "true mAP (%)"  # the colour bar
    ax = plot_rank_histogram(metrics, names=NAMES)
    assert_names(assert_no_overlap(ax))
    assert ax.get_ylabel() == "share of queries (%)"


def test_curves(cube):
    for plot, data in (
        (plot_pr_curves, mc.matching_pr_curve(cube)),
        (plot_roc, mc.matching_roc_curve(cube)),
        (plot_mma, mc.matching_accuracy(cube)),
    ):
        ax = plot(data, names=NAMES)
        assert_names(assert_no_overlap(ax))
        assert ax.get_ylabel().endswith("(%)"), ax.get_ylabel()
        assert ax.get_ylim()[1] > 50


def test_forest_and_cd_diagram(cube):
    comparison = mc.stats.compare(cube, baseline="desc_0", n_resamples=200, seed=0)
    ax = plot_forest(comparison, names=NAMES)
    assert_names(assert_no_overlap(ax))
    assert "percentage points" in ax.get_xlabel()
    ranking = mc.stats.rank_systems(cube)
    ax = plot_cd_diagram(ranking, names=NAMES)
    assert_names(assert_no_overlap(ax))


def test_decomposition_figures(cube):
    section = detector_or_descriptor(cube)
    ax = plot_detector_or_descriptor(section.table, names=NAMES)
    shown = assert_no_overlap(ax)
    assert_names(shown)
    assert ax.get_ylabel() == "rate (%)"
    assert any("limited by the" in s for s in shown)  # the verdict under each name
    ax = plot_keypoint_factors(section.chains, names=NAMES)
    assert_names(assert_no_overlap(ax))
    assert ax.get_ylabel() == "share (%)"
    ax = plot_factor_curves(section.chains)
    assert_no_overlap(ax)
    assert ax.get_ylabel() == "interpolated precision (%)"
    ax = plot_what_if(what_if_table(decompose([0.9, 0.8, 0.7], [[1, 1], [1, 0], [0, 0]], 2)))
    shown = assert_no_overlap(ax)
    assert "factor precision and recall 1" in " ".join(shown)
    assert ax.get_ylabel() == "composed AP (%)"


def test_experiment_plots():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "file": [NAMES[d] for d in QUALITY],
            "patch_retrieval_map": np.linspace(0.4, 0.6, len(QUALITY)),
            "image_retrieval_map": np.linspace(0.5, 0.7, len(QUALITY)),
        }
    )
    assert_names(assert_no_overlap(plot_retrieval_map(rows)))
    errors = {NAMES[d]: np.linspace(0, 12, 20) + i for i, d in enumerate(QUALITY)}
    assert_names(assert_no_overlap(plot_cumulative_errors(errors)))


def test_the_check_can_fail():
    """Two texts drawn on top of each other are caught."""
    from matplotlib.figure import Figure

    ax = Figure(figsize=(6, 4), layout="constrained").subplots()
    ax.text(0.3, 0.5, "one label")
    ax.text(0.32, 0.5, "another label")
    with pytest.raises(AssertionError, match="overlaps"):
        assert_no_overlap(ax)
