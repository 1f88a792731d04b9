"""COCO stats under image weights and swaps, checked against pycocotools on materialised data
sets (every resample written out as a COCO data set with duplicated images under new ids)."""

from __future__ import annotations

import contextlib
import copy
import io
import itertools
import json

import numpy as np
import pytest

from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
from metricalc.benchmarks.coco.cli import COCO_COLUMNS
from metricalc.benchmarks.coco.generator import make_coco_dataset, repeat_images
from metricalc.benchmarks.coco.resampled import (
    COCO_SUMMARY,
    image_records,
    image_summary,
    swapped_summaries,
    weighted_summary,
)
from metricalc.benchmarks.coco.statistic import COLUMNS, coco_statistic, compare_coco
from metricalc.errors import InvalidInputError
from tests.cli_helpers import run_cli
from tests.detection_cases import odd_dataset

pytest.importorskip("pycocotools")
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

STATS = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]
"""Positions of COCO_SUMMARY in COCOeval.stats (AR1 and AR10 left out)."""


def reference(gt: dict, dt: list, iou_type: str = "bbox") -> np.ndarray:
    """pycocotools' stats of COCO_SUMMARY, NaN for -1; all 0 without detections (COCO's loadRes
    refuses an empty list, and every defined precision is then 0)."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
        if not dt:
            defined = any(not a.get("iscrowd", 0) for a in gt["annotations"])
            return np.full(len(STATS), 0.0 if defined else np.nan)
        ev = COCOeval(coco, coco.loadRes(copy.deepcopy(dt)), iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = np.asarray(ev.stats)[STATS]
    return np.where(stats == -1, np.nan, stats)


def records_of(gt: dict, dt: list, iou_type: str = "bbox"):
    truth = load_ground_truth(gt)
    return image_records(truth, load_detections(dt, truth), iou_type=iou_type)


def assert_stats(ours: np.ndarray, expected: np.ndarray, atol: float = 1e-12) -> None:
    assert np.array_equal(np.isnan(ours), np.isnan(expected)), (ours, expected)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=atol)


DATASETS = [
    ("ties", lambda: make_coco_dataset(n_images=7, n_categories=4, score_decimals=1, seed=1)),
    ("crowd", lambda: make_coco_dataset(n_images=6, crowd_rate=0.3, detections_per_object=3,
                                        seed=2)),
    ("empty categories", lambda: make_coco_dataset(n_images=5, n_categories=8,
                                                   objects_per_image=1.0, seed=3)),
    ("odd shapes", lambda: odd_dataset(5)),  # tied scores within images, maxDets saturated
    ("odd shapes 2", lambda: odd_dataset(2)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make"), DATASETS, ids=[d[0] for d in DATASETS])
def test_weighted_stats_are_cocoeval_of_the_resampled_data_set(name, make):
    gt, dt = make()
    records = records_of(gt, dt)
    n = len(gt["images"])
    rng = np.random.default_rng(len(name))
    weights = np.vstack([
        np.ones(n, int),
        rng.multinomial(n, np.full(n, 1 / n), size=3),
        np.full(n, 3),  # every tied block three times
        np.eye(n, dtype=int)[0] * 2,
    ])  # fmt: skip
    ours = weighted_summary(records, weights)
    for row, w in zip(ours, weights, strict=True):
        assert_stats(row, reference(*repeat_images(gt, dt, w)))
    # weights 1: pycocotools' stats bit for bit
    np.testing.assert_array_equal(ours[0], reference(gt, dt))


def test_tied_block_of_one_image_is_repeated_copy_by_copy():
    """Two detections of one image tie (a hit, then a miss in file order): COCO's resample
    ranks hit, miss, hit, miss, not hit, hit, miss, miss (which would give AP 1)."""
    gt = {"images": [{"id": 1, "height": 50, "width": 50}],
          "categories": [{"id": 1}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10],
                           "area": 100, "iscrowd": 0}]}  # fmt: skip
    dt = [
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.5},
        {"image_id": 1, "category_id": 1, "bbox": [30, 30, 10, 10], "score": 0.5},
    ]
    ours = weighted_summary(records_of(gt, dt), np.array([[2]]))[0]
    expected = reference(*repeat_images(gt, dt, np.array([2])))
    assert_stats(ours, expected)
    # by hand: points (R, P) = (1/2, 1), (1/2, 1/2), (1, 2/3), (1, 1/2): p(r) = 1 up to 0.5
    assert ours[0] == pytest.approx((51 * 1.0 + 50 * (2 / 3)) / 101, abs=1e-12)


def test_segm_weighted_stats_are_cocoeval():
    gt, dt = make_coco_dataset(n_images=5, segm=True, score_decimals=2, seed=4)
    records = records_of(gt, dt, "segm")
    weights = np.array([[2, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    ours = weighted_summary(records, weights)
    for row, w in zip(ours, weights, strict=True):
        assert_stats(row, reference(*repeat_images(gt, dt, w), "segm"))


def two_detectors(n_images: int = 7, seed: int = 0):
    gt, first = make_coco_dataset(n_images=n_images, n_categories=3, score_decimals=1, seed=seed)
    _, second = make_coco_dataset(
        n_images=n_images,
        n_categories=3,
        score_decimals=1,
        seed=seed,
        detections_per_object=2.5,
        wrong_class_rate=0.4,
    )
    return gt, first, second


def mixed(gt: dict, first: list, second: list, swapped: set, kept: set) -> tuple[dict, list]:
    """The first detector's results with the second's on the swapped images, kept images only."""
    truth = {
        **gt,
        "images": [im for im in gt["images"] if im["id"] in kept],
        "annotations": [a for a in gt["annotations"] if a["image_id"] in kept],
    }
    results = [d for d in first if d["image_id"] in kept - swapped] + [
        d for d in second if d["image_id"] in kept & swapped
    ]
    return truth, results


def test_swapped_stats_are_cocoeval_of_the_exchanged_detections():
    gt, first, second = two_detectors()
    a, b = records_of(gt, first), records_of(gt, second)
    ids = sorted(im["id"] for im in gt["images"])
    rng = np.random.default_rng(0)
    swap = rng.random((4, len(ids))) < 0.5
    keep = np.arange(len(ids)) != 3
    ours_a, ours_b = swapped_summaries(a, b, swap, keep)
    kept = {i for i, k in zip(ids, keep, strict=True) if k}
    for m in range(len(swap)):
        swapped = {i for i, s in zip(ids, swap[m], strict=True) if s}
        assert_stats(ours_a[m], reference(*mixed(gt, first, second, swapped, kept)))
        assert_stats(ours_b[m], reference(*mixed(gt, second, first, swapped, kept)))


def test_image_summary_is_each_image_alone():
    gt, dt = make_coco_dataset(n_images=6, n_categories=3, score_decimals=1, seed=5)
    per_image = image_summary(records_of(gt, dt))
    for i, image in enumerate(sorted(gt["images"], key=lambda im: im["id"])):
        alone = {
            **gt,
            "images": [image],
            "annotations": [a for a in gt["annotations"] if a["image_id"] == image["id"]],
        }
        results = [d for d in dt if d["image_id"] == image["id"]]
        assert_stats(per_image[i], reference(alone, results))


def test_exact_randomization_pvalue_enumerates_cocoeval_swaps():
    """6 images: the p-value is the share of the 64 swap patterns whose AP difference (by
    pycocotools) is at least the observed one in absolute value."""
    gt, first, second = two_detectors(n_images=6, seed=7)
    result = compare_coco(
        {"a": records_of(gt, first), "b": records_of(gt, second)}, n_resamples=300
    )
    ids = sorted(im["id"] for im in gt["images"])
    observed = reference(gt, first)[0] - reference(gt, second)[0]
    extreme = 0
    for pattern in itertools.product([False, True], repeat=len(ids)):
        swapped = {i for i, s in zip(ids, pattern, strict=True) if s}
        d = (
            reference(*mixed(gt, first, second, swapped, set(ids)))[0]
            - reference(*mixed(gt, second, first, swapped, set(ids)))[0]
        )
        extreme += abs(d) >= abs(observed) * (1 - 1e-9) - 1e-12
    assert float(result.mean_diff[0]) == pytest.approx(observed, abs=1e-12)
    assert bool(result.exact[0]) and int(result.n[0]) == 6
    assert float(result.pvalue[0]) == extreme / 64


def test_compare_estimate_interval_and_holm_family():
    gt, first = make_coco_dataset(n_images=20, n_categories=3, seed=8)
    _, poor = make_coco_dataset(n_images=20, n_categories=3, seed=8, wrong_class_rate=0.7)
    _, noisy = make_coco_dataset(n_images=20, n_categories=3, seed=8, false_positives_per_image=6.0)
    runs = {"a": records_of(gt, first), "b": records_of(gt, poor), "c": records_of(gt, noisy)}
    result = compare_coco(runs, column="AP50", n_resamples=300, seed=1)
    truth = load_ground_truth(gt)
    ap50 = {
        k: evaluate(truth, load_detections(r, truth)).stats.sel(metric="AP50").item()
        for k, r in (("a", first), ("b", poor), ("c", noisy))
    }
    pairs = [tuple(map(str, p)) for p in result.get_index("comparison")]
    assert pairs == [("a", "b"), ("a", "c"), ("b", "c")]
    for k, (d, b) in enumerate(pairs):
        assert float(result.mean_diff[k]) == pytest.approx(ap50[d] - ap50[b], abs=1e-12)
        assert result.ci_low[k] <= result.mean_diff[k] <= result.ci_high[k]
    p = np.sort(result.pvalue.values)
    holm = np.minimum(1, np.maximum.accumulate(p * np.array([3, 2, 1])))
    np.testing.assert_allclose(np.sort(result.pvalue_corrected.values), holm)
    assert result.attrs["pair_by"] == "image" and result.attrs["metric"] == "AP50"


def test_records_of_another_ground_truth_are_refused():
    gt, dt = make_coco_dataset(n_images=5, seed=9)
    other_gt, other_dt = make_coco_dataset(n_images=6, seed=10)
    with pytest.raises(InvalidInputError, match="one ground truth for all detectors"):
        coco_statistic({"a": records_of(gt, dt), "b": records_of(other_gt, other_dt)})
    with pytest.raises(InvalidInputError, match="column must be one of"):
        coco_statistic({"a": records_of(gt, dt)}, "AR1")


def test_cli_columns_are_the_library_columns():
    assert COCO_COLUMNS == COLUMNS == COCO_SUMMARY


@pytest.fixture
def coco_files(tmp_path):
    gt, first = make_coco_dataset(n_images=18, n_categories=3, seed=11)
    _, second = make_coco_dataset(n_images=18, n_categories=3, seed=11, wrong_class_rate=0.6)
    for name, data in (("gt", gt), ("det_a", first), ("det_b", second)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    return tmp_path, gt, first, second


def test_cli_compares_coco_results(coco_files):
    path, gt, first, second = coco_files
    argv = ("compare", "--coco-gt", path / "gt.json", path / "det_a.json", path / "det_b.json")
    out = run_cli(*argv, "--n-resamples", "200", "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    difference = reference(gt, first)[0] - reference(gt, second)[0]
    assert row["descriptor"] == "det_a" and row["baseline"] == "det_b"
    assert row["mean_diff"] == pytest.approx(difference, abs=1e-12)
    assert row["ci_low"] <= row["mean_diff"] <= row["ci_high"] and 0 < row["pvalue"] <= 1
    table = run_cli(*argv, "--n-resamples", "200", "--labels", "A,B")
    assert table.returncode == 0, table.stderr
    assert f"{difference:+.4f}" in table.stdout and "independent unit: images" in table.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pair-by", "scene"], "--pair-by scene: COCO results pair by image"),
        (["--test", "wilcoxon"], "--test does not apply to COCO results"),
        (["--metric", "AR1"], "--metric AR1: COCO results compare on one of"),
        (["--labels", "x"], "--labels gives 1 labels for 2 results files"),
    ],
)
def test_cli_refuses_options_in_one_line(coco_files, extra, message):
    path = coco_files[0]
    out = run_cli(
        "compare", "--coco-gt", path / "gt.json", path / "det_a.json", path / "det_b.json", *extra
    )
    assert out.returncode == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_refuses_results_of_other_images_and_bad_files(coco_files):
    path, _, first, _ = coco_files
    stray = [*first, {**first[0], "image_id": 10**6}]
    (path / "stray.json").write_text(json.dumps(stray))
    (path / "broken.json").write_text("[{")
    for bad, message in (
        ("stray.json", "image_id 1000000 is not in the ground truth"),
        ("broken.json", "not valid JSON"),
    ):
        out = run_cli("compare", "--coco-gt", path / "gt.json", path / "det_a.json", path / bad)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    one = run_cli("compare", "--coco-gt", path / "gt.json", path / "det_a.json")
    assert one.returncode == 2 and "compares two or more detectors" in one.stderr
    no_gt = run_cli("compare", path / "det_a.json", path / "det_b.json")
    assert no_gt.returncode == 2 and "name their ground truth with --coco-gt" in no_gt.stderr


def test_ground_truth_without_objects_is_refused():
    gt, dt = make_coco_dataset(n_images=5, seed=12)
    for annotation in gt["annotations"]:
        annotation["iscrowd"] = 1
    with pytest.raises(InvalidInputError, match="no annotation that counts"):
        coco_statistic({"a": records_of(gt, dt), "b": records_of(gt, dt)})
