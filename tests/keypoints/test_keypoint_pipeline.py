"""The keypoint pipeline's cache folder (metricalc.keypoints.evaluate_sequences(cache=...)): one
entry per key of the inputs, found under any file name of the folder, your own features' content
in the key. The demo and ``keypoints eval`` sharing an entry: tests/cli/test_cli.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc import cube as qc
from metricalc.keypoints import EvaluationSettings, evaluate_sequences, load_sequences, pipeline

SETTINGS = EvaluationSettings(("orb",), "native", max_keypoints=200, bojanic=False)


@pytest.fixture(scope="module")
def sequences(tmp_path_factory) -> list:
    from metricalc.datasets.sequences import make_synthetic_dataset

    root = tmp_path_factory.mktemp("data")
    make_synthetic_dataset(root, scenes=["camera"], size=128)
    return load_sequences(root)


def hand_key(sequences, settings: EvaluationSettings) -> str:
    """The key written out: SHA-256 of the sorted, compact JSON of the inputs, 24 hex digits."""
    import cv2

    import metricalc
    from metricalc.keypoints import dataset_fingerprint

    inputs = {
        "dataset": dataset_fingerprint(sequences),
        "scenes": sorted(s.name for s in sequences),
        "descriptors": list(settings.descriptors),
        "keypoints": settings.keypoints,
        "max_keypoints": settings.max_keypoints,
        "tau": settings.tau,
        "border": settings.border,
        "tie_policy": settings.tie_policy,
        "bojanic": settings.bojanic,
        "y0": settings.y0,
        "n_distractor_scenes": 10,
        "n_distractors": 20,
        "seed": settings.seed,
        "metricalc": metricalc.__version__,
        "opencv": cv2.__version__,
    }
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def test_a_cache_folder_evaluates_once_and_keeps_the_cube_under_its_key(
    sequences, evaluations, tmp_path
):
    first = evaluate_sequences(sequences, SETTINGS, cache=tmp_path)
    key = hand_key(sequences, SETTINGS)
    assert evaluations == ["native"] and first.attrs["cache_key"] == key
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{key}.nc"]
    again = evaluate_sequences(sequences, SETTINGS, cache=tmp_path)
    assert evaluations == ["native"]  # read back, not evaluated
    xr.testing.assert_identical(again, first)
    uncached = evaluate_sequences(sequences, SETTINGS)  # the same cube, without the key
    assert evaluations == ["native", "native"]
    timed = ["processing_time_ms"]
    assert first.drop_vars(timed).drop_attrs().identical(uncached.drop_vars(timed).drop_attrs())
    assert set(first.attrs) - set(uncached.attrs) == {"cache_key"}


def test_an_entry_is_found_under_any_name_and_copied_to_a_named_file(
    sequences, evaluations, tmp_path
):
    cube, reused = pipeline.cached_evaluation(sequences, SETTINGS, tmp_path)
    key = cube.attrs["cache_key"]
    (tmp_path / f"{key}.nc").rename(tmp_path / "mine.nc")
    (tmp_path / "other.nc").write_text("not a cube")  # skipped: not a cube of the key
    found, reused = pipeline.cached_evaluation(sequences, SETTINGS, tmp_path, name="named.nc")
    assert reused and evaluations == ["native"]
    assert qc.open_cube(tmp_path / "named.nc").attrs["cache_key"] == key  # the caller's file
    xr.testing.assert_identical(found, cube)
    tau = EvaluationSettings(("orb",), "native", max_keypoints=200, bojanic=False, tau=4.0)
    evaluate_sequences(sequences, tau, cache=tmp_path)  # another key misses
    assert evaluations == ["native", "native"]


def test_your_own_features_content_is_in_the_key(sequences, evaluations, tmp_path):
    from metricalc.keypoints import Features, extract

    mine = {"mine": extract(sequences, "orb", max_keypoints=100)["orb"]}
    external = EvaluationSettings((), "external", bojanic=False)
    evaluate_sequences(sequences, external, own=mine, cache=tmp_path)
    evaluate_sequences(sequences, external, own=mine, cache=tmp_path)
    assert evaluations == ["external"]
    scene = sequences[0].name
    image = mine["mine"][scene][2]
    changed = image.descriptors.copy()
    changed[0, 0] ^= np.uint8(1)  # one bit of one descriptor
    mine["mine"][scene][2] = Features(image.keypoints, changed)
    evaluate_sequences(sequences, external, own=mine, cache=tmp_path)
    assert evaluations == ["external", "external"] and len(list(tmp_path.glob("*.nc"))) == 2


def test_the_cache_folder_is_the_only_place_written(sequences, tmp_path):
    cache = tmp_path / "cache"
    evaluate_sequences(sequences, SETTINGS, cache=cache)
    assert [p.parent for p in tmp_path.rglob("*") if p.is_file()] == [Path(cache)]
