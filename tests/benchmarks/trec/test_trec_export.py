"""A keypoint QueryCube exported as a TREC run and qrels (metricalc.retrieval.export): pytrec_eval
(trec_eval's C code) on the files gives the cube's AP, hit rates and mAP under the tie policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

import metricalc as mc
from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.metrics import metric_set
from metricalc.retrieval import evaluate, read_qrels, read_run
from metricalc.retrieval.export import export_cube

KS = (1, 5, 10)


def random_cube(seed: int, n: int = 400, policy: str = "optimistic"):
    """Two descriptors over ``n`` queries: heavy ties, R = 0 queries, queries the second lacks."""
    rng = np.random.default_rng(seed)
    better = rng.integers(0, 30, (2, n)) * (rng.random((2, n)) < 0.8)
    ties = rng.integers(0, 12, (2, n)) * (rng.random((2, n)) < 0.6)
    n_relevant = np.where(rng.random((2, n)) < 0.15, 0, 1)
    n_relevant[1, rng.random(n) < 0.1] = -1  # not evaluated for the second descriptor
    better = np.where(n_relevant == 1, better, -1)
    ties = np.where(n_relevant == 1, ties, -1)
    coords = {"scene": [f"{'iv'[q % 2]}_s{q % 7}" for q in range(n)],
              "pair": [f"1-{2 + q % 5}" for q in range(n)],
              "keypoint_set": ["sift"] * n, "query_keypoint": list(range(n))}
    return qc.new_cube(["sift", "orb"], coords,
                       {"better": better, "ties": ties, "n_relevant": n_relevant},
                       attrs={**qc.DEFAULT_ATTRS, "tie_policy": policy})


def pytrec(run: Path, qrels: Path, measures: set[str]) -> dict[str, dict[str, float]]:
    with qrels.open() as q, run.open() as r:
        judged, ranked = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
    return pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(ranked)


def qid(cube, q: int) -> str:
    return "/".join(str(cube[name].values[q]) for name in qc.QUERY_IDENTITY)


@pytest.mark.parametrize("policy", ["optimistic", "pessimistic", "workbench"])
@pytest.mark.parametrize("descriptor", ["sift", "orb"])
def test_pytrec_eval_on_the_export_gives_the_cube_numbers(tmp_path, policy, descriptor):
    cube = random_cube(1, policy=policy)
    done = export_cube(cube, descriptor, run=tmp_path / "run.txt", qrels=tmp_path / "qrels.txt",
                       tie_policy=policy, depth=None)
    theirs = pytrec(done.run, done.qrels,
                    {"recip_rank", "map", "P.1,5,10", "success.1,5,10", "num_ret", "Rprec"})
    one = cube.sel(descriptor=descriptor)
    ranked = np.flatnonzero(one.n_relevant.values == 1)
    assert sorted(theirs) == sorted(qid(cube, q) for q in ranked)
    assert done.n_queries == ranked.size and done.n_beyond_depth == 0
    b, t = one.better.values[ranked], one.ties.values[ranked]
    ap = mc.ap_from_rank_stats(b, t, tie_policy=policy)
    rank = mc.rank_from_rank_stats(b, t, tie_policy=policy)
    for name, expected in (("recip_rank", ap), ("map", ap), ("num_ret", b + t + 1),
                           ("Rprec", rank <= 1)):
        got = np.array([theirs[qid(cube, q)][name] for q in ranked])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=name)
    for k in KS:
        success = np.array([theirs[qid(cube, q)][f"success_{k}"] for q in ranked])
        precision = np.array([theirs[qid(cube, q)][f"P_{k}"] for q in ranked])
        np.testing.assert_array_equal(success, rank <= k)
        np.testing.assert_allclose(success.mean(), mc.hit_rate_at_k(b, t, k, tie_policy=policy))
        np.testing.assert_allclose(precision.mean(), mc.precision_at_k(b, t, k, tie_policy=policy))
    metrics = metric_set(cube, k=list(KS)).sel(descriptor=descriptor)
    mean_rr = np.mean([theirs[qid(cube, q)]["recip_rank"] for q in ranked])
    np.testing.assert_allclose(mean_rr, float(metrics.true_map_micro), rtol=1e-12)
    for k in KS:
        mean_success = np.mean([theirs[qid(cube, q)][f"success_{k}"] for q in ranked])
        np.testing.assert_allclose(mean_success, float(metrics[f"hit_rate_at_{k}"]), rtol=1e-12)
        mean_p = np.mean([theirs[qid(cube, q)][f"P_{k}"] for q in ranked])
        np.testing.assert_allclose(mean_p, float(metrics[f"precision_at_{k}"]), rtol=1e-12)


def test_the_tie_group_is_kept_so_ties_expected_gives_the_expected_policy(tmp_path):
    cube = random_cube(2, policy="expected")
    done = export_cube(cube, "sift", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy="pessimistic", depth=None)
    result = evaluate(read_qrels(done.qrels), read_run(done.run), ["recip_rank", "success.5"],
                      tie_policy="expected")
    one = cube.sel(descriptor="sift")
    ranked = np.flatnonzero(one.n_relevant.values == 1)
    order = np.argsort([qid(cube, q) for q in ranked])  # trec_eval's query order (byte order)
    b, t = one.better.values[ranked][order], one.ties.values[ranked][order]
    np.testing.assert_allclose(result.per_query["recip_rank"],
                               mc.ap_from_rank_stats(b, t, tie_policy="expected"), atol=1e-12)
    np.testing.assert_allclose(result.summary["recip_rank"],
                               float(metric_set(cube).true_map_micro.sel(descriptor="sift")))
    np.testing.assert_allclose(result.summary["success_5"],
                               mc.hit_rate_at_k(b, t, 5, tie_policy="expected"), atol=1e-12)


@pytest.mark.parametrize("policy", ["optimistic", "pessimistic"])
def test_a_depth_cut_scores_a_relevant_document_beyond_it_as_not_retrieved(tmp_path, policy):
    cube = random_cube(3)
    depth = 12
    done = export_cube(cube, "sift", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy=policy, depth=depth)
    theirs = pytrec(done.run, done.qrels, {"recip_rank", "num_ret"})
    one = cube.sel(descriptor="sift")
    ranked = np.flatnonzero(one.n_relevant.values == 1)
    b, t = one.better.values[ranked], one.ties.values[ranked]
    rank = mc.rank_from_rank_stats(b, t, tie_policy=policy)
    expected = np.where(rank <= depth, 1 / rank, 0.0)
    got = np.array([theirs[qid(cube, q)]["recip_rank"] for q in ranked])
    np.testing.assert_allclose(got, expected, atol=1e-12)
    num_ret = np.array([theirs[qid(cube, q)]["num_ret"] for q in ranked])
    np.testing.assert_array_equal(num_ret, np.minimum(b + t + 1, depth))
    assert done.n_beyond_depth == int((rank > depth).sum()) > 0
    assert done.n_lines == int(np.minimum(b + t + 1, depth).sum())


def test_include_zeros_puts_r0_queries_in_the_qrels_only(tmp_path):
    cube = random_cube(4)
    done = export_cube(cube, "sift", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy="optimistic", include_zeros=True)
    metrics = metric_set(cube).sel(descriptor="sift")
    qrels, run = read_qrels(done.qrels), read_run(done.run)
    n_zero = int((cube.n_relevant.sel(descriptor="sift") == 0).sum())
    assert done.n_zeros == n_zero > 0 and len(qrels) == done.n_queries + n_zero
    plain = evaluate(qrels, run, ["map"]).summary["map"]
    complete = evaluate(qrels, run, ["map"], complete=True).summary["map"]
    np.testing.assert_allclose(plain, float(metrics.true_map_micro), rtol=1e-12)
    np.testing.assert_allclose(complete, float(metrics.true_map_micro_including_zeros),
                               rtol=1e-12)


def test_written_lines_and_docnos(tmp_path):
    cube = qc.new_cube(
        ["sift"],
        {"scene": ["v_a"] * 3, "pair": ["1-2"] * 3, "keypoint_set": ["kp"] * 3,
         "query_keypoint": [0, 1, 2]},
        {"better": [[0, 10, -1]], "ties": [[0, 1, -1]]}, attrs=qc.DEFAULT_ATTRS,
    )
    done = export_cube(cube, "sift", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy="optimistic", tag="mine")
    lines = done.run.read_text().splitlines()
    assert lines[0] == "v_a/1-2/kp/0 Q0 t00 1 0 mine"
    assert lines[1:4] == ["v_a/1-2/kp/1 Q0 b01 1 1 mine", "v_a/1-2/kp/1 Q0 b02 2 1 mine",
                          "v_a/1-2/kp/1 Q0 b03 3 1 mine"]
    assert lines[-2:] == ["v_a/1-2/kp/1 Q0 t01 11 0 mine", "v_a/1-2/kp/1 Q0 t00 12 0 mine"]
    assert done.qrels.read_text() == "v_a/1-2/kp/0 0 t00 1\nv_a/1-2/kp/1 0 t01 1\n"


def test_large_runs_are_written_in_slices(tmp_path, monkeypatch):
    from metricalc.retrieval import export

    monkeypatch.setattr(export, "CHUNK_LINES", 7)
    cube = random_cube(5, n=60)
    done = export_cube(cube, "orb", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy="workbench", depth=None)
    monkeypatch.setattr(export, "CHUNK_LINES", 1 << 21)
    whole = export_cube(cube, "orb", run=tmp_path / "run2", qrels=tmp_path / "qrels2",
                        tie_policy="workbench", depth=None)
    assert done.run.read_text() == whole.run.read_text()
    assert done.n_lines == len(done.run.read_text().splitlines())


def test_refusals(tmp_path):
    cube = random_cube(6, n=20)
    files = {"run": tmp_path / "run", "qrels": tmp_path / "qrels"}
    with pytest.raises(InvalidInputError, match=r"'expected' .* 'optimistic' or 'pessimistic'"):
        export_cube(cube, "sift", **files, tie_policy="expected")
    with pytest.raises(InvalidInputError, match="policy"):
        export_cube(cube, "sift", **files, tie_policy="best")
    with pytest.raises(InvalidInputError, match="'surf' is not in the cube; expected one of sift"):
        export_cube(cube, "surf", **files, tie_policy="optimistic")
    with pytest.raises(InvalidInputError, match="depth must be a positive integer"):
        export_cube(cube, "sift", **files, tie_policy="optimistic", depth=0)
    with pytest.raises(InvalidInputError, match="tag 'my run'"):
        export_cube(cube, "sift", **files, tie_policy="optimistic", tag="my run")
    aps_only = cube.copy()
    aps_only["better"] = aps_only["better"].where(False, -1)
    with pytest.raises(InvalidInputError, match="no rank statistics"):
        export_cube(aps_only, "sift", **files, tie_policy="optimistic")
    spaced = cube.assign_coords(scene=("query", np.where(np.arange(20) == 3, "a b", "v_a")))
    with pytest.raises(InvalidInputError, match=r"'a b/.*' holds whitespace"):
        export_cube(spaced, "sift", **files, tie_policy="optimistic")
    slashed = qc.new_cube(["sift"], {"scene": ["v_a/1-2", "v_a"], "pair": ["", "1-2"],
                                     "keypoint_set": ["kp", "/kp"], "query_keypoint": [0, 0]},
                          {"better": [[0, 0]], "ties": [[0, 0]]}, attrs=qc.DEFAULT_ATTRS)
    with pytest.raises(InvalidInputError, match="two queries get the query id 'v_a/1-2//kp/0'"):
        export_cube(slashed, "sift", **files, tie_policy="optimistic")
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("policy", ["optimistic", "pessimistic", "workbench"])
def test_ranked_scores_hold_the_policy_for_any_tool(tmp_path, policy):
    cube = random_cube(10, policy=policy)
    done = export_cube(cube, "sift", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy=policy, depth=None, scores="ranked")
    lines = [line.split() for line in done.run.read_text().splitlines()]
    scores = np.array([float(line[4]) for line in lines])
    ranks = np.array([int(line[3]) for line in lines])
    assert ((scores == 1) == np.r_[ranks[1:] == 1, True]).all()  # n_q .. 1 per query
    # tie policies cannot change anything any more: every score differs within a query
    expected = evaluate(read_qrels(done.qrels), read_run(done.run), ["recip_rank"],
                        tie_policy="expected").summary["recip_rank"]
    metrics = metric_set(cube).sel(descriptor="sift")
    np.testing.assert_allclose(expected, float(metrics.true_map_micro), rtol=1e-12)
    theirs = pytrec(done.run, done.qrels, {"recip_rank"})
    np.testing.assert_allclose(np.mean([v["recip_rank"] for v in theirs.values()]),
                               float(metrics.true_map_micro), rtol=1e-12)


def test_ranx_on_a_ranked_export_gives_the_cube_map(tmp_path):
    ranx = pytest.importorskip("ranx")  # numba: about 10 s the first time
    cube = random_cube(11, policy="pessimistic")
    done = export_cube(cube, "sift", run=tmp_path / "run", qrels=tmp_path / "qrels",
                       tie_policy="pessimistic", depth=None, scores="ranked")
    qrels = ranx.Qrels.from_file(str(done.qrels), kind="trec")
    run = ranx.Run.from_file(str(done.run), kind="trec")
    np.testing.assert_allclose(ranx.evaluate(qrels, run, "mrr"),
                               float(metric_set(cube).true_map_micro.sel(descriptor="sift")),
                               rtol=1e-12)
