"""Experiment runs: cache semantics of every flag, the files written, RunResult, failures."""

from __future__ import annotations

import json
import shutil
from functools import partial

import h5py
import numpy as np
import pytest
import xarray as xr
import yaml

import metricalc as mc
from metricalc import cube as cubes
from metricalc.benchmarks.hpatches_sequences.experiment import PAIRS, load_data
from metricalc.errors import InvalidInputError
from metricalc.experiment import config_hash, run
from metricalc.experiment.predictions import open_predictions, read_prediction
from metricalc.experiment.rundir import RunDir, file_lock
from metricalc.keypoints import evaluate
from metricalc.keypoints import homography as hg
from metricalc.keypoints.features import Features, extract_image
from metricalc.keypoints.matching import nn_matches
from tests.experiment_helpers import (
    assert_needs_overwrite_eval,
    refused_config_test,
    rerun_and_check,
    stamp,
)

SMALL = ["data.scenes=[camera]", "data.size=256", "model.max_keypoints=150"]
"""Two scenes (i_camera, v_camera), 10 image pairs: a run takes a few seconds."""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("outputs")


@pytest.fixture(scope="module")
def base(outputs):
    """One fresh run shared by the read-only tests."""
    return run("hpatches", "sift", tag="base", overrides=SMALL, outputs=outputs)


def _run(outputs, tag, *extra, **flags):
    return run("hpatches", "sift", tag=tag, overrides=[*SMALL, *extra], outputs=outputs, **flags)


def _copy(base, outputs, tag):
    """A copy of the base run under another tag (cheaper than a new export)."""
    source = base.directory
    target = source.parent / tag
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".lock"))
    return RunDir(outputs, "hpatches", tag)


# --------------------------------------------------------------------------------------------
# the files of a run
# --------------------------------------------------------------------------------------------


def test_a_new_tag_exports_and_evaluates(base, outputs):
    assert base.status == "ok", base.error
    assert base.exported and base.evaluated
    rundir = RunDir(outputs, "hpatches", "base")
    assert base.directory == rundir.path == outputs / "results" / "hpatches" / "base"
    for path in (rundir.conf, rundir.predictions, rundir.results, rundir.summaries):
        assert path.is_file()
    assert not rundir.parts.exists()  # merged and removed
    assert yaml.safe_load(rundir.conf.read_text()) == base.config
    for stem in ("homography_recall", "rank_histogram", "scene_map"):
        assert (rundir.plots / f"{stem}.png").is_file()
    for scene in ("i_camera", "v_camera"):
        for pair in PAIRS:
            png = rundir.match_image(scene, pair)
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(rundir.path.rglob("*.tmp"))


def test_predictions_layout_and_image_one_stored_once(base, outputs):
    rundir = RunDir(outputs, "hpatches", "base")
    with h5py.File(rundir.predictions) as handle:
        assert handle.attrs["format"] == "metricalc-predictions"
        assert handle.attrs["export_hash"] == base.export_hash
        assert sorted(handle) == ["i_camera", "v_camera"]
        for scene in handle:
            assert sorted(handle[scene]) == list(PAIRS)
            first = handle[scene]["1-2"]["keypoints0"]
            for pair in PAIRS:
                group = handle[scene][pair]
                assert group.attrs["image1"] == int(pair[-1])
                assert group["keypoints0"].id == first.id  # one dataset, hard-linked
                assert group["descriptors0"].dtype == np.float32
                assert group["matches0"].shape == (group["keypoints0"].shape[0],)


def test_predictions_are_what_the_model_computes(base, outputs):
    """Keypoints from extract_image, matches from nn_matches on the stored descriptors."""
    sequences = load_data(base.config["data"], outputs)
    with open_predictions(RunDir(outputs, "hpatches", "base").predictions) as handle:
        for sequence in sequences:
            expected = extract_image(sequence.gray(1), "sift", max_keypoints=150)["sift"]
            for pair in PAIRS:
                p = read_prediction(handle, sequence.name, pair)
                np.testing.assert_array_equal(p.keypoints0, expected.keypoints)
                np.testing.assert_array_equal(p.descriptors0, expected.descriptors)
                matches, scores = nn_matches(p.descriptors0, p.descriptors1)
                np.testing.assert_array_equal(p.matches0, matches)
                np.testing.assert_array_equal(p.matching_scores0, scores)
                assert p.shape0 == sequence.shape(1)


