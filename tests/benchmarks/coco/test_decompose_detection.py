"""Decomposition of detection: hand-computed cases, agreement with COCO, DecompoVision's rules."""

from __future__ import annotations

import numpy as np
import pytest

import metricalc as mc
from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
from metricalc.benchmarks.coco.generator import make_coco_dataset
from metricalc.decompose import (
    curve_average_precision,
    decompose_detection,
    detection_chains,
    verify,
)
from tests.detection_cases import odd_dataset

H = W = 100


def rectangle_rle(x: int, y: int, w: int, h: int) -> dict:
    """Uncompressed RLE of a filled rectangle (column-major runs), written out by hand."""
    counts, position = [], 0
    for column in range(x, x + w):
        start = column * H + y
        counts += [start - position, h]
        position = start + h
    counts.append(H * W - position)
    return {"size": [H, W], "counts": counts}


# One image, two classes (cat = 1, dog = 2).
#   g1 cat [0, 0, 10, 10]          g2 dog [50, 50, 10, 10]
#   d1 cat 0.9 on g1 (IoU 1)       -> L, correct                mask: left half of g1 (IoU 0.5)
#   d2 dog 0.8 on g1 (IoU 90/110)  -> L, wrong class
#   d3 cat 0.7 on g2 (IoU 1)       -> L, wrong class
#   d4 cat 0.6 on g1 (duplicate)   -> L; COCO: g1 taken (wrong); DecompoVision: correct
#   d5 dog 0.5 nowhere             -> not L
#   d6 dog 0.4 on g2 (IoU 1)       -> L, correct                mask: 3 of g2's 10 rows (0.3)
GT = {
    "images": [{"id": 1, "height": H, "width": W}],
    "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100,
         "iscrowd": 0, "segmentation": rectangle_rle(0, 0, 10, 10)},
        {"id": 2, "image_id": 1, "category_id": 2, "bbox": [50, 50, 10, 10], "area": 100,
         "iscrowd": 0, "segmentation": rectangle_rle(50, 50, 10, 10)},
    ],
}
BOXES = [
    (1, [0, 0, 10, 10], 0.9, rectangle_rle(0, 0, 5, 10)),
    (2, [1, 0, 10, 10], 0.8, rectangle_rle(1, 0, 10, 10)),
    (1, [50, 50, 10, 10], 0.7, rectangle_rle(50, 50, 10, 10)),
    (1, [0, 0, 10, 10], 0.6, rectangle_rle(0, 0, 10, 10)),
    (2, [80, 80, 10, 10], 0.5, rectangle_rle(80, 80, 10, 10)),
    (2, [50, 50, 10, 10], 0.4, rectangle_rle(50, 50, 10, 3)),
]
DT = [
    {"image_id": 1, "category_id": c, "bbox": box, "score": s, "segmentation": rle}
    for c, box, s, rle in BOXES
]


def chains(**kwargs):
    gt = load_ground_truth(GT)
    return detection_chains(gt, load_detections(DT, gt), iou_thresholds=[0.5], **kwargs).isel(
        iou=0
    )


def values(curves, name, category, stage=None):
    one = curves[name].sel(category=category)
    if stage is not None:
        one = one.sel(stage=stage)
    return one.values.tolist()


def test_coco_convention_by_hand():
    c = chains()
    # cat: d1 0.9, d3 0.7, d4 0.6
    assert values(c, "cutoff", 1) == [0.9, 0.7, 0.6]
    assert values(c, "n_selected", 1) == [1, 2, 3]
    assert values(c, "tp", 1, "L") == [1, 2, 3]
    assert values(c, "tp", 1, "C|L") == [1, 1, 1]
    assert values(c, "fp", 1, "C|L") == [0, 1, 2]
    assert values(c, "found", 1, "L") == [1, 1, 1]  # g1 localized from 0.9 (d1)
    assert values(c, "found", 1, "C|L") == [1, 1, 1]  # g1 matched by d1
    assert values(c, "n_ground_truth", 1) == [1, 1]
    np.testing.assert_allclose(values(c, "precision", 1), [1, 1 / 2, 1 / 3])
    np.testing.assert_allclose(values(c, "recall", 1), [1, 1, 1])
    # dog: d2 0.8, d5 0.5, d6 0.4; g2 localized at 0.7 by the cat d3, matched by d6 at 0.4
    assert values(c, "cutoff", 2)[:3] == [0.8, 0.5, 0.4]
    assert values(c, "tp", 2, "L")[:3] == [1, 1, 2]
    assert values(c, "tp", 2, "C|L")[:3] == [0, 0, 1]
    assert values(c, "found", 2, "L")[:3] == [0, 1, 1]
    assert values(c, "found", 2, "C|L")[:3] == [0, 0, 1]
    np.testing.assert_allclose(values(c, "factor_precision", 2, "L")[:3], [1, 1 / 2, 2 / 3])
    np.testing.assert_allclose(values(c, "factor_precision", 2, "C|L")[:3], [0, 0, 1 / 2])
    np.testing.assert_allclose(values(c, "factor_recall", 2, "C|L")[:3], [np.nan, 0, 1])
    np.testing.assert_allclose(values(c, "precision", 2)[:3], [0, 0, 1 / 3])
    np.testing.assert_allclose(values(c, "recall", 2)[:3], [0, 0, 1])
    assert verify(c).ok


