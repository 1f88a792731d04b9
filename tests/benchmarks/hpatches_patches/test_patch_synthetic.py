"""The synthetic patch dataset: jitter levels, geometry of the patches, caching, determinism."""

from __future__ import annotations

import json
import math

import cv2
import numpy as np
import pytest

from metricalc.benchmarks.hpatches_patches import generator as synthetic
from metricalc.benchmarks.hpatches_patches.files import IMAGES
from metricalc.benchmarks.hpatches_patches.generator import (
    FRAMES_NAME,
    JITTER,
    MANIFEST_NAME,
    SOURCE_FOLDER,
    cut_patches,
    draw_jitter,
    make_patch_dataset,
)
from metricalc.errors import InvalidInputError
from metricalc.keypoints.sequences import load_sequences

SIZE, MAX_PATCHES = 320, 150


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("patches")
    return make_patch_dataset(root, scenes=["camera"], size=SIZE, max_patches=MAX_PATCHES)


def raster_overlap(A: np.ndarray, t: np.ndarray, n: int = 161) -> np.ndarray:
    """IoU of the unit disk and {A q + t : |q| <= 1}, by counting grid points (slow, obvious)."""
    g = np.linspace(-2.2, 2.2, n)
    points = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    disk = (points**2).sum(1) <= 1
    out = []
    for a, shift in zip(A, t, strict=True):
        back = np.linalg.solve(a, (points - shift).T).T
        ellipse = (back**2).sum(1) <= 1
        out.append((disk & ellipse).sum() / (disk | ellipse).sum())
    return np.array(out)


@pytest.mark.parametrize("level", ["e", "h", "t"])
def test_jitter_levels_give_the_release_median_overlaps(level):
    A, t = draw_jitter(level, 1000, np.random.default_rng(7))
    median = float(np.median(raster_overlap(A, t)))
    assert abs(median - JITTER[level].overlap) < 0.02, median
    # Bounds of the draws: rotation angle of A's polar factor, scales, shifts.
    u, s, vt = np.linalg.svd(A)
    rotation = np.degrees(np.arctan2((u @ vt)[:, 1, 0], (u @ vt)[:, 0, 0]))
    assert np.all(np.abs(rotation) <= JITTER[level].rotation_deg + 1e-9)
    assert np.all(np.abs(np.log(s)) <= JITTER[level].log_scale + 1e-9)
    assert np.all(np.abs(t) <= JITTER[level].shift)
    assert JITTER["e"].overlap > JITTER["h"].overlap > JITTER["t"].overlap


def test_release_figures_for_easy_and_hard():
    assert JITTER["e"].overlap == 0.85 and JITTER["h"].overlap == 0.72


def test_disk_overlap_closed_form_matches_counting():
    rng = np.random.default_rng(3)
    centres = rng.uniform(0, 4, (12, 2))
    radii = rng.uniform(0.3, 2.0, 12)
    iou = synthetic._disk_overlaps(centres, radii, centres, radii)
    g = np.linspace(-3, 7, 801)
    points = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    inside = [((points - c) ** 2).sum(1) <= r**2 for c, r in zip(centres, radii, strict=True)]
    for i in range(12):
        for j in range(12):
            expected = (inside[i] & inside[j]).sum() / (inside[i] | inside[j]).sum()
            assert iou[i, j] == pytest.approx(expected, abs=0.01)


def test_layout_counts_splits_and_manifest(dataset):
    root = dataset.root
    assert dataset.sequences == ("i_camera", "v_camera")
    for sequence in dataset.sequences:
        assert dataset.images[sequence] == IMAGES
        assert 20 <= dataset.counts[sequence] <= MAX_PATCHES
    assert json.loads((root / "splits.json").read_text()) == {
        "train": [],
        "test": ["i_camera", "v_camera"],
    }
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert (manifest["seed"], manifest["size"], manifest["max_patches"]) == (0, SIZE, MAX_PATCHES)
    assert set(manifest["scenes"]["v_camera"]["files"]) == {f"{i}.png" for i in IMAGES} | {
        FRAMES_NAME
    }
    assert (root / SOURCE_FOLDER / "v_camera" / "H_1_2").is_file()


def test_patches_are_the_frames_sampled_from_the_source_images(dataset):
    """Resample with cv2.warpPerspective (another OpenCV routine) from the recorded frames and the
    source sequence's own H files: equal to the written patches for small frames (no pyramid)."""
    sequences = {s.name: s for s in load_sequences(dataset.root / SOURCE_FOLDER)}
    checked = 0
    for name in dataset.sequences:
        frames = np.load(dataset.root / name / FRAMES_NAME)
        for image in IMAGES:
            target = 1 if image == "ref" else int(image[1]) + 1
            H = sequences[name].homography(target)
            if target > 1:
                np.testing.assert_array_equal(frames["homographies"][target - 2], H)
            patches = dataset.patches(name, image)
            for i in range(0, len(patches), 7):
                affine = np.vstack([frames[image][i], [0, 0, 1]])
                if math.sqrt(abs(np.linalg.det(affine[:2, :2]))) > 0.6:
                    continue  # sampled from a coarser pyramid level
                expected = cv2.warpPerspective(
                    sequences[name].gray(target).astype(np.float32), H @ affine, (65, 65),
                    flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                )  # fmt: skip
                diff = np.abs(expected - patches[i].astype(np.float32))
                assert diff.mean() < 0.6 and diff.max() <= 3, (name, image, i)
                checked += 1
    assert checked > 100


