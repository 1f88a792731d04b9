"""`metricalc pose make-dataset | eval` in-process, on the synthetic two-view benchmark, and
the end-to-end pipeline (built-in detectors, mutual NN, OpenCV) against its exact poses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc.benchmarks.twoview import cli as pose_cli
from metricalc.cli import main


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("twoview")
    assert main(["pose", "make-dataset", str(root), "--n-pairs", "3", "--seed", "1"]) == 0
    return root


def _eval(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict[str, float]]:
    assert main(["pose", "eval", *argv, "--json"]) == 0
    result: dict[str, dict[str, float]] = json.loads(capsys.readouterr().out)
    return result


def test_eval_json_and_cube(dataset: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.nc"
    result = _eval(capsys, "--pairs", str(dataset / "pairs.txt"), "--images",
                   str(dataset / "images"), "--method", "sift", "--estimator", "magsac",
                   "--threshold", "0.75", "--out", str(out))
    sift = result["summary"]["sift"]
    assert set(sift) == {"auc@5", "auc@10", "auc@20", "mAA@10", "failures", "n_pairs"}
    assert sift["n_pairs"] == 3 and sift["failures"] == 0
    # exact poses: SIFT on rendered planes recovers them to a few degrees
    assert sift["auc@20"] > 0.8 and sift["auc@5"] <= sift["auc@10"] <= sift["auc@20"]
    assert result["settings"]["pose_estimator"] == "magsac"
    assert result["settings"]["pose_threshold"] == 0.75
    with xr.open_dataset(out, engine="h5netcdf") as cube:
        assert cube.sizes == {"descriptor": 1, "pair": 3}
        assert float(cube["pose_error"].max()) < 10
        assert (cube["pose_error"] == np.maximum(cube["R_error"], cube["t_error"])).all()


def test_own_features_equal_builtin(dataset: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    import cv2

    from metricalc.keypoints.extraction import extract_image

    for image in sorted((dataset / "images").glob("*.png")):
        features = extract_image(cv2.imread(str(image), cv2.IMREAD_GRAYSCALE), "orb",
                                 border=0.0)["orb"]
        (tmp_path / "mine").mkdir(exist_ok=True)
        np.savez(tmp_path / "mine" / f"{image.name}.npz", keypoints=features.keypoints,
                 descriptors=features.descriptors)
    pairs = ["--pairs", str(dataset / "pairs.txt")]
    own = _eval(capsys, *pairs, "--features", str(tmp_path), "--method", "mine")
    builtin = _eval(capsys, *pairs, "--images", str(dataset / "images"), "--method", "orb")
    assert own["summary"]["mine"] == builtin["summary"]["orb"]


def test_terminal_table(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pose", "eval", "--pairs", str(dataset / "pairs.txt"), "--images",
                 str(dataset / "images"), "--method", "orb"]) == 0
    out = capsys.readouterr().out
    assert "auc@5" in out and "pose_estimator=ransac" in out and out.count("\n") == 3
    # one format per column: every AUC / mAA cell with four decimals, the counts as integers
    header, row = out.splitlines()[:2]
    cells = dict(zip(header.split()[1:], row.split()[1:], strict=True))
    for key in ("auc@5", "auc@10", "auc@20", "mAA@10"):
        assert re.fullmatch(r"\d\.\d{4}", cells[key]), (key, cells[key])
    assert re.fullmatch(r"\d+", cells["failures"]) and cells["n_pairs"] == "3"


def test_missing_image(dataset: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pose", "eval", "--pairs", str(dataset / "pairs.txt"), "--images",
                 str(tmp_path), "--method", "orb"]) == 2
    err = capsys.readouterr().err
    assert "0_0.png does not exist" in err and err.count("\n") == 1


def test_bad_pair_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pairs.txt"
    path.write_text("a.png b.png 1 2 3\n")
    assert main(["pose", "eval", "--pairs", str(path), "--images", str(tmp_path),
                 "--method", "orb"]) == 2
    assert f"{path}:1: 5 fields" in capsys.readouterr().err


def test_parser_constants_agree_with_library() -> None:
    from metricalc.benchmarks.twoview.estimation import ESTIMATORS, FOCAL_CONVENTIONS, PoseSettings
    from metricalc.keypoints.extraction import MAX_KEYPOINTS

    settings = PoseSettings()
    assert tuple(ESTIMATORS) == pose_cli.ESTIMATORS
    assert pose_cli.FOCAL_CONVENTIONS == FOCAL_CONVENTIONS
    defaults = {"threshold": settings.threshold, "confidence": settings.confidence,
                "max_iters": settings.max_iters, "seed": settings.seed}
    assert defaults == pose_cli.DEFAULTS
    assert pose_cli.MAX_KEYPOINTS == MAX_KEYPOINTS


def test_same_files_from_same_seed(dataset: Path, tmp_path: Path) -> None:
    assert main(["pose", "make-dataset", str(tmp_path), "--n-pairs", "3", "--seed", "1"]) == 0
    assert (tmp_path / "pairs.txt").read_bytes() == (dataset / "pairs.txt").read_bytes()
    assert (tmp_path / "images" / "2_1.png").read_bytes() == (
        dataset / "images" / "2_1.png").read_bytes()


def test_sweep_keeps_each_methods_best_threshold(dataset: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from metricalc.benchmarks.twoview.accuracy import pose_auc
    from metricalc.benchmarks.twoview.evaluate import (
        SWEEP_THRESHOLDS,
        builtin_source,
        evaluate_pairs,
        summarize,
    )
    from metricalc.benchmarks.twoview.pairs import read_pairs
    from metricalc.keypoints.homography import best_threshold

    pairs = read_pairs(dataset / "pairs.txt")
    swept = evaluate_pairs(pairs, builtin_source(dataset / "images"), ["orb"],
                           thresholds=SWEEP_THRESHOLDS)
    assert swept.attrs["pose_threshold"] == "sweep"
    assert swept["pose_error"].dims == ("descriptor", "threshold", "pair")
    per_threshold = [pose_auc(swept["pose_error"].sel(descriptor="orb", threshold=t).values)
                     for t in SWEEP_THRESHOLDS]
    best = SWEEP_THRESHOLDS[best_threshold(per_threshold, "gluefactory")]
    summary = summarize(swept)
    assert float(summary["threshold"].sel(descriptor="orb")) == best
    at_best = summarize(swept.sel(threshold=best, drop=True))
    assert float(summary["auc@10"][0]) == float(at_best["auc@10"][0])
    result = _eval(capsys, "--pairs", str(dataset / "pairs.txt"), "--images",
                   str(dataset / "images"), "--method", "orb", "--sweep")
    assert result["summary"]["orb"]["threshold"] == best
    assert result["settings"]["pose_threshold"] == "sweep"


def test_seeds_keep_every_run(dataset: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    from metricalc.benchmarks.twoview.statistic import seed_noise

    common = ["--pairs", str(dataset / "pairs.txt"), "--images", str(dataset / "images"),
              "--method", "orb", "--method", "sift", "--max-keypoints", "300"]
    plain, seeds = tmp_path / "plain.nc", tmp_path / "seeds.nc"
    _eval(capsys, *common, "--out", str(plain))
    result = _eval(capsys, *common, "--seeds", "2", "--out", str(seeds))
    with xr.open_dataset(plain, engine="h5netcdf") as one, \
            xr.open_dataset(seeds, engine="h5netcdf") as runs:
        assert runs["pose_error"].dims == ("descriptor", "seed", "pair")
        assert runs["seed"].values.tolist() == [0, 1]
        # seed 0 is the plain run; the table is the mean over seeds of each seed's table
        xr.testing.assert_equal(runs["pose_error"].sel(seed=0, drop=True), one["pose_error"])
        per_seed = [_orb_auc10(runs.sel(seed=s, drop=True)) for s in (0, 1)]
        assert result["summary"]["orb"]["auc@10"] == pytest.approx(np.mean(per_seed))
        expected = seed_noise(runs.load()).to_dataframe().reset_index()
    rows = result["seed_noise"]
    assert [(r["descriptor"], r["baseline"], r["column"]) for r in rows] == [
        ("orb", "sift", c) for c in ("auc@5", "auc@10", "auc@20", "mAA@10")]
    assert [r["se_bootstrap"] for r in rows] == expected["se_bootstrap"].tolist()
    assert main(["pose", "eval", *common, "--seeds", "1"]) == 2
    assert "expected 2 or more seeds" in capsys.readouterr().err


def _orb_auc10(results: xr.Dataset) -> float:
    from metricalc.benchmarks.twoview.accuracy import pose_auc

    return float(pose_auc(results["pose_error"].sel(descriptor="orb").values, [10.0])[0])
