"""Loading HPatches-style sequence folders: round trip, caching and every error path."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from metricalc.errors import InvalidInputError
from metricalc.keypoints.sequences import Sequence, load_sequences, read_homography, read_image

SHAPE = (24, 32)


def _homography(k: int) -> np.ndarray:
    return np.array([[1.0 + 0.01 * k, 0.02, k], [-0.01, 0.99, 2.0 * k], [1e-4 * k, 0.0, 1.0]])


def _write_scene(root: Path, name: str, *, suffix: str = ".ppm", gray: bool = False) -> Path:
    """A scene with six random images (BGR on disk) and H_1_k in HPatches' text format."""
    folder = root / name
    folder.mkdir(parents=True)
    rng = np.random.default_rng(len(name))
    for k in range(1, 7):
        shape = SHAPE if gray else (*SHAPE, 3)
        assert cv2.imwrite(str(folder / f"{k}{suffix}"), rng.integers(0, 256, shape, np.uint8))
    for k in range(2, 7):
        rows = [" ".join(f"{v:.17g}" for v in row) for row in _homography(k)]
        (folder / f"H_1_{k}").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "hpatches"
    _write_scene(base, "v_b")
    _write_scene(base, "i_a", suffix=".png", gray=True)
    _write_scene(base, "other", suffix=".jpg")
    return base


def test_round_trip(root: Path) -> None:
    sequences = load_sequences(root)
    assert [s.name for s in sequences] == ["i_a", "other", "v_b"]  # sorted by name
    assert [s.split for s in sequences] == ["illumination", "other", "viewpoint"]
    seq = sequences[2]
    assert seq.root == root / "v_b"
    assert seq.image_paths == tuple(root / "v_b" / f"{k}.ppm" for k in range(1, 7))
    for k in range(2, 7):
        H = seq.homography(k)
        assert H.dtype == np.float64 and H.shape == (3, 3)
        np.testing.assert_array_equal(H, _homography(k))  # %.17g text reads back exactly
        assert H is seq.homographies[k - 2]
    np.testing.assert_array_equal(seq.homography(1), np.eye(3))
    for k in range(1, 7):
        bgr = cv2.imread(str(seq.image_paths[k - 1]))
        image = seq.image(k)
        assert image.dtype == np.uint8 and image.shape == (*SHAPE, 3)
        np.testing.assert_array_equal(image, bgr[..., ::-1])  # RGB order
        np.testing.assert_array_equal(seq.gray(k), cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY))
        assert seq.shape(k) == SHAPE
    gray_seq = sequences[0]
    assert gray_seq.image(1).shape == SHAPE  # gray stays gray
    assert gray_seq.gray(1) is gray_seq.image(1)


def test_arrays_are_read_only_and_cached(root: Path) -> None:
    seq = load_sequences(root, scenes=["v_b"])[0]
    assert seq.image(2) is seq.image(2)
    for array in (seq.image(2), seq.gray(2), seq.homography(3), seq.homography(1)):
        with pytest.raises(ValueError, match="read-only"):
            array[0, 0] = 1


def test_rewritten_image_is_read_again(root: Path) -> None:
    seq = load_sequences(root, scenes=["v_b"])[0]
    before = seq.image(1)
    path = seq.image_paths[0]
    assert cv2.imwrite(str(path), np.full((*SHAPE, 3), 7, np.uint8))
    stamp = path.stat().st_mtime_ns + 10_000_000
    os.utime(path, ns=(stamp, stamp))
    after = seq.image(1)
    assert not np.array_equal(before, after) and (after == 7).all()


def test_scene_filter(root: Path) -> None:
    assert [s.name for s in load_sequences(root, scenes=["v_b", "i_a", "v_b"])] == ["i_a", "v_b"]
    assert [s.name for s in load_sequences(root, scenes="other")] == ["other"]
    with pytest.raises(InvalidInputError, match=r"unknown scene\(s\) \['v_x', 'nope'\]"):
        load_sequences(root, scenes=["v_b", "v_x", "nope"])