def test_the_cube_equals_a_sequential_evaluation_of_the_cached_features(base, outputs):
    sequences = load_data(base.config["data"], outputs)
    features = {}
    with open_predictions(RunDir(outputs, "hpatches", "base").predictions) as handle:
        for sequence in sequences:
            images = {}
            for pair in PAIRS:
                p = read_prediction(handle, sequence.name, pair)
                images[1] = Features(p.keypoints0, p.descriptors0)
                images[int(pair[-1])] = Features(p.keypoints1, p.descriptors1)
            features[sequence.name] = images
    reference = evaluate(sequences, {"base": features}, bojanic=False)
    cube = base.open_cube()
    assert cube.descriptor.values.tolist() == ["base"]
    for name in ("better", "ties", "n_relevant", "ap", "nn_correct", "nn_error"):
        np.testing.assert_array_equal(cube[name].values, reference[name].values)
    for name in ("scene", "pair", "query_keypoint", "x", "y"):
        np.testing.assert_array_equal(cube[name].values, reference[name].values)
    assert cube.attrs["keypoints"] == "native" and cube.attrs["tag"] == "base"
    assert cube.attrs["tau_px"] == 3.0 and cube.attrs["distance"] == "l2"
    xr.testing.assert_identical(
        mc.metric_set(cube).drop_vars("processing_time_ms"),
        base.metric_set.drop_vars("processing_time_ms"),
    )


def test_pair_metrics_and_summaries_agree(base, outputs):
    pairs = base.pairs
    assert pairs.sizes["image_pair"] == 10
    assert pairs["image_pair"].values[0] == "i_camera/1-2"
    assert pairs["match_image"].values[0] == "matches/i_camera/1-2.png"
    s = base.summaries
    errors = pairs["H_error_ransac"].values
    aucs = hg.error_auc(errors)
    for key, value in zip(("@1px", "@3px", "@5px"), aucs, strict=True):
        assert s[f"H_error_ransac{key}"] == pytest.approx(value)
    assert s["H_error_ransac_mAA"] == pytest.approx(aucs.mean())
    assert s["H_error_dlt@3px"] == pytest.approx(hg.error_auc(pairs["H_error_dlt"].values)[1])
    for key in ("prec@1px", "prec@3px", "num_matches", "num_keypoints", "H_error_dlt"):
        assert s[f"m{key}"] == pytest.approx(np.median(pairs[key].values))
    assert s["ransac_th"] == 3.0 and list(s["ransac_sweep"]) == ["3"]
    cube = base.open_cube()
    first = (cube.scene == "i_camera") & (cube.pair == "1-2")
    r1 = first & (cube.n_relevant.isel(descriptor=0) == 1)
    assert pairs["n_queries"].values[0] == int(r1.sum())
    assert pairs["true_map"].values[0] == pytest.approx(
        float(cube.ap.isel(descriptor=0).where(r1).mean())
    )
    # summaries.json: the same values, non-finite as null
    text = base.files["summaries"].read_text()
    stored = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in summaries.json"))
    assert stored["true_map_micro"] == pytest.approx(float(base.metric_set.true_map_micro[0]))
    assert stored["keypoint_verification_ap"] is None
    assert stored["H_error_ransac@3px"] == pytest.approx(s["H_error_ransac@3px"])


def test_run_result_holds_what_a_database_records(base, outputs):
    assert base.benchmark == "hpatches" and base.tag == "base"
    assert base.config_hash == config_hash(base.config)
    assert base.export_hash == config_hash({k: base.config[k] for k in ("data", "model")})
    assert base.versions["metricalc"] == mc.__version__
    assert {"opencv-python-headless", "opencv-contrib-python-headless"} & set(base.versions)
    assert set(base.timings) == {"export", "evaluation", "total"}
    assert base.started_at <= base.finished_at and base.error == ""
    assert base.scene_metrics.scene.values.tolist() == ["i_camera", "v_camera"]
    meta = base.metadata()
    assert mc.parse_metadata(base.metadata_string()) == meta
    counts = base.scene_metrics.query_count.sel(descriptor="base")
    assert meta["i_camera_query_count"] == int(counts.sel(scene="i_camera"))
    record = json.loads(base.files["run"].read_text())
    assert record["status"] == "ok" and record["config_hash"] == base.config_hash
    assert base.raise_for_status() is base


