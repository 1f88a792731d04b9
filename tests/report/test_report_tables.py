"""Paper tables and plain-language summaries, on hand-built metric sets and comparisons.

The comparison Datasets are built by hand in the layout of contract B (``metricalc.stats.compare``:
a ``comparison`` dim indexed by a (descriptor, baseline) MultiIndex), with values whose marks and
sentences are known.
"""

from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import metricalc as mc
from metricalc.errors import InvalidInputError
from metricalc.plotting.comparisons import comparison_from_frame
from metricalc.plotting.labels import escape_latex, escape_markdown, format_p
from metricalc.plotting.tables import Table, row_letter
from metricalc.report.summary import (
    cd_groups,
    describe_comparison,
    describe_ranking,
    effect_size,
    summarize,
)
from tests.shared_checks import assert_balanced_latex

SYSTEMS = ["sift", "my_desc&1", "50%_net", "<b>x</b>"]

PROTOCOL = {
    "tau_px": 3.0,
    "border_px": 40.0,
    "tie_policy": "expected",
    "ap_method": "ir",
    "distance": "l2",
    "keypoints": "locked:sift",
    "dataset": "hpatches_release",
}


def metric_set() -> xr.Dataset:
    """Four systems; viewpoint mAP has a tie at the top (as printed) and a NaN."""
    return xr.Dataset(
        {
            "true_map_micro": ("descriptor", [0.512, 0.634, 0.401, 0.598]),
            "viewpoint_map": ("descriptor", [0.7001, 0.6999, np.nan, 0.5]),
            "illumination_map": ("descriptor", [0.3, 0.2, 0.25, 0.1]),
            "r0_rate": ("descriptor", [0.2, 0.1, 0.3, 0.15]),
            "keypoint_verification_ap": ("descriptor", [np.nan] * 4),
            "total_queries_processed": ("descriptor", np.array([1200, 1100, 900, 1000])),
            "rank_histogram": (("descriptor", "rank_bin"), np.ones((4, 2))),
        },
        coords={"descriptor": SYSTEMS, "rank_bin": ["1", ">1"]},
        attrs=PROTOCOL,
    )


COMPARE_ATTRS = {
    "metric": "ap",
    "pair_by": "query",
    "test": "wilcoxon",
    "correction": "holm",
    "alpha": 0.05,
    "split": "",
    "confidence_level": 0.95,
}


def comparison(rows: list[tuple], **attrs) -> xr.Dataset:
    """(descriptor, baseline, mean_diff, reject, pvalue_corrected) rows -> a compare Dataset."""
    frame = pd.DataFrame(
        [
            {
                "descriptor": d,
                "baseline": b,
                "n": 500,
                "n_dropped": 0,
                "mean_descriptor": 0.5 + diff / 2,
                "mean_baseline": 0.5 - diff / 2,
                "mean_diff": diff,
                "median_diff": diff,
                "ci_low": diff - 0.02,
                "ci_high": diff + 0.02,
                "statistic": 10.0,
                "pvalue": p / 2,
                "pvalue_corrected": p,
                "reject": reject,
                "favours": int(np.sign(diff)) if reject else 0,
                "rank_biserial": np.sign(diff) * 0.4,
                "cohens_dz": np.sign(diff) * 0.6,
                "wins": 300,
                "ties": 0,
                "losses": 200,
                "note": "",
            }
            for d, b, diff, reject, p in rows
        ]
    )
    return comparison_from_frame(frame, {**COMPARE_ATTRS, **attrs})


