"""Figures, terminal tables and metric-set exports."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from matplotlib.axes import Axes
from rich.console import Console

from metricalc.export import metric_set_to_dict, write_metric_set
from metricalc.plotting.figures import (
    plot_map_by_split,
    plot_rank_histogram,
    plot_scene_map,
    save_figure,
)
from metricalc.plotting.terminal import print_metric_table

DESCRIPTORS = ["sift", "orb"]


def metrics() -> xr.Dataset:
    bins = ["1", "2", ">2"]
    return xr.Dataset(
        {
            "true_map_micro": ("descriptor", [0.7, np.nan]),
            "viewpoint_map": ("descriptor", [0.6, 0.4]),
            "illumination_map": ("descriptor", [0.8, 0.5]),
            "total_queries_processed": ("descriptor", [1200, 900]),
            "status": ("descriptor", ["ok", "error"]),
            "rank_histogram": (("descriptor", "rank_bin"), [[6.0, 2.0, 2.0], [1.0, 1.0, 2.0]]),
        },
        coords={"descriptor": DESCRIPTORS, "rank_bin": bins},
    )


def scenes() -> xr.Dataset:
    return xr.Dataset(
        {"true_map": (("descriptor", "scene"), [[0.5, 0.9], [0.2, 0.3]])},
        coords={"descriptor": DESCRIPTORS, "scene": ["i_a", "v_b"]},
    )


def test_figures_draw_the_metric_values(tmp_path):
    ax = plot_map_by_split(metrics())
    assert isinstance(ax, Axes)
    heights = sorted(round(p.get_height(), 3) for p in ax.patches if p.get_height() > 0)
    assert heights == [40, 50, 60, 70, 80]  # in percent; the NaN bar is not drawn
    ax = plot_rank_histogram(metrics())
    shares = np.concatenate([line.get_ydata() for line in ax.lines if len(line.get_ydata()) == 3])
    np.testing.assert_allclose(sorted(shares), sorted([60, 20, 20, 25, 25, 50]))
    ax = plot_scene_map(scenes())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["i_a", "v_b"]
    written = save_figure(ax, tmp_path / "figures" / "scene_map")
    assert [p.suffix for p in written] == [".png", ".svg"]
    assert all(p.stat().st_size > 0 for p in written)
    assert not [p for p in (tmp_path / "figures").iterdir() if p.name.startswith(".")]


def test_terminal_table_shows_percentages_and_errors():
    console = Console(width=120, record=True)
    print_metric_table(metrics(), title="demo", console=console)
    text = console.export_text()
    assert "70.0" in text and "1,200" in text
    assert "orb (error)" in text


@pytest.mark.parametrize("y0", ["negative", "ignore"])
def test_terminal_table_says_why_retrieval_equals_verification(y0):
    """Under y0 = negative the two keypoint APs are one number by definition: a caption says
    so (a reader would suspect a bug); under y0 = ignore they differ and nothing is said."""
    aps = {"keypoint_verification_ap": ("descriptor", [0.3, 0.2]),
           "keypoint_retrieval_ap": ("descriptor", [0.3, 0.2])}  # fmt: skip
    console = Console(width=160, record=True)
    print_metric_table(metrics().assign(aps).assign_attrs(y0_policy=y0), console=console)
    text = console.export_text()
    said = "retr AP = verif AP by definition (shown once)" in text
    assert said is (y0 == "negative")
    assert ("retr AP" in text.splitlines()[1]) is (y0 != "negative")  # the header row
    console = Console(width=160, record=True)
    print_metric_table(metrics().assign_attrs(y0_policy=y0), console=console)  # no AP columns
    assert "by definition" not in console.export_text()


def test_exports_write_csv_and_json_with_null_for_nan(tmp_path):
    as_dict = metric_set_to_dict(metrics())
    assert as_dict["orb"]["true_map_micro"] is None
    assert as_dict["sift"]["rank_histogram"] == {"1": 6.0, "2": 2.0, ">2": 2.0}
    csv_path, json_path = write_metric_set(metrics(), tmp_path / "metrics")
    assert json.loads(json_path.read_text())["sift"]["viewpoint_map"] == 0.6
    header = csv_path.read_text().splitlines()[0].split(",")
    assert header[0] == "descriptor" and "true_map_micro" in header
    assert "rank_histogram" not in header  # not one value per descriptor


def test_terminal_table_has_a_hit_rate_column_per_cut_off():
    hits = {f"hit_rate_at_{k}": ("descriptor", [0.1 * k / 10, 0.5]) for k in (10, 1, 5, 20)}
    console = Console(width=200, record=True)
    print_metric_table(metrics().assign(hits), console=console)
    header = console.export_text().splitlines()[1]
    positions = [header.index(f"HR@{k} ") for k in (1, 5, 10, 20)]
    assert positions == sorted(positions)  # in order of K
    assert header.index("mAP i") < positions[0] < header.index("queries ┃")
    console = Console(width=200, record=True)
    only_ten = metrics().assign({"hit_rate_at_10": hits["hit_rate_at_10"]})
    print_metric_table(only_ten, console=console)
    assert "HR@10" in console.export_text() and "HR@1 " not in console.export_text()


def test_metrics_verb_shows_the_hit_rate_of_every_requested_cut_off(
    tmp_path, make_query_cube, capsys
):
    from metricalc import cube as qc
    from metricalc.cli import main

    qc.save(make_query_cube({"a": 0.9, "b": 0.5}, seed=1), tmp_path / "cube.nc")
    assert main(["metrics", str(tmp_path / "cube.nc"), "--k", "10"]) == 0
    header = capsys.readouterr().out
    assert "HR@10" in header and "HR@5" not in header
    assert main(["metrics", str(tmp_path / "cube.nc"), "--k", "1,3,10"]) == 0
    shown = capsys.readouterr().out
    assert shown.index("HR@1 ") < shown.index("HR@3") < shown.index("HR@10")
