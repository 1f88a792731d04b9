"""No significance verdict, marker, letter or sentence favours the system with the lower mean
(docs/protocols.md, protocol 9), under default settings, in the API (``stats.compare``), the CLI
(``metricalc compare``'s table) and the report (``report.Table`` letters and ``summarize``
sentences of the comparisons ``metricalc report`` runs,
:func:`metricalc.report.analysis.run_tests`).

The cubes are random and small, made so that rank tests and means often disagree: each system
ranks the relevant item of many hard queries one place higher than the query's own rank (a small
AP gain) and that of a few easy queries 10 to 50 places lower (a large AP loss), in other
proportions per system, so that one system wins many queries by a little and loses a few by a
lot.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import xarray as xr

import metricalc as mc
from metricalc import cube as qc
from metricalc.plotting import Table
from metricalc.report import summarize
from metricalc.report.analysis import run_tests
from metricalc.report.study import TestSpec
from metricalc.stats import compare as stats_compare


def compare(*args: Any, **kwargs: Any) -> xr.Dataset:
    """:func:`metricalc.stats.compare` with per-query units unless the test names others: the
    tests of this module exercise the unit-level machinery on small cubes of few scenes."""
    return stats_compare(*args, **{"pair_by": "query", **kwargs})


SEEDS = range(24)
SYSTEMS = ("a", "b", "c")
COLUMNS = ("true_map_micro", "viewpoint_map", "illumination_map", "hit_rate_at_1")
RESAMPLES = 999  # fewer flips and bootstrap resamples than the default 10,000: speed only


def random_cube(seed: int) -> object:
    """3 systems over 6 scenes x 2 pairs x m queries; ranks (``better``) of each system: the
    query's own rank, one place higher on many hard queries, 10 to 50 places lower on a few
    easy ones; a few ties."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(4, 15))
    scenes = np.repeat(["i_a", "i_b", "i_c", "v_a", "v_b", "v_c"], 2 * m)
    n = scenes.size
    coords = {
        "scene": scenes,
        "pair": np.tile(np.repeat(["1-2", "1-3"], m), 6),
        "keypoint_set": np.full(n, "sift"),
        "query_keypoint": np.tile(np.arange(m), 12),
    }
    hard = rng.random(n) < 0.6  # hard queries: the relevant item at rank 4 to 11, else first
    base = np.where(hard, rng.integers(3, 11, n), 0)
    better = np.empty((len(SYSTEMS), n), dtype=np.int64)
    for k in range(len(SYSTEMS)):
        win, loss = rng.uniform(0.1, 0.9), rng.uniform(0.0, 0.12)
        draw = rng.random(n)
        gains = hard & (draw < win)  # one place higher: AP up by 0.01 to 0.08
        losses = ~hard & (draw < loss)  # from first to far down: AP down by about 0.95
        better[k] = base - gains + losses * rng.integers(10, 50, n)
    ties = np.where(rng.random(better.shape) < 0.1, rng.integers(1, 3, better.shape), 0)
    return qc.new_cube(list(SYSTEMS), coords, {"better": better, "ties": ties},
                       attrs=qc.DEFAULT_ATTRS)  # fmt: skip


def check_sides(ds, where: str) -> int:
    """Every comparison that names a better system names the one with the higher mean; every
    rejected comparison without a side says why. Returns the number of such disagreements."""
    disagreements = 0
    for (d, b), row in ds.to_dataframe().iterrows():
        higher = np.sign(row["mean_descriptor"] - row["mean_baseline"])
        if row["favours"] != 0:
            assert row["reject"] and row["favours"] == higher, (where, d, b)
        if row["reject"] and row["favours"] == 0:
            assert row["caveat"], (where, d, b)
            disagreements += 1
        if not row["reject"]:
            assert row["favours"] == 0 and row["caveat"] == "", (where, d, b)
    return disagreements


