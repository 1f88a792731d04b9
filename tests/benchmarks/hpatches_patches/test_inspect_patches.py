"""metricalc inspect on the ``patches`` benchmark: one point per benchmark file and run, the
file's metrics on a click (no match pictures), checked in headless Chromium against the
``files`` group of results.h5 read independently."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from metricalc import cube as cubes
from metricalc.experiment import run
from metricalc.experiment.inspect import load_runs, page_data, write_page
from metricalc.experiment.results import write_results_h5
from metricalc.experiment.rundir import RunDir
from tests.experiment.test_inspect import POINTS, _metricalc, _open, _same

QUICK = ["data.quick=true", "data.size=256", "data.max_patches=80", "data.queries_per_sequence=20"]
"""Four synthetic sequences, four benchmark files of 40 queries (tests/test_experiment_patches)."""

FILES = ["test_easy_2s_00", "test_hard_2s_00", "train_easy_2s_00", "train_hard_2s_00"]


def _files(outputs, tag):
    """The per-file table of a run as stored, over (descriptor, file)."""
    path = RunDir(outputs, "patches", tag).results
    with xr.open_dataset(path, group="files", engine="h5netcdf") as files:
        return files.load()


def _value(files, name, stem):
    return float(files[name].sel(file=stem).squeeze())


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Quick patch runs of SIFT and raw pixels, and ``gappy``: raw without its last file."""
    outputs = tmp_path_factory.mktemp("outputs")
    for conf in ("sift", "raw"):
        result = run("patches", conf, overrides=QUICK, outputs=outputs, db=False)
        assert result.status == "ok", result.error
    raw = RunDir(outputs, "patches", "raw")
    gappy = RunDir(outputs, "patches", "gappy")
    gappy.path.mkdir(parents=True)
    for name in ("conf.yaml", "summaries.json"):
        (gappy.path / name).write_bytes((raw.path / name).read_bytes())
    files = _files(outputs, "raw")
    cube = cubes.open_cube(raw.results).load()
    write_results_h5(gappy.results, cube, files.isel(file=[0, 1, 2]), group="files")
    return outputs


