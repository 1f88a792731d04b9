"""trec_eval's measures and ``all`` summary (metricalc.retrieval), checked against pytrec_eval
(which embeds trec_eval's C code), a slow obvious implementation written here, and hand-computed
cases; and the ``metricalc trec-eval`` command."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import pytrec_eval

from metricalc.benchmarks.trec import cli as cli_trec
from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.retrieval import TIE_POLICIES, Qrels, Run, evaluate, parse_measures

PYTREC_MEASURES = {
    "map", "P", "recall", "Rprec", "recip_rank", "bpref", "ndcg", "ndcg_cut", "map_cut",
    "iprec_at_recall", "success", "set_P", "set_recall", "set_F", "num_ret", "num_rel",
    "num_rel_ret", "gm_map", "gm_bpref", "Rprec_mult", "11pt_avg", "relative_P",
    "set_relative_P", "set_map", "num_nonrel_judged_ret", "infAP", "binG", "G", "ndcg_rel",
    "Rndcg", "utility",
}
ALL = ["all_trec", "success.1,5,10"]


def random_collection(seed: int, n_queries: int = 3000):
    """Qrels and run dicts with every awkward case: graded and negative judgments, unjudged
    retrieved documents, heavy ties, ties only at float32 precision, queries missing from either
    side, queries without a relevant document, and some runs longer than 1000 documents."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        long = rng.random() < 0.01
        n = int(rng.integers(1100, 1400)) if long else int(rng.integers(1, 60))
        docs = [f"d{j}" for j in rng.choice(3 * n + 50, n, replace=False)]
        if rng.random() < 0.9:
            extra = [f"x{j}" for j in range(rng.integers(0, 4))]  # judged, never retrieved
            judged = docs[: int(rng.integers(1, n + 1))] + extra
            top = 1 if rng.random() < 0.1 else 4  # a tenth of the queries: no relevant document
            rels = {d: int(rng.integers(-1, top)) for d in judged}
            if all(v < 0 for v in rels.values()):
                rels[judged[0]] = 0
            qrels[qid] = rels
        if rng.random() < 0.9:
            base = rng.integers(0, 6, n).astype(float)
            tiny = rng.random(n) < 0.2  # equal to the others at float32 precision only
            scores = base + np.where(tiny, 1e-9, 0.0)
            run[qid] = dict(zip(docs, scores.tolist(), strict=True))
    return qrels, run


@pytest.fixture(scope="module")
def collection():
    return random_collection(0)


def reference(qrels, run, level=1):
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES, relevance_level=level)
    return evaluator.evaluate(run)


def assert_matches(result, ref):
    assert sorted(result.queries) == sorted(ref)
    index = {q: i for i, q in enumerate(result.queries)}
    names = set(next(iter(ref.values())))
    geometric = {"gm_map": "map", "gm_bpref": "bpref"}
    assert names - set(geometric) <= set(result.per_query), names - set(result.per_query)
    for name in names - set(geometric):
        ours = result.per_query[name]
        theirs = np.array([ref[q][name] for q in result.queries])
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9, err_msg=name)
    # gm_map, gm_bpref: trec_eval keeps log(max(value, 1e-5)) per query
    for name, of in geometric.items():
        logs = np.log(np.maximum(result.per_query[of], 1e-5))
        theirs = np.array([ref[q][name] for q in result.queries])
        np.testing.assert_allclose(logs, theirs, rtol=0, atol=1e-9, err_msg=name)
    return index


@pytest.mark.parametrize("level", [1, 2])
def test_every_measure_matches_pytrec_eval_per_query_and_all(collection, level):
    qrels, run = collection
    ref = reference(qrels, run, level)
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), ALL, level=level,
                      scores="float32")
    assert_matches(result, ref)
    for name, value in result.summary.items():
        if name in ("runid", "num_q"):
            continue
        values = [ref[q][name] for q in ref]
        expected = pytrec_eval.compute_aggregated_measure(name, values)
        assert value == pytest.approx(expected, abs=1e-9), name
    assert result.summary["num_q"] == len(ref)


