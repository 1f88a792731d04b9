"""Homography estimation and the Glue Factory HPatches metrics (docs/protocols.md, protocol 7)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from auc_ports import recall_auc_port
from skimage.transform import ProjectiveTransform

from metricalc.errors import InvalidInputError
from metricalc.keypoints import dlt as dlt_module
from metricalc.keypoints import estimators
from metricalc.keypoints import homography as hg


def _map(H: np.ndarray, points: np.ndarray) -> np.ndarray:
    h = np.c_[points, np.ones(len(points))] @ H.T
    return h[:, :2] / h[:, 2:]


def _random_homography(rng: np.random.Generator) -> np.ndarray:
    H = np.eye(3)
    H[:2, :2] += rng.normal(scale=0.1, size=(2, 2))
    H[:2, 2] = rng.uniform(-30, 30, 2)
    H[2, :2] = rng.normal(scale=2e-4, size=2)
    return H


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


def test_corner_error_of_the_exact_homography_is_zero():
    rng = np.random.default_rng(0)
    for _ in range(20):
        H = _random_homography(rng)
        assert hg.corner_error(H, H, (480, 640)) == 0.0
        assert hg.corner_error(3.5 * H, H, (480, 640)) < 1e-9  # scale does not matter


def test_corner_error_of_a_translation_is_its_length():
    rng = np.random.default_rng(1)
    for _ in range(20):
        H = _random_homography(rng)
        d = rng.normal(scale=5, size=2)
        shifted = np.array([[1, 0, d[0]], [0, 1, d[1]], [0, 0, 1.0]]) @ H
        assert hg.corner_error(shifted, H, (300, 400)) == pytest.approx(np.hypot(*d), abs=1e-9)


def test_corner_error_of_a_scaling_by_hand():
    # identity truth, estimate scales by 2 about the origin: each corner moves by its own length
    corners = [(-0.5, -0.5), (4.5, -0.5), (4.5, 2.5), (-0.5, 2.5)]  # a 3 x 5 image
    expected = np.mean([math.hypot(x, y) for x, y in corners])
    estimate = np.diag([2.0, 2.0, 1.0])
    assert hg.corner_error(estimate, np.eye(3), (3, 5)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "estimate",
    [
        None,
        np.full((3, 3), np.nan),
        np.zeros((3, 3)),
        np.array([[1, 2, 0], [2, 4, 0], [0, 0, 1.0]]),
    ],
)
def test_corner_error_of_a_failed_estimate_is_inf(estimate):
    assert hg.corner_error(estimate, np.eye(3), (100, 100)) == math.inf


def test_symmetric_error_by_hand_and_strict_precision():
    H = np.array([[1.0, 0, 10], [0, 1, -4], [0, 0, 1]])
    p0 = np.array([[0.0, 0], [20, 20], [30, 30], [40, 40]])
    offsets = np.array([[0.0, 0], [1, 0], [0, 2.9], [3, 4]])  # errors 0, 1, 2.9, 5
    p1 = _map(H, p0) + offsets
    np.testing.assert_allclose(hg.symmetric_error(p0, p1, H), [0, 1, 2.9, 5], atol=1e-12)
    m = hg.pair_homography_metrics(p0, p1, np.arange(4), H, (100, 100), estimator="DLT")
    assert m["prec@1px"] == 0.25  # 1.0 is not < 1
    assert m["prec@3px"] == 0.75
    assert m["num_matches"] == 4
    assert m["num_keypoints"] == 4.0


def test_symmetric_error_of_a_projective_map_averages_both_directions():
    H = np.array([[1.2, 0.1, 5], [0.0, 0.9, 3], [1e-3, 0, 1]])
    p0 = np.array([[10.0, 20.0]])
    p1 = _map(H, p0) + np.array([0.0, 2.0])
    forward = 2.0
    backward = np.linalg.norm(_map(np.linalg.inv(H), p1) - p0)
    assert hg.symmetric_error(p0, p1, H)[0] == pytest.approx((forward + backward) / 2)


def test_a_singular_true_homography_is_refused_by_name():
    """H^-1 is needed for the backward error: a singular H is an input error, not a traceback."""
    singular = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 0]])
    with pytest.raises(InvalidInputError, match=r"^H: homography is singular"):
        hg.symmetric_error([[0.0, 0.0]], [[1.0, 1.0]], singular)
    k0 = np.array([[10.0, 10.0], [20, 20]])
    with pytest.raises(InvalidInputError, match=r"^H_true: homography is singular"):
        hg.pair_homography_metrics(k0, k0, np.array([0, 1]), singular, (50, 50))


def test_pair_without_matches():
    k0 = np.array([[10.0, 10.0], [20, 20]])
    m = hg.pair_homography_metrics(k0, k0[:1], np.array([-1, -1]), np.eye(3), (50, 50))
    assert m["prec@1px"] == 0.0 and m["num_matches"] == 0 and m["num_keypoints"] == 1.5
    assert m["H_error_dlt"] == math.inf
    assert m["H_error_ransac"].tolist() == [math.inf]
    assert m["ransac_inl"].tolist() == [0.0] and m["ransac_inl%"].tolist() == [0.0]


# --------------------------------------------------------------------------------------------
# AUC
# --------------------------------------------------------------------------------------------


def _slow_auc(errors: list[float], t: float) -> float:
    """Riemann sum of the curve the definition describes, on a fine grid."""
    values = sorted(errors)
    n = len(values)
    below = [(0.0, 0.0)] + [(e, (i + 1) / n) for i, e in enumerate(values) if e < t]
    xs, ys = zip(*below, strict=True)
    grid = np.linspace(0, t, 200_001)
    curve = np.interp(grid, xs, ys, right=ys[-1])
    # trapezoid on the fine grid: the curve is piecewise linear, so only its kinks cost accuracy
    return float(np.sum((curve[1:] + curve[:-1]) / 2 * np.diff(grid)) / t)


def test_auc_by_hand():
    # errors 0.5, 2, inf; t = 1: 0.5 * (1/3) / 2 + 0.5 * (1/3) = 1/4
    # t = 3: 1/12 + 1.5 * (1/3 + 2/3) / 2 + 1 * 2/3 = 3/2, divided by 3
    np.testing.assert_allclose(hg.error_auc([0.5, 2.0, math.inf], [1, 3]), [0.25, 0.5])
    assert hg.error_auc([0.0, 0.0], [1])[0] == 1.0
    assert hg.error_auc([math.inf] * 3, [1, 3, 5]).tolist() == [0.0, 0.0, 0.0]
    # an error equal to the threshold is not below it: the curve stays at 0 up to t
    assert hg.error_auc([1.0], [1.0])[0] == 0.0
    # one error of 0.5 at t = 2: triangle 0.5 * 1 / 2 + 1.5 * 1 = 1.75, / 2
    assert hg.error_auc([0.5], [2.0])[0] == pytest.approx(0.875)
    assert np.isnan(hg.error_auc([], [1.0])).all()


def test_auc_matches_a_slow_integral_on_random_lists():
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        errors = rng.exponential(3.0, n)
        errors[rng.random(n) < 0.2] = math.inf
        errors[rng.random(n) < 0.1] = 0.0
        errors[: n // 4] = np.round(errors[: n // 4])  # ties and values on the thresholds
        for t, value in zip((1, 3, 5), hg.error_auc(errors), strict=True):
            assert value == pytest.approx(_slow_auc(list(errors), t), abs=2e-5)
            assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("bad", [[0.0], [-1.0], [math.nan], []])
def test_auc_refuses_bad_thresholds(bad):
    with pytest.raises(InvalidInputError, match="thresholds"):
        hg.error_auc([1.0], bad)


def test_auc_refuses_nan_errors():
    with pytest.raises(InvalidInputError, match="NaN"):
        hg.error_auc([1.0, math.nan])


# --------------------------------------------------------------------------------------------
# estimators
# --------------------------------------------------------------------------------------------


def test_dlt_recovers_the_exact_homography():
    rng = np.random.default_rng(2)
    for _ in range(20):
        H = _random_homography(rng)
        p0 = rng.uniform(0, 500, (int(rng.integers(4, 200)), 2))
        estimate = hg.dlt_homography(p0, _map(H, p0))
        np.testing.assert_allclose(estimate, H / H[2, 2], rtol=1e-7, atol=1e-7)
        assert hg.corner_error(estimate, H, (500, 500)) < 1e-6


def test_dlt_equals_scikit_image_on_noisy_matches():
    # scikit-image's ProjectiveTransform.estimate is a normalized total-least-squares DLT too
    rng = np.random.default_rng(3)
    for _ in range(20):
        H = _random_homography(rng)
        p0 = rng.uniform(0, 500, (int(rng.integers(8, 300)), 2))
        p1 = _map(H, p0) + rng.normal(scale=2.0, size=p0.shape)
        reference = ProjectiveTransform.from_estimate(p0, p1)
        assert reference
        ours = hg.dlt_homography(p0, p1)
        theirs = reference.params / reference.params[2, 2]
        assert hg.corner_error(ours, theirs, (500, 500)) < 1e-6


def test_dlt_fails_on_too_few_or_degenerate_points():
    assert hg.dlt_homography(np.zeros((3, 2)), np.zeros((3, 2))) is None
    line = np.c_[np.arange(10.0), 2 * np.arange(10.0)]
    assert hg.dlt_homography(line, line + 1) is None


@pytest.mark.parametrize("name", ["RANSAC", "USAC_MAGSAC", "USAC_DEFAULT", "LMEDS"])
def test_robust_estimators_recover_the_homography_despite_outliers(name):
    rng = np.random.default_rng(4)
    H = _random_homography(rng)
    p0 = rng.uniform(0, 500, (300, 2))
    p1 = _map(H, p0)
    outliers = rng.random(300) < 0.3
    p1[outliers] = rng.uniform(0, 500, (outliers.sum(), 2))
    found = hg.estimate_homography(p0, p1, estimator=name, threshold=1.0)
    assert found.success
    assert hg.corner_error(found.H, H, (500, 500)) < 1e-3
    assert (found.inliers[~outliers]).mean() > 0.99
    # the plain DLT is pulled away by the outliers
    assert hg.corner_error(hg.dlt_homography(p0, p1), H, (500, 500)) > 5


def test_robust_estimators_fail_with_fewer_than_four_matches():
    found = hg.estimate_homography(np.zeros((3, 2)), np.ones((3, 2)), estimator="RANSAC")
    assert not found.success and found.inliers.tolist() == [False] * 3


def test_estimator_names_are_checked_and_pluggable():
    with pytest.raises(InvalidInputError, match="unknown estimator 'poselib'"):
        hg.estimate_homography(np.zeros((4, 2)), np.zeros((4, 2)), estimator="poselib")

    def identity(p0, p1, threshold, options):
        return hg.Estimate(np.eye(3), np.ones(len(p0), dtype=bool))

    hg.register_estimator("identity_for_test", identity)
    try:
        zeros = np.zeros((4, 2))
        found = hg.estimate_homography(zeros, zeros, estimator="identity_for_test")
        assert found.success and found.H.tolist() == np.eye(3).tolist()
    finally:
        estimators._REGISTRY.pop("identity_for_test")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, (3.0,)), (0.5, (0.5,)), ([1, 2.5], (1.0, 2.5)), (-1, hg.DEFAULT_RANSAC_THRESHOLDS)],
)
def test_ransac_thresholds(value, expected):
    assert hg.ransac_thresholds(value) == expected


@pytest.mark.parametrize("value", [0, -2, [], [1, 1], [1, "a"], "3", True, [math.inf], None])
def test_ransac_thresholds_refuse_bad_values(value):
    with pytest.raises(InvalidInputError, match="ransac_th"):
        hg.ransac_thresholds(value)


# --------------------------------------------------------------------------------------------
# summary
# --------------------------------------------------------------------------------------------


def test_summary_picks_the_threshold_with_the_best_mean_auc():
    pairs = {
        "prec@1px": np.array([1.0, 0.5, 0.0]),
        "prec@3px": np.array([1.0, 1.0, 0.5]),
        "num_matches": np.array([10, 20, 30]),
        "num_keypoints": np.array([50.0, 60.0, 70.0]),
        "H_error_dlt": np.array([0.5, math.inf, 2.0]),
        # threshold 1: errors 0.5, 2, inf; threshold 2: 0, 0, 0.5 (better)
        "H_error_ransac": np.array([[0.5, 0.0], [2.0, 0.0], [math.inf, 0.5]]),
        "ransac_inl": np.array([[8.0, 9.0], [15.0, 18.0], [0.0, 20.0]]),
        "ransac_inl%": np.array([[0.8, 0.9], [0.75, 0.9], [0.0, 2 / 3]]),
    }
    summary, sweep = hg.summarize(pairs, [1.0, 2.0])
    assert summary["ransac_th"] == 2.0
    for t, key in ((1, "@1px"), (3, "@3px"), (5, "@5px")):
        assert summary[f"H_error_ransac{key}"] == pytest.approx(_slow_auc([0, 0, 0.5], t), abs=2e-5)
        assert sweep["1"][f"H_error_ransac{key}"] == pytest.approx(
            _slow_auc([0.5, 2.0, math.inf], t), abs=2e-5
        )
        assert summary[f"H_error_dlt{key}"] == pytest.approx(
            _slow_auc([0.5, math.inf, 2.0], t), abs=2e-5
        )
    assert summary["H_error_ransac_mAA"] == pytest.approx(
        np.mean([sweep["2"][f"H_error_ransac@{t}px"] for t in (1, 3, 5)])
    )
    assert summary["mH_error_ransac"] == 0.0
    assert summary["mransac_inl"] == 18.0
    assert summary["mprec@1px"] == 0.5
    assert summary["mnum_matches"] == 20.0
    assert summary["mH_error_dlt"] == 2.0
    assert summary["mnum_keypoints"] == 60.0


def test_summary_refuses_a_sweep_of_the_wrong_width():
    pairs = {key: np.zeros(2) for key in hg.SCALAR_KEYS}
    pairs.update({key: np.zeros((2, 3)) for key in hg.SWEEP_KEYS})
    with pytest.raises(InvalidInputError, match="expected"):
        hg.summarize(pairs, [1.0, 2.0])


# --------------------------------------------------------------------------------------------
# Glue Factory's threshold selection (AUCs rounded to 4 decimals before the comparison)
# --------------------------------------------------------------------------------------------


def _gf_best_th(errors_by_threshold):
    """Port of Glue Factory's ``eval.utils.eval_poses`` threshold choice."""
    pose_aucs = {}
    for th, errors in errors_by_threshold.items():
        pose_aucs[th] = recall_auc_port(errors, [1, 3, 5], decimals=4)  # Glue Factory's
    mAAs = {k: np.mean(v) for k, v in pose_aucs.items()}
    return max(mAAs, key=mAAs.get)