def test_the_api_never_favours_the_lower_mean():
    disagreements = {"wilcoxon": 0, "sign": 0}
    for seed in SEEDS:
        cube = random_cube(seed)
        for split in (None, "viewpoint"):
            ds = compare(cube, split=split, n_resamples=RESAMPLES)  # default: auto
            assert ds.attrs["test"] == "randomization"
            assert check_sides(ds, f"seed {seed} auto") == 0  # a test of the mean agrees
        hits = compare(cube, metric="hit@1", n_resamples=RESAMPLES)
        check_sides(hits, f"seed {seed} hit@1 {hits.attrs['test']}")
        for test in disagreements:  # asked for: never a verdict against the means either
            ds = compare(cube, test=test, n_resamples=RESAMPLES)
            disagreements[test] += check_sides(ds, f"seed {seed} {test}")
    # the cubes do make rank and sign tests point against the means (the guard is exercised)
    assert disagreements["wilcoxon"] > 0 and disagreements["sign"] > 0


ROW = re.compile(r"^\s*([a-c])\s+([a-c])\s+\d+\s+(\S+)\s+(\S+)\s+\S+\s+\[[^\]]*\]\s+(.*)$")


def terminal_rows(text: str) -> list[tuple[str, str, float, float, str]]:
    """(descriptor, baseline, mean, base, marker) of each row of ``metricalc compare``'s table."""
    rows = []
    for line in text.splitlines():
        match = ROW.match(line)
        if match:
            rest = match.group(5).split()  # p, p adj, [marker], r_rb, d_z, W/T/L
            marker = rest[2] if len(rest) == 6 else ""
            rows.append((match[1], match[2], float(match[3]), float(match[4]), marker))
    return rows


def test_the_cli_table_never_marks_the_lower_mean(tmp_path, capsys):
    from metricalc.cli import main

    marked = 0
    for seed in SEEDS[:10]:
        path = tmp_path / f"cube{seed}.nc"
        qc.save(random_cube(seed), path)
        for extra in ([], ["--test", "wilcoxon"]):
            argv = ["compare", str(path), "--n-resamples", str(RESAMPLES), "--pair-by", "query",
                    *extra]  # fmt: skip
            assert main(argv) == 0
            out = capsys.readouterr().out
            rows = terminal_rows(out)
            assert len(rows) == 3, out
            for d, b, mean, base, marker in rows:
                if marker == ">":
                    assert mean >= base, (seed, d, b, out)
                if marker == "<":
                    assert mean <= base, (seed, d, b, out)
                marked += marker in "<>" and marker != ""
                if marker == "?":
                    assert f"? {d} vs {b}: the wilcoxon test rejects" in " ".join(out.split())
    assert marked > 0


SENTENCE = re.compile(r"^(\S+) > (\S+) on ")


def test_the_report_letters_and_sentences_never_favour_the_lower_mean():
    lettered = no_verdict = 0
    for seed in SEEDS:
        cube = random_cube(seed)
        metrics = mc.metric_set(cube)
        tests = TestSpec(n_resamples=RESAMPLES, pair_by="query")
        results = run_tests({"": cube}, list(COLUMNS), tests=tests,
                            baseline=None)  # fmt: skip
        comparisons = {c: r.comparison for c, r in results.items() if r.comparison is not None}
        table = Table(metrics, comparisons, columns=list(COLUMNS))
        for j, column in enumerate(table.columns):
            values = metrics[column].values
            for i, row in enumerate(table.cells):
                for letter in row[j].letters:
                    loser = table.letters.index(letter)
                    assert values[i] >= values[loser], (seed, column, i, loser)
                    lettered += 1
        for column, ds in comparisons.items():
            check_sides(ds, f"seed {seed} {column}")
            means = {}
            for (d, b), row in ds.to_dataframe().iterrows():
                means[(d, b)] = row["mean_descriptor"] - row["mean_baseline"]
            for sentence in summarize(ds):
                match = SENTENCE.match(sentence)
                if match:
                    winner, loser = match.groups()
                    diff = means.get((winner, loser), -means.get((loser, winner), np.nan))
                    assert diff > 0, (seed, column, sentence)
        # the same comparisons under a Wilcoxon test asked for: "No verdict" where it disagrees
        ds = compare(cube, test="wilcoxon", n_resamples=RESAMPLES)
        for sentence, caveat in zip(summarize(ds), ds.caveat.values, strict=True):
            match = SENTENCE.match(sentence)
            if match:
                winner, loser = match.groups()
                row = ds.sel(descriptor=winner, baseline=loser) if (winner, loser) in list(
                    ds.indexes["comparison"]) else ds.sel(descriptor=loser, baseline=winner)
                diff = float(row.mean_descriptor - row.mean_baseline)
                assert diff * (1 if str(row.descriptor.values) == winner else -1) > 0, sentence
            if caveat:
                assert sentence.startswith("No verdict between "), sentence
                no_verdict += 1
    assert lettered > 0 and no_verdict > 0


