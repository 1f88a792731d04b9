"""COCO evaluation without pycocotools, checked against pycocotools (the test-time reference)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import metricalc as mc
from metricalc.benchmarks.coco import (
    COCO_STATS,
    coco_stats,
    evaluate,
    load_detections,
    load_ground_truth,
)
from metricalc.benchmarks.coco.generator import make_coco_dataset
from metricalc.benchmarks.coco.iou import box_iou
from metricalc.benchmarks.coco.masks import encode_rle, mask_iou, masks_from_segmentations
from tests.detection_cases import odd_dataset

pycoco_mask = pytest.importorskip("pycocotools.mask")
from pycocotools.coco import COCO  # noqa: E402
from pycocotools.cocoeval import COCOeval  # noqa: E402


def reference(gt: dict, dt: list, iou_type: str) -> COCOeval:
    """pycocotools' evaluation, its printing silenced."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
        result = coco.loadRes(copy.deepcopy(dt))
        ev = COCOeval(coco, result, iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def ours(gt: dict, dt: list, iou_type: str):
    truth = load_ground_truth(gt)
    return evaluate(truth, load_detections(dt, truth), iou_type=iou_type)


def nan_for_minus_one(values: np.ndarray) -> np.ndarray:
    return np.where(values == -1, np.nan, values)


CASES = [
    # (seed, iou_type, options)
    *[(s, "bbox", {}) for s in range(12)],
    *[(s, "bbox", {"score_decimals": 1}) for s in range(12, 20)],  # many ties
    *[(s, "bbox", {"crowd_rate": 0.3, "detections_per_object": 3.0}) for s in range(20, 26)],
    *[(s, "bbox", {"n_categories": 8, "objects_per_image": 1.0}) for s in range(26, 30)],
    *[(s, "segm", {}) for s in range(30, 38)],
    *[(s, "segm", {"score_decimals": 2, "crowd_rate": 0.3}) for s in range(38, 42)],
    *[(s, "segm", {"detection_boxes": False}) for s in range(42, 46)],  # mask-only results
    *[(s, "bbox", {"segm": True, "detection_boxes": False}) for s in range(46, 48)],
]


@pytest.mark.parametrize(("seed", "iou_type", "options"), CASES)
def test_equals_pycocotools(seed, iou_type, options):
    """Stats, precision cube, score cube and recall, bit for bit (NaN where COCO has -1)."""
    kwargs = {"n_images": 4 + seed % 9, "n_categories": 1 + seed % 6, "seed": seed}
    kwargs.update(segm=iou_type == "segm")
    kwargs.update(options)
    gt, dt = make_coco_dataset(**kwargs)
    if not dt:
        pytest.skip("no detections drawn (pycocotools cannot load an empty result list)")
    mine, ref = assert_equal_to_reference(gt, dt, iou_type)
    named = coco_stats(mine)
    assert list(named) == list(COCO_STATS)
    np.testing.assert_array_equal(list(named.values()), nan_for_minus_one(ref.stats))


def assert_equal_to_reference(gt: dict, dt: list, iou_type: str) -> tuple[Any, COCOeval]:
    """Our evaluation equals pycocotools' (stats, precision, recall, scores); both returned."""
    ref = reference(gt, dt, iou_type)
    mine = ours(gt, dt, iou_type)
    np.testing.assert_array_equal(mine.stats.values, nan_for_minus_one(ref.stats))
    np.testing.assert_array_equal(mine.precision.values, nan_for_minus_one(ref.eval["precision"]))
    np.testing.assert_array_equal(mine.max_recall.values, nan_for_minus_one(ref.eval["recall"]))
    np.testing.assert_array_equal(mine.score.values, nan_for_minus_one(ref.eval["scores"]))
    return mine, ref


@pytest.mark.parametrize("seed", range(40))
def test_odd_shapes_equal_pycocotools(seed):
    gt, dt = odd_dataset(seed)
    if not dt:
        pytest.skip("no detections drawn (pycocotools cannot load an empty result list)")
    assert_equal_to_reference(gt, dt, "bbox")


@pytest.mark.parametrize("seed", range(30))
def test_random_generator_settings_equal_pycocotools(seed):
    """The generator with every knob drawn at random (hundreds of seeds were compared this way
    in review; 30 stay in the suite)."""
    rng = np.random.default_rng(1000 + seed)
    segm = bool(rng.random() < 0.5)
    gt, dt = make_coco_dataset(
        n_images=int(rng.integers(1, 15)), n_categories=int(rng.integers(1, 12)), segm=segm,
        objects_per_image=float(rng.choice([0.5, 3, 10])),
        detections_per_object=float(rng.choice([0.5, 1.5, 4])),
        false_positives_per_image=float(rng.choice([0, 2, 30])),
        crowd_rate=float(rng.choice([0, 0.05, 0.5])),
        wrong_class_rate=float(rng.choice([0, 0.15, 0.6])),
        score_decimals=[None, 1, 2][int(rng.integers(3))],
        detection_boxes=bool(rng.random() < 0.5), seed=1000 + seed,
    )
    if not dt:
        pytest.skip("no detections drawn (pycocotools cannot load an empty result list)")
    assert_equal_to_reference(gt, dt, "segm" if segm and rng.random() < 0.7 else "bbox")


@pytest.mark.parametrize("seed", range(20))
def test_other_parameters_equal_pycocotools(seed):
    """IoU thresholds up to 1, other detection budgets and area ranges: the cubes agree."""
    rng = np.random.default_rng(seed)
    gt, dt = odd_dataset(seed + 100)
    if not dt:
        pytest.skip("no detections drawn")
    thresholds = sorted({float(v) for v in rng.choice([0.1, 0.3, 0.5, 0.77, 0.99, 1.0], 3)})
    budgets = sorted({int(v) for v in rng.choice([1, 2, 5, 10, 100, 300], 2)})
    ranges = {"all": (0.0, 1e10), "mid": (float(rng.uniform(0, 500)), 2000.0)}
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(copy.deepcopy(dt)), "bbox")
        ev.params.iouThrs = np.array(thresholds)
        ev.params.maxDets = budgets
        ev.params.areaRng = [list(v) for v in ranges.values()]
        ev.params.areaRngLbl = list(ranges)
        ev.evaluate()
        ev.accumulate()
    truth = load_ground_truth(gt)
    mine = evaluate(truth, load_detections(dt, truth), iou_thresholds=thresholds,
                    max_dets=budgets, area_ranges=ranges)
    np.testing.assert_array_equal(mine.precision.values, nan_for_minus_one(ev.eval["precision"]))
    np.testing.assert_array_equal(mine.max_recall.values, nan_for_minus_one(ev.eval["recall"]))