def _sweep_pairs(errors: np.ndarray) -> dict[str, np.ndarray]:
    n, k = errors.shape
    pairs = {key: np.zeros(n) for key in hg.SCALAR_KEYS}
    pairs.update({key: np.zeros((n, k)) for key in hg.SWEEP_KEYS})
    pairs["H_error_ransac"] = errors
    return pairs


def test_gluefactory_selection_by_hand():
    # unrounded: the second threshold (mean 0.441173 > 0.441163); rounded 0.1235 + 0.5 + 0.7 beats
    # 0.1234 + 0.5 + 0.7: the first
    aucs = [[0.12349, 0.5, 0.7], [0.12344, 0.50004, 0.70004]]
    assert hg.best_threshold(aucs, "unrounded") == 1
    assert hg.best_threshold(aucs, "gluefactory") == 0
    # rounding makes them equal: the first wins the tie, whatever the order of the others
    tied = [[0.20001, 0.3, 0.4], [0.2, 0.30004, 0.4], [0.1, 0.1, 0.1]]
    assert hg.best_threshold(tied, "unrounded") == 1
    assert hg.best_threshold(tied, "gluefactory") == 0
    # half-way values round as np.round does (to even on the binary value): 0.12345 -> 0.1234
    halves = [[0.12345, 0.5, 0.5], [0.12341, 0.5, 0.5]]
    assert hg.best_threshold(halves, "unrounded") == 0
    assert hg.best_threshold(halves, "gluefactory") == 0 and np.round(0.12345, 4) == 0.1234