def expected_ap_by_hand(better: int, ties: int) -> float:
    """AP of one relevant item under the ``expected`` tie policy (docs/protocols.md, protocol
    1): the mean of 1 / r over the ranks r = 1 + better .. 1 + better + ties."""
    return sum(1.0 / r for r in range(1 + better, 2 + better + ties)) / (ties + 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_random_cubes_are_valid(seed):
    """The layout, ranks and APs of each random cube, checked against the recipe of
    ``random_cube`` and against APs and mAPs computed by hand."""
    cube = random_cube(seed)
    assert cube.descriptor.values.tolist() == list(SYSTEMS)
    n = cube.sizes["query"]
    m = n // 12
    assert n == 12 * m and 4 <= m <= 14
    scenes = cube.scene.values.tolist()
    assert scenes == [s for s in ("i_a", "i_b", "i_c", "v_a", "v_b", "v_c") for _ in range(2 * m)]
    assert cube.pair.values.tolist() == 6 * (m * ["1-2"] + m * ["1-3"])
    assert cube.query_keypoint.values.tolist() == 12 * list(range(m))
    assert cube.split.values.tolist() == [
        "illumination" if s.startswith("i_") else "viewpoint" for s in scenes
    ]
    better, ties = cube.better.values, cube.ties.values
    assert better.min() >= 0 and set(np.unique(ties)) <= {0, 1, 2}
    assert (cube.n_relevant.values == 1).all()
    # per query: a hard query (all systems within one place of each other, at most 10th) or an
    # easy one (first for some systems, 10 or more places lower for the others)
    low, high = better.min(axis=0), better.max(axis=0)
    hard = (high - low <= 1) & (high <= 10)
    assert (hard | ((low == 0) & ((better == 0) | (better >= 10)).all(axis=0))).all()
    ap = np.array([[expected_ap_by_hand(b, t) for b, t in zip(*row, strict=True)]
                   for row in zip(better, ties, strict=True)])  # fmt: skip
    np.testing.assert_allclose(cube.ap.values, ap, rtol=1e-12)
    metrics = mc.metric_set(cube)
    viewpoint = cube.split.values == "viewpoint"
    np.testing.assert_allclose(metrics.true_map_micro.values, ap.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(metrics.viewpoint_map.values, ap[:, viewpoint].mean(axis=1),
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(metrics.illumination_map.values, ap[:, ~viewpoint].mean(axis=1),
                               rtol=1e-12)  # fmt: skip


def test_the_random_cubes_set_query_wins_against_the_means():
    """What the cubes are made for: in some cube, a system wins more queries (higher AP) than
    another but has the lower mean AP (APs by hand)."""
    against = 0
    for seed in SEEDS:
        cube = random_cube(seed)
        ap = np.vectorize(expected_ap_by_hand)(cube.better.values, cube.ties.values)
        for j in range(len(SYSTEMS)):
            for k in range(len(SYSTEMS)):
                wins, losses = (ap[j] > ap[k]).sum(), (ap[j] < ap[k]).sum()
                against += bool(wins > losses and ap[j].mean() < ap[k].mean())
    assert against > 0
