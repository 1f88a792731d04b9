"""DescriptorWorkbench's image retrieval (metricalc.keypoints.image_retrieval) against a slow
port of ``ImageRetrievalAccumulator::compute`` (processing.cpp, scorer ``total_matches``) with
OpenCV's cross-checked brute-force matching written out as loops."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from metricalc.keypoints.features import Features
from metricalc.keypoints.image_retrieval import image_retrieval_ap, retrieval_ap
from metricalc.metrics import metric_set

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
    got = image_retrieval_ap(sequences, features, border=border)
    assert got.dims == ("descriptor", "image_query")
    for d in ("x", "y"):
        store: dict[str, dict[str, np.ndarray]] = {}
        for name in names:
            for k, image in features[d][name].items():
                x, y = image.keypoints[:, 0], image.keypoints[:, 1]
                keep = (x >= border) & (x <= SIZE[1] - 1 - border)
                keep &= (y >= border) & (y <= SIZE[0] - 1 - border)
                if keep.any():  # registerImage skips images without descriptors
                    store.setdefault(name, {})[f"{k}.ppm"] = image.descriptors[keep]
        expected = workbench_image_retrieval(store)
        for position, name in enumerate(names):
            value = float(got.sel(descriptor=d).values[position])
            if name not in expected:
                assert math.isnan(value)  # not a query in DescriptorWorkbench either
            elif not any(o == name for o in store for i in store[o] if i != "1.ppm"):
                assert math.isnan(value) and expected[name] == 0.0  # no relevant image
            else:
                assert value == pytest.approx(expected[name], rel=1e-12), (seed, d, name)


def test_retrieval_ap_by_hand() -> None:
    assert retrieval_ap(np.array([False, True, False, True])) == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert math.isnan(retrieval_ap(np.array([False, False])))


def test_metric_set_reads_it() -> None:
    """image_retrieval_map = mean over the query images (NaN skipped)."""
    import xarray as xr

    aps = xr.DataArray([[1.0, 0.5, np.nan]], dims=("descriptor", "image_query"))
    cube = xr.Dataset(
        {
            name: (("descriptor", "query"), np.array([[value]]))
            for name, value in (
                ("n_relevant", 1),
                ("better", 0),
                ("ties", 0),
                ("ap", 1.0),
                ("nn_correct", 1),
            )
        },
        coords={
            "descriptor": ["d"],
            "scene": ("query", ["i_a"]),
            "split": ("query", ["illumination"]),
            "pair": ("query", ["1-2"]),
        },
    ).assign(image_retrieval_ap=aps.assign_coords(descriptor=["d"]))
    assert float(metric_set(cube).image_retrieval_map.sel(descriptor="d")) == 0.75


def test_the_dim_is_the_one_metric_set_reads() -> None:
    from metricalc.metrics import IMAGE_RETRIEVAL_DIM

    features = {"x": {"i_a": random_features(np.random.default_rng(0), 0.0)}}
    got = image_retrieval_ap([FakeSequence("i_a")], features)
    assert got.dims == ("descriptor", IMAGE_RETRIEVAL_DIM)