def test_hidden_folders_and_plain_files_are_ignored(root: Path) -> None:
    (root / ".cache").mkdir()
    (root / "README.txt").write_text("not a scene")
    (root / "v_b" / "notes.txt").write_text("ignored")
    assert [s.name for s in load_sequences(root)] == ["i_a", "other", "v_b"]


def test_upper_case_suffix(tmp_path: Path) -> None:
    folder = _write_scene(tmp_path, "v_up")
    for k in range(1, 7):
        (folder / f"{k}.ppm").rename(folder / f"{k}.PPM")
    assert load_sequences(tmp_path)[0].image(6).shape == (*SHAPE, 3)


def test_equality_and_hash(root: Path) -> None:
    first, second = load_sequences(root), load_sequences(root)
    assert first == second and len({*first, *second}) == 3
    other = Sequence("v_b", root / "v_b", first[2].image_paths, (np.eye(3),) * 5)
    assert other != first[2]


# -- errors ------------------------------------------------------------------------------------


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_sequences(tmp_path / "absent")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="is not a directory"):
        load_sequences(tmp_path / "file")
    with pytest.raises(InvalidInputError, match="no scene folders"):
        load_sequences(tmp_path)


def test_missing_image(root: Path) -> None:
    (root / "v_b" / "3.ppm").unlink()
    with pytest.raises(InvalidInputError, match=r"missing image .*v_b/3\.\*"):
        load_sequences(root)
    load_sequences(root, scenes=["i_a"])  # other scenes still load


def test_scene_folder_without_images(root: Path) -> None:
    (root / "v_empty").mkdir()
    with pytest.raises(InvalidInputError, match=r"missing image .*v_empty/1\.\*"):
        load_sequences(root)


def test_ambiguous_image(root: Path) -> None:
    (root / "v_b" / "2.png").write_bytes((root / "v_b" / "2.ppm").read_bytes())
    with pytest.raises(InvalidInputError, match=r"ambiguous image 2 .*\['2.png', '2.ppm'\]"):
        load_sequences(root)


def test_unreadable_image(root: Path) -> None:
    (root / "v_b" / "4.ppm").write_bytes(b"this is not an image")
    with pytest.raises(InvalidInputError, match=r"unreadable image .*v_b/4\.ppm"):
        load_sequences(root)


def test_truncated_image_fails_on_read(root: Path) -> None:
    path = root / "i_a" / "5.png"
    path.write_bytes(path.read_bytes()[:60])  # valid header, no pixel data
    seq = load_sequences(root, scenes=["i_a"])[0]
    with pytest.raises(InvalidInputError, match=r"cannot decode image .*i_a/5\.png"):
        seq.image(5)
    with pytest.raises(InvalidInputError, match=r"cannot decode image .*i_a/5\.png"):
        seq.gray(5)
    path.unlink()
    with pytest.raises(InvalidInputError, match=r"cannot read image .*i_a/5\.png"):
        seq.shape(5)
    with pytest.raises(InvalidInputError, match="cannot read image"):
        read_image(root / "nope.png")


def test_missing_homography(root: Path) -> None:
    (root / "v_b" / "H_1_4").unlink()
    with pytest.raises(InvalidInputError, match=r"missing homography file .*v_b/H_1_4"):
        load_sequences(root)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 0 0\n0 1\n0 0 1\n", r"H_1_2, line 2: expected 3 numbers, got 2: '0 1'"),
        ("1 0 0\n\n0 1 x\n0 0 1\n", r"H_1_2, line 3: expected 3 numbers, got '0 1 x'"),
        ("1 0 0\n0 1 0\n0 0 1\n0 0 0\n", r"H_1_2, line 4: .* found a fourth row '0 0 0'"),
        ("1 0 0\n0 1 0\n", r"H_1_2: a homography has 3 rows of 3 numbers; found 2 row\(s\)"),
        ("", r"H_1_2: .* found 0 row\(s\)"),
        ("1 0 0\n0 nan 0\n0 0 1\n", r"H_1_2: homography has non-finite entries"),
        ("1 0 0\n0 1 0\n0 0 inf\n", r"H_1_2: homography has non-finite entries"),
        ("1 2 3\n2 4 6\n0 0 1\n", r"H_1_2: homography is singular"),
        ("0 0 0\n0 0 0\n0 0 0\n", r"H_1_2: homography is singular"),
    ],
)
def test_malformed_homography(root: Path, text: str, message: str) -> None:
    (root / "v_b" / "H_1_2").write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        load_sequences(root)
    with pytest.raises(InvalidInputError, match=message):
        read_homography(root / "v_b" / "H_1_2")


