"""``metricalc trec-export cube | patches``, in process."""

from __future__ import annotations

import numpy as np

import metricalc.benchmarks.hpatches_patches as mp
from metricalc import cube as qc
from metricalc.benchmarks.trec import export_cli as trec_export
from metricalc.cli import main
from metricalc.metrics import metric_set
from metricalc.retrieval import evaluate, read_qrels, read_run
from metricalc.retrieval.export import DEFAULT_DEPTH, EXPORT_POLICIES, SCORES
from tests.benchmarks.hpatches_patches.test_patch_evaluation import DATA, real, shuffled_results
from tests.benchmarks.trec.test_trec_export import random_cube


def test_the_cli_spells_the_library_choices():
    assert trec_export.POLICIES == EXPORT_POLICIES
    assert trec_export.DEPTH == DEFAULT_DEPTH
    assert trec_export.SCORES == SCORES


def test_cube_export(tmp_path, capsys):
    cube = random_cube(7, policy="pessimistic")
    qc.save(cube, tmp_path / "cube.nc")
    argv = ["trec-export", "cube", str(tmp_path / "cube.nc"), "--descriptor", "orb",
            "--tie-policy", "pessimistic", "--out-run", str(tmp_path / "run.txt"),
            "--out-qrels", str(tmp_path / "qrels.txt"), "--depth", "0"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"wrote {tmp_path / 'run.txt'} (") and out.err == ""
    run = read_run(tmp_path / "run.txt")
    assert run.tag == "orb"
    summary = evaluate(read_qrels(tmp_path / "qrels.txt"), run, ["map"]).summary
    np.testing.assert_allclose(summary["map"],
                               float(metric_set(cube).true_map_micro.sel(descriptor="orb")))


def test_cube_export_notes_a_depth_cut(tmp_path, capsys):
    qc.save(random_cube(8), tmp_path / "cube.nc")
    argv = ["trec-export", "cube", str(tmp_path / "cube.nc"), "--descriptor", "sift",
            "--tie-policy", "optimistic", "--out-run", str(tmp_path / "run.txt"),
            "--out-qrels", str(tmp_path / "qrels.txt"), "--depth", "3", "--include-zeros",
            "--scores", "ranked", "--tag", "mine"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "without" in out.out
    assert out.err.startswith("metricalc: note: ") and "beyond --depth 3" in out.err
    assert read_run(tmp_path / "run.txt").tag == "mine"


def test_cube_export_errors_are_one_line(tmp_path, capsys):
    qc.save(random_cube(9, n=30), tmp_path / "cube.nc")
    base = ["trec-export", "cube", str(tmp_path / "cube.nc"), "--out-run",
            str(tmp_path / "run.txt"), "--out-qrels", str(tmp_path / "qrels.txt")]
    for extra, message in (
        (["--descriptor", "sift", "--tie-policy", "expected"], "'optimistic' or 'pessimistic'"),
        (["--descriptor", "surf", "--tie-policy", "optimistic"], "'surf' is not in the cube"),
        (["--descriptor", "sift", "--tie-policy", "optimistic", "--depth", "-1"], "--depth"),
    ):
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert err.startswith("metricalc: error: ") and message in err
        assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.nc"]


def test_patches_export(tmp_path, capsys):
    name = "train_example"
    benchmark, labels = real(name)
    results = mp.write_results(tmp_path / "desc.results", benchmark.pool,
                               shuffled_results(benchmark, labels, 3).results)
    argv = ["trec-export", "patches", "--benchmark", str(DATA / f"{name}.benchmark"),
            "--labels", str(DATA / f"{name}.labels"), "--results", str(results),
            "--out-run", str(tmp_path / "run.txt"), "--out-qrels", str(tmp_path / "qrels.txt"),
            "--out-image-qrels", str(tmp_path / "images.txt")]
    assert main(argv) == 0
    assert "images.txt" in capsys.readouterr().out
    run = read_run(tmp_path / "run.txt")
    assert run.tag == "desc"
    image_map = evaluate(read_qrels(tmp_path / "images.txt"), run, ["map"]).summary["map"]
    ds = mp.evaluate_files(DATA / f"{name}.benchmark", DATA / f"{name}.labels", results,
                           repeats="negative")
    np.testing.assert_allclose(image_map, float(ds.image_retrieval_map), rtol=1e-12)
    assert main([*argv[:6], "--results", str(tmp_path / "missing.results"), *argv[8:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metricalc: error: ") and err.count("\n") == 1
