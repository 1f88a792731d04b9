"""Report figures: what each draws is checked against the numbers it was given.

The ratio-test ROC curve is checked against scikit-learn's ``roc_curve`` on a random cube; the
forest plot and the CD diagram are drawn from hand-built Datasets in the layouts of
``metricalc.stats.compare`` and ``rank_systems`` (contract B).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.axes import Axes
from sklearn.metrics import roc_curve as sk_roc_curve

from metricalc.errors import InvalidInputError
from metricalc.metrics import matching_accuracy, matching_pr_curve, matching_roc_curve
from metricalc.plotting.comparisons import comparison_from_frame
from metricalc.plotting.curve_figures import plot_mma, plot_pr_curves, plot_roc
from metricalc.plotting.figures import plot_split_scatter, save_figure
from metricalc.report.stats_figures import plot_cd_diagram, plot_forest
from metricalc.report.summary import cd_groups

QUALITY = {"good": 0.9, "fair": 0.5, "poor": 0.1}


@pytest.fixture
def cube(make_query_cube) -> xr.Dataset:
    return make_query_cube(QUALITY, seed=3)


def ratio_scores(cube: xr.Dataset, descriptor: str) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores of the ratio-test classifier, the obvious way (one descriptor)."""
    one = cube.sel(descriptor=descriptor)
    present = one["n_relevant"].values >= 0
    nn, nn2 = one["nn_distance"].values[present], one["nn2_distance"].values[present]
    ratio = np.where(np.isfinite(nn) & np.isfinite(nn2) & (nn2 > 0), nn / nn2, 1.0)
    return one["nn_correct"].values[present] == 1, -ratio


def defined_points(curves: xr.Dataset, descriptor: str, x: str, y: str) -> np.ndarray:
    one = curves.sel(descriptor=descriptor)
    cutoff = one["cutoff"].values
    last = np.flatnonzero(~np.isnan(cutoff))[-1]
    return np.column_stack([one[x].values[: last + 1], one[y].values[: last + 1]])


def curves(ax: Axes) -> dict[str, object]:
    """The curve of each descriptor (lines with gid ``curve:<descriptor>``)."""
    return {
        str(line.get_gid())[len("curve:") :]: line
        for line in ax.get_lines()
        if str(line.get_gid()).startswith("curve:")
    }


def test_matching_roc_curve_equals_scikit_learn(cube):
    roc = matching_roc_curve(cube)
    for d in QUALITY:
        y_true, y_score = ratio_scores(cube, d)
        fpr, tpr, _ = sk_roc_curve(y_true, y_score, drop_intermediate=False)
        expected = np.column_stack([fpr, tpr])
        np.testing.assert_allclose(defined_points(roc, d, "fpr", "tpr"), expected)
        j = tpr - fpr
        best = int(np.argmax(j))
        one = roc.sel(descriptor=d)
        assert float(one.best_j) == pytest.approx(j[best])
        assert (float(one.best_fpr), float(one.best_tpr)) == pytest.approx((fpr[best], tpr[best]))
        assert float(one.best_ratio) == pytest.approx(-np.unique(y_score)[::-1][best - 1])
        assert int(one.n_positive) == y_true.sum() and int(one.n_negative) == (~y_true).sum()


def test_matching_roc_curve_of_a_failed_descriptor_is_nan(cube):
    failed = cube.assign(status=("descriptor", np.array(["ok", "error", "ok"])))
    roc = matching_roc_curve(failed)
    assert np.isnan(roc.sel(descriptor="fair").tpr.values).all()
    assert np.isnan(float(roc.sel(descriptor="fair").best_j))
    with pytest.raises(InvalidInputError, match="nn2_distance"):
        matching_roc_curve(cube.drop_vars("nn2_distance"))


def test_roc_graph_draws_curves_diagonal_and_youden_points(cube):
    roc = matching_roc_curve(cube)
    ax = plot_roc(roc, names={"good": "GOOD"})
    assert isinstance(ax, Axes)
    lines = curves(ax)
    j, ratio = (
        float(roc.sel(descriptor="good").best_j),
        float(roc.sel(descriptor="good").best_ratio),
    )
    assert lines["good"].get_label() == f"GOOD (J = {j:.2f} at ratio {ratio:.2f})"
    np.testing.assert_allclose(  # in percent, as the tables
        np.column_stack(lines["good"].get_data()), 100 * defined_points(roc, "good", "fpr", "tpr")
    )
    (diagonal,) = [line for line in ax.get_lines() if line.get_gid() == "chance"]
    assert np.column_stack(diagonal.get_data()).tolist() == [[0, 0], [100, 100]]
    for d in QUALITY:
        (point,) = [line for line in ax.get_lines() if line.get_gid() == f"youden:{d}"]
        one = roc.sel(descriptor=d)
        assert np.column_stack(point.get_data())[0] == pytest.approx(
            [100 * float(one.best_fpr), 100 * float(one.best_tpr)]
        )
    assert ax.get_legend().get_texts()[0].get_text().startswith("GOOD (J = 0.")


def test_pr_and_mma_curves_draw_the_computed_values(cube, tmp_path):
    pr = matching_pr_curve(cube)
    ax = plot_pr_curves(pr)
    lines = curves(ax)
    for d in QUALITY:
        np.testing.assert_allclose(
            np.column_stack(lines[d].get_data()),
            100 * defined_points(pr, d, "recall", "precision"),
        )
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("recall (%)", "precision (%)")
    mma = matching_accuracy(cube)
    ax = plot_mma(mma)
    lines = curves(ax)
    for d in QUALITY:
        np.testing.assert_allclose(lines[d].get_ydata(), 100 * mma.sel(descriptor=d).values)
    assert [p.suffix for p in save_figure(ax, tmp_path / "mma")] == [".png", ".svg"]
    with pytest.raises(InvalidInputError, match="matching_accuracy"):
        plot_mma(pr)


