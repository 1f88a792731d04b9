"""ir_measures-style names (metricalc.retrieval.ir_names) and the measures beside trec_eval's
(metricalc.retrieval.extra_measures): checked against ir_measures itself (its pytrec_eval,
judged and gdeval providers) on random runs, and against slow obvious implementations of the
published formulas where ir_measures needs tools not installed (RBP, NCG)."""

from __future__ import annotations

import json
import math
import shutil

import ir_measures
import numpy as np
import pytest
from cli_helpers import run_cli

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.retrieval import Qrels, Run, evaluate, parse_measures, write_qrels, write_run

NAMES = ["AP", "AP@100", "nDCG", "nDCG@10", "P@5", "P(rel=2)@5", "R@1000", "R(rel=2)@20", "RR",
         "RR(rel=3)", "Rprec", "Bpref", "infAP", "Success@10", "NumRel", "NumRet", "NumRelRet",
         "SetP", "SetR", "SetF", "Judged@10", "Judged@3"]


def collection(seed: int, n_queries: int = 300):
    """Graded qrels (0 to 4, as gdeval takes them) and runs with distinct scores (every tool
    orders them alike), numeric query ids (gdeval's), some queries on one side only."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        n = int(rng.integers(1, 40))
        docs = [f"d{j}" for j in rng.choice(3 * n + 20, n, replace=False)]
        if rng.random() < 0.95:
            judged = docs[: int(rng.integers(0, n + 1))] + [f"x{j}" for j in range(3)]
            qrels[f"{100 + q}"] = {d: int(rng.integers(0, 5)) for d in judged}
        if rng.random() < 0.95:
            scores = rng.permutation(n) + rng.random()
            run[f"{100 + q}"] = dict(zip(docs, scores.tolist(), strict=True))
    return qrels, run


@pytest.fixture(scope="module")
def data():
    return collection(11)


def ours(qrels, run, names):
    result = evaluate(Qrels.from_dict(qrels), Run.from_dict(run), names)
    return result, {q: i for i, q in enumerate(result.queries)}


def test_names_equal_ir_measures_per_query(data):
    qrels, run = data
    result, index = ours(qrels, run, NAMES)
    measures = {ir_measures.parse_measure(n): n for n in NAMES}
    compared = 0
    for metric in ir_measures.iter_calc(list(measures), qrels, run):
        if metric.query_id not in index:  # ir_measures also reports qrels-only queries
            continue
        value = result.per_query[measures[metric.measure]][index[metric.query_id]]
        assert value == pytest.approx(metric.value, abs=1e-9), (metric.measure, metric.query_id)
        compared += 1
    assert compared >= len(NAMES) * len(index) * 0.9


@pytest.mark.skipif(shutil.which("perl") is None, reason="ir_measures' ERR runs gdeval.pl")
def test_err_equals_gdeval(data):
    qrels, run = data
    result, index = ours(qrels, run, ["ERR@20", "ERR@5"])
    measures = [ir_measures.parse_measure("ERR@20"), ir_measures.parse_measure("ERR@5")]
    found = 0
    for metric in ir_measures.iter_calc(measures, qrels, run):
        if metric.query_id in index:  # gdeval prints 5 decimals
            value = result.per_query[str(metric.measure)][index[metric.query_id]]
            assert f"{value:.5f}" == f"{metric.value:.5f}", metric
            found += 1
    assert found > 400


def slow_rbp(codes, p, level):
    value = sum((1 - p) * p ** i for i, c in enumerate(codes) if c >= level)
    residual = sum((1 - p) * p ** i for i, c in enumerate(codes) if c < 0) + p ** len(codes)
    return value, residual


def slow_ncg(codes, judged, k):
    gained = sum(max(c, 0) for c in codes[:k])
    best = sum(sorted((v for v in judged if v > 0), reverse=True)[:k])
    return gained / best if best else 0.0


def test_rbp_and_ncg_equal_their_formulas(data):
    qrels, run = data
    run = {q: {d: s for d, s in docs.items()} | {"u": -1.0} for q, docs in run.items()}
    qrels = {q: j | {"u": -1} if q in run else j for q, j in qrels.items()}
    names = ["RBP(p=0.5)", "RBP(rel=3,p=0.9)", "RBP()", "NCG@5", "NCG@1000"]
    result, index = ours(qrels, run, names)
    for q, i in index.items():
        order = sorted(run[q], key=lambda d: -run[q][d])
        codes = [qrels[q].get(d, -1) if qrels[q].get(d, 0) >= 0 else -2 for d in order]
        for name, p, level in [("RBP(p=0.5)", 0.5, 1), ("RBP(rel=3,p=0.9)", 0.9, 3),
                               ("RBP()", 0.8, 1)]:
            value, residual = slow_rbp(codes, p, level)
            assert result.per_query[name][i] == pytest.approx(value, abs=1e-12)
            assert result.per_query[f"{name}_residual"][i] == pytest.approx(residual, abs=1e-12)
        for k in (5, 1000):
            expected = slow_ncg(codes, list(qrels[q].values()), k)
            assert result.per_query[f"NCG@{k}"][i] == pytest.approx(expected, abs=1e-12)


def test_err_by_hand():
    # grades 2, 0, 4: R = 3/16, 0, 15/16
    qrels = Qrels.from_dict({"q": {"a": 2, "b": 0, "c": 4}})
    run = Run.from_dict({"q": {"a": 3.0, "b": 2.0, "c": 1.0}})
    value = evaluate(qrels, run, ["ERR@3", "ERR@1"]).summary
    assert value["ERR@3"] == pytest.approx(3 / 16 + (13 / 16) * (15 / 16) / 3)
    assert value["ERR@1"] == pytest.approx(3 / 16)
    assert math.isclose(evaluate(qrels, run, ["ERR.3"]).summary["ERR_3"], value["ERR@3"])


def test_names_print_in_trec_eval_order_under_their_own_name():
    names = [n for r in parse_measures(["nDCG@10", "P(rel=2)@5", "map", "P.5", "RR"])
             for n in r.names()]
    assert names == ["map", "RR", "P(rel=2)@5", "P_5", "nDCG@10"]  # P's in the order asked


@pytest.mark.parametrize(("spec", "message"), [
    ("Success", "Success needs a cutoff, like Success@10"),
    ("RR@5", "RR takes no cutoff @k"),
    ("nDCG(rel=2)@10", "nDCG takes no parameter rel"),
    ("AP(foo=1)", "AP takes no parameter foo"),
    ("P(rel=two)@5", "rel must be an integer"),
    ("RBP(p=1.5)", "persistence p must be one number in (0, 1)"),
    ("P(rel)@5", "expected param=value"),
])
def test_bad_ir_names(spec, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_measures([spec])


def test_names_in_a_comparison_table_and_cube(tmp_path, data):
    """Several runs: the table shows the measures named as asked, the cube stores them."""
    qrels, run = data
    write_qrels(tmp_path / "q", Qrels.from_dict(qrels))
    write_run(tmp_path / "a.run", Run.from_dict(run, tag="a"))
    worse = {q: {d: -s for d, s in docs.items()} for q, docs in run.items()}
    write_run(tmp_path / "b.run", Run.from_dict(worse, tag="b"))
    result = run_cli("trec-eval", str(tmp_path / "q"), str(tmp_path / "a.run"),
                     str(tmp_path / "b.run"), "-m", "nDCG@10", "-m", "RBP(p=0.5)", "-m",
                     "utility", "--n-resamples", "200", "--cube", str(tmp_path / "c.nc"),
                     "--json")
    assert result.returncode == 0, result.stderr
    mine, _ = ours(qrels, run, ["nDCG@10", "RBP(p=0.5)"])
    shown = json.loads(result.stdout)
    assert shown["runs"]["a"]["all"]["nDCG@10"] == pytest.approx(mine.summary["nDCG@10"])
    assert "RBP(p=0.5)_residual" in shown["comparisons"]
    cube = qc.open_cube(tmp_path / "c.nc")
    assert {"nDCG@10", "RBP(p=0.5)", "utility"} <= set(cube.data_vars)
