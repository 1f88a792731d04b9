"""record_experiment / list_experiments / get_experiment: the stored values are the metric set's
(checked against values computed from the per-query table with pandas), the round trips are
exact, upserts replace, and bad arguments are refused before anything is written."""

from __future__ import annotations

import math
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from store_cases import DESCRIPTORS, SCENES, expected_summaries, long_table, make_cube

import metricalc as mc
from metricalc.errors import InvalidInputError
from metricalc.store import (
    COLUMN_SOURCES,
    SEED_COLUMNS,
    get_experiment,
    library_versions,
    list_experiments,
    record_experiment,
    to_dataframe,
)


@pytest.fixture(scope="module")
def cube() -> xr.Dataset:
    return make_cube(0, broken=True)


@pytest.fixture(scope="module")
def metrics(cube: xr.Dataset) -> xr.Dataset:
    return mc.metric_set(cube)


@pytest.fixture(scope="module")
def scenes(cube: xr.Dataset) -> xr.Dataset:
    return mc.scene_metrics(cube)


def record(db: Path, tag: str = "run", **kwargs) -> int:
    kwargs.setdefault("benchmark", "hpatches")
    kwargs.setdefault("config", {"model": {"name": "sift"}, "data": {"quick": True}})
    return record_experiment(db, tag=tag, **kwargs)


def test_seed_columns_hold_the_metric_set(tmp_path, metrics, scenes):
    db = tmp_path / "r.sqlite"
    record(db, metrics=metrics, scenes=scenes)
    frame = to_dataframe(db).set_index("descriptor")
    per_descriptor, per_scene = expected_summaries(long_table(0))
    for d in DESCRIPTORS:
        row = frame.loc[d]
        want = per_descriptor.loc[d]
        assert row.true_map_micro == pytest.approx(want.true_map_micro, rel=1e-12)
        assert row.true_map_macro == pytest.approx(want.true_map_macro, rel=1e-12)
        assert row.viewpoint_map == pytest.approx(want.viewpoint_map, rel=1e-12)
        assert row.illumination_map == pytest.approx(want.illumination_map, rel=1e-12)
        # the seed's legacy column: the macro mAP, as in the real export
        assert row.mean_average_precision == row.true_map_macro
        assert row.processing_time_ms == 100.0 + DESCRIPTORS.index(d)
        assert row.status == "ok" and row.error == ""
        # no Bojanic results in this cube: NULL, read as NaN
        assert math.isnan(row.keypoint_verification_ap) and math.isnan(row.keypoint_retrieval_ap)
        # every column equals its metric-set source exactly
        for column, source in COLUMN_SOURCES.items():
            stored, original = row[column], float(metrics[source].sel(descriptor=d))
            assert stored == original or (math.isnan(stored) and math.isnan(original))
        # the metadata string is the metric set's, per-scene keys included
        meta = mc.parse_metadata(row.metadata)
        assert meta == mc.store.metadata_for(metrics, scenes, d)
        for s in SCENES:
            assert meta[f"{s}_query_count"] == per_scene.loc[(d, s), "query_count"]
    broken = frame.loc["broken"]
    assert broken.status == "error" and broken.error == "RuntimeError: no keypoints"
    assert all(math.isnan(broken[c]) for c in SEED_COLUMNS if c != "processing_time_ms")
    assert broken.total_queries_processed == 0


def test_scene_rows(tmp_path, metrics, scenes):
    db = tmp_path / "r.sqlite"
    record(db, metrics=metrics, scenes=scenes)
    frame = to_dataframe(db, "scenes").set_index(["descriptor", "scene"])
    _, per_scene = expected_summaries(long_table(0))
    assert len(frame) == len(DESCRIPTORS) * len(SCENES)  # the failed descriptor has no scenes
    for (d, s), want in per_scene.iterrows():
        got = frame.loc[(d, s)]
        assert got.true_map == pytest.approx(want.true_map, rel=1e-12)
        assert got.true_map_with_zeros == pytest.approx(want.true_map_with_zeros, rel=1e-12)
        assert (got.query_count, got.excluded_count) == (want.query_count, want.excluded_count)
        assert got.image_count == 3  # images 1, 2, 3 of the pairs 1-2 and 1-3
    assert frame.query_count.dtype == np.int64 and str(frame.image_count.dtype) == "Int64"


