"""D2-Net's HPatches-sequences evaluation, reproduced: metricalc against a line-by-line port.

``d2net_benchmark`` below follows, step for step, ``benchmark_features`` and ``mnn_matcher``
in D2-Net's ``hpatches_sequences/HPatches-Sequences-Matching-Benchmark.ipynb`` (rewritten in
NumPy: ``torch.max(..., dim)[1]`` is the first index of the maximum, as ``np.argmax``), and
``d2net_mma`` the plotting cell that turns the sums into MMA (divided by ``n_i * 5``,
``n_v * 5``, ``(n_i + n_v) * 5``). Random scenes (keypoints, homographies, descriptors) go
through both the port and ``metricalc.keypoints.evaluate`` + :func:`metricalc.matching_accuracy`;
the curves must agree to 1e-12.

Descriptors are 0/1 vectors with the same number of ones (so every dot product and squared
distance is a small integer, computed exactly by both, and the largest dot product is the
smallest L2 distance): exact ties are everywhere, which exercises the lowest-index rule of the
mutual check on both sides. A second family uses continuous unit vectors.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from metricalc import matching_accuracy
from metricalc.errors import InvalidInputError
from metricalc.hpatches import D2NET_EXCLUDED, D2NET_SEQUENCES, HPATCHES_SEQUENCES
from metricalc.keypoints import Features, evaluate, load_sequences
from metricalc.metrics import matching_counts

SHAPE = (120, 160)  # height, width
THRESHOLDS = np.arange(1, 11)


# ---- the port ---------------------------------------------------------------------------------


def mutual_matches(desc1, desc2):
    """D2-Net's ``mnn_matcher``, step for step: similarities by dot product, the best column of
    every row and the best row of every column (first index on ties, as ``torch.max``), and
    the rows whose best column points back at them. Returns (row, column) pairs."""
    similarity = desc1 @ desc2.T
    best_col = similarity.argmax(axis=1)
    best_row = similarity.argmax(axis=0)
    rows = np.arange(similarity.shape[0])
    back = best_row[best_col] == rows
    return np.column_stack([rows[back], best_col[back]])


def d2net_benchmark(sequence_names, features_of, homography_of, thresholds=THRESHOLDS):
    """D2-Net's ``benchmark_features``, step for step: every sequence in sorted order, image 1
    against images 2..6, errors of the mutual matches, per-pair accuracy added to the sums of
    the sequence's kind (its name's first letter). Returns the two sums and the counts."""
    feature_counts, match_counts, kinds = [], [], []
    illumination = dict.fromkeys(thresholds, 0)
    viewpoint = dict.fromkeys(thresholds, 0)
    for name in sorted(sequence_names):
        points1, desc1 = features_of(name, 1)
        feature_counts.append(len(points1))
        for k in range(2, 7):
            pointsk, desck = features_of(name, k)
            feature_counts.append(len(pointsk))
            found = mutual_matches(desc1, desck)
            H = homography_of(name, k)
            homogeneous = np.hstack([points1[found[:, 0], :2], np.ones((len(found), 1))])
            mapped = (H @ homogeneous.T).T
            with np.errstate(divide="ignore", invalid="ignore"):  # w = 0: inf or nan, as torch
                projected = mapped[:, :2] / mapped[:, 2:]
                errors = np.sqrt(((pointsk[found[:, 1], :2] - projected) ** 2).sum(axis=1))
            match_counts.append(len(found))
            kinds.append(name[0])
            if len(errors) == 0:  # D2-Net: an empty pair gets one infinite error
                errors = np.array([np.inf])
            sums = illumination if name[0] == "i" else viewpoint
            for t in thresholds:
                sums[t] += np.mean(errors <= t)
    return illumination, viewpoint, (np.array(kinds), np.array(feature_counts), match_counts)


def d2net_mma(illumination, viewpoint, n_i, n_v, thresholds=THRESHOLDS):
    """The three curves of D2-Net's plotting cell: sums over pairs divided by the number of
    pairs of the split, (n_i + n_v) * 5, n_i * 5, n_v * 5."""
    return np.array(
        [
            [(illumination[t] + viewpoint[t]) / ((n_i + n_v) * 5) for t in thresholds],
            [illumination[t] / (n_i * 5) for t in thresholds],
            [viewpoint[t] / (n_v * 5) for t in thresholds],
        ]
    )


def d2net_summary(counts, n_i, n_v):
    """What D2-Net's ``summary`` prints: keypoints per image (mean, min, max), and matches per
    pair overall, illumination, viewpoint (sums divided by the number of pairs)."""
    kinds, feature_counts, match_counts = counts
    match_counts = np.asarray(match_counts)
    features = (feature_counts.mean(), feature_counts.min(), feature_counts.max())
    matches = (
        match_counts.sum() / ((n_i + n_v) * 5),
        match_counts[kinds == "i"].sum() / (n_i * 5),
        match_counts[kinds == "v"].sum() / (n_v * 5),
    )
    return features, matches


# ---- random scenes ----------------------------------------------------------------------------


class Scene:
    """What :func:`metricalc.keypoints.evaluate` reads of a sequence (no image files)."""

    def __init__(self, name, homographies):
        self.name = name
        self.split = "illumination" if name.startswith("i_") else "viewpoint"
        self._homographies = homographies

    def homography(self, k):
        return self._homographies[k]

    def shape(self, k):
        return SHAPE


def random_homography(rng, viewpoint):
    if not viewpoint:
        return np.eye(3)
    H = np.eye(3) + rng.normal(0, [[0.08, 0.08, 6], [0.08, 0.08, 6], [2e-4, 2e-4, 0.05]])
    return H / H[2, 2]


def random_descriptors(rng, n, kind):
    if kind == "ties":  # 0/1, four ones out of 12: exact integer products, many ties
        out = np.zeros((n, 12), np.float32)
        for row in out:
            row[rng.choice(12, 4, replace=False)] = 1.0
        return out
    values = rng.normal(size=(n, 16))
    return (values / np.linalg.norm(values, axis=1, keepdims=True)).astype(np.float32)


def random_benchmark(seed, kind, names):
    """Scenes (with five homographies each) and features of every image, some of them
    near-copies of image 1 moved by the homography so that many matches are correct."""
    rng = np.random.default_rng(seed)
    scenes, images = [], {}
    for name in names:
        homographies = {k: random_homography(rng, name.startswith("v_")) for k in range(2, 7)}
        scenes.append(Scene(name, homographies))
        n1 = int(rng.integers(5, 40))
        points1 = np.column_stack(
            [rng.uniform(0, SHAPE[1] - 1, n1), rng.uniform(0, SHAPE[0] - 1, n1)]
        )
        descriptors1 = random_descriptors(rng, n1, kind)
        per_image = {1: Features(points1, descriptors1)}
        for k in range(2, 7):
            h = homographies[k]
            moved = points1 @ h[:2, :2].T + h[:2, 2]
            moved = moved / (points1 @ h[2, :2] + h[2, 2])[:, None]
            moved = moved + rng.normal(0, 3.0, moved.shape)  # errors around 1..10 px
            keep = (
                (moved[:, 0] >= 0)
                & (moved[:, 0] <= SHAPE[1] - 1)
                & (moved[:, 1] >= 0)
                & (moved[:, 1] <= SHAPE[0] - 1)
                & (rng.random(n1) < 0.8)
            )
            n_extra = int(rng.integers(1, 15))
            extra = np.column_stack(
                [rng.uniform(0, SHAPE[1] - 1, n_extra), rng.uniform(0, SHAPE[0] - 1, n_extra)]
            )
            descriptors = descriptors1[keep]
            if kind != "ties":  # a perturbed copy: the nearest neighbour is not always right
                descriptors = descriptors + rng.normal(0, 0.15, descriptors.shape)
                descriptors /= np.linalg.norm(descriptors, axis=1, keepdims=True)
            points = np.concatenate([moved[keep], extra])
            descriptors = np.concatenate(
                [descriptors, random_descriptors(rng, n_extra, kind)]
            ).astype(np.float32)
            order = rng.permutation(len(points))
            per_image[k] = Features(points[order], descriptors[order])
        images[name] = per_image
    return scenes, images


def both(scenes, images, **kwargs):
    """MMA (split x threshold) and counts from metricalc and from the port."""
    features = {"method": {name: per_image for name, per_image in images.items()}}
    cube = evaluate(scenes, features, keypoints="external", border=0.0, bojanic=False)
    mma = matching_accuracy(cube, THRESHOLDS, by_split=True, **kwargs)
    counts = matching_counts(cube, **kwargs)
    homographies = {s.name: s for s in scenes}
    names = [s.name for s in scenes]
    illumination, viewpoint, stats = d2net_benchmark(
        names,
        lambda seq, k: (images[seq][k].keypoints, images[seq][k].descriptors),
        lambda seq, k: homographies[seq].homography(k),
    )
    n_i = sum(n.startswith("i_") for n in names)
    n_v = len(names) - n_i
    reference = d2net_mma(illumination, viewpoint, n_i, n_v)
    return mma, counts, reference, d2net_summary(stats, n_i, n_v)


NAMES = ["i_one", "i_two", "i_three", "v_four", "v_five", "v_six", "v_seven"]


@pytest.mark.parametrize("kind", ["ties", "continuous"])
@pytest.mark.parametrize("seed", range(6))
def test_mma_equals_the_d2net_port(kind, seed):
    mma, counts, reference, (features, matches) = both(*random_benchmark(seed, kind, NAMES))
    values = mma.sel(descriptor="method").values
    np.testing.assert_allclose(values, reference, rtol=0, atol=1e-12)
    assert 0 < values[0, 0] < values[0, -1] <= 1  # not a trivial curve
    np.testing.assert_allclose(
        counts.matches_per_pair.sel(descriptor="method").values, matches, rtol=0, atol=1e-12
    )
    got = counts.sel(descriptor="method")
    np.testing.assert_allclose(
        [got.keypoints_mean, got.keypoints_min, got.keypoints_max], features, rtol=0, atol=1e-12
    )


def test_the_port_sees_ties_and_non_mutual_matches():
    # the random data must exercise what the test claims: ties broken by index, and nearest
    # neighbours that are not mutual (dropped by both)
    _, images = random_benchmark(0, "ties", NAMES)
    a, b = images["v_four"][1].descriptors, images["v_four"][2].descriptors
    sim = a @ b.T
    assert ((sim == sim.max(axis=1, keepdims=True)).sum(axis=1) > 1).any()
    assert len(mutual_matches(a, b)) < len(a)


def test_listed_sequences_give_the_same_numbers():
    scenes, images = random_benchmark(7, "continuous", NAMES)
    mma, _, reference, _ = both(scenes, images, sequences=NAMES)
    np.testing.assert_allclose(mma.sel(descriptor="method").values, reference, atol=1e-12)
    assert mma.n_pairs.values.tolist() == [35, 15, 20]


def test_projection_at_infinity_is_a_wrong_match():
    # H_1_2 sends the line y = 50 to infinity (w = 0): D2-Net's distance there is inf or nan,
    # never <= t, yet the match counts; metricalc's nn_error is NaN and counts the same way
    h = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0.02, -1]])
    identity = {k: np.eye(3) for k in range(3, 7)}
    scenes = [Scene("i_flat", {2: np.eye(3), **identity}), Scene("v_line", {2: h, **identity})]
    points = np.array([[10.0, 50.0], [30.0, 20.0], [60.0, 70.0]])
    descriptors = np.eye(3, dtype=np.float32)
    per_image = {k: Features(points, descriptors) for k in range(1, 7)}
    mma, _, reference, _ = both(scenes, {"i_flat": per_image, "v_line": per_image})
    np.testing.assert_allclose(mma.sel(descriptor="method").values, reference, atol=1e-12)
    # v_line 1-2: 3 matches, the one on y = 50 wrong (w = 0), the other two projected far from
    # their matches; every other pair exact
    assert reference[:, 0].tolist() == pytest.approx([9 / 10, 1.0, 4 / 5])


# ---- the 108-sequence split -------------------------------------------------------------------


def test_d2net_split_constants():
    assert len(HPATCHES_SEQUENCES) == 116 and len(set(HPATCHES_SEQUENCES)) == 116
    assert sum(s.startswith("i_") for s in HPATCHES_SEQUENCES) == 57
    assert set(D2NET_EXCLUDED) <= set(HPATCHES_SEQUENCES) and len(D2NET_EXCLUDED) == 8
    assert len(D2NET_SEQUENCES) == 108
    assert sum(s.startswith("i_") for s in D2NET_SEQUENCES) == 52  # D2-Net's n_i
    assert sum(s.startswith("v_") for s in D2NET_SEQUENCES) == 56  # D2-Net's n_v


def _cube_over(names):
    """A cube with one query per pair (1-2 .. 1-6) of each scene, every match exact."""
    rng = np.random.default_rng(0)
    scenes = [Scene(name, {k: np.eye(3) for k in range(2, 7)}) for name in names]
    point = np.array([[50.0, 50.0]])
    images = {n: {k: Features(point, rng.random((1, 4)).astype(np.float32)) for k in range(1, 7)}
              for n in names}  # fmt: skip
    return evaluate(scenes, {"d": images}, keypoints="external", border=0.0, bojanic=False)


@pytest.mark.parametrize("selection", [["i_x"], ["i_y"], ["i_x", "i_y"]])
def test_keypoint_counts_of_a_selection_count_only_its_images(selection):
    """Two sequences, two keypoints in every image: whatever the selection, every image it
    holds has 2 keypoints (D2-Net's ``# Features``: 2 - [2, 2]); the other sequence's images
    are not images of the selection."""
    rng = np.random.default_rng(0)
    points = np.array([[50.0, 50.0], [90.0, 70.0]])
    images = {n: {k: Features(points, rng.random((2, 4)).astype(np.float32)) for k in range(1, 7)}
              for n in ("i_x", "i_y")}  # fmt: skip
    scenes = [Scene(n, {k: np.eye(3) for k in range(2, 7)}) for n in ("i_x", "i_y")]
    cube = evaluate(scenes, {"d": images}, keypoints="external", border=0.0, bojanic=False)
    counts = matching_counts(cube, sequences=selection).sel(descriptor="d")
    assert [counts[f"keypoints_{s}"].item() for s in ("mean", "min", "max")] == [2.0, 2.0, 2.0]
    assert counts.n_pairs.values.tolist() == [5 * len(selection), 5 * len(selection), 0]


def test_keypoints_on_the_last_pixel_row_and_column_count_under_border_0():
    """D2-Net matches every keypoint: one at x = W - 0.7 (in the last pixel column, beyond
    W - 1) and one at y = H - 0.6 are queries and candidates like the others, and their matches
    are correct under the identity homography."""
    height, width = SHAPE
    points = np.array([[width - 0.7, 10.0], [20.0, height - 0.6], [50.0, 50.0]])
    descriptors = np.eye(3, 4, dtype=np.float32)
    images = {"i_x": {k: Features(points, descriptors) for k in range(1, 7)}}
    scenes = [Scene("i_x", {k: np.eye(3) for k in range(2, 7)})]
    cube = evaluate(scenes, {"d": images}, keypoints="external", border=0.0, bojanic=False)
    assert cube.sizes["query"] == 3 * 5
    assert sorted(set(cube.x.values.tolist())) == [20.0, 50.0, width - 0.7]
    counts = matching_counts(cube).sel(descriptor="d")
    assert counts.keypoints_min.item() == 3 and counts.matches_per_pair.sel(split="overall") == 3
    assert matching_accuracy(cube, [1]).sel(descriptor="d").values.tolist() == [1.0]


def test_d2net_split_on_a_full_hpatches_cube():
    cube = _cube_over(HPATCHES_SEQUENCES)
    counts = matching_counts(cube, sequences="d2net").sel(descriptor="d")
    # one keypoint per image in each of the 108 sequences' 648 images, not 656 reference slots
    assert [counts[f"keypoints_{s}"].item() for s in ("mean", "min", "max")] == [1.0, 1.0, 1.0]
    mma = matching_accuracy(cube, [1], sequences="d2net", by_split=True)
    assert mma.n_pairs.values.tolist() == [540, 260, 280]
    assert mma.values.ravel().tolist() == [1.0, 1.0, 1.0]
    assert mma.attrs["sequences"] == "d2net"
    # a cube lacking some of the 108 is refused, naming them
    partial = cube.isel(query=~np.isin(cube.scene.values, ["i_dome", "v_wall"]))
    with pytest.raises(InvalidInputError, match=r"2 of its 108 sequences .*: i_dome, v_wall"):
        matching_accuracy(partial, sequences="d2net")


def _write_sequences(root, names):
    import cv2

    image = np.zeros((8, 8), np.uint8)
    for name in names:
        folder = root / name
        folder.mkdir(parents=True)
        for k in range(1, 7):
            cv2.imwrite(str(folder / f"{k}.png"), image)
        for k in range(2, 7):
            np.savetxt(folder / f"H_1_{k}", np.eye(3))


def test_load_sequences_split(tmp_path):
    _write_sequences(tmp_path, [*D2NET_SEQUENCES[:50], "i_dc", "v_talent"])
    with pytest.raises(InvalidInputError, match=r"'d2net': 58 of its 108 sequences are missing"):
        load_sequences(tmp_path, split="d2net")
    with pytest.raises(InvalidInputError, match="not both"):
        load_sequences(tmp_path, split="d2net", scenes=["i_dc"])
    with pytest.raises(InvalidInputError, match="unknown split"):
        load_sequences(tmp_path, split="hard")


def test_load_sequences_split_skips_the_excluded(tmp_path):
    _write_sequences(tmp_path, HPATCHES_SEQUENCES)
    loaded = load_sequences(tmp_path, split="d2net")
    assert [s.name for s in loaded] == list(D2NET_SEQUENCES)
    assert len(load_sequences(tmp_path, split="full")) == 116


def test_cli_split_option(tmp_path, capsys):
    from metricalc.cli import main

    _write_sequences(tmp_path / "seq", D2NET_SEQUENCES[:3])
    code = main(
        ["keypoints", "eval", "--data", str(tmp_path / "seq"), "--out", str(tmp_path / "c.nc"),
         "--split", "d2net", "--no-progress"]
    )  # fmt: skip
    assert code == 2
    assert "105 of its 108 sequences are missing" in capsys.readouterr().err


def test_lazy_cube_gives_the_same_mma():
    scenes, images = random_benchmark(3, "continuous", NAMES)
    cube = evaluate(scenes, {"m": images}, keypoints="external", border=0.0, bojanic=False)
    eager = matching_accuracy(cube, by_split=True)
    lazy = matching_accuracy(cube.chunk({"query": 50}), by_split=True)
    assert lazy.chunks is not None
    xr.testing.assert_allclose(lazy.compute(), eager, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("n_candidates", "expected"),
    [
        ([4, 4, 4], (3.0, 3.5, 4.0)),  # image 1: 3 keypoints (its queries), image 2: 4
        ([-1, -1, -1], (3.0, 3.0, 3.0)),  # image 2 unknown (-1): left out, not a count of -1
        ([-1, 5, -1], (3.0, 4.0, 5.0)),  # the pair's known queries give its target's count
    ],
)
def test_keypoint_counts_leave_out_unknown_target_images(n_candidates, expected):
    from metricalc.datasets import example_cube

    cube = example_cube()  # one pair, three queries of image 1
    cube["n_candidates"] = ("descriptor", "query"), [n_candidates]
    counts = matching_counts(cube).sel(descriptor="sift")
    low, mean, high = (counts[f"keypoints_{s}"].item() for s in ("min", "mean", "max"))
    assert (low, mean, high) == expected
