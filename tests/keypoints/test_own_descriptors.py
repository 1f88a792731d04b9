"""Your own descriptor next to SIFT: the three-command recipe of README.md.

``metricalc keypoints export-keypoints`` writes SIFT's kept keypoints per image; the test
describes them with its own descriptor (a normalised raw 8 x 8 patch); ``metricalc keypoints
eval --features mine=DIR --locked sift`` gives one cube with SIFT and it on identical queries;
``metricalc compare`` pairs them query by query with no unit dropped. Also: the one-line error
when the keypoints are not SIFT's, several ``--features``, and the dataset fingerprint.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from metricalc import cube as qc
from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.keypoints import (
    dataset_fingerprint,
    evaluate,
    export_keypoints,
    extract,
    load_features,
    load_sequences,
)
from metricalc.keypoints.features import IMAGES, check_own_keypoints
from metricalc.keypoints.geometry import inside
from metricalc.keypoints.pipeline import EvaluationSettings, evaluate_sequences

PATCH = 8  # the test's descriptor: the PATCH x PATCH gray patch around the keypoint


def patch_descriptor(gray: np.ndarray, keypoints: np.ndarray, patch: int = PATCH) -> np.ndarray:
    """Zero-mean, unit-L2 raw patch around each keypoint (x, y rounded), float32 (N, patch**2)."""
    x, y = np.rint(keypoints).astype(np.int64).T
    offsets = np.arange(patch) - patch // 2
    rows = gray.astype(np.float32)[
        y[:, None, None] + offsets[None, :, None], x[:, None, None] + offsets[None, None, :]
    ].reshape(len(keypoints), -1)
    rows -= rows.mean(axis=1, keepdims=True)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-6)


def describe(sequences, kps: Path, out: Path, patch: int = PATCH) -> None:
    """Read the exported keypoints, describe them, write keypoints + descriptors per image."""
    for sequence in sequences:
        for k in IMAGES:
            with np.load(kps / sequence.name / f"{k}.npz") as exported:
                keypoints = exported["keypoints"]
                assert tuple(exported["image_size"]) == sequence.shape(k)
            path = out / sequence.name / f"{k}.npz"
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptors = patch_descriptor(sequence.gray(k), keypoints, patch)
            np.savez(path, keypoints=keypoints, descriptors=descriptors)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """The built-in quick benchmark, SIFT's exported keypoints and the test's descriptor."""
    root = tmp_path_factory.mktemp("own")
    data, kps, mine = root / "data", root / "kps", root / "mine"
    assert main(["keypoints", "make-dataset", str(data), "--quick"]) == 0
    assert main(["keypoints", "export-keypoints", "--data", str(data), "--detector", "sift",
                 "--out", str(kps), "--no-progress"]) == 0  # fmt: skip
    sequences = load_sequences(data)
    describe(sequences, kps, mine)
    return {"root": root, "data": data, "kps": kps, "mine": mine, "sequences": sequences}


def eval_args(recipe, out: Path, *features: str, descriptors: str = "sift") -> list[str]:
    argv = ["keypoints", "eval", "--data", str(recipe["data"]), "--descriptors", descriptors]
    for feature in features:
        argv += ["--features", feature]
    return [*argv, "--locked", "sift", "--out", str(out), "--no-progress", "--no-bojanic"]


def test_exported_keypoints_are_the_locked_keypoints_of_sift(recipe):
    locked = extract(recipe["sequences"], ("sift",), locked="sift")["sift"]
    for sequence in recipe["sequences"]:
        for k in IMAGES:
            with np.load(recipe["kps"] / sequence.name / f"{k}.npz") as exported:
                assert "descriptors" not in exported.files
                assert {"keypoints", "size", "angle", "response"} <= set(exported.files)
                keypoints = exported["keypoints"]
            assert keypoints.dtype == np.float64 and len(keypoints) > 100
            np.testing.assert_array_equal(keypoints, locked[sequence.name][k].keypoints)
            assert inside(keypoints, sequence.shape(k), 40.0).all()  # after the border


def test_exported_keypoints_record_their_image(recipe, tmp_path):
    """Each exported file names its scene and image; descriptors added in place keep them, and a
    file moved to another image is refused by load_features, naming the file and both places."""
    scene = recipe["sequences"][0].name
    arrays = {}
    for k in IMAGES:
        with np.load(recipe["kps"] / scene / f"{k}.npz") as exported:
            assert exported["scene"].tolist() == scene and exported["image"].tolist() == k
            arrays[k] = dict(exported)
        arrays[k]["descriptors"] = np.ones((len(arrays[k]["keypoints"]), 4), np.float32)
    good, swapped = tmp_path / "good", tmp_path / "swapped"
    for k in IMAGES:
        for root, source in ((good, k), (swapped, {2: 3, 3: 2}.get(k, k))):
            (root / scene).mkdir(parents=True, exist_ok=True)
            np.savez(root / scene / f"{k}.npz", **arrays[source])
    loaded = load_features({"mine": good})["mine"][scene]
    np.testing.assert_array_equal(loaded[3].keypoints, arrays[3]["keypoints"])
    message = (
        rf"features file {re.escape(str(swapped / scene / '2.npz'))} records scene "
        rf"'{scene}', image 3 .* but lies at scene '{scene}' image 2"
    )
    with pytest.raises(InvalidInputError, match=message):
        load_features({"mine": swapped})


def test_three_command_recipe_compares_at_query_level(recipe, capsys, tmp_path):
    both = tmp_path / "both.nc"
    argv = eval_args(recipe, both, f"mine={recipe['mine']}", descriptors="sift,rootsift")
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    cube = qc.open_cube(both)
    assert cube.descriptor.values.tolist() == ["sift", "rootsift", "mine"]
    assert cube.attrs["keypoints"] == "locked:sift"
    assert set(cube.keypoint_set.values.tolist()) == {"sift"}
    assert (cube.n_relevant.values != -1).all()  # every query present for both descriptors
    # the queries are the exported keypoints of image 1 inside the border
    for scene in ("i_camera", "v_astronaut"):
        with np.load(recipe["kps"] / scene / "1.npz") as exported:
            keypoints = exported["keypoints"]
        one = cube.where((cube.scene == scene) & (cube.pair == "1-2"), drop=True)
        xy = keypoints[one.query_keypoint.values.astype(np.int64)]
        np.testing.assert_array_equal(xy, np.column_stack([one.x.values, one.y.values]))
        sequence = next(s for s in recipe["sequences"] if s.name == scene)
        inner = inside(keypoints, sequence.shape(1), 40.0).sum()
        assert one.sizes["query"] == inner
    # mine's nearest-neighbour distances are those of the test's own descriptor
    sequence = next(s for s in recipe["sequences"] if s.name == "v_camera")
    one = cube.sel(descriptor="mine").where(
        (cube.scene == "v_camera") & (cube.pair == "1-3"), drop=True
    )
    queries = patch_descriptor(sequence.gray(1), np.column_stack([one.x, one.y]))
    with np.load(recipe["mine"] / "v_camera" / "3.npz") as image3:
        candidates = image3["descriptors"][inside(image3["keypoints"], sequence.shape(3), 40.0)]
    nearest = np.linalg.norm(queries[:, None] - candidates[None], axis=2).min(axis=1)
    np.testing.assert_allclose(one.nn_distance.values, nearest, rtol=1e-4, atol=1e-5)

    # the recipe's 4 scenes are too few to test over scenes: identical queries, image pairs
    code, out, err = run(capsys, "compare", str(both), "--baseline", "sift", "--json")
    assert code == 2 and "4 paired units (pair_by='scene'" in err
    code, out, err = run(capsys, "compare", str(both), "--baseline", "sift", "--json",
                         "--pair-by", "query")  # fmt: skip
    assert code == 0, err
    rootsift, row = json.loads(out)
    assert (row["descriptor"], row["baseline"]) == ("mine", "sift")
    sift_queries = int(np.isfinite(cube.ap.sel(descriptor="sift").values).sum())
    assert row["n"] == rootsift["n"] == sift_queries > 1000
    assert row["n_dropped"] == rootsift["n_dropped"] == 0
    assert row["mean_descriptor"] != row["mean_baseline"]


def test_keypoints_that_are_not_sifts_are_one_line_errors(recipe, capsys, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(recipe["mine"], bad)
    path = bad / "i_astronaut" / "3.npz"  # the first scene: the check fails early
    with np.load(path) as image:
        keypoints, descriptors = image["keypoints"], image["descriptors"]
    n = len(keypoints)
    np.savez(path, keypoints=keypoints[:-1], descriptors=descriptors[:-1])
    code, out, err = run(capsys, *eval_args(recipe, tmp_path / "x.nc", f"mine={bad}"))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == (
        "metricalc: error: descriptor 'mine' is not on the keypoints of sift: scene "
        f"'i_astronaut' image 3 has {n - 1} keypoints in your file but sift keeps {n}; describe "
        "the keypoints of export-keypoints --detector sift (same border and max_keypoints), in "
        "their order\n"
    )
    moved = keypoints.copy()
    moved[7, 0] += 0.25
    np.savez(path, keypoints=moved, descriptors=descriptors)
    code, out, err = run(capsys, *eval_args(recipe, tmp_path / "x.nc", f"mine={bad}"))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "scene 'i_astronaut' image 3 has keypoint 7 at (" in err
    assert f"1 of {n} keypoints differ, {n} in your file and {n} for sift" in err
    assert not (tmp_path / "x.nc").exists()


def test_keypoint_identity_is_float32_equality():
    kept = np.array([[50.123456789, 60.5], [70.0, 80.25]])
    where = {"descriptor": "mine", "locked": "sift", "where": "scene 'i_a' image 1"}
    check_own_keypoints(kept.astype(np.float32), kept, **where)  # written as float32: the same
    check_own_keypoints(kept + 1e-12, kept, **where)  # equal once rounded to float32
    moved = r"has keypoint 1 at \(70\.0009995, 80\.25\) in your file but at \(70, 80\.25\)"
    with pytest.raises(InvalidInputError, match=moved):
        check_own_keypoints(kept + np.array([[0, 0], [1e-3, 0]]), kept, **where)
    with pytest.raises(InvalidInputError, match="has 2 keypoints in your file but sift keeps 1"):
        check_own_keypoints(kept, kept[:1], **where)
    with pytest.raises(InvalidInputError, match="keypoint 0 at"):  # the order matters
        check_own_keypoints(kept[::-1], kept, **where)


def test_keypoints_only_files_ask_for_descriptors(recipe, capsys, tmp_path):
    code, _, err = run(capsys, *eval_args(recipe, tmp_path / "x.nc", f"mine={recipe['kps']}"))
    assert code == 2 and err.count("\n") == 1
    assert "has keypoints only (as export-keypoints writes them); add your 'descriptors'" in err


def test_several_features_on_identical_queries(recipe, capsys, tmp_path):
    small = tmp_path / "small"
    describe(recipe["sequences"], recipe["kps"], small, patch=4)
    out = tmp_path / "three.nc"
    code, _, err = run(
        capsys, *eval_args(recipe, out, f"mine={recipe['mine']}", f"small={small}")
    )
    assert code == 0, err
    cube = qc.open_cube(out)
    assert cube.descriptor.values.tolist() == ["sift", "mine", "small"]
    assert (cube.n_relevant.values != -1).all()
    assert not np.array_equal(cube.ap.sel(descriptor="mine"), cube.ap.sel(descriptor="small"))
    code, out_json, err = run(capsys, "compare", str(out), "--baseline", "sift", "--json",
                              "--pair-by", "query")  # fmt: skip
    rows = json.loads(out_json)
    assert code == 0 and len(rows) == 2 and all(row["n_dropped"] == 0 for row in rows)
    for bad in ([f"mine={recipe['mine']}", f"mine={small}"], [str(small), f"x={small}"]):
        code, _, err = run(capsys, *eval_args(recipe, tmp_path / "x.nc", *bad))
        assert code == 2 and err.count("\n") == 1 and "--features" in err


def test_a_root_of_descriptor_folders_with_locked(recipe, capsys, tmp_path):
    root = tmp_path / "features"
    shutil.copytree(recipe["mine"], root / "mine")
    argv = ["keypoints", "eval", "--data", str(recipe["data"]), "--features", str(root),
            "--locked", "sift", "--no-progress", "--no-bojanic"]  # fmt: skip
    code, _, err = run(capsys, *argv, "--descriptors", "sift", "--out", str(tmp_path / "x.nc"))
    assert code == 2 and err.count("\n") == 1 and "give them as --features NAME=DIR" in err
    code, _, err = run(capsys, *argv, "--out", str(tmp_path / "mine.nc"))
    assert code == 0, err
    cube = qc.open_cube(tmp_path / "mine.nc")
    assert cube.descriptor.values.tolist() == ["mine"] and cube.attrs["keypoints"] == "locked:sift"
    assert set(cube.keypoint_set.values.tolist()) == {"sift"}


def own_on_sift_keypoints(sequences, own, folder):
    """The cube of your own features alone on SIFT's kept keypoints (the keypoint pipeline)."""
    settings = EvaluationSettings((), "locked:sift", bojanic=False)
    return evaluate_sequences(sequences, settings, own=own, dataset_path=str(folder))