# --------------------------------------------------------------------------------------------
# cache semantics: every flag against every state
# --------------------------------------------------------------------------------------------


def test_same_config_reads_everything_from_the_cache(base, outputs):
    rundir = RunDir(outputs, "hpatches", "base")
    before = [stamp(p) for p in (rundir.predictions, rundir.results, rundir.summaries)]
    again = _run(outputs, "base")
    assert again.status == "ok" and not again.exported and not again.evaluated
    assert [stamp(p) for p in (rundir.predictions, rundir.results, rundir.summaries)] == before
    assert again.summaries == json.loads(rundir.summaries.read_text())
    xr.testing.assert_identical(again.metric_set, base.metric_set)
    assert again.timings["export"] == base.timings["export"]  # kept from the run that did it


def test_overwrite_eval_with_the_same_config_redoes_the_evaluation_only(base, outputs):
    rundir = _copy(base, outputs, "ov_eval")
    rerun = partial(_run, outputs, "ov_eval", overwrite_eval=True)
    result = rerun_and_check(rundir, rerun, exported=False)
    assert result.summaries["true_map_micro"] == base.summaries["true_map_micro"]


def test_overwrite_redoes_export_and_evaluation(base, outputs):
    rundir = _copy(base, outputs, "ov_all")
    rerun = partial(_run, outputs, "ov_all", overwrite=True)
    result = rerun_and_check(rundir, rerun, exported=True)
    assert result.summaries["H_error_ransac@3px"] == base.summaries["H_error_ransac@3px"]


test_a_changed_data_or_model_config_is_refused_with_the_difference = refused_config_test(
    _copy,
    _run,
    [
        ("data.border=30", "data.border: 40.0 -> 30"),
        ("model.matcher.ratio=0.8", "model.matcher.ratio: None -> 0.8"),
    ],
)


def test_a_changed_model_config_with_overwrite_is_redone(base, outputs):
    _copy(base, outputs, "model_change")
    result = _run(outputs, "model_change", "model.matcher.ratio=0.8", overwrite=True)
    assert result.status == "ok" and result.exported and result.evaluated
    assert result.config["model"]["matcher"]["ratio"] == 0.8
    assert result.summaries["mnum_matches"] < base.summaries["mnum_matches"]
    assert yaml.safe_load(result.files["conf"].read_text()) == result.config


def test_a_changed_eval_config_needs_overwrite_eval(base, outputs):
    rundir = _copy(base, outputs, "eval_change")
    rerun = partial(_run, outputs, "eval_change", "eval.ransac_th=[1, 3]")
    result = assert_needs_overwrite_eval(rundir, rerun, "eval.ransac_th: 3.0 -> [1, 3]")
    sweep = result.summaries["ransac_sweep"]
    assert list(sweep) == ["1", "3"]
    best = max(sweep, key=lambda t: sweep[t]["H_error_ransac_mAA"])
    assert result.summaries["ransac_th"] == float(best)
    assert result.pairs["H_error_ransac_sweep"].shape == (10, 2)
    np.testing.assert_array_equal(
        result.pairs["H_error_ransac"].values,
        result.pairs["H_error_ransac_sweep"].sel(ransac_th=float(best)).values,
    )
    # the sweep's value at 3 px equals the single-threshold base run
    assert sweep["3"]["H_error_ransac@3px"] == base.summaries["H_error_ransac@3px"]
    assert yaml.safe_load(rundir.conf.read_text())["eval"]["ransac_th"] == [1, 3]