def test_decompovision_convention_by_hand():
    c = chains(convention="decompovision")
    assert values(c, "tp", 1, "L") == [1, 2, 3]
    assert values(c, "tp", 1, "C|L") == [1, 1, 2]  # the duplicate d4 counts: no one-to-one
    # recall counts detections of any class on a cat: d1 (0.9), d2 (0.8, a dog), d4 (0.6)
    assert values(c, "found", 1, "L") == [1, 2, 3]
    assert values(c, "found", 1, "C|L") == [1, 1, 2]
    np.testing.assert_allclose(values(c, "factor_recall", 1, "L"), [1, 2, 3])  # exceeds 1
    np.testing.assert_allclose(values(c, "recall", 1), [1, 1, 2])
    # dog: recall items are the detections on g2: d3 (0.7, a cat) and d6 (0.4)
    assert values(c, "found", 2, "L")[:3] == [0, 1, 2]
    assert values(c, "found", 2, "C|L")[:3] == [0, 0, 1]
    assert verify(c).ok


def test_strict_threshold_of_decompovision():
    # IoU(d2, g1) = 90 / 110: localized at t = 90/110 under COCO's >=, not under strict >
    t = 90 / 110
    gt = load_ground_truth(GT)
    dt = load_detections(DT, gt)
    both = {
        convention: detection_chains(gt, dt, iou_thresholds=[t], convention=convention)
        for convention in ("coco", "decompovision")
    }
    assert both["coco"].tp.sel(category=2, stage="L").values[0, 0] == 1
    assert both["decompovision"].tp.sel(category=2, stage="L").values[0, 0] == 0


def test_segmentation_stage_by_hand():
    c = chains(iou_type="segm")
    assert c.stage.values.tolist() == ["L", "C|L", "S|C,L"]
    # d1's mask has IoU 0.5 with g1 (>= 0.5 passes); d6's 0.3 with g2 fails
    assert values(c, "tp", 1, "S|C,L") == [1, 1, 1]
    assert values(c, "tp", 2, "S|C,L")[:3] == [0, 0, 0]
    assert values(c, "found", 1, "S|C,L") == [1, 1, 1]
    assert values(c, "found", 2, "S|C,L")[:3] == [0, 0, 0]
    strict = chains(iou_type="segm", mask_iou_threshold=0.6)
    assert values(strict, "tp", 1, "S|C,L") == [0, 0, 0]
    # DecompoVision: mask threshold 0.25, strict: 0.5 and 0.3 both pass; d4 (full mask) too
    dv = chains(iou_type="segm", convention="decompovision")
    assert values(dv, "tp", 1, "S|C,L") == [1, 1, 2]
    assert values(dv, "tp", 2, "S|C,L")[:3] == [0, 0, 1]
    assert verify(dv).ok


def test_composed_ap_is_coco_per_category_ap_without_ties():
    for seed in range(6):
        gt_dict, dt_list = make_coco_dataset(n_images=25, n_categories=4, crowd_rate=0.1,
                                             seed=seed)
        scores = [d["score"] for d in dt_list]
        assert len(set(scores)) == len(scores)
        gt = load_ground_truth(gt_dict)
        result = decompose_detection(gt, load_detections(dt_list, gt))
        cube = result.evaluation.precision.sel(area="all", maxdets=100).mean("recall")
        np.testing.assert_allclose(result.aps.ap.values, cube.values, atol=1e-12)
        assert result.composed_ap() == pytest.approx(result.stats["AP"], abs=1e-12)
        assert result.verification.ok