def test_round_trip_of_the_metric_set(tmp_path, metrics, scenes):
    db = tmp_path / "r.sqlite"
    record(db, metrics=metrics, scenes=scenes)
    back = get_experiment(db, "run")
    restored = back.metric_set()
    for name, variable in metrics.data_vars.items():
        got = restored[name].transpose(*variable.dims)
        if variable.dtype.kind in "biuf":
            np.testing.assert_array_equal(got.values, variable.values)
            assert got.dtype.kind == variable.dtype.kind, name  # ints stay ints
        else:
            assert got.values.tolist() == variable.values.tolist()
    assert restored["rank_histogram"]["rank_bin"].values.tolist() == (
        metrics["rank_histogram"]["rank_bin"].values.tolist()
    )
    assert back.protocol == {**metrics.attrs, "k": list(metrics.attrs["k"])}
    restored_scenes = back.scene_metrics()
    for name, variable in scenes.data_vars.items():
        np.testing.assert_array_equal(
            restored_scenes[name].sel(descriptor=list(DESCRIPTORS)).values,
            variable.sel(descriptor=list(DESCRIPTORS)).values,
        )


def test_lazy_metric_set_from_netcdf(tmp_path, metrics, scenes):
    # the experiment runs keep the metric set in results.h5: read back lazily, then recorded
    metrics.to_netcdf(tmp_path / "m.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "m.nc", engine="h5netcdf", chunks={}) as lazy:
        record(tmp_path / "r.sqlite", metrics=lazy)
    frame = to_dataframe(tmp_path / "r.sqlite").set_index("descriptor")
    assert frame.loc["orb", "true_map_micro"] == float(metrics.true_map_micro.sel(descriptor="orb"))


def test_upsert_replaces_and_keeps_id_and_creation_time(tmp_path, metrics, scenes):
    db = tmp_path / "r.sqlite"
    first = record(db, metrics=metrics, scenes=scenes, timings={"export": 2.5})
    other = record(db, tag="other", metrics=metrics)
    created = get_experiment(db, "run").created_at
    again = record(
        db,
        metrics=metrics.sel(descriptor=["orb"]),
        scenes=scenes.sel(descriptor=["orb"]),
        config={"model": {"name": "orb"}},
    )
    assert again == first != other
    back = get_experiment(db, "run")
    assert back.created_at == created and back.updated_at >= created
    assert back.results.descriptor.tolist() == ["orb"]
    assert set(back.scenes.descriptor) == {"orb"}
    assert back.config == {"model": {"name": "orb"}} and back.timings == {}
    with sqlite3.connect(db) as connection:  # the replaced rows are gone, not orphaned
        (n_results,) = connection.execute("SELECT COUNT(*) FROM results").fetchone()
        (n_scenes,) = connection.execute("SELECT COUNT(*) FROM scenes").fetchone()
    assert n_results == 1 + len(metrics.descriptor)
    assert n_scenes == len(SCENES)
    assert list_experiments(db).tag.tolist() == ["other", "run"]


def test_descriptor_failures_without_a_message(tmp_path, metrics):
    quiet = metrics.assign(error=("descriptor", ["", "", "", ""]))
    record(tmp_path / "r.sqlite", metrics=quiet.drop_vars("error"), tag="no-error-var")
    record(tmp_path / "r.sqlite", metrics=quiet, tag="empty-error")
    for tag in ("no-error-var", "empty-error"):
        row = get_experiment(tmp_path / "r.sqlite", tag).results.set_index("descriptor")
        assert row.loc["broken", "status"] == "error"
        assert row.loc["broken", "error"] == "(no error message was recorded)"
        assert row.loc["sift", "error"] == ""
    bad = metrics.assign(status=("descriptor", ["ok", "ok", "ok", "failed"]))
    with pytest.raises(InvalidInputError, match="metrics descriptor 'broken': status must be"):
        record(tmp_path / "r.sqlite", metrics=bad)


def test_failed_run_without_metrics(tmp_path):
    db = tmp_path / "r.sqlite"
    record(db, status="error", error="cv2.error: out of memory", timings={"export": 0.5})
    listed = list_experiments(db)
    assert listed.status.tolist() == ["error"] and listed.descriptors.tolist() == [0]
    assert listed.error.tolist() == ["cv2.error: out of memory"]
    failed = get_experiment(db, "run")
    assert failed.metric_set().sizes["descriptor"] == 0
    assert failed.scene_metrics().sizes == {"descriptor": 0, "scene": 0}


def test_config_hash_is_canonical(tmp_path):
    db = tmp_path / "r.sqlite"
    nested = {"b": 1, "a": {"y": [1, 2], "x": 0.5}}
    record(db, tag="dict", config=nested)
    record(db, tag="reordered", config={"a": {"x": 0.5, "y": (1, 2)}, "b": np.int64(1)})
    record(db, tag="yaml", config="b: 1\na:\n  y: [1, 2]\n  x: 0.5\n")
    record(db, tag="omegaconf", config=OmegaConf.create(nested))
    record(db, tag="different", config={"b": 2, "a": {"y": [1, 2], "x": 0.5}})
    hashes = list_experiments(db).set_index("tag").config_hash
    assert hashes["dict"] == hashes["reordered"] == hashes["yaml"] == hashes["omegaconf"]
    assert hashes["different"] != hashes["dict"] and len(hashes["dict"]) == 64
    assert get_experiment(db, "yaml").config == nested | {"a": {"x": 0.5, "y": [1, 2]}}


def test_versions_and_timings(tmp_path):
    db = tmp_path / "r.sqlite"
    record(db, versions={"model": "superpoint-v1", "numpy": "1.0-pinned"}, timings={"eval": 3})
    back = get_experiment(db, "run")
    detected = library_versions()
    assert back.versions["model"] == "superpoint-v1" and back.versions["numpy"] == "1.0-pinned"
    assert back.versions["python"] == detected["python"]
    assert back.metricalc_version == mc.__version__ == back.versions["metricalc"]
    assert back.timings == {"eval": 3.0}


def test_tags_are_bound_parameters(tmp_path):
    db = tmp_path / "r.sqlite"
    evil = "x'); DROP TABLE experiments; --"
    record(db, tag=evil, benchmark='b"; DELETE FROM results; --')
    record(db, tag="plain")
    assert sorted(list_experiments(db).tag) == sorted([evil, "plain"])
    assert get_experiment(db, evil).tag == evil
    assert to_dataframe(db, "experiments", tags=[evil]).tag.tolist() == [evil]


def test_lookups(tmp_path):
    db = tmp_path / "r.sqlite"
    record(db, tag="sift", benchmark="hpatches")
    record(db, tag="sift", benchmark="patches")
    assert get_experiment(db, "sift", benchmark="patches").benchmark == "patches"
    with pytest.raises(InvalidInputError, match=r"benchmarks \['hpatches', 'patches'\]"):
        get_experiment(db, "sift")
    with pytest.raises(InvalidInputError, match=r"no experiment with tag 'orb'.*\['sift'\]"):
        get_experiment(db, "orb")
    assert list_experiments(db, benchmark="patches").benchmark.tolist() == ["patches"]
    with pytest.raises(InvalidInputError, match="no database at"):
        list_experiments(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()  # reading never creates a file


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tag": ""}, "tag must be a non-empty string"),
        ({"benchmark": 3}, "benchmark must be a non-empty string"),
        ({"status": "failed"}, r"status must be one of \['ok', 'error', 'mismatch'\]"),
        ({"status": "error"}, "needs an error message"),
        ({"error": "boom"}, "but status is 'ok'"),
        ({"config": [1, 2]}, "config must be a mapping"),
        ({"config": "- a\n- b"}, "config text must hold a mapping"),
        ({"config": "a: [1,"}, "not valid YAML"),
        ({"config": {"a": object()}}, r"config\['a'\] has type object"),
        ({"config": {1: "a"}}, "key 1 is a int"),
        ({"timings": {"eval": -1.0}}, r"timings\['eval'\] must be a finite number"),
        ({"timings": {"eval": "fast"}}, r"timings\['eval'\] must be a number"),
        ({"versions": {"numpy": 2}}, r"versions\['numpy'\] must be a non-empty string"),
        ({"metrics": "metrics"}, "metrics must be an xarray.Dataset"),
        ({"scenes": "scenes"}, "scenes given without metrics"),
    ],
)
def test_bad_arguments_write_nothing(tmp_path, kwargs, message):
    db = tmp_path / "r.sqlite"
    record(db, tag="kept")
    tag = kwargs.pop("tag", "new")
    with pytest.raises(InvalidInputError, match=message):
        record(db, tag=tag, **kwargs)
    assert list_experiments(db).tag.tolist() == ["kept"]


