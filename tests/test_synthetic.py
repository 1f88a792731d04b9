"""The synthetic benchmark: layout, transformations, exact homographies, determinism, caching."""

from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path

import numpy as np
import pytest
import skimage.data
from scipy.ndimage import map_coordinates

from metricalc.datasets import sequences as synthetic
from metricalc.datasets.sequences import (
    MANIFEST_NAME,
    PHOTOGRAPHS,
    QUICK_SCENES,
    load_photograph,
    make_synthetic_dataset,
    photometric_change,
    viewpoint_homographies,
)
from metricalc.errors import InvalidInputError
from metricalc.keypoints.sequences import load_sequences

SIZE = 96
FILES = (*(f"{k}.png" for k in range(1, 7)), *(f"H_1_{k}" for k in range(2, 7)))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("synthetic") / "bench"
    sequences = make_synthetic_dataset(root, scenes=["astronaut", "camera", "v_brick"], size=SIZE)
    return root, {s.name: s for s in sequences}


def _snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- photographs -------------------------------------------------------------------------------


def test_photographs_exist_and_load_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access while loading a photograph")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert len(PHOTOGRAPHS) >= 10 and len(set(PHOTOGRAPHS)) == len(PHOTOGRAPHS)
    for name in PHOTOGRAPHS:
        assert callable(getattr(skimage.data, name))
        image = load_photograph(name, size=64)
        assert image.dtype == np.uint8 and max(image.shape[:2]) <= 64
        assert image.ndim == 2 or image.shape[2] == 3
        assert image.std() > 10, name  # a real picture, not a flat field


def test_quick_scenes() -> None:
    assert set(QUICK_SCENES) <= set(PHOTOGRAPHS) and len(QUICK_SCENES) == 2
    assert len(synthetic.resolve_scenes(QUICK_SCENES)) == 4


def test_resize_keeps_aspect_and_small_photographs() -> None:
    assert load_photograph("coffee", size=300).shape == (200, 300, 3)
    assert load_photograph("text", size=640).shape == skimage.data.text().shape  # not enlarged
    assert load_photograph("camera").shape == (512, 512)
    with pytest.raises(InvalidInputError, match="unknown photograph 'horse'"):
        load_photograph("horse")


# -- layout ------------------------------------------------------------------------------------


def test_layout_and_returned_sequences(dataset: tuple[Path, dict]) -> None:
    root, sequences = dataset
    assert list(sequences) == ["i_astronaut", "i_camera", "v_astronaut", "v_brick", "v_camera"]
    for name, seq in sequences.items():
        assert sorted(p.name for p in (root / name).iterdir()) == sorted(FILES)
        assert seq.split == ("illumination" if name.startswith("i_") else "viewpoint")
        colour = "astronaut" in name
        for k in range(1, 7):
            image = seq.image(k)
            assert image.ndim == (3 if colour else 2)  # gray photographs stay gray
            assert max(image.shape[:2]) == SIZE and seq.shape(k) == seq.shape(1)
    assert load_sequences(root) == sorted(sequences.values(), key=lambda s: s.name)


def test_manifest(dataset: tuple[Path, dict]) -> None:
    root, sequences = dataset
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["seed"] == 0 and manifest["size"] == SIZE
    assert manifest["version"] == synthetic.GENERATOR_VERSION
    assert sorted(manifest["scenes"]) == sorted(sequences)
    record = manifest["scenes"]["v_brick"]
    assert record["photograph"] == "brick" and sorted(record["files"]) == sorted(FILES)
    assert record["files"]["1.png"]["bytes"] == (root / "v_brick" / "1.png").stat().st_size


# -- transformations ---------------------------------------------------------------------------


def test_illumination_scenes_change_more_with_k(dataset: tuple[Path, dict]) -> None:
    _, sequences = dataset
    for name in ("i_astronaut", "i_camera"):
        seq = sequences[name]
        for k in range(2, 7):
            np.testing.assert_array_equal(seq.homography(k), np.eye(3))
        reference = seq.image(1).astype(float)
        mad = [np.abs(seq.image(k).astype(float) - reference).mean() for k in range(2, 7)]
        assert mad[0] > 1 and np.all(np.diff(mad) > 0), (name, mad)


def test_every_photometric_effect_is_applied_and_grows() -> None:
    flat = np.full((60, 80, 3), 128, np.uint8)
    changed = [x.astype(float) for x in photometric_change(flat, np.random.default_rng(3))]
    for before, after in itertools.pairwise(changed):
        # gain, offset and gamma move the mean away from 128
        assert abs(after.mean() - 128) > abs(before.mean() - 128)

        # vignetting: the centre-to-corner contrast grows
        def falloff(x: np.ndarray) -> float:
            return abs(x[25:35, 35:45].mean() - x[:8, :8].mean())

        assert falloff(after) > falloff(before)
        # colour shift: the channel means drift apart
        assert np.ptp(after.mean(axis=(0, 1))) > np.ptp(before.mean(axis=(0, 1)))
        # sensor noise: residual after removing the smooth part grows
        assert np.std(np.diff(after, axis=1)) > np.std(np.diff(before, axis=1))
    # blur: a step edge gets wider with k
    step = np.zeros((20, 40), np.uint8)
    step[:, 20:] = 200
    ramps = [x[10].astype(float) for x in photometric_change(step, np.random.default_rng(1))]
    widths = [np.count_nonzero(np.abs(np.diff(r)) > 10) for r in ramps]
    assert widths[-1] > widths[0]