def test_gluefactory_selection_in_summarize_by_hand():
    # two pairs with errors e1 <= e2: AUC@t = 1 - (e1 / 2 + e2 / 4) / t. Threshold 1: errors 0.1 and
    # 0.10008 (AUCs 0.92498, 0.974993, 0.984996), threshold 2: 0.1 and 0.10004 (0.92499, 0.974997,
    # 0.984998): unrounded the second is better; rounded both are 0.925, 0.975, 0.985: the first
    errors = np.array([[0.1, 0.1], [0.10008, 0.10004]])
    aucs = [hg.error_auc(errors[:, j]) for j in range(2)]
    np.testing.assert_allclose(aucs[0], [0.92498, 1 - 0.07502 / 3, 1 - 0.07502 / 5], rtol=1e-12)
    assert np.mean(aucs[1]) > np.mean(aucs[0])
    assert np.round(aucs[0], 4).tolist() == np.round(aucs[1], 4).tolist() == [0.925, 0.975, 0.985]
    assert hg.summarize(_sweep_pairs(errors), [1.0, 2.0])[0]["ransac_th"] == 2.0
    summary, _ = hg.summarize(_sweep_pairs(errors), [1.0, 2.0], selection="gluefactory")
    assert summary["ransac_th"] == 1.0
    assert summary["H_error_ransac@1px"] == aucs[0][0]  # reported unrounded


