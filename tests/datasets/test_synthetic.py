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
from scipy.spatial.transform import Rotation

from metricalc.datasets import photometric, scenes, viewpoint
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


def test_every_photometric_step_is_applied_and_grows() -> None:
    rng = np.random.default_rng(3)
    shape = (60, 80)
    # relighting: a flat relief has upright normals
    flat = photometric._normals(np.full(shape, 0.5, np.float32), np.random.default_rng(0))
    np.testing.assert_allclose(flat, np.broadcast_to([0, 0, 1], (*shape, 3)), atol=1e-6)
    # cast shadows: darker inside the ellipse, untouched far outside, deeper with t
    shadow = photometric._Shadow(
        centre=np.array([40.0, 30.0]),
        axes=np.array([15.0, 10.0]),
        angle=0.3,
        drift=np.zeros(2),
        depth=0.5,
        edge=3.0,
    )
    factors = [photometric._shadow_factor([shadow], t, shape) for t in (0.2, 0.6, 1.0)]
    centre = 1 / (1 + np.exp(-10 / 3))  # the soft mask at r = 0: steepness = short axis / edge
    expected = [1 - 0.5 * t * centre for t in (0.2, 0.6, 1.0)]
    np.testing.assert_allclose([f[30, 40] for f in factors], expected, rtol=1e-5)
    assert all(abs(float(f[0, 0]) - 1) < 1e-4 for f in factors)
    # smooth fields: in [-1, 1], reaching 1, and smooth (neighbours close)
    field = photometric.smooth_field(rng, shape, 3)
    assert float(np.abs(field).max()) == 1.0 and np.abs(np.diff(field, axis=1)).max() < 0.1
    # the tone curve: monotone at t = 0.2, not at t = 1 (A > 1)
    values = {"exposure": 0.0, "gamma": 0.3, "tone": 1.3, "tone_frequency": 2.0}
    ramp = np.linspace(0, 1, 1001, dtype=np.float32)
    mild = photometric._tone(ramp, 0.2, 1.0, {**values, "tone_phase": 0.0})
    hard = photometric._tone(ramp, 1.0, 1.0, {**values, "tone_phase": 0.0})
    assert np.diff(mild).min() > 0 and np.diff(hard).min() < 0
    # sensor noise: signal-dependent
    spread = photometric._noise_spread(
        np.array([0.0, 0.5, 1.0]), {"shot_noise": 1e-3, "read_noise": 0.01}
    )
    np.testing.assert_allclose(spread, np.sqrt([1e-4, 6e-4, 11e-4]), rtol=1e-6)


def test_photometric_change_grows_on_a_flat_field() -> None:
    flat = np.full((60, 80, 3), 128, np.uint8)
    changed = [x.astype(float) for x in photometric_change(flat, np.random.default_rng(3))]
    for before, after in itertools.pairwise(changed):
        assert np.abs(after - 128).mean() > np.abs(before - 128).mean()
        # colour shift: the channel means drift apart
        assert np.ptp(after.mean(axis=(0, 1))) > np.ptp(before.mean(axis=(0, 1)))
    # blur: a step edge gets wider with k
    step = np.zeros((20, 40), np.uint8)
    step[:, 20:] = 200
    ramps = [x[10].astype(float) for x in photometric_change(step, np.random.default_rng(1))]
    widths = [np.count_nonzero(np.abs(np.diff(r)) > 10) for r in ramps]
    assert widths[-1] > widths[0]


def test_jpeg_is_deterministic_and_lossy_by_quality() -> None:
    image = load_photograph("astronaut", size=96)
    good, bad = photometric.jpeg(image, 95), photometric.jpeg(image, 30)
    assert good.shape == image.shape and good.dtype == np.uint8
    np.testing.assert_array_equal(good, photometric.jpeg(image, 95))
    error = [np.abs(x.astype(int) - image).mean() for x in (good, bad)]
    assert 0 < error[0] < error[1]
    with pytest.raises(InvalidInputError, match="JPEG quality must be in"):
        photometric.jpeg(image, 101)


def test_gray_input_gets_no_colour_channels() -> None:
    changed = photometric_change(np.full((20, 30), 90, np.uint8), np.random.default_rng(0))
    assert all(x.shape == (20, 30) and x.dtype == np.uint8 for x in changed)