def test_gray_input_gets_no_colour_channels() -> None:
    changed = photometric_change(np.full((20, 30), 90, np.uint8), np.random.default_rng(0))
    assert all(x.shape == (20, 30) and x.dtype == np.uint8 for x in changed)


def test_viewpoint_changes_grow_and_stay_in_frame() -> None:
    for seed in range(25):
        for shape in ((480, 640), (640, 427), (172, 448)):
            Hs = viewpoint_homographies(shape, np.random.default_rng(seed))
            height, width = shape
            corners = np.array(
                [[0, 0, 1], [width - 1, 0, 1], [width - 1, height - 1, 1], [0, height - 1, 1]],
                float,
            ).T
            moved = []
            for H in Hs:
                p = H @ corners
                assert (p[2] > 0).all()
                moved.append(np.abs(p[:2] / p[2] - corners[:2]).mean())
                visible, filled = synthetic._coverage(H, shape)
                assert visible >= 0.7 and filled >= 0.6
                # rotation, scale/shear and projective terms are all present
                assert abs(H[1, 0]) > 1e-3 and abs(H[2, :2]).max() > 1e-6
            assert np.all(np.diff(moved) > 0), (seed, shape, moved)


def test_viewpoint_reference_is_the_mirrored_photograph(dataset: tuple[Path, dict]) -> None:
    _, sequences = dataset
    for name in ("astronaut", "camera"):
        np.testing.assert_array_equal(
            sequences[f"v_{name}"].image(1), sequences[f"i_{name}"].image(1)[:, ::-1]
        )


def test_written_homography_is_the_one_used_to_warp(dataset: tuple[Path, dict]) -> None:
    """The H_1_k read back from the text file is the warp that made image k.

    Forward: image k at the projection H_1_k p matches image 1 at p (up to interpolating an
    interpolated image) much better than at a projection two pixels off. Backward, exactly what
    cv2.warpPerspective computes: image k at an integer pixel q equals image 1 bilinearly
    sampled at H_1_k^-1 q within 1.5 grey levels (uint8 rounding, OpenCV's 1/32 px grid).
    """
    root, _ = dataset
    rng = np.random.default_rng(0)
    for seq in load_sequences(root, scenes=["v_astronaut", "v_brick", "v_camera"]):
        height, width = seq.shape(1)
        for k in range(2, 7):
            H = seq.homography(k)
            for channel in range(seq.image(1).shape[2] if seq.image(1).ndim == 3 else 1):
                reference = np.atleast_3d(seq.image(1))[..., channel].astype(float)
                image = np.atleast_3d(seq.image(k))[..., channel].astype(float)

                source = np.c_[rng.integers(4, width - 4, 400), rng.integers(4, height - 4, 400)]
                target = _apply(H, source)
                ok = (target > 1).all(axis=1) & (target < [width - 2, height - 2]).all(axis=1)
                assert ok.sum() > 150
                at_source = reference[source[ok, 1], source[ok, 0]]
                error = np.abs(_sample(image, target[ok]) - at_source)
                shifted = np.abs(_sample(image, target[ok] + 2) - at_source)
                assert error.mean() < 0.6 * shifted.mean(), (seq.name, k, channel)

                pixels = np.c_[rng.integers(0, width, 400), rng.integers(0, height, 400)]
                back = _apply(np.linalg.inv(H), pixels)
                ok = (back > 0).all(axis=1) & (back < [width - 1, height - 1]).all(axis=1)
                assert ok.sum() > 150
                error = np.abs(image[pixels[ok, 1], pixels[ok, 0]] - _sample(reference, back[ok]))
                assert error.max() <= 1.5, (seq.name, k, channel, error.max())


def _apply(H: np.ndarray, points: np.ndarray) -> np.ndarray:
    projected = np.c_[points, np.ones(len(points))] @ H.T
    return projected[:, :2] / projected[:, 2:]


