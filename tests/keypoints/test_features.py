"""Feature extraction (native and locked keypoints) and bring-your-own feature files.

The sequences are stand-ins with the interface of ``metricalc.keypoints.sequences.Sequence``
(name, image(k), gray(k), shape(k)): skimage photographs warped by known homographies.
"""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
from skimage import data

from metricalc.errors import InvalidInputError
from metricalc.keypoints.features import (
    DEFAULT_METHODS,
    Features,
    extract,
    load_features,
    save_features,
)
from metricalc.keypoints.geometry import inside

SIZE = 320


def homography(k: int) -> np.ndarray:
    """A growing rotation + scale + translation + small projective term about the centre."""
    if k == 1:
        return np.eye(3)
    H = np.eye(3)
    H[:2] = cv2.getRotationMatrix2D((SIZE / 2, SIZE / 2), 4.0 * k, 1.0 + 0.04 * k)
    H[:2, 2] += (2.0 * k, -1.5 * k)
    H[2, :2] = (1e-5 * k, -0.5e-5 * k)
    return H


class StandIn:
    """The Sequence interface (name, image, gray, shape) over in-memory images."""

    def __init__(self, name: str, photo: np.ndarray, *, warp: bool) -> None:
        self.name = name
        base = cv2.resize(photo, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        self.images = []
        for k in range(1, 7):
            if warp:
                self.images.append(cv2.warpPerspective(base, homography(k), (SIZE, SIZE)))
            else:  # illumination: growing gain and offset
                self.images.append(cv2.convertScaleAbs(base, alpha=1 - 0.08 * k, beta=4 * k))

    def image(self, k: int) -> np.ndarray:
        return self.images[k - 1]

    def gray(self, k: int) -> np.ndarray:
        image = self.images[k - 1]
        return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if image.ndim == 3 else image

    def shape(self, k: int) -> tuple[int, int]:
        return self.images[k - 1].shape[:2]


@pytest.fixture(scope="module")
def sequences() -> list[StandIn]:
    return [
        StandIn("i_camera", data.camera(), warp=False),
        StandIn("v_astronaut", data.astronaut(), warp=True),
    ]


@pytest.fixture(scope="module")
def native(sequences):
    return extract(sequences)


@pytest.fixture(scope="module")
def locked(sequences):
    return extract(sequences, locked="sift")


def all_features(fs):
    for method, scenes in fs.items():
        for scene, images in scenes.items():
            for k, features in images.items():
                yield method, scene, k, features


# ------------------------------------------------------------------------------------------
# extract
# ------------------------------------------------------------------------------------------


EXPECTED = {
    "sift": (np.float32, 128),
    "rootsift": (np.float32, 128),
    "orb": (np.uint8, 32),
    "brief": (np.uint8, 32),
}


@pytest.mark.parametrize("mode", ["native", "locked"])
def test_layout_dtypes_and_shapes(mode, native, locked, sequences):
    fs = native if mode == "native" else locked
    assert list(fs) == list(DEFAULT_METHODS)
    for scenes in fs.values():
        assert list(scenes) == [s.name for s in sequences]
        for images in scenes.values():
            assert sorted(images) == [1, 2, 3, 4, 5, 6]
    for method, _, _, f in all_features(fs):
        dtype, dims = EXPECTED[method]
        assert isinstance(f, Features)
        assert f.keypoints.dtype == np.float64 and f.keypoints.shape == (len(f), 2)
        assert f.descriptors.dtype == dtype and f.descriptors.shape == (len(f), dims)
        assert f.binary == (dtype == np.uint8)
        assert 50 <= len(f) <= 2000


def test_native_each_method_uses_its_own_detector(native, sequences):
    for s in sequences:
        for k in range(1, 7):
            sift, rootsift = native["sift"][s.name][k], native["rootsift"][s.name][k]
            orb, brief = native["orb"][s.name][k], native["brief"][s.name][k]
            np.testing.assert_array_equal(sift.keypoints, rootsift.keypoints)  # both SIFT's
            assert len(orb) != len(sift) or not np.array_equal(orb.keypoints, sift.keypoints)
            assert len(brief) != len(orb) or not np.array_equal(brief.keypoints, orb.keypoints)
            # FAST and ORB keypoints sit on integer pixels; SIFT's are sub-pixel
            assert np.array_equal(brief.keypoints, np.round(brief.keypoints))
            assert not np.array_equal(sift.keypoints, np.round(sift.keypoints))


@pytest.mark.parametrize("detector", ["sift", "orb", "brief"])
def test_locked_keypoints_are_identical_for_every_descriptor(detector, locked, sequences):
    fs = locked if detector == "sift" else extract(sequences, locked=detector)
    for s in sequences:
        for k in range(1, 7):
            reference = fs[detector][s.name][k].keypoints
            assert len(reference) >= 50
            for method in DEFAULT_METHODS:
                np.testing.assert_array_equal(fs[method][s.name][k].keypoints, reference)


def test_locked_keypoints_come_from_the_detector(native, locked, sequences):
    """Locked SIFT keypoints are native SIFT's (all describable at border 40), same descriptors."""
    for s in sequences:
        for k in range(1, 7):
            mine, theirs = native["sift"][s.name][k], locked["sift"][s.name][k]
            np.testing.assert_array_equal(theirs.keypoints, mine.keypoints)
            np.testing.assert_array_equal(theirs.descriptors, mine.descriptors)
            np.testing.assert_array_equal(
                locked["rootsift"][s.name][k].descriptors, native["rootsift"][s.name][k].descriptors
            )
            # ORB described at SIFT keypoints differs from ORB at its own keypoints
            orb_locked, orb_native = locked["orb"][s.name][k], native["orb"][s.name][k]
            assert not np.array_equal(orb_locked.keypoints[:10], orb_native.keypoints[:10])


@pytest.mark.parametrize("mode", ["native", "locked"])
def test_border_filter(mode, native, locked, sequences):
    fs = native if mode == "native" else locked
    for method, scene, k, f in all_features(fs):
        shape = next(s for s in sequences if s.name == scene).shape(k)
        assert inside(f.keypoints, shape, 40.0).all(), (method, scene, k)
    wide = extract(
        sequences[:1], ("sift", "brief"), locked=None if mode == "native" else "sift", border=90.0
    )
    for method, scene, k, f in all_features(wide):
        assert inside(f.keypoints, sequences[0].shape(k), 90.0).all()
        assert 0 < len(f) < len(fs[method][scene][k])


def test_keypoints_a_describer_cannot_describe_are_dropped_for_every_method(sequences):
    """border=0: ORB (31 px) and BRIEF (24 px) cannot describe keypoints at the edge; locked
    mode drops them for all methods, native mode only for the method concerned."""
    seq = sequences[:1]
    lk = extract(seq, locked="sift", border=0.0)
    nat = extract(seq, ("sift", "brief"), border=0.0)
    for k in range(1, 7):
        points = lk["sift"]["i_camera"][k].keypoints
        assert inside(points, seq[0].shape(k), 30.0).all()
        assert len(points) < len(nat["sift"]["i_camera"][k])  # SIFT alone keeps edge keypoints
        assert not inside(nat["sift"]["i_camera"][k].keypoints, seq[0].shape(k), 24.0).all()
        assert inside(nat["brief"]["i_camera"][k].keypoints, seq[0].shape(k), 23.0).all()
        for method in DEFAULT_METHODS:
            np.testing.assert_array_equal(lk[method]["i_camera"][k].keypoints, points)


@pytest.mark.parametrize("method", ["sift", "orb", "brief"])
def test_max_keypoints_keeps_the_strongest(method, sequences):
    seq = sequences[1:]
    every = extract(seq, (method,), max_keypoints=None)
    few = extract(seq, (method,), max_keypoints=40)
    for k in range(1, 7):
        full, top = every[method]["v_astronaut"][k], few[method]["v_astronaut"][k]
        assert len(top) == 40 < len(full)
        # output is ordered by decreasing response, so the 40 strongest are the first 40
        np.testing.assert_array_equal(top.keypoints, full.keypoints[:40])
        np.testing.assert_array_equal(top.descriptors, full.descriptors[:40])


def test_rootsift_is_the_square_root_of_l1_normalised_sift(native, locked):
    for fs in (native, locked):
        for scene, images in fs["rootsift"].items():
            for k, f in images.items():
                root = f.descriptors.astype(np.float64)
                assert (root >= 0).all()
                np.testing.assert_allclose((root**2).sum(axis=1), 1.0, rtol=1e-5)
                sift = fs["sift"][scene][k].descriptors.astype(np.float64)
                expected = np.sqrt(sift / sift.sum(axis=1, keepdims=True))
                np.testing.assert_allclose(root, expected, rtol=1e-5, atol=1e-7)


def test_binary_descriptors_use_all_bits(native):
    """Packed bits, not bytes holding 0/1: the bytes take many values."""
    for method in ("orb", "brief"):
        bits = native[method]["v_astronaut"][1].descriptors
        assert bits.shape[1] == 32 and len(np.unique(bits)) > 100
        unpacked = np.unpackbits(bits, axis=1)
        assert unpacked.shape[1] == 256 and 0.2 < unpacked.mean() < 0.8


@pytest.mark.parametrize("locked_to", [None, "sift", "brief"])
def test_extraction_is_deterministic(locked_to, native, locked, sequences):
    first = {None: native, "sift": locked}.get(locked_to) or extract(sequences, locked=locked_to)
    again = extract(sequences, locked=locked_to)
    for method, scene, k, f in all_features(first):
        g = again[method][scene][k]
        np.testing.assert_array_equal(f.keypoints, g.keypoints)
        np.testing.assert_array_equal(f.descriptors, g.descriptors)
        assert f.descriptors.dtype == g.descriptors.dtype


def test_extraction_does_not_depend_on_opencv_threads(native, sequences):
    threads = cv2.getNumThreads()
    try:
        cv2.setNumThreads(1)
        single = extract(sequences[1:])
    finally:
        cv2.setNumThreads(threads)
    for method, scene, k, f in all_features(single):
        np.testing.assert_array_equal(f.keypoints, native[method][scene][k].keypoints)
        np.testing.assert_array_equal(f.descriptors, native[method][scene][k].descriptors)


def test_subset_of_methods_and_single_name(sequences):
    fs = extract(sequences[:1], "orb", max_keypoints=100)
    assert list(fs) == ["orb"] and len(fs["orb"]["i_camera"][3]) == 100
    fs = extract(sequences[:1], ["brief", "rootsift"], locked="orb", max_keypoints=100)
    assert list(fs) == ["brief", "rootsift"]
    np.testing.assert_array_equal(
        fs["brief"]["i_camera"][2].keypoints, fs["rootsift"]["i_camera"][2].keypoints
    )


def test_progress_bar_runs(sequences, capsys):
    extract(sequences[:1], ("orb",), max_keypoints=50, progress=True)
    assert "features" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"methods": ("sift", "surf")},
            "unknown method 'surf'.*sift, rootsift, dspsift, orb, brief, brisk, akaze, kaze, "
            "raw_patch",
        ),
        ({"methods": ()}, "methods is empty"),
        ({"methods": ("orb", "orb")}, "twice"),
        ({"locked": "harris"}, "locked='harris' is not a built-in detector.*sift, rootsift"),
        ({"max_keypoints": 0}, "max_keypoints"),
        ({"max_keypoints": 2.5}, "max_keypoints"),
        ({"border": -1.0}, "border"),
        ({"border": float("nan")}, "border"),
    ],
)
def test_bad_arguments(kwargs, message, sequences):
    with pytest.raises(InvalidInputError, match=message):
        extract(sequences[:1], **kwargs)


