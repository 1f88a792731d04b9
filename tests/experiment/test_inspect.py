"""metricalc inspect: the runs side by side, and the interactive page driven in headless Chromium
(DOM assertions after interacting), checked against results.h5 read independently."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.experiment import run
from metricalc.experiment.inspect import default_page_path, load_runs, page_data, write_page
from metricalc.experiment.results import write_results_h5
from metricalc.experiment.rundir import RunDir
from tests.cli_helpers import run_cli

QUICK = ["data.quick=true", "data.size=192", "model.max_keypoints=100"]
"""The quick built-in benchmark, small: four scenes, 20 image pairs."""
ODD = "<img src=x onerror=\"window.pwned=1\">&'#?% é"
"""A scene name that is markup, with characters that must be escaped in a URL."""

POINTS = """() => Array.from(document.querySelectorAll('circle.point')).map(c => ({
  tag: c.dataset.tag, pair: c.dataset.pair, x: c.dataset.x, y: c.dataset.y,
  cx: Number(c.getAttribute('cx')), cy: Number(c.getAttribute('cy'))}))"""
TOPMOST = """() => Array.from(document.querySelectorAll('circle.point')).map(c => {
  const r = c.getBoundingClientRect(), x = r.x + r.width / 2, y = r.y + r.height / 2;
  return document.elementFromPoint(x, y) === c
    ? {tag: c.dataset.tag, pair: c.dataset.pair, x: x, y: y} : null;
}).filter(p => p !== null)"""
IMAGES_LOADED = """() => { const images = document.querySelectorAll('#detail-images img');
  return images.length > 0 && Array.from(images).every(i => i.complete); }"""


def _pairs(outputs, tag):
    path = RunDir(outputs, "hpatches", tag).results
    with xr.open_dataset(path, group="pairs", engine="h5netcdf") as pairs:
        return pairs.load()


def _copy(outputs, source, tag):
    rundir = RunDir(outputs, "hpatches", source)
    target = RunDir(outputs, "hpatches", tag)
    shutil.copytree(rundir.path, target.path, ignore=shutil.ignore_patterns(".lock"))
    return target


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Quick runs of SIFT and ORB, and two copies of them made by hand: ``gappy`` (ORB without
    v_camera's five pairs and one match picture) and ``odd`` (SIFT with a scene name that is
    markup)."""
    outputs = tmp_path_factory.mktemp("outputs")
    for conf in ("sift", "orb"):
        result = run("hpatches", conf, overrides=QUICK, outputs=outputs, db=False)
        assert result.status == "ok", result.error
    gappy = _copy(outputs, "orb", "gappy")
    pairs = _pairs(outputs, "orb")
    kept = pairs.isel(image_pair=np.flatnonzero(pairs.scene.values != "v_camera"))
    write_results_h5(gappy.results, cubes.open_cube(gappy.results).load(), kept)
    gappy.match_image("i_camera", "1-3").unlink()
    odd = _copy(outputs, "sift", "odd+x=1")
    pairs = _pairs(outputs, "sift")
    scene = np.where(pairs.scene.values == "i_camera", ODD, pairs.scene.values)
    pictures = [f"matches/{s}/{p}.png" for s, p in zip(scene, pairs.pair.values, strict=True)]
    renamed = pairs.assign_coords(
        image_pair=[f"{s}/{p}" for s, p in zip(scene, pairs.pair.values, strict=True)],
        scene=("image_pair", scene),
        match_image=("image_pair", pictures),
    )
    write_results_h5(odd.results, cubes.open_cube(odd.results).load(), renamed)
    (odd.matches / "i_camera").rename(odd.matches / ODD)
    return outputs


@pytest.fixture(scope="module")
def page_file(outputs):
    """The page of sift vs orb where the CLI writes it by default."""
    path = default_page_path("hpatches", ["sift", "orb"], outputs=outputs)
    return write_page(load_runs("hpatches", ["sift", "orb"], outputs=outputs), path)


