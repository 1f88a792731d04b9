"""trec_eval's graded-gain and sampled-pool measures (metricalc.retrieval.gain_measures) and the
options -J, -N, -Z, -D, -n of ``metricalc trec-eval``: checked against pytrec_eval (trec_eval's
C code) on random runs with ties, against slow obvious implementations of trec_eval's loops
where pytrec_eval cannot take the parameters (custom gains), and by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval
from cli_helpers import run_cli
from test_trec_eval import random_collection

from metricalc.errors import InvalidInputError
from metricalc.retrieval import Qrels, Run, evaluate
from metricalc.retrieval.zscores import MISSING, read_zscores

NEW = ["infAP", "binG", "G", "ndcg", "ndcg_rel", "Rndcg", "utility"]


@pytest.fixture(scope="module")
def collection():
    return random_collection(7, n_queries=800)


@pytest.mark.parametrize("judged_only", [False, True])
@pytest.mark.parametrize("level", [1, 2])
def test_gain_measures_match_pytrec_eval(collection, level, judged_only):
    """Per query and all, with -l and -J; scores as 32-bit floats, as pytrec_eval reads them."""
    qrels, run = collection
    ref = pytrec_eval.RelevanceEvaluator(qrels, {*NEW, "num_ret", "map"}, relevance_level=level,
                                         judged_docs_only_flag=judged_only).evaluate(run)
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), [*NEW, "num_ret", "map"],
                      level=level, judged_only=judged_only, scores="float32")
    assert result.queries == sorted(ref, key=str.encode)
    for name in [*NEW, "num_ret", "map"]:
        theirs = np.array([ref[q][name] for q in result.queries])
        np.testing.assert_allclose(result.per_query[name], theirs, rtol=0, atol=1e-12,
                                   err_msg=name)


# --------------------------------------------------------------------------------------------
# Custom gains: trec_eval's loops, written out for one query
# --------------------------------------------------------------------------------------------


def slow_gains(codes, judged, pairs):
    """Result gains, and the ideal gains (positive, descending), as m_ndcg.c's setup_gains."""
    gain = dict(pairs[::-1])

    def g(c):
        return gain.get(c, float(c) if c >= 0 else 0.0)

    ideal = sorted((g(v) for v in judged if v >= 0 and g(v) > 0), reverse=True)
    return [g(c) for c in codes], ideal