def test_edge_cases_equal_pycocotools():
    """An empty category, images without ground truth or detections, a crowd-only image, a
    category with detections but no ground truth, tied scores across images."""
    gt = {
        "images": [{"id": i, "height": 100, "width": 120} for i in (3, 1, 2, 7)],
        "categories": [{"id": 5, "name": "a"}, {"id": 2, "name": "b"}, {"id": 9, "name": "c"}],
        "annotations": [  # pycocotools needs iscrowd everywhere (metricalc defaults it to 0)
            {"id": 1, "image_id": 1, "category_id": 5, "bbox": [10, 10, 30, 30], "area": 900,
             "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 5, "bbox": [12, 10, 30, 30], "area": 900,
             "iscrowd": 0},
            {"id": 3, "image_id": 2, "category_id": 5, "bbox": [0, 0, 100, 90], "area": 9000,
             "iscrowd": 1},
            {"id": 4, "image_id": 3, "category_id": 5, "bbox": [50, 50, 8, 8], "area": 64,
             "iscrowd": 0},
            {"id": 5, "image_id": 3, "category_id": 5, "bbox": [5, 5, 99, 90], "area": 9500,
             "iscrowd": 0},
        ],
    }
    dt = [
        {"image_id": 1, "category_id": 5, "bbox": [10, 10, 30, 30], "score": 0.5},
        {"image_id": 1, "category_id": 5, "bbox": [11, 10, 30, 30], "score": 0.5},
        {"image_id": 2, "category_id": 5, "bbox": [10, 10, 30, 30], "score": 0.5},
        {"image_id": 2, "category_id": 5, "bbox": [60, 10, 30, 30], "score": 0.7},
        {"image_id": 3, "category_id": 5, "bbox": [50, 50, 8, 8], "score": 0.5},
        {"image_id": 3, "category_id": 2, "bbox": [50, 50, 8, 8], "score": 0.9},
        {"image_id": 7, "category_id": 5, "bbox": [1, 1, 5, 5], "score": 0.2},
    ]
    ref = reference(gt, dt, "bbox")
    mine = ours(gt, dt, "bbox")
    np.testing.assert_array_equal(mine.stats.values, nan_for_minus_one(ref.stats))
    np.testing.assert_array_equal(mine.precision.values, nan_for_minus_one(ref.eval["precision"]))
    # category c (id 9) has neither ground truth nor detections, b only detections: undefined
    assert np.isnan(mine.precision.sel(category=[2, 9]).values).all()