def _value(pairs, name, pair):
    if "[" in name:  # a sweep variable, name[dim=label]
        base, rest = name.split("[")
        dim, label = rest.rstrip("]").split("=")
        return float(pairs[base].sel(image_pair=pair, **{dim: float(label)}))
    return float(pairs[name].sel(image_pair=pair))


def _same(shown, expected):
    value = float(shown)  # JavaScript's String(number): "0.25", "Infinity", "NaN", "1e-7"
    return (np.isnan(value) and np.isnan(expected)) or value == expected


def _circle(page, tag, pair):
    """The point of ``tag`` on image pair ``pair`` (found by its data, whatever characters)."""
    found = page.evaluate_handle(
        """([tag, pair]) => Array.from(document.querySelectorAll('circle.point'))
             .find(c => c.dataset.tag === tag && c.dataset.pair === pair)""",
        [tag, pair],
    ).as_element()
    assert found is not None, (tag, pair)
    return found


def _open(page, path):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    return errors


# --------------------------------------------------------------------------------------------
# the page in a browser
# --------------------------------------------------------------------------------------------


def test_one_point_per_pair_and_experiment(page, page_file, outputs):
    errors = _open(page, page_file)
    points = page.evaluate(POINTS)
    assert len(points) == 20 * 2
    for tag in ("sift", "orb"):
        expected = _pairs(outputs, tag).image_pair.values.tolist()
        assert sorted(p["pair"] for p in points if p["tag"] == tag) == sorted(expected)
    assert page.locator("#count").inner_text() == "40 points"
    assert page.input_value("#x-axis") == "num_matches"
    assert page.input_value("#y-axis") == "prec@3px"
    rows = page.locator("#summaries tbody tr")
    assert rows.count() == 2 and rows.nth(0).get_attribute("data-tag") == "sift"
    summaries = json.loads((RunDir(outputs, "hpatches", "sift").summaries).read_text())
    header = page.locator("#summaries thead th").all_inner_texts()
    cells = rows.nth(0).locator("td").all_inner_texts()
    shown = dict(zip(header, cells, strict=True))
    assert shown["mAP"] == f"{100 * summaries['true_map_micro']:.1f}"
    assert shown["AUC@3px"] == f"{100 * summaries['H_error_ransac@3px']:.1f}"
    assert shown["pairs"] == "20"
    assert errors == []


@pytest.mark.parametrize(
    ("x", "y"),
    [
        ("H_error_dlt", "true_map"),
        ("num_keypoints", "ransac_inl%"),
        ("H_error_ransac_sweep[ransac_th=3]", "prec@1px"),
    ],
)
def test_axis_selectors_move_the_points_to_the_values_of_results_h5(page, page_file, outputs, x, y):
    errors = _open(page, page_file)
    page.select_option("#x-axis", x)
    page.select_option("#y-axis", y)
    assert page.locator("#x-label").text_content() == x
    assert page.locator("#y-label").text_content() == y
    points = page.evaluate(POINTS)
    assert len(points) == 40
    pairs = {tag: _pairs(outputs, tag) for tag in ("sift", "orb")}
    for p in points:
        assert _same(p["x"], _value(pairs[p["tag"]], x, p["pair"])), p
        assert _same(p["y"], _value(pairs[p["tag"]], y, p["pair"])), p
    # positions are a linear map of the values (cx, cy are written with 2 decimals): x grows
    # to the right, y upwards
    finite = [p for p in points if np.isfinite(float(p["x"])) and np.isfinite(float(p["y"]))]
    assert len(finite) >= 30
    for value, position, sign in (("x", "cx", 1), ("y", "cy", -1)):
        values = np.array([float(p[value]) for p in finite])
        pixels = np.array([p[position] for p in finite])
        assert len(np.unique(values)) >= 2
        slope, offset = np.polyfit(values, pixels, 1)
        assert np.sign(slope) == sign
        assert np.abs(offset + slope * values - pixels).max() < 0.01
        assert np.ptp(pixels) > 300  # spread over the plot (680 x 450 px), not collapsed
    assert errors == []