def test_gluefactory_selection_equals_a_port_of_glue_factory_on_random_sweeps():
    rng = np.random.default_rng(13)
    thresholds = list(hg.DEFAULT_RANSAC_THRESHOLDS)
    differ = 0
    for _ in range(300):
        n = int(rng.integers(20, 300))
        base = rng.lognormal(mean=0.3, sigma=1.0, size=n)  # corner errors in px, HPatches-like
        base[rng.random(n) < 0.05] = math.inf
        # the thresholds change the errors only a little: AUCs within a few 1e-4
        errors = base[:, None] * (1 + rng.normal(scale=3e-4, size=(n, len(thresholds))))
        if rng.random() < 0.3:  # identical columns: exact ties
            errors[:, 3] = errors[:, 1]
        reference = _gf_best_th({th: errors[:, j] for j, th in enumerate(thresholds)})
        pairs = _sweep_pairs(errors)
        ours = hg.summarize(pairs, thresholds, selection="gluefactory")[0]["ransac_th"]
        assert ours == reference
        differ += hg.summarize(pairs, thresholds)[0]["ransac_th"] != reference
    assert differ > 30  # the two rules really differ on such sweeps


def test_selection_rule_is_checked():
    with pytest.raises(InvalidInputError, match="selection='rounded'; expected one of unrounded"):
        hg.best_threshold([[0.5, 0.5, 0.5]], "rounded")
    with pytest.raises(InvalidInputError, match="expected \\(thresholds, AUCs\\)"):
        hg.best_threshold([0.5, 0.5, 0.5])


