"""Patch retrieval results exported as TREC files (metricalc.benchmarks.hpatches_patches.trec):
pytrec_eval on them
gives metricalc's patch retrieval measures and image retrieval AP, on the real ECCV 2016 files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

import metricalc.benchmarks.hpatches_patches as mp
from metricalc.benchmarks.hpatches_patches.evaluate import ir_measures
from metricalc.benchmarks.hpatches_patches.trec import export_trec
from metricalc.errors import InvalidInputError
from tests.benchmarks.hpatches_patches.test_patch_evaluation import (
    oracle_rows,
    real,
    shuffled_results,
)

PYTREC = {"recip_rank", "map", "P.1,5,10", "recall.5,10,50", "Rprec", "ndcg_cut.5,10",
          "success.1,5,10"}
OURS = ("recip_rank", "map", "P.1,5,10", "recall.5,10,50", "Rprec", "ndcg_cut.5,10",
        "success.1,5,10")


def pytrec(run: Path, qrels: Path, measures: set[str]) -> dict[str, dict[str, float]]:
    with qrels.open() as q, run.open() as r:
        judged, ranked = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
    return pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(ranked)


@pytest.mark.parametrize(("name", "seed"), [("train_example", 0), ("train_easy_5s_00", 1),
                                            ("train_hard_5s_01", 2)])
def test_pytrec_eval_on_the_export_gives_metricalc_measures(tmp_path, name, seed):
    benchmark, labels = real(name)
    results = shuffled_results(benchmark, labels, seed)  # repeats, lists with nothing relevant
    done = export_trec(benchmark, labels, results, run=tmp_path / "run",
                       qrels=tmp_path / "qrels", image_qrels=tmp_path / "image_qrels")
    queries = benchmark.queries
    assert done.n_queries == len(queries) and done.n_lines == 50 * len(queries)
    theirs = pytrec(done.run, done.qrels, PYTREC)
    assert sorted(theirs) == sorted(queries)
    ours = ir_measures(benchmark, labels, results, OURS)
    assert set(ours) == set(next(iter(theirs.values())))
    for measure, values in ours.items():
        got = np.array([theirs[q][measure] for q in queries])
        np.testing.assert_allclose(got, values, rtol=0, atol=1e-12, err_msg=measure)
    images = pytrec(done.run, done.image_qrels, {"map", "num_rel"})
    assert sorted(images) == sorted(queries)  # also those with nothing relevant listed
    ds = mp.evaluate_results(benchmark, labels, results, repeats="negative")
    got = np.array([images[q]["map"] for q in queries])
    np.testing.assert_allclose(got, ds.image_retrieval_ap, rtol=0, atol=1e-12)
    assert (ds.image_retrieval_ap == 0).any() and (ds.n_image_relevant == 0).any()
    num_rel = np.array([images[q]["num_rel"] for q in queries])
    np.testing.assert_array_equal(num_rel, ds.n_image_relevant)
    assert done.n_image_relevant == int(ds.n_image_relevant.sum())


def test_oracle_results_score_one_and_files_read_back(tmp_path):
    from metricalc.retrieval import evaluate, read_qrels, read_run

    benchmark, labels = real("train_example")
    results = mp.Results(benchmark.pool, tuple(map(tuple, oracle_rows(benchmark, labels))))
    done = export_trec(benchmark, labels, results, run=tmp_path / "r.txt",
                       qrels=tmp_path / "q.txt", tag="oracle")
    assert done.image_qrels is None and done.n_patch_relevant == 5 * len(benchmark.queries)
    run = read_run(done.run)
    assert run.tag == "oracle"
    summary = evaluate(read_qrels(done.qrels), run, ["map", "P.5", "Rprec"]).summary
    assert summary == {"map": 1.0, "P_5": 1.0, "Rprec": 1.0}
    first = done.run.read_text().splitlines()[0].split()
    assert first[0] == benchmark.queries[0] and first[3:5] == ["1", "50"]


def test_repeated_results_are_renamed_and_not_relevant(tmp_path):
    pool = ("a.ref", "a.e1", "a.e2", "b.ref")
    bench = mp.Benchmark(pool, ("a.ref.0",))
    labels = mp.Labels(pool, (("a.ref.0", "a.e1.0", "a.e2.0"),))
    head = ["a.ref.0", "a.e1.0", "a.ref.0", "a.e1.0", "a.e1.0", "a.e2.0"]
    ranked = (*head, *(f"b.ref.{k}" for k in range(51 - len(head))))
    done = export_trec(bench, labels, mp.Results(pool, (ranked,)), run=tmp_path / "run",
                       qrels=tmp_path / "qrels", image_qrels=tmp_path / "images")
    docnos = [line.split()[2] for line in done.run.read_text().splitlines()[:5]]
    assert docnos == ["a.e1.0", "a.ref.0#2", "a.e1.0#2", "a.e1.0#3", "a.e2.0"]
    assert done.qrels.read_text() == "a.ref.0 0 a.e1.0 1\na.ref.0 0 a.e2.0 1\na.ref.0 0 a.ref.0 0\n"
    assert done.image_qrels.read_text() == (
        "a.ref.0 0 a.e1.0 1\na.ref.0 0 a.e2.0 1\na.ref.0 0 a.ref.0 0\n"
    )


def test_refusals(tmp_path):
    pool = ("a.ref", "a.e1")
    ranked = ("a.ref.0", *(f"a.e1.{k}" for k in range(50)))
    files = {"run": tmp_path / "run", "qrels": tmp_path / "qrels"}
    twice = mp.Benchmark(pool, ("a.ref.0", "a.ref.0"))
    with pytest.raises(InvalidInputError, match=r"query 'a\.ref\.0' is listed twice"):
        export_trec(twice, mp.Labels(pool, (("a.ref.0", "a.e1.0"),) * 2),
                    mp.Results(pool, (ranked, ranked)), **files)
    bench = mp.Benchmark(pool, ("a.ref.0",))
    with pytest.raises(InvalidInputError, match=r"line 2: the cluster lists 'a\.e1\.0' twice"):
        export_trec(bench, mp.Labels(pool, (("a.ref.0", "a.e1.0", "a.e1.0"),)),
                    mp.Results(pool, (ranked,)), **files)
    with pytest.raises(InvalidInputError, match="tag 'a b'"):
        export_trec(bench, mp.Labels(pool, (("a.ref.0", "a.e1.0"),)),
                    mp.Results(pool, (ranked,)), **files, tag="a b")
    with pytest.raises(InvalidInputError, match="first result"):
        export_trec(bench, mp.Labels(pool, (("a.ref.0", "a.e1.0"),)),
                    mp.Results(pool, (ranked[1:] + ranked[:1],)), **files)
    assert not list(tmp_path.iterdir())