def test_diff_only_shows_differences_to_the_first_experiment(page, page_file, outputs):
    errors = _open(page, page_file)
    page.select_option("#x-axis", "H_error_ransac")
    page.select_option("#y-axis", "num_matches")
    page.check("#diff-only")
    points = page.evaluate(POINTS)
    sift, orb = _pairs(outputs, "sift"), _pairs(outputs, "orb")
    assert len(points) == 20 and {p["tag"] for p in points} == {"orb"}
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in JavaScript
        dx = orb["H_error_ransac"] - sift["H_error_ransac"]
        dy = orb["num_matches"].astype(float) - sift["num_matches"]
    for p in points:
        assert _same(p["x"], float(dx.sel(image_pair=p["pair"]))), p
        assert _same(p["y"], float(dy.sel(image_pair=p["pair"]))), p
    assert any(float(p["y"]) < 0 for p in points) or any(float(p["y"]) > 0 for p in points)
    assert page.locator("#x-label").text_content() == "Δ H_error_ransac (minus sift)"
    assert "differences to sift" in page.locator("#count").inner_text()
    assert "sift (reference)" in page.locator("#legend").inner_text()
    page.uncheck("#diff-only")
    assert len(page.evaluate(POINTS)) == 40
    assert errors == []


def test_hover_shows_the_pair_and_click_shows_its_match_pictures(
    page, page_file, outputs, tmp_path
):
    errors = _open(page, page_file)
    point = page.evaluate(TOPMOST)[0]
    page.mouse.move(point["x"], point["y"])
    tooltip = page.locator("#tooltip")
    assert tooltip.is_visible()
    text = tooltip.inner_text()
    assert point["pair"] in text and f"({point['tag']})" in text and "num_matches" in text
    assert page.locator("#links line").count() == 1  # to the other experiment's point
    page.mouse.click(point["x"], point["y"])
    scene, pair = point["pair"].split("/")
    assert page.locator("#detail-title").text_content().startswith(point["pair"])
    assert page.locator("circle.point.selected").count() == 2
    page.wait_for_function(IMAGES_LOADED)
    images = page.locator("#detail-images img")
    assert images.count() == 2
    for k, tag in enumerate(("sift", "orb")):
        assert images.nth(k).evaluate("i => i.naturalWidth") > 0
        source = images.nth(k).evaluate("i => i.src")
        assert source == RunDir(outputs, "hpatches", tag).match_image(scene, pair).as_uri()
    table = page.locator("#detail-table tr")
    row = next(r for r in table.all_inner_texts() if r.startswith("num_matches"))
    expected = [int(_pairs(outputs, t)["num_matches"].sel(image_pair=point["pair"])) for t in
                ("sift", "orb")]  # fmt: skip
    assert row.split()[1:] == [str(v) for v in expected]
    # the arrow keys step to the next image pair
    ids = page.evaluate("JSON.parse(document.getElementById('inspect-data').textContent).pairs.id")
    page.keyboard.press("ArrowRight")
    following = ids[(ids.index(point["pair"]) + 1) % len(ids)]
    assert page.locator("#detail-title").text_content().startswith(following)
    page.mouse.move(point["x"], point["y"])
    shot = tmp_path / "inspect.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert errors == []


def test_a_page_written_elsewhere_finds_the_pictures(page, outputs, tmp_path):
    path = write_page(load_runs("hpatches", ["orb"], outputs=outputs), tmp_path / "a" / "p.html")
    errors = _open(page, path)
    assert page.locator("circle.point").count() == 20
    assert page.locator("#diff-only").is_disabled()  # one experiment: nothing to subtract
    page.keyboard.press("ArrowRight")
    page.wait_for_function(IMAGES_LOADED)
    assert page.locator("#detail-images img").evaluate("i => i.naturalWidth") > 0
    assert errors == []


