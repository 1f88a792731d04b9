"""The built-in methods DSP-SIFT, BRISK, AKAZE, KAZE and the raw patch.

Each is checked on a small image for shapes, dtypes and determinism, its own keypoints described
through the locked (foreign keypoint) path against native detect + compute, foreign keypoints of
many sizes, and against a slow obvious implementation where metricalc computes it itself
(DSP-SIFT: one SIFT compute per scale and copy; the raw patch: one warpAffine per keypoint).
BRISK, AKAZE and KAZE need OpenCV's contrib module from OpenCV 5 on (the project depends on
opencv-contrib-python-headless); their tests are skipped, saying so, where OpenCV lacks them.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

import metricalc.keypoints as kp
from metricalc.benchmarks.hpatches_sequences.experiment import DETECTORS as EXPERIMENT_DETECTORS
from metricalc.errors import InvalidInputError
from metricalc.keypoints.describers import DIMENSIONS, ImageDescriber, nonlinear_level
from metricalc.keypoints.detectors import (
    BUILTIN_METHODS,
    CONTRIB_METHODS,
    DEFAULT_METHODS,
    DETECTORS,
    Toolkit,
    available_methods,
    select,
)
from metricalc.keypoints.features import Features, detect_keypoints, extract, extract_image
from metricalc.keypoints.sift_family import (
    DSP_SCALES,
    raw_patch,
    raw_patch_levels,
    sample_patches,
    sift_octave,
)
from metricalc.report import study

HAVE_CONTRIB = set(CONTRIB_METHODS) <= set(available_methods())
NEEDS_CONTRIB = "OpenCV here has no BRISK/AKAZE/KAZE (install opencv-contrib-python-headless)"
NEW = ("dspsift", "brisk", "akaze", "kaze", "raw_patch")
SIZE = (256, 320)  # rows, columns


def method_params(methods):
    """pytest params, the contrib methods skipped where OpenCV lacks them."""
    marks = pytest.mark.skipif(not HAVE_CONTRIB, reason=NEEDS_CONTRIB)
    return [pytest.param(m, marks=marks) if m in CONTRIB_METHODS else m for m in methods]


@pytest.fixture(scope="module")
def gray() -> np.ndarray:
    image = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    return cv2.resize(image, SIZE[::-1], interpolation=cv2.INTER_AREA)


@pytest.fixture(scope="module")
def sift_kept(gray):
    return select(Toolkit(400).detect("sift", gray), gray.shape, 40.0, 400)


# ------------------------------------------------------------------------------------------
# Every new method: shapes, dtypes, determinism, locked == native on its own keypoints
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", method_params(NEW))
@pytest.mark.parametrize("locked", [None, "sift", "brief"])
def test_shapes_dtypes_and_determinism(method, locked, gray):
    one = extract_image(gray, method, locked=locked, max_keypoints=300)[method]
    again = extract_image(gray, method, locked=locked, max_keypoints=300)[method]
    dims, dtype = DIMENSIONS[method]
    assert one.descriptors.shape == (len(one), dims) and one.descriptors.dtype == dtype
    assert one.binary == (dtype == np.uint8)  # uint8 rows are matched by Hamming distance
    assert 50 <= len(one) <= 300
    assert np.isfinite(one.descriptors.astype(np.float64)).all()
    np.testing.assert_array_equal(one.keypoints, again.keypoints)
    np.testing.assert_array_equal(one.descriptors, again.descriptors)


def test_dimensions_of_the_spec():
    """AKAZE's MLDB is 486 bits in 61 bytes, KAZE 64 floats, BRISK 512 bits."""
    assert DIMENSIONS["akaze"] == (61, np.uint8) and (6 + 36 + 120) * 3 == 486
    assert DIMENSIONS["kaze"] == (64, np.float32) and DIMENSIONS["brisk"] == (64, np.uint8)
    assert DIMENSIONS["dspsift"] == (128, np.float32) and DIMENSIONS["raw_patch"][0] == 64


@pytest.mark.parametrize("method", method_params(("dspsift", "brisk", "akaze", "raw_patch")))
def test_locked_path_on_own_keypoints_equals_native(method, gray):
    """A method's own keypoints described as foreign keypoints (the octave / level recomputed
    from the size, as in locked mode) give the rows of native detect + compute."""
    tools = Toolkit(300)
    detector = DETECTORS[method]
    kept = select(tools.detect(detector, gray), gray.shape, 40.0, 300)
    native_index, native = ImageDescriber(tools.get, gray).describe(method, kept, detector)
    foreign_index, foreign = ImageDescriber(tools.get, gray).describe(method, kept, "fast")
    np.testing.assert_array_equal(foreign_index, native_index)
    np.testing.assert_array_equal(foreign, native)
    assert len(native_index) >= 50