def slow_ndcg(codes, judged, pairs):
    gains, ideal = slow_gains(codes, judged, pairs)
    dcg = sum(x / math.log2(i + 2) for i, x in enumerate(gains))
    idcg = sum(x / math.log2(i + 2) for i, x in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def slow_ndcg_rel(codes, judged, pairs):
    gains, ideal = slow_gains(codes, judged, pairs)

    def dcg(k, values):
        return sum(x / math.log2(i + 2) for i, x in enumerate(values[:k]))

    total = 0.0
    for i, x in enumerate(gains):
        if x > 0:
            total += dcg(i + 1, gains) / dcg(min(i + 1, len(ideal)), ideal)
    missed = len(ideal) - sum(x > 0 for x in gains)
    if ideal:
        total += missed * dcg(len(gains), gains) / dcg(len(ideal), ideal)
    return total / len(ideal) if total > 0 else 0.0


def slow_g(codes, judged, pairs):
    gains, ideal = slow_gains(codes, judged, pairs)
    spent = got = total = 0.0
    for i, x in enumerate(gains):
        best = ideal[i] if i < len(ideal) else 0.0
        spent += best if best >= 1 else 1.0
        got += x
        if x != 0:
            total += x / math.log2(2 + spent - got)
    return total / sum(ideal) if ideal else 0.0


def slow_rndcg(codes, judged, pairs, level=1):
    gains, ideal = slow_gains(codes, judged, pairs)
    if not any(v >= level for v in judged):
        return 0.0

    def ratio(k):
        top = sum(x / math.log2(i + 2) for i, x in enumerate(gains[:k]))
        return top / sum(x / math.log2(i + 2) for i, x in enumerate(ideal[:k]))

    points = [b + 1 for b in range(len(ideal)) if b + 1 == len(ideal) or ideal[b + 1] != ideal[b]]
    values = [ratio(b) for b in points]
    if len(gains) > len(ideal) + 1 and ideal:
        values.append(sum(x / math.log2(i + 2) for i, x in enumerate(gains))
                      / sum(x / math.log2(i + 2) for i, x in enumerate(ideal)))
    return sum(values) / len(values) if values else 0.0


SLOW = {"ndcg": slow_ndcg, "ndcg_rel": slow_ndcg_rel, "G": slow_g, "Rndcg": slow_rndcg}


@pytest.mark.parametrize("pairs", [((1, 3.0), (2, 9.0), (4, 4.5)), ((0, 0.5), (2, -1.0)),
                                   ((3, 0.0), (1, 1.0), (1, 7.0))])
@pytest.mark.parametrize("name", sorted(SLOW))
def test_custom_gains_equal_trec_eval_loops(name, pairs):
    rng = np.random.default_rng(3)
    qrels, run = {}, {}
    for q in range(150):
        n = int(rng.integers(1, 12))
        docs = [f"d{j}" for j in range(n + 4)]
        qrels[f"q{q}"] = {d: int(rng.integers(-1, 5)) for d in docs[: int(rng.integers(1, n + 4))]}
        run[f"q{q}"] = {d: float(rng.integers(0, 4)) for d in docs[:n]}
    spec = f"{name}." + ",".join(f"{level}={gain:g}" for level, gain in pairs)
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), [spec])
    printed = f"{name}_" + spec.partition(".")[2]
    for i, q in enumerate(result.queries):
        order = sorted(sorted(run[q], reverse=True), key=lambda d: -run[q][d])
        codes = [qrels[q].get(d, -1) if qrels[q].get(d, 0) >= 0 else -2 for d in order]
        expected = SLOW[name](codes, list(qrels[q].values()), list(pairs))
        assert result.per_query[printed][i] == pytest.approx(expected, abs=1e-12), (q, codes)


def test_fractional_cutoffs_are_truncated_as_atol_reads_them():
    qrels = Qrels.from_dict({"q": {"a": 1, "b": 2}})
    run = Run.from_dict({"q": {"a": 2.0, "b": 1.0}})
    result = evaluate(qrels, run, ["ndcg_cut.1,23.4", "P.1.9"])
    assert list(result.summary) == ["P_1", "ndcg_cut_1", "ndcg_cut_23"]
    assert result.summary["ndcg_cut_1"] == pytest.approx(1 / 2)
    assert result.summary["ndcg_cut_23"] == pytest.approx((1 + 2 / math.log2(3))
                                                          / (2 + 1 / math.log2(3)))


# --------------------------------------------------------------------------------------------
# utility, relstring, infAP, yaap by hand
# --------------------------------------------------------------------------------------------

HAND_QRELS = {"q": {"a": 1, "b": 0, "c": -1, "d": 12, "e": 2}}
HAND_RUN = {"q": {"a": 5.0, "x": 4.0, "c": 3.0, "b": 2.0, "d": 1.0}}


def test_utility_with_collection_size():
    # a = 2 relevant retrieved (a, d), b = 3 others retrieved, c = 1 relevant missed (e)
    # d = N + a - n - R = 100 + 2 - 5 - 3 = 94
    result = evaluate(Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN),
                      ["utility.2,-1,-3,0.5"], num_docs=100)
    assert result.summary["utility_2,-1,-3,0.5"] == 2 * 2 - 3 - 3 + 0.5 * 94
    default = evaluate(Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN), ["utility"])
    assert default.summary["utility"] == 2 - 3


def test_relstring_prints_per_query_only():
    result = evaluate(Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN), ["relstring.4",
                                                                              "map"])
    assert "relstring_4" not in result.summary
    text = result.to_text(per_query=True)
    assert text.splitlines()[1] == "relstring_4           \tq\t'1-.0'"  # after map
    whole = evaluate(Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN), ["relstring"])
    assert whole.per_query["relstring"][0] == "1-.0>"
    assert whole.to_json()["per_query"]["q"]["relstring"] == "1-.0>"