def test_no_detection_scores_zero():
    gt, _ = make_coco_dataset(n_images=5, seed=1)
    mine = ours(gt, [], "bbox")
    defined = mine.stats.values[~np.isnan(mine.stats.values)]
    assert defined.size and (defined == 0).all()


# ---------------------------------------------------------------------------------------------
# Masks against pycocotools.mask
# ---------------------------------------------------------------------------------------------


def decode(masks, i: int) -> np.ndarray:
    h, w = int(masks.height[i]), int(masks.width[i])
    flat = np.zeros(h * w, np.uint8)
    for start, end in zip(masks.start[masks.offsets[i] : masks.offsets[i + 1]],
                          masks.end[masks.offsets[i] : masks.offsets[i + 1]], strict=True):
        flat[start:end] = 1
    return flat.reshape(w, h).T


# pycocotools' decode() warns under NumPy 2 (its __array__ takes no copy keyword)
REFERENCE_DECODE_WARNING = "ignore:__array__ implementation doesn't accept a copy keyword"


@pytest.mark.filterwarnings(REFERENCE_DECODE_WARNING)
def test_polygons_rasterize_as_pycocotools():
    """Random polygons, also reaching outside the image, integer and half-pixel vertices,
    multi-part and repeated vertices: the same pixels as frPyObjects + merge."""
    rng = np.random.default_rng(0)
    segmentations, heights, widths, expected = [], [], [], []
    for trial in range(400):
        h, w = (int(v) for v in rng.integers(3, 70, 2))
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(3, 10))
            centre = rng.uniform([-5, -5], [w + 5, h + 5])
            points = centre + rng.normal(0, [w / 3, h / 3], (k, 2))
            if trial % 3 == 0:
                points = np.round(points)
            elif trial % 3 == 1:
                points = np.round(points * 2) / 2
            if trial % 7 == 0:
                points = np.repeat(points, 2, axis=0)  # repeated vertices
            parts.append(points.ravel().tolist())
        segmentations.append(parts)
        heights.append(h)
        widths.append(w)
        expected.append(pycoco_mask.decode(pycoco_mask.merge(pycoco_mask.frPyObjects(parts, h, w))))
    masks = masks_from_segmentations(segmentations, np.array(heights), np.array(widths),
                                     where=["x"] * 400)
    for i in range(400):
        np.testing.assert_array_equal(decode(masks, i), expected[i], err_msg=str(i))