def mapped_comparisons() -> dict[str, xr.Dataset]:
    # true_map_micro, all pairs: b > a, b > c, d > c (rejected); a vs d not rejected
    micro = comparison(
        [
            ("sift", "my_desc&1", -0.12, True, 0.001),
            ("sift", "50%_net", 0.11, False, 0.06),
            ("sift", "<b>x</b>", -0.09, False, 0.2),
            ("my_desc&1", "50%_net", 0.23, True, 0.0001),
            ("my_desc&1", "<b>x</b>", 0.04, False, 0.3),
            ("50%_net", "<b>x</b>", -0.2, True, 0.0002),
        ]
    )
    # viewpoint mAP against the baseline sift: sift > d, by the sign of the difference
    viewpoint = comparison(
        [
            ("my_desc&1", "sift", -0.0002, False, 0.9),
            ("<b>x</b>", "sift", -0.2, True, 0.003),
        ],
        split="viewpoint",
    )
    return {"true_map_micro": micro, "viewpoint_map": viewpoint}


COLUMNS = [
    "true_map_micro",
    "viewpoint_map",
    "illumination_map",
    "r0_rate",
    "total_queries_processed",
]


def table(**options) -> Table:
    return Table(
        metric_set(), mapped_comparisons(), columns=COLUMNS, names={"sift": "SIFT"}, **options
    )


# --------------------------------------------------------------------------------------------
# LaTeX: compile-free checks
# --------------------------------------------------------------------------------------------


def unescaped(text: str, char: str) -> list[int]:
    """Positions of ``char`` not preceded by a backslash."""
    return [m.start() for m in re.finditer(rf"(?<!\\){re.escape(char)}", text)]


def test_latex_is_balanced_and_escapes_every_special_character():
    latex = table().to_latex()
    assert_balanced_latex(latex)
    assert r"\toprule" in latex and r"\midrule" in latex and r"\bottomrule" in latex
    # names: underscores, &, %, <, > escaped; no raw specials left in the body
    assert r"my\_desc\&1" in latex and r"50\%\_net" in latex
    assert r"\textless{}b\textgreater{}x\textless{}/b\textgreater{}" in latex
    assert unescaped(latex, "_") == []
    assert unescaped(latex, "%") == []
    body = latex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    n_columns = len(table().columns)
    for line in body:  # exactly one unescaped & between each of the n + 1 cells
        assert len(unescaped(line, "&")) == n_columns
    assert r"\caption{" in latex and r"\label{tab:results}" in latex


def latex_cells(latex: str) -> tuple[list[str], list[list[str]]]:
    lines = latex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    header = latex.split(r"\toprule")[1].split(r"\midrule")[0].strip().rstrip("\\").strip()
    headers = [h.strip() for h in re.split(r"(?<!\\)&", header)]
    rows = [
        [c.strip() for c in re.split(r"(?<!\\)&", line.rstrip().rstrip("\\"))] for line in lines
    ]
    return headers, rows


def plain_number(cell: str) -> float:
    core = re.sub(r"\\textsuperscript\{[a-z]*\}", "", cell)
    core = re.sub(r"\\(textbf|underline)\{([^}]*)\}", r"\2", core).replace("{,}", "")
    return float(core) if core != "--" else np.nan


def test_latex_bold_is_the_column_maximum_and_underline_the_second():
    t = table()
    headers, rows = latex_cells(t.to_latex())
    assert headers[1:] == t.headers()
    for j, column in enumerate(t.columns, start=1):
        cells = [row[j] for row in rows]
        values = np.array([plain_number(c) for c in cells])
        finite = values[np.isfinite(values)]
        if column == "total_queries_processed":  # counts are not ranked
            assert not any(r"\textbf" in c or r"\underline" in c for c in cells)
            continue
        higher = column != "r0_rate"
        order = sorted(set(finite.tolist()), reverse=higher)
        for cell, value in zip(cells, values, strict=True):
            assert (r"\textbf{" in cell) == (np.isfinite(value) and value == order[0])
            second = len(order) > 1 and np.isfinite(value) and value == order[1]
            assert (r"\underline{" in cell) == second


