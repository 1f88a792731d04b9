"""The report of a study end to end: files, consistency with direct ``metricalc.stats`` calls,
the HTML page in headless Chromium, and the ``report`` verb (in-process, ``tests/cli_helpers``).

The cubes are small random QueryCubes of known descriptor quality (``make_query_cube``), so a
report builds in seconds.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc import cube as qc
from metricalc import stats
from metricalc.errors import InvalidInputError
from metricalc.plotting.labels import escape_html
from metricalc.report.builder import SECTION_HOOKS, Section, build, register_section
from metricalc.report.study import study_from_dict
from tests.cli_helpers import CliResult, run_cli
from tests.shared_checks import reference_multipletests

QUALITY = {"good": 0.9, "a&b <i>x</i>": 0.5, "poor_one": 0.1}
NAMES = {"good": "Good <b>1</b>"}


def write_study(folder: Path, make_query_cube, text: str = "") -> Path:
    qc.save(make_query_cube(QUALITY, seed=1), folder / "cube.nc")
    (folder / "mine.yaml").write_text(
        "title: Random systems\n"
        "data: {cube: cube.nc}\n"
        "names: {good: 'Good <b>1</b>'}\n"
        "baseline: good\n"
        "tests: {n_resamples: 999, rank_by: pair}\n" + text  # image pairs where a column allows
    )
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory, make_query_cube):
    """One full report (every figure), shared by the tests that read it."""
    folder = write_study(tmp_path_factory.mktemp("study"), make_query_cube)
    return folder, build(folder / "mine.yaml")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_section_registry_is_one_list_whichever_module_names_it():
    from metricalc.report import builder, model, sections

    assert builder.SECTION_HOOKS is sections.SECTION_HOOKS
    assert builder.register_section is sections.register_section
    assert builder.Report is model.Report and builder.Section is model.Section is Section
    assert sections.detector_or_descriptor_section in sections.SECTION_HOOKS


def test_build_writes_every_output_consistent_with_direct_stats_calls(built):
    study_dir, report = built
    out = study_dir / "mine" / "report"
    assert report.out == out and report.html == out / "report.html"
    for name in ("report.html", "tables.tex", "tables.md", "table.csv", "comparisons.csv",
                 "rankings.csv", "metrics.csv", "summary.txt"):  # fmt: skip
        assert (out / name).is_file() and (out / name) in report.files, name
    assert not [p for p in out.rglob(".*")]  # no temporary file left behind
    assert (out / "tables.tex").read_text() == report.table.to_latex()
    assert (out / "tables.md").read_text() == report.table.to_markdown()
    cube = qc.open_cube(study_dir / "cube.nc")
    direct = stats.compare(
        cube, metric="ap", split="viewpoint", baseline="good", n_resamples=999, seed=0
    )
    rows = [r for r in read_csv(out / "comparisons.csv") if r["column"] == "viewpoint_map"]
    assert [(r["descriptor"], r["baseline"]) for r in rows] == [
        ("a&b <i>x</i>", "good"), ("poor_one", "good"),
    ]  # fmt: skip
    for row in rows:
        one = direct.sel(descriptor=row["descriptor"], baseline="good")
        assert float(row["pvalue_corrected"]) == pytest.approx(float(one.pvalue_corrected))
        assert float(row["mean_diff"]) == pytest.approx(float(one.mean_diff))
        assert row["sentence"].startswith("Good <b>1</b> > ")  # the best system wins
    # letters: "good" (row a) beats both others on viewpoint mAP where the test rejects
    letters = {r["descriptor"]: r["viewpoint_map_better_than"] for r in read_csv(out / "table.csv")}
    rejected = [d for d in ("a&b <i>x</i>", "poor_one") if bool(direct.reject.sel(descriptor=d))]
    assert letters["good"] == "".join({"a&b <i>x</i>": "b", "poor_one": "c"}[d] for d in rejected)
    assert rejected  # the data are made so that the test rejects
    # rankings equal rank_systems called directly, over scenes (the column is a mean over
    # scenes, so its blocks are scenes whatever the study's finer rank_by)
    ranking = stats.rank_systems(cube, metric="ap", split="viewpoint", pair_by="scene")
    rankings = [r for r in read_csv(out / "rankings.csv") if r["column"] == "viewpoint_map"]
    ranked = {r["descriptor"]: float(r["average_rank"]) for r in rankings}
    for d in QUALITY:
        assert ranked[d] == pytest.approx(float(ranking.average_rank.sel(descriptor=d)))
    assert {int(r["n_units"]) for r in rankings} == {int(ranking.n_units)}
    by_scene = [
        r for r in read_csv(out / "rankings.csv") if r["column"] == "true_map_macro_by_scene"
    ]
    assert {int(r["n_units"]) for r in by_scene} <= {16}  # a scene-averaged column: scenes
    page = (out / "report.html").read_text()
    assert 'id="section-detector-or-descriptor"' in page  # the decomposition section (hook)
    assert "The detector limits" in page or "The descriptor limits" in page
    assert "AP, perfect detector" not in page and "by the ratio confidence" in page
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("Random systems\n") and "Friedman test" in summary
    for stem in ("map_by_split", "roc", "pr_curves", "mma", "forest_viewpoint_map",
                 "cd_viewpoint_map", "scene_map", "split_scatter", "rank_histogram",
                 "detector_or_descriptor"):  # fmt: skip
        assert (out / "figures" / f"{stem}.png").stat().st_size > 0, stem
        assert (out / "figures" / f"{stem}.svg").is_file()


def test_html_report_in_headless_chromium(built, page, tmp_path):
    _, report = built
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(report.html.as_uri())
    page.wait_for_load_state("load")
    rows = page.locator("table.results tbody tr")
    assert rows.count() == len(QUALITY)
    systems = [rows.nth(i).get_attribute("data-system") for i in range(rows.count())]
    assert systems == list(QUALITY)
    names = page.locator("table.results tbody th").all_inner_texts()
    assert names == ["(a) Good <b>1</b>", "(b) a&b <i>x</i>", "(c) poor_one"]  # text, not tags
    assert page.locator("table.results b, table.results i").count() == 0
    images = page.locator("img")
    assert images.count() >= 9
    widths = page.evaluate("[...document.images].map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 0 for w in widths), widths
    # the page and its figures fit the window: no image wider than the page, no sideways scroll
    page.set_viewport_size({"width": 900, "height": 800})
    fits = page.evaluate(
        "[...document.images].every(i => i.getBoundingClientRect().right <= "
        "document.documentElement.clientWidth + 1)"
    )
    assert fits
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1"
    )
    assert all(url.startswith(("file:", "data:")) for url in requested), requested
    assert page.locator("ul.sentences li").count() == len(report.sentences) > 0
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sections_from_hooks_are_added_to_the_page(tmp_path, make_query_cube):
    folder = write_study(tmp_path, make_query_cube, "figures: [roc]\noutputs: [html]\n")

    def hook(report):
        systems = ", ".join(escape_html(s) for s in report.table.systems)
        return Section("extra", "Extra <section>", f"<p id='extra'>{systems}</p>")

    register_section(hook)
    try:
        report = build(folder / "mine.yaml")
    finally:
        SECTION_HOOKS.remove(hook)
    page = report.html.read_text()
    assert "<h2>Extra &lt;section&gt;</h2>" in page
    assert "<p id='extra'>good, a&amp;b &lt;i&gt;x&lt;/i&gt;, poor_one</p>" in page
    assert report.files == [report.html]
    with pytest.raises(InvalidInputError, match="must be callable"):
        register_section("not a hook")


def test_label_baseline_pairs_each_descriptor_and_corrects_one_family(tmp_path, make_query_cube):
    locked = make_query_cube({"sift": 0.8, "orb": 0.4}, seed=5)
    native = make_query_cube({"sift": 0.5, "orb": 0.5}, seed=6, keypoints="native")
    study = study_from_dict(
        {
            "data": {"dataset": "synthetic"},  # replaced by the cubes passed below
            "baseline": "native",
            "metrics": ["true_map_micro", "viewpoint_map"],
            "tests": {"pair_by": "pair", "n_resamples": 999, "rank": False},
            "figures": ["forest"],
            "outputs": ["csv"],
        },
        source=tmp_path / "lvn.yaml",
    )
    report = build(study, cubes={"locked": locked, "native": native})
    comparison = report.tests["viewpoint_map"].comparison
    pairs = list(comparison.get_index("comparison"))
    assert pairs == [("sift (locked)", "sift (native)"), ("orb (locked)", "orb (native)")]
    for d in ("sift", "orb"):
        direct = stats.compare(
            {"locked": locked.sel(descriptor=[d]), "native": native.sel(descriptor=[d])},
            metric="ap",
            split="viewpoint",
            pair_by="scene",  # the column is a mean over scenes: tested over scenes
            baseline=f"{d} (native)",
            correction="none",
            n_resamples=999,
        )
        mine = comparison.sel(descriptor=f"{d} (locked)", baseline=f"{d} (native)")
        assert float(mine.pvalue) == pytest.approx(float(direct.pvalue.item()))
        # the CI: the same bootstrap, resampled with the other comparison in the study's call
        assert float(mine.ci_low) == pytest.approx(float(direct.ci_low.item()), abs=0.01)
    expected = reference_multipletests(comparison.pvalue.values, "holm")
    np.testing.assert_allclose(comparison.pvalue_corrected.values, expected)
    assert comparison.attrs["correction"] == "holm"
    assert list(report.metrics.descriptor.values) == [
        "sift (locked)", "orb (locked)", "sift (native)", "orb (native)",
    ]  # fmt: skip
    assert report.table.systems[0] == "sift (locked)"
    assert not (report.out / "report.html").exists()  # outputs: csv only
    assert (report.out / "comparisons.csv").is_file()


def test_identical_systems_are_kept_untested_outside_the_family(tmp_path, make_query_cube):
    # SIFT on SIFT keypoints is the same system locked and native: compare keeps that pair with
    # a note, outside the correction family (one compare call with pairs= for the label)
    locked = make_query_cube({"sift": 0.8, "orb": 0.4, "brief": 0.6}, seed=5)
    other = make_query_cube({"sift": 0.8, "orb": 0.7, "brief": 0.2}, seed=6)
    native = locked.copy(deep=True).assign_attrs(keypoints="native")
    for name, variable in native.data_vars.items():
        if variable.dims == ("descriptor", "query"):
            variable.loc[{"descriptor": ["orb", "brief"]}] = other[name].sel(
                descriptor=["orb", "brief"]
            )
    study = study_from_dict(
        {
            "data": {"dataset": "synthetic"},
            "baseline": "native",
            "metrics": ["true_map_macro_by_scene"],
            # wilcoxon: a test that cannot compare identical systems (randomization gives p = 1)
            "tests": {"test": "wilcoxon", "pair_by": "scene", "n_resamples": 999, "rank": False},
            "outputs": ["csv", "summary"],
        },
        source=tmp_path / "lvn.yaml",
    )
    cubes = {"locked": locked, "native": native}
    report = build(study, cubes=cubes)
    comparison = report.tests["true_map_macro_by_scene"].comparison
    pairs = [("sift (locked)", "sift (native)"), ("orb (locked)", "orb (native)"),
             ("brief (locked)", "brief (native)")]  # fmt: skip
    assert list(comparison.get_index("comparison")) == pairs
    direct = stats.compare(cubes, pairs=pairs, pair_by="scene", n_resamples=999, test="wilcoxon")
    assert comparison.pvalue.values[1:].tolist() == direct.pvalue.values[1:].tolist()
    expected = reference_multipletests(comparison.pvalue.values[1:], "holm")
    np.testing.assert_allclose(comparison.pvalue_corrected.values[1:], expected)
    same = comparison.sel(descriptor="sift (locked)", baseline="sift (native)")
    assert np.isnan(float(same.pvalue_corrected)) and not bool(same.reject)
    assert same.note.item().startswith("all 16 paired differences are zero")  # 16 scenes
    (note,) = report.notes
    label = "mAP"  # the mean over scenes of scene mAPs
    assert note == f"{label}: sift (locked) vs sift (native) not tested ({same.note.item()})"
    summary = (report.out / "summary.txt").read_text()
    assert f"sift (locked) vs sift (native) on mAP: not tested: {same.note.item()}" in summary
    # the same in one cube, all pairs: one compare call, the identical pair kept untested
    one = locked.copy(deep=True)
    for variable in one.data_vars.values():
        if variable.dims == ("descriptor", "query"):
            variable.loc[{"descriptor": "brief"}] = variable.sel(descriptor="sift")
    study = replace(study, baseline=None)
    report = build(study, cubes={"": one}, out=tmp_path / "one")
    comparison = report.tests["true_map_macro_by_scene"].comparison
    direct = stats.compare(one, pair_by="scene", n_resamples=999, test="wilcoxon")
    xr.testing.assert_identical(comparison, direct)
    assert comparison.note.values.tolist() == ["", comparison.note.values[1], ""]
    (note,) = report.notes
    assert note.startswith(f"{label}: sift vs brief not tested (all 16 paired differences are zero")
    assert "(1 more not testable)" in report.table.caption


def test_patch_retrieval_cube_keeps_its_own_columns(tmp_path):
    rng = np.random.default_rng(0)
    n = 60
    scenes = np.repeat([f"{t}_{k}" for t in "iv" for k in "abc"], n // 6)  # 6 sequences
    cube = qc.new_cube(
        ["hardnet", "sift"],
        {
            "scene": scenes,
            "pair": np.full(n, ""),
            "keypoint_set": np.full(n, "train_easy_40s_00"),
            "query_keypoint": np.arange(n),
        },
        {"ap": rng.random((2, n)), "n_relevant": np.ones((2, n), np.int8)},
        attrs={**qc.DEFAULT_ATTRS, "ap_method": "vlfeat", "benchmark": "hpatches-retrieval"},
    )
    cube = cube.assign(image_ap=(("descriptor", "query"), rng.random((2, n))))
    study = study_from_dict(
        {"data": {"dataset": "synthetic"}, "tests": {"n_resamples": 999}},
        source=tmp_path / "p.yaml",
    )
    report = build(study, cubes={"": cube})
    assert report.table.columns == [  # the mAP family: means over sequences
        "true_map_macro_by_scene", "viewpoint_map", "illumination_map", "image_retrieval_map",
    ]  # fmt: skip
    expected = np.nanmean(cube.image_ap.values, axis=1)
    np.testing.assert_allclose(report.metrics.image_retrieval_map.values, expected)
    assert report.tests["image_retrieval_map"].comparison is not None
    assert "Protocol: benchmark hpatches-retrieval, AP method vlfeat." in report.table.caption
    assert any("figure roc skipped" in note for note in report.notes)
    assert "detector-or-descriptor" not in report.html.read_text()  # no matching results
    assert any("not tested" in note for note in report.notes)  # 4 scenes: too few to pair by scene


def run(*args: str, cwd: Path) -> CliResult:
    return run_cli(*args, cwd=cwd)


def test_a_repeated_test_or_ranking_is_stated_once(tmp_path, make_query_cube):
    """The query-weighted and the scene-averaged mAP ranked by scene rank the same scene means:
    one paragraph and one CD diagram, with a note naming the twin. Their tests are of two
    different statistics (pooled over queries, mean of scene means), so each column keeps its
    own sentences and forest plot."""
    folder = write_study(
        tmp_path, make_query_cube,
        "metrics: [true_map_micro, true_map_macro_by_scene, viewpoint_map, viewpoint_map_micro]\n"
        "figures: [forest, cd_diagram]\n",
    )  # fmt: skip
    text = (folder / "mine.yaml").read_text().replace("rank_by: pair", "rank_by: scene")
    (folder / "mine.yaml").write_text(text)
    report = build(folder / "mine.yaml")
    rankings = {c: t.ranking for c, t in report.tests.items()}
    twins = stats.rank_systems(qc.open_cube(folder / "cube.nc"), pair_by="scene")
    assert rankings["true_map_micro"] is not None and rankings["true_map_macro_by_scene"] is None
    assert rankings["true_map_micro"].equals(twins)
    assert len(report.rankings) == 2  # all scenes, viewpoint scenes: each ranked once
    assert [t.repeats for t in report.tests.values()] == [None, None, None, None]
    micro = report.tests["viewpoint_map_micro"].comparison
    macro = report.tests["viewpoint_map"].comparison
    assert micro.attrs["mean_over"] == "query" and macro.attrs["mean_over"] == "scene"
    assert [s for s in report.sentences if "query-weighted viewpoint" in s]
    figures = sorted(p.name for p in (report.out / "figures").glob("*.png"))
    assert "cd_true_map_macro_by_scene.png" not in figures and "cd_true_map_micro.png" in figures
    assert "forest_viewpoint_map_micro.png" in figures
    assert "mAP: ranked as mAP (queries) (the same units and values), stated once" in report.notes


def test_report_verb_renders_a_study_and_reports_spec_errors(tmp_path, make_query_cube):
    study_dir = write_study(tmp_path, make_query_cube, "figures: [forest]\n")
    result = run("report", "mine.yaml", "--no-progress", cwd=study_dir)
    assert result.returncode == 0, result.stderr
    html = study_dir / "mine" / "report" / "report.html"
    assert f"report: {Path('mine') / 'report' / 'report.html'}" in result.stdout
    assert html.is_file() and "data:image/png;base64," in html.read_text()
    result = run("report", "mine.yaml", "--out", "elsewhere", "--no-progress", cwd=study_dir)
    assert result.returncode == 0
    assert (study_dir / "elsewhere" / "mine" / "report" / "tables.tex").is_file()
    assert sorted(p.name for p in (study_dir / "elsewhere").iterdir()) == ["mine"]  # its folder
    (study_dir / "bad.yaml").write_text("data: {cube: cube.nc}\ntests: {alpha: 2}\n")
    result = run("report", "bad.yaml", cwd=study_dir)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "metricalc: error: bad.yaml: tests.alpha: expected a number in (0, 0.5]; got 2"
    )
    (study_dir / "who.yaml").write_text("data: {cube: cube.nc}\nbaseline: surf\n")
    result = run("report", "who.yaml", cwd=study_dir)
    assert result.returncode == 2 and "baseline: 'surf' is not a system" in result.stderr
    assert "Traceback" not in result.stderr


def test_csv_files_without_rows_keep_their_header(tmp_path, make_query_cube):
    # one system: nothing to compare or rank; the files still name their columns, so that
    # csv readers (pandas.read_csv) read an empty table instead of failing on an empty file
    one = make_query_cube({"sift": 0.8}, seed=2)
    study = study_from_dict(
        {"data": {"dataset": "synthetic"}, "metrics": ["true_map_micro"], "outputs": ["csv"]},
        source=tmp_path / "one.yaml",
    )
    report = build(study, cubes={"": one})
    comparisons = (report.out / "comparisons.csv").read_text().splitlines()
    assert comparisons[0].split(",")[:10] == [
        "column", "metric", "split", "pair_by", "test", "correction", "alpha", "descriptor",
        "baseline", "n",
    ]  # fmt: skip
    assert comparisons[0].endswith(",caveat,sentence") and len(comparisons) == 1
    assert (report.out / "rankings.csv").read_text().splitlines() == [
        "column,descriptor,average_rank,mean,friedman_statistic,friedman_pvalue,"
        "critical_difference,n_units"
    ]


def test_the_page_names_friedman_ranks_only_when_a_column_was_ranked(tmp_path, make_query_cube):
    # two systems are not ranked (rank_systems needs three): the page's tests line said
    # "Friedman ranks over scenes" all the same
    two = make_query_cube({"sift": 0.8, "orb": 0.4}, seed=3)
    raw = {"data": {"dataset": "synthetic"}, "metrics": ["true_map_micro"], "outputs": ["html"],
           "figures": ["roc"], "tests": {"n_resamples": 99}}  # fmt: skip
    report = build(study_from_dict(raw, source=tmp_path / "two.yaml"), cubes={"": two})
    assert report.tests["true_map_micro"].ranking is None
    page = (report.out / "report.html").read_text()
    assert "Tests: paired randomization test" in page and "Friedman" not in page
    three = make_query_cube({"sift": 0.8, "orb": 0.4, "brief": 0.6}, seed=3)
    report = build(study_from_dict(raw, source=tmp_path / "three.yaml"), cubes={"": three})
    assert report.tests["true_map_micro"].ranking is not None
    assert "all pairs of systems, Friedman ranks over scenes, seed 0." in (
        report.out / "report.html"
    ).read_text()
