"""DescriptorWorkbench's image retrieval (metricalc.keypoints.image_retrieval) against a slow
port of ``ImageRetrievalAccumulator::compute`` (processing.cpp, scorer ``total_matches``) with
OpenCV's cross-checked brute-force matching written out as loops."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc import average_precision
from metricalc import cube as qc
from metricalc.cli import main
from metricalc.cube import io as cube_io
from metricalc.errors import InvalidInputError, UndefinedMetricWarning
from metricalc.keypoints import evaluate
from metricalc.keypoints.features import Features
from metricalc.keypoints.image_retrieval import image_retrieval, mutual_match_counts
from metricalc.keypoints.matching import nn_matches
from metricalc.metrics import BOJANIC_COUNTS, BOJANIC_METRICS, metric_set

SIZE = (100, 120)  # height, width
SHIFTS = (0.0, 0.5, 1.0, 1.5)  # per-scene descriptor offset: own-scene images match more


@dataclass
class FakeSequence:
    name: str

    def shape(self, k: int) -> tuple[int, int]:
        return SIZE


def cross_checked_matches(a: np.ndarray, b: np.ndarray) -> int:
    """cv::BFMatcher(NORM_L2, crossCheck=true): i -> j = argmin (first), kept if i is j's
    argmin (first) among a."""
    count = 0
    for i in range(len(a)):
        d = [float(np.sum((a[i] - b[j]) ** 2)) for j in range(len(b))]
        j = int(np.argmin(d))
        back = [float(np.sum((a[t] - b[j]) ** 2)) for t in range(len(a))]
        count += int(np.argmin(back)) == i
    return count


def workbench_ap(relevance: list[bool]) -> float:
    """computeAveragePrecision, statement by statement (0.0 without a relevant item)."""
    relevant_count, accumulated = 0, 0.0
    for i, flag in enumerate(relevance):
        if not flag:
            continue
        relevant_count += 1
        accumulated += relevant_count / (i + 1)
    return 0.0 if relevant_count == 0 else accumulated / relevant_count


def workbench_image_retrieval(store: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
    """ImageRetrievalAccumulator::compute: store[scene][image name] = descriptors (registered
    images only); queries are the registered "1.ppm" images."""
    out = {}
    for scene in sorted(store):
        if "1.ppm" not in store[scene]:
            continue
        query = store[scene]["1.ppm"]
        candidates = []
        for other in sorted(store):
            for image in sorted(store[other]):
                if other == scene and image == "1.ppm":
                    continue
                score = cross_checked_matches(query, store[other][image])
                candidates.append((score, other, image, other == scene))
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        out[scene] = workbench_ap([c[3] for c in candidates])
    return out


def workbench_store(
    scenes: dict[str, dict[int, Features]],
    border: float,
    shape: Callable[[str, int], tuple[int, int]] = lambda scene, k: SIZE,
) -> dict[str, dict[str, np.ndarray]]:
    """The registered images (keypoints ``border`` px inside image k of ``shape(scene, k)``,
    height and width) of one descriptor."""
    store: dict[str, dict[str, np.ndarray]] = {}
    for name, images in scenes.items():
        for k, image in images.items():
            height, width = shape(name, k)
            x, y = image.keypoints[:, 0], image.keypoints[:, 1]
            keep = (x >= border) & (x <= width - 1 - border)
            keep &= (y >= border) & (y <= height - 1 - border)
            if keep.any():  # registerImage skips images without descriptors
                store.setdefault(name, {})[f"{k}.ppm"] = image.descriptors[keep]
    return store


def random_features(rng: np.random.Generator, scene_shift: float) -> dict[int, Features]:
    images = {}
    for k in range(1, 7):
        n = int(rng.integers(0, 9))
        keypoints = rng.uniform([0, 0], [SIZE[1] - 1, SIZE[0] - 1], size=(n, 2))
        base = rng.normal(scene_shift, 1.0, size=(n, 4))
        images[k] = Features(keypoints, base.astype(np.float32))
    return images


@pytest.mark.parametrize("seed", range(12))
def test_matches_the_ported_accumulator(seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = ["i_a", "v_b", "v_c", "i_d"][: int(rng.integers(1, 5))]
    sequences = [FakeSequence(name) for name in names]
    features = {
        d: {
            name: random_features(rng, shift)
            for name, shift in zip(names, SHIFTS[: len(names)], strict=True)
        }
        for d in ("x", "y")
    }
    border = 10.0
    result = image_retrieval(sequences, features, border=border)
    got, n_relevant = result["image_retrieval_ap"], result["image_retrieval_relevant"]
    assert got.dims == n_relevant.dims == ("descriptor", "sequence")
    assert got.sequence.values.tolist() == names
    for d in ("x", "y"):
        store = workbench_store(features[d], border)
        expected = workbench_image_retrieval(store)
        for position, name in enumerate(names):
            value = float(got.sel(descriptor=d).values[position])
            relevant = int(n_relevant.sel(descriptor=d).values[position])
            if name not in expected:
                assert math.isnan(value) and relevant == -1  # not a query in DW either
                continue
            assert relevant == sum(i != "1.ppm" for i in store[name])
            if relevant == 0:
                assert math.isnan(value) and expected[name] == 0.0  # no relevant image
            else:
                assert value == pytest.approx(expected[name], rel=1e-12), (seed, d, name)


def test_the_image_retrieval_ap_keeps_the_tie_order_by_hand() -> None:
    # the AP image retrieval uses: equal match counts stay in the candidates' (DW's tie) order
    relevant = np.array([False, True, False, True])
    ap = average_precision(relevant, np.array([3, 3, 1, 1]), method="vlfeat")
    assert ap == pytest.approx((1 / 2 + 2 / 4) / 2)
    none = average_precision(np.array([False, False]), np.array([2, 1]), method="vlfeat")
    assert math.isnan(none)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("binary", [False, True])
def test_mutual_match_counts_equal_nn_matches(seed: int, binary: bool) -> None:
    """The chunked counts equal one nn_matches call per image pair, also with tied distances
    (small integer descriptors) and chunks smaller than one image."""
    rng = np.random.default_rng(seed)

    def draw(n: int) -> np.ndarray:
        if binary:
            return rng.integers(0, 256, size=(n, 2)).astype(np.uint8)
        return rng.integers(0, 3, size=(n, 3)).astype(np.float32)

    query = draw(int(rng.integers(0, 12)))
    images = [draw(int(rng.integers(0, 15))) for _ in range(int(rng.integers(1, 9)))]
    expected = [int((nn_matches(query, image)[0] >= 0).sum()) for image in images]
    assert mutual_match_counts(query, images).tolist() == expected
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("metricalc.keypoints.image_retrieval.CHUNK_ELEMENTS", 7)
        assert mutual_match_counts(query, images).tolist() == expected


# --------------------------------------------------------------------------------------------
# End to end: evaluate() on the quick built-in benchmark, the cube, metric_set
# --------------------------------------------------------------------------------------------


def small_features(sequences: list, rng: np.random.Generator) -> dict[str, dict[int, Features]]:
    """Few random keypoints per image (some within the border) with descriptors shifted per
    scene, so that the loop port stays fast; image 1 of the third scene lies in the border."""
    out = {}
    for position, sequence in enumerate(sequences):
        images = {}
        for k in range(1, 7):
            height, width = sequence.shape(k)
            n = 0 if (position, k) == (2, 1) else int(rng.integers(1, 9))
            keypoints = rng.uniform([0, 0], [width - 1, height - 1], size=(n, 2))
            if (position, k) == (2, 1):
                keypoints = np.array([[5.0, 5.0]])  # inside the image, within the border
            base = rng.normal(position * 0.7, 1.0, size=(len(keypoints), 4))
            images[k] = Features(keypoints, base.astype(np.float32))
        out[sequence.name] = images
    return out


@pytest.fixture(scope="module")
def quick(quick_sequences: list) -> tuple[list, dict, xr.Dataset]:
    sequences = quick_sequences  # the session's quick benchmark (tests/conftest.py)
    rng = np.random.default_rng(7)
    features = {d: small_features(sequences, rng) for d in ("x", "y")}
    cube = evaluate(sequences, features, keypoints="external", bojanic=False, image_retrieval=True)
    return sequences, features, cube


def test_evaluate_equals_the_ported_accumulator(quick: tuple[list, dict, xr.Dataset]) -> None:
    """evaluate(image_retrieval=True) on the quick built-in benchmark: the cube's per-scene APs
    are those of the port on the same features and border."""
    sequences, features, cube = quick
    shapes = {s.name: s for s in sequences}
    names = [s.name for s in sequences]
    assert cube.sequence.values.tolist() == sorted(names)
    for d in ("x", "y"):
        store = workbench_store(features[d], 40.0, lambda scene, k: shapes[scene].shape(k))
        expected = workbench_image_retrieval(store)
        for name in names:
            value = float(cube.image_retrieval_ap.sel(descriptor=d, sequence=name))
            relevant = int(cube.image_retrieval_relevant.sel(descriptor=d, sequence=name))
            if name not in expected:
                assert math.isnan(value) and relevant == -1
            else:
                assert relevant == len(store[name]) - 1 > 0
                assert value == pytest.approx(expected[name], rel=1e-12), (d, name)
    assert int((cube.image_retrieval_relevant == -1).sum()) == 2  # scene 3: one per descriptor


def test_metric_set_is_the_mean_over_the_scenes(quick: tuple[list, dict, xr.Dataset]) -> None:
    """image_retrieval_map = mean of the per-scene APs; Bojanic off: its APs NaN, counts 0."""
    _, _, cube = quick
    metrics = metric_set(cube)
    for d in ("x", "y"):
        aps = cube.image_retrieval_ap.sel(descriptor=d).values
        assert float(metrics.image_retrieval_map.sel(descriptor=d)) == pytest.approx(
            np.nanmean(aps), rel=1e-15
        )
    assert bool(cube.verification_ap.isnull().all())  # the Bojanic variables at sentinels
    for name in BOJANIC_METRICS:
        assert bool(metrics[name].isnull().all()), name
    for name in BOJANIC_COUNTS:
        assert metrics[name].values.tolist() == [0, 0], name


def test_save_open_combine_carry_it(quick: tuple[list, dict, xr.Dataset], tmp_path: Path) -> None:
    sequences, features, cube = quick
    qc.save(cube, tmp_path / "cube.nc")
    xr.testing.assert_identical(qc.open_cube(tmp_path / "cube.nc"), cube)
    parts = [cube.sel(descriptor=[d]) for d in ("x", "y")]
    xr.testing.assert_identical(
        qc.combine(parts).drop_vars("processing_time_ms"), cube.drop_vars("processing_time_ms")
    )
    # with a descriptor evaluated without image retrieval: its cells stay at the sentinels
    plain = evaluate(sequences, {"z": features["x"]}, keypoints="external", bojanic=False)
    assert "sequence" not in plain.dims
    both = qc.combine([cube, plain])
    xr.testing.assert_identical(both.image_retrieval_ap.sel(descriptor=["x", "y"]),
                                cube.image_retrieval_ap)  # fmt: skip
    assert bool(both.image_retrieval_ap.sel(descriptor="z").isnull().all())
    assert (both.image_retrieval_relevant.sel(descriptor="z") == -1).all()
    metrics = metric_set(both)
    assert math.isnan(float(metrics.image_retrieval_map.sel(descriptor="z")))
    queries = int(metric_set(plain).total_queries_excluded.sel(descriptor="z"))
    assert int(metrics.total_queries_excluded.sel(descriptor="z")) == queries > 0


def test_a_bojanic_cube_without_image_retrieval(
    quick: tuple[list, dict, xr.Dataset], tmp_path: Path
) -> None:
    """Bojanic on and image retrieval off: a sequence dim with NaN APs; a file written before
    the image-retrieval variables existed opens with them at their sentinels."""
    sequences, features, _ = quick
    cube = evaluate(sequences, {"x": features["x"]}, keypoints="external")  # the defaults
    assert bool(cube.image_retrieval_ap.isnull().all())
    assert (cube.image_retrieval_relevant == -1).all()
    assert bool(cube.verification_ap.notnull().any())
    metrics = metric_set(cube, zero_division=0)
    assert math.isnan(float(metrics.image_retrieval_map.sel(descriptor="x")))  # DW: -1
    assert not math.isnan(float(metrics.keypoint_verification_ap.sel(descriptor="x")))
    older = cube.drop_vars(["image_retrieval_ap", "image_retrieval_relevant"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cube_io, "validate", lambda c: c)  # write it as an older metricalc did
        qc.save(older, tmp_path / "older.nc")
    xr.testing.assert_identical(qc.open_cube(tmp_path / "older.nc"), cube)
    assert math.isnan(float(metric_set(older).image_retrieval_map.sel(descriptor="x")))


def retrieval_cube(aps: list[float], relevant: list[int]) -> xr.Dataset:
    """A one-query cube with the given per-scene image retrieval."""
    coords = {"scene": ["i_a"], "pair": ["1-2"], "keypoint_set": ["d"], "query_keypoint": [0]}
    return qc.new_cube(
        ["d"],
        coords,
        {"better": [[0]], "ties": [[0]], "nn_correct": [[1]]},
        attrs=qc.DEFAULT_ATTRS,
        per_sequence={"image_retrieval_ap": [aps], "image_retrieval_relevant": [relevant]},
        sequences=[f"s{i}" for i in range(len(aps))],
    )


def test_zero_division_counts_queries_without_relevant_image() -> None:
    """A query without relevant image: left out by default; DescriptorWorkbench's AP 0 with
    zero_division=0; no query at all stays NaN (DW: -1) under every policy."""
    cube = retrieval_cube([1.0, 0.5, math.nan, math.nan], [2, 3, 0, -1])

    def value(**kwargs: object) -> float:
        return float(metric_set(cube, **kwargs).image_retrieval_map.sel(descriptor="d"))

    assert value() == 0.75
    assert value(zero_division=0) == 0.5
    assert value(zero_division=1) == pytest.approx(2.5 / 3)
    with warnings.catch_warnings(record=True) as caught:  # other empty means warn too
        warnings.simplefilter("always")
        assert value(zero_division="warn") == 0.5
    messages = [str(w.message) for w in caught if w.category is UndefinedMetricWarning]
    assert any(m.startswith("metric_set: image_retrieval_ap is undefined") for m in messages)
    none = retrieval_cube([math.nan, math.nan], [-1, -1])
    for policy in ("nan", 0, 1):
        result = metric_set(none, zero_division=policy).image_retrieval_map
        assert math.isnan(float(result.sel(descriptor="d"))), policy


def test_cli_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``metricalc keypoints eval --image-retrieval`` / ``--no-image-retrieval`` (the default)."""
    data = tmp_path / "data"
    assert main(["keypoints", "make-dataset", str(data), "--scenes", "camera"]) == 0
    common = ["keypoints", "eval", "--data", str(data), "--descriptors", "sift", "--no-progress",
              "--no-bojanic"]  # fmt: skip
    assert main([*common, "--image-retrieval", "--out", str(tmp_path / "on.nc")]) == 0
    assert main([*common, "--out", str(tmp_path / "default.nc")]) == 0
    assert main([*common, "--no-image-retrieval", "--out", str(tmp_path / "off.nc")]) == 0
    on = qc.open_cube(tmp_path / "on.nc")
    assert on.sizes["sequence"] == 2 and (on.image_retrieval_relevant == 5).all()
    for off in ("default.nc", "off.nc"):
        assert "sequence" not in qc.open_cube(tmp_path / off).dims
    capsys.readouterr()
    assert main(["metrics", str(tmp_path / "on.nc"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["sift"]["image_retrieval_map"]
    assert shown == pytest.approx(float(on.image_retrieval_ap.mean()))


def test_mutual_match_counts_refuses_other_kinds() -> None:
    query = np.zeros((3, 4), np.float32)
    with pytest.raises(InvalidInputError, match=r"image 1: .*expected \(M, 4\)"):
        mutual_match_counts(query, [np.zeros((2, 4), np.float32), np.zeros((2, 5), np.float32)])
    with pytest.raises(InvalidInputError, match=r"image 0: .*uint8"):
        mutual_match_counts(query, [np.zeros((2, 4), np.uint8)])