def test_complete_averages_over_every_qrels_query(collection):
    """-c: a slow obvious implementation of trec_eval's averaging from pytrec_eval's values."""
    qrels, run = collection
    ref = reference(qrels, run)
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), ALL, complete=True,
                      scores="float32")
    n = len(qrels)
    assert len(ref) < n
    for name, value in result.summary.items():
        if name == "runid":
            continue
        if name == "num_q":
            assert value == n
        elif name == "num_rel":  # trec_eval recounts every qrels query's judgments above 0
            assert value == sum(v > 0 for judged in qrels.values() for v in judged.values())
        elif name.startswith("num_"):
            assert value == sum(ref[q][name] for q in ref)
        elif name.startswith("gm_"):
            total = sum(ref[q][name] for q in ref) + (n - len(ref)) * math.log(1e-5)
            assert value == pytest.approx(math.exp(total / n), abs=1e-12)
        else:
            assert value == pytest.approx(sum(ref[q][name] for q in ref) / n, abs=1e-12), name


def slow_trec_order(scores: dict[str, float]) -> list[str]:
    """trec_eval's order, written the obvious way: float32 score descending, docno descending."""
    docs = sorted(scores, key=lambda d: d.encode(), reverse=True)
    return sorted(docs, key=lambda d: -float(np.float32(scores[d])))


def test_depth_cut_equals_pytrec_eval_on_the_truncated_run(collection):
    qrels, run = collection
    depth = 7
    cut = {q: {d: scores[d] for d in slow_trec_order(scores)[:depth]} for q, scores in run.items()}
    ref = reference(qrels, cut)
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), ALL, depth=depth,
                      scores="float32")
    assert_matches(result, ref)


def test_float32_ties_are_broken_by_docno_descending():
    qrels = Qrels.from_dict({"q": {"a": 1}})
    # equal at float32 precision: 'b' (greater docno) goes first, whatever the 1e-9
    run = Run.from_dict({"q": {"a": 1.0 + 1e-9, "b": 1.0}})
    assert evaluate(qrels, run, ["recip_rank"], scores="float32").summary["recip_rank"] == 0.5
    run = Run.from_dict({"q": {"a": 1.0 + 1e-6, "b": 1.0}})  # distinct in float32
    assert evaluate(qrels, run, ["recip_rank"], scores="float32").summary["recip_rank"] == 1.0


def test_scores_compare_as_doubles_by_default():
    """trec_eval 9.0.8 (tag trec_eval-9.0.8) reads scores as doubles: 1 + 1e-9 ranks first."""
    qrels = Qrels.from_dict({"q": {"a": 1}})
    run = Run.from_dict({"q": {"a": 1.0 + 1e-9, "b": 1.0}})
    assert evaluate(qrels, run, ["recip_rank"]).summary["recip_rank"] == 1.0
    run = Run.from_dict({"q": {"a": -0.0, "b": 0.0}})  # equal doubles: docno descending
    assert evaluate(qrels, run, ["recip_rank"]).summary["recip_rank"] == 0.5
    with pytest.raises(InvalidInputError, match="scores must be one of float64, float32"):
        evaluate(qrels, run, ["map"], scores="float16")


@pytest.mark.parametrize(
    "scores",
    [{"a": -0.0, "b": 0.0}, {"a": 1e39, "b": 2e39}, {"a": 1e39, "b": 1.0},
     {"a": -1e39, "b": -2e39}, {"a": 1e-46, "b": 0.0}],
)
def test_float32_edge_scores_as_pytrec_eval(scores):
    """-0.0 ties 0.0; beyond float32's range scores become +-inf and tie; below it, 0."""
    ref = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"recip_rank"}).evaluate({"q": scores})
    ours = evaluate(Qrels.from_dict({"q": {"a": 1}}), Run.from_dict({"q": scores}), ["mrr"],
                    scores="float32")
    assert ours.summary["recip_rank"] == ref["q"]["recip_rank"]


# --------------------------------------------------------------------------------------------
# Hand-computed cases
# --------------------------------------------------------------------------------------------

# ranking: d1 (rel 2), d2 (not judged), d3 (rel 0), d4 (rel 1), d5 (rel -1: unjudged in pool)
# qrels also list d6 (rel 1, not retrieved) and d7 (rel 0): R = 3, N = 2
HAND_QRELS = {"q": {"d1": 2, "d3": 0, "d4": 1, "d5": -1, "d6": 1, "d7": 0}}
HAND_RUN = {"q": {"d1": 5.0, "d2": 4.0, "d3": 3.0, "d4": 2.0, "d5": 1.0}}