@pytest.mark.skipif(not HAVE_CONTRIB, reason=NEEDS_CONTRIB)
def test_kaze_locked_path_on_own_keypoints(gray):
    """KAZE's sizes are refined between levels, so the level read back from the size is its
    own (and the rows equal) for most keypoints, never more than one level off."""
    tools = Toolkit(300)
    kept = select(tools.detect("kaze", gray), gray.shape, 40.0, 300)
    _, native = ImageDescriber(tools.get, gray).describe("kaze", kept, "kaze")
    _, foreign = ImageDescriber(tools.get, gray).describe("kaze", kept, "sift")
    levels = np.array([nonlinear_level("kaze", k.size, gray.shape) for k in kept])
    own = np.array([k.class_id for k in kept])
    same = levels == own
    assert np.abs(levels - own).max() <= 1 and same.mean() > 0.5
    np.testing.assert_array_equal(foreign[same], native[same])


@pytest.mark.parametrize("method", method_params(("brisk", "akaze", "kaze")))
def test_native_equals_opencv_detect_then_compute(method, gray):
    """Native = OpenCV's detector, the border and the cap, then OpenCV's compute() on the
    kept keypoints (KAZE's compute() differs from its detectAndCompute(): the detection
    overwrites the derivatives of the scale space, so metricalc never mixes the two)."""
    opencv = getattr(cv2, method.upper(), None) or getattr(cv2.xfeatures2d, method.upper())
    found = opencv.create().detect(gray, None)
    kept = select(found, gray.shape, 40.0, 300)
    described, rows = opencv.create().compute(gray, kept)
    mine = extract_image(gray, method, max_keypoints=300)[method]
    np.testing.assert_array_equal(mine.keypoints, np.array([k.pt for k in described]))
    np.testing.assert_array_equal(mine.descriptors, rows)


@pytest.mark.parametrize("method", method_params(("sift", "dspsift", "orb", *NEW[1:])))
def test_foreign_keypoints_of_many_sizes(method, gray):
    """Keypoints of another detector at sizes 2..64 px, with and without orientation: all
    described, finite, not constant, and sizes 4 and 64 at one position give different rows
    (ORB, BRISK and KAZE compute their own orientation, ORB sees every size below 31 px on its
    first level: some rows repeat)."""
    xs, ys = np.meshgrid(np.linspace(120, 200, 5), np.linspace(100, 156, 4))
    sizes = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
    keypoints = [
        cv2.KeyPoint(float(x), float(y), s, a, 1.0, 0, -1)
        for s in sizes
        for a in (-1.0, 30.0)
        for x, y in zip(xs.ravel(), ys.ravel(), strict=True)
    ]
    index, rows = ImageDescriber(Toolkit(None).get, gray).describe(method, keypoints, "fast")
    assert len(index) == len(keypoints)
    values = rows.astype(np.float64)
    assert np.isfinite(values).all()
    assert len(np.unique(values, axis=0)) >= 2 * 20
    per_size = values.reshape(len(sizes), 2, 20, -1)
    assert all(
        not np.array_equal(a, b) for a, b in zip(per_size[1, 0], per_size[5, 0], strict=True)
    )


