"""Decomposition of object detection and instance segmentation (docs/decomposition.md).

Per category c and IoU threshold t, the detections of class c form a chain

- **L** (localization): the box overlaps some ground truth of *any* class with IoU >= t;
- **C|L** (classification given localization): the detection is correct for class c;
- **S|C,L** (segmentation, ``segm`` only): its mask overlaps the ground truth its box found
  with mask IoU >= the mask threshold.

Two conventions say what "correct" and "found" mean:

``"coco"`` (default)
    COCO's evaluation rules: the ``max_det`` best detections per image and category,
    one-to-one greedy matching by confidence, crowd regions as ignore regions. C|L: the
    detection is matched to a class-c ground truth (a COCO true positive; matched detections
    always pass L). Detections COCO ignores (matched to a crowd region) do not count. Recall
    counts ground-truth objects of class c: found through L by any detection of any class with
    IoU >= t, through C|L by their matched detection. So the composed curve at threshold t is
    COCO's precision-recall curve of class c (without COCO's tiny epsilon), and the composed
    AP agrees with COCO's per-category AP when no two scores tie.
``"decompovision"``
    The code of the DecompoVision study, documented as such: no one-to-one matching and strict
    ``IoU > t``; every detection counts (no ``max_det``), crowd regions are left out. C|L: some
    ground truth of class c overlaps with IoU > t. Recall counts *detections* (several
    detections of one object all count, so recall factors can exceed 1): detections of any
    class that overlap a class-c object through L, those of class c through C|L. S|C,L compares
    the mask with the first (file order) class-c ground truth the box overlaps, mask IoU > the
    mask threshold (their default 0.25; their code takes torchmetrics' two-class Jaccard index
    inside the detection's box, the mean of the foreground and the background IoU there; here
    the foreground IoU over the whole image). Default IoU threshold 0.5. Curve points are the
    distinct confidences of class c (their code has one point per detection, of any class and
    within tied scores, where the composed curve does not move or moves in steps of one tie
    group).

The standard COCO evaluation (:func:`metricalc.benchmarks.coco.evaluate`) is computed next to the
decomposition; for ``segm`` it matches by mask IoU alone, which is not the composed task above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.benchmarks.coco.decompose_stages import Stages, coco_stages, decompovision_stages
from metricalc.benchmarks.coco.evaluate import (
    COCO_IOU_THRESHOLDS,
    Prepared,
    check_iou_thresholds,
    coco_stats,
    evaluate,
    prepare,
)
from metricalc.benchmarks.coco.files import IOU_TYPES, CocoDetections, CocoGroundTruth
from metricalc.benchmarks.coco.iou import Pairs, overlapping_pairs
from metricalc.core.ranking import AP_METHODS
from metricalc.decompose.ap import factor_ap
from metricalc.decompose.chain import DEFAULT_STAGES, chain_counts, stack_chains
from metricalc.decompose.identity import Verification, verify
from metricalc.decompose.whatif import compound, compound_table, what_if
from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.progress import progress_bar
from metricalc.validation import Boolean, Choice, Integer, validate_params

__all__ = [
    "CONVENTIONS",
    "ChainSettings",
    "DetectionDecomposition",
    "decompose_detection",
    "detection_chains",
]

CONVENTIONS = ("coco", "decompovision")
DECOMPOVISION_IOU = 0.5
DECOMPOVISION_MASK_IOU = 0.25


class ChainSettings(TypedDict, total=False):
    """The options of :func:`detection_chains` that :func:`decompose_detection` passes on."""

    convention: str
    iou_thresholds: Sequence[float] | None
    mask_iou_threshold: float | None


@validate_params(
    iou_type=Choice(IOU_TYPES),
    convention=Choice(CONVENTIONS),
    max_det=Integer(1),
    progress=Boolean(),
)
def detection_chains(
    gt: CocoGroundTruth,
    dt: CocoDetections,
    *,
    iou_type: str = "bbox",
    convention: str = "coco",
    iou_thresholds: Sequence[float] | None = None,
    mask_iou_threshold: float | None = None,
    max_det: int = 100,
    progress: bool = False,
    prepared: Prepared | None = None,
) -> xr.Dataset:
    """The decomposition chains of a detection (or instance segmentation) result.

    Parameters
    ----------
    gt, dt
        The ground truth and the detections, as for :func:`metricalc.benchmarks.coco.evaluate`.
    iou_type : {"bbox", "segm"}
        ``segm`` adds the stage S|C,L.
    convention : {"coco", "decompovision"}
        Matching rules (module docstring).
    iou_thresholds : sequence of float, optional
        Box IoU thresholds t (default COCO's 0.50:0.05:0.95; DecompoVision's 0.5).
    mask_iou_threshold : float, optional
        Mask IoU threshold of S|C,L (default: t itself; DecompoVision's 0.25).
    max_det : int
        Detections kept per image and category (``coco`` only).

    Returns
    -------
    xarray.Dataset
        The output of :func:`~metricalc.decompose.decompose` over ``(iou, category, stage,
        threshold)``, coordinate ``category_name``; attrs ``convention``, ``iou_type``.

    Examples
    --------
    >>> from metricalc.decompose import detection_chains
    >>> from metricalc.benchmarks.coco import load_detections, load_ground_truth
    >>> from metricalc.benchmarks.coco.generator import make_coco_dataset
    >>> gt_dict, dt_list = make_coco_dataset(n_images=5, n_categories=2, seed=0)
    >>> gt = load_ground_truth(gt_dict)
    >>> chains = detection_chains(gt, load_detections(dt_list, gt), iou_thresholds=[0.5])
    >>> chains.factor_precision.dims
    ('iou', 'category', 'stage', 'threshold')
    """
    if gt.category_ids.size == 0:
        raise InvalidInputError(
            f"{gt.source}: the ground truth lists no categories; there is no chain to decompose"
        )
    coco = convention == "coco"
    default = COCO_IOU_THRESHOLDS if coco else [DECOMPOVISION_IOU]
    thresholds = check_iou_thresholds(
        default if iou_thresholds is None else iou_thresholds, strict=not coco
    )
    segm = iou_type == "segm"
    mask_thresholds = _mask_thresholds(segm, coco, thresholds, mask_iou_threshold)
    prep = prepared or prepare(gt, dt, masks=segm, progress=progress)
    if segm and prep.gt_masks is None:
        prep = prepare(gt, dt, masks=True, progress=progress)
    pairs = _candidate_pairs(prep, coco, max_det)
    if coco:
        stages = coco_stages(prep, pairs, thresholds, mask_thresholds, max_det)
    else:
        stages = decompovision_stages(prep, pairs, thresholds, mask_thresholds)
    curves = _category_chains(prep, stages, thresholds, progress)
    curves.attrs.update(convention=convention, iou_type=iou_type, max_det=max_det if coco else 0)
    if mask_thresholds is not None:
        curves = curves.assign_coords(mask_iou=("iou", mask_thresholds))
    return curves.transpose("iou", "category", "stage", "threshold")


def _mask_thresholds(
    segm: bool, coco: bool, thresholds: np.ndarray, mask_iou_threshold: float | None
) -> np.ndarray | None:
    """Mask IoU threshold of S|C,L per box IoU threshold (None without ``segm``)."""
    if not segm:
        return None
    if mask_iou_threshold is None:
        return thresholds if coco else np.full(thresholds.size, DECOMPOVISION_MASK_IOU)
    if not 0 <= float(mask_iou_threshold) <= 1:
        raise InvalidInputError(f"mask_iou_threshold must be in [0, 1]; got {mask_iou_threshold!r}")
    return np.full(thresholds.size, float(mask_iou_threshold))


def _candidate_pairs(prep: Prepared, coco: bool, max_det: int) -> Pairs:
    """The overlapping (detection, ground truth) pairs of each image: ``coco`` with crowd IoU
    and the ``max_det`` best detections; ``decompovision`` without crowd regions."""
    gt, dt = prep.gt, prep.dt
    crowd_iou = gt.iscrowd if coco else np.zeros(gt.n, bool)
    pairs = overlapping_pairs(
        dt.image,
        gt.image,
        crowd_iou,
        dt_box=dt.bbox,
        gt_box=gt.bbox,
        keep_dt=prep.rank < max_det if coco else None,
    )
    if not coco:
        pairs = pairs.select(~gt.iscrowd[pairs.gt])
    return pairs


def _category_chains(
    prep: Prepared, stages: Stages, thresholds: np.ndarray, progress: bool
) -> xr.Dataset:
    """The chain counts of every category, stacked over ``category`` (with ``category_name``)."""
    gt, dt = prep.gt, prep.dt
    names = list(DEFAULT_STAGES[: stages.outcomes.shape[-1]])
    n_cat = gt.category_ids.size
    n_ground_truth = np.bincount(gt.category[stages.gt_counted], minlength=n_cat)
    chains = []
    with progress_bar("decomposing", total=n_cat, enabled=progress) as advance:
        for c in range(n_cat):
            advance()
            members = np.flatnonzero((dt.category == c) & stages.predicted)
            chains.append(
                chain_counts(
                    np.broadcast_to(dt.score[members], (thresholds.size, members.size)),
                    stages.outcomes[:, members, :],
                    np.int64(n_ground_truth[c]),
                    stages=names,
                    counted=stages.counted[:, members],
                    found_at=stages.recall.items(stages, prep, c, thresholds),
                    batch_dims=("iou",),
                    coords={"iou": thresholds},
                )
            )
    curves = stack_chains(chains, "category", coords=gt.category_ids)
    return curves.assign_coords(category_name=("category", gt.category_names))


@dataclass(frozen=True, eq=False)
class DetectionDecomposition:
    """Standard COCO evaluation and the decomposition of one detection result."""

    evaluation: xr.Dataset
    """The standard evaluation (:func:`metricalc.benchmarks.coco.evaluate`)."""
    curves: xr.Dataset
    """Chains over (iou, category, stage, threshold) (:func:`detection_chains`)."""
    aps: xr.Dataset
    """:func:`~metricalc.decompose.factor_ap` per (iou, category)."""
    what_if: xr.Dataset
    """:func:`~metricalc.decompose.what_if` per (iou, category)."""
    table: pd.DataFrame
    """The what-if table, mean over IoU thresholds and categories (compound AP)."""
    verification: Verification
    method: str

    @property
    def stats(self) -> dict[str, float]:
        """The 12 COCO stats by name."""
        return coco_stats(self.evaluation)

    def composed_ap(self) -> float:
        """Mean composed AP over IoU thresholds and categories with ground truth."""
        return float(compound(self.aps["ap"]))

    def factor_ap(self) -> dict[str, float]:
        """Mean factor AP per stage over IoU thresholds and categories."""
        means = compound(self.aps["factor_ap"], dims=("iou", "category"))
        return dict(zip(means["stage"].values.tolist(), means.values.tolist(), strict=True))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary: ``stats`` (the 12 COCO values by name) next to the
        decomposition (composed and factor APs, identity check, what-if rows)."""
        return {
            "stats": {k: json_safe(v) for k, v in self.stats.items()},
            "decomposition": {
                "convention": self.curves.attrs["convention"],
                "iou_type": self.curves.attrs["iou_type"],
                "ap_method": self.method,
                "iou_thresholds": [round(float(t), 10) for t in self.curves["iou"].values],
                "stages": self.curves["stage"].values.tolist(),
                "composed_ap": json_safe(self.composed_ap()),
                "factor_ap": {k: json_safe(v) for k, v in self.factor_ap().items()},
                "identity": self.verification.to_dict(),
                "what_if": [
                    {
                        "perfect_stage": stage,
                        "ap": json_safe(row["ap"]),
                        "ap_if_perfect": json_safe(row["ap_if_perfect"]),
                        "gain": json_safe(row["gain"]),
                    }
                    for stage, row in self.table.iterrows()
                ],
            },
        }


@validate_params(progress=Boolean(), iou_type=Choice(IOU_TYPES), method=Choice(AP_METHODS))
def decompose_detection(
    gt: CocoGroundTruth,
    dt: CocoDetections,
    *,
    progress: bool = False,
    iou_type: str = "bbox",
    method: str = "coco101",
    **settings: Unpack[ChainSettings],
) -> DetectionDecomposition:
    """Standard COCO metrics, factor APs, composed AP, identity check and what-if table.

    Parameters
    ----------
    gt, dt, iou_type, convention, iou_thresholds, mask_iou_threshold
        As :func:`detection_chains`.
    method : str
        AP method of the curves (default ``coco101``; the monotonicity theorem holds for the
        interpolated methods).
    progress : bool
        Progress bars.

    Examples
    --------
    >>> from metricalc.benchmarks.coco import load_detections, load_ground_truth
    >>> from metricalc.benchmarks.coco.generator import make_coco_dataset
    >>> from metricalc.decompose import decompose_detection
    >>> gt_dict, dt_list = make_coco_dataset(n_images=10, n_categories=3, seed=0)
    >>> gt = load_ground_truth(gt_dict)
    >>> result = decompose_detection(gt, load_detections(dt_list, gt))
    >>> result.verification.ok, sorted(result.factor_ap())
    (True, ['C|L', 'L'])
    """
    prep = prepare(gt, dt, masks=iou_type == "segm", progress=progress)
    evaluation = evaluate(gt, dt, iou_type=iou_type, progress=progress, prepared=prep)
    curves = detection_chains(
        gt, dt, iou_type=iou_type, progress=progress, prepared=prep, **settings
    )
    scenario = what_if(curves, method=method)
    return DetectionDecomposition(
        evaluation=evaluation,
        curves=curves,
        aps=factor_ap(curves, method=method),
        what_if=scenario,
        table=compound_table(scenario),
        verification=verify(curves),
        method=method,
    )