def test_same_data_elsewhere_combines_changed_data_refuses(recipe, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(recipe["data"], copy)
    scene = ["v_camera"]  # one scene keeps the three evaluations quick
    sequences = load_sequences(recipe["data"], scenes=scene)
    elsewhere = load_sequences(copy, scenes=scene)
    assert dataset_fingerprint(elsewhere) == dataset_fingerprint(sequences)
    # the identity is the whole folder's: runs over different scenes of it combine
    assert dataset_fingerprint(load_sequences(copy, scenes="i_camera")) == dataset_fingerprint(
        recipe["sequences"]
    )
    # the built-in SIFT on the data, your own on the copy: one cube, every query paired
    sift = evaluate(
        sequences,
        extract(sequences, ("sift",), locked="sift"),
        keypoints="locked:sift",
        bojanic=False,
        dataset_path=str(recipe["data"]),
    )
    own = load_features({"mine": recipe["mine"]})
    mine = own_on_sift_keypoints(elsewhere, own, copy)
    assert sift.attrs["dataset"] == mine.attrs["dataset"] == dataset_fingerprint(sequences)
    both = qc.combine([sift, mine])
    assert both.sizes["query"] == sift.sizes["query"] == mine.sizes["query"]
    assert (both.n_relevant.values != -1).all()
    from metricalc.stats import compare

    result = compare(both, pair_by="query", baseline="sift")
    assert int(result.n_dropped.item()) == 0
    assert int(result.n.item()) == int(np.isfinite(sift.ap.values).sum())

    # change one homography value: another fingerprint, and combine refuses naming both
    h = copy / "v_camera" / "H_1_2"
    values = np.loadtxt(h)
    values[0, 2] += 0.5
    np.savetxt(h, values)
    changed = load_sequences(copy, scenes=scene)
    assert dataset_fingerprint(changed) != dataset_fingerprint(sequences)
    other = own_on_sift_keypoints(changed, own, copy)
    with pytest.raises(InvalidInputError) as error:
        qc.combine([sift, other])
    message = str(error.value)
    assert message.startswith("cannot combine cubes of different data: cube 0 was evaluated on")
    assert dataset_fingerprint(sequences) in message and dataset_fingerprint(changed) in message
    assert f"(read from {copy})" in message and "\n" not in message


def test_python_export_and_native_own_features(recipe, tmp_path):
    sequences = recipe["sequences"][:1]
    kept = export_keypoints(sequences, tmp_path / "kps", detector="sift", max_keypoints=50)
    assert all(len(image["keypoints"]) <= 50 for image in kept[sequences[0].name].values())
    assert sorted(p.name for p in (tmp_path / "kps" / sequences[0].name).iterdir()) == [
        f"{k}.npz" for k in IMAGES
    ]
    own = load_features({"mine": recipe["mine"]})
    native = extract(sequences, ("orb",), own=own)  # native: added with their own keypoints
    assert list(native) == ["orb", "mine"]
    name = sequences[0].name
    assert native["mine"][name][1] is own["mine"][name][1]
    with pytest.raises(InvalidInputError, match="has the name of a built-in method"):
        extract(sequences, ("sift",), locked="sift", own={"sift": own["mine"]})
    with pytest.raises(InvalidInputError, match=r"detector must be one of .*; got .harris."):
        export_keypoints(sequences, tmp_path / "other", detector="harris")
    with pytest.raises(InvalidInputError, match="has no features for scene"):
        extract(recipe["sequences"], (), locked="sift", own={"x": {name: own["mine"][name]}})
