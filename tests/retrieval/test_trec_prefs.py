"""trec_eval's ``-R prefs``, ``-R qrels_prefs`` and ``-R qrels_jg``: the trec_eval 9.0.8 test
suite's command lines, hand-computed cases, and a slow port of trec_eval on random inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.retrieval import Qrels, Run, evaluate, read_run
from metricalc.retrieval.judgment_groups import evaluate_qrels_jg
from metricalc.retrieval.prefs_files import read_prefs, read_qrels_jg, read_qrels_prefs
from metricalc.retrieval.prefs_measures import PREFS_FAMILIES, evaluate_prefs
from tests import prefs_reference

SUITE = Path(__file__).parents[1] / "data" / "trec_eval-suite"
MEASURES = [n for n in PREFS_FAMILIES if n not in ("runid", "num_q")]


# --------------------------------------------------------------------------------------------
# trec_eval's own test suite (Makefile target quicktest)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-m", "all_prefs", "-q", "-R", "prefs", "prefs.test", "prefs.results.test"],
         "out.test.prefs"),
        (["-m", "all_prefs", "-q", "-R", "qrels_prefs", "qrels.test", "results.test"],
         "out.test.qrels_prefs"),
        (["-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.123", "results.test"],
         "out.test.qrels_jg"),
    ],
)
def test_suite_command_lines_print_trec_eval_output(args, expected, capsys):
    argv = [str(SUITE / a) if (SUITE / a).is_file() else a for a in args]
    assert main(["trec-eval", *argv]) == 0
    got = capsys.readouterr().out.splitlines()
    want = (SUITE / expected).read_text().splitlines()
    assert len(got) == len(want)
    for mine, theirs in zip(got, want, strict=True):  # every value, name and query
        assert mine.split("\t") == theirs.split("\t")


def test_suite_values_at_full_precision_match_the_slow_port():
    lines = [tuple(line.split()) for line in (SUITE / "prefs.test").read_text().splitlines()
             if line.strip()]
    lines = [(q, jg, jsg, d, float(r)) for q, jg, jsg, d, r in lines]
    run: dict[str, dict[str, float]] = {}
    for line in (SUITE / "prefs.results.test").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    ref = prefs_reference.measures(lines, run)
    result = evaluate_prefs(read_prefs(SUITE / "prefs.test"),
                            read_run(SUITE / "prefs.results.test"), ["all_prefs"])
    assert_same(result, ref)


def assert_same(result, ref):
    assert result.queries == list(ref)
    for name in MEASURES:
        np.testing.assert_allclose(result.per_query[name], [ref[q][name] for q in ref],
                                   rtol=1e-12, atol=1e-12, err_msg=name)


# --------------------------------------------------------------------------------------------
# Hand-computed cases
# --------------------------------------------------------------------------------------------


def prefs_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prefs.txt"
    path.write_text(text)
    return path


def one_query(tmp_path, text, scores, measures=("all_prefs",), **options):
    result = evaluate_prefs(read_prefs(prefs_file(tmp_path, text)),
                            Run.from_dict({"q": scores}), measures, **options)
    return {name: values[0] for name, values in result.per_query.items()}


@pytest.mark.parametrize(
    ("text", "n_prefs"),
    [
        # get_prefs.c's examples: a full ranking of 6 documents (13 preferences) ...
        ("q u s d1 3\nq u s d2 2\nq u s d3 0\nq u s d4 6\nq u s d5 0\nq u s d6 2\n", 13),
        # ... two sub-groups of one JG (1>2, 1>3, 2>3, 4>1, 4>2; 1>2 once; the comment there
        # says 5, but the transitive closure trec_eval computes adds 4>3) ...
        ("q u s1 d1 3\nq u s1 d2 2\nq u s1 d3 1\nq u s2 d1 2\nq u s2 d2 1\nq u s2 d4 3\n", 6),
        # ... transitivity (1>2, 1>3, 2>3, 2>4 and 1>4) ...
        ("q u s1 d1 3\nq u s1 d2 2\nq u s1 d3 1\nq u s2 d2 5\nq u s2 d4 4\n", 5),
        # ... and two users, each JG counted.
        ("q u1 s d1 3\nq u1 s d2 2\nq u2 s d1 0\nq u2 s d3 6\nq u2 s d4 2\nq u2 s2 d1 0\n"
         "q u2 s2 d2 8\n", 5),
    ],
)
def test_number_of_preferences_of_the_documented_examples(tmp_path, text, n_prefs):
    values = one_query(tmp_path, text, {"d1": 1.0}, ["prefs_num_prefs_poss"])
    assert values["prefs_num_prefs_poss"] == n_prefs


def test_fulfilled_implied_and_not_occurring_by_hand(tmp_path):
    # a > b > c > d; the run ranks b, a (c and d not retrieved): docid ranks b0 a1 c2 d3
    text = "q u s a 4\nq u s b 3\nq u s c 2\nq u s d 1\n"
    v = one_query(tmp_path, text, {"b": 2.0, "a": 1.0, "x": 0.5})
    # a>b failed (retrieved); a>c, a>d, b>c, b>d fulfilled (implied); c>d does not occur
    assert v["prefs_num_prefs_poss"] == 6
    assert v["prefs_num_prefs_ful"] == 4
    assert v["prefs_num_prefs_ful_ret"] == 0
    assert v["prefs_simp"] == pytest.approx(4 / 6)
    assert v["prefs_simp_ret"] == 0.0
    assert v["prefs_simp_imp"] == pytest.approx(4 / 5)
    assert v["prefs_pair"] == pytest.approx(4 / 6)
    assert v["prefs_avgjg"] == pytest.approx(4 / 6)


def test_pairs_average_conflicting_judgment_groups(tmp_path):
    # a>b in u1 and u3, b>a in u2, c>d in u1 only; the run ranks a, b, c, d
    text = ("q u1 s a 1\nq u1 s b 0\nq u1 s2 c 1\nq u1 s2 d 0\nq u2 s b 1\nq u2 s a 0\n"
            "q u3 s a 1\nq u3 s b 0\n")
    v = one_query(tmp_path, text, {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0})
    assert v["prefs_simp"] == pytest.approx(3 / 4)
    assert v["prefs_pair"] == pytest.approx((2 / 3 + 1) / 2)
    assert v["prefs_avgjg"] == pytest.approx((1 + 0 + 1) / 3)


def test_rnonrel_with_fewer_nonrelevant_than_relevant(tmp_path):
    # r1, r2 relevant, n1 not; run r1, n1, r2: r1>n1 fulfilled, r2>n1 failed; R - N = 1
    # non-relevant document added below both: 1 + 2 fulfilled of 2 + 2
    text = "q u s r1 1\nq u s r2 1\nq u s n1 0\n"
    v = one_query(tmp_path, text, {"r1": 3.0, "n1": 2.0, "r2": 1.0})
    assert v["prefs_avgjg_Rnonrel"] == pytest.approx(3 / 4)
    assert v["prefs_avgjg_Rnonrel_ret"] == pytest.approx(3 / 4)


def test_rnonrel_with_more_nonrelevant_recounts_as_trec_eval(tmp_path):
    # r1 relevant; n1, n2, n3 not; run r1, n1, n2 (docid ranks r1 0, n1 1, n2 2, n3 3). The
    # non-relevant class keeps its first R = 1 document (n1), and trec_eval pairs every line
    # of the JG with it: r1>n1 fulfilled; n1, n2, n3 against n1 possible, not fulfilled.
    text = "q u s r1 1\nq u s n1 0\nq u s n2 0\nq u s n3 0\n"
    v = one_query(tmp_path, text, {"r1": 3.0, "n1": 2.0, "n2": 1.0})
    assert v["prefs_avgjg_Rnonrel"] == pytest.approx(1 / 4)
    # retrieved only: R = 1 retrieved relevant, the lines r1, n1, n2 against n1
    assert v["prefs_avgjg_Rnonrel_ret"] == pytest.approx(1 / 3)


def test_ties_are_broken_by_docno_ascending_and_depth_cuts(tmp_path):
    text = "q u s a 1\nq u s b 0\n"
    # equal float32 scores: a before b (ascending docno), so the preference is fulfilled
    assert one_query(tmp_path, text, {"b": 1.0, "a": 1.0 + 1e-12})["prefs_simp_ret"] == 1.0
    # -M 1 keeps b only: a>b is then an implied failure
    cut = one_query(tmp_path, text, {"b": 2.0, "a": 1.0}, depth=1)
    assert cut["prefs_num_prefs_ful"] == 0 and cut["prefs_simp_imp"] == 0.0


def test_no_judged_document_retrieved(tmp_path):
    v = one_query(tmp_path, "q u s a 1\nq u s b 0\n", {"x": 1.0})
    assert v["prefs_num_prefs_poss"] == 1 and v["prefs_num_prefs_ful"] == 0
    assert v["prefs_simp"] == 0.0 and v["prefs_pair"] == 0.0


def test_complete_averages_over_every_query_of_the_preferences(tmp_path):
    path = prefs_file(tmp_path, "q u s a 1\nq u s b 0\nz u s a 1\nz u s b 0\n")
    run = Run.from_dict({"q": {"a": 2.0, "b": 1.0}})
    assert evaluate_prefs(read_prefs(path), run, ["prefs_simp"]).summary["prefs_simp"] == 1.0
    complete = evaluate_prefs(read_prefs(path), run, ["num_q", "prefs_simp"], complete=True)
    assert complete.summary == {"num_q": 2, "prefs_simp": 0.5}


def test_qrels_prefs_reads_the_second_field_as_judgment_group(tmp_path):
    path = prefs_file(tmp_path, "q 0 a 1\nq 0 b 0\nq 1 a 0\nq 1 b 1\n")
    run = Run.from_dict({"q": {"a": 2.0, "b": 1.0}})
    result = evaluate_prefs(read_qrels_prefs(path), run, ["prefs_avgjg", "prefs_pair"])
    assert result.summary == {"prefs_avgjg": 0.5, "prefs_pair": 0.5}


# --------------------------------------------------------------------------------------------
# A slow port of trec_eval on random inputs
# --------------------------------------------------------------------------------------------


def random_case(seed: int):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(10)]
    lines = []
    for q in ("q1", "q2", "q3", "q4"):
        for g in range(rng.randint(1, 3)):
            pool = rng.sample(docs, rng.randint(2, 7))
            hidden = {d: rng.choice([0.0, 0.0, 1.0, 2.0, 3.5]) for d in pool}
            n_jsg = rng.choice([1, 1, 2, 3])
            for s in range(n_jsg):
                members = pool if n_jsg == 1 else rng.sample(pool, rng.randint(2, len(pool)))
                if rng.random() < 0.3:  # a document listed twice at its level
                    members = [*members, rng.choice(members)]
                lines.extend((q, f"u{g}", f"s{s}", d, hidden[d]) for d in members)
    run = {q: {d: rng.choice([0.5, 1.0, 1.5, 2.0, 3.0])
               for d in rng.sample([*docs, "x1", "x2"], rng.randint(1, 9))}
           for q in ("q1", "q2", "q3", "q5")}
    return lines, run, rng.choice([None, None, 2, 4])


@pytest.mark.parametrize("seed", range(60))
def test_every_measure_equals_the_slow_port(tmp_path, seed):
    lines, run, depth = random_case(seed)
    path = prefs_file(tmp_path, "".join(f"{q} {g} {s} {d} {r}\n" for q, g, s, d, r in lines))
    result = evaluate_prefs(read_prefs(path), Run.from_dict(run), ["all_prefs"], depth=depth)
    assert_same(result, prefs_reference.measures(lines, run, depth))


# --------------------------------------------------------------------------------------------
# Judgment groups (-R qrels_jg)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [None, 2])
def test_qrels_jg_is_the_mean_of_the_measures_of_each_group(tmp_path, depth):
    groups = [{"q": {"a": 1, "b": 0, "c": 1}, "r": {"a": 1}},
              {"q": {"a": 0, "b": 2, "d": 1}},
              {"q": {"c": 1}}]
    path = tmp_path / "qrels_jg.txt"
    path.write_text("".join(f"{q} jg{g} {d} {rel}\n" for g, judged in enumerate(groups)
                            for q, docs in judged.items() for d, rel in docs.items()))
    run = Run.from_dict({"q": {"a": 3.0, "b": 2.0, "c": 1.0, "e": 0.5}, "r": {"b": 1.0}})
    asked = ["map", "P.1,3", "Rprec_mult.0.5,2"]
    result = evaluate_qrels_jg(read_qrels_jg(path), run,
                               ["map_avgjg", "P_avgjg.1,3", "Rprec_mult_avgjg.0.5,2"], level=1,
                               depth=depth)
    per_group = [evaluate(Qrels.from_dict(g), run, asked, depth=depth) for g in groups]
    for name in ("map", "P_1", "P_3", "Rprec_mult_0.50", "Rprec_mult_2.00"):
        ours = name.replace("map", "map_avgjg").replace("P_", "P_avgjg_").replace(
            "Rprec_mult_", "Rprec_mult_avgjg_")
        q_values = [r.per_query[name][r.queries.index("q")] for r in per_group]
        expected = {"q": np.mean(q_values), "r": per_group[0].per_query[name][1]}
        assert result.queries == ["q", "r"]
        np.testing.assert_allclose(result.per_query[ours], [expected["q"], expected["r"]])
        assert result.summary[ours] == pytest.approx((expected["q"] + expected["r"]) / 2)


def test_qrels_jg_hand_computed(tmp_path):
    path = tmp_path / "qrels_jg.txt"
    path.write_text("q 1 d1 1\nq 1 d2 0\nq 2 d1 0\nq 2 d2 1\n")
    run = Run.from_dict({"q": {"d1": 2.0, "d2": 1.0}})
    # assessor 1: AP 1; assessor 2: AP 1/2
    result = evaluate_qrels_jg(read_qrels_jg(path), run, ["map_avgjg", "P_avgjg.1"])
    assert result.summary == {"map_avgjg": 0.75, "P_avgjg_1": 0.5}


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read", "text", "message"),
    [
        (read_prefs, "q u s a 1\nq u a 1\n", "line 2: expected 5 fields"),
        (read_prefs, "q u s a 1\n\nq u s b high\n", "line 3: relevance 'high' is not a finite"),
        (read_prefs, "", "the file is empty"),
        (read_qrels_prefs, "q 0 a 1 x\n", "line 1: expected 4 fields"),
        (read_qrels_jg, "q 0 a 1.5\n", "line 1: relevance '1.5' is not an integer"),
        (read_qrels_jg, "q 0 a 1\nq 1 a 1\nq 0 a 0\n", "line 3: document 'a' is judged twice "
         "for query 'q' in one judgment group"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, read, text, message):
    path = prefs_file(tmp_path, text)
    with pytest.raises(InvalidInputError, match=None) as error:
        read(path)
    assert str(path) in str(error.value) and message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q u s a 2\nq u s a 1\nq u s b 0\n",
         "line 2: query 'q', document 'a': a document has two rel_levels"),
        ("q u s1 a 2\nq u s1 b 1\nq u s2 b 2\nq u s2 a 1\n", "form a cycle"),
        ("q u s1 a 0\nq u s1 b 1\nq u s2 a 2\nq u s2 c 1\n",
         "line 3: query 'q', document 'a': a document has both rel_level 0 and a rel_level "
         "above 0"),
    ],
)
def test_inconsistent_judgment_groups_are_errors(tmp_path, text, message):
    with pytest.raises(InvalidInputError, match="query 'q'") as error:
        one_query(tmp_path, text, {"a": 1.0})
    assert str(tmp_path / "prefs.txt") in str(error.value) and message in str(error.value)


def test_cli_errors_are_one_line(tmp_path, capsys):
    prefs = prefs_file(tmp_path, "q u s a 1\nq u s b\n")
    run = tmp_path / "run.txt"
    run.write_text("q Q0 a 1 1 t\n")
    assert main(["trec-eval", "-R", "prefs", str(prefs), str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{prefs} line 2: expected 5 fields" in err
    assert main(["trec-eval", "-R", "prefs", str(prefs), str(run), str(run)]) == 2
    assert "need -R qrels" in capsys.readouterr().err


def test_cli_json_and_default_measures(tmp_path, capsys):
    prefs = prefs_file(tmp_path, "q u s a 1\nq u s b 0\n")
    run = tmp_path / "run.txt"
    run.write_text("q Q0 b 1 2 t\nq Q0 a 2 1 t\n")
    assert main(["trec-eval", "-R", "prefs", str(prefs), str(run), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # the default is trec_eval's nickname "prefs"; b is ranked above a, so a>b fails
    assert data["all"] == {"runid": "t", "num_q": 1, "prefs_num_prefs_poss": 1,
                           "prefs_num_prefs_ful": 0, "prefs_num_prefs_ful_ret": 0,
                           "prefs_simp": 0.0, "prefs_pair": 0.0, "prefs_avgjg": 0.0}
    assert main(["trec-eval", "-R", "qrels_jg", str(tmp_path / "prefs.txt"), str(run)]) == 2
    assert "expected 4 fields" in capsys.readouterr().err
