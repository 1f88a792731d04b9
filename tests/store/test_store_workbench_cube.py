"""The cube ``db import-workbench --out`` writes is read by ``metricalc metrics`` (the metric set
its scenes determine, equal to the export's own columns) and ``metricalc compare`` (paired by
scene on the export's per-scene mAPs, here recomputed by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from store_cases import PERFORMANCE, make_cube, real

import metricalc as mc
from metricalc.cli import main
from metricalc.store import MAP_TOLERANCE, read_workbench
from metricalc.store.workbench_cube import (
    open_workbench_cube,
    scene_query_cube,
    workbench_metric_set,
)

BOUND = MAP_TOLERANCE + 1e-12


@pytest.fixture(scope="module")
def cube_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wb")
    out = folder / "wb.nc"
    argv = ["db", "import-workbench", str(real(PERFORMANCE)), "--db", str(folder / "r.sqlite")]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def run_json(capsys, *argv: str) -> object:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_metrics_reads_the_workbench_cube_and_agrees_with_the_file(cube_file, capsys):
    assert main(["metrics", str(cube_file), "--k", "1,5,10"]) == 0
    shown = capsys.readouterr().out
    assert all(header in shown for header in ("mAP v", "HR@1", "HR@5", "HR@10", "101,938"))
    values = run_json(capsys, "metrics", str(cube_file), "--json")
    file = pd.read_csv(PERFORMANCE)
    descriptors = open_workbench_cube(cube_file)
    for label, line in zip(
        descriptors["descriptor"].values.tolist(), descriptors["line"].values.tolist(), strict=True
    ):
        row = file.iloc[line - 2]  # line 1 is the header
        got = values[label]
        assert abs(got["true_map_micro"] - row.true_map_micro) <= BOUND
        assert abs(got["true_map_macro_by_scene"] - row.true_map_macro) <= BOUND
        assert abs(got["true_map_micro_including_zeros"] - row.true_map_micro_with_zeros) <= BOUND
        assert (
            abs(got["true_map_macro_by_scene_including_zeros"] - row.true_map_macro_with_zeros)
            <= BOUND
        )
        assert got["hit_rate_at_1"] == row.precision_at_1  # DescriptorWorkbench's hit rates
        assert got["hit_rate_at_5"] == row.precision_at_5
    only_one = run_json(capsys, "metrics", str(cube_file), "--json", "--k", "1")
    assert "hit_rate_at_1" in only_one[label] and "hit_rate_at_10" not in only_one[label]


def test_split_maps_equal_the_import_recomputation(cube_file):
    export = read_workbench(real(PERFORMANCE))
    metrics = workbench_metric_set(export.cube)
    for i, line in enumerate(export.cube["line"].values.tolist()):
        for name in ("viewpoint_map", "illumination_map", "viewpoint_map_micro"):
            want = export.recomputed[line][name]
            assert float(metrics[name][i]) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_compare_pairs_the_workbench_cube_by_scene(cube_file, capsys):
    rows = run_json(
        capsys, "compare", str(cube_file), "--baseline", "surf_baseline", "--json",
        "--n-resamples", "199",
    )  # fmt: skip
    cube = xr.open_dataset(cube_file, engine="h5netcdf").load()
    maps = cube["true_map"].where(cube["query_count"] > 0)
    by_name = {r["descriptor"]: r for r in rows}
    for descriptor in ("libtorch_sosnet", "vgg_color_dsp_l2"):
        diff = (maps.sel(descriptor=descriptor) - maps.sel(descriptor="surf_baseline")).values
        diff = diff[np.isfinite(diff)]
        got = by_name[descriptor]
        assert got["n"] == diff.size == 12
        assert got["mean_diff"] == pytest.approx(diff.mean(), rel=1e-12)
        assert (got["wins"], got["losses"]) == (int((diff > 0).sum()), int((diff < 0).sum()))
    assert len(rows) == cube.sizes["descriptor"] - 1


def test_compare_refuses_query_pairing_and_mixed_files(cube_file, tmp_path, capsys):
    assert main(["compare", str(cube_file), "--pair-by", "query"]) == 2
    assert "--pair-by scene" in capsys.readouterr().err
    query_cube = tmp_path / "q.nc"
    mc.cube.save(make_cube(), query_cube)
    assert main(["compare", str(cube_file), str(query_cube)]) == 2
    assert "with a QueryCube" in capsys.readouterr().err
    assert main(["compare", str(cube_file), "--metric", "nn_correct"]) == 2
    assert "one mAP per scene" in capsys.readouterr().err


def test_scene_query_cube_leaves_failed_rows_out_and_scenes_without_queries_empty():
    two = ("descriptor", "scene")
    cube = xr.Dataset(
        {
            "true_map": (two, [[0.5, 0.6], [0.4, 0.0]]),
            "true_map_with_zeros": (two, [[0.5, 0.3], [0.4, 0.0]]),
            "query_count": (two, [[10, 5], [8, 0]]),
            "excluded_count": (two, [[0, 5], [0, 3]]),
            "status": ("descriptor", ["ok", "error"]),
        },
        coords={"descriptor": ["a", "b"], "scene": ["i_x", "v_y"]},
        attrs={"format": "DescriptorWorkbench export", "source": "x.csv"},
    )
    queries = scene_query_cube(cube)
    assert queries["ap"].values[1, 1] != queries["ap"].values[1, 1]  # NaN: no query there
    assert queries["status"].values.tolist() == ["ok", "error"]
    assert queries.attrs["tie_policy"] == "workbench" and queries.attrs["dataset"] == "x.csv"
    metrics = workbench_metric_set(cube)
    assert float(metrics["true_map_micro"][1]) == pytest.approx(0.4)
    assert int(metrics["total_queries_excluded"][1]) == 3
