"""End-to-end evaluation into a QueryCube: hand-built sequences with known ranks, and sanity
checks on the built-in benchmark."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import metricalc as mc
from metricalc.keypoints import Features, evaluate, extract

SHAPE = (300, 300)


class HandSequence:
    """A scene whose six images are only sizes and homographies (evaluation needs no pixels)."""

    def __init__(self, name: str, H: np.ndarray):
        self.name, self._H = name, H

    @property
    def split(self) -> str:
        return {"i": "illumination", "v": "viewpoint"}.get(self.name[0], "other")

    def homography(self, k: int) -> np.ndarray:
        return np.eye(3) if k == 1 else self._H

    def shape(self, k: int) -> tuple[int, int]:
        return SHAPE


SHIFT = np.array([[1.0, 0, 10], [0, 1.0, 5], [0, 0, 1]])
QUERY_POINTS = [[100, 100], [150, 150], [200, 120]]
QUERY_DESC = np.array([[0, 0], [100, 0], [50, 50]], np.float32)


def _candidates(H: np.ndarray) -> Features:
    """q0's correspondence at descriptor distance 1 (rank 1); q1's at 4 with three closer
    candidates (rank 4); q2 projects next to no keypoint (R = 0)."""
    p0 = (H @ [100, 100, 1])[:2]
    p1 = (H @ [150, 150, 1])[:2]
    points = [p0, p1, [60, 250], [70, 250], [80, 250]]
    desc = np.array([[1, 0], [100, 4], [100, 1], [100, 2], [100, 3]], np.float32)
    return Features(np.array(points, float), desc)


def _features(H: np.ndarray) -> dict[int, Features]:
    images = {1: Features(np.array(QUERY_POINTS, float), QUERY_DESC)}
    images.update({k: _candidates(H) for k in range(2, 7)})
    return images


@pytest.fixture(scope="module")
def hand_cube() -> xr.Dataset:
    sequences = [HandSequence("i_a", np.eye(3)), HandSequence("v_b", SHIFT)]
    good = {s.name: _features(s._H) for s in sequences}
    broken = {"i_a": good["i_a"]}  # no features for v_b: must become an error record
    return evaluate(
        sequences, {"hand": good, "broken": broken}, keypoints="external", bojanic=False
    )


def test_hand_cube_holds_the_known_ranks(hand_cube):
    hand = hand_cube.sel(descriptor="hand")
    assert hand_cube.sizes["query"] == 2 * 5 * 3  # 2 scenes x 5 pairs x 3 queries
    assert sorted(set(hand_cube.scene.values.tolist())) == ["i_a", "v_b"]
    q = hand_cube.query_keypoint.values
    np.testing.assert_array_equal(hand.n_relevant.values, np.where(q == 2, 0, 1))
    np.testing.assert_array_equal(hand.better.values, np.select([q == 0, q == 1], [0, 3], -1))
    np.testing.assert_allclose(
        hand.ap.values, np.select([q == 0, q == 1], [1.0, 0.25], np.nan), equal_nan=True
    )
    np.testing.assert_array_equal(hand.nn_correct.values, np.where(q == 0, 1, 0))
    assert set(hand_cube.split.values.tolist()) == {"illumination", "viewpoint"}
    assert hand_cube.attrs["tau_px"] == 3.0 and hand_cube.attrs["keypoints"] == "external"


def test_failed_descriptor_is_kept_as_error_record(hand_cube):
    broken = hand_cube.sel(descriptor="broken")
    assert str(broken.status.values) == "error"
    assert "v_b" in str(broken.error.values)
    assert (broken.n_relevant.values == -1).all()


def test_metric_set_of_hand_cube(hand_cube):
    metrics = mc.metric_set(hand_cube).sel(descriptor="hand")
    # per scene: 5 pairs x (AP 1 and AP 1/4) over R = 1 queries, one R = 0 query per pair
    assert float(metrics.true_map_micro) == pytest.approx((1 + 0.25) / 2)
    assert float(metrics.true_map_micro_including_zeros) == pytest.approx((1 + 0.25 + 0) / 3)
    assert float(metrics.viewpoint_map) == pytest.approx(0.625)
    assert float(metrics.illumination_map) == pytest.approx(0.625)
    assert float(metrics.hit_rate_at_1) == pytest.approx(0.5)
    assert float(metrics.hit_rate_at_5) == pytest.approx(1.0)
    assert float(metrics.mean_precision) == pytest.approx(1 / 3)  # 1 of 3 queries per pair
    assert int(metrics.total_queries_processed) == 20
    assert int(metrics.total_queries_excluded) == 10
    assert float(metrics.r0_rate) == pytest.approx(1 / 3)
    assert np.isnan(float(mc.metric_set(hand_cube).sel(descriptor="broken").true_map_micro))


def test_hand_cube_saves_and_opens(hand_cube, tmp_path):
    mc.cube.save(hand_cube, tmp_path / "hand.nc")
    again = mc.cube.open_cube(tmp_path / "hand.nc")
    xr.testing.assert_identical(again, hand_cube)


# ---------------------------------------------------------------------------------------------
# The built-in benchmark (quick scenes)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benchmark(quick_sequences, quick_native_features, quick_locked_features):
    """The session's quick benchmark and features (tests/conftest.py), evaluated here with the
    Bojanic metrics."""
    sequences = quick_sequences
    native = evaluate(sequences, quick_native_features, keypoints="native")
    locked = evaluate(sequences, quick_locked_features, keypoints="locked:sift")
    return sequences, native, locked


def test_sift_beats_orb_on_viewpoint_scenes(benchmark):
    _, native, _ = benchmark
    metrics = mc.metric_set(native)
    assert float(metrics.viewpoint_map.sel(descriptor="sift")) > float(
        metrics.viewpoint_map.sel(descriptor="orb")
    )


def test_locked_cubes_share_every_query(benchmark):
    _, _, locked = benchmark
    assert set(locked.keypoint_set.values.tolist()) == {"sift"}
    present = locked.n_relevant >= 0
    assert bool(present.all())  # every descriptor has every query
    # and agree on which queries have a correspondence (the ground truth is descriptor-free)
    assert bool((locked.n_relevant.sel(descriptor="sift") == locked.n_relevant).all())


def test_native_cubes_keep_each_descriptors_own_queries(benchmark):
    _, native, _ = benchmark
    for name in ("sift", "orb"):
        own = (native.keypoint_set == name).values
        n_relevant = native.n_relevant.sel(descriptor=name).values
        assert (n_relevant[own] >= 0).all() and (n_relevant[~own] == -1).all()


def test_evaluation_is_identical_run_to_run(benchmark):
    sequences, _, locked = benchmark
    again = evaluate(
        sequences, extract(sequences, ("sift", "orb"), locked="sift"), keypoints="locked:sift"
    )
    xr.testing.assert_identical(
        again.drop_vars("processing_time_ms"), locked.drop_vars("processing_time_ms")
    )


def test_bojanic_results_per_scene(benchmark):
    sequences, _, locked = benchmark
    assert locked.sizes["sequence"] == len(sequences)
    ap = locked.verification_ap.values
    assert np.isfinite(ap).all() and ((ap >= 0) & (ap <= 1)).all()
    assert (locked.retrieval_num_true_positives.values > 0).all()
    assert (locked.retrieval_num_distractors.values > 0).all()


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), True, "3"])
def test_check_protocol_refuses_what_is_not_a_pixel_count(value):
    from metricalc.errors import InvalidInputError
    from metricalc.keypoints.evaluate import check_protocol

    with pytest.raises(InvalidInputError, match="tau must be a finite number >= 0"):
        check_protocol(tau=value, border=40.0)
    with pytest.raises(InvalidInputError, match="border must be a finite number >= 0"):
        check_protocol(tau=3.0, border=value)
    check_protocol(tau=np.int64(3), border=np.float32(0.0))  # NumPy numbers are numbers