def random_binary_masks(rng, count):
    out = []
    for trial in range(count):
        h, w = (int(v) for v in rng.integers(1, 60, 2))
        mask = (rng.random((h, w)) < rng.random()).astype(np.uint8)
        if trial % 5 == 0:
            mask[:] = 0
        if trial % 7 == 0:
            mask[:] = 1
        if trial % 3 == 0:
            mask = np.zeros((h, w), np.uint8)
            mask[h // 3 :, : max(w // 2, 1)] = 1
        out.append(mask)
    return out


@pytest.mark.filterwarnings(REFERENCE_DECODE_WARNING)
def test_rle_decode_encode_area_box_as_pycocotools():
    rng = np.random.default_rng(1)
    arrays = random_binary_masks(rng, 300)
    refs = [pycoco_mask.encode(np.asfortranarray(a)) for a in arrays]
    compressed = [{"size": r["size"], "counts": r["counts"].decode()} for r in refs]
    uncompressed = []
    for a in arrays:
        flat = a.T.ravel()
        change = np.flatnonzero(np.diff(np.r_[0, flat, 1 - flat[-1]])) if flat.size else []
        counts = np.diff(np.r_[0, change]).tolist()
        uncompressed.append({"size": list(a.shape), "counts": counts})
    h = np.array([a.shape[0] for a in arrays])
    w = np.array([a.shape[1] for a in arrays])
    for segm in (compressed, uncompressed):
        masks = masks_from_segmentations(segm, h, w, where=["x"] * len(arrays))
        for i, a in enumerate(arrays):
            np.testing.assert_array_equal(decode(masks, i), a)
        # one call per mask: pycocotools' area() overflows a uint8 for more than 255 masks
        np.testing.assert_array_equal(masks.area(), [pycoco_mask.area(r) for r in refs])
        np.testing.assert_array_equal(masks.bbox(), pycoco_mask.toBbox(refs))
    assert [e["counts"] for e in encode_rle(masks)] == [c["counts"] for c in compressed]


def test_mask_and_box_iou_as_pycocotools():
    rng = np.random.default_rng(2)
    h, w = 40, 50

    def blob():
        m = np.zeros((h, w), np.uint8)
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        m[y0 : y0 + rng.integers(1, 25), x0 : x0 + rng.integers(1, 25)] = 1
        if rng.random() < 0.4:
            m &= (rng.random((h, w)) < 0.7).astype(np.uint8)
        return m

    dts = [pycoco_mask.encode(np.asfortranarray(blob())) for _ in range(40)]
    gts = [pycoco_mask.encode(np.asfortranarray(blob())) for _ in range(25)]
    crowd = rng.random(25) < 0.3
    expected = pycoco_mask.iou(dts, gts, crowd.astype(np.uint8))
    as_masks = [
        masks_from_segmentations(
            [{"size": r["size"], "counts": r["counts"].decode()} for r in rles],
            np.full(len(rles), h), np.full(len(rles), w), where=["x"] * len(rles),
        )
        for rles in (dts, gts)
    ]
    d, g = (a.ravel() for a in np.meshgrid(np.arange(40), np.arange(25), indexing="ij"))
    got = mask_iou(*as_masks, d, g, crowd[g], chunk=50).reshape(40, 25)
    np.testing.assert_array_equal(got, expected)
    boxes_d = rng.uniform(0, 30, (40, 4))
    boxes_g = rng.uniform(0, 30, (25, 4))
    expected = pycoco_mask.iou(boxes_d, boxes_g, crowd.astype(np.uint8))
    np.testing.assert_array_equal(box_iou(boxes_d[d], boxes_g[g], crowd[g]).reshape(40, 25),
                                  expected)


def test_runtime_never_imports_pycocotools(tmp_path):
    gt, dt = make_coco_dataset(n_images=3, segm=True, seed=4)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    code = (
        "import sys, metricalc.benchmarks.coco as d, metricalc.decompose as dc;"
        f"g = d.load_ground_truth({str(tmp_path / 'gt.json')!r});"
        f"r = dc.decompose_detection(g, d.load_detections({str(tmp_path / 'dt.json')!r}, g),"
        " iou_type='segm');"
        "print(any(m.startswith('pycocotools') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------------------------

GOOD_GT = {
    "images": [{"id": 1, "height": 10, "width": 10}],
    "categories": [{"id": 1, "name": "a"}],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4], "area": 16,
         "segmentation": [[0, 0, 4, 0, 4, 4, 0, 4]]},
    ],
}


def broken(path: str, value) -> dict:
    data = copy.deepcopy(GOOD_GT)
    target = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    if value is KeyError:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("annotations.0.bbox", [0, 0, -1, 4], r"annotations\[0\] \(id 1\): bbox"),
        ("annotations.0.area", KeyError, "area must be a finite number"),
        ("annotations.0.image_id", 9, r"annotations\[0\]: image_id 9 is not in"),
        ("annotations.0.category_id", 4, "category_id 4 is not in"),
        ("annotations.0.iscrowd", 2, "iscrowd must be 0 or 1"),
        ("images.0.height", 0, "height and width must be positive"),
        ("images", "nope", "images: expected a list of objects"),
        ("annotations.0.id", 10**40, r"annotations\[0\]: id must be a 64-bit integer; got 10{40}"),
        ("images.0.id", -(2**63) - 1, "id must be a 64-bit integer"),
        ("annotations.0.area", "16", r"area must be a finite number >= 0; got '16'"),
        # w * h of a 1e308 box is inf: refused, as any value beyond 2**53 (no whole pixels)
        ("annotations.0.bbox", [0, 0, 1e308, 4],
         r"annotations\[0\] \(id 1\): bbox .*within \+-2\*\*53 .*; got \[0, 0, 1e\+308, 4\]"),
        ("annotations.0.bbox", [-(2.0**53) - 2, 0, 4, 4], r"within \+-2\*\*53"),
    ],
)
def test_bad_ground_truth_is_named(path, value, message):
    with pytest.raises(mc.InvalidInputError, match=message):
        load_ground_truth(broken(path, value))


def test_the_largest_box_values_are_read():
    data = broken("annotations.0.bbox", [-(2.0**53), 0, 2.0**53, 4])
    assert load_ground_truth(data).bbox[0].tolist() == [-(2.0**53), 0, 2.0**53, 4]