def test_patch_i_is_the_same_surface_in_every_image(dataset):
    for name in dataset.sequences:
        frames = np.load(dataset.root / name / FRAMES_NAME)
        centre = np.array([32.0, 32.0, 1.0])
        ref = frames["ref"] @ centre
        radius = np.sqrt(np.abs(np.linalg.det(frames["ref"][:, :, :2]))) * 32
        for image in IMAGES[1:]:
            moved = np.linalg.norm(frames[image] @ centre - ref, axis=1)
            bound = radius * JITTER[image[0]].shift * math.sqrt(2)
            assert np.all(moved <= bound + 1e-9), image
        # Content: the easy patch i looks like the reference patch i more than like patch j.
        ref_patches = dataset.patches(name, "ref").reshape(dataset.counts[name], -1).astype(float)
        easy = dataset.patches(name, "e1").reshape(dataset.counts[name], -1).astype(float)

        def normalised(x: np.ndarray) -> np.ndarray:
            x = x - x.mean(1, keepdims=True)
            return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)

        ncc = normalised(ref_patches) @ normalised(easy).T
        assert np.mean(np.diag(ncc)) > 0.8
        assert np.mean(np.argmax(ncc, axis=1) == np.arange(len(ncc))) > 0.8


def test_same_seed_same_bytes_and_cache_reuse(dataset, tmp_path):
    root = dataset.root
    stamps = {p: p.stat().st_mtime_ns for p in root.glob("*/*.png")}
    again = make_patch_dataset(root, scenes=["camera"], size=SIZE, max_patches=MAX_PATCHES)
    assert again == dataset
    assert {p: p.stat().st_mtime_ns for p in root.glob("*/*.png")} == stamps  # nothing rewritten
    other = make_patch_dataset(tmp_path / "b", scenes=["v_camera"], size=SIZE,
                               max_patches=MAX_PATCHES)  # fmt: skip
    for image in IMAGES:
        a = (root / "v_camera" / f"{image}.png").read_bytes()
        assert (other.root / "v_camera" / f"{image}.png").read_bytes() == a
    # Another seed regenerates the requested sequence and removes the others.
    reseeded = make_patch_dataset(tmp_path / "b", scenes=["i_camera"], seed=1, size=SIZE,
                                  max_patches=MAX_PATCHES)  # fmt: skip
    assert reseeded.sequences == ("i_camera",)
    assert not (tmp_path / "b" / "v_camera").exists()
    first = dataset.patches("i_camera", "h2")
    assert not np.array_equal(reseeded.patches("i_camera", "h2")[: len(first)], first)


def test_refuses_a_foreign_folder_and_bad_arguments(tmp_path):
    (tmp_path / "x.txt").write_text("mine")
    with pytest.raises(InvalidInputError, match=r"not empty and has no patch_manifest\.json"):
        make_patch_dataset(tmp_path, scenes=["camera"])
    (tmp_path / "x.txt").unlink()
    with pytest.raises(InvalidInputError, match="max_patches must be an integer >= 1"):
        make_patch_dataset(tmp_path, scenes=["camera"], max_patches=0)
    with pytest.raises(InvalidInputError, match="unknown synthetic scene"):
        make_patch_dataset(tmp_path, scenes=["nonsense"])
    with pytest.raises(InvalidInputError, match="level: expected one of"):
        draw_jitter("x", 3, np.random.default_rng(0))
    (tmp_path / MANIFEST_NAME).write_text("{}")
    with pytest.raises(InvalidInputError, match="not a metricalc synthetic patch dataset"):
        make_patch_dataset(tmp_path, scenes=["camera"])


def test_cut_patches_of_a_sequence_is_deterministic(dataset):
    sequence = load_sequences(dataset.root / SOURCE_FOLDER, scenes=["v_camera"])[0]
    one = cut_patches(sequence, seed=4, max_patches=30)
    two = cut_patches(sequence, seed=4, max_patches=30)
    for image in IMAGES:
        np.testing.assert_array_equal(one.patches[image], two.patches[image])
        assert one.patches[image].shape == (30, 65, 65)
    centres = one.affines["ref"] @ np.array([32.0, 32.0, 1.0])
    order = np.lexsort((centres[:, 0], centres[:, 1]))
    assert order.tolist() == list(range(30))  # ordered by row, then column
