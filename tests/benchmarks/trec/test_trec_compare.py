"""Several TREC runs: their QueryCube (metricalc.retrieval.querycube), the paired tests per
measure and the table (metricalc.benchmarks.trec.comparison), and ``metricalc trec-eval QRELS RUN1
RUN2 ...``; checked against single-run evaluations, a direct sign-flip test, an exact
randomization test enumerating every sign vector, and Holm's procedure written here."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from metricalc import cube as qc
from metricalc import metric_set, stats
from metricalc.benchmarks.trec import cli as cli_trec
from metricalc.benchmarks.trec.comparison import compare_runs
from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.retrieval import (
    Qrels,
    Run,
    evaluate,
    read_qrels,
    read_run,
    write_qrels,
    write_run,
)
from metricalc.retrieval.querycube import cube_variable, retrieval_cube, validate_retrieval_cube
from metricalc.stats.compare import generators
from tests.shared_checks import assert_balanced_latex

MEASURES = ["map", "P.5,10", "ndcg_cut.10", "recip_rank", "bpref", "num_rel_ret", "gm_map"]


def collection(seed: int = 0, n_queries: int = 40):
    """Qrels with graded judgments and three runs of rising quality; run "c" lacks a fifth of
    the queries, run "a" retrieves a query the qrels do not judge."""
    rng = np.random.default_rng(seed)
    qrels = {f"q{i:02d}": {f"d{j}": int(rng.integers(0, 3)) if j < 8 else 0 for j in range(15)}
             for i in range(n_queries)}
    runs = {}
    for k, name in enumerate("abc"):
        scores = {}
        for i in range(n_queries):
            if name == "c" and i % 5 == 0:
                continue
            scores[f"q{i:02d}"] = {f"d{j}": float(rng.random() + (0.3 * k if j < 8 else 0))
                                   for j in range(15)}
        if name == "a":
            scores["zz"] = {"d1": 1.0}
        runs[name] = Run.from_dict(scores, tag=f"{name}_tag")
    return Qrels.from_dict(qrels), runs


@pytest.fixture(scope="module")
def data():
    return collection()


@pytest.mark.parametrize("complete", [False, True])
def test_cube_holds_the_single_run_values_per_query(data, complete):
    qrels, runs = data
    cube = retrieval_cube(qrels, runs, MEASURES, complete=complete)
    assert validate_retrieval_cube(cube) is cube
    qids = cube["scene"].values.tolist()
    assert qids == sorted(qids) and "zz" not in qids and len(qids) == 40
    for name, run in runs.items():
        single = evaluate(qrels, run, MEASURES, complete=complete)
        position = {q: i for i, q in enumerate(single.queries)}
        for measure, values in single.per_query.items():
            ours = cube[cube_variable(measure)].sel(descriptor=name).values
            expected = np.array([values[position[q]] if q in position else
                                 (0.0 if complete else np.nan) for q in qids])
            np.testing.assert_array_equal(ours, expected, err_msg=f"{name} {measure}")
            # the mean over the run's queries is trec_eval's all (sums are not means)
            if measure not in ("num_rel_ret",):
                assert np.nanmean(ours) == pytest.approx(single.summary[measure], abs=1e-15)
        missing = ~np.isin(qids, single.queries) & (not complete)
        assert (cube["n_relevant"].sel(descriptor=name).values == -1).tolist() == missing.tolist()
    assert "gm_map" not in cube and "runid" in cube
    assert cube["runid"].values.tolist() == ["a_tag", "b_tag", "c_tag"]
    assert cube.attrs["measures"].split()[0] == "map" and cube.attrs["complete"] == int(complete)


def test_cube_without_map_asked_still_has_ap_and_runs_named_by_tag(data):
    qrels, runs = data
    cube = retrieval_cube(qrels, list(runs.values()), ["P.5"])
    assert cube["descriptor"].values.tolist() == ["a_tag", "b_tag", "c_tag"]
    single = evaluate(qrels, runs["b"], ["map"])
    np.testing.assert_array_equal(cube["ap"].sel(descriptor="b_tag").values,
                                  single.per_query["map"])
    with pytest.raises(InvalidInputError, match="two runs have the tag"):
        retrieval_cube(qrels, [runs["a"], runs["a"]], ["P.5"])


def test_metric_set_and_save_take_the_cube_like_ap(data, tmp_path):
    qrels, runs = data
    cube = retrieval_cube(qrels, runs, ["map", "ndcg_cut.10"])
    maps = [evaluate(qrels, run, ["map"]).summary["map"] for run in runs.values()]
    np.testing.assert_allclose(metric_set(cube)["true_map_micro"].values, maps, rtol=1e-14)
    qc.save(cube, tmp_path / "runs.nc")
    opened = qc.open_cube(tmp_path / "runs.nc")
    validate_retrieval_cube(opened)
    np.testing.assert_array_equal(opened["ndcg_cut_10"].values, cube["ndcg_cut_10"].values)


def test_validate_retrieval_cube_refuses_a_broken_variant(data):
    qrels, runs = data
    cube = retrieval_cube(qrels, runs, ["P.5"])
    with pytest.raises(InvalidInputError, match="attr benchmark"):
        validate_retrieval_cube(cube.assign_attrs(benchmark="hpatches-retrieval"))
    broken = cube.copy(deep=True)
    broken["P_5"].values[0, 0] = np.nan
    with pytest.raises(InvalidInputError, match="'P_5' must be NaN exactly where"):
        validate_retrieval_cube(broken)
    with pytest.raises(InvalidInputError, match="attr ties"):
        validate_retrieval_cube(cube.assign_attrs(ties="random"))


def paired_differences(qrels, run, base, measure, qids):
    """Per-query differences run - base over ``qids``, 0 where either lacks the query."""
    one, two = evaluate(qrels, run, [measure]), evaluate(qrels, base, [measure])
    name = next(iter(one.per_query))
    x = dict(zip(one.queries, one.per_query[name], strict=True))
    y = dict(zip(two.queries, two.per_query[name], strict=True))
    both = [q for q in qids if q in x and q in y]
    d = np.array([x[q] - y[q] if q in both else 0.0 for q in qids])
    return d, len(both)


def test_compare_p_values_are_the_sign_flip_test_of_the_per_query_differences(data):
    qrels, runs = data
    cube = retrieval_cube(qrels, runs, ["ndcg_cut.10"])
    result = stats.compare(cube, metric="ndcg_cut_10", test="randomization", baseline="a",
                           seed=7, n_resamples=3000)
    qids = cube["scene"].values.tolist()
    raw = []
    for name in ("b", "c"):
        d, n = paired_differences(qrels, runs[name], runs["a"], "ndcg_cut.10", qids)
        flips, _ = generators(7)
        p = stats.sign_flip_pvalues(d, n_resamples=3000, rng=flips)
        row = result.sel(descriptor=name, baseline="a")
        assert float(row.pvalue) == p
        assert int(row.n) == n and int(row.n_dropped) == 40 - n
        assert float(row.mean_diff) == pytest.approx(d.sum() / n, abs=1e-15)
        raw.append(p)
    # Holm over the family of the two comparisons, written out
    order = np.argsort(raw)
    holm = np.empty(2)
    holm[order] = np.minimum(1, np.maximum.accumulate(np.array(raw)[order] * [2, 1]))
    np.testing.assert_allclose(result["pvalue_corrected"].values, holm, rtol=1e-15)
    assert int(result.sel(descriptor="c", baseline="a").n_dropped) == 8


def exact_randomization_p(d: np.ndarray) -> float:
    """Two-sided p of the sign-flip test over all 2^n sign vectors (the exact null)."""
    observed = abs(d.sum())
    flipped = [abs(np.dot(signs, d)) for signs in itertools.product((-1, 1), repeat=d.size)]
    return float(np.mean(np.array(flipped) >= observed - 1e-12))


def test_compare_randomization_approaches_the_exact_test():
    rng = np.random.default_rng(3)
    qrels = Qrels.from_dict({f"q{i}": {f"d{j}": int(j < 4) for j in range(8)} for i in range(11)})
    runs = {name: Run.from_dict({f"q{i}": {f"d{j}": float(rng.random() + shift * (j < 4))
                                          for j in range(8)} for i in range(11)})
            for name, shift in (("base", 0.0), ("better", 0.25))}
    cube = retrieval_cube(qrels, runs, ["map"])
    result = stats.compare(cube, metric="ap", test="randomization", baseline="base",
                           n_resamples=20_000)
    d = cube["ap"].sel(descriptor="better").values - cube["ap"].sel(descriptor="base").values
    exact = exact_randomization_p(d)
    assert 0.001 < exact < 0.5  # a case where the p-value is neither tiny nor trivial
    assert float(result.pvalue[0]) == pytest.approx(exact, abs=0.012)


def test_compare_runs_table_means_are_trec_eval_all(data):
    qrels, runs = data
    result = compare_runs(qrels, runs, MEASURES, n_resamples=500)
    assert result.baseline == "a" and result.runs == ["a", "b", "c"]
    assert result.measures == ["map", "P_5", "P_10", "ndcg_cut_10", "recip_rank", "bpref",
                               "gm_map"]  # the order asked (MEASURES); counts are not columns
    assert list(result.untested) == ["gm_map"]
    summary = result.summary()
    table = result.table()
    frame = table.to_frame()
    for name, run in runs.items():
        single = evaluate(qrels, run, MEASURES)
        for measure in result.measures:
            assert float(summary[measure].sel(descriptor=name)) == single.summary[measure]
            assert frame.loc[name, measure] == float(f"{single.summary[measure]:.4f}")


def test_a_significant_win_on_common_queries_is_not_marked_for_the_lower_all():
    # common queries q00..q29: a misses the relevant document at rank 1 everywhere, c finds it
    # on 12 of them (c's P_1: 0.4); a also has q30..q59, all found (a's P_1: 30/60 = 0.5)
    judgments = {f"q{i:02d}": {"rel": 1, "non": 0} for i in range(60)}
    a = {f"q{i:02d}": ({"rel": 2.0, "non": 1.0} if i >= 30 else {"rel": 1.0, "non": 2.0})
         for i in range(60)}
    c = {f"q{i:02d}": ({"rel": 2.0, "non": 1.0} if i < 12 else {"rel": 1.0, "non": 2.0})
         for i in range(30)}
    qrels = Qrels.from_dict(judgments)
    result = compare_runs(qrels, {"a": Run.from_dict(a), "c": Run.from_dict(c)}, ["P.1"],
                          n_resamples=2000)
    row = result.comparisons["P_1"].sel(descriptor="c", baseline="a")
    assert bool(row.reject) and int(row.favours) == 1 and int(row.n_dropped) == 30
    summary = result.summary()["P_1"].values.tolist()
    assert summary == [0.5, 0.4]
    assert int(result.marked()["P_1"]["favours"].values[0]) == 0
    assert all(c.letters == "" for row in result.table().cells for c in row)
    assert result.withheld and "c vs a" in result.withheld[0]
    # with -c the missing queries count 0 for c: the test and the all agree (c loses)
    complete = compare_runs(qrels, {"a": Run.from_dict(a), "c": Run.from_dict(c)}, ["P.1"],
                            complete=True, n_resamples=2000)
    assert complete.withheld == [] and complete.summary()["P_1"].values.tolist() == [0.5, 0.2]


def test_compare_runs_refusals(data):
    qrels, runs = data
    with pytest.raises(InvalidInputError, match="at least two runs"):
        compare_runs(qrels, {"a": runs["a"]}, ["map"])
    with pytest.raises(InvalidInputError, match="baseline 'x' is not one of the runs: a, b, c"):
        compare_runs(qrels, runs, ["map"], baseline="x")
    with pytest.raises(InvalidInputError, match=r"none of the measures .* is a mean"):
        compare_runs(qrels, runs, ["runid", "num_ret"])
    few = Qrels.from_dict({"q00": {"d1": 1}, "q01": {"d1": 1}})
    result = compare_runs(few, runs, ["map"], n_resamples=100)
    assert result.comparisons == {} and "a paired test needs at least 5" in result.untested["map"]


# --------------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path, data):
    qrels, runs = data
    write_qrels(tmp_path / "qrels.txt", qrels)
    paths = []
    for name, run in runs.items():
        paths.append(write_run(tmp_path / f"{name}.run", run))
    return tmp_path / "qrels.txt", [str(p) for p in paths]


def test_cli_choices_agree_with_the_library():
    assert set(cli_trec.TESTS) == set(stats.TESTS) - {"mcnemar", "auto"}
    assert cli_trec.CORRECTIONS == stats.CORRECTIONS


def test_cli_several_runs_print_the_table_and_p_values(files, capsys):
    qrels, runs = files
    assert main(["trec-eval", str(qrels), *runs, "-m", "map", "-m", "P.5", "--baseline", "b",
                 "--n-resamples", "500"]) == 0
    out = capsys.readouterr().out
    assert "(a) a" in out and "(b) b" in out and "(c) c" in out
    assert "holm-corrected p vs b (randomization test" in out
    assert "c vs b: 8 queries in only one of the two runs" in out
    single = evaluate(read_qrels(qrels), read_run(runs[2]), ["map"])
    assert f"{single.summary['map']:.4f}" in out


def test_cli_json_has_every_run_and_the_tests(files, capsys):
    qrels, runs = files
    assert main(["trec-eval", str(qrels), *runs, "-m", "ndcg_cut.10", "-m", "num_ret", "--json",
                 "--n-resamples", "300", "--seed", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"] == "a" and data["test"] == "randomization" and data["seed"] == 3
    for path, name in zip(runs, "abc", strict=True):
        single = evaluate(read_qrels(qrels), read_run(path), ["ndcg_cut.10", "num_ret"])
        assert data["runs"][name]["all"]["ndcg_cut_10"] == single.summary["ndcg_cut_10"]
        assert data["runs"][name]["all"]["num_ret"] == single.summary["num_ret"]
    rows = data["comparisons"]["ndcg_cut_10"]
    assert [(r["run"], r["baseline"]) for r in rows] == [("b", "a"), ("c", "a")]
    assert all(0 < r["pvalue"] <= r["pvalue_corrected"] <= 1 for r in rows)
    assert rows[1]["n_dropped"] == 8 and "num_ret" not in data["comparisons"]


def test_cli_latex_is_written_atomically_and_balanced(files, tmp_path, capsys):
    qrels, runs = files
    target = tmp_path / "out" / "table.tex"
    assert main(["trec-eval", str(qrels), *runs, "-m", "map", "-m", "ndcg_cut.10",
                 "--latex", str(target), "--n-resamples", "300"]) == 0
    capsys.readouterr()
    latex = target.read_text()
    assert sorted(p.name for p in target.parent.iterdir()) == ["table.tex"]  # no temporary file
    assert_balanced_latex(latex)
    assert re.findall(r"(?<!\\)_", latex) == []
    body = latex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    assert len(body) == 3 and all(len(re.findall(r"(?<!\\)&", line)) == 2 for line in body)
    assert r"map & ndcg\_cut\_10 \\" in latex and r"\label{tab:trec}" in latex


def test_cli_one_run_is_unchanged_and_refuses_comparison_options(files, tmp_path, capsys):
    qrels, runs = files
    assert main(["trec-eval", str(qrels), runs[0], "-m", "map"]) == 0
    out = capsys.readouterr().out
    single = evaluate(read_qrels(qrels), read_run(runs[0]), ["map"])
    assert out == single.to_text()
    assert main(["trec-eval", str(qrels), runs[0], "--latex", str(tmp_path / "t.tex")]) == 2
    assert "--latex compares several runs" in capsys.readouterr().err
    assert main(["trec-eval", str(qrels), runs[0], runs[0]]) == 2
    assert "given twice" in capsys.readouterr().err
    assert main(["trec-eval", str(qrels), *runs, "-q"]) == 2
    assert "give --json too" in capsys.readouterr().err


def test_cli_cube_is_compared_by_metricalc_compare(files, tmp_path, capsys):
    qrels, runs = files
    cube = tmp_path / "runs.nc"
    assert main(["trec-eval", str(qrels), *runs, "-m", "P.10", "--cube", str(cube), "--json",
                 "--n-resamples", "200"]) == 0
    capsys.readouterr()
    assert main(["compare", str(cube), "--metric", "P_10", "--test", "randomization",
                 "--baseline", "a", "--n-resamples", "200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["descriptor"] for r in rows] == ["b", "c"] and rows[1]["n_dropped"] == 8


def test_cli_table_columns_follow_the_order_asked_and_the_printout_trec_evals(files, tmp_path,
                                                                             capsys):
    """``-m map -m ndcg_cut.10 -m P.5``: the comparison table (terminal and LaTeX) in that
    order; one run's plain printout in trec_eval's own (map, P_5, ndcg_cut_10)."""
    qrels, runs = files
    asked = ["-m", "map", "-m", "ndcg_cut.10", "-m", "P.5"]
    target = tmp_path / "t.tex"
    assert main(["trec-eval", str(qrels), *runs, *asked, "--latex", str(target),
                 "--n-resamples", "200"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "system" in line)
    assert header.split() == ["system", "map", "ndcg_cut_10", "P_5"]
    assert r"System & map & ndcg\_cut\_10 & P\_5 \\" in target.read_text()
    assert main(["trec-eval", str(qrels), runs[0], *asked]) == 0
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert printed == ["map", "P_5", "ndcg_cut_10"]


def test_two_runs_have_no_second_best_and_a_capitalised_caption(data):
    qrels, runs = data
    two = compare_runs(qrels, {k: runs[k] for k in "ab"}, ["map", "P.5"], n_resamples=200)
    latex = two.table().to_latex()
    assert r"\underline" not in latex and "second best" not in two.table().caption
    assert ". Best in bold." in two.table().caption
    three = compare_runs(qrels, runs, ["map", "P.5"], n_resamples=200)
    assert r"\underline" in three.table().to_latex()
    assert ". Best in bold, second best underlined." in three.table().caption


def test_compare_of_a_trec_cube_prints_runs_as_fractions(files, tmp_path, capsys):
    """``metricalc compare runs.nc``: rows are runs, MAP printed as trec_eval prints it
    (0.xxxx, four decimals), not in percent."""
    qrels, runs = files
    cube = tmp_path / "runs.nc"
    assert main(["trec-eval", str(qrels), *runs[:2], "-m", "map", "--cube", str(cube), "--json",
                 "--n-resamples", "100"]) == 0
    capsys.readouterr()
    assert main(["compare", str(cube), "--n-resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "values in percent" not in out and "descriptor" not in out
    header = next(line for line in out.splitlines() if "baseline" in line)
    assert header.split()[0] == "run"
    mean_a = evaluate(read_qrels(qrels), read_run(runs[0]), ["map"]).summary["map"]
    assert f" {mean_a:.4f} " in out


# --------------------------------------------------------------------------------------------
# the metric set, the results table and the report take the measures like AP
# --------------------------------------------------------------------------------------------


def test_metric_set_has_every_measure_of_a_retrieval_cube(data):
    from metricalc.plotting.tables import Table

    qrels, runs = data
    cube = retrieval_cube(qrels, runs, ["map", "P.5", "ndcg_cut.10", "num_ret"])
    metrics = metric_set(cube)
    for name, run in runs.items():
        single = evaluate(qrels, run, ["map", "P.5", "ndcg_cut.10"])
        for measure in ("map", "P_5", "ndcg_cut_10"):
            assert float(metrics[measure].sel(descriptor=name)) == pytest.approx(
                single.summary[measure], abs=1e-15)
    assert "map" not in metric_set(qc.new_cube(
        ["sift"], {"scene": ["i_a"], "pair": ["1-2"], "keypoint_set": ["s"],
                   "query_keypoint": [0]}, {"ap": [[0.5]]}, attrs=qc.DEFAULT_ATTRS))
    table = Table(metrics, columns=["map", "P_5"], decimals=4)
    assert "Protocol: qrels qrels, ties trec_eval, relevant from 1" in table.caption
    assert "tau" not in table.caption


def test_report_of_a_retrieval_cube_tests_each_measure_per_query(data, tmp_path, capsys):
    qrels, runs = data
    qc.save(retrieval_cube(qrels, runs, ["map", "P.10"]), tmp_path / "runs.nc")
    (tmp_path / "study.yaml").write_text(
        "title: runs\ndata:\n  cube: runs.nc\nmetrics: [map, P_10]\nbaseline: a\ndecimals: 4\n"
        "tests:\n  test: randomization\n  n_resamples: 999\n  rank: false\n"
        "figures: [forest]\noutputs: [latex, csv]\n"
    )
    assert main(["report", str(tmp_path / "study.yaml"), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    latex = (tmp_path / "out" / "study" / "report" / "tables.tex").read_text()  # DIR/<study>/
    for name, run in runs.items():
        single = evaluate(qrels, run, ["map", "P.10"])
        row = next(line for line in latex.splitlines() if line.startswith(f"({name[0]}) {name}"))
        assert f"{single.summary['map']:.4f}" in row and f"{single.summary['P_10']:.4f}" in row
    assert "paired randomization test paired by query, Holm correction over 2" in latex
    comparisons = (tmp_path / "out" / "study" / "report" / "comparisons.csv").read_text()
    assert "P_10" in comparisons and "map" in comparisons
