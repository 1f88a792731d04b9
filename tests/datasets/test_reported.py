"""Published numbers: the registry's integrity, reference rows in tables and in study reports,
the study key ``reported`` and the docs page generated from the registry."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import xarray as xr

from metricalc import cube as qc
from metricalc import stats
from metricalc.datasets.reported import (
    FILTER_FIELDS,
    REPORTED,
    ReportedResult,
    reported_by_key,
    reported_markdown,
    select_reported,
)
from metricalc.errors import InvalidInputError
from metricalc.plotting.labels import metric_info
from metricalc.plotting.reference_rows import ReferenceRow
from metricalc.plotting.tables import Table
from metricalc.report.builder import build
from metricalc.report.reference import reference_rows, study_protocol
from metricalc.report.study import study_from_dict

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reported.md"
COMMIT = re.compile(r"\(commit [0-9a-f]{40}\)")

# ---------------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------------


def test_keys_are_unique_and_the_lookup_holds_every_entry():
    keys = [e.key for e in REPORTED]
    assert len(keys) == len(set(keys)) == len(reported_by_key())
    assert len(REPORTED) == 12 + 12 + 25 + 31  # hpatches-benchmark, SuperPoint, Glue Factory HP, MD


@pytest.mark.parametrize("entry", REPORTED, ids=lambda e: e.key)
def test_every_entry_has_a_source_and_a_fraction(entry: ReportedResult):
    assert 0.0 <= entry.value <= 1.0 and math.isfinite(entry.value)
    for field in ("method", "metric", "protocol", "dataset", "setting", "paper", "table", "code",
                  "source"):  # fmt: skip
        assert getattr(entry, field).strip(), field
    assert entry.key.startswith(entry.protocol + "/") and entry.key.endswith("/" + entry.metric)
    if entry.checked:  # read in a public file: its repository, path and commit
        assert COMMIT.search(entry.source), entry.source
    else:  # quoted only: says so, and where it was looked for
        assert "not found" in entry.notes
    # a name metricalc knows, shown in percent (a fraction)
    assert metric_info(entry.metric).kind == "rate", entry.metric


def test_issue_numbers_are_registered_as_quoted_not_checked():
    """The hpatches-benchmark numbers as quoted, number for number (percent)."""
    by_key = reported_by_key()
    issue = {
        "sift": (65.12, 25.47), "rootsift": (58.53, 27.22), "brief": (56.88, 10.48),
        "orb": (59.11, 15.33), "tfeat-m": (81.90, 32.68), "hardnet": (88.43, 52.79),
    }  # fmt: skip
    for slug, (verification, matching) in issue.items():
        v = by_key[f"hpatches-cvpr17/{slug}/hpatches17_verification_map"]
        m = by_key[f"hpatches-cvpr17/{slug}/hpatches17_matching_map"]
        expected = (verification / 100, matching / 100)
        assert (v.value, m.value) == pytest.approx(expected, abs=1e-12)
        assert not v.checked and not m.checked and v.split == m.split == "full"


def test_printed_means_agree_with_their_parts():
    """Where a source prints a mean of its other numbers, the registry agrees with it: Glue
    Factory's mAA is the mean of the three AUCs (HPatches and MegaDepth-1500 printouts)."""
    by_key = reported_by_key()
    hp = "gluefactory/superpoint+lightglue/printout/"
    aucs = [by_key[f"{hp}H_error_ransac@{t}px"].value for t in (1, 3, 5)]
    assert by_key[f"{hp}H_error_ransac_mAA"].value == pytest.approx(sum(aucs) / 3, abs=5e-5)
    # the MegaDepth printout (the same key prefix: its entries are told apart by metric)
    md = [e for e in REPORTED if e.dataset == "MegaDepth-1500" and "printout" in e.key]
    values = {e.metric: e.value for e in md}
    mean = (values["auc@5"] + values["auc@10"] + values["auc@20"]) / 3
    assert values["ransac_mAA"] == pytest.approx(mean, abs=5e-5)


def test_printout_keys_do_not_collide_between_datasets():
    hp = [e.key for e in REPORTED if e.dataset == "HPatches sequences" and "printout" in e.key]
    md = [e.key for e in REPORTED if e.dataset == "MegaDepth-1500" and "printout" in e.key]
    assert hp and md and not set(hp) & set(md)


