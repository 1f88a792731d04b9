"""The report's cube cache: a study's dataset is evaluated once, its cube is read back from
``<out>/cache/<key>.nc`` while nothing that determines it changed, and any change (a protocol
setting, the descriptors, the keypoints, one pixel of the data) misses the cache."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from PIL import Image

from metricalc import cube as qc
from metricalc.keypoints import pipeline
from metricalc.keypoints.pipeline import cache_key, cached_cube
from metricalc.report.data import load_cubes
from metricalc.report.study import DataSpec


@pytest.fixture
def data(tmp_path) -> Path:
    from metricalc.datasets.sequences import make_synthetic_dataset

    make_synthetic_dataset(tmp_path / "data", scenes=["camera"], size=128)
    return tmp_path / "data"


def spec(data: Path, **changes) -> DataSpec:
    base = DataSpec(
        kind="dataset",
        dataset=str(data),
        descriptors=("sift", "orb"),
        keypoints={"": "locked:sift"},
        bojanic=False,
    )
    return replace(base, **changes)


def cache_files(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "cache").iterdir())


def test_a_second_load_reads_the_cube_back_unchanged(data, evaluations, tmp_path):
    out = tmp_path / "report"
    first = load_cubes(spec(data), out=out)[""]
    assert evaluations == ["locked:sift"] and len(cache_files(out)) == 1
    again = load_cubes(spec(data), out=out)[""]
    assert evaluations == ["locked:sift"]  # not evaluated again
    xr.testing.assert_identical(first, again)
    assert first.attrs["dataset"].startswith("synthetic-sequences sha256:")  # as `keypoints eval`
    assert first.attrs["dataset_path"] == str(data)
    assert cache_files(out) == [f"{first.attrs['cache_key']}.nc"]


CHANGES = (
    {"tau": 5.0},
    {"border": 30.0},
    {"tie_policy": "pessimistic"},
    {"seed": 1},
    {"bojanic": True},
    {"descriptors": ("sift",)},
    {"keypoints": {"": "native"}},
)


def test_a_changed_input_misses_the_cache(data, evaluations, tmp_path):
    out = tmp_path / "report"
    load_cubes(spec(data), out=out)
    for n, change in enumerate(CHANGES, start=2):
        load_cubes(spec(data, **change), out=out)
        assert len(evaluations) == n and len(cache_files(out)) == n, change
    for change in CHANGES:  # each changed input hits its own entry
        load_cubes(spec(data, **change), out=out)
    assert len(evaluations) == len(CHANGES) + 1


def test_changed_data_misses_the_cache_and_a_copy_hits_it(data, evaluations, tmp_path):
    out = tmp_path / "report"
    load_cubes(spec(data), out=out)
    copy = tmp_path / "elsewhere"
    shutil.copytree(data, copy)
    load_cubes(spec(copy), out=out)
    assert len(evaluations) == 1  # the same images and homographies: the same cube
    image = copy / "v_camera" / "3.png"
    pixels = np.array(Image.open(image))
    pixels[0, 0] = 255 - pixels[0, 0]
    Image.fromarray(pixels).save(image)
    load_cubes(spec(copy), out=out)
    assert len(evaluations) == 2 and len(cache_files(out)) == 2


def test_a_file_of_another_key_or_not_a_cube_is_replaced(tmp_path, make_query_cube):
    cube = make_query_cube({"a": 0.9, "b": 0.5}, seed=1)
    path = tmp_path / "cache" / "k.nc"
    path.parent.mkdir()
    path.write_text("not a cube")
    _, reused = cached_cube(path, "k", lambda: cube)
    assert not reused and qc.open_cube(path).attrs["cache_key"] == "k"
    again, reused = cached_cube(path, "k", lambda: pytest.fail("computed again"))
    assert reused and again.attrs["cache_key"] == "k"
    _, reused = cached_cube(path, "other", lambda: cube.copy())
    assert not reused and qc.open_cube(path).attrs["cache_key"] == "other"
    assert cache_key({"a": [1, 2]}) != cache_key({"a": [2, 1]})


def test_a_demo_cube_of_the_same_inputs_in_the_folder_is_reused(data, evaluations, tmp_path):
    from metricalc.keypoints.pipeline import EvaluationSettings, evaluation_inputs
    from metricalc.keypoints.sequences import load_sequences

    first = load_cubes(spec(data), out=tmp_path / "elsewhere")[""]
    out = tmp_path / "report"
    out.mkdir()
    qc.save(first, out / "cube_locked.nc")  # where `metricalc demo` puts its locked cube
    settings = EvaluationSettings(
        ("sift", "orb"), "locked:sift", bojanic=False, image_retrieval=False
    )
    inputs = evaluation_inputs(load_sequences(data), settings)
    assert first.attrs["cache_key"] == cache_key(inputs)
    again = load_cubes(spec(data), out=out)[""]
    assert evaluations == ["locked:sift"] and not (out / "cache").exists()  # nothing copied
    xr.testing.assert_identical(again, first)
    load_cubes(spec(data, tau=4.0), out=out)  # another key: evaluated, into the cache
    assert len(evaluations) == 2 and len(cache_files(out)) == 1


def test_the_keys_hash_the_inputs_they_always_hashed(data):
    """A cube cached before the pipeline moved to keypoints/ is still found: the key of a study's
    settings and of the demo's (which names image retrieval) hash these exact mappings."""
    import hashlib

    import cv2

    from metricalc.keypoints.pipeline import EvaluationSettings, evaluation_inputs
    from metricalc.keypoints.sequences import dataset_fingerprint, load_sequences
    from metricalc.version import __version__

    sequences = load_sequences(data)
    inputs = {
        "dataset": dataset_fingerprint(sequences),
        "scenes": ["i_camera", "v_camera"],
        "descriptors": ["sift", "orb"],
        "keypoints": "locked:sift",
        "max_keypoints": 2000,
        "tau": 3.0,
        "border": 40.0,
        "tie_policy": "expected",
        "bojanic": False,
        "y0": "negative",
        "n_distractor_scenes": 10,
        "n_distractors": 20,
        "seed": 0,
        "metricalc": __version__,
        "opencv": cv2.__version__,
    }
    study = EvaluationSettings(descriptors=("sift", "orb"), keypoints="locked:sift", bojanic=False)
    assert cache_key(evaluation_inputs(sequences, study)) == cache_key(inputs)
    demo = EvaluationSettings(keypoints="native", image_retrieval=False, seed=2)
    assert cache_key(evaluation_inputs(sequences, demo)) == cache_key(
        {
            **inputs,
            "descriptors": ["sift", "rootsift", "orb", "brief"],
            "keypoints": "native",
            "bojanic": True,
            "seed": 2,
            "image_retrieval": False,
        }
    )
    text = '{"a":[1,2],"b":3.5}'  # canonical JSON: keys sorted, no spaces
    assert cache_key({"b": 3.5, "a": [1, 2]}) == hashlib.sha256(text.encode()).hexdigest()[:24]