def test_bad_sequences(sequences):
    with pytest.raises(InvalidInputError, match="'i_camera' appears twice"):
        extract([sequences[0], sequences[0]], ("orb",))

    class FloatImages(StandIn):
        def gray(self, k):
            return super().gray(k).astype(np.float32)

    bad = FloatImages("i_float", data.camera(), warp=False)
    with pytest.raises(InvalidInputError, match=r"'i_float' image 1.*float32.*expected uint8"):
        extract([bad], ("orb",))

    class WrongShape(StandIn):
        def shape(self, k):
            return (10, 10)

    bad = WrongShape("i_shape", data.camera(), warp=False)
    with pytest.raises(InvalidInputError, match="'i_shape' image 1: shape"):
        extract([bad], ("orb",))


def test_images_too_small_for_any_keypoint_are_refused_not_empty():
    from metricalc.keypoints.features import extract_image

    tiny = np.full((3, 3), 128, np.uint8)
    with pytest.raises(InvalidInputError, match=r"is 3 x 3 px; expected at least 81 px per side"):
        extract_image(tiny, ("sift",))
    with pytest.raises(InvalidInputError, match=r"3 x 3 px; expected at least 16 px per side"):
        extract_image(tiny, ("sift",), border=0)
    small = np.ascontiguousarray(data.camera()[150:214, 200:296])  # the cameraman: texture
    with pytest.raises(InvalidInputError, match=r"96 x 64 px; .* lower --border"):
        extract_image(small, ("sift",))  # 40 px of border on both sides leave nothing
    kept = extract_image(small, ("sift",), border=8)["sift"]
    assert len(kept) > 0

    class Tiny(StandIn):
        def gray(self, k):
            return np.full((3, 3), 50, np.uint8)

        def shape(self, k):
            return (3, 3)

    with pytest.raises(InvalidInputError, match=r"scene 'i_tiny' image 1 is 3 x 3 px"):
        extract([Tiny("i_tiny", data.camera(), warp=False)], ("orb",))