# --------------------------------------------------------------------------------------------
# Glue Factory's OpenCV estimator options
# --------------------------------------------------------------------------------------------


def test_opencv_call_passes_method_threshold_iterations_and_confidence(monkeypatch):
    calls = []

    def record(src, dst, method, **kwargs):
        calls.append((src.dtype, method, kwargs))
        return np.eye(3), np.ones((len(src), 1), np.uint8)

    monkeypatch.setattr(estimators.cv2, "findHomography", record)
    points = np.arange(10.0).reshape(5, 2)
    hg.estimate_homography(points, points, threshold=1.5, max_iters=3000)
    hg.estimate_homography(points, points, estimator="USAC_MAGSAC")
    assert calls[0] == (
        np.float64,
        estimators.cv2.RANSAC,
        {"ransacReprojThreshold": 1.5, "maxIters": 3000, "confidence": 0.995},
    )
    assert calls[1][1:] == (
        estimators.cv2.USAC_MAGSAC,
        {"ransacReprojThreshold": 3.0, "maxIters": 2000, "confidence": 0.995},
    )


def test_ransac_on_float64_points_equals_glue_factorys_float32_call():
    # Glue Factory passes float32 tensors' arrays to OpenCV; metricalc passes float64 points:
    # OpenCV converts to float32 either way, so the estimates are identical
    rng = np.random.default_rng(14)
    H = _random_homography(rng)
    for _ in range(10):
        p0 = rng.uniform(0, 500, (150, 2)).astype(np.float32)
        p1 = (_map(H, p0) + rng.normal(scale=1.0, size=p0.shape)).astype(np.float32)
        p1[:40] = rng.uniform(0, 500, (40, 2))
        ours = hg.estimate_homography(
            p0.astype(np.float64), p1.astype(np.float64), threshold=2.0, max_iters=3000
        )
        theirs = estimators.cv2.findHomography(
            p0, p1, estimators.cv2.RANSAC, 2.0, maxIters=3000, confidence=0.995
        )
        np.testing.assert_allclose(ours.H, theirs[0] / theirs[0][2, 2], rtol=1e-12)  # scaled
        assert np.array_equal(ours.inliers, theirs[1].ravel().astype(bool))