@pytest.mark.parametrize("seed", range(16))
def test_composed_curve_is_coco_on_odd_shapes(seed):
    """Crowd-only images, maxDets saturation (up to 400 detections per image), empty and tiny
    boxes, many categories; scores made distinct: the composed AP per IoU threshold and category
    is COCO's (the evaluation equals pycocotools), the final composed recall COCO's recall."""
    gt_dict, dt_list = odd_dataset(seed)
    for rank, d in zip(np.random.default_rng(seed).permutation(len(dt_list)), dt_list,
                       strict=True):
        d["score"] = float(rank + 1) / (len(dt_list) + 1)
    gt = load_ground_truth(gt_dict)
    result = decompose_detection(gt, load_detections(dt_list, gt))
    coco = result.evaluation.sel(area="all", maxdets=100)
    np.testing.assert_allclose(result.aps.ap, coco.precision.mean("recall"), atol=1e-12)
    final = result.curves.recall.isel(threshold=-1)
    np.testing.assert_allclose(final.where(coco.max_recall.notnull()), coco.max_recall,
                               atol=1e-12)
    assert result.verification.ok


def test_ties_make_the_threshold_curve_differ_from_coco():
    gt_dict, dt_list = make_coco_dataset(n_images=25, n_categories=4, score_decimals=1, seed=2)
    gt = load_ground_truth(gt_dict)
    result = decompose_detection(gt, load_detections(dt_list, gt))
    cube = result.evaluation.precision.sel(area="all", maxdets=100).mean("recall")
    assert np.nanmax(np.abs(result.aps.ap.values - cube.values)) > 1e-6  # one point per tie group
    assert result.verification.ok


def decompovision_reference(gt_dict, dt_list, t):
    """DecompoVision's per-class curves, written from the description of their code: all
    detections sorted by confidence, loops per detection, no one-to-one matching, IoU > t."""
    boxes = {a["id"]: a for a in gt_dict["annotations"] if not a.get("iscrowd")}
    by_image = {}
    for a in boxes.values():
        by_image.setdefault(a["image_id"], []).append(a)

    def iou(b, g):
        w = min(b[0] + b[2], g[0] + g[2]) - max(b[0], g[0])
        h = min(b[1] + b[3], g[1] + g[3]) - max(b[1], g[1])
        if w <= 0 or h <= 0:
            return 0.0
        return w * h / (b[2] * b[3] + g[2] * g[3] - w * h)

    order = sorted(range(len(dt_list)), key=lambda i: -dt_list[i]["score"])
    out = {}
    for c in {cat["id"] for cat in gt_dict["categories"]}:
        npos = sum(1 for a in boxes.values() if a["category_id"] == c)
        sums = dict(pred=0, tp_prec=0, tp_rec=0, p=0)
        curve = []
        for i in order:
            d = dt_list[i]
            over = [g for g in by_image.get(d["image_id"], []) if iou(d["bbox"], g["bbox"]) > t]
            localized = bool(over)
            matched = {g["category_id"] for g in over}
            mine = d["category_id"] == c
            sums["pred"] += mine
            sums["tp_prec"] += mine and localized
            sums["tp_rec"] += localized and c in matched
            sums["p"] += localized and mine and c in matched
            if mine:
                curve.append((d["score"], dict(sums)))
        out[c] = (npos, curve)
    return out


def test_decompovision_convention_matches_a_loop_reference():
    for seed in range(4):
        gt_dict, dt_list = make_coco_dataset(n_images=15, n_categories=3, crowd_rate=0.0,
                                             detections_per_object=2.5, seed=seed)
        gt = load_ground_truth(gt_dict)
        c = detection_chains(gt, load_detections(dt_list, gt), convention="decompovision")
        c = c.isel(iou=0)
        reference = decompovision_reference(gt_dict, dt_list, 0.5)
        for category, (npos, curve) in reference.items():
            one = c.sel(category=category)
            n = len(curve)
            if n == 0:
                continue
            assert one.cutoff.values[:n].tolist() == [score for score, _ in curve]
            s = {k: np.array([v[k] for _, v in curve]) for k in curve[0][1]}
            with np.errstate(divide="ignore", invalid="ignore"):
                expected = {
                    ("factor_precision", "L"): s["tp_prec"] / s["pred"],
                    ("factor_precision", "C|L"): s["p"] / s["tp_prec"],
                    ("factor_recall", "L"): s["tp_rec"] / npos,
                    ("factor_recall", "C|L"): s["p"] / s["tp_rec"],
                }
                composed = s["p"] / npos
            for (name, stage), want in expected.items():
                np.testing.assert_allclose(one[name].sel(stage=stage).values[:n], want)
            np.testing.assert_allclose(one.recall.values[:n], composed)