def test_the_gluefactory_config_evaluates_the_cached_matches_as_glue_factory(base, outputs):
    """``--conf gluefactory`` on the base run's predictions: the six-threshold sweep with
    maxIters 3000, the rounded selection, and kornia's DLT weighted by the matching scores."""
    rundir = _copy(base, outputs, "gf")
    result = run(
        "hpatches", "gluefactory", tag="gf", overrides=SMALL, outputs=outputs, overwrite_eval=True
    )
    assert result.status == "ok" and result.evaluated and not result.exported
    sweep = result.pairs["H_error_ransac_sweep"]
    assert sweep["ransac_th"].values.tolist() == list(hg.DEFAULT_RANSAC_THRESHOLDS)
    aucs = [hg.error_auc(sweep.values[:, j]) for j in range(sweep.shape[1])]
    best = hg.DEFAULT_RANSAC_THRESHOLDS[hg.best_threshold(aucs, "gluefactory")]
    assert result.summaries["ransac_th"] == best
    sequences = {s.name: s for s in load_data(result.config["data"], outputs)}
    with open_predictions(rundir.predictions) as handle:
        p = read_prediction(handle, "v_camera", "1-4")
    H = sequences["v_camera"].homography(4)
    row = list(result.pairs["image_pair"].values).index("v_camera/1-4")
    matched = p.matches0 >= 0
    p0, p1 = p.keypoints0[matched], p.keypoints1[p.matches0[matched]]
    dlt = hg.kornia_dlt_homography(p0, p1, p.matching_scores0[matched])
    assert result.pairs["H_error_dlt"].values[row] == hg.corner_error(dlt, H, p.shape0)
    assert result.pairs["H_error_dlt"].values[row] != base.pairs["H_error_dlt"].values[row]
    assert result.config["eval"]["max_iters"] == 3000
    found = hg.estimate_homography(p0, p1, threshold=best, max_iters=3000, confidence=0.995)
    assert result.pairs["H_error_ransac"].values[row] == hg.corner_error(found.H, H, p.shape0)


def test_a_changed_eval_config_with_overwrite_redoes_everything(base, outputs):
    _copy(base, outputs, "eval_all")
    result = _run(outputs, "eval_all", "eval.estimator=LMEDS", overwrite=True)
    assert result.status == "ok" and result.exported and result.evaluated
    assert result.pairs.attrs["estimator"] == "LMEDS"


def test_missing_predictions_are_exported_again(base, outputs):
    rundir = _copy(base, outputs, "no_predictions")
    rundir.predictions.unlink()
    result = _run(outputs, "no_predictions")
    assert result.status == "ok" and result.exported and result.evaluated
    assert result.summaries == base.summaries | {
        "processing_time_ms": result.summaries["processing_time_ms"]
    }


@pytest.mark.parametrize("missing", ["results", "summaries"])
def test_missing_results_are_evaluated_again(base, outputs, missing):
    rundir = _copy(base, outputs, f"no_{missing}")
    getattr(rundir, missing).unlink()
    rerun_and_check(rundir, partial(_run, outputs, f"no_{missing}"), exported=False)


def test_a_folder_without_conf_yaml_is_not_trusted(base, outputs):
    rundir = _copy(base, outputs, "no_conf")
    rundir.conf.unlink()
    result = _run(outputs, "no_conf")
    assert result.exported and result.evaluated


# --------------------------------------------------------------------------------------------
# failures
# --------------------------------------------------------------------------------------------


def test_a_failed_export_is_recorded_and_returned(outputs, tmp_path):
    result = _run(outputs, "failing", f"model.features={tmp_path}", "model.descriptor=mine")
    assert result.status == "error"
    assert "missing features file" in result.error and str(tmp_path) in result.error
    assert isinstance(result.exception, InvalidInputError)
    record = json.loads(result.files["run"].read_text())
    assert record["status"] == "error" and record["error"] == result.error
    with pytest.raises(InvalidInputError, match="missing features file"):
        result.raise_for_status()
    assert not result.files["predictions"].exists()


def test_bring_your_own_features(base, outputs, tmp_path):
    """Features saved as .npz are read instead of extracted: same results as the model."""
    sequences = load_data(base.config["data"], outputs)
    features = {
        s.name: {
            k: extract_image(s.gray(k), "sift", max_keypoints=150)["sift"] for k in range(1, 7)
        }
        for s in sequences
    }
    mc.keypoints.save_features(tmp_path, {"mine": features})
    result = _run(outputs, "byo", f"model.features={tmp_path}", "model.descriptor=mine")
    assert result.status == "ok", result.error
    assert result.open_cube().attrs["keypoints"] == "external"
    for key in ("true_map_micro", "H_error_ransac@3px", "mnum_matches"):
        assert result.summaries[key] == base.summaries[key]