# ------------------------------------------------------------------------------------------
# Features
# ------------------------------------------------------------------------------------------


def test_features_coerce_and_validate():
    f = Features(np.array([[1, 2], [3, 4]], dtype=np.int32), np.ones((2, 4), dtype=np.float64))
    assert f.keypoints.dtype == np.float64 and f.descriptors.dtype == np.float32
    assert not f.binary and len(f) == 2 and "n=2" in repr(f)
    empty = Features(np.zeros((0, 2)), np.zeros((0, 32), dtype=np.uint8))
    assert len(empty) == 0 and empty.binary
    with pytest.raises(InvalidInputError, match="Features: 'descriptors' has 3 rows"):
        Features(np.zeros((2, 2)), np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(InvalidInputError, match="dtype bool"):
        Features(np.zeros((2, 2)), np.zeros((2, 256), dtype=bool))


# ------------------------------------------------------------------------------------------
# save / load (bring your own)
# ------------------------------------------------------------------------------------------


def test_save_load_round_trip(native, tmp_path):
    subset = {m: native[m] for m in ("rootsift", "brief")}
    save_features(tmp_path, subset)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) == 2 * 2 * 6 and "brief/i_camera/1.npz" in files
    assert not any(name.endswith(".tmp") for name in files)
    loaded = load_features(tmp_path)
    assert list(loaded) == ["brief", "rootsift"]  # sorted folder names
    for method, scene, k, f in all_features(subset):
        g = loaded[method][scene][k]
        assert g.descriptors.dtype == f.descriptors.dtype
        np.testing.assert_array_equal(g.keypoints, f.keypoints)
        np.testing.assert_array_equal(g.descriptors, f.descriptors)
    only = load_features(tmp_path, descriptors=["rootsift"])
    assert list(only) == ["rootsift"] and list(only["rootsift"]) == ["i_camera", "v_astronaut"]
    # saving again replaces the files in place
    save_features(tmp_path, subset)
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 24


