"""Patch descriptors: SIFT and raw pixels against per-patch OpenCV references; the files."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from metricalc.benchmarks.hpatches_patches import describe
from metricalc.benchmarks.hpatches_patches.compute import load_descriptor_pool
from metricalc.benchmarks.hpatches_patches.dataset import read_patch_dataset, write_patches
from metricalc.benchmarks.hpatches_patches.describe import (
    RAW_SIZE,
    SIFT_PADDING,
    SIFT_SIZE,
    describe_dataset,
    describe_patches,
)
from metricalc.errors import InvalidInputError


def textured(n: int, seed: int = 0) -> np.ndarray:
    """Smooth random textures (SIFT needs gradients, not white noise)."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(n, 65, 65)).astype(np.float32)
    out = np.stack([cv2.GaussianBlur(p, (0, 0), 3) for p in noise])
    out = (out - out.min()) / (out.max() - out.min()) * 255
    return out.astype(np.uint8)


def test_sift_equals_opencv_on_each_padded_patch_alone(monkeypatch):
    """The stacked, chunked computation equals one SIFT call per patch (no neighbour leaks)."""
    monkeypatch.setattr(describe, "CHUNK", 7)  # several chunks, the last one short
    patches = textured(17)
    patches[3] = 0  # a flat patch
    ours = describe_patches(patches)
    sift = cv2.SIFT_create()
    centre = SIFT_PADDING + 32.0
    for i, patch in enumerate(patches):
        tile = cv2.copyMakeBorder(patch, *[SIFT_PADDING] * 4, cv2.BORDER_REFLECT_101)
        _, expected = sift.compute(tile, [cv2.KeyPoint(centre, centre, SIFT_SIZE, 0)])
        np.testing.assert_array_equal(ours[i], expected[0])
    assert ours.dtype == np.float32 and ours.shape == (17, 128)
    assert not ours[3].any()


def test_sift_window_spans_the_patch():
    # 4 x 4 cells of 3 sigma, sigma = size / 2: 64 pixels, the first to the last patch pixel.
    cells = 4 * 3 * SIFT_SIZE / 2
    assert cells == pytest.approx(64)


def test_raw_equals_area_resize_and_normalisation_per_patch():
    patches = textured(9, seed=1)
    patches[4] = 77  # constant: a zero descriptor
    ours = describe_patches(patches, method="raw")
    for i, patch in enumerate(patches):
        small = cv2.resize(patch.astype(np.float64), (RAW_SIZE, RAW_SIZE),
                           interpolation=cv2.INTER_AREA).ravel()  # fmt: skip
        centred = small - small.mean()
        norm = np.linalg.norm(centred)
        expected = centred / norm if norm > 1e-3 else np.zeros_like(centred)
        np.testing.assert_allclose(ours[i], expected, atol=2e-5)
    assert not ours[4].any()
    # L2 distance^2 = 2 - 2 NCC for non-constant patches.
    d2 = ((ours[0] - ours[1]) ** 2).sum()
    assert d2 == pytest.approx(2 - 2 * float(ours[0] @ ours[1]), abs=1e-5)


def test_bad_patches_and_methods():
    with pytest.raises(InvalidInputError, match="method must be one of"):
        describe_patches(textured(1), method="orb")
    with pytest.raises(InvalidInputError, match=r"expected an array \(N, 65, 65\)"):
        describe_patches(np.zeros((2, 64, 64), np.uint8))
    with pytest.raises(InvalidInputError, match="expected uint8 pixels"):
        describe_patches(np.zeros((2, 65, 65), np.float32))


@pytest.mark.parametrize("fmt", ["npy", "csv"])
def test_dataset_files_round_trip_through_the_descriptor_pool(tmp_path, fmt):
    images = ("ref", "e1", "e2", "e3", "e4", "e5")
    for seed, image in enumerate(images):
        write_patches(tmp_path / "data" / "v_a" / f"{image}.png", textured(4, seed))
    dataset = read_patch_dataset(tmp_path / "data")
    out = tmp_path / "sift"
    written = describe_dataset(dataset, out, method="sift", format=fmt)
    assert [p.relative_to(out).as_posix() for p in written] == [f"v_a/{i}.{fmt}" for i in images]
    pool = load_descriptor_pool(out, [f"v_a.{i}" for i in images])
    expected = np.concatenate([describe_patches(dataset.patches("v_a", i)) for i in images])
    np.testing.assert_array_equal(pool.descriptors, expected)  # csv: %.9g round-trips float32
    other = "csv" if fmt == "npy" else "npy"
    describe_dataset(dataset, out, method="raw", format=other)  # switching format: no stale file
    assert sorted(p.suffix for p in (out / "v_a").iterdir()) == [f".{other}"] * 6


def test_dataset_errors(tmp_path):
    write_patches(tmp_path / "data" / "v_a" / "ref.png", textured(2))
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInputError, match="is a file; expected a folder"):
        describe_dataset(tmp_path / "data", tmp_path / "file")
    with pytest.raises(InvalidInputError, match="format must be one of"):
        describe_dataset(tmp_path / "data", tmp_path / "out", format="txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="no sequence folders"):
        describe_dataset(tmp_path / "empty", tmp_path / "out")