def test_marks_follow_the_printed_values():
    t = table()
    viewpoint = t.columns.index("viewpoint_map")
    # 0.7001 and 0.6999 both print 70.0: both bold; 50.0 second; NaN a dash, unmarked
    assert [row[viewpoint].mark for row in t.cells] == ["best", "best", "", "second"]
    assert t.cells[2][viewpoint].text == ""
    r0 = t.columns.index("r0_rate")  # lower is better
    assert [row[r0].mark for row in t.cells] == ["", "best", "", "second"]
    micro = t.columns.index("true_map_micro")
    assert [row[micro].text for row in t.cells] == ["51.2", "63.4", "40.1", "59.8"]
    assert [row[micro].mark for row in t.cells] == ["", "best", "", "second"]
    assert [row[micro].text for row in table(decimals=2).cells] == [
        "51.20", "63.40", "40.10", "59.80",
    ]  # fmt: skip


def test_letters_mark_significantly_better_systems():
    t = table()
    micro = t.columns.index("true_map_micro")
    viewpoint = t.columns.index("viewpoint_map")
    # rows a = sift, b = my_desc&1, c = 50%_net, d = <b>x</b>
    assert [row[micro].letters for row in t.cells] == ["", "ac", "", "c"]
    assert [row[viewpoint].letters for row in t.cells] == ["d", "", "", ""]
    latex = t.to_latex()
    assert r"\textbf{63.4}\textsuperscript{ac}" in latex
    assert r"\underline{59.8}\textsuperscript{c}" in latex


def test_default_columns_skip_absent_and_all_nan_metrics():
    t = Table(metric_set())
    assert t.columns == ["true_map_micro", "viewpoint_map", "illumination_map"]
    patch = xr.Dataset(  # a patch-retrieval cube's metric set: no hit rates
        {
            "true_map_micro": ("descriptor", [0.5, 0.6]),
            "hit_rate_at_1": ("descriptor", [np.nan, np.nan]),
            "image_retrieval_map": ("descriptor", [0.7, 0.8]),
        },
        coords={"descriptor": ["a", "b"]},
    )
    assert Table(patch).columns == ["true_map_micro", "image_retrieval_map"]
    own = xr.Dataset({"my_score": ("descriptor", [2.5, 3.0])}, coords={"descriptor": ["a", "b"]})
    assert Table(own).columns == ["my_score"]  # no default column: every column with a value
    assert [row[0].text for row in Table(own).cells] == ["2.5", "3.0"]  # not a rate
    chosen = Table(metric_set(), columns=["keypoint_verification_ap", "true_map_micro"])
    assert [row[0].text for row in chosen.cells] == [""] * 4  # chosen all-NaN: dashes
    assert "--" in chosen.to_latex()


def test_caption_names_test_correction_alpha_and_protocol():
    caption = table().caption
    for part in (
        "Results on hpatches_release.",
        "(every descriptor on the keypoints of the SIFT detector)",
        "ranked by descriptor distance (L2)",
        "the keypoint within 3 px of its position mapped by the ground-truth homography",
        "(keypoints within 40 px of the border left out)",
        "information-retrieval average precision (1/rank of the correct match; a correct match "
        "tied with other candidates scores the mean over the tied ranks)",
        "Wilcoxon signed-rank test paired by query",
        "Holm correction",
        "alpha = 0.05",
        "over 6 comparisons, alpha = 0.05 (mAP (queries))",
        "over 2 comparisons, alpha = 0.05 (mAP v)",
        "Not tested: mAP i, R=0 rate, queries.",
    ):
        assert part in caption, part
    assert r"hpatches\_release" in table().to_latex()


def test_markdown_rows_marks_and_escapes():
    t = table()
    text = t.to_markdown()
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + len(SYSTEMS)
    assert lines[0] == "| system | " + " | ".join(escape_markdown(h) for h in t.headers()) + " |"
    assert lines[2].startswith("| (a) SIFT |")
    assert lines[3].startswith(r"| (b) my\_desc&amp;1 | **63.4**<sup>ac</sup> |")
    assert r"&lt;b&gt;x&lt;/b&gt;" in lines[5] and "<b>" not in lines[5]
    assert "&ndash;" in lines[4]  # the NaN viewpoint mAP of 50%_net
    assert all(line.count("|") == len(t.columns) + 2 for line in lines)