def hand(measure: str, **options) -> float:
    result = evaluate(Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN), [measure], **options)
    return next(v for n, v in result.summary.items() if n not in ("runid", "num_q"))


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("num_ret", 5),
        ("num_rel", 3),
        ("num_rel_ret", 2),
        ("map", (1 / 1 + 2 / 4) / 3),
        ("Rprec", 1 / 3),  # one relevant in the top R = 3
        ("recip_rank", 1.0),
        ("P.2", 1 / 2),
        ("P.10", 2 / 10),  # missing ranks count as non-relevant
        ("recall.4", 2 / 3),
        ("map_cut.3", 1 / 3),
        ("success.1", 1.0),
        ("set_P", 2 / 5),
        ("set_recall", 2 / 3),
        ("set_F", 2 * (2 / 5) * (2 / 3) / (2 / 5 + 2 / 3)),
        ("set_F.0.5", 1.5 * (2 / 5) * (2 / 3) / (0.5 * 2 / 5 + 2 / 3)),
        # bpref: d1 has no judged non-relevant above (1); d4 has d3 above: 1 - 1/min(2, 3)
        ("bpref", (1 + (1 - 1 / 2)) / 3),
        # gains 2 at rank 1, 1 at rank 4; ideal 2, 1, 1
        ("ndcg", (2 + 1 / math.log2(5)) / (2 + 1 / math.log2(3) + 1 / math.log2(4))),
        ("ndcg_cut.2", 2 / (2 + 1 / math.log2(3))),
        ("f1@4", 2 * (2 / 4) * (2 / 3) / (2 / 4 + 2 / 3)),
        # iprec: precisions at the relevant ranks 1/1, 2/4; cutoff int(0.5 * 3 + 0.9) = 2
        ("iprec_at_recall.0.5", 0.5),
        ("iprec_at_recall.0.1", 1.0),  # int(0.3 + 0.9) = 1
        ("iprec_at_recall.0.9", 0.0),  # int(2.7 + 0.9) = 3 > 2 relevant retrieved
        ("gm_map", (1 / 1 + 2 / 4) / 3),
    ],
)
def test_hand_computed(measure, expected):
    assert hand(measure) == pytest.approx(expected, abs=1e-12)


def test_level_and_ndcg_gains():
    assert hand("num_rel", level=2) == 1
    assert hand("map", level=2) == 1.0
    # nDCG gains are the qrels values whatever the level
    assert hand("ndcg", level=2) == pytest.approx(hand("ndcg"), abs=0)


def test_query_without_relevant_documents_counts_zero():
    qrels = Qrels.from_dict({"a": {"d1": 1}, "b": {"d1": 0}})
    run = Run.from_dict({"a": {"d1": 1.0}, "b": {"d1": 1.0}})
    result = evaluate(qrels, run, ["map", "ndcg", "num_q"])
    assert result.summary == {"num_q": 2, "map": 0.5, "ndcg": 0.5}


def test_gm_map_floor_and_complete():
    qrels = Qrels.from_dict({"a": {"d1": 1}, "b": {"d1": 1}, "c": {"d1": 1}})
    run = Run.from_dict({"a": {"d1": 1.0}, "b": {"d2": 1.0}})
    assert evaluate(qrels, run, ["gm_map"]).summary["gm_map"] == pytest.approx(
        math.exp((0 + math.log(1e-5)) / 2))
    assert evaluate(qrels, run, ["gm_map"], complete=True).summary["gm_map"] == pytest.approx(
        math.exp((0 + 2 * math.log(1e-5)) / 3))


# --------------------------------------------------------------------------------------------
# Tie policies
# --------------------------------------------------------------------------------------------


def test_optimistic_and_pessimistic_bound_trec_eval(collection):
    qrels, run = collection
    q, r = Qrels.from_dict(qrels), Run.from_dict(run)
    measures = ["official", "recall", "gm_bpref", "Rprec_mult", "11pt_avg", "ndcg", "ndcg_cut",
                "map_cut", "relative_P", "success", "set", "num_nonrel_judged_ret"]
    base = evaluate(q, r, measures)
    best = evaluate(q, r, measures, tie_policy="optimistic")
    worst = evaluate(q, r, measures, tie_policy="pessimistic")
    for name in base.per_query:
        assert (best.per_query[name] >= base.per_query[name] - 1e-12).all(), name
        assert (worst.per_query[name] <= base.per_query[name] + 1e-12).all(), name
    assert best.summary["map"] > base.summary["map"] > worst.summary["map"]
    allowed = ["map", "map_cut", "P", "recall", "Rprec", "recip_rank", "ndcg", "ndcg_cut",
               "success", "set_P", "set_recall", "set_F", "num_rel_ret", "relative_P",
               "set_relative_P", "Rprec_mult"]
    mean = evaluate(q, r, allowed, tie_policy="expected")
    for name, value in mean.per_query.items():
        assert (value <= best.per_query[name] + 1e-12).all(), name
        assert (value >= worst.per_query[name] - 1e-12).all(), name