def write_tree(root, *, n=5, dims=16, dtype=np.float32, scenes=("i_a", "v_b")):
    """A valid BYO tree for descriptor 'mine'; returns the path of i_a/3.npz."""
    rng = np.random.default_rng(0)
    for scene in scenes:
        folder = root / "mine" / scene
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(1, 7):
            descriptors = rng.integers(0, 255, (n, dims)).astype(dtype)
            np.savez(
                folder / f"{k}.npz", keypoints=rng.uniform(40, 200, (n, 2)), descriptors=descriptors
            )
    return root / "mine" / scenes[0] / "3.npz"


def test_load_converts_any_float_to_float32_and_keeps_uint8(tmp_path):
    write_tree(tmp_path / "a", dtype=np.float64)
    write_tree(tmp_path / "b", dtype=np.float16)
    write_tree(tmp_path / "c", dtype=np.uint8)
    assert load_features(tmp_path / "a")["mine"]["i_a"][1].descriptors.dtype == np.float32
    assert load_features(tmp_path / "b")["mine"]["v_b"][6].descriptors.dtype == np.float32
    assert load_features(tmp_path / "c", descriptors="mine")["mine"]["i_a"][2].binary


def overwrite(path, **arrays):
    path.unlink()
    np.savez(path, **arrays)