@pytest.mark.skipif(not HAVE_CONTRIB, reason=NEEDS_CONTRIB)
def test_nonlinear_levels_follow_opencv_sizes():
    """AKAZE's level i has size 4.8 * 2**(i/4), KAZE's about 3.2 * 2**(i/4); AKAZE stops
    halving below 80 x 40 px (a 256 x 320 image has 3 octaves, 12 levels), as OpenCV does: its
    compute() takes the top level and refuses the next."""
    for level in range(16):
        assert nonlinear_level("akaze", 4.8 * 2 ** (level / 4), (480, 640)) == level
    assert nonlinear_level("akaze", 1e3, (99, 99)) == 3
    assert nonlinear_level("akaze", 1e3, SIZE) == 11
    assert nonlinear_level("kaze", 3.2 * 2 ** (9 / 4), SIZE) == 9
    assert nonlinear_level("kaze", 0.5, SIZE) == 1 and nonlinear_level("kaze", 1e4, SIZE) == 15
    image = np.zeros(SIZE, dtype=np.uint8)
    for method in ("akaze", "kaze"):
        top = nonlinear_level(method, 1e4, SIZE)
        opencv = Toolkit(None).get(method)
        opencv.compute(image, [cv2.KeyPoint(160, 128, 10, 0, 0, top // 4, top)])
        with pytest.raises(cv2.error):
            opencv.compute(image, [cv2.KeyPoint(160, 128, 10, 0, 0, top // 4 + 1, top + 1)])


# ------------------------------------------------------------------------------------------
# DSP-SIFT against a slow obvious implementation
# ------------------------------------------------------------------------------------------


def slow_dspsift(gray: np.ndarray, keypoints: list[cv2.KeyPoint], foreign: bool) -> np.ndarray:
    """One fresh SIFT compute per scale, one keypoint copy at a time; mean; L2 normalise.

    Each call also gets a keypoint of octave -1, so that SIFT builds its pyramid from the
    upsampled image as for detection (describers._compute_sift)."""
    sift = cv2.SIFT.create()
    sentinel = cv2.KeyPoint(20.0, 20.0, 1.0, 0.0, 0.0, sift_octave(1.0, gray.shape), 1)
    rows = np.zeros((len(keypoints), 128))
    for i, k in enumerate(keypoints):
        for factor in DSP_SCALES:
            size = k.size * factor
            own = factor == 1.0 and not foreign
            octave = k.octave if own else sift_octave(size, gray.shape)
            angle = k.angle if k.angle >= 0 else 0.0
            copy = cv2.KeyPoint(k.pt[0], k.pt[1], size, angle, k.response, octave, 0)
            described, one = sift.compute(gray, [copy, sentinel])
            assert [k.class_id for k in described] == [0, 1]
            rows[i] += one[0] / len(DSP_SCALES)
        rows[i] /= np.linalg.norm(rows[i])
    return rows


@pytest.mark.parametrize("foreign", [False, True])
def test_dspsift_equals_a_loop_over_scales(foreign, gray, sift_kept):
    keypoints = sift_kept[:60]
    if foreign:  # FAST-like: no orientation, sizes of another detector
        keypoints = [
            cv2.KeyPoint(k.pt[0], k.pt[1], 7.0 + j % 5, -1.0) for j, k in enumerate(keypoints)
        ]
    index, rows = ImageDescriber(Toolkit(None).get, gray).describe(
        "dspsift", keypoints, "fast" if foreign else "sift"
    )
    np.testing.assert_array_equal(index, np.arange(len(keypoints)))
    np.testing.assert_allclose(rows, slow_dspsift(gray, keypoints, foreign), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)


def test_dspsift_is_not_sift(gray):
    both = extract_image(gray, ("sift", "dspsift"), max_keypoints=200)
    sift, dsp = both["sift"].descriptors, both["dspsift"].descriptors
    np.testing.assert_array_equal(both["sift"].keypoints, both["dspsift"].keypoints)
    cosine = np.sum(sift * dsp, axis=1) / np.linalg.norm(sift, axis=1)
    assert 0.7 < np.median(cosine) < 0.999  # close to SIFT, yet pooled over larger domains


# ------------------------------------------------------------------------------------------
# The raw patch against one warpAffine per keypoint
# ------------------------------------------------------------------------------------------


def slow_raw_patch(gray: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per keypoint: the pyramid level, the affine map patch pixel -> level pixel, warpAffine
    (bilinear, replicated border), zero mean, unit norm."""
    levels = [gray.astype(np.float32)]
    while min(levels[-1].shape) >= 32:
        levels.append(cv2.pyrDown(levels[-1]))
    out = np.zeros((len(table), 64))
    which = raw_patch_levels(table[:, 2], len(levels))
    for i, (x, y, size, angle) in enumerate(table):
        theta = np.deg2rad(angle if angle >= 0 else 0.0)
        step, scale = 6.0 * size / 8, 2.0 ** which[i]
        c, s = np.cos(theta) * step, np.sin(theta) * step
        first = 0.5 - 4  # the first cell centre, in steps from the patch centre
        M = np.array(
            [
                [c, -s, x + first * (c - s) + 0.5],
                [s, c, y + first * (s + c) + 0.5],
            ]
        ) / scale - np.array([[0, 0, 0.5], [0, 0, 0.5]])
        patch = cv2.warpAffine(
            levels[which[i]], M, (8, 8),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE,
        )  # fmt: skip
        p = patch.ravel().astype(np.float64) - patch.mean()
        out[i] = p / np.linalg.norm(p)
    return out


def test_raw_patch_equals_warp_affine_per_keypoint(gray, sift_kept):
    table = np.array([(*k.pt, k.size, k.angle) for k in sift_kept], dtype=np.float64)
    table[::7, 3] = -1.0  # some without orientation
    table[::5, 2] *= 6.0  # some large: higher pyramid levels
    rows = raw_patch(gray, table[:, :2], table[:, 2], table[:, 3])
    assert len(np.unique(raw_patch_levels(table[:, 2], 5))) >= 3
    slow = slow_raw_patch(gray, table)
    # warpAffine rounds coordinates to 1/32 px, map_coordinates does not
    np.testing.assert_allclose(rows, slow, atol=0.03)
    assert np.median(np.sum(rows * slow, axis=1)) > 0.9999


def test_raw_patch_follows_rotation(gray):
    """Rotate the image by 37 degrees: SIFT's keypoints and angles rotate with it, and the raw
    patch of a keypoint finds its counterpart by nearest neighbour most of the time (the angle
    convention is SIFT's; the opposite one finds almost none)."""
    M = cv2.getRotationMatrix2D((SIZE[1] / 2, SIZE[0] / 2), 37, 1.0)
    turned = cv2.warpAffine(gray, M, SIZE[::-1])
    tools = Toolkit(600)
    a = select(tools.detect("sift", gray), gray.shape, 60.0, 600)
    b = select(tools.detect("sift", turned), gray.shape, 60.0, 600)
    ta, tb = (np.array([(*k.pt, k.size, k.angle) for k in ks]) for ks in (a, b))
    moved = ta[:, :2] @ M[:, :2].T + M[:, 2]
    distance = np.linalg.norm(moved[:, None] - tb[None, :, :2], axis=2)
    truth, found = distance.argmin(axis=1), distance.min(axis=1) < 1.5

    def accuracy(sign: float) -> float:
        da = raw_patch(gray, ta[:, :2], ta[:, 2], (sign * ta[:, 3]) % 360)
        db = raw_patch(turned, tb[:, :2], tb[:, 2], (sign * tb[:, 3]) % 360)
        nn = np.linalg.norm(da[:, None] - db[None], axis=2).argmin(axis=1)
        return float(np.mean(nn[found] == truth[found]))

    assert found.sum() > 100
    assert accuracy(1.0) > 0.6 > 0.1 > accuracy(-1.0)


def test_sample_patches_grid_and_window():
    """A 32 x 32 grid (a learned descriptor's input) over the same window; an upright patch of
    a horizontal ramp grows along its columns, one turned by 90 degrees (clockwise on the
    screen, y down) falls along its rows."""
    ramp = np.tile(np.arange(200, dtype=np.float32), (200, 1))
    point, size = np.array([[100.0, 100.0]]), np.array([10.0])
    upright = sample_patches(ramp, point, size, np.array([0.0]), grid=32)[0]
    turned = sample_patches(ramp, point, size, np.array([90.0]), grid=32)[0]
    assert upright.shape == (32, 32) and upright.dtype == np.float32
    step = 6.0 * 10 / 32  # window 6 sizes over 32 samples, read on level 0 (step < 2 px)
    np.testing.assert_allclose(np.diff(upright, axis=1), step, atol=1e-4)
    np.testing.assert_allclose(upright[:, 0], 100 - 3 * 10 + step / 2, atol=1e-4)
    np.testing.assert_allclose(np.diff(turned, axis=0), -step, atol=1e-4)
    np.testing.assert_allclose(np.diff(turned, axis=1), 0, atol=1e-4)


# ------------------------------------------------------------------------------------------
# Names, availability, bad input
# ------------------------------------------------------------------------------------------


def test_every_list_of_methods_agrees():
    assert tuple(DETECTORS) == BUILTIN_METHODS == tuple(DIMENSIONS)
    assert set(DEFAULT_METHODS) < set(BUILTIN_METHODS) and set(CONTRIB_METHODS) < set(
        BUILTIN_METHODS
    )
    assert study.BUILTIN_DESCRIPTORS == BUILTIN_METHODS
    assert study.DEFAULT_DESCRIPTORS == DEFAULT_METHODS
    assert set(study.DEMO_NAMES) == set(BUILTIN_METHODS)
    assert set(study.DEMO_LOCKED) <= set(BUILTIN_METHODS) >= set(study.DEMO_NATIVE)
    assert not set(study.DEMO_LOCKED) & set(CONTRIB_METHODS)  # the demo's study runs anywhere
    assert set(EXPERIMENT_DETECTORS.values()) <= set(BUILTIN_METHODS)
    assert kp.available_methods() == available_methods()


def test_bad_method_names_list_the_methods(gray):
    listing = "sift, rootsift, dspsift, orb, brief, brisk, akaze, kaze, raw_patch"
    with pytest.raises(InvalidInputError, match=f"unknown method 'dsp_sift'.*{listing}"):
        extract_image(gray, "dsp_sift")
    with pytest.raises(InvalidInputError, match=f"locked='hardnet'.*{listing}"):
        extract_image(gray, "sift", locked="hardnet")
    quoted = ", ".join(f"'{name}'" for name in listing.split(", "))
    with pytest.raises(InvalidInputError, match=f"detector must be one of {quoted}; got 'surf'"):
        detect_keypoints([], "surf")


def test_an_opencv_without_contrib_is_named(gray, monkeypatch):
    """Where OpenCV has no BRISK / AKAZE / KAZE (opencv-python-headless 5), asking for them is
    one clear error before any work, and available_methods leaves them out."""
    for name in ("BRISK", "AKAZE", "KAZE"):
        monkeypatch.delattr(cv2, name, raising=False)
    monkeypatch.setattr(cv2, "xfeatures2d", None, raising=False)
    assert available_methods() == tuple(m for m in BUILTIN_METHODS if m not in CONTRIB_METHODS)
    with pytest.raises(InvalidInputError, match=r"'akaze' needs OpenCV's AKAZE.*opencv-contrib"):
        extract_image(gray, ("sift", "akaze"))
    with pytest.raises(InvalidInputError, match="'kaze' needs OpenCV's KAZE"):
        extract_image(gray, "sift", locked="kaze")
    with pytest.raises(InvalidInputError, match="'brisk' needs"):
        detect_keypoints([], "brisk")
    assert len(extract_image(gray, ("sift", "raw_patch"), max_keypoints=20)["raw_patch"]) == 20


# ------------------------------------------------------------------------------------------
# The Python hook for your own (e.g. learned) patch descriptor, as docs/features.md shows it
# ------------------------------------------------------------------------------------------


class Scene:
    """The Sequence interface over one image shown six times."""

    def __init__(self, gray: np.ndarray) -> None:
        self.name, self._gray = "i_astronaut", gray

    def gray(self, k: int) -> np.ndarray:
        return self._gray

    def image(self, k: int) -> np.ndarray:
        return self._gray

    def shape(self, k: int) -> tuple[int, int]:
        return self._gray.shape


def test_own_patch_descriptor_through_the_documented_hook(gray):
    """docs/features.md: detect_keypoints -> sample_patches -> your function -> Features ->
    extract(own=...): your rows sit next to the built-in methods on the same keypoints."""
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(32 * 32, 16)).astype(np.float32)  # a stand-in for a network

    def my_descriptor(patches: np.ndarray) -> np.ndarray:
        flat = patches.reshape(len(patches), -1)
        flat = (flat - flat.mean(axis=1, keepdims=True)) / (flat.std(axis=1, keepdims=True) + 1e-6)
        rows = flat @ weights
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    sequences = [Scene(gray)]
    kept = kp.detect_keypoints(sequences, "sift", max_keypoints=150)
    own = {"mine": {s.name: {} for s in sequences}}
    for s in sequences:
        for k in range(1, 7):
            item = kept[s.name][k]
            patches = kp.sample_patches(
                s.gray(k), item["keypoints"], item["size"], item["angle"], grid=32
            )
            own["mine"][s.name][k] = kp.Features(item["keypoints"], my_descriptor(patches))
    features = extract(sequences, ("sift",), locked="sift", max_keypoints=150, own=own)
    mine, sift = features["mine"]["i_astronaut"][1], features["sift"]["i_astronaut"][1]
    np.testing.assert_array_equal(mine.keypoints, sift.keypoints)
    assert mine.descriptors.shape == (len(sift), 16) and isinstance(mine, Features)