def test_infap_and_yaap_by_hand():
    # ranks: a rel, x not in pool (skipped), c pooled unjudged, b nonrel, d rel; R = 3
    eps = 1e-5
    fj = 4.0  # d at rank 5: one relevant, one non-relevant and one unjudged document above
    d = 1 / (fj + 1) + (fj / (fj + 1)) * (3 / fj) * ((1 + eps) / (1 + 1 + 2 * eps))
    result = evaluate(Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN), ["infAP", "yaap"])
    assert result.summary["infAP"] == pytest.approx((1 + d) / 3, abs=1e-15)
    s = 1 / 1 + 2 / 5
    assert result.summary["yaap"] == pytest.approx(math.log((1 + s) / (1 + 3 - s)))


# --------------------------------------------------------------------------------------------
# Z-scores, -D, -n, -J on the command line
# --------------------------------------------------------------------------------------------


def test_zscores_convert_as_trec_eval(tmp_path):
    path = tmp_path / "z"
    path.write_text("q map 0.5 0.25\nq num_ret 5 0\nq P_5 nan nan\nr map 0 1\n")
    z = read_zscores(path)
    assert z.convert(["q", "s"], "map", np.array([1.0, 1.0])).tolist() == [2.0, MISSING]
    assert z.convert(["q"], "num_ret", np.array([5.0])).tolist() == [0.0]
    assert z.convert(["q"], "num_ret", np.array([4.0])).tolist() == [MISSING]
    assert np.isnan(z.convert(["q"], "P_5", np.array([0.2]))[0])
    assert z.convert(["q"], "Rprec", np.array([0.2])).tolist() == [MISSING]
    (tmp_path / "bad").write_text("q map 0.5\n")
    with pytest.raises(InvalidInputError, match="bad line 1: expected 4 fields"):
        read_zscores(tmp_path / "bad")


@pytest.fixture
def files(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n1 0 b 0\n2 0 a 1\n2 0 c 1\n")
    run = tmp_path / "run"
    run.write_text("1 Q0 x 1 3 r\n1 Q0 a 2 2 r\n2 Q0 c 1 1 r\n2 Q0 b 2 0.5 r\n")
    return str(qrels), str(run)


def test_debug_query_and_no_summary(files):
    one = run_cli("trec-eval", *files, "-m", "recip_rank", "-q", "-D", "0.2")
    assert one.returncode == 0, one.stderr
    assert one.stdout == "recip_rank            \t2\t1.0000\nrecip_rank            \tall\t1.0000\n"
    quiet = run_cli("trec-eval", *files, "-m", "recip_rank", "-q", "-n")
    assert quiet.stdout == ("recip_rank            \t1\t0.5000\n"
                            "recip_rank            \t2\t1.0000\n")
    traced = run_cli("trec-eval", *files, "-m", "recip_rank", "-D", "1.1")
    assert traced.returncode == 0
    assert traced.stdout == "recip_rank            \tall\t0.5000\n"
    assert "debugging traces (level 1) are not printed" in traced.stderr


def test_judged_only_moves_judged_documents_up(files):
    # query 1 without -J: x (not judged) then a: RR 1/2; with -J: a first
    result = run_cli("trec-eval", *files, "-m", "recip_rank", "-m", "num_ret", "-J", "-q")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "num_ret               \t1\t1"
    assert lines[1] == "recip_rank            \t1\t1.0000"


def test_scores_option_float32(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n")
    run = tmp_path / "run"
    run.write_text("1 Q0 a 1 1.000000001 r\n1 Q0 b 2 1 r\n")
    double = run_cli("trec-eval", str(qrels), str(run), "-m", "recip_rank")
    single = run_cli("trec-eval", str(qrels), str(run), "-m", "recip_rank", "--scores",
                     "float32")
    assert double.stdout.endswith("\t1.0000\n")
    assert single.stdout.endswith("\t0.5000\n")  # tied in float32: b (docno descending) first
