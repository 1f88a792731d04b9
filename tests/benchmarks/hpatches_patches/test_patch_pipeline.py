"""The whole offline pipeline through the command line: synthetic patches -> make-benchmark ->
describe (SIFT, raw) -> compute -> eval -> QueryCube, with checks computed independently."""

from __future__ import annotations

import json

import numpy as np
import pytest

import metricalc.benchmarks.hpatches_patches as mp
from metricalc import cube as qc
from metricalc.benchmarks.hpatches_patches.compute import load_descriptor_pool
from tests.cli_helpers import CliResult, run_cli

BENCHMARKS = ("train_easy_2s_00", "train_hard_2s_00")


def run(*args: str) -> CliResult:
    """``metricalc *args`` in-process (tests/cli_helpers.py); it must succeed."""
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def oracle_lists(benchmark: mp.Benchmark, labels: mp.Labels) -> list[list[str]]:
    """Each query, the rest of its cluster, then other patches of its own sequence's images."""
    lists = []
    for query, cluster in zip(benchmark.queries, labels.clusters, strict=True):
        sequence = query.split(".")[0]
        own = [name for name in benchmark.pool if name.startswith(f"{sequence}.")]
        index = int(query.rsplit(".", 1)[1])
        others = [f"{image}.{k}" for k in range(1000) if k != index for image in own]
        lists.append([query, *cluster[1:], *others[: 51 - len(cluster)]])
    return lists


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    data, bench, results = root / "patches", root / "bench", root / "results"
    out = run("patches", "make-dataset", str(data), "--quick", "--size", "320",
              "--max-patches", "300", "--no-progress")  # fmt: skip
    assert "4 sequences" in out.stdout
    for difficulty in ("easy", "hard"):
        run("patches", "make-benchmark", "--patches", str(data), "--split", "train", "--sequences",
            "2", "--seed", "0", "--difficulty", difficulty, "--out", str(bench))  # fmt: skip
    for method, fmt in (("sift", "npy"), ("raw", "csv")):
        run("patches", "describe", "--patches", str(data), "--method", method, "--out",
            str(root / "descriptors" / method), "--format", fmt, "--no-progress")  # fmt: skip
        for name in BENCHMARKS:
            run("patches", "compute", "--benchmark", str(bench / f"{name}.benchmark"),
                "--descriptors", str(root / "descriptors" / method),
                "--out", str(results / method / f"{name}.results"), "--no-progress")  # fmt: skip
    (results / "oracle").mkdir()
    for name in BENCHMARKS:
        benchmark = mp.read_benchmark(bench / f"{name}.benchmark")
        labels = mp.read_labels(bench / f"{name}.labels")
        mp.write_results(results / "oracle" / f"{name}.results", benchmark.pool,
                         oracle_lists(benchmark, labels))  # fmt: skip
    cube_path = root / "cube.nc"
    evaluated = run("patches", "eval", "--benchmarks", str(bench), "--results",
                    str(results / "sift"), str(results / "raw"), str(results / "oracle"),
                    "--out", str(cube_path), "--json")  # fmt: skip
    return root, json.loads(evaluated.stdout), qc.open_cube(cube_path)


def test_benchmarks_have_the_release_structure(pipeline):
    root = pipeline[0]
    for name in BENCHMARKS:
        benchmark = mp.read_benchmark(root / "bench" / f"{name}.benchmark")
        labels = mp.read_labels(root / "bench" / f"{name}.labels")
        mp.validate(benchmark, labels)
        assert len(benchmark.pool) == 12 and len(benchmark.queries) == 200
        assert {n.split(".")[0] for n in benchmark.pool} == {"i_astronaut", "v_astronaut"}


def test_sift_beats_raw_pixels_on_the_hard_benchmark(pipeline):
    _, payload, cube = pipeline
    maps = {(r["descriptor"], r["file"]): r["patch_retrieval_map"] for r in payload["files"]}
    assert maps[("sift", "train_hard_2s_00")] > maps[("raw", "train_hard_2s_00")] + 0.05
    assert maps[("sift", "train_easy_2s_00")] > maps[("sift", "train_hard_2s_00")]
    assert maps[("raw", "train_easy_2s_00")] > maps[("raw", "train_hard_2s_00")]
    hard = cube.keypoint_set == "train_hard_2s_00"
    per_descriptor = cube.ap.where(hard).mean("query")
    assert float(per_descriptor.sel(descriptor="sift")) == pytest.approx(
        maps[("sift", "train_hard_2s_00")]
    )


def test_the_oracle_scores_one_in_both_tasks(pipeline):
    _, payload, cube = pipeline
    for row in payload["files"]:
        if row["descriptor"] == "oracle":
            assert row["patch_retrieval_map"] == 1.0 and row["image_retrieval_map"] == 1.0
    oracle = cube.sel(descriptor="oracle")
    assert bool((oracle.ap == 1).all()) and bool((oracle.image_ap == 1).all())


def test_the_cube_follows_contract_a(pipeline):
    _, payload, cube = pipeline
    qc.validate(cube)
    assert cube.descriptor.values.tolist() == ["sift", "raw", "oracle"]
    assert cube.sizes["query"] == 400 and payload["errors"] == []
    assert set(cube.keypoint_set.values.tolist()) == set(BENCHMARKS)
    assert set(cube.pair.values.tolist()) == {""}
    assert cube.attrs["dataset"] == "bench" and cube.attrs["benchmark"] == "hpatches-retrieval"
    assert bool((cube.n_relevant == 1).all()) and bool((cube.better == -1).all())


def test_top_51_equal_a_brute_force_reference(pipeline):
    """SIFT values are integers, so float32 squared distances are exact and the lists must be
    identical to a float64 brute force (ties to the lower pool row); for the raw descriptors
    the neighbours' exact distances must be the 50 smallest."""
    root = pipeline[0]
    for method in ("sift", "raw"):
        name = "train_hard_2s_00"
        benchmark = mp.read_benchmark(root / "bench" / f"{name}.benchmark")
        pool = load_descriptor_pool(root / "descriptors" / method, benchmark.pool)
        ranked = mp.read_results(root / "results" / method / f"{name}.results").results
        descriptors = pool.descriptors.astype(np.float64)
        for i in range(0, len(benchmark.queries), 9):
            row = pool.row(benchmark.queries[i])
            exact = ((descriptors - descriptors[row]) ** 2).sum(axis=1)
            exact[row] = np.inf
            ours = [pool.row(s) for s in ranked[i][1:]]
            assert ranked[i][0] == benchmark.queries[i]
            if method == "sift":
                expected = np.argsort(exact, kind="stable")[:50]
                assert ours == expected.tolist()
            else:
                np.testing.assert_allclose(exact[ours], np.sort(exact)[:50], rtol=1e-5, atol=1e-6)
