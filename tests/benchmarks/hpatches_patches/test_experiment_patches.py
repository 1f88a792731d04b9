"""``metricalc run patches``: the patch retrieval benchmark as an experiment run.

Checked against the patches pipeline called directly (make_benchmark -> describe_patches ->
compute_results -> evaluate_folders), against pandas for the per-file, per-group and
per-sequence means, for every cache flag, for resumption after a killed export, for every local
scheduler and through the command line.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml

import metricalc as mc
import metricalc.benchmarks.hpatches_patches as mp
from metricalc import cube as cubes
from metricalc.benchmarks.hpatches_patches.compute import (
    DescriptorPool,
    compute_results,
    load_descriptor_pool,
)
from metricalc.benchmarks.hpatches_patches.describe import describe_patches
from metricalc.benchmarks.hpatches_patches.experiment import DEFAULT_CONF
from metricalc.benchmarks.hpatches_patches.experiment_data import load_dataset, prepare_benchmarks
from metricalc.benchmarks.hpatches_patches.experiment_tables import file_table
from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.experiment import run
from metricalc.experiment.rundir import RunDir
from metricalc.store import get_experiment, record_experiment
from tests.data_files import HPATCHES_RETRIEVAL
from tests.experiment_helpers import (
    assert_needs_overwrite_eval,
    datasets,
    refused_config_test,
    rerun_and_check,
    stamp,
)

ROOT = Path(__file__).resolve().parents[3]
RELEASE = HPATCHES_RETRIEVAL
QUICK = [
    "data.quick=true",
    "data.size=256",
    "data.max_patches=80",
    "data.queries_per_sequence=20",
]
"""Four synthetic sequences (two train, two test) of at most 80 patches, 4 benchmark files of
40 queries (train/test x easy/hard, 2 sequences each): a run takes a few seconds."""

FILES = ("test_easy_2s_00", "test_hard_2s_00", "train_easy_2s_00", "train_hard_2s_00")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("outputs")


@pytest.fixture(scope="module")
def base(outputs):
    """One fresh run (synchronous scheduler) shared by the read-only tests."""
    result = run("patches", "sift", tag="base", overrides=QUICK, outputs=outputs,
                 scheduler="synchronous")  # fmt: skip
    assert result.status == "ok", result.error
    return result


def _run(outputs, tag, *extra, **flags):
    return run("patches", "sift", tag=tag, overrides=[*QUICK, *extra], outputs=outputs, **flags)


def _copy(base, outputs, tag):
    """A copy of the base run under another tag (its results folder renamed after the tag)."""
    target = base.directory.parent / tag
    shutil.copytree(base.directory, target, ignore=shutil.ignore_patterns(".lock"))
    (target / "retrieval" / base.tag).rename(target / "retrieval" / tag)
    return RunDir(outputs, "patches", tag)


def _without_time(summaries):
    return {k: v for k, v in summaries.items() if k != "processing_time_ms"}


def assert_same_patch_run(result, reference):
    """Identical descriptors, benchmark and .results files, per-query cube, per-file table and
    summaries (but the processing time)."""
    a, b = datasets(result.files["predictions"]), datasets(reference.files["predictions"])
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype == np.float32
        np.testing.assert_array_equal(a[key], b[key])
    for folder in ("benchmarks", f"retrieval/{result.tag}"):
        other = folder.replace(result.tag, reference.tag)
        names = sorted(p.name for p in (result.directory / folder).iterdir())
        assert names == sorted(p.name for p in (reference.directory / other).iterdir())
        for name in names:
            assert (result.directory / folder / name).read_bytes() == (
                reference.directory / other / name
            ).read_bytes()
    ca, cb = result.open_cube(), reference.open_cube()
    for name in ("ap", "image_ap", "n_relevant", "better", "ties"):
        np.testing.assert_array_equal(ca[name].values, cb[name].values)
    for name in ("scene", "split", "keypoint_set", "query_keypoint"):
        np.testing.assert_array_equal(ca[name].values, cb[name].values)
    xr.testing.assert_identical(result.pairs.drop_attrs(), reference.pairs.drop_attrs())
    assert _without_time(result.summaries) == _without_time(reference.summaries)


# --------------------------------------------------------------------------------------------
# the files of a run
# --------------------------------------------------------------------------------------------


def test_a_new_tag_exports_and_evaluates(base, outputs):
    assert base.exported and base.evaluated
    rundir = RunDir(outputs, "patches", "base")
    assert base.directory == rundir.path == outputs / "results" / "patches" / "base"
    for path in (rundir.conf, rundir.predictions, rundir.results, rundir.summaries):
        assert path.is_file()
    assert yaml.safe_load(rundir.conf.read_text()) == base.config
    assert base.config["model"] == {"descriptor": "sift", "distance": "l2"}
    assert not rundir.parts.exists()  # merged and removed
    assert sorted(p.name for p in (rundir.path / "benchmarks").iterdir()) == sorted(
        f"{f}{s}" for f in FILES for s in (".benchmark", ".labels")
    )
    assert sorted(p.name for p in (rundir.path / "retrieval" / "base").iterdir()) == [
        f"{f}.results" for f in FILES
    ]
    for stem in ("map_per_file", "map_per_group", "scene_map"):
        assert (rundir.plots / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(rundir.path.rglob("*.tmp"))


def test_predictions_are_the_descriptors_of_every_pool_patch_image(base, outputs):
    """One group per sequence, one float32 dataset per patch-image of any pool, equal to
    describe_patches of that patch-image."""
    dataset = load_dataset(base.config["data"], outputs)
    assert dataset.sequences == ("i_astronaut", "i_camera", "v_astronaut", "v_camera")
    with h5py.File(base.files["predictions"]) as handle:
        assert handle.attrs["format"] == "metricalc-patch-descriptors"
        assert handle.attrs["export_hash"] == base.export_hash
        assert handle.attrs["descriptor"] == "sift" and handle.attrs["distance"] == "l2"
        assert sorted(handle) == list(dataset.sequences)
        for sequence in handle:
            images = ("ref", *(f"e{k}" for k in range(1, 6)), *(f"h{k}" for k in range(1, 6)))
            assert sorted(handle[sequence]) == sorted(images)  # the pools use no t1..t5
            for image in images:
                stored = handle[sequence][image]
                assert stored.attrs["seconds"] > 0
                expected = describe_patches(dataset.patches(sequence, image))
                np.testing.assert_array_equal(stored[()], expected)


@pytest.fixture(scope="module")
def direct(base, outputs, tmp_path_factory):
    """The same benchmark by the patches pipeline called directly, without the experiment."""
    root = tmp_path_factory.mktemp("direct")
    dataset = load_dataset(base.config["data"], outputs)
    for split in ("train", "test"):
        for difficulty in ("easy", "hard"):
            mp.make_benchmark(dataset, root / "bench", split=split, n_sequences=2, seed=0,
                              difficulty=difficulty, queries_per_sequence=20)  # fmt: skip
    mp.describe_dataset(dataset, root / "descriptors", method="sift")
    for stem in FILES:
        path = root / "bench" / f"{stem}.benchmark"
        pool = load_descriptor_pool(root / "descriptors", mp.read_benchmark(path).pool)
        mp.write_results(root / "sift" / f"{stem}.results", pool.names,
                         compute_results(path, pool))  # fmt: skip
    return root, mp.evaluate_folders(root / "bench", [root / "sift"])


def test_files_equal_a_direct_call_of_the_pipeline(base, direct):
    root, _ = direct
    for stem in FILES:
        for suffix in (".benchmark", ".labels"):
            name = f"{stem}{suffix}"
            assert (base.directory / "benchmarks" / name).read_bytes() == (
                root / "bench" / name
            ).read_bytes()
        name = f"{stem}.results"
        assert (base.directory / "retrieval" / "base" / name).read_bytes() == (
            root / "sift" / name
        ).read_bytes()


def test_the_cube_equals_a_direct_call_of_the_pipeline(base, direct):
    _, done = direct
    cube, reference = base.open_cube(), done.cube
    assert cube.descriptor.values.tolist() == ["base"]
    for name in ("ap", "image_ap", "n_relevant", "better", "ties"):
        np.testing.assert_array_equal(cube[name].values, reference[name].values)
    for name in ("scene", "split", "pair", "keypoint_set", "query_keypoint"):
        np.testing.assert_array_equal(cube[name].values, reference[name].values)
    assert cube.attrs["benchmark"] == "hpatches-retrieval" and cube.attrs["ap_method"] == "vlfeat"
    assert cube.attrs["distance"] == "l2" and cube.attrs["tag"] == "base"
    assert cube.attrs["dataset"].startswith("metricalc synthetic patches (seed 0, size 256")
    assert float(cube.processing_time_ms[0]) > 0
    cubes.validate(cube)


def test_per_file_and_group_tables_equal_the_folder_evaluation(base, direct):
    _, done = direct
    files = done.files.set_index("file")
    table = base.pairs
    assert table["file"].values.tolist() == list(FILES) == files.index.tolist()
    np.testing.assert_array_equal(table["n_queries"].values, files["n_queries"].to_numpy())
    for name in ("patch_retrieval_map", "image_retrieval_map"):  # np.mean vs exact sums
        np.testing.assert_allclose(table[name].values, files[name].to_numpy(), rtol=1e-15)
    for name in ("split", "difficulty", "size"):
        assert table[name].values.tolist() == files[name].tolist()
    groups = done.groups().set_index("group")
    for group, row in groups.iterrows():
        stored = base.summaries["groups"][group]
        assert stored["files"] == row["files"]
        for name in ("patch_retrieval_map", "image_retrieval_map"):
            assert stored[name] == pytest.approx(row[name], rel=1e-15)
    for stem in FILES:
        stored = base.summaries["files"][stem]
        assert stored["n_queries"] == files.loc[stem, "n_queries"]
        for name in ("patch_retrieval_map", "image_retrieval_map"):
            assert stored[name] == pytest.approx(files.loc[stem, name], rel=1e-15)


def test_metric_set_and_scene_metrics_against_pandas(base):
    """The per-query APs of the cube averaged independently with pandas."""
    cube = base.open_cube()
    frame = pd.DataFrame(
        {
            "ap": cube.ap.values[0],
            "image_ap": cube.image_ap.values[0],
            "scene": cube.scene.values,
            "file": cube.keypoint_set.values,
        }
    )
    per_file = frame.groupby("file")[["ap", "image_ap"]].mean()
    m = base.metric_set.sel(descriptor="base")
    assert float(m.true_map_micro) == pytest.approx(frame.ap.mean(), rel=1e-14)
    assert float(m.image_retrieval_map_micro) == pytest.approx(frame.image_ap.mean(), rel=1e-14)
    assert float(m.patch_retrieval_map) == pytest.approx(per_file.ap.mean(), rel=1e-14)
    assert float(m.image_retrieval_map) == pytest.approx(per_file.image_ap.mean(), rel=1e-14)
    np.testing.assert_allclose(m.patch_retrieval_map_by_file.sel(file=list(per_file.index)),
                               per_file.ap, rtol=1e-14)  # fmt: skip
    v = frame[frame.scene.str.startswith("v_")]
    # DescriptorWorkbench's viewpoint_map: the mean over v_ sequences of their mAP
    assert float(m.viewpoint_map) == pytest.approx(v.groupby("scene").ap.mean().mean(), rel=1e-14)
    assert float(m.viewpoint_map_micro) == pytest.approx(v.ap.mean(), rel=1e-14)
    assert int(m.n_files) == 4 and int(m.total_queries_processed) == len(frame)
    hard = per_file[per_file.index.str.contains("_hard_")]
    assert float(m.patch_retrieval_map_by_group.sel(group="difficulty=hard")) == pytest.approx(
        hard.ap.mean(), rel=1e-14
    )
    assert int(m.n_files_by_group.sel(group="split=train")) == 2
    assert not any(name.startswith(("precision_at", "keypoint_")) for name in m.data_vars)
    per_scene = frame.groupby("scene")[["ap", "image_ap"]].agg(["mean", "size"])
    s = base.scene_metrics.sel(descriptor="base")
    assert s.scene.values.tolist() == per_scene.index.tolist()
    np.testing.assert_allclose(s.true_map, per_scene[("ap", "mean")], rtol=1e-14)
    np.testing.assert_allclose(s.image_retrieval_map, per_scene[("image_ap", "mean")], rtol=1e-14)
    np.testing.assert_array_equal(s.query_count, per_scene[("ap", "size")])
    assert (s.excluded_count == 0).all()


def test_summaries_json_is_strict_json_with_the_run_values(base):
    text = base.files["summaries"].read_text()
    stored = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in summaries.json"))
    assert stored == base.summaries
    for key in ("patch_retrieval_map", "image_retrieval_map", "true_map_micro", "n_files"):
        assert stored[key] == base.metric_set[key].values[0].item()


def test_run_result_is_what_a_database_records(base, tmp_path):
    """The metric set and scene metrics go into the results database as they are: seed columns,
    per-file and per-group values as extras, per-sequence rows."""
    meta = base.metadata()
    assert mc.parse_metadata(base.metadata_string()) == meta
    assert meta["metricalc_true_map_micro"] == round(float(base.metric_set.true_map_micro[0]), 6)
    assert meta["v_camera_query_count"] == int(
        base.scene_metrics.query_count.sel(descriptor="base", scene="v_camera")
    )
    db = tmp_path / "runs.sqlite"
    record_experiment(db, tag=base.tag, benchmark=base.benchmark, config=base.config,
                      timings=base.timings, metrics=base.metric_set,
                      scenes=base.scene_metrics)  # fmt: skip
    stored = get_experiment(db, "base", benchmark="patches")
    row = stored.results.iloc[0]
    assert row["true_map_micro"] == pytest.approx(float(base.metric_set.true_map_micro[0]))
    assert np.isnan(row["hit_rate_at_1"])  # no rank statistics in a patch-retrieval cube
    back = stored.metric_set().sel(descriptor="base")
    assert float(back.patch_retrieval_map) == pytest.approx(
        float(base.metric_set.patch_retrieval_map[0])
    )
    np.testing.assert_allclose(
        back.patch_retrieval_map_by_file.sel(file=list(FILES)),
        base.metric_set.patch_retrieval_map_by_file.sel(descriptor="base", file=list(FILES)),
    )
    assert sorted(stored.scenes["scene"]) == ["i_astronaut", "i_camera", "v_astronaut", "v_camera"]


# --------------------------------------------------------------------------------------------
# cache semantics
# --------------------------------------------------------------------------------------------


def test_same_config_reads_everything_from_the_cache(base, outputs):
    rundir = RunDir(outputs, "patches", "base")
    watched = [rundir.predictions, rundir.results, rundir.summaries,
               rundir.path / "retrieval" / "base" / f"{FILES[0]}.results"]  # fmt: skip
    before = [stamp(p) for p in watched]
    again = _run(outputs, "base")
    assert again.status == "ok" and not again.exported and not again.evaluated
    assert [stamp(p) for p in watched] == before
    assert again.summaries == base.summaries
    xr.testing.assert_identical(again.metric_set, base.metric_set)
    xr.testing.assert_identical(again.scene_metrics, base.scene_metrics)
    xr.testing.assert_identical(again.pairs, base.pairs)


def test_overwrite_eval_redoes_the_evaluation_only(base, outputs):
    rundir = _copy(base, outputs, "ov_eval")
    rerun = partial(_run, outputs, "ov_eval", overwrite_eval=True)
    result = rerun_and_check(rundir, rerun, exported=False)
    assert _without_time(result.summaries) == _without_time(base.summaries)


def test_overwrite_redoes_export_and_evaluation(base, outputs):
    rundir = _copy(base, outputs, "ov_all")
    rerun = partial(_run, outputs, "ov_all", overwrite=True)
    result = rerun_and_check(rundir, rerun, exported=True)
    assert_same_patch_run(result, base)


test_a_changed_data_or_model_config_is_refused_with_the_difference = refused_config_test(
    _copy,
    _run,
    [
        ("data.benchmark_seeds=[1]", "data.benchmark_seeds: [0] -> [1]"),
        ("model.distance=l1", "model.distance: 'l2' -> 'l1'"),
        ("model.descriptor=raw", "model.descriptor: 'sift' -> 'raw'"),
    ],
)


def test_a_changed_model_config_with_overwrite_is_redone(base, outputs):
    """L1 instead of L2: the same descriptors, other .results (checked against compute_results
    with distance="l1" on the cached descriptors)."""
    rundir = _copy(base, outputs, "l1")
    result = _run(outputs, "l1", "model.distance=l1", overwrite=True)
    assert result.status == "ok" and result.exported and result.evaluated
    assert (
        result.config["model"]["distance"] == "l1" and result.open_cube().attrs["distance"] == "l1"
    )
    a, b = datasets(result.files["predictions"]), datasets(base.files["predictions"])
    for key in b:
        np.testing.assert_array_equal(a[key], b[key])
    stem = FILES[1]
    path = rundir.path / "benchmarks" / f"{stem}.benchmark"
    benchmark = mp.read_benchmark(path)
    with h5py.File(result.files["predictions"]) as handle:
        arrays = [handle[name.split(".")[0]][name.split(".")[1]][()] for name in benchmark.pool]
    pool = DescriptorPool.from_arrays(benchmark.pool, arrays)
    lines = [",".join(row) for row in compute_results(path, pool, distance="l1")]
    written = (rundir.path / "retrieval" / "l1" / f"{stem}.results").read_text().splitlines()
    assert written[1:] == lines
    assert result.summaries["files"][stem] != base.summaries["files"][stem]


def test_a_changed_eval_config_needs_overwrite_eval(base, outputs, direct):
    rundir = _copy(base, outputs, "eval_change")
    rerun = partial(_run, outputs, "eval_change", "eval.ap_method=trapezoid")
    result = assert_needs_overwrite_eval(rundir, rerun, "eval.ap_method: 'vlfeat' -> 'trapezoid'")
    root, _ = direct
    reference = mp.evaluate_folders(root / "bench", [root / "sift"], ap_method="trapezoid")
    np.testing.assert_array_equal(result.open_cube().ap.values, reference.cube.ap.values)
    assert result.open_cube().attrs["ap_method"] == "trapezoid"


def test_a_changed_eval_config_with_overwrite_redoes_everything(base, outputs):
    _copy(base, outputs, "eval_all")
    result = _run(outputs, "eval_all", "eval.ap_method=ir", overwrite=True)
    assert result.status == "ok" and result.exported and result.evaluated


def test_missing_predictions_are_exported_again(base, outputs):
    rundir = _copy(base, outputs, "no_predictions")
    rundir.predictions.unlink()
    result = _run(outputs, "no_predictions")
    assert result.status == "ok" and result.exported and result.evaluated
    assert_same_patch_run(result, base)


@pytest.mark.parametrize("missing", ["results", "summaries"])
def test_missing_results_are_evaluated_again(base, outputs, missing):
    rundir = _copy(base, outputs, f"no_{missing}")
    getattr(rundir, missing).unlink()
    result = rerun_and_check(rundir, partial(_run, outputs, f"no_{missing}"), exported=False)
    assert _without_time(result.summaries) == _without_time(base.summaries)


def test_a_folder_without_conf_yaml_is_not_trusted(base, outputs):
    rundir = _copy(base, outputs, "no_conf")
    rundir.conf.unlink()
    result = _run(outputs, "no_conf")
    assert result.exported and result.evaluated


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"not hdf5", "cannot be read as HDF5"), (None, "format 'metricalc-patch-descriptors'")],
)
def test_corrupt_predictions_are_a_recorded_error(base, outputs, content, message):
    rundir = _copy(base, outputs, "corrupt_predictions")
    try:
        rundir.results.unlink()
        if content is None:  # an HDF5 file of another format
            with h5py.File(rundir.predictions, "w") as handle:
                handle.attrs["format"] = "metricalc-predictions"
        else:
            rundir.predictions.write_bytes(content)
        result = _run(outputs, "corrupt_predictions")
        assert result.status == "error" and message in result.error
    finally:
        shutil.rmtree(rundir.path)


def test_missing_results_files_are_a_recorded_error(base, outputs):
    rundir = _copy(base, outputs, "no_retrieval")
    shutil.rmtree(rundir.path / "retrieval")
    result = _run(outputs, "no_retrieval", overwrite_eval=True)
    assert result.status == "error" and "rerun with --overwrite" in result.error


# --------------------------------------------------------------------------------------------
# data: given benchmark files, a patch dataset folder, errors
# --------------------------------------------------------------------------------------------


def test_given_benchmark_files_give_the_same_results(base, outputs, direct):
    """data.benchmarks with the files a run drew: identical per-file results; data.files and
    data.quick select among them."""
    root, _ = direct
    data = load_dataset(base.config["data"], outputs).root
    given = [f"data.benchmarks={root / 'bench'}", f"data.patches={data}", "data.quick=false"]
    result = _run(outputs, "given", *given)
    assert result.status == "ok", result.error
    assert result.summaries["files"] == base.summaries["files"]
    assert result.open_cube().attrs["dataset"] == "bench"
    picked = _run(outputs, "picked", *given, f"data.files=[{FILES[2]}]")
    assert picked.status == "ok", picked.error
    assert picked.summaries["files"] == {FILES[2]: base.summaries["files"][FILES[2]]}
    quick = _run(outputs, "quick_files", *given[:2])  # data.quick=true: the 2 smallest pools
    assert quick.status == "ok", quick.error
    assert len(quick.summaries["files"]) == 2


def test_the_release_benchmark_files_are_selected_and_run(tmp_path, outputs):
    """The real ECCV 2016 files: test_* (no labels) are left out, quick takes the two smallest
    pools; train_example runs end to end on a stand-in dataset with the release's sequence
    names whose patch i of a sequence is the same in all six images and unlike any other, so
    the raw descriptor finds each cluster at distance 0: patch retrieval AP 1 for every query."""
    from metricalc.benchmarks.hpatches_patches.experiment_data import _given_stems

    conf = {**DEFAULT_CONF["data"], "benchmarks": str(RELEASE)}
    _, stems = _given_stems(conf)
    assert len(stems) == 15 and all(s.startswith("train_") for s in stems)
    assert _given_stems({**conf, "quick": True})[1] == ["train_easy_5s_00", "train_easy_5s_01"]
    for stem in ("../..", "..", "a/../train_example", "/etc/passwd", "x\\y"):
        with pytest.raises(InvalidInputError, match=r"data.files: .* is not a file stem"):
            _given_stems({**conf, "files": [stem]})
    benchmark = mp.read_benchmark(RELEASE / "train_example.benchmark")
    labels = mp.read_labels(RELEASE / "train_example.labels")
    counts: dict[str, int] = {}
    for cluster in labels.clusters:
        for signature in cluster:
            parsed = mp.parse_signature(signature)
            counts[parsed.sequence] = max(counts.get(parsed.sequence, 0), parsed.index + 1)
    root = tmp_path / "release"
    for number, (sequence, n) in enumerate(sorted(counts.items())):
        levels = np.random.default_rng(number).integers(0, 256, (n, 2, 2), dtype=np.uint8)
        patches = np.repeat(np.repeat(levels, 33, axis=1), 33, axis=2)[:, :65, :65]
        for image in ("ref", *(f"e{k}" for k in range(1, 6))):
            mp.dataset.write_patches(root / sequence / f"{image}.png", patches)
    given = [f"data.patches={root}", f"data.benchmarks={RELEASE}", "data.files=[train_example]"]
    result = run("patches", "raw", overrides=given, outputs=outputs)
    assert result.status == "ok", result.error
    assert result.summaries["files"]["train_example"]["n_queries"] == len(benchmark.queries)
    assert result.summaries["files"]["train_example"]["patch_retrieval_map"] == 1.0
    cube = result.open_cube()
    assert cube.attrs["dataset"] == "hpatches-eccv2016-retrieval"
    assert (cube.ap.values == 1).all()
    assert (result.directory / "benchmarks" / "train_example.labels").read_bytes() == (
        RELEASE / "train_example.labels"
    ).read_bytes()


def test_a_patch_dataset_folder_quick_and_scenes(outputs, tmp_path):
    """data.patches: quick keeps the first two sequences of each split, data.scenes names them."""
    root = tmp_path / "folder"
    for sequence in ("v_a", "v_b", "v_c", "v_d"):
        for image in ("ref", *(f"e{k}" for k in range(1, 6))):
            mp.dataset.write_patches(
                root / sequence / f"{image}.png", np.zeros((2, 65, 65), np.uint8)
            )
    (root / "splits.json").write_text('{"train": ["v_a", "v_b", "v_c"], "test": ["v_d"]}')
    conf = {**DEFAULT_CONF["data"], "patches": str(root)}
    assert load_dataset(conf, outputs).sequences == ("v_a", "v_b", "v_c", "v_d")
    assert load_dataset({**conf, "quick": True}, outputs).sequences == ("v_a", "v_b", "v_d")
    only = load_dataset({**conf, "scenes": ["v_c"]}, outputs)
    assert only.sequences == ("v_c",) and dict(only.splits) == {"v_c": "train"}
    with pytest.raises(InvalidInputError, match="no sequence"):
        load_dataset({**conf, "scenes": ["v_x"]}, outputs)
    drawn = {**conf, "scenes": ["v_a", "v_b"], "difficulties": ["easy"], "queries_per_sequence": 1}
    with pytest.raises(InvalidInputError, match=r"has no test sequence; set data\.splits"):
        prepare_benchmarks(drawn, outputs, tmp_path / "drawn")
    drawn.update(splits=["train"], benchmark_seeds=3, n_sequences=[1, 2])
    dataset, stems = prepare_benchmarks(drawn, outputs, tmp_path / "drawn")
    assert dataset.sequences == ("v_a", "v_b") and stems == ["train_easy_1s_03", "train_easy_2s_03"]
    assert sorted(p.name for p in (tmp_path / "drawn").iterdir()) == [
        f"{stem}{suffix}" for stem in stems for suffix in (".benchmark", ".labels")
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["model.descriptor=orb"], "config key model.descriptor = 'orb'"),
        (["model.distance=cosine"], "expected one of l2, l1"),
        (["eval.ap_method=best"], "config key eval.ap_method = 'best'"),
        (["data.splits=[val]"], "distinct values out of train, test"),
        (["data.difficulties=[easy, easy]"], "distinct values out of easy, hard"),
        (["data.n_sequences=0"], "config key data.n_sequences = 0"),
        (["data.files=[a]"], "null unless data.benchmarks"),
        (["data.benchmarks=x", "data.scenes=[camera]"], "null with data.benchmarks"),
        (["data.max_patches=-1"], "config key data.max_patches = -1"),
        (["data.foo=1"], "unknown key 'data.foo'"),
    ],
)
def test_malformed_configs_are_refused_before_any_work(outputs, extra, message):
    with pytest.raises(InvalidInputError) as info:
        _run(outputs, "malformed", *extra)
    assert message in str(info.value)
    assert not (outputs / "results" / "patches" / "malformed").exists()


def test_malformed_data_are_recorded_errors(base, outputs, tmp_path):
    missing = _run(outputs, "bad_data", f"data.patches={tmp_path / 'nowhere'}")
    assert missing.status == "error" and "is not a folder" in missing.error
    too_many = _run(outputs, "bad_data", "data.n_sequences=3", overwrite=True)
    assert too_many.status == "error"
    assert "data.n_sequences = 3" in too_many.error and "2 train sequence(s)" in too_many.error
    # the real ECCV 2016 files name sequences of the HPatches release, not synthetic ones
    real = _run(outputs, "bad_data", f"data.benchmarks={RELEASE}", overwrite=True)
    assert real.status == "error" and "data.patches=DIR" in real.error
    assert "i_" in real.error or "v_" in real.error
    # a labels file whose line 3 does not hold its query
    folder = tmp_path / "broken"
    folder.mkdir()
    source = base.directory / "benchmarks"
    shutil.copy(source / f"{FILES[0]}.benchmark", folder)
    lines = (source / f"{FILES[0]}.labels").read_text().splitlines()
    lines[2] = lines[3]
    (folder / f"{FILES[0]}.labels").write_text("\n".join(lines) + "\n")
    data = load_dataset(base.config["data"], outputs).root
    broken = _run(outputs, "bad_data", f"data.benchmarks={folder}", f"data.patches={data}",
                  overwrite=True)  # fmt: skip
    assert broken.status == "error" and isinstance(broken.exception, InvalidInputError)
    assert f"{FILES[0]}.labels" in broken.error and "line 3" in broken.error
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = _run(outputs, "bad_data", f"data.benchmarks={empty}", overwrite=True)
    assert nothing.status == "error" and "no .benchmark file with its .labels" in nothing.error


# --------------------------------------------------------------------------------------------
# resumption, schedulers, command line
# --------------------------------------------------------------------------------------------


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _command(outputs, *extra):
    return [sys.executable, "-m", "metricalc", "run", "patches", "--conf", "sift", "--outputs",
            str(outputs), "--no-progress", *extra]  # fmt: skip


def test_a_killed_export_resumes_and_matches_an_uninterrupted_run(tmp_path, base, monkeypatch):
    import metricalc.benchmarks.hpatches_patches.experiment as pr

    rundir = RunDir(tmp_path, "patches", "base")
    process = subprocess.Popen(
        _command(tmp_path, "--tag", "base", "--scheduler", "synchronous", *QUICK),
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while len(list(rundir.parts.rglob("*.h5"))) < 3:
        if process.poll() is not None:
            pytest.fail(f"the run ended before it was killed: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the export did not start in time")
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    done = {(p.parent.name, p.stem) for p in rundir.parts.rglob("*.h5")}
    assert 3 <= len(done) < 44 and not rundir.predictions.exists()
    described = []
    real = pr.describe_patch_image

    def counting(root, sequence, image, count, method):
        described.append((sequence, image))
        return real(root, sequence, image, count, method)

    monkeypatch.setattr(pr, "describe_patch_image", counting)
    result = run("patches", "sift", tag="base", overrides=QUICK, outputs=tmp_path,
                 scheduler="synchronous")  # fmt: skip
    assert result.status == "ok", result.error
    assert result.exported and result.evaluated and not rundir.parts.exists()
    assert len(described) == 44 - len(done) and not set(described) & done
    assert_same_patch_run(result, base)


def test_an_export_failing_while_ranking_keeps_the_ranked_files(base, tmp_path, monkeypatch):
    """A ranking step stopped after some files: the rerun ranks only the others."""
    import metricalc.benchmarks.hpatches_patches.experiment as pr

    real, calls = pr.compute_results, []

    def failing(path, pool, *, distance):
        calls.append(Path(path).stem)
        if len(calls) == 2:
            raise InvalidInputError("ranking stopped")
        return real(path, pool, distance=distance)

    monkeypatch.setattr(pr, "compute_results", failing)
    stopped = run("patches", "sift", tag="base", overrides=QUICK, outputs=tmp_path,
                  scheduler="synchronous", workers=1)  # fmt: skip
    assert stopped.status == "error" and "ranking stopped" in stopped.error
    rundir = RunDir(tmp_path, "patches", "base")
    staged = sorted(p.stem for p in (rundir.parts / ".results").glob("*.results"))
    assert staged == [FILES[0]] and not rundir.predictions.exists()
    calls.clear()

    def counting(path, pool, *, distance):
        calls.append(Path(path).stem)
        return real(path, pool, distance=distance)

    monkeypatch.setattr(pr, "compute_results", counting)
    result = run("patches", "sift", tag="base", overrides=QUICK, outputs=tmp_path,
                 scheduler="synchronous")  # fmt: skip
    assert result.status == "ok", result.error
    assert sorted(calls) == list(FILES[1:])
    assert_same_patch_run(result, base)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_local_schedulers_give_identical_results(base, outputs, scheduler):
    result = _run(outputs, f"sched_{scheduler}", scheduler=scheduler, workers=2)
    assert result.status == "ok", result.error
    assert_same_patch_run(result, base)


def test_a_distributed_cluster_gives_identical_results(base, outputs):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        result = _run(outputs, "sched_cluster", scheduler=cluster.scheduler_address)
    assert result.status == "ok", result.error
    assert_same_patch_run(result, base)


def test_cli_two_tags_at_once(tmp_path, base):
    """Two subprocesses (sift, raw) share a fresh outputs root and generate the synthetic patches
    under its lock; sift equals the in-process run, and SIFT beats raw pixels on hard files."""
    runs = [
        subprocess.Popen(
            [*_command(tmp_path, "--tag", tag, *QUICK), f"model.descriptor={tag}"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("sift", "raw")
    ]
    outs = [p.communicate(timeout=300) for p in runs]
    for process, (_, err) in zip(runs, outs, strict=True):
        assert process.returncode == 0, err
        assert "Traceback" not in err
    assert "patches / sift (exported, evaluated)" in outs[0][0]
    assert "patch mAP" in outs[0][0] and "train_hard_2s_00" in outs[0][0]
    assert f"outputs in {tmp_path / 'results' / 'patches' / 'sift'}" in outs[0][0]
    sift = run("patches", "sift", tag="sift", overrides=QUICK, outputs=tmp_path)
    raw = run("patches", "raw", overrides=QUICK, outputs=tmp_path)
    assert not (sift.exported or sift.evaluated or raw.exported or raw.evaluated)
    assert_same_patch_run(sift, base)
    hard = "difficulty=hard"
    sift_map = sift.summaries["groups"][hard]["patch_retrieval_map"]
    assert sift_map > raw.summaries["groups"][hard]["patch_retrieval_map"]


def test_cli_cached_json_and_errors(outputs, base, capsys):
    code = main(_command(outputs, "--tag", "base", "--json", *QUICK)[3:])
    assert code == 0
    assert json.loads(capsys.readouterr().out) == json.loads(base.files["summaries"].read_text())
    code = main(_command(outputs, "model.distance=cosine")[3:])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("metricalc: error: config key model.distance")
    code = main(_command(outputs, "--tag", "cli_missing", *QUICK, "data.patches=/nowhere")[3:])
    err = capsys.readouterr().err
    assert code == 2 and "run 'cli_missing' failed: InvalidInputError" in err


def test_shipped_raw_config_and_the_keypoint_benchmark_refuses_it(outputs):
    from metricalc.experiment import get_benchmark, load_config

    conf = load_config("raw", benchmark="patches", defaults=get_benchmark("patches").default_conf,
                       benchmarks=["hpatches", "patches"])  # fmt: skip
    get_benchmark("patches").validate(conf)
    assert conf.name == "raw" and conf.values["model"] == {"descriptor": "raw", "distance": "l2"}
    with pytest.raises(InvalidInputError, match=r"model\.descriptor = 'raw'"):
        run("hpatches", "raw", outputs=outputs)


def test_scene_metrics_of_a_patch_cube_count_no_images(base):
    """metricalc.scene_metrics on a contract-A cube (pair ""): per-scene means, no images."""
    scenes = mc.scene_metrics(base.open_cube())
    assert (scenes.image_count == 0).all()
    np.testing.assert_array_equal(scenes.true_map.values, base.scene_metrics.true_map.values)


def test_file_table_of_two_descriptors(base):
    cube = base.open_cube()
    other = cube.assign_coords(descriptor=["other"])
    other["ap"] = other["ap"] / 2
    table = file_table(cubes.combine([cube, other]))
    np.testing.assert_allclose(
        table.patch_retrieval_map.sel(descriptor="other"),
        table.patch_retrieval_map.sel(descriptor="base") / 2,
        rtol=1e-15,
    )
