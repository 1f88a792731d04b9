"""trec_eval's measures of ranked relevance lists (metricalc.retrieval.rank_lists) against
pytrec_eval, and of patch retrieval (metricalc.benchmarks.hpatches_patches.ir_measures, the
patch-retrieval cube)
against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval

from metricalc import stats
from metricalc.benchmarks.hpatches_patches import write_results
from metricalc.benchmarks.hpatches_patches.evaluate import IR_MEASURES, evaluate_files
from metricalc.benchmarks.hpatches_patches.querycube import evaluate_folders, ir_names
from metricalc.errors import InvalidInputError
from metricalc.retrieval import evaluate_ranked, rank_lists

MEASURES = ["official", "recall", "ndcg", "ndcg_cut", "success", "map_cut", "Rprec_mult",
            "set_P", "set_recall", "set_F", "relative_P", *IR_MEASURES]
PYTREC = {"map", "P", "recall", "Rprec", "recip_rank", "bpref", "ndcg", "ndcg_cut", "map_cut",
          "iprec_at_recall", "success", "set_P", "set_recall", "set_F", "Rprec_mult",
          "relative_P", "num_ret", "num_rel", "num_rel_ret"}


def test_rank_lists_measures_equal_pytrec_eval_on_the_same_lists():
    rng = np.random.default_rng(0)
    n, width = 400, 50
    relevant = rng.random((n, width)) < rng.uniform(0, 0.3, (n, 1))
    relevant[:20] = False  # queries with nothing relevant listed
    unlisted = rng.integers(0, 4, n)
    unlisted[:10] = 0  # and nothing relevant at all
    R = relevant.sum(axis=1) + unlisted
    ours = evaluate_ranked(rank_lists(relevant, R), MEASURES)
    qrels, run = {}, {}
    for q in range(n):
        judged = {f"d{j}": int(relevant[q, j]) for j in range(width)}
        judged |= {f"u{k}": 1 for k in range(unlisted[q])}
        qrels[str(q)] = judged
        run[str(q)] = {f"d{j}": float(width - j) for j in range(width)}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, PYTREC).evaluate(run)
    names = set(next(iter(theirs.values())))
    assert {n for n in names if n in ours.per_query} >= {"map", "P_5", "ndcg_cut_10", "bpref"}
    for name in names & set(ours.per_query):
        expected = np.array([theirs[str(q)][name] for q in range(n)])
        np.testing.assert_allclose(ours.per_query[name], expected, rtol=0, atol=1e-9,
                                   err_msg=name)


def test_rank_lists_refusals():
    with pytest.raises(InvalidInputError, match="boolean"):
        rank_lists(np.ones((2, 3)), np.array([1, 1]))
    with pytest.raises(InvalidInputError, match="one integer per query"):
        rank_lists(np.ones((2, 3), bool), np.array([3]))
    with pytest.raises(InvalidInputError, match="query 1 lists 3 relevant items but n_relevant"):
        rank_lists(np.array([[True, False, False], [True, True, True]]), np.array([1, 2]))


POOL = ("i_a.ref", "i_a.e1", "i_a.e2", "v_b.ref", "v_b.e1")
QUERIES = ("i_a.ref.0", "v_b.ref.1")
CLUSTERS = ("i_a.ref.0,i_a.e1.0,i_a.e2.0", "v_b.ref.1,v_b.e1.1")


def padded(head: list[str], filler: str) -> list[str]:
    return [*head, *(f"{filler}.{100 + k}" for k in range(51 - len(head)))]


RESULTS = [
    # R = 2: relevant at j = 1 and 4 (i_a.e2.7 is not a cluster patch; i_a.e1.0 again: once)
    padded(["i_a.ref.0", "i_a.e1.0", "v_b.ref.5", "i_a.e2.7", "i_a.e2.0", "i_a.e1.0"], "v_b.e1"),
    # R = 1: relevant at j = 2; the query listed again at j = 3 is not relevant
    padded(["v_b.ref.1", "i_a.ref.3", "v_b.e1.1", "v_b.ref.1"], "i_a.e2"),
]


def hand(first: bool) -> dict[str, float]:
    log = math.log2
    if first:
        return {"recip_rank": 1.0, "P_1": 1.0, "P_5": 0.4, "P_10": 0.2, "recall_5": 1.0,
                "recall_50": 1.0, "Rprec": 0.5, "success_1": 1.0,
                "ndcg_cut_5": (1 + 1 / log(5)) / (1 + 1 / log(3))}
    return {"recip_rank": 0.5, "P_1": 0.0, "P_5": 0.2, "recall_5": 1.0, "Rprec": 0.0,
            "success_1": 0.0, "success_5": 1.0, "ndcg_cut_5": (1 / log(3)) / 1.0}


@pytest.fixture
def folder(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "train_easy_2s_00.benchmark").write_text("\n".join([",".join(POOL), *QUERIES]) + "\n")
    (bench / "train_easy_2s_00.labels").write_text("\n".join([",".join(POOL), *CLUSTERS]) + "\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    write_results(mine / "train_easy_2s_00.results", POOL, RESULTS)
    return bench, mine


def test_patch_retrieval_measures_hand_computed(folder):
    bench, mine = folder
    ds = evaluate_files(bench / "train_easy_2s_00.benchmark", bench / "train_easy_2s_00.labels",
                        mine / "train_easy_2s_00.results")
    for q, first in ((0, True), (1, False)):
        for name, value in hand(first).items():
            assert float(ds[name].values[q]) == pytest.approx(value, abs=1e-12), (q, name)
    # the cube carries them, and the stats layer takes them like AP
    cube = evaluate_folders(bench, [mine]).cube
    assert [n for n in ir_names() if n in cube.data_vars] == ir_names()
    order = np.argsort(cube["scene"].values)  # i_a first
    for j, first in zip(order, (True, False), strict=True):
        for name, value in hand(first).items():
            got = float(cube[name].isel(query=j).sel(descriptor="mine"))
            assert got == pytest.approx(value, abs=1e-12)
    units = stats.unit_values(cube, metric="recip_rank")
    assert sorted(units.values[0].tolist()) == [0.5, 1.0]