# --------------------------------------------------------------------------------------------
# kornia's DLT (Glue Factory's H_error_dlt)
# --------------------------------------------------------------------------------------------


def _port_kornia_dlt(points1, points2, weights=None):
    """Port of kornia 0.9 ``find_homography_dlt(..., solver="lu")`` for five or more points,
    written out op by op (``normalize_points``, the design rows, the weighted normal matrix,
    ``safe_solve_with_mask`` with a right-hand side of ones, ``normalize_transformation``)."""

    def normalize_points(points, w):
        total = w.sum()
        w = w if total > 0 else np.ones_like(w)
        x_mean = (points * w[:, None]).sum(0) / w.sum()
        centered = points - x_mean
        mean_radius = (np.sqrt((centered**2).sum(-1)) * w).sum() / w.sum()
        scale = math.sqrt(2.0) / (mean_radius + 1e-8)
        transform = np.array(
            [[scale, 0, -scale * x_mean[0]], [0, scale, -scale * x_mean[1]], [0, 0, 1.0]]
        )
        return centered * scale, transform

    w = np.ones(len(points1)) if weights is None else np.asarray(weights, float)
    n1, t1 = normalize_points(points1, w)
    n2, t2 = normalize_points(points2, w)
    rows = []
    for (x1, y1), (x2, y2) in zip(n1, n2, strict=True):
        rows.append([0, 0, 0, -x1, -y1, -1, y2 * x1, y2 * y1, y2])
        rows.append([x1, y1, 1, 0, 0, 0, -x2 * x1, -x2 * y1, -x2])
    A = np.array(rows)
    w_full = np.repeat(w, 2)
    normal = (A.T * w_full) @ A
    sol = np.linalg.solve(normal, np.ones(9))
    H = np.linalg.inv(t2) @ (sol.reshape(3, 3) @ t1)
    return H / H[2, 2] if abs(H[2, 2]) > 1e-8 else H


def _noisy_pair(rng, n, sigma=1.0):
    H = _random_homography(rng)
    p0 = rng.uniform(0, 500, (n, 2))
    return H, p0, _map(H, p0) + rng.normal(scale=sigma, size=p0.shape)


def test_kornia_dlt_equals_a_port_of_kornia_on_noisy_weighted_matches():
    rng = np.random.default_rng(15)
    for _ in range(40):
        _, p0, p1 = _noisy_pair(rng, int(rng.integers(5, 300)))
        weights = rng.uniform(0, 1, len(p0)) if rng.random() < 0.5 else None
        ours = hg.kornia_dlt_homography(p0, p1, weights)
        reference = _port_kornia_dlt(p0, p1, weights)
        assert hg.corner_error(ours, reference, (500, 500)) < 1e-8


def test_kornia_dlt_differs_from_the_svd_dlt_on_noisy_matches():
    rng = np.random.default_rng(16)
    gaps = []
    for _ in range(40):
        _, p0, p1 = _noisy_pair(rng, 50, sigma=2.0)
        kornia, svd = hg.kornia_dlt_homography(p0, p1), hg.dlt_homography(p0, p1)
        gaps.append(hg.corner_error(kornia, svd, (500, 500)))
    assert np.median(gaps) > 1e-3  # not rounding: a different least-squares solution


def test_kornia_dlt_is_exact_on_exact_matches_and_with_four_points():
    rng = np.random.default_rng(17)
    for n in (4, 5, 30):
        H = _random_homography(rng)
        p0 = rng.uniform(0, 500, (n, 2))
        estimate = hg.kornia_dlt_homography(p0, _map(H, p0), rng.uniform(0.1, 1, n))
        assert hg.corner_error(estimate, H, (500, 500)) < 1e-6