EXPECTED_MEASURES = ["P.1,2,3,5", "recall.2", "ndcg", "ndcg_cut.2,3", "Rprec", "set_F", "f1@2",
                     "map", "map_cut.2,4", "recip_rank", "success.1,2,3,6", "num_rel_ret",
                     "relative_P.2,3", "set_relative_P", "Rprec_mult"]


def brute_force_expectation(qrels, scores, depth):
    """The mean of every measure over every order of every tie group (each order made strict)."""
    groups: dict[float, list[str]] = {}
    for doc, score in scores.items():
        groups.setdefault(score, []).append(doc)
    levels = sorted(groups, reverse=True)
    totals: dict[str, float] = {}
    orders = list(itertools.product(*(itertools.permutations(groups[v]) for v in levels)))
    for order in orders:
        ranked = [doc for group in order for doc in group]
        strict = {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}
        one = evaluate(Qrels.from_dict(qrels), Run.from_dict({"q": strict}), EXPECTED_MEASURES,
                       depth=depth)
        for name, value in one.summary.items():
            totals[name] = totals.get(name, 0.0) + value
    return {name: total / len(orders) for name, total in totals.items()}


@pytest.mark.parametrize("depth", [None, 3, 4])
@pytest.mark.parametrize(
    "scores",
    [
        {"a": 1.0, "b": 1.0, "c": 1.0, "d": 2.0, "e": 0.5},
        {"d": 3.0, "a": 2.0, "b": 2.0, "x": 2.0, "c": 1.0, "e": 1.0, "y": 1.0},
        {"x": 5.0, "y": 5.0, "a": 5.0, "b": 5.0, "c": 4.0},
    ],
)
def test_expected_is_the_mean_over_every_order_of_the_tied_documents(scores, depth):
    qrels = {"q": {"a": 2, "b": 0, "c": 1, "e": 1, "f": 1}}
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict({"q": scores}), EXPECTED_MEASURES,
                      tie_policy="expected", depth=depth)
    expected = brute_force_expectation(qrels, scores, depth)
    assert set(result.summary) == set(expected)
    for name, value in expected.items():
        assert result.summary[name] == pytest.approx(value, abs=1e-12), name


def test_expected_refuses_measures_without_a_linear_form():
    qrels, run = Qrels.from_dict(HAND_QRELS), Run.from_dict(HAND_RUN)
    with pytest.raises(InvalidInputError, match="not for gm_map, bpref, iprec_at_recall"):
        evaluate(qrels, run, ["official"], tie_policy="expected")


def test_cli_tie_choices_agree_with_the_library():
    assert cli_trec.TIE_POLICIES == TIE_POLICIES


# --------------------------------------------------------------------------------------------
# Measure names
# --------------------------------------------------------------------------------------------