def test_split_scatter_places_each_descriptor():
    metrics = xr.Dataset(
        {
            "viewpoint_map": ("descriptor", [0.6, 0.3, np.nan]),
            "illumination_map": ("descriptor", [0.8, 0.5, 0.4]),
        },
        coords={"descriptor": ["sift", "orb", "broken"]},
    )
    ax = plot_split_scatter(metrics, names={"sift": "SIFT"})
    placed = {t.get_text(): t.xy for t in ax.texts}
    assert placed == {"SIFT": pytest.approx((60.0, 80.0)), "orb": pytest.approx((30.0, 50.0))}
    assert [line.get_gid() for line in ax.get_lines() if line.get_gid()] == ["diagonal"]


def comparison() -> xr.Dataset:
    frame = pd.DataFrame(
        {
            "descriptor": ["orb", "brief", "rootsift"],
            "baseline": ["sift", "sift", "sift"],
            "mean_diff": [-0.10, 0.02, 0.005],
            "ci_low": [-0.13, -0.01, 0.001],
            "ci_high": [-0.07, 0.05, 0.009],
            "reject": [True, False, True],
        }
    )
    return comparison_from_frame(frame, {"metric": "ap", "split": "viewpoint"})


def test_forest_plot_draws_differences_and_intervals_in_points():
    ax = plot_forest(comparison(), names={"sift": "SIFT"})
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(points) == 3
    xs = [float(line.get_xdata()[0]) for line in points]
    ys = [float(line.get_ydata()[0]) for line in points]
    assert xs == pytest.approx([-10.0, 2.0, 0.5]) and ys == [2, 1, 0]
    faces = [line.get_markerfacecolor() for line in points]
    assert faces[1] == "white" and faces[0] != "white" and faces[2] != "white"
    spans = sorted(
        (round(s[0][0], 6), round(s[1][0], 6))
        for c in ax.collections
        for s in c.get_segments()
        if s[0][1] == s[1][1]  # horizontal: the CI bars
    )
    assert spans == [(-13.0, -7.0), (-1.0, 5.0), (0.1, 0.9)]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["orb - SIFT", "brief - SIFT", "rootsift - SIFT"]
    assert "viewpoint mAP" in ax.get_title()


def test_forest_plot_marks_untested_comparisons():
    ds = comparison().assign(note=("comparison", ["", "too few units", "identical systems"]))
    ds["mean_diff"][1] = np.nan  # no paired unit at all: nothing to draw
    ds["ci_low"][1:] = [np.nan, 0.0]
    ds["ci_high"][1:] = [np.nan, 0.0]
    ax = plot_forest(ds)
    points = [line for line in ax.get_lines() if line.get_marker() in ("o", "x")]
    assert [(p.get_marker(), float(p.get_ydata()[0])) for p in points] == [("o", 2.0), ("x", 0.0)]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["orb - sift", "brief - sift (not tested)", "rootsift - sift (not tested)"]


def ranking() -> xr.Dataset:
    names = ["sift", "orb", "rootsift", "brief", "superpoint"]
    ranks = [2.0, 3.9, 1.7, 4.2, 3.2]
    cd = 1.0
    return xr.Dataset(
        {
            "average_rank": ("descriptor", ranks),
            "nemenyi_different": (
                ("descriptor", "other"),
                [[abs(a - b) > cd for b in ranks] for a in ranks],
            ),
            "critical_difference": cd,
        },
        coords={"descriptor": names, "other": names},
        attrs={"metric": "ap", "split": "", "alpha": 0.05},
    )


def test_cd_diagram_marks_ranks_cd_and_groups(tmp_path):
    r = ranking()
    ax = plot_cd_diagram(r, names={"sift": "SIFT"})
    texts = {t.get_text() for t in ax.texts}
    assert {"SIFT (2.00)", "rootsift (1.70)", "brief (4.20)", "CD = 1.00"} <= texts
    ranks = dict(zip(r.descriptor.values.tolist(), r.average_rank.values, strict=True))
    for name, rank in ranks.items():  # each system's elbow starts at its rank on the axis
        (line,) = [line for line in ax.get_lines() if line.get_gid() == f"system:{name}"]
        assert line.get_xdata()[0] == pytest.approx(rank) and line.get_ydata()[0] == 0
    (cd,) = [c for c in ax.collections if c.get_gid() == "cd"]
    (segment,) = cd.get_segments()
    assert segment[1][0] - segment[0][0] == pytest.approx(1.0)
    bars = sorted(
        x
        for c in ax.collections
        if str(c.get_gid()).startswith("group:")
        for x in (c.get_segments()[0][0][0], c.get_segments()[0][1][0])
    )
    expected = sorted(
        x
        for g in cd_groups(r)
        for x in (min(ranks[s] for s in g) - 0.03, max(ranks[s] for s in g) + 0.03)
    )
    assert bars == pytest.approx(expected)
    assert cd_groups(r) == [["rootsift", "sift"], ["superpoint", "orb", "brief"]]
    assert all(p.stat().st_size > 0 for p in save_figure(ax, tmp_path / "cd"))
    with pytest.raises(InvalidInputError, match="rank_systems"):
        plot_cd_diagram(comparison())
