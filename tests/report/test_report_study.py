"""Study specifications (YAML): the shipped studies load, and every mistake names file and key."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.metrics import metric_set
from metricalc.report import data as report_data
from metricalc.report.analysis import run_tests
from metricalc.report.study import (
    FIGURES,
    OUTPUTS,
    TestSpec,
    demo_study,
    load_study,
    study_from_dict,
)
from tests.shared_checks import reading_error

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def test_shipped_studies_load():
    demo = load_study(REPORTS / "demo.yaml")
    assert replace(demo, source=None) == demo_study()
    assert demo.default_out() == REPORTS / "demo"
    study = load_study(REPORTS / "locked_vs_native.yaml")
    assert study.data.kind == "dataset" and study.data.dataset == "synthetic"
    assert dict(study.data.keypoints) == {"locked": "locked:sift", "native": "native"}
    assert study.baseline == "native" and study.tests.pair_by == "scene"
    assert study.figures == FIGURES and study.outputs == OUTPUTS


def test_defaults_and_paths_relative_to_the_file(tmp_path):
    (tmp_path / "results").mkdir()
    cube = qc.new_cube(
        ["a"],
        {"scene": ["i_x"], "pair": ["1-2"], "keypoint_set": ["k"], "query_keypoint": [0]},
        {"ap": [[0.5]]},
        attrs=qc.DEFAULT_ATTRS,
    )
    qc.save(cube, tmp_path / "results" / "a.nc")
    spec = tmp_path / "mine.yaml"
    spec.write_text("data:\n  cubes: {one: results/a.nc, two: results/a.nc}\n")
    study = load_study(spec)
    assert study.name == "mine" and study.default_out() == tmp_path / "mine"
    assert dict(study.data.cubes) == {
        "one": tmp_path / "results" / "a.nc",
        "two": tmp_path / "results" / "a.nc",
    }
    assert study.baseline is None and study.metrics is None and study.decimals == 1
    assert (study.tests.test, study.tests.correction, study.tests.alpha) == ("auto", "holm", 0.05)
    assert study.tests.rank_by == "scene"  # Friedman blocks: scenes, not single queries
    loaded = report_data.load_cubes(study.data, out=tmp_path)
    assert list(loaded) == ["one", "two"] and loaded["one"].sizes["query"] == 1


SYNTHETIC = "data: {dataset: synthetic}\n"

DATA_ERRORS = [
    ("title: x\n", "data: missing"),
    ("data: {dataset: synthetic, cube: a.nc}\n", "data: give exactly one of cube"),
    ("data: {cube: nowhere.nc}\n", "data.cube: cube file"),
    ("data: {cubes: {}}\n", "data.cubes: expected at least one label"),
    ("data: {cubes: {'a (b)': x.nc}}\n", "data.cubes.a (b): a label must be non-empty"),
    ("data: {dataset: no_such_folder}\n", "data.dataset: expected 'synthetic'"),
    ("data: {dataset: synthetic, keypoints: sift}\n", "data.keypoints: expected 'native'"),
    (
        "data: {dataset: synthetic, keypoints: {a: native, b: 'locked:'}}\n",
        "data.keypoints.b: expected 'native' or 'locked:<detector>'",
    ),
    (
        "data: {dataset: synthetic, descriptors: [sift, surf]}\n",
        "data.descriptors[1]: expected one of sift, rootsift, dspsift, orb, brief, brisk, "
        "akaze, kaze, raw_patch; got 'surf'",
    ),
    ("data: {dataset: synthetic, descriptors: [orb, orb]}\n", "data.descriptors: names repeat"),
    ("data: {dataset: synthetic, tau: 0}\n", "data.tau: expected a number in (0, 1e+06]"),
    ("data: {dataset: synthetic, tie_policy: random}\n", "data.tie_policy: expected one of"),
    ("data: {dataset: synthetic, seed: -1}\n", "data.seed: expected an integer >= 0"),
    ("data: {dataset: synthetic, bojanic: 'yes'}\n", "data.bojanic: expected true or false"),
    ("data: {dataset: synthetic, colour: red}\n", "data.colour: unknown key"),
    ("data: {experiment: ''}\n", "data.experiment[0]: expected a non-empty string"),
    ("data: {experiment: [a, a]}\n", "data.experiment: names repeat"),
    ("data: {experiment: a, tag: b}\n", "data.tag: unknown key"),
    ("data: {experiment: [a, ../b]}\n", "data.experiment[1]: a tag '../b': expected letters"),
    ("data: {experiment: .hidden}\n", "data.experiment[0]: a tag '.hidden': expected letters"),
    ("data: {experiment: a/b}\n", "data.experiment[0]: a tag 'a/b'"),
    ("data: {experiment: a, benchmark: ../x}\n", "data.benchmark: a benchmark '../x'"),
    ("data: {dataset: synthetic, root: ../../x}\n", "data.root: '../../x' leads outside"),
    ("data: {dataset: synthetic, root: /tmp/x}\n", "data.root: '/tmp/x' is an absolute path"),
    ("- data\n", "(top level): expected a mapping of keys; got list"),
    ("data: {dataset: synthetic\ntitle: [\n", "line "),
]
"""Errors in ``data`` and in the file as a whole."""

KEY_ERRORS = [
    ("tabel: 1\n", "tabel: unknown key; expected one of title"),
    ("tests: {test: anova}\n", "tests.test: expected one of auto, randomization"),
    ("tests: {alpha: 2}\n", "tests.alpha: expected a number in (0, 0.5]; got 2"),
    ("tests: {pair_by: image}\n", "tests.pair_by: expected one of query, pair"),
    ("tests: {correction: sidak}\n", "tests.correction: expected one of holm"),
    ("tests: {n_resamples: 5}\n", "tests.n_resamples: expected an integer >= 99"),
    ("tests: {n_resamples: 1000000000000}\n", "tests.n_resamples: n_resamples="),
    ("tests: {ranks: true}\n", "tests.ranks: unknown key"),
    ("tests: [wilcoxon]\n", "tests: expected a mapping"),
    ("figures: [roc, pie]\n", "figures[1]: expected one of map_by_split"),
    ("outputs: []\n", "outputs: expected a non-empty list"),
    ("decimals: 7\n", "decimals: expected an integer <= 6"),
    ("names: {sift: 3}\n", "names.sift: expected a non-empty string; got 3"),
    ("baseline: ''\n", "baseline: expected a non-empty string"),
    ("metrics: [true_map_micro, 5]\n", "metrics[1]: expected a non-empty string"),
]
"""Errors in the keys beside ``data``, each after a valid ``data`` (:data:`SYNTHETIC`)."""


@pytest.mark.parametrize(
    ("text", "message"),
    [*DATA_ERRORS, *((SYNTHETIC + text, message) for text, message in KEY_ERRORS)],
)
def test_spec_errors_name_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "study.yaml"
    error = reading_error(path, text, load_study)
    assert error.startswith(f"{path}: ")
    assert message in error


def test_yaml_syntax_error_gives_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("title: ok\ndata:\n  dataset: synthetic\n  scenes: [a, b\n")
    with pytest.raises(
        InvalidInputError, match=r"broken.yaml: line \d+, column \d+: not valid YAML"
    ):
        load_study(path)
    with pytest.raises(InvalidInputError, match="no such study file"):
        load_study(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("benchmark", "tag"), [("hpatches", "../x"), ("../x", "sift")])
def test_run_folders_take_names_not_paths(tmp_path, benchmark, tag):
    from metricalc.experiment.rundir import RunDir

    with pytest.raises(InvalidInputError, match=r"'\.\./x': expected letters, digits"):
        RunDir(tmp_path, benchmark, tag)


def test_experiment_tags_load_the_runs_results(tmp_path, make_query_cube):
    from metricalc.experiment.rundir import RunDir

    study = study_from_dict(
        {"data": {"experiment": ["sift", "orb"], "outputs": "runs"}}, source=tmp_path / "e.yaml"
    )
    assert study.data.kind == "experiment" and study.data.experiments == ("sift", "orb")
    assert study.data.benchmark == "hpatches" and study.data.outputs == tmp_path / "runs"
    with pytest.raises(InvalidInputError, match=r"no results of tag 'sift' .*metricalc run"):
        report_data.load_cubes(study.data, out=tmp_path)
    for seed, tag in enumerate(("sift", "orb")):  # a run's results.h5: one descriptor, its tag
        results = RunDir(tmp_path / "runs", "hpatches", tag).results
        results.parent.mkdir(parents=True)
        run = make_query_cube({tag: 0.5}, seed=seed, keypoints="native")
        qc.save(
            run.assign_coords(keypoint_set=("query", np.full(run.sizes["query"], tag))), results
        )
    (cube,) = report_data.load_cubes(study.data, out=tmp_path).values()
    assert cube.descriptor.values.tolist() == ["sift", "orb"]
    assert cube.sizes["query"] == 2 * 640  # each run's own queries (keypoint_set = tag)


def test_data_loaders_can_be_registered(tmp_path, make_query_cube):
    study = study_from_dict({"data": {"experiment": "x"}}, source=tmp_path / "e.yaml")
    cube = make_query_cube({"a": 0.5})
    original = report_data.DATA_LOADERS["experiment"]
    try:
        report_data.register_data_loader("experiment", lambda spec, out, progress: {"": cube})
        assert report_data.load_cubes(study.data, out=tmp_path)[""] is cube
    finally:
        report_data.register_data_loader("experiment", original)
    with pytest.raises(InvalidInputError, match="must be callable"):
        report_data.register_data_loader("experiment", "not a function")


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic", "workbench"])
def test_hit_rate_columns_test_the_values_the_table_shows(make_query_cube, policy):
    # the HR@K column is tested on compare's hit@K, whose mean is the column's value
    cube = make_query_cube({"a": 0.7, "b": 0.2, "c": 0.5}, seed=4)
    cube = qc.new_cube(
        cube.descriptor.values.tolist(),
        {k: cube[k].values for k in ("scene", "pair", "keypoint_set", "query_keypoint")},
        {k: cube[k].values for k in ("better", "ties", "n_relevant")},
        attrs={**cube.attrs, "tie_policy": policy},
    )
    metrics = metric_set(cube, k=(1, 5))
    columns = ["hit_rate_at_1", "hit_rate_at_5"]
    tests = run_tests({"": cube}, columns, tests=TestSpec(n_resamples=99, rank=False),
                      baseline="a")  # fmt: skip
    for k, column in zip((1, 5), columns, strict=True):
        comparison = tests[column].comparison
        assert comparison.attrs["metric"] == f"hit@{k}"
        for name in ("b", "c"):
            row = comparison.sel(descriptor=name, baseline="a")
            for system, mean in ((name, row.mean_descriptor), ("a", row.mean_baseline)):
                expected = float(metrics[column].sel(descriptor=system))
                assert float(mean) == pytest.approx(expected, rel=1e-12)


def test_a_label_baseline_without_shared_descriptors_still_ranks_the_systems(make_query_cube):
    # no descriptor is under both labels: nothing to compare, but the ranking of all systems stands
    locked = make_query_cube({"a": 0.7, "b": 0.2, "c": 0.5}, seed=4)
    native = make_query_cube({"d": 0.6}, seed=5)
    tests = run_tests({"locked": locked, "native": native}, ["true_map_micro"],
                      tests=TestSpec(n_resamples=99, rank=True), baseline="native")  # fmt: skip
    column = tests["true_map_micro"]
    assert column.comparison is None
    assert any("no descriptor is under both 'native' and another label" in n for n in column.notes)
    assert sorted(column.ranking["descriptor"].values.tolist()) == [
        "a (locked)", "b (locked)", "c (locked)", "d (native)",
    ]  # fmt: skip


def test_combined_attrs_join_distinct_values_once_even_with_commas(make_query_cube):
    """An attr value holding ", " (a dataset name, JSON options) is not joined to itself."""
    cube = make_query_cube({"sift": 0.5}, scenes=("i_a",), per_pair=4)
    parts = {}
    for label, dataset in (("a", "x, split full"), ("b", "x, split full"), ("c", "y")):
        part = cube.copy()
        part.attrs = {**cube.attrs, "dataset": dataset}
        parts[label] = part
    joined = report_data.combined(parts)
    assert joined.attrs["dataset"] == "x, split full, y"
    assert report_data.combined({"a": parts["a"], "b": parts["b"]}).attrs["dataset"] == (
        "x, split full"
    )
