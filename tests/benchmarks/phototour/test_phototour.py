"""PhotoTour layout readers, pair distances, FPR95 of descriptors and the ``patches fpr95`` verb.

The layout facts are checked against ports written here from reading torchvision's
``datasets/phototour.py`` (``read_image_file``: bitmaps in sorted name order, 64 x 64 crops with
y outer and x inner; ``read_info_file``: first column; ``read_matches_files``: columns 0 and 3,
match when columns 1 and 4 are equal) and MatchNet's ``generate_patch_db.py::GetPatchImage``.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from metricalc.benchmarks.phototour.dataset import (
    PhotoTourPairs,
    bitmap_name,
    check_pairs,
    describe_phototour,
    patch_location,
    read_info,
    read_pairs,
    read_patches,
)
from metricalc.benchmarks.phototour.generator import VIEWS, make_phototour_set
from metricalc.benchmarks.phototour.verification import (
    evaluate_pairs,
    pair_distances,
    read_descriptors,
    read_scores,
)
from metricalc.errors import InvalidInputError
from tests.cli_helpers import run_cli
from tests.core.test_fpr_at_recall import hardnet_port, matchnet_port


@pytest.fixture(scope="module")
def phototour(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("phototour")
    made = make_phototour_set(folder, scenes=("i_camera", "v_camera"), n_pairs=200, size=200)
    assert made.pairs == folder / "m50_200_200_0.txt"
    return folder


def torchvision_patches(folder: Path) -> np.ndarray:
    """torchvision's read_image_file, ported: every 64 x 64 crop, row by row, bitmap by bitmap."""
    patches = []
    for path in sorted(folder.glob("*.bmp")):
        image = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        for y in range(0, 1024, 64):
            for x in range(0, 1024, 64):
                patches.append(image[y : y + 64, x : x + 64])
    return np.array(patches)


def torchvision_matches(path: Path) -> list[tuple[int, int, int]]:
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        out.append((int(f[0]), int(f[3]), int(f[1] == f[4])))
    return out


def test_layout_equals_torchvision_and_matchnet(phototour: Path) -> None:
    info = read_info(phototour / "info.txt")
    ours = read_patches(phototour, np.arange(len(info)))
    assert np.array_equal(ours, torchvision_patches(phototour)[: len(info)])
    for patch_id in (0, 15, 16, 255, 256, len(info) - 1):  # MatchNet's divmod arithmetic
        container, offset = divmod(patch_id, 256)
        row, column = divmod(offset, 16)
        assert [int(v) for v in patch_location(patch_id)] == [container, row, column]
    pairs = read_pairs(phototour / "m50_200_200_0.txt")
    expected = torchvision_matches(phototour / "m50_200_200_0.txt")
    got = list(zip(pairs.patch1.tolist(), pairs.patch2.tolist(), pairs.labels.astype(int).tolist(),
                   strict=True))  # fmt: skip
    assert got == expected
    assert sum(label for *_, label in expected) == 200 and len(expected) == 400
    check_pairs(pairs, info)
    assert bitmap_name(3) == "patches0003.bmp"
    assert len(info) == len(VIEWS) * len(np.unique(info))


def test_views_of_a_point_are_consecutive_and_alike(phototour: Path) -> None:
    info = read_info(phototour / "info.txt")
    assert np.array_equal(info, np.repeat(np.arange(len(info) // len(VIEWS)), len(VIEWS)))
    patches = read_patches(phototour, np.arange(8)).astype(float)
    same = np.abs(patches[0] - patches[1]).mean()  # two views of point 0
    other = np.abs(patches[0] - patches[5]).mean()  # point 0 against point 1
    assert same < other


def _pairs_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m50_2_2_0.txt"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 1 0 2 1 0\n0 1 0 2 1\n", r"m50_2_2_0.txt, line 2: expected six integers"),
        ("0 1 0 2 1 0\n0 x 0 2 1 0\n", r"line 2: expected six integers.*'0 x 0 2 1 0'"),
        ("0 1 0 2 1 0 7\n", r"line 1: expected six integers"),
        ("-1 1 0 2 1 0\n", r"line 1: patch ids must be >= 0"),
        ("\n", r"empty file"),
        ("0 1 0 2 1 0\n\n0 1 0 2 1 0\n", r"line 2: expected six integers"),
    ],
)
def test_bad_pair_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        read_pairs(_pairs_file(tmp_path, text))


def test_missing_or_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot read"):
        read_pairs(tmp_path / "none.txt")
    (tmp_path / "info.txt").write_text("3 0\n4\n")
    with pytest.raises(InvalidInputError, match=r"info.txt, line 2: expected two integers"):
        read_info(tmp_path / "info.txt")
    with pytest.raises(InvalidInputError, match=r"patches0000.bmp: missing"):
        read_patches(tmp_path, [0])
    cv2.imwrite(str(tmp_path / "patches0000.bmp"), np.zeros((64, 64), np.uint8))
    with pytest.raises(InvalidInputError, match=r"patches0000.bmp: of shape \(64, 64\)"):
        read_patches(tmp_path, [3])


def test_pairs_checked_against_info(tmp_path: Path) -> None:
    pairs = read_pairs(_pairs_file(tmp_path, "0 5 0 1 5 0\n1 5 0 2 6 0\n"))
    check_pairs(pairs, np.array([5, 5, 6]))
    with pytest.raises(InvalidInputError, match=r"line 2: 3DpointID2 6 but info.txt gives patch 2"):
        check_pairs(pairs, np.array([5, 5, 7]))
    with pytest.raises(InvalidInputError, match=r"line 2: patchID2 2 is beyond the 2 patches"):
        check_pairs(pairs, np.array([5, 5]))