def test_the_pipeline_is_extract_then_evaluate(data):
    """evaluate_sequences is extract (built-in methods, locked or native) then evaluate, with
    every setting passed on; external keypoints need your own features."""
    from metricalc.errors import InvalidInputError
    from metricalc.keypoints import evaluate, extract
    from metricalc.keypoints.pipeline import EvaluationSettings, evaluate_sequences
    from metricalc.keypoints.sequences import load_sequences

    sequences = load_sequences(data)
    settings = EvaluationSettings(
        ("sift", "orb"), "locked:sift", max_keypoints=300, tau=4.0, bojanic=False, seed=3
    )
    cube = evaluate_sequences(sequences, settings, dataset_path="here")
    features = extract(sequences, ("sift", "orb"), locked="sift", max_keypoints=300)
    direct = evaluate(
        sequences, features, keypoints="locked:sift", tau=4.0, bojanic=False, seed=3,
        dataset_path="here",
    )  # fmt: skip
    timing = "processing_time_ms"
    xr.testing.assert_identical(cube.drop_vars(timing), direct.drop_vars(timing))
    assert cube.attrs["tau_px"] == 4.0 and cube.attrs["seed"] == 3
    with pytest.raises(InvalidInputError, match="pass own"):
        evaluate_sequences(sequences, EvaluationSettings(keypoints="external"))


class _KeyTakenError(Exception):
    """Raised by the recording cached_cube below once it has the key (nothing is evaluated)."""


@pytest.mark.parametrize("image_retrieval", [False, True])
def test_the_demo_study_reads_the_cube_the_demo_left(image_retrieval, tmp_path, monkeypatch):
    """docs/report.md: `metricalc report reports/demo.yaml` after `metricalc demo` evaluates
    nothing: the study's dataset key is the key of the demo's locked cube, unless the demo also
    computed the image retrieval (another cube, another key)."""
    from metricalc.benchmarks.hpatches_sequences.demo import run_demo
    from metricalc.report.builder import build
    from metricalc.report.study import demo_study

    keys: list[str] = []

    def recording(path, key, compute, *, elsewhere=()):
        keys.append(key)
        raise _KeyTakenError

    monkeypatch.setattr(pipeline, "cached_cube", recording)
    with pytest.raises(_KeyTakenError):  # the locked cube's key, the demo's first
        run_demo(tmp_path, quick=True, image_retrieval=image_retrieval, progress=False)
    with pytest.raises(_KeyTakenError):
        build(demo_study(quick=True), out=tmp_path, progress=False)
    demo_key, study_key = keys
    assert (demo_key == study_key) is not image_retrieval