def test_runs_with_different_pairs_show_the_union_with_gaps(page, outputs, tmp_path):
    runs = load_runs("hpatches", ["sift", "gappy"], outputs=outputs)
    path = write_page(runs, tmp_path / "g.html")
    errors = _open(page, path)
    points = page.evaluate(POINTS)
    assert len(points) == 20 + 15
    assert not any(p["tag"] == "gappy" and p["pair"].startswith("v_camera/") for p in points)
    assert page.locator("#gaps").inner_text() == (
        "Runs with gaps (the union of the image pairs is shown; a run has no point where it "
        "lacks a pair): gappy lacks 5 of 20 pairs."
    )
    page.check("#diff-only")
    assert len(page.evaluate(POINTS)) == 15  # pairs of both runs only
    page.uncheck("#diff-only")
    ids = page.evaluate("JSON.parse(document.getElementById('inspect-data').textContent).pairs.id")
    for pair, message in (
        ("v_camera/1-2", "no result for this pair in gappy"),
        ("i_camera/1-3", "match picture not found in the run folder of gappy"),
    ):
        _circle(page, "sift", pair).dispatch_event("click")
        assert page.locator("#detail-title").text_content().startswith(pair)
        figure = page.locator('#detail-images figure[data-tag="gappy"]')
        assert figure.locator(".absent").inner_text() == message
        assert figure.locator("img").count() == 0
        page.wait_for_function(IMAGES_LOADED)
        sift = page.locator('#detail-images figure[data-tag="sift"] img')
        assert sift.evaluate("i => i.naturalWidth") > 0
    assert "v_camera/1-2" in ids and errors == []


def test_names_are_escaped_everywhere(page, outputs, tmp_path):
    runs = load_runs("hpatches", ["odd+x=1", "sift"], outputs=outputs)
    path = write_page(runs, tmp_path / "o.html")
    html = path.read_text(encoding="utf-8")
    assert ODD not in html and "<img src=x" not in html  # only escaped forms are in the file
    errors = _open(page, path)
    assert page.locator("h1").inner_text() == "hpatches: odd+x=1 vs sift"
    assert page.locator("#summaries tbody tr").nth(0).get_attribute("data-tag") == "odd+x=1"
    point = _circle(page, "odd+x=1", f"{ODD}/1-2")
    point.dispatch_event("mouseover")
    assert page.locator("#tooltip").text_content().startswith(f"{ODD}/1-2  (odd+x=1)")
    point.dispatch_event("click")
    assert page.locator("#detail-title").text_content().startswith(f"{ODD}/1-2  (scene {ODD},")
    page.wait_for_function(IMAGES_LOADED)
    image = page.locator('#detail-images figure[data-tag="odd+x=1"] img')
    assert image.evaluate("i => i.naturalWidth") > 0  # the percent-encoded path resolves
    assert page.evaluate("typeof window.pwned") == "undefined"
    # no other image appeared; SIFT has this pair under its own scene name, not this one
    assert page.locator("img").count() == page.locator("#detail-images img").count() == 1
    absent = page.locator('#detail-images figure[data-tag="sift"] .absent')
    assert absent.text_content() == "no result for this pair in sift"
    assert errors == []


# --------------------------------------------------------------------------------------------
# the data and the errors, without a browser
# --------------------------------------------------------------------------------------------


def test_page_data_holds_the_values_of_every_run(outputs, tmp_path):
    data = page_data(load_runs("hpatches", ["sift", "gappy"], outputs=outputs), page_dir=tmp_path)
    assert data["axes"] == ["num_matches", "prec@3px"]
    sift, gappy = data["experiments"]
    assert (sift["color"], gappy["color"]) == ("#1f77b4", "#ff7f0e")
    assert sift["missing"] == 0 and gappy["missing"] == 5
    reference = _pairs(outputs, "gappy")
    for i, pair in enumerate(data["pairs"]["id"]):
        assert gappy["present"][i] == (pair in reference.image_pair.values)
        if not gappy["present"][i]:
            assert gappy["values"]["num_matches"][i] is None and gappy["images"][i] is None
            continue
        value = float(reference["H_error_ransac"].sel(image_pair=pair))
        stored = gappy["values"]["H_error_ransac"][i]
        assert stored == ("inf" if value == np.inf else value)
    expected = sorted(_pairs(outputs, "sift").image_pair.values.tolist())
    assert data["pairs"]["id"] == expected
    assert data["pairs"]["split"][0] == "illumination"
    picture = RunDir(outputs, "hpatches", "sift").match_image("i_astronaut", "1-2")
    relative = os.path.relpath(picture, tmp_path)
    assert sift["images"][0] == relative
    assert "H_error_ransac_sweep[ransac_th=3]" in data["variables"]


