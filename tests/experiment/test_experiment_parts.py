"""Building blocks of experiment runs: matching, one image's features, prediction files,
the match visualization and the recall figure."""

from __future__ import annotations

import cv2
import h5py
import numpy as np
import pytest
from scipy.spatial.distance import cdist
from skimage import data

from metricalc.benchmarks.hpatches_sequences.visualize import draw_matches
from metricalc.errors import InvalidInputError
from metricalc.experiment.plots import plot_cumulative_errors
from metricalc.experiment.predictions import (
    PairPrediction,
    merge_parts,
    open_predictions,
    read_part,
    read_prediction,
    write_part,
)
from metricalc.keypoints.features import extract, extract_image
from metricalc.keypoints.matching import nn_matches

# --------------------------------------------------------------------------------------------
# matching
# --------------------------------------------------------------------------------------------


def _reference_matches(a, b, *, mutual, ratio, binary):
    """Brute force with scipy: nearest neighbour (lowest index on ties), mutual, ratio test."""
    if binary:
        bits_a, bits_b = np.unpackbits(a, axis=1), np.unpackbits(b, axis=1)
        d = cdist(bits_a, bits_b, "hamming") * bits_a.shape[1]
    else:
        d = cdist(a.astype(np.float64), b.astype(np.float64))
    out = np.full(len(a), -1)
    for i in range(len(a)):
        j = int(np.argmin(d[i]))
        if mutual and int(np.argmin(d[:, j])) != i:  # j's nearest query, lowest index on ties
            continue
        if ratio is not None:
            if len(b) < 2:
                continue
            second = np.partition(d[i], 1)[1]
            if not d[i, j] < ratio * second:
                continue
        out[i] = j
    return out


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("mutual", [True, False])
@pytest.mark.parametrize("ratio", [None, 0.8, 1.0])
def test_nn_matches_equal_brute_force(binary, mutual, ratio):
    rng = np.random.default_rng(int(binary) * 7 + int(mutual) * 3 + int(10 * (ratio or 0)))
    for _ in range(15):
        n0, n1 = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        if binary:
            a = rng.integers(0, 4, (n0, 2), dtype=np.uint8)  # few distinct values: many ties
            b = rng.integers(0, 4, (n1, 2), dtype=np.uint8)
        else:
            a = rng.integers(0, 4, (n0, 5)).astype(np.float32)
            b = rng.integers(0, 4, (n1, 5)).astype(np.float32)
        matches, scores = nn_matches(a, b, mutual=mutual, ratio=ratio)
        expected = _reference_matches(a, b, mutual=mutual, ratio=ratio, binary=binary)
        np.testing.assert_array_equal(matches, expected)
        assert ((scores >= 0) & (scores <= 1)).all() and (scores[matches < 0] == 0).all()


def test_nn_matches_scores_and_bad_ratio():
    a = np.array([[0.0, 0.0]], np.float32)
    b = np.array([[1.0, 0.0], [4.0, 0.0]], np.float32)
    matches, scores = nn_matches(a, b)
    assert matches.tolist() == [0] and scores.tolist() == [pytest.approx(0.75)]
    with pytest.raises(InvalidInputError, match="ratio"):
        nn_matches(a, b, ratio=1.5)
    assert nn_matches(a, b[:0])[0].tolist() == [-1]


def test_extract_image_equals_extract():
    gray = cv2.resize(data.camera(), (200, 200))

    class Scene:
        name = "i_camera"

        def gray(self, k):
            return gray

        def image(self, k):
            return gray

        def shape(self, k):
            return gray.shape

    for locked in (None, "sift"):
        methods = ("sift", "orb", "brief")
        whole = extract([Scene()], methods, locked=locked, max_keypoints=80)
        one = extract_image(gray, methods, locked=locked, max_keypoints=80)
        for method in methods:
            reference = whole[method]["i_camera"][1]
            np.testing.assert_array_equal(one[method].keypoints, reference.keypoints)
            np.testing.assert_array_equal(one[method].descriptors, reference.descriptors)
    with pytest.raises(InvalidInputError, match="uint8 HxW"):
        extract_image(gray.astype(np.float32), "sift")


# --------------------------------------------------------------------------------------------
# prediction files
# --------------------------------------------------------------------------------------------


def _prediction(pair, rng, first=None):
    k0 = rng.uniform(0, 100, (6, 2)) if first is None else first.keypoints0
    d0 = rng.normal(size=(6, 4)).astype(np.float32) if first is None else first.descriptors0
    return PairPrediction(
        scene="v_x",
        pair=pair,
        keypoints0=k0,
        keypoints1=rng.uniform(0, 100, (5, 2)),
        descriptors0=d0,
        descriptors1=rng.normal(size=(5, 4)).astype(np.float32),
        matches0=np.array([0, -1, 2, 4, -1, 1]),
        matching_scores0=np.array([0.5, 0, 0.2, 0.1, 0, 0.3]),
        shape0=(100, 120),
        shape1=(100, 120),
    )