def _sample(image: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Bilinear interpolation of ``image`` at x, y ``points``."""
    return map_coordinates(image, points.T[::-1], order=1)


# -- determinism -------------------------------------------------------------------------------


def test_same_seed_gives_identical_files_other_seed_differs(tmp_path: Path) -> None:
    scenes = ["i_coffee", "v_coins"]
    make_synthetic_dataset(tmp_path / "a", scenes=scenes, seed=7, size=64)
    make_synthetic_dataset(tmp_path / "b", scenes=scenes, seed=7, size=64)
    make_synthetic_dataset(tmp_path / "c", scenes=scenes, seed=8, size=64)
    a, b, c = ({k: v[1] for k, v in _snapshot(tmp_path / x).items()} for x in ("a", "b", "c"))
    assert a == b and len(a) == 2 * len(FILES) + 1
    for scene in scenes:
        assert a[f"{scene}/1.png"] == c[f"{scene}/1.png"]  # the photograph itself
        for k in range(2, 7):
            assert a[f"{scene}/{k}.png"] != c[f"{scene}/{k}.png"]
    assert a["v_coins/H_1_6"] != c["v_coins/H_1_6"]


def test_scene_bytes_do_not_depend_on_the_selection(tmp_path: Path) -> None:
    alone = make_synthetic_dataset(tmp_path / "alone", scenes="v_camera", size=64)[0]
    together = make_synthetic_dataset(tmp_path / "together", scenes=["camera", "coins"], size=64)
    (twin,) = [s for s in together if s.name == "v_camera"]
    for a, b in zip(alone.image_paths, twin.image_paths, strict=True):
        assert a.read_bytes() == b.read_bytes()


# -- caching -----------------------------------------------------------------------------------


def test_second_call_does_no_work(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    first = make_synthetic_dataset(root, scenes=["camera"], size=64)
    before = _snapshot(root)
    second = make_synthetic_dataset(root, scenes=["camera"], size=64)
    assert _snapshot(root) == before  # same mtimes: nothing rewritten
    assert second == first
    # a subset of what is there is served from the cache too
    assert make_synthetic_dataset(root, scenes="i_camera", size=64) == first[:1]
    assert _snapshot(root) == before


def test_new_scenes_are_added_without_touching_others(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    make_synthetic_dataset(root, scenes=["camera"], size=64)
    before = _snapshot(root)
    sequences = make_synthetic_dataset(root, scenes=["camera", "v_coins"], size=64)
    after = _snapshot(root)
    assert [s.name for s in sequences] == ["i_camera", "v_camera", "v_coins"]
    for name, value in before.items():
        if name != MANIFEST_NAME:
            assert after[name] == value
    assert sorted(json.loads((root / MANIFEST_NAME).read_text())["scenes"]) == [
        "i_camera",
        "v_camera",
        "v_coins",
    ]


def test_damaged_scene_is_regenerated(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    make_synthetic_dataset(root, scenes=["camera"], size=64)
    before = _snapshot(root)
    (root / "v_camera" / "4.png").unlink()
    (root / "i_camera" / "H_1_3").write_text("1 0 0\n0 1 0\n0 0 1\n\n\n")  # size differs
    make_synthetic_dataset(root, scenes=["camera"], size=64)
    after = _snapshot(root)
    assert {k: v[1] for k, v in after.items()} == {k: v[1] for k, v in before.items()}


def test_other_seed_or_size_regenerates_and_drops_stale_scenes(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    make_synthetic_dataset(root, scenes=["camera", "coins"], size=64)
    (root / "i_coins" / "mine.txt").write_text("not written by the generator")
    sequences = make_synthetic_dataset(root, scenes=["v_camera"], seed=3, size=64)
    assert [s.name for s in sequences] == ["v_camera"]
    assert sorted(p.name for p in root.iterdir()) == sorted([MANIFEST_NAME, "i_coins", "v_camera"])
    assert [p.name for p in (root / "i_coins").iterdir()] == ["mine.txt"]  # only ours deleted
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["seed"] == 3 and list(manifest["scenes"]) == ["v_camera"]
    reference = make_synthetic_dataset(tmp_path / "fresh", scenes=["v_camera"], seed=3, size=64)
    for a, b in zip(sequences[0].image_paths, reference[0].image_paths, strict=True):
        assert a.read_bytes() == b.read_bytes()
    resized = make_synthetic_dataset(root, scenes=["v_camera"], seed=3, size=48)
    assert resized[0].shape(1) == (48, 48)


# -- errors ------------------------------------------------------------------------------------


def test_refuses_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "i_camera").mkdir()
    with pytest.raises(InvalidInputError, match=f"not empty and has no {MANIFEST_NAME}"):
        make_synthetic_dataset(tmp_path, scenes=["camera"], size=64)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="is not a directory"):
        make_synthetic_dataset(tmp_path / "file", scenes=["camera"], size=64)


@pytest.mark.parametrize(
    "text", ["{not json", "[1, 2]", '{"generator": "someone else", "scenes": {}}']
)
def test_bad_manifest(tmp_path: Path, text: str) -> None:
    (tmp_path / MANIFEST_NAME).write_text(text)
    with pytest.raises(InvalidInputError, match=MANIFEST_NAME):
        make_synthetic_dataset(tmp_path, scenes=["camera"], size=64)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"scenes": ["camera", "x_camera", "horse"]},
            r"unknown synthetic scene\(s\) \['x_camera', 'horse'\]",
        ),
        ({"scenes": []}, "selects no scene"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"seed": 1.5}, "seed must be a non-negative integer"),
        ({"seed": True}, "seed must be a non-negative integer"),
        ({"size": 16}, r"size must be an integer >= 32"),
        ({"size": 64.0}, r"size must be an integer >= 32"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    kwargs = {"scenes": ["camera"], "size": 64, **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        make_synthetic_dataset(tmp_path / "bench", **kwargs)
    assert not (tmp_path / "bench").exists()  # nothing written