def test_select_by_key_pattern_and_filter_in_registry_order():
    key = "gluefactory/superpoint+lightglue/poselib/H_error_ransac@1px"
    assert [e.key for e in select_reported([key])] == [key]
    poselib = select_reported(["gluefactory/superpoint+lightglue/poselib/*"])
    assert {e.metric for e in poselib} == {f"H_error_ransac@{t}px" for t in (1, 3, 5)} | {
        f"auc@{t}" for t in (5, 10, 20)
    }
    both = select_reported([{"protocol": "hpatches-cvpr17", "method": "ORB"}, "superpoint/orb/*"])
    assert [e.key for e in both] == [e.key for e in REPORTED if e.method == "ORB"]
    assert select_reported([key, key]) == select_reported([key])


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["nope/*"], "matches no published number"),
        ([{"protocol": "nope"}], "matches no published number"),
        ([{"paper": "x"}], "must map some of " + ", ".join(FILTER_FIELDS)),
        ([{}], "must map some of"),
        ([3], "expected a key, a key pattern or a filter mapping; got 3"),
    ],
)
def test_select_refuses_what_names_nothing(items, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        select_reported(items)


def test_docs_page_is_the_registry():
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("<!-- generated: reported_markdown() -->\n\n") + len(
        "<!-- generated: reported_markdown() -->\n\n"
    )
    end = text.index("\n<!-- end generated -->")
    assert text[start:end] == reported_markdown()
    assert len(reported_markdown().splitlines()) == len(REPORTED) + 2


# ---------------------------------------------------------------------------------------------
# reference rows in a Table
# ---------------------------------------------------------------------------------------------


def _metrics() -> xr.Dataset:
    return xr.Dataset(
        {
            "true_map_micro": ("descriptor", [0.50, 0.75]),
            "viewpoint_map": ("descriptor", [0.4, 0.3]),
        },
        coords={"descriptor": ["orb", "sift"]},
    )


ROW = ReferenceRow("Paper X", {"true_map_micro": 0.9}, ("some/repo README.md",), "p")


def test_reference_rows_are_marked_in_every_format():
    table = Table(_metrics(), reported=[ROW])
    md = table.to_markdown()
    assert md.splitlines()[-1] == "| *Paper X (reported)* | *90.0* | &ndash; |"
    latex = table.to_latex().splitlines()
    i = latex.index(r"\textit{Paper X (reported)} & \textit{90.0} & -- \\")
    assert latex[i - 1] == r"\midrule" and latex[i + 1] == r"\bottomrule"
    html = table.to_html()
    assert '<tr class="reported" data-kind="reported"' in html
    assert "<em>Paper X (reported)</em>" in html
    assert '<td class="reported"><em>90.0</em></td>' in html
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert [r["kind"] for r in rows] == ["measured", "measured", "reported"]
    assert rows[2]["letter"] == "" and rows[2]["true_map_micro"] == "90.0"
    assert rows[2]["true_map_micro_mark"] == "" and rows[2]["viewpoint_map"] == ""
    assert "Rows marked (reported) are published numbers" in table.caption
    assert "some/repo README.md" in table.caption


def test_reference_rows_never_take_marks_letters_or_a_place_in_the_frame():
    """A published value above every measured one: the measured best stays bold, the reference
    row has no mark, and the measured rows' cells are exactly those of the table without it."""
    plain = Table(_metrics())
    table = Table(_metrics(), reported=[ROW])
    assert table.cells == plain.cells
    # two measured systems: the best is bold, and no "second best" is marked
    assert table.cells[1][0].mark == "best" and table.cells[0][0].mark == ""
    assert "**" not in table.to_markdown().splitlines()[-1]
    assert table.to_frame().equals(plain.to_frame())
    assert table.letters == ["a", "b"]


def test_reference_rows_leave_significance_letters_alone(make_query_cube):
    cube = make_query_cube({"good": 0.9, "poor": 0.1}, seed=3)
    from metricalc import metric_set

    metrics = metric_set(cube)
    comparison = stats.compare(cube, baseline="poor", n_resamples=999, seed=0)
    plain = Table(metrics, {"true_map_micro": comparison}, columns=["true_map_micro"])
    row = ReferenceRow("Paper", {"true_map_micro": 1.0})
    table = Table(metrics, {"true_map_micro": comparison}, columns=["true_map_micro"],
                  reported=[row])  # fmt: skip
    assert table.cells == plain.cells and plain.cells[0][0].letters == "b"
    assert "<sup>" not in table.to_markdown().splitlines()[-1]


@pytest.mark.parametrize(
    ("reported", "message"),
    [
        ([ReferenceRow("X", {"nope": 0.5})], "has values for ['nope'], which are not columns"),
        ([ReferenceRow("X", {"true_map_micro": math.nan})], "has non-finite"),
        (ROW, "must be a list of ReferenceRow"),
        ([{"true_map_micro": 0.5}], "must be ReferenceRow"),
    ],
)
def test_table_refuses_bad_reference_rows(reported, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        Table(_metrics(), reported=reported)


# ---------------------------------------------------------------------------------------------
# reference rows of a study
# ---------------------------------------------------------------------------------------------


def _entry(key: str, metric: str, value: float, *, method: str = "M", setting: str = "s",
           protocol: str = "p") -> ReportedResult:  # fmt: skip
    return ReportedResult(key, method, metric, value, protocol, "D", setting, "paper", "table",
                          "code", "source", True)  # fmt: skip


def test_study_protocol_is_the_preset_else_the_benchmark():
    assert study_protocol({"preset": "gluefactory", "benchmark": "b"}) == "gluefactory"
    assert study_protocol({"benchmark": "hpatches-retrieval"}) == "hpatches-retrieval"
    assert study_protocol({}) == ""


def test_reference_rows_group_by_method_and_setting():
    entries = [
        _entry("p/m/a/x", "x", 0.1), _entry("p/m/a/y", "y", 0.2),
        _entry("p/m/b/x", "x", 0.3, setting="t"), _entry("p/n/x", "x", 0.4, method="N"),
    ]  # fmt: skip
    rows = reference_rows(entries, {"preset": "p"}, ["x", "y"])
    assert [(r.name, dict(r.values)) for r in rows] == [
        ("M, s", {"x": 0.1, "y": 0.2}), ("M, t", {"x": 0.3}), ("N", {"x": 0.4})
    ]  # fmt: skip
    unchecked = replace(entries[3], checked=False)
    assert reference_rows([unchecked], {"preset": "p"}, ["x"])[0].sources == (
        "source (quoted, not checked)",
    )


def test_a_number_of_another_protocol_or_metric_is_refused():
    entry = select_reported(["gluefactory/superpoint+lightglue/dlt/H_error_dlt@1px"])
    with pytest.raises(InvalidInputError, match=r"protocol 'gluefactory'; the study's cubes were "
                       r"evaluated under no preset"):  # fmt: skip
        reference_rows(entry, {}, ["H_error_dlt@1px"])
    with pytest.raises(InvalidInputError, match=r"evaluated under protocol 'superpoint'"):
        reference_rows(entry, {"preset": "superpoint"}, ["H_error_dlt@1px"])
    with pytest.raises(InvalidInputError, match=r"not a column of the study's table"):
        reference_rows(entry, {"preset": "gluefactory"}, ["true_map_micro"])
    assert reference_rows(entry, {"preset": "gluefactory"}, ["H_error_dlt@1px"])[0].values == {
        "H_error_dlt@1px": 0.351
    }


def test_a_number_of_another_split_or_of_generated_data_is_refused():
    """The split is the entry's ``split`` field, not a parse of its setting; a cube whose
    dataset attr names generated data (``synthetic-...``), alone or joined with others, gets no
    published number; the HPatches release's cubes (no mark) get it."""
    (entry,) = select_reported(["hpatches-cvpr17/sift/hpatches17_matching_map"])
    assert entry.split == "full" and "split" not in entry.setting
    columns = ["hpatches17_matching_map"]
    real = {"benchmark": "hpatches-cvpr17", "split": "full",
            "dataset": "hpatches-cvpr17 matching, split full"}  # fmt: skip
    assert reference_rows([entry], real, columns)[0].values == {columns[0]: 0.2547}
    with pytest.raises(InvalidInputError, match=r"a number of split 'full'; the study's cubes "
                       r"hold split 'view' \(their split attr\)"):  # fmt: skip
        reference_rows([entry], {**real, "split": "view"}, columns)
    synthetic = "synthetic-hpatches17 (seed 0): hpatches-cvpr17 matching, split full"
    refused = (r"^reported: hpatches-cvpr17/sift/hpatches17_matching_map was measured on HPatches "
               r"patches; the study's cubes were computed on generated data \('.*synthetic-")
    for dataset in (synthetic, f"{real['dataset']}, {synthetic}"):
        with pytest.raises(InvalidInputError, match=refused):
            reference_rows([entry], {**real, "dataset": dataset}, columns)
    without = replace(entry, split="")  # a number of no split: shown beside any split
    assert reference_rows([without], {**real, "split": "view"}, columns)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nope", "reported: 'nope' matches no published number"),
        ([], "reported: expected a non-empty list of keys or filters; got []"),
        ([3], "reported[0]: expected a non-empty string; got 3"),
        ([{"method": 3}], "reported[0].method: expected a non-empty string; got 3"),
        ([{"year": "2017"}], "reported: filter {'year': '2017'} must map some of"),
    ],
)
def test_study_key_is_checked_when_the_study_is_read(value, message):
    raw = {"data": {"dataset": "synthetic"}, "reported": value}
    with pytest.raises(InvalidInputError, match=re.escape("reports/x.yaml: " + message)):
        study_from_dict(raw, source="reports/x.yaml")