def test_parts_round_trip_and_merge_links_image_one(tmp_path):
    rng = np.random.default_rng(0)
    first = _prediction("1-2", rng)
    second = _prediction("1-3", rng, first)
    write_part(tmp_path / "a.h5", first)
    write_part(tmp_path / "b.h5", second)
    assert read_part(tmp_path / "a.h5").equal(first)
    parts = {("v_x", "1-2"): tmp_path / "a.h5", ("v_x", "1-3"): tmp_path / "b.h5"}
    merge_parts(parts, tmp_path / "predictions.h5", {"tag": "t"})
    with open_predictions(tmp_path / "predictions.h5") as handle:
        assert handle.attrs["tag"] == "t"
        assert read_prediction(handle, "v_x", "1-2").equal(first)
        assert read_prediction(handle, "v_x", "1-3").equal(second)
        assert handle["v_x/1-3/descriptors0"].id == handle["v_x/1-2/descriptors0"].id
        with pytest.raises(InvalidInputError, match="no image pair /v_x/1-4"):
            read_prediction(handle, "v_x", "1-4")
    assert not list(tmp_path.glob(".*tmp"))


def test_different_image_one_arrays_are_stored_separately(tmp_path):
    rng = np.random.default_rng(1)
    first, other = _prediction("1-2", rng), _prediction("1-3", rng)
    write_part(tmp_path / "a.h5", first)
    write_part(tmp_path / "b.h5", other)
    parts = {("v_x", "1-2"): tmp_path / "a.h5", ("v_x", "1-3"): tmp_path / "b.h5"}
    merge_parts(parts, tmp_path / "p.h5", {})
    with open_predictions(tmp_path / "p.h5") as handle:
        assert read_prediction(handle, "v_x", "1-3").equal(other)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g.__delitem__("matches0"), r"lacks the dataset\(s\) \['matches0'\]"),
        (lambda g: _replace(g, "keypoints1", np.zeros((5, 3))), "keypoints1 has shape"),
        (lambda g: _replace(g, "descriptors0", np.zeros((2, 4))), "expected 6 rows"),
        (lambda g: _replace(g, "matches0", np.array([0, 9, 0, 0, 0, 0])), r"indices in -1 \.\. 4"),
        (lambda g: _replace(g, "matches0", np.zeros(6)), r"indices in -1 \.\. 4"),
        (lambda g: g.attrs.__delitem__("shape0"), "missing or bad attributes"),
    ],
)
def test_malformed_predictions_name_the_group(tmp_path, change, message):
    write_part(tmp_path / "a.h5", _prediction("1-2", np.random.default_rng(2)))
    merge_parts({("v_x", "1-2"): tmp_path / "a.h5"}, tmp_path / "p.h5", {})
    with h5py.File(tmp_path / "p.h5", "a") as handle:
        change(handle["v_x/1-2"])
    with open_predictions(tmp_path / "p.h5") as handle, pytest.raises(InvalidInputError) as info:
        read_prediction(handle, "v_x", "1-2")
    assert "p.h5:/v_x/1-2" in str(info.value)
    assert pytest.importorskip("re").search(message, str(info.value))


def _replace(group, name, values):
    del group[name]
    group[name] = values


def test_files_that_are_not_predictions(tmp_path):
    (tmp_path / "x.h5").write_bytes(b"nonsense")
    with pytest.raises(InvalidInputError, match="cannot be read as HDF5"):
        open_predictions(tmp_path / "x.h5")
    with h5py.File(tmp_path / "y.h5", "w"):
        pass
    with pytest.raises(InvalidInputError, match="not a metricalc predictions file"):
        open_predictions(tmp_path / "y.h5")


# --------------------------------------------------------------------------------------------
# pictures
# --------------------------------------------------------------------------------------------


def test_match_visualization_colours_correct_and_wrong_matches():
    image = np.full((100, 100), 200, np.uint8)
    kp0 = np.array([[20.0, 20.0], [20.0, 80.0]])
    kp1 = np.array([[30.0, 20.0], [60.0, 50.0]])
    H = np.array([[1.0, 0, 10], [0, 1, 0], [0, 0, 1]])  # match 0 is exact, match 1 is 44 px off
    picture = draw_matches(image, image, kp0, kp1, np.array([0, 1]), H)
    assert picture.shape == (100, 200, 3) and picture.dtype == np.uint8
    green = picture[20, 60]  # on the line from (20, 20) to (130, 20)
    assert green[1] > 150 and green[0] < 100
    # on the wrong match's line, from (20, 80) to (160, 50): at x = 90, y = 65
    red = picture[65, 90]
    assert red[0] > 150 and red[1] < 100
    left, right = np.zeros((50, 800), np.uint8), np.zeros((60, 800), np.uint8)
    wide = draw_matches(left, right, kp0, kp1, np.array([-1, -1]), width=400)
    assert wide.shape == (15, 400, 3)  # 60 x 1600 scaled by 1/4


def test_cumulative_error_plot():
    ax = plot_cumulative_errors({"a": np.array([1.0, 2.0, np.inf]), "b": np.array([])})
    x, y = ax.get_lines()[0].get_data()
    assert x.tolist() == [0.0, 1.0, 2.0, 10.0]
    assert y.tolist() == pytest.approx([0.0, 100 / 3, 200 / 3, 200 / 3])
    assert ax.get_xlim() == (0.0, 10.0)