def test_bad_datasets(tmp_path, metrics, scenes):
    db = tmp_path / "r.sqlite"
    with pytest.raises(InvalidInputError, match="scenes has descriptors"):
        record(db, metrics=metrics.sel(descriptor=["orb"]), scenes=scenes)
    with pytest.raises(InvalidInputError, match="'query_count' must hold integers >= 0"):
        record(db, metrics=metrics, scenes=scenes.assign(query_count=-scenes.query_count))
    with pytest.raises(InvalidInputError, match="scenes lacks"):
        record(db, metrics=metrics, scenes=scenes.drop_vars("true_map"))
    with pytest.raises(InvalidInputError, match="labels must be unique"):
        record(db, metrics=metrics.assign_coords(descriptor=["a", "a", "b", "c"]))
    with pytest.raises(InvalidInputError, match="name of a results column"):
        record(db, metrics=metrics.assign(metadata=metrics.r0_rate))
    with pytest.raises(InvalidInputError, match="dtype"):
        record(db, metrics=metrics.assign(note=("descriptor", ["a", "b", "c", "d"])))
    with pytest.raises(InvalidInputError, match="no database at"):  # nothing was created
        list_experiments(db)


def test_other_datasets_over_descriptor(tmp_path):
    # a summary that is not a metric set (e.g. the patch-retrieval benchmark's): no metadata
    # string, its variables as extra columns
    summary = xr.Dataset(
        {"patch_retrieval_map": ("descriptor", [0.5, np.nan]), "n_queries": ("descriptor", [3, 4])},
        coords={"descriptor": ["a", "b"]},
    )
    db = tmp_path / "r.sqlite"
    record(db, benchmark="patches", metrics=summary)
    frame = to_dataframe(db)
    assert frame.metadata.isna().all()
    assert frame.patch_retrieval_map.iloc[0] == 0.5 and math.isnan(
        frame.patch_retrieval_map.iloc[1]
    )
    assert frame.n_queries.tolist() == [3, 4] and str(frame.n_queries.dtype) == "Int64"


FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e300, 1e300, width=64)
)


@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(st.tuples(FLOATS, st.integers(-(2**62), 2**62)), min_size=1, max_size=4),
    tag=st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and "\x00" not in s),
)
def test_any_values_round_trip(values, tag):
    floats = np.array([v[0] for v in values])
    ints = np.array([v[1] for v in values], dtype=np.int64)
    metrics = xr.Dataset(
        {
            "true_map_micro": ("descriptor", floats),
            "my_score": ("descriptor", floats),
            "my_count": ("descriptor", ints),
        },
        coords={"descriptor": [f"d{i}" for i in range(len(values))]},
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "r.sqlite"
        record_experiment(db, tag=tag, benchmark="b", config={}, metrics=metrics)
        frame = get_experiment(db, tag).results
    finite = np.where(np.isfinite(floats), floats, np.nan)  # non-finite is stored as NULL
    np.testing.assert_array_equal(frame.true_map_micro.to_numpy(), finite)
    np.testing.assert_array_equal(frame.my_score.to_numpy(np.float64, na_value=np.nan), finite)
    assert frame.my_count.tolist() == ints.tolist()
    assert frame.descriptor.tolist() == [f"d{i}" for i in range(len(values))]


def test_frames_of_an_empty_database(tmp_path):
    db = tmp_path / "r.sqlite"
    record(db)  # an experiment without results
    assert to_dataframe(db).empty and to_dataframe(db, "scenes").empty
    assert isinstance(to_dataframe(db, "experiments"), pd.DataFrame)
    with pytest.raises(InvalidInputError, match="table must be one of"):
        to_dataframe(db, "runs")