def test_pair_distances_equal_a_loop() -> None:
    rng = np.random.default_rng(1)
    descriptors = rng.normal(size=(30, 5))
    p1, p2 = rng.integers(0, 30, 40), rng.integers(0, 30, 40)
    pairs = PhotoTourPairs(p1, p1 % 3, p2, p2 % 3, "pairs.txt")
    both = list(zip(p1, p2, strict=True))
    l2 = [float(np.sqrt(np.sum((descriptors[a] - descriptors[b]) ** 2))) for a, b in both]
    l1 = [float(np.sum(np.abs(descriptors[a] - descriptors[b]))) for a, b in both]
    assert np.allclose(pair_distances(descriptors, pairs), l2, rtol=1e-14, atol=0)
    assert np.allclose(pair_distances(descriptors, pairs, distance="l1"), l1, rtol=1e-14)
    with pytest.raises(InvalidInputError, match=r"pairs.txt, line \d+: patchID\d \d+ has no desc"):
        pair_distances(descriptors[:10], pairs)
    with pytest.raises(InvalidInputError, match="distance must be one of"):
        pair_distances(descriptors, pairs, distance="cosine")


def test_read_descriptors(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("1,2\n3,4\n")
    assert read_descriptors(tmp_path / "d.csv").tolist() == [[1, 2], [3, 4]]
    np.save(tmp_path / "d.npy", np.eye(3, dtype=np.float32))
    assert read_descriptors(tmp_path / "d.npy").shape == (3, 3)
    (tmp_path / "ragged.csv").write_text("1,2\n3\n")
    with pytest.raises(InvalidInputError, match=r"ragged.csv, row 2: expected 2 finite numbers"):
        read_descriptors(tmp_path / "ragged.csv")
    (tmp_path / "text.csv").write_text("1,2\n3,a\n")
    with pytest.raises(InvalidInputError, match=r"text.csv: expected rows of comma-separated"):
        read_descriptors(tmp_path / "text.csv")
    np.save(tmp_path / "flat.npy", np.ones(3))
    with pytest.raises(InvalidInputError, match=r"flat.npy: expected an N x D matrix"):
        read_descriptors(tmp_path / "flat.npy")
    with pytest.raises(InvalidInputError, match=r"d.txt: expected a .npy or .csv"):
        read_descriptors(tmp_path / "d.txt")


def test_read_scores(tmp_path: Path) -> None:
    (tmp_path / "s.csv").write_text("0.5,1\n2,0\n")
    d, y = read_scores(tmp_path / "s.csv")
    assert d.tolist() == [0.5, 2.0] and y.tolist() == [True, False]
    for text, line in (("distance,label\n1,1\n1,2\n", 3), ("1,1\nnan,0\n", 2), ("1\n", 1)):
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(InvalidInputError, match=rf"bad.csv, line {line}: expected 'distance"):
            read_scores(tmp_path / "bad.csv")


def test_fpr95_of_descriptors_equals_the_ports(phototour: Path) -> None:
    descriptors = describe_phototour(phototour, method="raw").astype(np.float64)
    pairs = read_pairs(phototour / "m50_200_200_0.txt")
    distances = np.array([np.linalg.norm(descriptors[a] - descriptors[b])
                          for a, b in zip(pairs.patch1, pairs.patch2, strict=True)])  # fmt: skip
    labels = pairs.labels.astype(int)
    result = evaluate_pairs(pairs, descriptors)
    assert result.fpr == hardnet_port(labels, distances, 0.95)
    assert 0 < result.fpr < 1 and (result.n_positive, result.n_negative) == (200, 200)
    fdr = evaluate_pairs(pairs, descriptors, variant="matchnet").fpr
    assert fdr == matchnet_port(labels, -distances, 0.95)


def test_cli_end_to_end(phototour: Path, tmp_path: Path) -> None:
    out = tmp_path / "sift.npy"
    done = run_cli("patches", "describe-phototour", str(phototour), "--method", "sift",
                   "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    pairs = str(phototour / "m50_200_200_0.txt")
    done = run_cli("patches", "fpr95", "--pairs", pairs, "--descriptors", str(out),
                   "--info", str(phototour / "info.txt"), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    expected = evaluate_pairs(read_pairs(pairs), read_descriptors(out))
    assert printed["fpr"] == expected.fpr and printed["variant"] == "hardnet"
    done = run_cli("patches", "fpr95", "--pairs", pairs, "--descriptors", str(out),
                   "--variant", "threshold", "--distance", "l1")  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("FPR95 ")
    scores = tmp_path / "scores.csv"
    scores.write_text("distance,label\n0.1,1\n0.2,0\n0.3,1\n0.4,0\n")
    done = run_cli("patches", "fpr95", "--scores", str(scores), "--recall", "0.5", "--json")
    assert json.loads(done.stdout)["fpr"] == 0.0
    done = run_cli("patches", "fpr95", "--scores", str(scores), "--variant", "matchnet")
    assert done.stdout.startswith("FDR95 33.33%")  # 1 false among the first 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pairs", "p.txt"], "give --pairs and --descriptors, or --scores"),
        (["--scores", "s.csv", "--pairs", "p.txt"], "give --scores alone"),
        (["--scores", "missing.csv"], "missing.csv: cannot read"),
    ],
)
def test_cli_errors_are_one_line(argv: list[str], message: str, tmp_path: Path) -> None:
    done = run_cli("patches", "fpr95", *argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1


def test_cli_no_negative_pairs(tmp_path: Path) -> None:
    (tmp_path / "s.csv").write_text("0.1,1\n0.2,1\n")
    done = run_cli("patches", "fpr95", "--scores", "s.csv", cwd=tmp_path)
    assert done.returncode == 2 and "no negative (non-matching) pair" in done.stderr