def write_npy(path):
    with open(path, "wb") as stream:
        np.save(stream, KP)


KP = np.full((5, 2), 50.0)
DESC = np.ones((5, 16), dtype=np.float32)

BREAKAGES = {
    "missing file": (lambda p: p.unlink(), "missing features file .*3.npz"),
    "no keypoints": (lambda p: overwrite(p, descriptors=DESC), "3.npz has no 'keypoints'"),
    "no descriptors": (lambda p: overwrite(p, keypoints=KP), "3.npz has no 'descriptors'"),
    "no arrays": (lambda p: overwrite(p, other=KP), "no 'keypoints' or 'descriptors'"),
    "keypoints 1-D": (
        lambda p: overwrite(p, keypoints=KP.ravel(), descriptors=DESC),
        r"3.npz: 'keypoints' has shape \(10,\); expected N x 2",
    ),
    "keypoints N x 3": (
        lambda p: overwrite(p, keypoints=np.ones((5, 3)), descriptors=DESC),
        r"3.npz: 'keypoints' has shape \(5, 3\)",
    ),
    "descriptors 1-D": (
        lambda p: overwrite(p, keypoints=KP, descriptors=DESC[:, 0]),
        r"3.npz: 'descriptors' has shape \(5,\) \(1-D\)",
    ),
    "descriptors 3-D": (
        lambda p: overwrite(p, keypoints=KP, descriptors=DESC[:, :, None]),
        "3.npz: 'descriptors' has shape .*3-D",
    ),
    "descriptors 0 columns": (
        lambda p: overwrite(p, keypoints=KP, descriptors=DESC[:, :0]),
        "3.npz: 'descriptors' has 0 columns",
    ),
    "row mismatch": (
        lambda p: overwrite(p, keypoints=KP[:4], descriptors=DESC),
        "3.npz: 'descriptors' has 5 rows but 'keypoints' has 4",
    ),
    "int descriptors": (
        lambda p: overwrite(p, keypoints=KP, descriptors=DESC.astype(np.int64)),
        "3.npz: 'descriptors' has dtype int64; expected a float type .* or uint8",
    ),
    "bool descriptors": (
        lambda p: overwrite(p, keypoints=KP, descriptors=DESC.astype(bool)),
        "3.npz: 'descriptors' has dtype bool.*np.packbits",
    ),
    "complex keypoints": (
        lambda p: overwrite(p, keypoints=KP.astype(complex), descriptors=DESC),
        "3.npz: 'keypoints' has dtype complex128",
    ),
    "nan keypoints": (
        lambda p: overwrite(p, keypoints=np.where(KP > 0, np.nan, 0), descriptors=DESC),
        "3.npz: 'keypoints' contains non-finite",
    ),
    "inf descriptors": (
        lambda p: overwrite(p, keypoints=KP, descriptors=np.full((5, 16), np.inf)),
        "3.npz: 'descriptors' contains non-finite",
    ),
    "float32 overflow": (
        lambda p: overwrite(p, keypoints=KP, descriptors=np.full((5, 16), 1e300)),
        "3.npz: 'descriptors' has values too large for float32",
    ),
    "dims differ from other images": (
        lambda p: overwrite(p, keypoints=KP, descriptors=np.ones((5, 8), dtype=np.float32)),
        "3.npz: descriptors are 8 x float32 but .*1.npz has 16 x float32",
    ),
    "dtype differs from other images": (
        lambda p: overwrite(p, keypoints=KP, descriptors=np.ones((5, 16), dtype=np.uint8)),
        "3.npz: descriptors are 16 x uint8 but .*1.npz has 16 x float32",
    ),
    "not a zip": (lambda p: p.write_bytes(b"not an archive"), "3.npz cannot be read"),
    "an .npy file": (write_npy, "3.npz is not an .npz archive"),
    "pickled objects": (
        lambda p: overwrite(p, keypoints=np.array([None] * 5, dtype=object), descriptors=DESC),
        "3.npz: an array cannot be read",
    ),
    "extra image": (
        lambda p: np.savez(p.with_name("7.npz"), keypoints=KP, descriptors=DESC),
        r"i_a has unexpected files \['7.npz'\]",
    ),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_load_refuses_bad_files_and_names_the_file(breakage, tmp_path):
    path = write_tree(tmp_path)
    load_features(tmp_path)  # valid before the breakage
    damage, message = BREAKAGES[breakage]
    damage(path)
    with pytest.raises(InvalidInputError, match=message) as caught:
        load_features(tmp_path)
    assert str(path.parent) in str(caught.value)


def test_load_refuses_missing_folders(tmp_path):
    with pytest.raises(InvalidInputError, match=f"features folder {re.escape(str(tmp_path))}/no"):
        load_features(tmp_path / "no")
    with pytest.raises(InvalidInputError, match="has no descriptor folders"):
        load_features(tmp_path)
    write_tree(tmp_path)
    with pytest.raises(InvalidInputError, match=r"missing descriptor folder .*/theirs"):
        load_features(tmp_path, descriptors=["mine", "theirs"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match=r"descriptor folder .*empty has no scene folders"):
        load_features(tmp_path)
    with pytest.raises(InvalidInputError, match="descriptors is empty"):
        load_features(tmp_path, descriptors=[])


def test_save_validates_before_writing(tmp_path):
    f = Features(np.full((1, 2), 50.0), np.ones((1, 4), dtype=np.float32))
    good = {k: f for k in range(1, 7)}
    with pytest.raises(InvalidInputError, match=r"images \[1, 2, 3, 4, 5\]; expected exactly"):
        save_features(tmp_path, {"ok": {"i_a": good}, "bad": {"i_a": {k: f for k in range(1, 6)}}})
    with pytest.raises(InvalidInputError, match="scene name 'a/b' cannot be a folder name"):
        save_features(tmp_path, {"ok": {"a/b": good}})
    with pytest.raises(InvalidInputError, match=r"descriptor name '\.\.' cannot be a folder name"):
        save_features(tmp_path, {"..": {"i_a": good}})
    with pytest.raises(InvalidInputError, match=r"\['ok'\]\['i_a'\]\[2\] is a str"):
        save_features(tmp_path, {"ok": {"i_a": {**good, 2: "x"}}})
    with pytest.raises(InvalidInputError, match="non-empty mapping"):
        save_features(tmp_path, {})
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.parametrize(
    "point, inside",
    [((-1e6, 50.0), False), ((50.0, 1e6), False), ((200.0, 50.0), False), ((-0.6, 5.0), False),
     ((199.5, 199.5), True), ((-0.5, -0.5), True)],
)
def test_keypoints_outside_their_image_are_refused(tmp_path, point, inside):
    """IdentityScene images are 200 x 200 px: x and y in [-0.5, 199.5] (pixel centres at
    integers). A keypoint outside is refused, naming the file, the keypoint and the size."""
    from metricalc.keypoints import evaluate
    from metricalc.keypoints.features import load_image_features
    from tests.shared_checks import IdentityScene

    rng = np.random.default_rng(0)
    points = np.vstack([rng.uniform(45, 155, (20, 2)), point])
    files = {}
    for k in range(1, 7):
        files[k] = tmp_path / f"{k}.npz"
        np.savez(files[k], keypoints=points, descriptors=rng.random((21, 8)))
    images = {k: load_image_features(path) for k, path in files.items()}
    run = lambda: evaluate(  # noqa: E731
        [IdentityScene("v_x", "viewpoint")], {"mine": {"v_x": images}},
        keypoints="external", bojanic=False,
    )  # fmt: skip
    if inside:
        assert run().sizes["descriptor"] == 1
        return
    message = (
        rf"features file {re.escape(str(files[1]))}: keypoint 20 at \({point[0]:.9g}, "
        rf"{point[1]:.9g}\) is outside the image \(200 x 200 px: x in \[-0.5, 199.5\]"
    )
    with pytest.raises(InvalidInputError, match=message):
        run()
