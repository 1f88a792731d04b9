"""Per-query results of one image pair: ground truth, rank statistics, nearest neighbours."""

from __future__ import annotations

from typing import Any

import numpy as np

from metricalc.core.ranking import ap_from_rank_stats
from metricalc.keypoints.geometry import ground_truth, inside
from metricalc.keypoints.matching import match_pair

PAIR_FIELDS = (
    "query_keypoint",
    "x",
    "y",
    "better",
    "ties",
    "n_relevant",
    "ap",
    "nn_correct",
    "gt_distance",
    "nn_distance",
    "nn2_distance",
    "nn_error",
    "nn_mutual",
    "n_candidates",
)
"""Per-query fields of one image pair (the QueryCube variables plus query coordinates)."""


def evaluate_pair(
    features_a: Any,
    features_b: Any,
    H: np.ndarray,
    shape_a: tuple[int, int],
    shape_b: tuple[int, int],
    *,
    tau: float = 3.0,
    border: float = 40.0,
    tie_policy: str = "expected",
    keep_distances: bool = False,
) -> dict[str, np.ndarray]:
    """Per-query results of one image pair (A = image 1, B = image k).

    Returns a mapping of :data:`PAIR_FIELDS` to arrays over the queries (image-A keypoints at
    least ``border`` px inside A), with the QueryCube sentinels: better / ties -1 and ap NaN where
    R = 0, plus ``relevant`` (the ground-truth candidate of each query among the B keypoints at
    least ``border`` px inside B, -1 for none) and, with ``keep_distances``,
    ``squared_distances``: the (queries, candidates) float32 matrix the ranks come from
    (:attr:`~metricalc.keypoints.matching.PairMatches.squared`).
    """
    queries = np.flatnonzero(inside(features_a.keypoints, shape_a, border))
    candidates = np.flatnonzero(inside(features_b.keypoints, shape_b, border))
    query_points = features_a.keypoints[queries]
    candidate_points = features_b.keypoints[candidates]
    gt = ground_truth(query_points, candidate_points, H, shape_b, tau=tau, border=border)
    matches = match_pair(
        features_a.descriptors[queries],
        features_b.descriptors[candidates],
        gt.relevant,
        keep_squared=keep_distances,
    )
    has_nn = matches.nn_index >= 0
    nn_points = candidate_points[np.maximum(matches.nn_index, 0)] if len(candidates) else None
    nn_error = (
        np.where(has_nn, np.linalg.norm(gt.projected - nn_points, axis=1), np.nan)
        if nn_points is not None
        else np.full(len(queries), np.nan)
    )
    has_gt = gt.relevant >= 0
    kept = {} if matches.squared is None else {"squared_distances": matches.squared}
    return kept | {
        "query_keypoint": queries.astype(np.int64),
        "x": query_points[:, 0].astype(np.float64),
        "y": query_points[:, 1].astype(np.float64),
        "better": matches.better,
        "ties": matches.ties,
        "n_relevant": has_gt.astype(np.int8),
        "ap": ap_from_rank_stats(matches.better, matches.ties, tie_policy=tie_policy),
        "nn_correct": (has_gt & (matches.nn_index == gt.relevant)).astype(np.int8),
        "gt_distance": matches.gt_distance,
        "nn_distance": matches.nn_distance,
        "nn2_distance": matches.nn2_distance,
        "nn_error": nn_error,
        "nn_mutual": (has_nn & matches.nn_mutual).astype(np.int8),
        "n_candidates": np.full(len(queries), len(candidates), dtype=np.int64),
        "relevant": gt.relevant,
    }