@pytest.fixture(scope="module")
def page_file(outputs, tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "sift_vs_raw.html"
    return write_page(load_runs("patches", ["sift", "raw"], outputs=outputs), path)


def test_page_data_holds_the_files_of_every_run(outputs, tmp_path):
    data = page_data(load_runs("patches", ["sift", "gappy"], outputs=outputs), page_dir=tmp_path)
    assert data["unit"] == {
        "name": "benchmark file",
        "short": "file",
        "labels": [["split", ""], ["difficulty", ""], ["size", "size"]],
        "pictures": False,
    }
    assert data["pairs"] == {
        "id": FILES,
        "split": ["test", "test", "train", "train"],
        "difficulty": ["easy", "hard", "easy", "hard"],
        "size": ["2s"] * 4,
    }
    assert data["variables"] == ["patch_retrieval_map", "image_retrieval_map", "n_queries"]
    assert data["axes"] == ["patch_retrieval_map", "image_retrieval_map"]
    sift, gappy = data["experiments"]
    assert sift["missing"] == 0 and gappy["missing"] == 1
    assert gappy["present"] == [True, True, True, False]
    assert sift["images"] == gappy["images"] == [None] * 4
    reference = {"sift": _files(outputs, "sift"), "gappy": _files(outputs, "gappy")}
    for experiment in (sift, gappy):
        files = reference[experiment["tag"]]
        for name in data["variables"]:
            for i, stem in enumerate(FILES):
                shown = experiment["values"][name][i]
                if not experiment["present"][i]:
                    assert shown is None
                    continue
                assert shown == _value(files, name, stem)
                assert isinstance(shown, int) == (name == "n_queries")
    assert [sift["values"]["n_queries"][i] for i in range(4)] == [40] * 4


def test_one_point_per_file_and_run_at_the_values_of_results_h5(page, page_file, outputs):
    errors = _open(page, page_file)
    assert page.locator("h1").inner_text() == "patches: sift vs raw"
    assert page.locator("#scatter h2").inner_text() == "Per benchmark file"
    assert "One point per benchmark file and experiment" in page.locator("header").inner_text()
    header = page.locator("#summaries thead th").all_inner_texts()
    assert header[:2] == ["experiment", "files"] and "patch mAP" in header
    rows = page.locator("#summaries tbody tr")
    summaries = json.loads(RunDir(outputs, "patches", "sift").summaries.read_text())
    shown = dict(zip(header, rows.nth(0).locator("td").all_inner_texts(), strict=True))
    assert shown["files"] == "4"
    assert shown["patch mAP"] == f"{100 * summaries['patch_retrieval_map']:.1f}"
    assert page.input_value("#x-axis") == "patch_retrieval_map"
    assert page.input_value("#y-axis") == "image_retrieval_map"
    files = {tag: _files(outputs, tag) for tag in ("sift", "raw")}
    axes = [("patch_retrieval_map", "image_retrieval_map"), ("n_queries", "patch_retrieval_map")]
    for x, y in axes:
        page.select_option("#x-axis", x)
        page.select_option("#y-axis", y)
        points = page.evaluate(POINTS)
        assert len(points) == 4 * 2
        assert sorted((p["tag"], p["pair"]) for p in points) == sorted(
            (tag, stem) for tag in ("sift", "raw") for stem in FILES
        )
        for p in points:
            assert _same(p["x"], _value(files[p["tag"]], x, p["pair"])), p
            assert _same(p["y"], _value(files[p["tag"]], y, p["pair"])), p
    # diff_only: raw minus sift, file by file
    page.select_option("#x-axis", "patch_retrieval_map")
    page.check("#diff-only")
    points = page.evaluate(POINTS)
    assert len(points) == 4 and {p["tag"] for p in points} == {"raw"}
    for p in points:
        expected = _value(files["raw"], "patch_retrieval_map", p["pair"]) - _value(
            files["sift"], "patch_retrieval_map", p["pair"]
        )
        assert np.isclose(float(p["x"]), expected, rtol=0, atol=1e-12), p
    assert errors == []


def test_hover_and_click_show_the_file_and_its_metrics_without_pictures(page, page_file, outputs):
    errors = _open(page, page_file)
    point = next(p for p in page.evaluate(POINTS) if p["pair"] == "train_hard_2s_00")
    circle = page.locator(f'circle.point[data-tag="{point["tag"]}"][data-pair="train_hard_2s_00"]')
    circle.dispatch_event("mouseover")
    tooltip = page.locator("#tooltip").text_content()
    assert tooltip.startswith(f"train_hard_2s_00  ({point['tag']})")
    assert "patch_retrieval_map" in tooltip
    circle.dispatch_event("click")
    title = page.locator("#detail-title").text_content()
    assert title == "train_hard_2s_00  (train, hard, size 2s)"
    assert page.locator("circle.point.selected").count() == 2
    rows = page.locator("#detail-table tr").all_inner_texts()
    assert rows[0].split() == ["metric", "sift", "raw"]
    table = {r.split()[0]: r.split()[1:] for r in rows[1:]}
    assert set(table) == {"patch_retrieval_map", "image_retrieval_map", "n_queries"}
    for name, shown in table.items():
        for text, tag in zip(shown, ("sift", "raw"), strict=True):
            expected = _value(_files(outputs, tag), name, "train_hard_2s_00")
            assert np.isclose(float(text), expected, rtol=1e-5, atol=0), (name, tag)
    assert page.locator("#detail-images *").count() == 0  # a file has no match picture
    assert page.locator("img").count() == 0
    page.keyboard.press("ArrowLeft")
    assert page.locator("#detail-title").text_content().startswith("train_easy_2s_00  (train,")
    assert errors == []


def test_a_run_without_a_file_shows_the_union_with_gaps(page, outputs, tmp_path):
    path = write_page(load_runs("patches", ["sift", "gappy"], outputs=outputs), tmp_path / "g.html")
    errors = _open(page, path)
    points = page.evaluate(POINTS)
    assert len(points) == 4 + 3
    assert not any(p["tag"] == "gappy" and p["pair"] == "train_hard_2s_00" for p in points)
    assert page.locator("#gaps").inner_text() == (
        "Runs with gaps (the union of the benchmark files is shown; a run has no point where it "
        "lacks a file): gappy lacks 1 of 4 files."
    )
    page.locator('circle.point[data-tag="sift"][data-pair="train_hard_2s_00"]').dispatch_event(
        "click"
    )
    row = next(r for r in page.locator("#detail-table tr").all_inner_texts() if "n_queries" in r)
    assert row.split() == ["n_queries", "40", "\u2014"]
    assert errors == []


def test_cli_inspects_patch_runs(outputs, tmp_path):
    out = tmp_path / "page.html"
    done = _metricalc("inspect", "patches", "sift", "raw", "--outputs", str(outputs), "--out",
                      str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "patches: sift, raw" in done.stdout and "patch mAP" in done.stdout
    assert done.stdout.strip().endswith(f"wrote {out}")
    assert 'id="inspect-data"' in out.read_text(encoding="utf-8")
    default = outputs / "inspect" / "patches" / "sift_vs_raw.html"
    done = _metricalc("inspect", "patches", "sift", "raw", "--outputs", str(outputs))
    assert done.returncode == 0 and default.is_file()
