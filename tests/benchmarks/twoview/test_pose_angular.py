"""Rotation / translation angular errors against ports of SuperGlue's and the Image Matching
Benchmark's functions (written here), on random poses."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from metricalc.benchmarks.twoview.angular import (
    pose_error,
    relative_pose_error,
    rotation_error,
    translation_error,
)
from metricalc.errors import InvalidInputError


def superglue_compute_pose_error(T_0to1: np.ndarray, R: np.ndarray, t: np.ndarray
                                 ) -> tuple[float, float]:
    """SuperGlue models/utils.py angle_error_mat / angle_error_vec / compute_pose_error."""
    R_gt, t_gt = T_0to1[:3, :3], T_0to1[:3, 3]
    n = np.linalg.norm(t) * np.linalg.norm(t_gt)
    error_t = np.rad2deg(np.arccos(np.clip(np.dot(t, t_gt) / n, -1.0, 1.0)))
    error_t = np.minimum(error_t, 180 - error_t)
    cos = np.clip((np.trace(np.dot(R.T, R_gt)) - 1) / 2, -1.0, 1.0)
    error_R = np.rad2deg(np.abs(np.arccos(cos)))
    return float(error_t), float(error_R)


def imb_evaluate_r_t(R_gt: np.ndarray, t_gt: np.ndarray, R: np.ndarray, t: np.ndarray
                     ) -> tuple[float, float]:
    """image-matching-benchmark utils/eval_helper.py evaluate_R_t (quaternions from scipy),
    in degrees."""
    eps = 1e-15
    q_gt, q = Rotation.from_matrix(R_gt).as_quat(), Rotation.from_matrix(R).as_quat()
    q, q_gt = q / (np.linalg.norm(q) + eps), q_gt / (np.linalg.norm(q_gt) + eps)
    err_q = np.arccos(1 - 2 * np.maximum(eps, 1.0 - np.sum(q * q_gt) ** 2))
    t, t_gt = t / (np.linalg.norm(t) + eps), t_gt / (np.linalg.norm(t_gt) + eps)
    err_t = np.arccos(np.sqrt(1 - np.maximum(eps, 1.0 - np.sum(t * t_gt) ** 2)))
    return float(np.rad2deg(err_q)), float(np.rad2deg(err_t))


def _random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T = np.eye(4)
    T[:3, :3] = Rotation.random(random_state=rng).as_matrix()
    T[:3, 3] = rng.normal(size=3)
    scale = 10 ** rng.uniform(-2, 2)
    R = Rotation.from_rotvec(rng.normal(size=3) * rng.choice([1e-3, 0.1, 1.0])).as_matrix()
    R = R @ T[:3, :3]
    t = scale * (rng.choice([-1, 1]) * T[:3, 3] + rng.normal(size=3) * rng.choice([0.01, 1]))
    return T, R, t


@pytest.mark.parametrize("seed", range(200))
def test_equals_superglue_port(seed: int) -> None:
    T, R, t = _random_case(np.random.default_rng(seed))
    t_err, R_err = relative_pose_error(T, R, t)
    assert (float(t_err), float(R_err)) == pytest.approx(
        superglue_compute_pose_error(T, R, t), abs=1e-9
    )


@pytest.mark.parametrize("seed", range(200))
def test_same_angles_as_image_matching_benchmark(seed: int) -> None:
    T, R, t = _random_case(np.random.default_rng(seed))
    t_err, R_err = relative_pose_error(T, R, t)
    q_ref, t_ref = imb_evaluate_r_t(T[:3, :3], T[:3, 3], R, t)
    # the same angles; the benchmark's eps floor and arccos near 1 cost ~1e-5 degrees
    assert float(R_err) == pytest.approx(q_ref, abs=2e-4)
    assert float(t_err) == pytest.approx(t_ref, abs=2e-4)


def test_vectorized_over_pairs() -> None:
    rng = np.random.default_rng(7)
    cases = [_random_case(rng) for _ in range(20)]
    T = np.stack([c[0] for c in cases])
    R = np.stack([c[1] for c in cases])
    t = np.stack([c[2] for c in cases])
    t_err, R_err = relative_pose_error(T, R, t)
    one = np.array([relative_pose_error(*c) for c in cases], dtype=float)
    assert np.allclose(t_err, one[:, 0], atol=1e-12) and np.allclose(R_err, one[:, 1], atol=1e-12)


def test_hand_computed() -> None:
    assert float(rotation_error(np.eye(3), np.eye(3))) == 0.0
    flip = np.diag([1.0, -1.0, -1.0])
    assert float(rotation_error(flip, np.eye(3))) == pytest.approx(180.0)
    assert float(translation_error([0, 0, 1.0], [0, 0, -3.0])) == 0.0
    assert float(translation_error([0, 1.0, 0], [0, 0, 1.0])) == pytest.approx(90.0)
    assert pose_error([1.0, np.inf], [2.0, 0.0]).tolist() == [2.0, np.inf]


def test_ignore_gt_t_thr() -> None:
    assert float(translation_error([1.0, 0, 0], [0, 0, 0.0], ignore_gt_t_thr=1e-3)) == 0.0
    with pytest.raises(InvalidInputError, match="length zero"):
        translation_error([1.0, 0, 0], [0, 0, 0.0])


@pytest.mark.parametrize(
    ("fn", "args", "match"),
    [
        (rotation_error, (np.eye(2), np.eye(3)), "R_est has shape"),
        (rotation_error, (np.full((3, 3), np.nan), np.eye(3)), "non-finite"),
        (translation_error, ([1.0, 0], [1.0, 0, 0]), "t_est has shape"),
    ],
)
def test_bad_input(fn: object, args: tuple[object, ...], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        fn(*args)  # type: ignore[operator]