def test_study_key_selects_entries():
    raw = {"data": {"dataset": "synthetic"}, "reported": [{"protocol": "superpoint"}]}
    study = study_from_dict(raw, source="reports/x.yaml")
    assert {e.protocol for e in study.reported} == {"superpoint"} and len(study.reported) == 12
    assert study_from_dict({"data": {"dataset": "synthetic"}}, source="x.yaml").reported == ()


def _study(tmp_path: Path, cube: xr.Dataset, reported: tuple[ReportedResult, ...]):
    qc.save(cube, tmp_path / "cube.nc")
    raw = {"data": {"cube": "cube.nc"}, "metrics": ["true_map_micro"], "baseline": "poor",
           "tests": {"n_resamples": 999, "rank": False}, "figures": ["forest"],
           "outputs": ["html", "markdown", "csv", "latex"]}  # fmt: skip
    return replace(study_from_dict(raw, source=tmp_path / "s.yaml"), reported=reported)


def test_report_shows_reference_rows_and_tests_only_measured_systems(tmp_path, make_query_cube):
    cube = make_query_cube({"good": 0.9, "poor": 0.1}, seed=3)
    cube.attrs["preset"] = "p"
    study = _study(tmp_path, cube, (_entry("p/paper/true_map_micro", "true_map_micro", 0.99),))
    report = build(study, out=tmp_path / "out")
    comparison = report.tests["true_map_micro"].comparison
    assert set(comparison["descriptor"].values.tolist()) | set(
        comparison["baseline"].values.tolist()
    ) == {"good", "poor"}
    assert (tmp_path / "out" / "tables.md").read_text().splitlines()[-1].startswith(
        "| *M (reported)* | *99.0*"
    )
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "table.csv").read_text())))
    assert [r["kind"] for r in rows] == ["measured", "measured", "reported"]
    assert rows[0]["true_map_micro_mark"] == "best"  # good, not the published 99.0
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'class="reported"' in html and "tr.reported" in html  # the row and its style
    assert "M (reported)" not in (tmp_path / "out" / "comparisons.csv").read_text()