def test_kornia_dlt_weights_zero_drop_matches_and_only_relative_weights_count():
    rng = np.random.default_rng(18)
    _, p0, p1 = _noisy_pair(rng, 40)
    w = rng.uniform(0.2, 1, 40)
    w[:10] = 0
    dropped = hg.kornia_dlt_homography(p0, p1, w)
    subset = hg.kornia_dlt_homography(p0[10:], p1[10:], w[10:])
    assert hg.corner_error(dropped, subset, (500, 500)) < 1e-8
    assert hg.corner_error(hg.kornia_dlt_homography(p0, p1, 7 * w), dropped, (500, 500)) < 1e-8
    assert hg.corner_error(dropped, hg.kornia_dlt_homography(p0, p1), (500, 500)) > 1e-4


def test_kornia_dlt_failures_and_bad_weights():
    p = np.array([[0.0, 0], [100, 0], [100, 80], [0, 80], [50, 40]])
    assert hg.kornia_dlt_homography(p[:3], p[:3]) is None  # kornia raises: Glue Factory's inf
    assert hg.kornia_dlt_homography(p, p + 1, np.zeros(5)) is None  # no equations left
    with pytest.raises(InvalidInputError, match="weights has shape \\(4,\\)"):
        hg.kornia_dlt_homography(p, p, np.ones(4))
    with pytest.raises(InvalidInputError, match="non-negative"):
        hg.kornia_dlt_homography(p, p, -np.ones(5))


def test_kornia_lu_falls_back_to_the_rank_8_null_vector_only():
    rank8 = np.diag([*range(1, 9), 0.0])
    np.testing.assert_array_equal(dlt_module._lu_solve_ones(rank8), np.eye(9)[8])
    assert np.isnan(dlt_module._lu_solve_ones(np.diag([*range(1, 8), 0.0, 0.0]))).all()


def _corner_error_by_hand(estimate, truth, shape):
    """Mean distance of the four outer corners (pixel centres at integers) under both maps."""
    height, width = shape
    corners = np.array([[-0.5, -0.5], [width - 0.5, -0.5], [width - 0.5, height - 0.5],
                        [-0.5, height - 0.5]])  # fmt: skip
    return float(np.mean(np.linalg.norm(_map(estimate, corners) - _map(truth, corners), axis=1)))


def test_pair_metrics_dlt_variants():
    """H_error_dlt of each ``dlt`` equals the corner error, computed by hand, of an independent
    estimate on the matched points only: scikit-image's DLT (svd), the kornia port unweighted
    (kornia) and weighted by the matched keypoints' scores (gluefactory)."""
    rng = np.random.default_rng(19)
    H, p0, p1 = _noisy_pair(rng, 60)
    scores = rng.uniform(0, 1, 60)
    order = rng.permutation(60)  # keypoint i of image 1 matches keypoint order[i] of image k
    m = order.copy()
    m[rng.random(60) < 0.2] = -1  # a fifth unmatched: neither their points nor scores count
    k1 = np.empty_like(p1)
    k1[order] = p1
    kept = m >= 0
    svd = ProjectiveTransform.from_estimate(p0[kept], p1[kept])
    assert svd
    expected = {
        "svd": _corner_error_by_hand(svd.params, H, (500, 500)),
        "kornia": _corner_error_by_hand(_port_kornia_dlt(p0[kept], p1[kept]), H, (500, 500)),
        "gluefactory": _corner_error_by_hand(
            _port_kornia_dlt(p0[kept], p1[kept], scores[kept]), H, (500, 500)
        ),
    }
    assert len({round(v, 6) for v in expected.values()}) == 3  # the variants really differ
    for dlt, value in expected.items():
        got = hg.pair_homography_metrics(p0, k1, m, H, (500, 500), dlt=dlt, scores0=scores)
        assert got["num_matches"] == kept.sum()
        assert got["H_error_dlt"] == pytest.approx(value, rel=1e-6, abs=1e-9), dlt
    with pytest.raises(InvalidInputError, match="pass scores0"):
        hg.pair_homography_metrics(p0, p1, m, H, (500, 500), dlt="gluefactory")
    with pytest.raises(InvalidInputError, match="dlt='lu'; expected one of svd, kornia, gluef"):
        hg.pair_homography_metrics(p0, p1, m, H, (500, 500), dlt="lu")
    with pytest.raises(InvalidInputError, match="scores0 has shape \\(59,\\)"):
        hg.pair_homography_metrics(p0, p1, m, H, (500, 500), scores0=scores[:59])