def test_standard_metrics_are_reported_next_to_the_decomposition():
    gt_dict, dt_list = make_coco_dataset(n_images=10, n_categories=3, segm=True, seed=8)
    gt = load_ground_truth(gt_dict)
    dt = load_detections(dt_list, gt)
    result = decompose_detection(gt, dt, iou_type="segm")
    standard = evaluate(gt, dt, iou_type="segm")
    np.testing.assert_array_equal(result.evaluation.stats.values, standard.stats.values)
    summary = result.to_dict()
    assert list(summary["stats"]) == [
        "AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"
    ]
    assert summary["decomposition"]["stages"] == ["L", "C|L", "S|C,L"]
    assert summary["decomposition"]["identity"]["ok"] is True
    rows = summary["decomposition"]["what_if"]
    assert [r["perfect_stage"] for r in rows] == ["L", "C|L", "S|C,L"]
    means = result.aps.factor_ap.mean(["iou", "category"], skipna=True)
    np.testing.assert_allclose(list(result.factor_ap().values()), means.values)


def test_what_if_perfect_mask_stage_is_the_box_task():
    """With S|C,L made perfect, the segm chain's composed curve is the bbox chain's, whose AP is
    COCO's bbox AP per category when no scores tie (the evaluation equals pycocotools)."""
    # seed 9: recalls such as (3/10) * (1/3) round to just below a COCO recall level
    gt_dict, dt_list = make_coco_dataset(n_images=12, n_categories=3, segm=True, seed=9)
    assert len({d["score"] for d in dt_list}) == len(dt_list)
    gt = load_ground_truth(gt_dict)
    dt = load_detections(dt_list, gt)
    segm = decompose_detection(gt, dt, iou_type="segm")
    boxes = evaluate(gt, dt, iou_type="bbox").precision.sel(area="all", maxdets=100)
    per_chain = segm.what_if.ap_if_perfect.sel(stage="S|C,L")
    np.testing.assert_allclose(per_chain, boxes.mean("recall"), atol=1e-12)
    box_chains = decompose_detection(gt, dt, iou_type="bbox")
    np.testing.assert_array_equal(per_chain, box_chains.aps.ap)  # to the last bit
    row = segm.to_dict()["decomposition"]["what_if"][2]
    assert row["perfect_stage"] == "S|C,L"
    assert row["ap_if_perfect"] == pytest.approx(float(boxes.mean()), abs=1e-12)
    # a perfect localizer leaves the curve (P_C|L P_S, R_C|L R_S), computed here by hand
    c = segm.curves
    rest = c.sel(stage=["C|L", "S|C,L"])
    ap = curve_average_precision(
        rest.factor_precision.prod("stage", skipna=False),
        rest.factor_recall.prod("stage", skipna=False),
    )
    ap = ap.where(ap.notnull() | segm.aps.ap.isnull(), 0.0)  # nothing reaches C|L: AP 0
    assert segm.to_dict()["decomposition"]["what_if"][0]["ap_if_perfect"] == pytest.approx(
        float(ap.mean()), abs=1e-12
    )


def test_bad_options_are_named():
    gt = load_ground_truth(GT)
    dt = load_detections(DT, gt)
    with pytest.raises(mc.InvalidInputError, match="convention must be one of"):
        detection_chains(gt, dt, convention="voc")
    with pytest.raises(mc.InvalidInputError, match="iou_thresholds must be in"):
        detection_chains(gt, dt, iou_thresholds=[1.5])
    with pytest.raises(mc.InvalidInputError, match="mask_iou_threshold"):
        detection_chains(gt, dt, iou_type="segm", mask_iou_threshold=2)


def test_iou_threshold_zero_only_with_the_strict_convention():
    gt = load_ground_truth(GT)
    dt = load_detections(DT, gt)
    with pytest.raises(mc.InvalidInputError, match=r"iou_thresholds must be in \(0, 1\]"):
        detection_chains(gt, dt, iou_thresholds=[0.0])
    # DecompoVision's IoU > 0: any overlap localizes; d5 overlaps nothing
    c = detection_chains(gt, dt, iou_thresholds=[0.0], convention="decompovision").isel(iou=0)
    assert values(c, "tp", 2, "L")[:3] == [1, 1, 2]


def test_ground_truth_without_categories_is_named():
    gt = load_ground_truth({"images": [{"id": 1, "height": 9, "width": 9}], "categories": [],
                            "annotations": []})
    with pytest.raises(mc.InvalidInputError, match="lists no categories"):
        decompose_detection(gt, load_detections([], gt))