def test_report_refuses_a_number_of_another_protocol_before_the_tests(tmp_path, make_query_cube):
    cube = make_query_cube({"good": 0.9, "poor": 0.1}, seed=3)
    study = _study(tmp_path, cube, (_entry("p/paper/true_map_micro", "true_map_micro", 0.99),))
    with pytest.raises(InvalidInputError, match=r"protocol 'p'; the study's cubes were evaluated "
                       r"under no preset"):  # fmt: skip
        build(study, out=tmp_path / "out")
    assert not (tmp_path / "out" / "report.html").exists()


# ---------------------------------------------------------------------------------------------
# the `reported` verb
# ---------------------------------------------------------------------------------------------


def test_cli_lists_filtered_entries_as_json():
    import json

    from tests.cli_helpers import run_cli

    result = run_cli("reported", "--protocol", "hpatches-cvpr17", "--method", "HardNet", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["metric"], r["value"], r["checked"]) for r in rows] == [
        ("hpatches17_verification_map", 0.8843, False),
        ("hpatches17_matching_map", 0.5279, False),
    ]


def test_cli_prints_a_table_and_refuses_a_pattern_that_matches_nothing():
    from tests.cli_helpers import run_cli

    result = run_cli("reported", "superpoint/orb/*", env={"COLUMNS": "200"})
    assert result.returncode == 0 and "3 of" in result.stdout
    assert "superpoint/orb/homography_accuracy@5px" in result.stdout and "56.40" in result.stdout
    failed = run_cli("reported", "nope*")
    assert failed.returncode == 2
    assert failed.stderr.strip() == (
        "metricalc: error: reported: 'nope*' matches no published number "
        "(docs/reported.md lists them)"
    )