def test_homography_not_text(root: Path) -> None:
    (root / "v_b" / "H_1_6").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InvalidInputError, match=r"cannot read homography file .*H_1_6"):
        load_sequences(root)


def test_blank_lines_and_tabs_are_accepted(root: Path) -> None:
    (root / "v_b" / "H_1_2").write_text("\n1\t0  0.5\n\n 0 1 0 \n0 0 1\n\n")
    H = load_sequences(root, scenes=["v_b"])[0].homography(2)
    np.testing.assert_array_equal(H, [[1, 0, 0.5], [0, 1, 0], [0, 0, 1]])


@pytest.mark.parametrize("k", [0, 7, -1, 1.5, True, "2"])
def test_bad_image_index(root: Path, k: object) -> None:
    seq = load_sequences(root, scenes=["v_b"])[0]
    for method in (seq.image, seq.gray, seq.homography, seq.shape):
        with pytest.raises(InvalidInputError, match=r"image index must be an integer in 1\.\.6"):
            method(k)


def test_constructor_validates(root: Path) -> None:
    paths = load_sequences(root, scenes=["v_b"])[0].image_paths
    with pytest.raises(InvalidInputError, match="needs 6 image paths; got 5"):
        Sequence("v_b", root, paths[:5], (np.eye(3),) * 5)
    with pytest.raises(InvalidInputError, match="needs 5 homographies"):
        Sequence("v_b", root, paths, (np.eye(3),) * 4)
    with pytest.raises(InvalidInputError, match=r"H_1_3: a homography must be 3x3"):
        Sequence("v_b", root, paths, (np.eye(3), np.eye(2), np.eye(3), np.eye(3), np.eye(3)))
    with pytest.raises(InvalidInputError, match=r"H_1_2: homography is singular"):
        Sequence("v_b", root, paths, (np.zeros((3, 3)),) + (np.eye(3),) * 4)


# ---------------------------------------------------------------------------------------------
# the fingerprint names generated data; subsets of one folder share its fingerprint
# ---------------------------------------------------------------------------------------------


def test_the_fingerprint_marks_the_synthetic_benchmark_and_covers_its_whole_folder(tmp_path):
    import shutil

    from metricalc.datasets.reported import select_reported
    from metricalc.datasets.sequences import make_synthetic_dataset
    from metricalc.keypoints.sequences import SYNTHETIC_MANIFEST, dataset_fingerprint
    from metricalc.report.reference import reference_rows

    made = make_synthetic_dataset(tmp_path / "a", scenes=["camera", "coins"], size=64)
    assert len(made) == 4 and (tmp_path / "a" / SYNTHETIC_MANIFEST).is_file()
    whole = dataset_fingerprint(made)
    assert whole.startswith("synthetic-sequences sha256:") and len(whole) == 43
    # any subset of the folder, of one scene or several, is the whole folder's data
    assert dataset_fingerprint(made[1:3]) == dataset_fingerprint(made[:1]) == whole
    # the same images without the generator's manifest are not marked as generated
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / SYNTHETIC_MANIFEST).unlink()
    plain = dataset_fingerprint(load_sequences(tmp_path / "b"))
    assert plain == whole.removeprefix("synthetic-sequences ")
    # numbers published on the real HPatches sequences are refused beside the generated ones
    entry = select_reported([{"protocol": "gluefactory"}])[0]
    attrs = {"preset": "gluefactory", "dataset": whole}
    with pytest.raises(InvalidInputError, match=r"computed on generated data \('synthetic-seq"):
        reference_rows([entry], attrs, [entry.metric])
    assert reference_rows([entry], {**attrs, "dataset": plain}, [entry.metric])