def _jacobian(H: np.ndarray, x: float, y: float) -> np.ndarray:
    p = H @ [x, y, 1.0]
    return (H[:2, :2] * p[2] - np.outer(p[:2], H[2, :2])) / p[2] ** 2


def test_plane_homography_is_the_plane_seen_by_the_second_camera() -> None:
    shape = (120, 160)
    centre = (79.5, 59.5)
    assert np.allclose(
        viewpoint.plane_homography(shape, focal=1, tilt=0, azimuth=0, roll=0, zoom=1), np.eye(3)
    )
    # roll only: a rotation about the centre; zoom only: a scaling about the centre
    H = viewpoint.plane_homography(shape, focal=1, tilt=0, azimuth=0, roll=0.5, zoom=1.5)
    J = _jacobian(H, *centre)
    np.testing.assert_allclose(
        J, 1.5 * np.array([[np.cos(0.5), -np.sin(0.5)], [np.sin(0.5), np.cos(0.5)]]), atol=1e-12
    )
    # tilt by phi about the x axis: the centre stays, y shrinks by cos(phi), x is kept
    H = viewpoint.plane_homography(shape, focal=1, tilt=1.0, azimuth=0, roll=0, zoom=1)
    np.testing.assert_allclose(H @ [*centre, 1] / (H @ [*centre, 1])[2], [*centre, 1], atol=1e-9)
    np.testing.assert_allclose(np.linalg.svd(_jacobian(H, *centre))[1], [1, np.cos(1.0)], atol=1e-9)
    # against an explicit projection of 3-D plane points by both cameras
    rng = np.random.default_rng(0)
    f, azimuth, tilt, roll, zoom, offset = 1.1 * 160, 0.7, 0.9, -0.4, 0.6, (0.1, -0.05)
    H = viewpoint.plane_homography(
        shape, focal=1.1, tilt=tilt, azimuth=azimuth, roll=roll, zoom=zoom, offset=offset
    )
    K = np.array([[f, 0, 79.5], [0, f, 59.5], [0, 0, 1]])
    axis = np.array([np.cos(azimuth), np.sin(azimuth), 0.0])
    T = Rotation.from_rotvec(tilt * axis).as_matrix()
    R = Rotation.from_rotvec([0, 0, roll]).as_matrix() @ T.T
    camera = np.array([*offset, 1.0]) - T[:, 2] / zoom
    points = np.c_[rng.uniform(-0.4, 0.4, (50, 2)), np.ones(50)]  # on the plane Z = 1
    seen_1, seen_2 = points @ K.T, (points - camera) @ R.T @ K.T
    mapped = seen_1 @ H.T
    np.testing.assert_allclose(
        mapped[:, :2] / mapped[:, 2:], seen_2[:, :2] / seen_2[:, 2:], atol=1e-8
    )


def test_viewpoint_changes_grow_and_stay_in_frame() -> None:
    for seed in range(25):
        for shape in ((480, 640), (640, 427), (172, 448)):
            Hs = viewpoint_homographies(shape, np.random.default_rng(seed))
            height, width = shape
            corners = np.array(
                [[0, 0, 1], [width - 1, 0, 1], [width - 1, height - 1, 1], [0, height - 1, 1]],
                float,
            ).T
            moved, foreshortening, rolled = [], [], []
            for H in Hs:
                p = H @ corners
                assert (p[2] > 0).all()
                moved.append(np.abs(p[:2] / p[2] - corners[:2]).mean())
                visible, filled = viewpoint.coverage(H, shape)
                assert visible >= viewpoint.MIN_VISIBLE and filled >= viewpoint.MIN_FILLED
                assert viewpoint.in_front(H, shape)  # no horizon: the warp is the plane's
                U, singular, Vt = np.linalg.svd(_jacobian(H, (width - 1) / 2, (height - 1) / 2))
                foreshortening.append(singular[1] / singular[0])
                rotation = U @ Vt
                rolled.append(abs(np.arctan2(rotation[1, 0], rotation[0, 0])))
                assert abs(H[2, :2]).max() > 1e-6  # perspective
            assert moved[-1] > moved[0], (seed, shape, moved)
            assert np.all(np.diff(foreshortening) < 0), (seed, shape, foreshortening)
            assert rolled[-1] > np.radians(10), (seed, shape, rolled)