def test_aliases_and_trec_eval_order():
    names = [n for r in parse_measures(["ndcg@10", "precision@5", "mrr", "r-precision",
                                        "hit_rate@5", "f1@5", "map@10", "recall@5", "P.20"])
             for n in r.names()]
    assert names == ["Rprec", "recip_rank", "P_5", "P_20", "recall_5", "ndcg_cut_10",
                     "map_cut_10", "success_5", "f1_5"]
    official = [n for r in parse_measures(["official"]) for n in r.names()]
    assert official[:7] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map",
                            "gm_map"]
    assert official[-1] == "P_1000" and "iprec_at_recall_0.00" in official


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mapp", "unknown measure 'mapp'"),
        ("P.0", "cutoffs must be positive integers"),
        ("P.five", "expected an integer; got 'five'"),
        ("P.-3", "cutoffs must be positive integers"),
        ("P.", "empty parameter list"),
        ("utility.1,2", "utility takes 4 coefficients"),
        ("utility.1,a,0,0", "expected numbers like 1,-1,0,0"),
        ("ndcg.1", "level=gain pairs"),
        ("ndcg.x=2", "expected an integer; got 'x'"),
        ("G.1=a", "level=gain pairs"),
        ("map.5", "takes no parameters"),
        ("iprec_at_recall.1.5", "recall levels in [0, 1]"),
    ],
)
def test_bad_measure_names(spec, message):
    with pytest.raises(InvalidInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_measures([spec])


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    qrels = tmp_path / "qrels.txt"
    run = tmp_path / "run.txt"
    qrels.write_text("2 0 d1 1\n2 0 d2 0\n10 0 d1 1\n10 0 d3 2\n7 0 d9 1\n")
    run.write_text(
        "10 Q0 d3 1 0.9 myrun\n10 Q0 d1 2 0.5 myrun\n2 Q0 d2 1 3 myrun\n2 Q0 d1 2 2 myrun\n"
        "5 Q0 d1 1 1 myrun\n"
    )
    return qrels, run


def test_cli_prints_as_trec_eval(files, capsys):
    qrels, run = files
    assert main(["trec-eval", str(qrels), str(run), "-m", "map", "-m", "num_ret",
                 "-m", "runid", "-q"]) == 0
    out = capsys.readouterr().out
    # queries in byte order of their ids ("10" before "2"); measures in trec_eval's order
    assert out == (
        "num_ret               \t10\t2\n"
        "map                   \t10\t1.0000\n"
        "num_ret               \t2\t2\n"
        "map                   \t2\t0.5000\n"
        "runid                 \tall\tmyrun\n"
        "num_ret               \tall\t4\n"
        "map                   \tall\t0.7500\n"
    )


def test_cli_default_is_official_and_complete_divides_by_qrels_queries(files, capsys):
    qrels, run = files
    assert main(["trec-eval", str(qrels), str(run), "-c"]) == 0
    lines = dict(line.split("\t")[0::2] for line in capsys.readouterr().out.splitlines())
    assert lines["num_q                 "] == "3"
    assert lines["map                   "] == f"{1.5 / 3:6.4f}"
    assert "P_1000                " in lines and "iprec_at_recall_1.00  " in lines


def test_cli_json(files, capsys):
    qrels, run = files
    assert main(["trec-eval", str(qrels), str(run), "-m", "ndcg@10", "-m", "P.1",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["per_query"]) == ["10", "2"]
    assert data["per_query"]["2"] == {"P_1": 0.0, "ndcg_cut_10": 1 / math.log2(3)}
    assert data["all"]["P_1"] == 0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "bogus"], "unknown measure 'bogus'"),
        (["-M", "0"], "depth (-M) must be a positive integer; got 0"),
        (["--tie-policy", "expected", "-m", "bpref"], "tie_policy='expected' is defined for"),
    ],
)
def test_cli_errors_are_one_line(files, capsys, args, message):
    qrels, run = files
    assert main(["trec-eval", str(qrels), str(run), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metricalc: error: ") and message in err
    assert err.count("\n") == 1


def test_cli_no_common_query(tmp_path, capsys):
    (tmp_path / "q").write_text("a 0 d 1\n")
    (tmp_path / "r").write_text("b Q0 d 1 1 t\n")
    assert main(["trec-eval", str(tmp_path / "q"), str(tmp_path / "r")]) == 2
    assert "no queries with both results and relevance info" in capsys.readouterr().err


@pytest.mark.parametrize("scores", ["float64", "float32"])
def test_order_equals_the_slow_sort(scores):
    """trec_order against Python's sort: query, score descending (as doubles or as float32),
    docno descending; scores tied at float32 only, at both precisions, -0.0 and 0.0."""
    import pyarrow as pa

    from metricalc.retrieval.order import trec_order

    rng = np.random.default_rng(5)
    n = 20_000
    qid = rng.integers(0, 300, n)
    score = rng.integers(0, 20, n) + np.where(rng.random(n) < 0.3, 1e-9, 0.0)
    score[rng.random(n) < 0.05] = -0.0
    score[rng.random(n) < 0.05] = 0.0
    doc = rng.permutation(n)
    names = [f"d{i}".encode() for i in range(n)]
    cast = (lambda x: float(np.float32(x)) + 0.0) if scores == "float32" else (lambda x: x + 0.0)
    by_name = sorted(range(n), key=lambda i: names[doc[i]], reverse=True)
    slow = sorted(by_name, key=lambda i: (qid[i], -cast(score[i])))
    fast = trec_order(qid, score, doc, pa.array(names), scores=scores)
    assert fast.tolist() == slow


def test_all_adds_the_queries_one_after_the_other_as_trec_eval(collection):
    """trec_eval's ``all`` is ``((v_1 + v_2) + v_3) + ...`` over the queries in id order, divided
    by their number; a pairwise sum differs in the last bit, which can flip the printed fourth
    decimal (0.07905)."""
    import functools
    import operator

    qrels, run = collection
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), ["map", "P.5,200", "ndcg"])
    for name, value in result.summary.items():
        added = functools.reduce(operator.add, map(float, result.per_query[name]), 0.0)
        assert value == added / len(result.queries), name