def test_missing_tags_and_results_are_clear_errors(outputs):
    with pytest.raises(InvalidInputError) as info:
        load_runs("hpatches", ["sift", "nope", "neither"], outputs=outputs)
    message = str(info.value)
    assert "'nope', 'neither'" in message and "'gappy'" in message and "'sift'" in message
    unfinished = _copy(outputs, "sift", "unfinished")
    unfinished.summaries.unlink()
    failed = _copy(outputs, "sift", "failed")
    failed.results.unlink()
    record = json.loads(failed.run_json.read_text())
    failed.run_json.write_text(json.dumps(record | {"status": "error", "error": "Boom: broken"}))
    try:
        with pytest.raises(InvalidInputError) as info:
            load_runs("hpatches", ["unfinished", "failed"], outputs=outputs)
        message = str(info.value)
        assert "tag 'unfinished'" in message and "summaries.json missing" in message
        assert "tag 'failed'" in message and "status 'error': Boom: broken" in message
    finally:
        shutil.rmtree(unfinished.path)
        shutil.rmtree(failed.path)
    with pytest.raises(InvalidInputError, match=r"\['sift'\] given more than once"):
        load_runs("hpatches", ["sift", "orb", "sift"], outputs=outputs)
    with pytest.raises(InvalidInputError, match="at least one"):
        load_runs("hpatches", [], outputs=outputs)
    with pytest.raises(InvalidInputError, match="unknown benchmark 'megadepth'"):
        load_runs("megadepth", ["sift"], outputs=outputs)
    with pytest.raises(InvalidInputError, match="is a directory"):
        write_page(load_runs("hpatches", ["sift"], outputs=outputs), outputs)


# --------------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------------


def _metricalc(*args):
    """``metricalc *args`` in-process (tests/cli_helpers.py)."""
    return run_cli(*args)


def test_cli_prints_the_summaries_side_by_side_and_writes_the_page(outputs, tmp_path):
    done = _metricalc("inspect", "hpatches", "sift", "orb", "--outputs", str(outputs))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "hpatches: sift, orb" in lines[0] and "AUC@3px" in done.stdout
    summaries = {t: json.loads(RunDir(outputs, "hpatches", t).summaries.read_text())
                 for t in ("sift", "orb")}  # fmt: skip
    for tag in ("sift", "orb"):
        (row,) = [line for line in lines if line.startswith(f"│ {tag} ")]
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[1] == f"{100 * summaries[tag]['true_map_micro']:.1f}"
    page = outputs / "inspect" / "hpatches" / "sift_vs_orb.html"
    assert done.stdout.strip().endswith(f"wrote {page}")
    assert "<svg" in page.read_text() and not list(page.parent.glob(".*"))  # no temporary left
    out = tmp_path / "mine.html"
    done = _metricalc("inspect", "hpatches", "orb", "--outputs", str(outputs), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout and out.is_file()


def test_cli_unknown_tag_exits_2_naming_it(outputs):
    done = _metricalc("inspect", "hpatches", "sift", "sfit", "--outputs", str(outputs))
    assert done.returncode == 2
    assert done.stderr.startswith(
        "metricalc: error: no run of benchmark 'hpatches' with tag 'sfit'"
    )
    assert "'sift'" in done.stderr and "Traceback" not in done.stderr
    done = _metricalc("inspect", "megadepth", "sift", "--outputs", str(outputs))
    assert done.returncode == 2 and "invalid choice: 'megadepth'" in done.stderr
