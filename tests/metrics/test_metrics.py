"""The DescriptorWorkbench metric set over a hand-built QueryCube, every value computed by hand.

The cube (built directly as an xarray Dataset with the QueryCube schema, no metricalc.cube):
descriptors ``alpha``, ``beta`` (native union: lacks the queries of pair v_b 1-3) and ``broken``
(status "error"); scenes ``i_a`` (illumination) and ``v_b`` (viewpoint), pairs 1-2 and 1-3;
tie policy ``expected``.

    query scene pair | alpha: R better ties nn_ok err  mutual nn  nn2 | beta: same columns
    q0    i_a   1-2  |        1 0      0    1     0.5  1      1.0 4.0 | 1 0 0 1 0.3 1 1 5
    q1    i_a   1-2  |        1 1      0    0     2.5  0      2.0 2.5 | 1 0 0 1 1.2 1 1 2
    q2    i_a   1-2  |        0 -      -    0     7.0  1      1.0 2.0 | 0 - - 0 5.0 0 2 4
    q3    i_a   1-3  |        1 0      1    1     1.0  1      1.0 1.0 | 1 2 0 0 6.0 0 2 4
    q4    i_a   1-3  |        1 4      2    0     4.0  0      3.0 3.0 | 1 0 0 1 2.0 1 1 10
    q5    v_b   1-2  |        1 0      0    1     1.5  1      0.5 5.0 | 1 1 0 0 3.5 1 2 2
    q6    v_b   1-2  |        0 -      -    0     nan  0      2.0 nan | 0 - - 0 nan 0 - -
    q7    v_b   1-2  |        1 12     0    0     9.0  0      3.0 4.0 | 1 0 0 1 0.9 0 1 4
    q8    v_b   1-3  |        1 2      0    0     3.0  1      2.0 4.0 | missing (R = -1)
    q9    v_b   1-3  |        0 -      -    0     12.0 0      0.0 0.0 | missing
    q10   v_b   1-3  |        1 0      3    1     0.8  1      1.0 1.0 | missing

(nn_ok = nn_correct, err = nn_error in px, nn / nn2 = nn_distance / nn2_distance.)
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

import metricalc as mc
from metricalc.errors import InvalidInputError
from metricalc.metrics import (
    RANK_BINS,
    matching_accuracy,
    matching_counts,
    matching_pr_curve,
    metric_set,
    scene_metrics,
)
from metricalc.store.metadata import format_metadata, metadata_for, parse_metadata

DATA = Path(__file__).parents[1] / "data" / "descriptorworkbench-export"
NAN = np.nan

SCENES = ["i_a"] * 5 + ["v_b"] * 6
PAIRS = ["1-2", "1-2", "1-2", "1-3", "1-3", "1-2", "1-2", "1-2", "1-3", "1-3", "1-3"]
SPLITS = ["illumination" if s.startswith("i_") else "viewpoint" for s in SCENES]


def expected_ap(b: int, t: int) -> float:
    """AP of one relevant item under the 'expected' policy: mean of 1/r over the tied ranks."""
    return sum(1 / r for r in range(b + 1, b + t + 2)) / (t + 1)


# per descriptor: n_relevant, better, ties, nn_correct, nn_error, nn_mutual, nn_distance, nn2
ALPHA = {
    "n_relevant": [1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1],
    "better": [0, 1, -1, 0, 4, 0, -1, 12, 2, -1, 0],
    "ties": [0, 0, -1, 1, 2, 0, -1, 0, 0, -1, 3],
    "nn_correct": [1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1],
    "nn_error": [0.5, 2.5, 7.0, 1.0, 4.0, 1.5, NAN, 9.0, 3.0, 12.0, 0.8],
    "nn_mutual": [1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1],
    "nn_distance": [1.0, 2.0, 1.0, 1.0, 3.0, 0.5, 2.0, 3.0, 2.0, 0.0, 1.0],
    "nn2_distance": [4.0, 2.5, 2.0, 1.0, 3.0, 5.0, NAN, 4.0, 4.0, 0.0, 1.0],
}
BETA = {
    "n_relevant": [1, 1, 0, 1, 1, 1, 0, 1, -1, -1, -1],
    "better": [0, 0, -1, 2, 0, 1, -1, 0, -1, -1, -1],
    "ties": [0, 0, -1, 0, 0, 0, -1, 0, -1, -1, -1],
    "nn_correct": [1, 1, 0, 0, 1, 0, 0, 1, -1, -1, -1],
    "nn_error": [0.3, 1.2, 5.0, 6.0, 2.0, 3.5, NAN, 0.9, NAN, NAN, NAN],
    "nn_mutual": [1, 1, 0, 0, 1, 1, 0, 0, -1, -1, -1],
    "nn_distance": [1.0, 1.0, 2.0, 2.0, 1.0, 2.0, NAN, 1.0, NAN, NAN, NAN],
    "nn2_distance": [5.0, 2.0, 4.0, 4.0, 10.0, 2.0, NAN, 4.0, NAN, NAN, NAN],
}
BROKEN = {
    "n_relevant": [-1] * 11,
    "better": [-1] * 11,
    "ties": [-1] * 11,
    "nn_correct": [-1] * 11,
    "nn_error": [NAN] * 11,
    "nn_mutual": [-1] * 11,
    "nn_distance": [NAN] * 11,
    "nn2_distance": [NAN] * 11,
}
DTYPES = {
    "n_relevant": np.int8,
    "better": np.int64,
    "ties": np.int64,
    "nn_correct": np.int8,
    "nn_error": np.float64,
    "nn_mutual": np.int8,
    "nn_distance": np.float64,
    "nn2_distance": np.float64,
}
ATTRS = {
    "tau_px": 3.0,
    "border_px": 40.0,
    "tie_policy": "expected",
    "ap_method": "ir",
    "distance": "l2",
    "dataset": "hand-built",
    "keypoints": "native",
    "y0_policy": "negative",
    "n_distractor_scenes": 10,
    "n_distractors": 20,
    "seed": 0,
    "metricalc_version": "test",
}


def make_cube(*, bojanic: bool = True, tie_policy: str = "expected") -> xr.Dataset:
    rows = [ALPHA, BETA, BROKEN]
    dims = ("descriptor", "query")
    data = {
        name: (dims, np.array([r[name] for r in rows], dtype=dtype))
        for name, dtype in DTYPES.items()
    }
    ap = np.array(
        [
            [
                expected_ap(b, t) if n == 1 else NAN
                for n, b, t in zip(r["n_relevant"], r["better"], r["ties"], strict=True)
            ]
            for r in rows
        ]
    )
    data["ap"] = (dims, ap)
    gt = np.where(np.array([r["n_relevant"] for r in rows]) == 1, 1.0, NAN)
    data["gt_distance"] = (dims, gt)
    data["n_candidates"] = (dims, np.where(data["n_relevant"][1] >= 0, 50, -1).astype(np.int64))
    data["processing_time_ms"] = ("descriptor", np.array([100.0, 250.0, 12.0]))
    data["status"] = ("descriptor", np.array(["ok", "ok", "error"], dtype=object))
    data["error"] = ("descriptor", np.array(["", "", "extraction failed: boom"], dtype=object))
    if bojanic:
        seq = ("descriptor", "sequence")
        data["verification_ap"] = (seq, np.array([[0.9, 0.6, 0.3], [0.8, 0.2, 0.5], [NAN] * 3]))
        data["retrieval_ap"] = (seq, np.array([[0.5, 0.4, NAN], [0.7, 0.1, 0.4], [NAN] * 3]))
        data["verification_ap_per_keypoint"] = (
            seq,
            np.array([[0.8, NAN, 0.2], [0.6, 0.4, 0.1], [NAN] * 3]),
        )
        data["retrieval_ap_per_keypoint"] = (
            seq,
            np.array([[0.7, NAN, 0.3], [0.5, 0.3, 0.9], [NAN] * 3]),
        )
        data["retrieval_num_true_positives"] = (seq, np.array([[10, 20, 30], [1, 2, 3], [0] * 3]))
        data["retrieval_num_hard_negatives"] = (
            seq,
            np.array([[100, 200, 300], [4, 5, 6], [0] * 3]),
        )
        data["retrieval_num_distractors"] = (seq, np.array([[5, 5, 5], [7, 8, 9], [0] * 3]))
    coords = {
        "descriptor": ["alpha", "beta", "broken"],
        "query": np.arange(11),
        "scene": ("query", np.array(SCENES, dtype=object)),
        "split": ("query", np.array(SPLITS, dtype=object)),
        "pair": ("query", np.array(PAIRS, dtype=object)),
        "keypoint_set": ("query", np.array(["sift"] * 11, dtype=object)),
        "query_keypoint": ("query", np.arange(11)),
        "x": ("query", np.linspace(50.0, 150.0, 11)),
        "y": ("query", np.linspace(60.0, 160.0, 11)),
    }
    if bojanic:
        coords["sequence"] = ["i_a", "v_b", "v_d"]
    return xr.Dataset(data, coords=coords, attrs={**ATTRS, "tie_policy": tie_policy})


@pytest.fixture(scope="module")
def cube() -> xr.Dataset:
    return make_cube()


@pytest.fixture(scope="module")
def metrics(cube: xr.Dataset) -> xr.Dataset:
    return metric_set(cube)


@pytest.fixture(scope="module")
def scenes(cube: xr.Dataset) -> xr.Dataset:
    return scene_metrics(cube)


def value(ds: xr.Dataset | xr.DataArray, name: str | None, descriptor: str, **sel) -> float:
    array = ds if name is None else ds[name]
    return float(array.sel(descriptor=descriptor, **sel))


# ---- hand-computed APs ----------------------------------------------------------------------
A_AP = {  # alpha, R = 1 queries
    "q0": 1.0,
    "q1": 1 / 2,
    "q3": (1 / 1 + 1 / 2) / 2,  # b=0, t=1: ranks 1, 2 equally likely
    "q4": (1 / 5 + 1 / 6 + 1 / 7) / 3,  # b=4, t=2: ranks 5, 6, 7
    "q5": 1.0,
    "q7": 1 / 13,
    "q8": 1 / 3,
    "q10": (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4,  # b=0, t=3: ranks 1..4
}
A_IA = A_AP["q0"] + A_AP["q1"] + A_AP["q3"] + A_AP["q4"]  # 4 R=1, 1 R=0 (q2)
A_VB = A_AP["q5"] + A_AP["q7"] + A_AP["q8"] + A_AP["q10"]  # 4 R=1, 2 R=0 (q6, q9)
B_IA = 1 + 1 + 1 / 3 + 1  # q0, q1, q3 (rank 3), q4; 1 R=0 (q2)
B_VB = 1 / 2 + 1  # q5 (rank 2), q7; 1 R=0 (q6); q8-q10 missing


def test_true_map_micro_macro_and_splits(metrics: xr.Dataset) -> None:
    # alpha: 4 R=1 queries in each scene, so micro and macro coincide
    assert value(metrics, "true_map_micro", "alpha") == pytest.approx((A_IA + A_VB) / 8)
    assert value(metrics, "true_map_macro_by_scene", "alpha") == pytest.approx(
        (A_IA / 4 + A_VB / 4) / 2
    )
    assert value(metrics, "illumination_map", "alpha") == pytest.approx(A_IA / 4)
    assert value(metrics, "viewpoint_map", "alpha") == pytest.approx(A_VB / 4)
    # beta: 4 and 2 R=1 queries: micro 29/36 != macro 19/24
    micro, macro = (B_IA + B_VB) / 6, (B_IA / 4 + B_VB / 2) / 2
    assert micro == pytest.approx(29 / 36) and macro == pytest.approx(19 / 24)
    assert value(metrics, "true_map_micro", "beta") == pytest.approx(29 / 36)
    assert value(metrics, "true_map_macro_by_scene", "beta") == pytest.approx(19 / 24)
    assert value(metrics, "illumination_map", "beta") == pytest.approx(10 / 12)
    assert value(metrics, "viewpoint_map", "beta") == pytest.approx(3 / 4)


def test_including_zeros(metrics: xr.Dataset) -> None:
    # R = 0 queries count as AP 0; missing queries (beta q8-q10) never count
    assert value(metrics, "true_map_micro_including_zeros", "alpha") == pytest.approx(
        (A_IA + A_VB) / (8 + 3)
    )
    assert value(metrics, "true_map_macro_by_scene_including_zeros", "alpha") == pytest.approx(
        (A_IA / 5 + A_VB / 6) / 2
    )
    assert value(metrics, "true_map_micro_including_zeros", "beta") == pytest.approx(29 / 48)
    assert value(metrics, "true_map_macro_by_scene_including_zeros", "beta") == pytest.approx(
        (B_IA / 5 + B_VB / 3) / 2  # (2/3 + 1/2) / 2 = 7/12
    )
    assert pytest.approx(7 / 12) == (B_IA / 5 + B_VB / 3) / 2
    # one scene per split here: the split means are the scene's own values
    assert value(metrics, "viewpoint_map_including_zeros", "beta") == pytest.approx(B_VB / 3)
    assert value(metrics, "illumination_map_including_zeros", "alpha") == pytest.approx(A_IA / 5)
    assert value(metrics, "viewpoint_map_micro", "beta") == pytest.approx(3 / 4)


def test_match_and_keypoint_counts(cube: xr.Dataset, metrics: xr.Dataset) -> None:
    # matches = mutual nearest neighbours per image pair: alpha 2 + 1 + 1 + 2, beta 2 + 1 + 1
    assert int(metrics.total_matches.sel(descriptor="alpha")) == 6
    assert int(metrics.total_matches.sel(descriptor="beta")) == 4
    # keypoints: n_candidates (50) of each image pair with a match: alpha 4 pairs, beta 3
    assert int(metrics.total_keypoints.sel(descriptor="alpha")) == 200
    assert int(metrics.total_keypoints.sel(descriptor="beta")) == 150
    assert int(metrics.total_matches.sel(descriptor="broken")) == 0
    assert metrics.total_matches.dtype == metrics.total_keypoints.dtype == np.int64
    # a matched pair without its keypoint count leaves the total unknown (-1)
    unknown = cube.copy(deep=True)
    unknown["n_candidates"][0, 8:] = -1
    assert int(metric_set(unknown).total_keypoints.sel(descriptor="alpha")) == -1
    # without nn_mutual / n_candidates both counts are unknown
    for name in ("nn_mutual", "n_candidates"):
        counts = metric_set(cube.drop_vars(name))
        assert counts.total_matches.values.tolist() == [-1, -1, 0]


def test_counts_and_r0_rate(metrics: xr.Dataset) -> None:
    assert int(metrics.total_queries_processed.sel(descriptor="alpha")) == 8
    assert int(metrics.total_queries_excluded.sel(descriptor="alpha")) == 3
    assert value(metrics, "r0_rate", "alpha") == pytest.approx(3 / 11)
    assert int(metrics.total_queries_processed.sel(descriptor="beta")) == 6
    assert int(metrics.total_queries_excluded.sel(descriptor="beta")) == 2
    assert value(metrics, "r0_rate", "beta") == pytest.approx(2 / 8)
    assert metrics.total_queries_processed.dtype == np.int64
    assert value(metrics, "processing_time_ms", "beta") == 250.0


def test_legacy_precision(metrics: xr.Dataset) -> None:
    # per pair: mean nn_correct over all the pair's queries (R = 0 included)
    # alpha: i_a 1-2 (q0 1, q1 0, q2 0) = 1/3; i_a 1-3 (q3 1, q4 0) = 1/2;
    #        v_b 1-2 (q5 1, q6 0, q7 0) = 1/3; v_b 1-3 (q8 0, q9 0, q10 1) = 1/3
    assert value(metrics, "mean_precision", "alpha") == pytest.approx(
        (1 / 3 + 1 / 2 + 1 / 3 + 1 / 3) / 4
    )
    assert value(metrics, "legacy_macro_precision_by_scene", "alpha") == pytest.approx(
        ((1 / 3 + 1 / 2) / 2 + (1 / 3 + 1 / 3) / 2) / 2
    )
    # beta: 2/3, 1/2, 1/3 and no v_b 1-3 pair: mean over 3 pairs != mean over 2 scenes
    assert value(metrics, "mean_precision", "beta") == pytest.approx((2 / 3 + 1 / 2 + 1 / 3) / 3)
    assert value(metrics, "legacy_macro_precision_by_scene", "beta") == pytest.approx(
        ((2 / 3 + 1 / 2) / 2 + 1 / 3) / 2  # 11/24
    )


def test_hit_rates_with_ties_expected_policy(metrics: xr.Dataset) -> None:
    # alpha R = 1 queries (better, ties): q0 (0,0) q1 (1,0) q3 (0,1) q4 (4,2) q5 (0,0) q7 (12,0)
    # q8 (2,0) q10 (0,3). Under "expected" a tied query hits @k with probability
    # clip(k - b, 0, t + 1) / (t + 1).
    at1 = (1 + 0 + 1 / 2 + 0 + 1 + 0 + 0 + 1 / 4) / 8
    at5 = (1 + 1 + 1 + 1 / 3 + 1 + 0 + 1 + 1) / 8  # q4: ranks 5, 6, 7 -> 1/3 within 5
    at10 = (1 + 1 + 1 + 1 + 1 + 0 + 1 + 1) / 8  # q7 at rank 13 misses
    for k, expected in ((1, at1), (5, at5), (10, at10)):
        assert value(metrics, f"hit_rate_at_{k}", "alpha") == pytest.approx(expected)
        assert value(metrics, f"recall_at_{k}", "alpha") == pytest.approx(expected)
        assert value(metrics, f"precision_at_{k}", "alpha") == pytest.approx(expected / k)
    # beta ranks 1, 1, 3, 1, 2, 1
    assert value(metrics, "hit_rate_at_1", "beta") == pytest.approx(4 / 6)
    assert value(metrics, "hit_rate_at_5", "beta") == pytest.approx(1.0)
    assert value(metrics, "precision_at_5", "beta") == pytest.approx(1 / 5)


def test_hit_rates_under_workbench_policy() -> None:
    # workbench rank 1 + b + floor((t + 1) / 2): q3 -> 2, q4 -> 6, q10 -> 3
    m = metric_set(make_cube(tie_policy="workbench"))
    assert m.attrs["tie_policy"] == "workbench"
    assert value(m, "hit_rate_at_1", "alpha") == pytest.approx(2 / 8)  # q0, q5
    assert value(m, "hit_rate_at_5", "alpha") == pytest.approx(6 / 8)  # not q4 (6), q7 (13)


def test_rank_histogram(metrics: xr.Dataset) -> None:
    hist = metrics.rank_histogram
    assert hist.dims == ("descriptor", "rank_bin")
    labels = ["1", "2", "3", "4", "5", "6-10", "11-20", "21-50", "51-100", ">100"]
    assert hist.rank_bin.values.tolist() == labels == [b[0] for b in RANK_BINS]
    # alpha under "expected": q0 -> 1; q1 -> 2; q3 -> 1/2 at 1 and 2; q4 -> 1/3 at 5 and 2/3 in
    # 6-10 (ranks 6, 7); q5 -> 1; q7 -> 11-20 (rank 13); q8 -> 3; q10 -> 1/4 at each of 1..4
    alpha = [
        1 + 1 / 2 + 1 + 1 / 4,
        1 + 1 / 2 + 1 / 4,
        1 + 1 / 4,
        1 / 4,
        1 / 3,
        2 / 3,
        1,
        0,
        0,
        0,
    ]
    np.testing.assert_allclose(hist.sel(descriptor="alpha").values, alpha)
    assert float(hist.sel(descriptor="alpha").sum()) == pytest.approx(8)
    np.testing.assert_allclose(hist.sel(descriptor="beta").values, [4, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    assert np.isnan(hist.sel(descriptor="broken").values).all()
    # cumulative counts / R=1 count = hit rates at the bin edges
    cumulative = hist.sel(descriptor="alpha").cumsum("rank_bin") / 8
    assert float(cumulative.sel(rank_bin="5")) == pytest.approx(
        value(metrics, "hit_rate_at_5", "alpha")
    )
    assert float(cumulative.sel(rank_bin="6-10")) == pytest.approx(
        value(metrics, "hit_rate_at_10", "alpha")
    )


def test_rank_histogram_pessimistic_and_beyond_100() -> None:
    cube = make_cube(tie_policy="pessimistic")
    cube["better"][0, 7] = 150  # alpha q7 now at rank 151
    m = metric_set(cube)
    # pessimistic ranks: q0 1, q1 2, q3 2, q4 7, q5 1, q7 151, q8 3, q10 4
    expected = [2, 2, 1, 1, 0, 1, 0, 0, 0, 1]
    np.testing.assert_array_equal(m.rank_histogram.sel(descriptor="alpha").values, expected)


def test_error_descriptor(metrics: xr.Dataset, scenes: xr.Dataset) -> None:
    broken = metrics.sel(descriptor="broken")
    for name, variable in broken.data_vars.items():
        if name in ("status", "error", "processing_time_ms"):
            continue
        if variable.dtype == np.int64:
            assert (variable.values == 0).all(), name
        else:
            assert np.isnan(variable.values).all(), name
    assert str(broken.status.values) == "error"
    assert str(broken.error.values) == "extraction failed: boom"
    assert float(broken.processing_time_ms) == 12.0
    assert np.isnan(scenes.true_map.sel(descriptor="broken")).all()
    assert (scenes.query_count.sel(descriptor="broken") == 0).all()


def test_error_status_masks_even_with_data(cube: xr.Dataset) -> None:
    failed = cube.copy()
    failed["status"] = ("descriptor", np.array(["error", "ok", "error"], dtype=object))
    m = metric_set(failed)
    assert np.isnan(value(m, "true_map_micro", "alpha"))
    assert int(m.total_queries_processed.sel(descriptor="alpha")) == 0
    assert np.isnan(value(m, "keypoint_verification_ap", "alpha"))
    assert value(m, "true_map_micro", "beta") == pytest.approx(29 / 36)


def test_bojanic_aggregations(metrics: xr.Dataset) -> None:
    # sequences i_a, v_b, v_d; verification alpha 0.9, 0.6, 0.3; retrieval 0.5, 0.4, NaN
    assert value(metrics, "keypoint_verification_ap", "alpha") == pytest.approx(
        (0.9 + 0.6 + 0.3) / 3
    )
    assert value(metrics, "verification_viewpoint_ap", "alpha") == pytest.approx((0.6 + 0.3) / 2)
    assert value(metrics, "verification_illumination_ap", "alpha") == pytest.approx(0.9)
    assert value(metrics, "keypoint_retrieval_ap", "alpha") == pytest.approx((0.5 + 0.4) / 2)
    assert value(metrics, "retrieval_viewpoint_ap", "alpha") == pytest.approx(0.4)
    assert value(metrics, "retrieval_illumination_ap", "alpha") == pytest.approx(0.5)
    assert value(metrics, "keypoint_retrieval_ap", "beta") == pytest.approx((0.7 + 0.1 + 0.4) / 3)
    assert value(metrics, "retrieval_viewpoint_ap", "beta") == pytest.approx((0.1 + 0.4) / 2)
    # the per-keypoint variants: alpha 0.8, NaN, 0.2 (verification) and 0.7, NaN, 0.3
    per_keypoint = {
        "keypoint_verification_ap_per_keypoint": ((0.8 + 0.2) / 2, (0.6 + 0.4 + 0.1) / 3),
        "verification_viewpoint_ap_per_keypoint": (0.2, (0.4 + 0.1) / 2),
        "verification_illumination_ap_per_keypoint": (0.8, 0.6),
        "keypoint_retrieval_ap_per_keypoint": ((0.7 + 0.3) / 2, (0.5 + 0.3 + 0.9) / 3),
        "retrieval_viewpoint_ap_per_keypoint": (0.3, (0.3 + 0.9) / 2),
        "retrieval_illumination_ap_per_keypoint": (0.7, 0.5),
    }
    for name, (alpha, beta) in per_keypoint.items():
        assert value(metrics, name, "alpha") == pytest.approx(alpha)
        assert value(metrics, name, "beta") == pytest.approx(beta)
    sums = {
        "retrieval_num_true_positives": (10 + 20 + 30, 1 + 2 + 3),
        "retrieval_num_hard_negatives": (100 + 200 + 300, 4 + 5 + 6),
        "retrieval_num_distractors": (5 + 5 + 5, 7 + 8 + 9),
    }
    for name, (alpha, beta) in sums.items():
        assert metrics[name].dtype == np.int64
        assert metrics[name].sel(descriptor=["alpha", "beta"]).values.tolist() == [alpha, beta]


def test_without_sequence_dim_bojanic_is_nan() -> None:
    m = metric_set(make_cube(bojanic=False))
    for name in (
        "keypoint_verification_ap",
        "retrieval_viewpoint_ap",
        "keypoint_retrieval_ap_per_keypoint",
    ):
        assert np.isnan(m[name].values).all()
    assert (m.retrieval_num_distractors.values == 0).all()
    assert value(m, "true_map_micro", "beta") == pytest.approx(29 / 36)


def test_dataset_shape_and_attrs(metrics: xr.Dataset, cube: xr.Dataset) -> None:
    splits = ("viewpoint", "illumination")
    names = ["mean_precision", "legacy_macro_precision_by_scene", "true_map_micro"]
    names += ["true_map_macro_by_scene", "true_map_micro_including_zeros", "image_retrieval_map"]
    names += ["true_map_macro_by_scene_including_zeros"]
    names += [f"{s}_map{x}" for s in splits for x in ("", "_micro", "_including_zeros")]
    names += [f"{p}_at_{k}" for p in ("hit_rate", "recall", "precision") for k in (1, 5, 10)]
    names += ["total_queries_processed", "total_queries_excluded", "r0_rate", "processing_time_ms"]
    names += ["total_matches", "total_keypoints", "rank_histogram", "status", "error"]
    names += [
        f"{ap}{x}"
        for task in ("verification", "retrieval")
        for ap in (f"keypoint_{task}_ap", *(f"{task}_{s}_ap" for s in splits))
        for x in ("", "_per_keypoint")
    ]
    names += [f"retrieval_num_{c}" for c in ("true_positives", "hard_negatives", "distractors")]
    assert len(names) == len(set(names)) == 46
    assert sorted(metrics.data_vars) == sorted(names)
    assert set(metrics.coords) == {"descriptor", "rank_bin"}
    for name in names:
        if name != "rank_histogram":
            assert metrics[name].dims == ("descriptor",), name
    for key, attr in cube.attrs.items():
        assert metrics.attrs[key] == attr
    assert metrics.attrs["k"] == [1, 5, 10]
    two = metric_set(cube, k=[2])
    assert value(two, "hit_rate_at_2", "beta") == pytest.approx(5 / 6)
    assert "hit_rate_at_1" not in two and two.attrs["k"] == [2]


def test_lazy_cube_stays_lazy_and_matches(cube: xr.Dataset, metrics: xr.Dataset) -> None:
    lazy_cube = cube.chunk({"query": 3})
    lazy = metric_set(lazy_cube)
    for name, variable in lazy.data_vars.items():
        if variable.dtype.kind in "if":
            assert variable.chunks is not None, f"{name} was computed eagerly"
    xr.testing.assert_allclose(lazy.compute(), metrics)
    lazy_scenes = scene_metrics(lazy_cube)
    assert lazy_scenes.image_count.chunks is not None
    xr.testing.assert_allclose(lazy_scenes.compute(), scene_metrics(cube))
    lazy_mma = matching_accuracy(lazy_cube, [1, 3])
    assert lazy_mma.chunks is not None
    xr.testing.assert_allclose(lazy_mma.compute(), matching_accuracy(cube, [1, 3]))
    for convention in ("d2net", "matched_pairs"):
        lazy_split = matching_accuracy(lazy_cube, [1, 3], convention=convention, by_split=True)
        assert lazy_split.chunks is not None
        xr.testing.assert_allclose(
            lazy_split.compute(),
            matching_accuracy(cube, [1, 3], convention=convention, by_split=True),
        )
    lazy_counts = matching_counts(lazy_cube)
    assert lazy_counts.matches_per_pair.chunks is not None
    xr.testing.assert_allclose(lazy_counts.compute(), matching_counts(cube))


def test_scene_metrics(scenes: xr.Dataset) -> None:
    assert scenes.true_map.dims == ("descriptor", "scene")
    assert scenes.scene.values.tolist() == ["i_a", "v_b"]
    a = scenes.sel(descriptor="alpha")
    np.testing.assert_allclose(a.true_map.values, [A_IA / 4, A_VB / 4])
    np.testing.assert_allclose(a.true_map_with_zeros.values, [A_IA / 5, A_VB / 6])
    assert a.query_count.values.tolist() == [4, 4]
    assert a.excluded_count.values.tolist() == [1, 2]
    assert a.image_count.values.tolist() == [3, 3]  # images 1, 2, 3
    np.testing.assert_allclose(a.mean_precision.values, [(1 / 3 + 1 / 2) / 2, 1 / 3])
    b = scenes.sel(descriptor="beta")
    np.testing.assert_allclose(b.true_map.values, [10 / 12, 3 / 4])
    np.testing.assert_allclose(b.true_map_with_zeros.values, [2 / 3, 1 / 2])
    assert b.query_count.values.tolist() == [4, 2]
    assert b.excluded_count.values.tolist() == [1, 1]
    assert b.image_count.values.tolist() == [3, 2]  # v_b: only pair 1-2 -> images 1, 2
    np.testing.assert_allclose(b.mean_precision.values, [(2 / 3 + 1 / 2) / 2, 1 / 3])
    assert scenes.query_count.dtype == np.int64


# ---- matching accuracy and the ratio-test PR curve -----------------------------------------


def test_matching_accuracy_matched_pairs_by_hand(cube: xr.Dataset) -> None:
    mma = matching_accuracy(cube, [1, 3, 5, 10], convention="matched_pairs")
    assert mma.dims == ("descriptor", "threshold") and mma.name == "mma"
    # alpha matches (finite nn_error) per pair: i_a 1-2 {0.5, 2.5, 7.0}; i_a 1-3 {1.0, 4.0};
    # v_b 1-2 {1.5, 9.0} (q6 NaN); v_b 1-3 {3.0, 12.0, 0.8}; thresholds inclusive
    alpha = [
        (1 / 3 + 1 / 2 + 0 + 1 / 3) / 4,
        (2 / 3 + 1 / 2 + 1 / 2 + 2 / 3) / 4,
        (2 / 3 + 1 + 1 / 2 + 2 / 3) / 4,
        (1 + 1 + 1 + 2 / 3) / 4,
    ]
    np.testing.assert_allclose(mma.sel(descriptor="alpha").values, alpha)
    # beta: i_a 1-2 {0.3, 1.2, 5.0}; i_a 1-3 {6.0, 2.0}; v_b 1-2 {3.5, 0.9}; v_b 1-3 no match
    beta = [(1 / 3 + 0 + 1 / 2) / 3, (2 / 3 + 1 / 2 + 1 / 2) / 3, (1 + 1 / 2 + 1) / 3, 1.0]
    np.testing.assert_allclose(mma.sel(descriptor="beta").values, beta)
    assert np.isnan(mma.sel(descriptor="broken").values).all()


def test_matching_accuracy_matched_pairs_mutual(cube: xr.Dataset) -> None:
    mma = matching_accuracy(cube, [1, 3, 10], convention="matched_pairs", mutual=True)
    # alpha mutual matches: i_a 1-2 {0.5, 7.0}; i_a 1-3 {1.0}; v_b 1-2 {1.5}; v_b 1-3 {3.0, 0.8}
    alpha = [(1 / 2 + 1 + 0 + 1 / 2) / 4, (1 / 2 + 1 + 1 + 1) / 4, 1.0]
    np.testing.assert_allclose(mma.sel(descriptor="alpha").values, alpha)
    assert mma.attrs["mutual"] == 1


def test_matching_accuracy_d2net_by_hand(cube: xr.Dataset) -> None:
    mma = matching_accuracy(cube, [1, 3, 5, 10])  # convention="d2net" is the default
    assert mma.dims == ("descriptor", "threshold") and mma.name == "mma"
    assert mma.attrs["convention"] == "d2net" and mma.attrs["mutual"] == 1
    assert mma.attrs["n_pairs"] == 4
    # alpha mutual matches: i_a 1-2 {0.5, 7.0}; i_a 1-3 {1.0}; v_b 1-2 {1.5}; v_b 1-3 {3.0, 0.8};
    # the non-mutual ones (2.5, 4.0, 9.0, 12.0 and q6) are dropped
    alpha = [(1 / 2 + 1 + 0 + 1 / 2) / 4, (1 / 2 + 1 + 1 + 1) / 4, 3.5 / 4, 1.0]
    np.testing.assert_allclose(mma.sel(descriptor="alpha").values, alpha, rtol=0, atol=1e-15)
    # beta: i_a 1-2 {0.3, 1.2}; i_a 1-3 {2.0}; v_b 1-2 {3.5}; v_b 1-3 has no query for beta:
    # it counts 0 (every pair of the cube counts), it is not left out
    beta = [(1 / 2) / 4, (1 + 1) / 4, (1 + 1 + 1) / 4, 3 / 4]
    np.testing.assert_allclose(mma.sel(descriptor="beta").values, beta, rtol=0, atol=1e-15)
    assert np.isnan(mma.sel(descriptor="broken").values).all()


def test_matching_accuracy_d2net_by_split(cube: xr.Dataset) -> None:
    mma = matching_accuracy(cube, [1, 3], by_split=True)
    assert mma.dims == ("descriptor", "split", "threshold")
    assert mma.split.values.tolist() == ["overall", "illumination", "viewpoint"]
    assert mma.n_pairs.values.tolist() == [4, 2, 2]
    a = mma.sel(descriptor="alpha")
    np.testing.assert_allclose(a.sel(split="illumination").values, [(1 / 2 + 1) / 2] * 2)
    np.testing.assert_allclose(a.sel(split="viewpoint").values, [(0 + 1 / 2) / 2, 1.0])
    b = mma.sel(descriptor="beta")
    np.testing.assert_allclose(b.sel(split="illumination").values, [1 / 4, 1.0])
    np.testing.assert_allclose(b.sel(split="viewpoint").values, [0.0, 0.0])
    overall = matching_accuracy(cube, [1, 3])
    xr.testing.assert_identical(
        mma.sel(split="overall", drop=True).assign_attrs(n_pairs=4), overall
    )


def test_matching_accuracy_d2net_sequences_fix_the_pairs(cube: xr.Dataset) -> None:
    # a listed sequence has 5 pairs (1-2 .. 1-6), present in the cube or not; others are left out
    mma = matching_accuracy(cube, [1, 3], sequences=["i_a"], by_split=True)
    assert mma.n_pairs.values.tolist() == [5, 5, 0]
    np.testing.assert_allclose(
        mma.sel(descriptor="alpha", split="overall").values, [(1 / 2 + 1) / 5] * 2
    )
    assert np.isnan(mma.sel(split="viewpoint").values).all()  # no viewpoint pair: undefined
    assert mma.attrs["sequences"] == "1 listed"
    with pytest.raises(InvalidInputError, match=r"missing from the cube.*: v_zz"):
        matching_accuracy(cube, sequences=["i_a", "v_zz"])
    with pytest.raises(InvalidInputError, match=r"'d2net': 108 of its 108 sequences are missing"):
        matching_accuracy(cube, sequences="d2net")
    with pytest.raises(InvalidInputError, match="unknown split 'hpatches'"):
        matching_accuracy(cube, sequences="hpatches")


def test_matching_accuracy_d2net_pair_without_matches_and_undefined_errors() -> None:
    one = make_cube().isel(descriptor=[0])
    # pair i_a 1-3 loses its mutual match; q0 (i_a 1-2, mutual) gets an undefined error
    mutual = one["nn_mutual"].values.copy()
    mutual[0, 3] = 0
    error = one["nn_error"].values.copy()
    error[0, 0] = np.nan
    changed = one.assign(
        nn_mutual=(("descriptor", "query"), mutual), nn_error=(("descriptor", "query"), error)
    )
    mma = matching_accuracy(changed, [1, 10])
    # i_a 1-2 {nan, 7.0}: 0 and 1/2; i_a 1-3: no match -> 0; v_b 1-2 {1.5}; v_b 1-3 {3.0, 0.8}
    np.testing.assert_allclose(mma.values[0], [(0 + 0 + 0 + 1 / 2) / 4, (1 / 2 + 0 + 1 + 1) / 4])
    old = matching_accuracy(changed, [1, 10], convention="matched_pairs", mutual=True)
    # the old convention drops the NaN match and the pair without matches
    np.testing.assert_allclose(old.values[0], [(0 + 0 + 1 / 2) / 3, 1.0])


def test_matching_accuracy_convention_checks(cube: xr.Dataset) -> None:
    with pytest.raises(InvalidInputError, match="convention must be one of"):
        matching_accuracy(cube, convention="D2-Net")
    with pytest.raises(InvalidInputError, match="mutual=False"):
        matching_accuracy(cube, mutual=False)


def test_matching_counts_by_hand(cube: xr.Dataset) -> None:
    counts = matching_counts(cube)
    # mutual matches per pair: alpha 2, 1, 1, 2; beta 2, 1, 1, 0 (pairs i_a 1-2, 1-3, v_b ...)
    np.testing.assert_allclose(counts.matches_per_pair.sel(descriptor="alpha"), [1.5, 1.5, 1.5])
    np.testing.assert_allclose(counts.matches_per_pair.sel(descriptor="beta"), [1.0, 1.5, 0.5])
    # keypoints: image 1 of i_a and v_b (3 queries each), image k: n_candidates 50 per pair
    # with queries (alpha 4 pairs, beta 3)
    np.testing.assert_allclose(counts.keypoints_mean.values[:2], [206 / 6, 156 / 5])
    assert counts.keypoints_min.values[:2].tolist() == [3, 3]
    assert counts.keypoints_max.values[:2].tolist() == [50, 50]
    assert counts.matches_per_pair.sel(descriptor="broken").isnull().all()
    assert counts.n_pairs.values.tolist() == [4, 2, 2]


def test_matching_accuracy_default_thresholds(cube: xr.Dataset) -> None:
    mma = matching_accuracy(cube)
    assert mma.threshold.values.tolist() == list(range(1, 11))
    with pytest.raises(InvalidInputError, match="thresholds"):
        matching_accuracy(cube, [])
    with pytest.raises(InvalidInputError, match="thresholds"):
        matching_accuracy(cube, [1, np.inf])


def test_matching_pr_curve_by_hand(cube: xr.Dataset) -> None:
    pr = matching_pr_curve(cube)
    assert pr.precision.dims == ("descriptor", "threshold")
    # alpha ratios nn/nn2 (undefined -> 1): q0 .25 ok, q1 .8, q2 .5, q3 1 ok (nn = nn2), q4 1,
    # q5 .1 ok, q6 1 (nn2 NaN), q7 .75, q8 .5, q9 1 (nn2 = 0), q10 1 ok
    # thresholds (score -ratio, decreasing): .1, .25, .5, .75, .8, 1
    a = pr.sel(descriptor="alpha")
    np.testing.assert_allclose(a.ratio.values, [0.1, 0.25, 0.5, 0.75, 0.8, 1.0])
    np.testing.assert_allclose(a.cutoff.values, [-0.1, -0.25, -0.5, -0.75, -0.8, -1.0])
    assert a.tp.values.tolist() == [1, 2, 2, 2, 2, 4]
    assert a.fp.values.tolist() == [0, 0, 2, 3, 4, 7]  # 11 present queries, 4 correct
    np.testing.assert_allclose(a.precision.values, [1, 1, 2 / 4, 2 / 5, 2 / 6, 4 / 11])
    np.testing.assert_allclose(a.recall.values, np.array([1, 2, 2, 2, 2, 4]) / 8)  # 8 with R=1
    # beta over its 8 present queries: .2 ok, .5 ok, .5, .5, .1 ok, 1 (nn = nn2), 1 (NaN), .25 ok
    # 5 distinct scores: padded to 6 by repeating the final point with cutoff NaN
    b = pr.sel(descriptor="beta")
    assert b.tp.values.tolist() == [1, 2, 3, 4, 4, 4]
    assert b.fp.values.tolist() == [0, 0, 0, 2, 4, 4]
    np.testing.assert_allclose(b.ratio.values, [0.1, 0.2, 0.25, 0.5, 1.0, NAN])
    np.testing.assert_allclose(b.precision.values, [1, 1, 1, 4 / 6, 4 / 8, 4 / 8])
    np.testing.assert_allclose(b.recall.values, np.array([1, 2, 3, 4, 4, 4]) / 6)
    assert pr.n_matchable.values.tolist() == [8, 6, 0]
    assert np.isnan(pr.precision.sel(descriptor="broken").values).all()


def test_matching_pr_precision_matches_sklearn(cube: xr.Dataset) -> None:
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    pr = matching_pr_curve(cube).sel(descriptor="alpha")
    y_true = np.array(ALPHA["nn_correct"]) == 1
    nn, nn2 = np.array(ALPHA["nn_distance"]), np.array(ALPHA["nn2_distance"])
    ratio = np.ones_like(nn)
    ok = np.isfinite(nn2) & (nn2 > 0)
    ratio[ok] = nn[ok] / nn2[ok]
    precision, _, thresholds = sklearn_metrics.precision_recall_curve(y_true, -ratio)
    # sklearn: increasing thresholds, a final (1, 0) point
    np.testing.assert_allclose(pr.precision.values, precision[:-1][::-1])
    np.testing.assert_allclose(pr.cutoff.values, thresholds[::-1])


# ---- metadata strings -----------------------------------------------------------------------


def test_format_metadata_example() -> None:
    text = format_metadata(
        {
            "v_wall_true_map": 0.247843,
            "precision_at_10": 0.289804,
            "precision_at_5": 0.24975,
            "success": True,
            "total_queries_processed": 101938,
            "experiment_name": "sift_baseline",
            "compute_time_ms": 2792.0,
            "ratio": np.float32(0.5),
            "count": np.int64(3),
        }
    )
    assert text == (
        "compute_time_ms=2792.000000;count=3;experiment_name=sift_baseline;"
        "precision_at_10=0.289804;precision_at_5=0.249750;ratio=0.500000;success=true;"
        "total_queries_processed=101938;v_wall_true_map=0.247843;"
    )
    assert format_metadata({}) == "" and parse_metadata("") == {}


def test_parse_metadata_types() -> None:
    parsed = parse_metadata("a=1;b=-2;c=0.500000;d=true;e=false;f=name_1;g=nan;h=-inf;i=007;j=")
    assert parsed["a"] == 1 and type(parsed["a"]) is int
    assert parsed["b"] == -2
    assert parsed["c"] == 0.5 and type(parsed["c"]) is float
    assert parsed["d"] is True and parsed["e"] is False
    assert parsed["f"] == "name_1"
    assert math.isnan(parsed["g"]) and parsed["h"] == -math.inf
    assert parsed["i"] == "007"  # not an int as written: kept as the string
    assert parsed["j"] == ""
    assert format_metadata({"x": float("nan")}) == "x=nan;"


@pytest.mark.parametrize(
    "values, message",
    [
        ({"name": "a;b"}, "contains ';' or '='"),
        ({"name": "a=b"}, "contains ';' or '='"),
        ({"a;b": 1}, "key"),
        ({"": 1}, "key"),
        ({3: 1}, "key"),
        ({"name": "12"}, "would read back as int"),
        ({"name": "0.5"}, "would read back as float"),
        ({"name": "true"}, "would read back as bool"),
        ({"name": None}, "type NoneType"),
    ],
)
def test_format_metadata_refuses(values: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        format_metadata(values)


@pytest.mark.parametrize(
    "text, message",
    [
        ("a=1;;b=2;", "pair 2"),
        ("a=1;b;", "pair 2"),
        ("=1;", "pair 1"),
        ("a=1=2;", "pair 1"),
        ("a=1;a=2;", "occurs twice"),
    ],
)
def test_parse_metadata_refuses(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_metadata(text)


KEYS = st.text(st.characters(blacklist_characters=";=", blacklist_categories=("Cs",)), min_size=1)
STRINGS = st.text(st.characters(blacklist_characters=";=", blacklist_categories=("Cs",))).filter(
    lambda s: isinstance(parse_metadata(f"k={s};")["k"], str)
)
VALUES = st.one_of(
    st.integers(),
    st.booleans(),
    STRINGS,
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: round(v, 6)),
    st.floats(min_value=-1e6, max_value=1e6).map(lambda v: round(v, 6)),
)


@given(st.dictionaries(KEYS, VALUES, max_size=12))
def test_metadata_round_trip_property(values: dict) -> None:
    text = format_metadata(values)
    parsed = parse_metadata(text)
    assert parsed == values
    assert [type(v) for v in parsed.values()] == [type(values[k]) for k in parsed]
    assert list(parsed) == sorted(values)
    assert text == "" or text.endswith(";")


def real_metadata() -> pd.Series:
    path = DATA / "descriptor_performance_analysis.csv"
    if not path.exists():
        pytest.skip(f"real DescriptorWorkbench export not available at {path}")
    return pd.read_csv(path)["metadata"]


def test_real_export_round_trip() -> None:
    # experiment_summary_full.csv has no metadata column; the metadata strings of the export
    # are in descriptor_performance_analysis.csv
    summary = DATA / "experiment_summary_full.csv"
    if summary.exists():
        assert "metadata" not in pd.read_csv(summary).columns
    texts = real_metadata()
    assert len(texts) == 42 and texts.notna().all()
    for text in texts:
        parsed = parse_metadata(text)
        assert format_metadata(parsed) == text
        assert list(parsed) == sorted(parsed)  # sorted by key, byte order
        assert isinstance(parsed["success"], bool)
        assert isinstance(parsed["total_queries_processed"], int)
        assert isinstance(parsed["compute_time_ms"], float)  # "2792.000000": a float


def test_real_export_relations_match_our_definitions() -> None:
    """The export obeys the definitions implemented here: query_count counts R = 1 queries,
    r0_rate = excluded / (processed + excluded), true_map_with_zeros = true_map x R1 / (R1 + R0),
    the per-scene counts sum to the totals."""
    for text in real_metadata():
        meta = parse_metadata(text)
        scenes = sorted(k.removesuffix("_query_count") for k in meta if k.endswith("_query_count"))
        processed = sum(meta[f"{s}_query_count"] for s in scenes)
        excluded = sum(meta[f"{s}_excluded_count"] for s in scenes)
        assert processed == meta["total_queries_processed"]
        assert excluded == meta["total_queries_excluded"]
        assert meta["r0_rate"] == pytest.approx(excluded / (processed + excluded), abs=5e-7)
        for s in scenes:
            q, e = meta[f"{s}_query_count"], meta[f"{s}_excluded_count"]
            assert meta[f"{s}_true_map_with_zeros"] == pytest.approx(
                meta[f"{s}_true_map"] * q / (q + e), abs=1e-6
            )
        assert meta["recall_at_5"] == meta["precision_at_5"]


def test_metadata_for(metrics: xr.Dataset, scenes: xr.Dataset) -> None:
    meta = metadata_for(metrics, scenes, "beta")
    assert meta["metricalc_true_map_micro"] == pytest.approx(29 / 36)
    assert meta["metricalc_true_map_macro_by_scene"] == pytest.approx(19 / 24)
    assert meta["precision_at_1"] == pytest.approx(4 / 6) == meta["recall_at_1"]
    assert meta["r0_rate"] == pytest.approx(0.25)
    assert meta["total_queries_processed"] == 6 and type(meta["total_queries_processed"]) is int
    assert meta["total_queries_excluded"] == 2
    assert meta["metricalc_processing_time_ms"] == 250.0
    assert meta["v_b_query_count"] == 2 and meta["v_b_excluded_count"] == 1
    assert meta["i_a_true_map"] == pytest.approx(10 / 12)
    assert meta["v_b_true_map_with_zeros"] == pytest.approx(1 / 2)
    expected_keys = {
        "metricalc_true_map_micro",
        "metricalc_true_map_macro_by_scene",
        *(f"{p}_at_{k}" for p in ("precision", "recall") for k in (1, 5, 10)),
        "r0_rate",
        "total_queries_processed",
        "total_queries_excluded",
        "metricalc_processing_time_ms",
        *(
            f"{s}_{key}"
            for s in ("i_a", "v_b")
            for key in ("true_map", "true_map_with_zeros", "query_count", "excluded_count")
        ),
    }
    assert set(meta) == expected_keys
    text = format_metadata(meta)
    assert "v_b_query_count=2;" in text and "total_queries_processed=6;" in text
    assert parse_metadata(text)["r0_rate"] == 0.25


def test_metadata_keys_follow_real_export(metrics: xr.Dataset, scenes: xr.Dataset) -> None:
    real = parse_metadata(real_metadata().iloc[0])
    ours = metadata_for(metrics, scenes, "alpha")
    suffix = re.compile(r"^[iv]_[a-z]+_")
    real_scene_keys = {suffix.sub("<scene>_", k) for k in real if suffix.match(k)}
    our_scene_keys = {k.replace("i_a_", "<scene>_").replace("v_b_", "<scene>_") for k in ours}
    assert {k for k in our_scene_keys if k.startswith("<scene>_")} == real_scene_keys
    shared = {f"{p}_at_{k}" for p in ("precision", "recall") for k in (1, 5, 10)}
    shared |= {"r0_rate", "total_queries_processed", "total_queries_excluded"}
    assert shared <= set(real) and shared <= set(ours)
    for key in shared:  # same value types as the export
        assert type(ours[key]) is type(real[key])


def test_metadata_for_error_descriptor(metrics: xr.Dataset, scenes: xr.Dataset) -> None:
    meta = metadata_for(metrics, scenes, "broken")
    assert math.isnan(meta["metricalc_true_map_micro"]) and meta["total_queries_processed"] == 0
    assert not any(k.endswith("_query_count") for k in meta)  # no scene with queries
    assert "metricalc_true_map_micro=nan;" in format_metadata(meta)
    with pytest.raises(InvalidInputError, match="'nope' is not in metrics"):
        metadata_for(metrics, scenes, "nope")


# ---- validation -----------------------------------------------------------------------------


def test_invalid_cubes(cube: xr.Dataset) -> None:
    with pytest.raises(InvalidInputError, match=r"must be an xarray\.Dataset"):
        metric_set(cube["ap"])
    with pytest.raises(InvalidInputError, match=r"lacks the variable\(s\) \['ties'\]"):
        metric_set(cube.drop_vars("ties"))
    with pytest.raises(InvalidInputError, match="coordinate 'split'"):
        metric_set(cube.drop_vars("split"))
    with pytest.raises(InvalidInputError, match="tie_policy"):
        metric_set(cube.assign_attrs(tie_policy="random"))
    with pytest.raises(InvalidInputError, match="k must be"):
        metric_set(cube, k=[0])
    with pytest.raises(InvalidInputError, match="k must be"):
        metric_set(cube, k=[True])
    with pytest.raises(InvalidInputError, match=r"lacks .*retrieval_ap"):
        metric_set(cube.drop_vars("retrieval_ap"))
    with pytest.raises(InvalidInputError, match=r"lacks .*verification_ap_per_keypoint"):
        metric_set(cube.drop_vars("verification_ap_per_keypoint"))
    with pytest.raises(InvalidInputError, match="nn_mutual"):
        matching_accuracy(cube.drop_vars("nn_mutual"), convention="matched_pairs", mutual=True)
    with pytest.raises(InvalidInputError, match="nn_mutual"):
        matching_accuracy(cube.drop_vars("nn_mutual"))  # the d2net default matches mutually
    bad_pairs = cube.assign_coords(pair=("query", np.array(["12"] * 11, dtype=object)))
    with pytest.raises(InvalidInputError, match="'12'"):
        scene_metrics(bad_pairs)


def test_exported_from_package() -> None:
    # the metric set builds on the core functions, which stay public
    assert mc.hit_rate_at_k is not None and mc.counts_at_thresholds is not None


def test_cube_without_queries() -> None:
    # every descriptor failed: no query at all; metrics NaN, counts 0, nothing raises
    empty = make_cube().isel(query=slice(0, 0))
    m = metric_set(empty)
    assert np.isnan(m.true_map_micro.values).all() and np.isnan(m.hit_rate_at_1.values).all()
    assert (m.total_queries_processed.values == 0).all()
    assert scene_metrics(empty).sizes == {"descriptor": 3, "scene": 0}
    assert np.isnan(matching_accuracy(empty, [1]).values).all()
    assert np.isnan(matching_accuracy(empty, [1], convention="matched_pairs").values).all()
    assert np.isnan(matching_counts(empty).keypoints_mean.values).all()
    assert matching_pr_curve(empty).sizes["threshold"] == 0


def test_metadata_for_round_trips_through_the_metadata_string():
    from metricalc.keypoints import Features, evaluate
    from tests.shared_checks import IdentityScene

    rng = np.random.default_rng(3)
    points = rng.uniform(45, 155, (30, 2))
    images = {k: Features(points, rng.random((30, 8)).astype(np.float32)) for k in range(1, 7)}
    scene = IdentityScene("v_x", "viewpoint")
    cube = evaluate([scene], {"d": {"v_x": images}}, keypoints="external", bojanic=False)
    values = metadata_for(mc.metric_set(cube), mc.scene_metrics(cube), "d")
    assert 0 < values["metricalc_true_map_micro"] < 1  # random descriptors: a real, unrounded mean
    assert mc.parse_metadata(mc.format_metadata(values)) == values


def test_rank_histogram_skips_queries_without_rank_statistics():
    table = pd.DataFrame(
        {"descriptor": ["d"] * 3, "scene": ["i_a"] * 3, "query": [0, 1, 2], "ap": [1.0, 0.5, 0.25]}
    )
    cube = mc.cube.from_dataframe(table)
    histogram = mc.metric_set(cube)["rank_histogram"].sel(descriptor="d")
    assert float(histogram.sum()) == 0.0  # AP-only queries have no rank to bin
    assert float(mc.metric_set(cube).true_map_micro.sel(descriptor="d")) == pytest.approx(1.75 / 3)


def test_zero_division_fills_empty_means_only() -> None:
    """A descriptor whose queries all have R = 0: its mAPs are empty means (NaN); with
    zero_division=0 they are DescriptorWorkbench's 0.0, "warn" warns, a failed descriptor stays
    NaN and a defined value is untouched."""
    cube = make_cube(bojanic=False)
    cube["n_relevant"][1] = np.where(cube["n_relevant"][1] == 1, 0, cube["n_relevant"][1])
    default = metric_set(cube)
    assert math.isnan(value(default, "true_map_micro", "beta"))
    assert math.isnan(value(default, "viewpoint_map", "beta"))
    zero = metric_set(cube, zero_division=0)
    for name in ("true_map_micro", "true_map_macro_by_scene", "viewpoint_map", "hit_rate_at_1"):
        assert value(zero, name, "beta") == 0.0, name
        assert math.isnan(value(zero, name, "broken")), name
        assert value(zero, name, "alpha") == value(default, name, "alpha"), name
    assert value(zero, "viewpoint_map_including_zeros", "beta") == 0.0  # defined: 0 / 3
    assert math.isnan(value(zero, "image_retrieval_map", "beta"))  # DW's -1 sentinel, not a mean
    with pytest.warns(mc.UndefinedMetricWarning) as record:
        warned = metric_set(cube, zero_division="warn")
    messages = [str(w.message) for w in record]
    assert any(m.startswith("metric_set: true_map_micro is undefined") for m in messages)
    assert value(warned, "true_map_micro", "beta") == 0.0
    with pytest.raises(InvalidInputError, match="zero_division"):
        metric_set(cube, zero_division=0.5)


@pytest.mark.parametrize("seed", range(12))
def test_group_sum_equals_xarray_groupby(seed):
    """The bincount group sum against ``groupby(key).sum()`` on random labels, dtypes, NaN and
    extra dims, eager and dask-backed."""
    from metricalc.metrics.reductions import group_sum

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    labels = np.array(["v_b", "i_a", "v_a", "i_c/1-2", ""])[rng.integers(0, 5, n)]
    shape = (int(rng.integers(1, 4)), int(rng.integers(1, 3)), n)
    kind = ["float", "float32", "int", "bool"][seed % 4]
    data = {
        "float": rng.normal(size=shape),
        "float32": rng.normal(size=shape).astype(np.float32),
        "int": rng.integers(-5, 100, shape),
        "bool": rng.random(shape) < 0.4,
    }[kind]
    if kind.startswith("float"):
        data[rng.random(shape) < 0.2] = np.nan
    values = xr.DataArray(
        data,
        dims=("descriptor", "other", "query"),
        coords={"descriptor": [f"d{i}" for i in range(shape[0])], "scene": ("query", labels),
                "x": ("query", rng.random(n))},
    )  # fmt: skip
    expected = values.groupby("scene").sum()
    got = group_sum(values, "scene")
    assert got.dims == expected.dims and got.dtype == expected.dtype
    assert got["scene"].values.tolist() == expected["scene"].values.tolist()
    np.testing.assert_allclose(got.values, expected.values, rtol=1e-6)
    import dask.array as da

    lazy = values.copy(data=da.from_array(values.values, chunks=(1, 1, 50)))  # labels in memory
    assert lazy.chunks is not None
    xr.testing.assert_allclose(group_sum(lazy, "scene").load(), expected)