def test_a_tag_in_use_is_refused(outputs):
    rundir = RunDir(outputs, "hpatches", "busy")
    with file_lock(rundir.lock_file, "test"), pytest.raises(InvalidInputError, match="in use"):
        _run(outputs, "busy")


def test_corrupt_conf_yaml_is_a_clear_error(outputs):
    rundir = RunDir(outputs, "hpatches", "corrupt")
    rundir.path.mkdir(parents=True)
    rundir.conf.write_text("data: [unclosed\n")
    with pytest.raises(InvalidInputError, match=r"conf\.yaml cannot be read"):
        _run(outputs, "corrupt")


def test_corrupt_predictions_are_a_recorded_error(base, outputs):
    rundir = _copy(base, outputs, "corrupt_predictions")
    rundir.results.unlink()
    rundir.predictions.write_bytes(b"not hdf5")
    result = _run(outputs, "corrupt_predictions")
    assert result.status == "error" and "cannot be read as HDF5" in result.error


def test_unknown_benchmark_and_missing_name(outputs):
    with pytest.raises(InvalidInputError, match="unknown benchmark 'megadepth'"):
        run("megadepth", "sift", outputs=outputs)
    with pytest.raises(InvalidInputError, match="give a config"):
        run("hpatches", None, outputs=outputs)


def test_results_cube_is_a_valid_query_cube(base):
    cube = cubes.open_cube(base.files["results"])
    assert cube.sizes["descriptor"] == 1 and cube.sizes["query"] > 0


def test_malformed_data_are_a_clear_error(base, outputs, tmp_path):
    missing = _run(outputs, "no_data", f"data.root={tmp_path / 'nowhere'}", "data.scenes=null")
    assert missing.status == "error" and "does not exist" in missing.error
    # a sequences folder whose homography file is broken: the error names the file and line
    scene = load_data(base.config["data"], outputs)[0]
    root = tmp_path / "sequences"
    shutil.copytree(scene.root, root / scene.name)
    (root / scene.name / "H_1_3").write_text("1 0 0\n0 1 zero\n0 0 1\n")
    broken = _run(outputs, "broken_data", f"data.root={root}", "data.scenes=null")
    assert broken.status == "error" and isinstance(broken.exception, InvalidInputError)
    assert "H_1_3" in broken.error and "line 2" in broken.error


def test_a_run_that_failed_before_exporting_does_not_hold_its_tag(base, outputs, tmp_path):
    """Nothing was cached with the first configuration (its data folder does not exist), so the
    corrected configuration runs under the same tag instead of being refused as a conflict."""
    failed = _run(outputs, "fixed_later", f"data.root={tmp_path / 'nowhere'}", "data.scenes=null")
    assert failed.status == "error" and "does not exist" in failed.error
    assert not failed.files["predictions"].exists() and not failed.files["results"].exists()
    fixed = _run(outputs, "fixed_later")
    assert fixed.status == "ok" and fixed.exported and fixed.evaluated
    assert fixed.config["data"]["root"] is None
    assert yaml.safe_load(fixed.files["conf"].read_text()) == fixed.config
    assert fixed.summaries == base.summaries | {
        "processing_time_ms": fixed.summaries["processing_time_ms"]
    }
    assert "export" in fixed.timings and "evaluation" in fixed.timings


def test_a_changed_config_of_an_interrupted_export_is_refused(base, outputs):
    """Finished pairs of an interrupted export (predictions.parts/) are cached predictions: a
    changed data/model configuration still needs --overwrite."""
    rundir = _copy(base, outputs, "interrupted_conflict")
    try:
        rundir.predictions.unlink()
        rundir.results.unlink()
        rundir.part("i_camera", "1-2").parent.mkdir(parents=True)
        rundir.part("i_camera", "1-2").write_bytes(b"")
        with pytest.raises(InvalidInputError, match="data/model configuration differs"):
            _run(outputs, "interrupted_conflict", "data.border=30")
    finally:
        shutil.rmtree(rundir.path)


def test_bad_workers_are_refused_before_anything_is_written(outputs):
    with pytest.raises(InvalidInputError, match="workers=0"):
        _run(outputs, "no_workers", workers=0)
    assert not RunDir(outputs, "hpatches", "no_workers").path.exists()