def test_csv_holds_printed_values_marks_and_letters():
    rows = list(csv.DictReader(io.StringIO(table().to_csv())))
    assert [r["descriptor"] for r in rows] == SYSTEMS
    assert [r["letter"] for r in rows] == ["a", "b", "c", "d"]
    assert rows[0]["name"] == "SIFT"
    assert [float(r["true_map_micro"]) for r in rows] == [51.2, 63.4, 40.1, 59.8]
    assert [r["true_map_micro_mark"] for r in rows] == ["", "best", "", "second"]
    assert [r["true_map_micro_better_than"] for r in rows] == ["", "ac", "", "c"]
    assert rows[2]["viewpoint_map"] == ""  # NaN
    assert [r["total_queries_processed"] for r in rows] == ["1200.0", "1100.0", "900.0", "1000.0"]


class Cells(HTMLParser):
    """Rows of <th>/<td> texts, and the tags seen inside cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif self.cell is not None:
            self.tags.append(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def test_html_table_contents():
    parser = Cells()
    parser.feed(table().to_html())
    header, *rows = parser.rows
    assert header == ["system", *table().headers()]
    assert [r[0] for r in rows] == ["(a) SIFT", "(b) my_desc&1", "(c) 50%_net", "(d) <b>x</b>"]
    assert rows[1][1] == "63.4ac" and rows[2][2] == "\N{EN DASH}"
    assert set(parser.tags) == {"strong", "u", "sup"}  # the name "<b>x</b>" is text, not a tag


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(InvalidInputError, match=r"not in the metric set; available"):
        Table(metric_set(), columns=["nope"])
    with pytest.raises(InvalidInputError, match="decimals"):
        Table(metric_set(), decimals=9)
    with pytest.raises(InvalidInputError, match="rank_histogram"):
        Table(metric_set(), columns=["rank_histogram"])
    stranger = comparison([("sift", "surf", 0.1, True, 0.01)])
    with pytest.raises(InvalidInputError, match="'surf', which is not a row"):
        Table(metric_set(), {"true_map_micro": stranger})
    with pytest.raises(InvalidInputError, match="not a column"):
        Table(metric_set(), {"hit_rate_at_1": stranger})
    flat = xr.Dataset({"reject": ("comparison", [True])})
    with pytest.raises(InvalidInputError, match="MultiIndex"):
        Table(metric_set(), {"true_map_micro": flat})


def test_row_letters_continue_after_z():
    assert [row_letter(i) for i in (0, 1, 25, 26, 51, 52, 701, 702)] == [
        "a", "b", "z", "aa", "az", "ba", "zz", "aaa",
    ]  # fmt: skip


def test_latex_escape_covers_every_special():
    assert escape_latex(r"\&%$#_{}~^<>|") == (
        r"\textbackslash{}\&\%\$\#\_\{\}\textasciitilde{}\textasciicircum{}"
        r"\textless{}\textgreater{}\textbar{}"
    )


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


def test_significant_sentence_names_the_winner_first():
    ds = mapped_comparisons()["true_map_micro"]
    sentence = describe_comparison(ds, "sift", "my_desc&1", names={"sift": "SIFT"})
    assert sentence == (
        "my_desc&1 > SIFT on mAP: +12.0 points, 95% CI [10.0, 14.0], Wilcoxon p = 0.001 after "
        "Holm, medium effect (rank-biserial r = 0.40; 500 paired queries)."
    )
    sentence = describe_comparison(ds, "my_desc&1", "50%_net", decimals=2)
    assert sentence.startswith("my_desc&1 > 50%_net on mAP: +23.00 points, 95% CI [21.00, 25.00]")
    assert "p < 0.001 after Holm" in sentence


def test_no_significant_difference_wording():
    ds = mapped_comparisons()["true_map_micro"]
    assert describe_comparison(ds, "sift", "50%_net") == (
        "No significant difference between sift and 50%_net on mAP: +11.0 points (sift minus "
        "50%_net), 95% CI [9.0, 13.0], Wilcoxon p = 0.06 after Holm, medium effect "
        "(rank-biserial r = 0.40; 500 paired queries)."
    )


def test_sentence_settings_follow_the_attrs():
    ds = comparison(
        [("orb", "sift", 0.05, True, 0.0312)],
        test="ttest",
        correction="fdr_bh",
        pair_by="pair",
        split="illumination",
        confidence_level=0.9,
    )
    ds["n_dropped"][:] = 7
    assert describe_comparison(ds, "orb", "sift") == (
        "orb > sift on illumination mAP: +5.0 points, 90% CI [3.0, 7.0], paired t-test p = 0.031 "
        "after Benjamini-Hochberg, medium effect (d_z = 0.60; 500 image pairs, 7 unpaired left "
        "out)."
    )
    hit = comparison([("orb", "sift", -0.5, False, 1.0)], metric="hit@5", correction="none")
    assert describe_comparison(hit, "orb", "sift").startswith(
        "No significant difference between orb and sift on hit rate at 5: -50.0 points"
    )
    assert "p = 1 uncorrected" in describe_comparison(hit, "orb", "sift")
    assert len(summarize(mapped_comparisons()["true_map_micro"])) == 6
    with pytest.raises(InvalidInputError, match="no comparison of 'sift' against 'orb'"):
        describe_comparison(hit, "sift", "orb")


def test_no_letter_or_sentence_favours_the_lower_mean():
    # many small wins of sift against a few large losses: a rank or sign test points to sift,
    # the mean difference (orb minus sift, +0.001) to orb. compare's favours is then 0 (no
    # verdict); a Dataset from elsewhere (a CSV of an older version) may still say -1: neither
    # the table nor the sentence may call sift, the lower mean, better
    frame = comparison([("orb", "sift", 0.001, True, 0.0001)]).to_dataframe()
    frame["rank_biserial"] = -0.22
    metrics = xr.Dataset(
        {"true_map_micro": ("descriptor", [0.5, 0.6])}, coords={"descriptor": ["sift", "orb"]}
    )
    cases = (("wilcoxon", -1), ("wilcoxon", 0), ("ttest", 1), ("sign", -1), ("sign", 0))
    for test, favours in cases:
        frame["favours"] = favours
        ds = comparison_from_frame(frame, {**COMPARE_ATTRS, "test": test})
        t = Table(metrics, {"true_map_micro": ds})
        letters = {s: row[0].letters for s, row in zip(t.systems, t.cells, strict=True)}
        # rows: a = sift, b = orb
        assert letters == ({"sift": "", "orb": "a"} if favours == 1 else {"sift": "", "orb": ""})
        sentence = describe_comparison(ds, "orb", "sift")
        assert not sentence.startswith("sift > ")
        if favours == 1:
            assert sentence.startswith("orb > sift on mAP: +0.1 points")
        if test == "wilcoxon":
            assert sentence == (
                "No verdict between orb and sift on mAP: the Wilcoxon signed-rank test rejects "
                "(p < 0.001 after Holm, small effect) in favour of sift on the location of the "
                "differences, but the mean difference favours orb: +0.1 points (orb minus sift), "
                "95% CI [-1.9, 2.1] (rank-biserial r = -0.22; 500 paired queries)."
            )
        if test == "sign":
            assert sentence.startswith("No verdict between orb and sift on mAP: the sign test")
    # a significant mean difference the table's values contradict (another aggregation): no letter
    flipped = metrics.assign(true_map_micro=("descriptor", [0.6, 0.5]))
    frame["favours"] = 1
    ds = comparison_from_frame(frame, {**COMPARE_ATTRS, "test": "randomization"})
    assert [row[0].letters for row in Table(flipped, {"true_map_micro": ds}).cells] == ["", ""]
    # lower is better (r0_rate): the side favoured by the test has the higher rate, so it loses
    rates = xr.Dataset(
        {"r0_rate": ("descriptor", [0.1, 0.3])}, coords={"descriptor": ["sift", "orb"]}
    )
    t = Table(rates, {"r0_rate": comparison([("orb", "sift", 0.2, True, 0.001)])})
    assert [row[0].letters for row in t.cells] == ["b", ""]


def test_untested_comparisons_have_no_letter_a_sentence_and_leave_the_caption_family():
    ds = comparison(
        [("orb", "sift", -0.2, True, 0.001), ("sift (native)", "sift", 0.0, False, np.nan)]
    )
    ds["note"][1] = "all 40 paired differences are zero"
    ds["pvalue"][1] = np.nan
    metrics = xr.Dataset(
        {"true_map_micro": ("descriptor", [0.5, 0.3, 0.5])},
        coords={"descriptor": ["sift", "orb", "sift (native)"]},
    )
    t = Table(metrics, {"true_map_micro": ds})
    assert [row[0].letters for row in t.cells] == ["b", "", ""]
    assert "Holm correction over 1 comparison (1 more not testable), alpha = 0.05" in t.caption
    assert describe_comparison(ds, "sift (native)", "sift") == (
        "sift (native) vs sift on mAP: not tested: all 40 paired differences are zero (500 "
        "paired queries)."
    )


def test_effect_size_thresholds():
    words = [
        effect_size({"rank_biserial": r, "cohens_dz": 0}, "wilcoxon")[2]
        for r in (0.0, 0.0999, 0.1, -0.29, 0.3, 0.4999, -0.5, 1.0)
    ]
    assert words == [
        "negligible", "negligible", "small", "small", "medium", "medium", "large", "large",
    ]  # fmt: skip
    words = [
        effect_size({"rank_biserial": 0, "cohens_dz": d}, "ttest")[2]
        for d in (0.1, 0.2, 0.5, -0.8, np.nan)
    ]
    assert words == ["negligible", "small", "medium", "large", "undetermined"]


@pytest.mark.parametrize(
    ("p", "alpha", "text"),
    [
        (0.0, None, "p < 0.001"),
        (0.000999, None, "p < 0.001"),
        (0.001, None, "p = 0.001"),
        (0.00456, None, "p = 0.0046"),
        (0.0456, None, "p = 0.046"),
        (0.456, None, "p = 0.46"),
        (0.999, None, "p = 1"),
        (1.0, None, "p = 1"),
        (0.0496, 0.05, "p = 0.0496"),
        (0.04999, 0.05, "p = 0.04999"),
        (0.0504, 0.05, "p = 0.05"),
        (0.00996, 0.01, "p = 0.00996"),
        (np.nan, None, "p n/a"),
    ],
)
def test_p_value_formatting(p, alpha, text):
    assert format_p(p, alpha=alpha) == text


# --------------------------------------------------------------------------------------------
# Rankings and CD groups
# --------------------------------------------------------------------------------------------


def ranking(ranks: list[float], cd: float, names: list[str] | None = None) -> xr.Dataset:
    names = names or [f"s{i}" for i in range(len(ranks))]
    different = [[abs(a - b) > cd for b in ranks] for a in ranks]
    return xr.Dataset(
        {
            "average_rank": ("descriptor", ranks),
            "nemenyi_different": (("descriptor", "other"), different),
            "critical_difference": cd,
            "friedman_statistic": 21.5,
            "friedman_pvalue": 0.0004,
            "n_units": 1500,
        },
        coords={"descriptor": names, "other": names},
        attrs={"metric": "ap", "split": "", "alpha": 0.05, "pair_by": "pair"},
    )


def brute_force_groups(ranks: list[float], cd: float) -> list[list[int]]:
    """Every maximal set of consecutive (by rank) systems with no pair differing, size >= 2."""
    order = sorted(range(len(ranks)), key=lambda i: (ranks[i], i))
    runs = []
    for i in range(len(order)):
        for j in range(i + 1, len(order)):
            members = order[i : j + 1]
            if all(abs(ranks[a] - ranks[b]) <= cd for a in members for b in members):
                runs.append((i, j))
    maximal = [r for r in runs if not any(o != r and o[0] <= r[0] and r[1] <= o[1] for o in runs)]
    return [[order[k] for k in range(i, j + 1)] for i, j in sorted(maximal)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(2, 20).map(lambda r: r / 4), min_size=2, max_size=9),
    st.sampled_from([0.25, 0.5, 1.0, 1.7, 3.0]),
)
def test_cd_groups_equal_a_brute_force_search(ranks, cd):
    names = [f"s{i}" for i in range(len(ranks))]
    expected = [[names[i] for i in group] for group in brute_force_groups(ranks, cd)]
    assert cd_groups(ranking(ranks, cd, names)) == expected


def test_ranking_paragraph():
    text = describe_ranking(
        ranking([1.2, 2.9, 1.6, 3.1], 0.8, ["sift", "orb", "rootsift", "brief"]),
        names={"sift": "SIFT"},
        metric_phrase="viewpoint mAP",
    )
    assert text == (
        "Ranking on viewpoint mAP: Friedman test over 1,500 image pairs and 4 systems, "
        "chi-square = 21.50, p < 0.001. Average ranks (1 = best): SIFT 1.20, rootsift 1.60, "
        "orb 2.90, brief 3.10. Nemenyi critical difference 0.80 at alpha 0.05; not "
        "significantly different: SIFT and rootsift; orb and brief."
    )
    assert "every pair of systems differs" in describe_ranking(ranking([1.0, 2.0, 3.0], 0.5))


def test_fraction_metrics_are_the_same_for_the_report_and_the_terminal_table():
    """Every 0/1-per-query or [0, 1] cube metric is shown in percent points, by the report's
    sentences and forest plots and by ``metricalc compare``'s table alike (``nn_mutual`` is 0 or
    1 per query, docs/cube.md)."""
    from rich.console import Console

    from metricalc.plotting.labels import is_fraction_metric
    from metricalc.plotting.terminal import print_comparisons

    for metric in ("ap", "image_ap", "nn_correct", "nn_mutual", "hit@1", "hit@10"):
        assert is_fraction_metric(metric), metric
    for metric in ("nn_distance", "better", "hit@", "hit@0x"):
        assert not is_fraction_metric(metric), metric
    index = pd.MultiIndex.from_arrays([["orb"], ["sift"]], names=["descriptor", "baseline"])
    one = {name: ("comparison", [value]) for name, value in {
        "n": 9, "mean_descriptor": 0.25, "mean_baseline": 0.5, "mean_diff": -0.25,
        "ci_low": -0.375, "ci_high": -0.125, "pvalue": 0.01, "pvalue_corrected": 0.01,
        "favours": -1, "rank_biserial": -1.0, "cohens_dz": -2.0, "wins": 0, "ties": 0,
        "losses": 9, "note": "",
    }.items()}  # fmt: skip
    for metric, percent in (("nn_mutual", True), ("nn_distance", False)):
        ds = xr.Dataset(
            one, coords=xr.Coordinates.from_pandas_multiindex(index, "comparison"),
            attrs={"metric": metric, "test": "wilcoxon", "correction": "holm", "alpha": 0.05,
                   "pair_by": "query", "split": ""},
        )  # fmt: skip
        console = Console(file=io.StringIO(), width=200)
        print_comparisons(ds, console=console)
        text = console.file.getvalue()
        assert ("-25.00" in text and "values in percent" in text) == percent, metric
        assert ("-0.25" in text and "values in percent" not in text) == (not percent), metric


def _definitions(caption: str) -> dict[str, str]:
    """The column definitions of a caption: ``{header: definition}``."""
    listed = caption.split("Columns: ", 1)[1].split(". Values in percent", 1)[0]
    return dict(item.split(" is the ", 1) for item in listed.split("; "))


def test_the_default_mean_ap_columns_are_scene_means_and_every_column_is_defined(make_query_cube):
    """One definition per family: mAP, mAP v and mAP i are means over scenes of scene mAPs
    (recomputed here with pandas), each header defined once in the caption; the data's nature is
    stated under a custom title."""
    cube = make_query_cube({"sift": 0.5, "orb": 0.3}, seed=3)
    cube.attrs["dataset"] = "synthetic-sequences sha256:0123"
    metrics = mc.metric_set(cube)
    t = Table(metrics, caption="My title.")
    assert t.columns[:3] == ["true_map_macro_by_scene", "viewpoint_map", "illumination_map"]
    assert "true_map_micro" not in t.columns
    frame = pd.DataFrame({"scene": cube.scene.values, "ap": cube.ap.sel(descriptor="sift").values})
    scene_map = frame.dropna().groupby("scene")["ap"].mean()
    views = scene_map[scene_map.index.str.startswith("v_")]
    shown = t.to_frame().loc["sift"]
    assert shown["true_map_macro_by_scene"] == round(100 * scene_map.mean(), 1)
    assert shown["viewpoint_map"] == round(100 * views.mean(), 1)
    caption = t.caption
    assert caption.startswith("My title. Data: metricalc's built-in synthetic benchmark")
    defined = _definitions(caption)
    assert list(defined) == t.headers()  # every column, once, in order
    assert defined["mAP"] == "mean of the scene mAPs over all scenes"
    assert "a scene's mAP is the mean AP over its R = 1 queries" in caption
    # a metric set without the scene mean: the query-weighted mean stands in, named as such
    micro = Table(metrics.drop_vars("true_map_macro_by_scene"))
    assert micro.columns[0] == "true_map_micro" and micro.headers()[0] == "mAP (queries)"


def test_a_column_equal_to_another_by_definition_is_shown_once():
    metrics = xr.Dataset(
        {"true_map_micro": ("descriptor", [0.5, 0.6]),
         "keypoint_verification_ap": ("descriptor", [0.2, 0.3]),
         "keypoint_retrieval_ap": ("descriptor", [0.2, 0.3])},
        coords={"descriptor": ["a", "b"]}, attrs={**PROTOCOL, "y0_policy": "negative"},
    )  # fmt: skip
    chosen = ["true_map_micro", "keypoint_verification_ap", "keypoint_retrieval_ap"]
    for t in (Table(metrics), Table(metrics, columns=chosen)):
        assert t.columns == ["true_map_micro", "keypoint_verification_ap"]
        assert "The keypoint retrieval AP equals the keypoint verification AP" in t.caption
    # under the HPatches rule (y0 = ignore) the two differ by definition: both are shown
    metrics.attrs["y0_policy"] = "ignore"
    assert Table(metrics).columns == chosen
    assert "equals" not in Table(metrics).caption


def test_caption_names_the_data_by_its_path_not_its_fingerprint():
    metrics = metric_set()
    metrics.attrs.update(dataset="sha256:0123456789abcdef", dataset_path="data/hpatches-release")
    caption = Table(metrics, columns=COLUMNS).caption
    assert caption.startswith("Results on data/hpatches-release.") and "sha256" not in caption
    metrics.attrs.pop("dataset_path")
    assert Table(metrics, columns=COLUMNS).caption.startswith("Results on sha256:0123456789abcdef.")
