"""Cube files of every layout open with metricalc, and files written now show their labels to
plain xarray: ``tests/data/cube-format2.nc`` was written by ``save`` of layout 2 (query labels
as integer codes into vocabularies) from :func:`small_cube`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc import cube as qc
from metricalc.cube import labels
from metricalc.cube.io import query_codes
from metricalc.errors import InvalidInputError

DATA = Path(__file__).resolve().parents[1] / "data"


def small_cube() -> xr.Dataset:
    """Two descriptors, five queries: non-ASCII and empty labels, pairs 1-2 and 1-10, x / y,
    a per-sequence variable."""
    return qc.new_cube(
        ["sift", "hardnet"],
        {
            "scene": ["i_ñandú", "i_ñandú", "v_boat", "v_boat", "v_boat"],
            "pair": ["1-2", "1-10", "1-2", "1-2", ""],
            "keypoint_set": ["sift", "sift", "sift", "sift", "sift"],
            "query_keypoint": [0, 0, 3, 4, 4],
            "x": [1.5, 2.5, 3.5, np.nan, 4.0],
            "y": [0.5, 0.25, 8.0, np.nan, 2.0],
        },
        {
            "better": [[0, 2, -1, 5, 1], [1, 0, -1, 0, -1]],
            "ties": [[0, 3, -1, 0, 1], [0, 0, -1, 2, -1]],
        },
        attrs={**qc.DEFAULT_ATTRS, "dataset": "unit", "keypoints": "locked:sift"},
        per_descriptor={"processing_time_ms": [12.5, 40.0]},
        per_sequence={"verification_ap": [[0.5, 0.75], [0.25, np.nan]]},
        sequences=["i_ñandú", "v_boat"],
    )


def test_a_file_shows_its_labels_to_plain_xarray(tmp_path):
    """What a collaborator without metricalc sees: the labels, not codes."""
    qc.save(small_cube(), tmp_path / "c.nc")
    with xr.open_dataset(tmp_path / "c.nc") as plain:
        assert plain["scene"].dims == ("query",)
        assert plain["scene"].values.tolist() == ["i_ñandú"] * 2 + ["v_boat"] * 3
        assert plain["pair"].values.tolist() == ["1-2", "1-10", "1-2", "1-2", ""]
        assert plain["split"].values.tolist() == ["illumination"] * 2 + ["viewpoint"] * 3
        assert plain["keypoint_set"].values.tolist() == ["sift"] * 5
        assert not [name for name in plain.variables if "vocabulary" in str(name)]
        by_scene = plain["better"].where(plain["better"] >= 0).groupby("scene").max()
        assert by_scene.sel(scene="v_boat").values.tolist() == [5.0, 0.0]


def without_version(cube: xr.Dataset) -> xr.Dataset:
    return cube.assign_attrs(metricalc_version="")


def test_a_file_of_layout_2_opens():
    """Layout 2 (codes and vocabularies), eagerly and lazily, with the labels of the cube it
    was written from (the version that wrote it: 0.1.0)."""
    path = DATA / "cube-format2.nc"
    with xr.open_dataset(path, engine="h5netcdf") as plain:  # the layout as stored
        assert plain.attrs["metricalc_file_format"] == 2 and plain["scene"].dtype == np.uint8
        assert plain["pair_vocabulary"].values.tolist() == ["", "1-10", "1-2"]
    expected = without_version(small_cube())
    eager = qc.open_cube(path)
    assert eager.attrs["metricalc_version"] == "0.1.0"
    xr.testing.assert_identical(without_version(eager), expected)
    with qc.open_cube(path, chunks={}) as lazy:
        codes, vocabulary = query_codes(lazy["pair"])
        assert np.asarray(codes).tolist() == [2, 1, 2, 2, 0]
        assert vocabulary.tolist() == ["", "1-10", "1-2"]
        xr.testing.assert_identical(without_version(lazy.compute()), expected)


def test_a_file_of_layout_2_edited_with_plain_xarray_opens(tmp_path):
    """Replacing a coordinate with plain xarray drops its attrs (the link to its vocabulary);
    the edited file saved with to_netcdf still opens, with the edit. Codes outside their
    vocabulary are refused, naming the file."""
    with xr.open_dataset(DATA / "cube-format2.nc", engine="h5netcdf") as plain:
        edited = plain.load()
    edited = edited.assign_coords(scene=("query", edited["scene"].values))  # attrs dropped
    edited["nn_distance"] = edited["nn_distance"] + 1
    edited.to_netcdf(tmp_path / "edited.nc", engine="h5netcdf")
    cube = small_cube()
    expected = cube.assign(nn_distance=cube["nn_distance"].fillna(-1) + 1)
    expected["nn_distance"] = expected["nn_distance"].where(expected["nn_distance"] != 0)
    opened = qc.open_cube(tmp_path / "edited.nc")
    xr.testing.assert_identical(without_version(opened), without_version(expected))
    broken = edited.assign_coords(scene=("query", edited["scene"].values + 7))
    broken.to_netcdf(tmp_path / "broken.nc", engine="h5netcdf")
    with pytest.raises(InvalidInputError, match=r"broken.nc is not a valid QueryCube: query "
                       r"coordinate 'scene': codes 7 .. 8, but its vocabulary"):
        qc.open_cube(tmp_path / "broken.nc")


@pytest.mark.parametrize("seed", range(6))
def test_read_labels_in_blocks_equals_decoding_each_row(monkeypatch, seed):
    """Labels of every width (1 to 19 bytes: shorter and longer than the 8 bytes compared at a
    time), in runs and alone, read in blocks of a few rows: the codes and vocabulary give back
    each row's own text."""
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 20))
    words = ["".join(rng.choice(list("abñ"), int(rng.integers(0, width // 2 + 1))))
             for _ in range(int(rng.integers(1, 6)))]
    n = int(rng.integers(1, 400))
    rows = [words[i] for i in np.repeat(rng.integers(0, len(words), n), rng.integers(1, 9, n))]
    text = [word.encode() for word in rows]
    chars = np.zeros((len(text), width), dtype="S1")
    for i, word in enumerate(text):
        chars[i, : len(word)] = np.frombuffer(word, dtype="S1")
    monkeypatch.setattr(labels, "_BLOCK_BYTES", int(rng.integers(1, 5)) * width * 7)
    codes, vocabulary = labels.read_labels(xr.Variable(("query", "chars"), chars), "scene")
    assert vocabulary.tolist() == sorted(set(rows))
    assert vocabulary[codes].tolist() == rows
    assert codes.dtype == np.uint8