def test_viewpoint_changes_reach_strong_tilt_and_scale() -> None:
    scales, tilts = [], []
    for seed in range(25):
        H = viewpoint_homographies((480, 640), np.random.default_rng(seed))[-1]
        singular = np.linalg.svd(_jacobian(H, 319.5, 239.5))[1]
        scales.append(np.sqrt(singular.prod()))
        tilts.append(singular[1] / singular[0])
    assert max(scales) > 1.4 and min(scales) < 0.6  # zoom in and out, up to about 2x
    assert min(tilts) < 0.7  # strong foreshortening (a tilt of more than 45 degrees)


def test_viewpoint_reference_is_the_mirrored_photograph(dataset: tuple[Path, dict]) -> None:
    _, sequences = dataset
    for name in ("astronaut", "camera"):
        np.testing.assert_array_equal(
            sequences[f"v_{name}"].image(1), sequences[f"i_{name}"].image(1)[:, ::-1]
        )


def test_written_homography_is_the_one_used_to_warp(dataset: tuple[Path, dict]) -> None:
    """The H_1_k read back from the text file is the warp that made image k.

    Exactly: redoing the scene's draws with the read-back homographies reproduces every image
    byte for byte. Up to the added blur and noise: image k at the projection H_1_k p matches
    image 1 at p much better than at a projection two pixels off, and image k is close to image
    1 warped by H_1_k.
    """
    root, _ = dataset
    rng = np.random.default_rng(0)
    for seq in load_sequences(root, scenes=["v_astronaut", "v_brick", "v_camera"]):
        height, width = seq.shape(1)
        draws = scenes._scene_rng(0, seq.name)
        assert np.array_equal(viewpoint_homographies((height, width), draws), seq.homographies)
        read_back = [seq.homography(k) for k in range(2, 7)]
        redone = viewpoint.second_photographs(seq.image(1), read_back, draws)
        for k in range(2, 7):
            np.testing.assert_array_equal(redone[k - 2], seq.image(k))
            H = seq.homography(k)
            warped = viewpoint.warp(seq.image(1), H).astype(float)
            inside = viewpoint.warp(np.full((height, width), 255, np.uint8), H) == 255
            moved = np.array([[1, 0, 2], [0, 1, 2], [0, 0, 1]]) @ H  # two pixels off
            off = viewpoint.warp(seq.image(1), moved)
            inside &= viewpoint.warp(np.full((height, width), 255, np.uint8), moved) == 255
            difference = np.abs(warped - seq.image(k))[inside].mean()
            shifted = np.abs(off.astype(float) - seq.image(k))[inside].mean()
            assert difference < 0.8 * shifted, (seq.name, k, difference, shifted)
            for channel in range(seq.image(1).shape[2] if seq.image(1).ndim == 3 else 1):
                reference = np.atleast_3d(seq.image(1))[..., channel].astype(float)
                image = np.atleast_3d(seq.image(k))[..., channel].astype(float)
                source = np.c_[rng.integers(4, width - 4, 400), rng.integers(4, height - 4, 400)]
                target = _apply(H, source)
                ok = (target > 1).all(axis=1) & (target < [width - 2, height - 2]).all(axis=1)
                assert ok.sum() > 60
                at_source = reference[source[ok, 1], source[ok, 0]]
                error = np.abs(_sample(image, target[ok]) - at_source)
                shifted = np.abs(_sample(image, target[ok] + 2) - at_source)
                assert error.mean() < 0.8 * shifted.mean(), (seq.name, k, channel)


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
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"seed": 1.5}, "seed must be an integer >= 0"),
        ({"seed": True}, "seed must be an integer >= 0"),
        ({"size": 16}, r"size must be an integer >= 32"),
        ({"size": 64.0}, r"size must be an integer >= 32"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    kwargs = {"scenes": ["camera"], "size": 64, **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        make_synthetic_dataset(tmp_path / "bench", **kwargs)
    assert not (tmp_path / "bench").exists()  # nothing written