def test_duplicate_ids_and_bad_json(tmp_path):
    data = copy.deepcopy(GOOD_GT)
    data["annotations"].append(dict(data["annotations"][0]))
    with pytest.raises(mc.InvalidInputError, match="id 1 is used twice"):
        load_ground_truth(data)
    path = tmp_path / "gt.json"
    path.write_text("{not json")
    with pytest.raises(mc.InvalidInputError, match=r"gt.json: not valid JSON \(line 1"):
        load_ground_truth(path)
    path.write_bytes(json.dumps(GOOD_GT).encode("utf-16"))
    with pytest.raises(mc.InvalidInputError, match=r"gt.json: not UTF-8 text \(byte 0: b'\\xff'\)"):
        load_ground_truth(path)
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD_GT).encode())  # a UTF-8 BOM is fine
    assert len(load_ground_truth(path).ann_ids) == len(GOOD_GT["annotations"])


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ({"image_id": 2, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1},
         r"image_id 2 is not in the ground truth's images$"),
        ({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": "x"}, "score must"),
        ({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": "0.9"},
         r"score must be a finite number; got '0.9'"),
        ({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": True}, "score must"),
        ({"image_id": 1, "category_id": 1, "bbox": ["0", 0, 1, 1], "score": 1}, "bbox must"),
        ({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1], "score": 1}, "bbox must"),
        ({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1e308, 1e308], "score": 1},
         r"results\[0\] \(id 1\): bbox must be .*within \+-2\*\*53"),
        ({"image_id": 1, "category_id": 3, "bbox": [0, 0, 1, 1], "score": 1},
         r"category_id 3 is not in the ground truth's categories$"),
    ],
)
def test_bad_detections_are_named(result, message):
    gt = load_ground_truth(GOOD_GT)
    with pytest.raises(mc.InvalidInputError, match=message):
        load_detections([result], gt)


@pytest.mark.parametrize(
    ("segmentation", "message"),
    [
        ({"size": [5, 10], "counts": [100]}, "RLE size"),
        ({"size": [10, 10], "counts": [10, 20]}, "counts sum to 30"),
        ({"size": [10, 10], "counts": "0~"}, "characters 0..o"),
        ([[0, 0, 4, 0]], "at least 3"),
        ([], "empty list"),
        ("polygon", "segmentation must be polygons"),
    ],
)
def test_bad_masks_are_named(segmentation, message):
    gt = load_ground_truth(broken("annotations.0.segmentation", segmentation))
    dt = load_detections([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4], "score": 1}],
                         gt)
    with pytest.raises(mc.InvalidInputError, match=message):
        evaluate(gt, dt, iou_type="segm")


def one_box_ground_truth(annotation_id, bbox):
    """One 100 x 100 image, one category, one box ``bbox`` (x, y, w, h) with the given id."""
    return {
        "images": [{"id": 1, "height": 100, "width": 100}],
        "categories": [{"id": 1}],
        "annotations": [{"id": annotation_id, "image_id": 1, "category_id": 1, "bbox": bbox,
                         "area": bbox[2] * bbox[3], "iscrowd": 0}],
    }  # fmt: skip


def test_ground_truth_id_zero_is_matched():
    """pycocotools marks matches with annotation ids, so a ground truth with id 0 leaves its
    detection unmatched (AP 0); metricalc matches by position (documented difference)."""
    gt = one_box_ground_truth(0, [10, 10, 20, 20])
    dt = [{"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9}]
    assert reference(gt, dt, "bbox").stats[0] == 0.0
    assert ours(gt, dt, "bbox").stats.sel(metric="AP").item() == pytest.approx(1.0)


@pytest.mark.filterwarnings(REFERENCE_DECODE_WARNING)
def test_iou_threshold_zero_is_refused():
    """At IoU threshold 0 COCOeval matches boxes that do not overlap at all (``iou < 0`` never
    holds); rather than differ from it, the threshold is refused."""
    gt = one_box_ground_truth(1, [0, 0, 10, 10])
    dt = [{"image_id": 1, "category_id": 1, "bbox": [50, 50, 10, 10], "score": 0.9}]
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(copy.deepcopy(dt)), "bbox")
        ev.params.iouThrs = np.array([0.0])
        ev.evaluate()
        ev.accumulate()
    assert ev.eval["recall"][0, 0, 0, -1] == 1.0  # the disjoint box counts as a match
    truth = load_ground_truth(gt)
    with pytest.raises(mc.InvalidInputError, match=r"iou_thresholds must be in \(0, 1\]"):
        evaluate(truth, load_detections(dt, truth), iou_thresholds=[0.0, 0.5])


@pytest.mark.parametrize("max_dets", [[1.5, 10], ["ten"], [0, 10], []])
def test_bad_budgets_are_named_not_truncated(max_dets):
    gt = load_ground_truth(GOOD_GT)
    dt = load_detections([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4], "score": 1}], gt)
    with pytest.raises(mc.InvalidInputError, match="max_dets must be a non-empty list"):
        evaluate(gt, dt, max_dets=max_dets)
