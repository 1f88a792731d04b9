"""Patch datasets in the HPatches release layout: reading, checks, errors, the ECCV 2016 split."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from metricalc.benchmarks.hpatches_patches.dataset import (
    ECCV2016_SPLITS,
    PATCH_SIZE,
    read_patch_dataset,
    write_patches,
)
from metricalc.benchmarks.hpatches_patches.files import read_benchmark
from metricalc.errors import InvalidInputError
from tests.data_files import HPATCHES_RETRIEVAL

DATA = HPATCHES_RETRIEVAL
EASY = ("ref", "e1", "e2", "e3", "e4", "e5")


def stack(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, PATCH_SIZE, PATCH_SIZE), np.uint8)


def write_sequence(root: Path, name: str, n: int, images=EASY, seed: int = 0) -> None:
    for k, image in enumerate(images):
        write_patches(root / name / f"{image}.png", stack(n, seed + k))


def write_png(path: Path, pixels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), pixels)


def test_reads_counts_images_and_pixels(tmp_path):
    write_sequence(tmp_path, "v_b", 3, (*EASY, "h1", "h2", "h3", "h4", "h5"))
    write_sequence(tmp_path, "i_a", 5, seed=7)
    (tmp_path / "notes").mkdir()  # no PNG: not a sequence
    (tmp_path / "v_b" / "readme.txt").write_text("ignored")
    dataset = read_patch_dataset(tmp_path)
    assert dataset.sequences == ("i_a", "v_b")
    assert dict(dataset.counts) == {"i_a": 5, "v_b": 3}
    assert dataset.images["v_b"] == (*EASY, "h1", "h2", "h3", "h4", "h5")
    assert dataset.images["i_a"] == EASY
    # The pixels come back exactly, patch i = rows 65 i .. 65 i + 64 of the PNG.
    np.testing.assert_array_equal(dataset.patches("i_a", "e2"), stack(5, 7 + 2))
    png = cv2.imread(str(tmp_path / "i_a" / "e2.png"), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(png[65 * 4 : 65 * 5], stack(5, 9)[4])


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda r: write_patches(r / "v_a" / "e1.png", stack(2)), r"v_a: missing image ref\.png"),
        (
            lambda r: [write_sequence(r, "v_a", 2, ("ref", "e1", "e2", "e4", "e5"))],
            r"v_a: missing image e3\.png; expected all of e1\.\.e5 or none \(found e1, e2, e4",
        ),
        (
            lambda r: [write_sequence(r, "v_a", 2), write_patches(r / "v_a" / "h3.png", stack(3))],
            r"v_a: missing image h1\.png",
        ),
        (
            lambda r: [write_sequence(r, "v_a", 2), write_patches(r / "v_a" / "e4.png", stack(3))],
            r"v_a/e4\.png: 3 patches, but ref\.png has 2; expected the same number",
        ),
        (
            lambda r: [write_sequence(r, "v_a", 2), write_patches(r / "v_a" / "e6.png", stack(2))],
            r"v_a: unexpected image 'e6\.png'; expected ref\.png, e1\.\.e5\.png",
        ),
        (
            lambda r: write_png(r / "v_a" / "ref.png", np.zeros((130, 64), np.uint8)),
            r"v_a/ref\.png: 64 x 130 pixels \(width x height\); expected 65 pixels wide",
        ),
        (
            lambda r: write_png(r / "v_a" / "ref.png", np.zeros((100, 65), np.uint8)),
            r"v_a/ref\.png: 65 x 100 pixels .* positive multiple of 65",
        ),
        (
            lambda r: ((r / "v_a").mkdir(), (r / "v_a" / "ref.png").write_bytes(b"GIF89a" * 9)),
            r"v_a/ref\.png: not a PNG file",
        ),
        (lambda r: write_sequence(r, "v.a", 1), r"sequence name 'v\.a' cannot be used"),
        (lambda r: (r / "empty").mkdir(), r"no sequence folders in"),
    ],
)
def test_errors_name_the_file_and_what_was_expected(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(InvalidInputError, match=message):
        read_patch_dataset(tmp_path)


def test_a_missing_root_and_bad_requests(tmp_path):
    with pytest.raises(InvalidInputError, match="is not a folder"):
        read_patch_dataset(tmp_path / "absent")
    write_sequence(tmp_path, "v_a", 2)
    dataset = read_patch_dataset(tmp_path)
    with pytest.raises(InvalidInputError, match=r"no sequence 'v_b'"):
        dataset.patches("v_b", "ref")
    with pytest.raises(InvalidInputError, match=r"v_a: no image h1\.png \(it has ref, e1"):
        dataset.patches("v_a", "h1")
    with pytest.raises(InvalidInputError, match="split: expected one of"):
        dataset.split_sequences("val")
    # A PNG rewritten after opening: decoded size disagrees with the recorded count.
    write_patches(tmp_path / "v_a" / "e1.png", stack(3))
    with pytest.raises(InvalidInputError, match=r"e1\.png: expected 2 patches of 65 x 65"):
        dataset.patches("v_a", "e1")
    with pytest.raises(InvalidInputError, match=r"expected an array \(N, 65, 65\)"):
        write_patches(tmp_path / "x.png", np.zeros((65, 65), np.uint8))
    with pytest.raises(InvalidInputError, match="expected uint8 pixels"):
        write_patches(tmp_path / "x.png", np.zeros((1, 65, 65)))


def test_the_split_comes_from_splits_json_or_the_eccv_2016_lists(tmp_path):
    write_sequence(tmp_path, "i_ajuntament", 1)  # ECCV 2016 test
    write_sequence(tmp_path, "v_bricks", 1)  # ECCV 2016 train
    write_sequence(tmp_path, "v_mine", 1)  # in neither
    dataset = read_patch_dataset(tmp_path)
    assert dict(dataset.splits) == {"i_ajuntament": "test", "v_bricks": "train"}
    assert dataset.split_sequences("train") == ("v_bricks",)
    (tmp_path / "splits.json").write_text(json.dumps({"train": ["v_mine", "i_ajuntament"]}))
    dataset = read_patch_dataset(tmp_path)
    assert dict(dataset.splits) == {"i_ajuntament": "train", "v_mine": "train"}
    assert dataset.split_sequences("test") == ()
    for bad, message in [
        ('{"train": ["v_a"], "val": []}', r'expected \{"train"'),
        ('{"train": "v_a"}', r'expected \{"train"'),
        ('{"train": ["v_a"], "test": ["v_a"]}', r"'v_a' is in both 'train' and 'test'"),
        ("[", "cannot read split file"),
    ]:
        (tmp_path / "splits.json").write_text(bad)
        with pytest.raises(InvalidInputError, match=message):
            read_patch_dataset(tmp_path)


def test_eccv_2016_split_is_the_sequences_of_the_release_files():
    for split, names in ECCV2016_SPLITS.items():
        pools = set()
        for path in DATA.glob(f"{split}_*.benchmark"):
            pools |= {name.split(".")[0] for name in read_benchmark(path).pool}
        assert pools == set(names), split
        assert list(names) == sorted(names)
    assert len(ECCV2016_SPLITS["train"]) == 76 and len(ECCV2016_SPLITS["test"]) == 40
    assert not set(ECCV2016_SPLITS["train"]) & set(ECCV2016_SPLITS["test"])
