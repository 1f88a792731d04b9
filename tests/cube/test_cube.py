"""The QueryCube: schema validation, combine, save / open (eager and lazy), from_dataframe."""

from __future__ import annotations

import os
import re
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from xarray.groupers import UniqueGrouper

import metricalc as mc
from metricalc import cube as qc
from metricalc.errors import InvalidInputError

ATTRS = {**qc.DEFAULT_ATTRS, "distance": "l2", "keypoints": "locked:sift", "dataset": "unit"}
HAND_AP = float(np.mean([1 / 3, 1 / 4, 1 / 5, 1 / 6]))  # better = 2, ties = 3, "expected"
DOC = Path(__file__).resolve().parents[2] / "docs" / "cube.md"


def make_cube(
    descriptors=("sift", "orb"),
    scenes=("i_a", "v_b"),
    *,
    keypoint_set="sift",
    offset=0,
    attrs=ATTRS,
    sequences=True,
    time_ms=None,
) -> xr.Dataset:
    """A small locked cube: per scene, pairs 1-2 and 1-3 with three queries each.

    Query q of a pair: q = 0 ranked (better = q-th descriptor index + offset, ties = 1),
    q = 1 nearest neighbour correct (better = ties = 0), q = 2 without ground truth (R = 0).
    """
    rows = [(s, p, q) for s in scenes for p in ("1-2", "1-3") for q in range(3)]
    coords = {
        "scene": [r[0] for r in rows],
        "pair": [r[1] for r in rows],
        "keypoint_set": [keypoint_set] * len(rows),
        "query_keypoint": [r[2] for r in rows],
        "x": [10.0 * r[2] for r in rows],
        "y": [5.0 + r[2] for r in rows],
    }
    shape = (len(descriptors), len(rows))
    q = np.array([r[2] for r in rows])
    better = np.where(
        q == 0, np.arange(len(descriptors))[:, None] + offset, np.where(q == 1, 0, -1)
    )
    ties = np.where(q == 0, 1, np.where(q == 1, 0, -1)) * np.ones(shape, dtype=np.int64)
    n_relevant = np.broadcast_to(q != 2, shape).astype(np.int8)
    data = {
        "better": better,
        "ties": ties,
        "n_relevant": n_relevant,
        "nn_correct": np.broadcast_to(q == 1, shape).astype(np.int8),
        "gt_distance": np.where(n_relevant == 1, 0.5, np.nan),
        "nn_distance": np.full(shape, 0.25),
        "nn2_distance": np.full(shape, 0.75),
        "nn_error": np.where(n_relevant == 1, 1.5, np.nan),
        "nn_mutual": np.ones(shape, dtype=np.int8),
        "n_candidates": np.full(shape, 40),
    }
    per_sequence = None
    if sequences:
        per_sequence = {
            "verification_ap": np.full((len(descriptors), len(scenes)), 0.5),
            "retrieval_ap": np.full((len(descriptors), len(scenes)), 0.25),
            "retrieval_num_true_positives": np.full((len(descriptors), len(scenes)), 7),
            "retrieval_num_hard_negatives": np.full((len(descriptors), len(scenes)), 70),
            "retrieval_num_distractors": np.full((len(descriptors), len(scenes)), 200),
        }
    times = np.arange(1.0, len(descriptors) + 1) if time_ms is None else time_ms
    return qc.new_cube(
        list(descriptors),
        coords,
        data,
        attrs=attrs,
        per_descriptor={"processing_time_ms": times},
        per_sequence=per_sequence,
        sequences=list(scenes) if sequences else None,
    )


@pytest.fixture
def cube() -> xr.Dataset:
    return make_cube()


# ---------------------------------------------------------------------------------------------
# new_cube and the schema
# ---------------------------------------------------------------------------------------------


def test_new_cube_schema_dtypes_and_derived_values(cube):
    assert dict(cube.sizes) == {"descriptor": 2, "query": 12, "sequence": 2}
    assert "query" not in cube.variables  # flat index without coordinate
    for name, field in qc.QUERY_VARIABLES.items():
        assert cube[name].dims == ("descriptor", "query")
        assert cube[name].dtype == field.dtype, name
    for name in ("scene", "split", "pair", "keypoint_set", "descriptor", "sequence"):
        assert cube[name].dtype.kind == "U", name
    assert cube.query_keypoint.dtype == np.int64 and cube.x.dtype == np.float64
    assert cube.split.values[:6].tolist() == ["illumination"] * 6
    assert cube.split.values[6:].tolist() == ["viewpoint"] * 6
    # ap derived from better / ties under the attr tie policy; NaN where R = 0
    expected = mc.ap_from_rank_stats(cube.better.values, cube.ties.values, tie_policy="expected")
    np.testing.assert_array_equal(cube.ap.values, expected)
    assert cube.ap.values[0, 0] == 0.75 and cube.ap.values[1, 0] == pytest.approx(5 / 12)
    assert np.isnan(cube.ap.values[:, 2]).all()
    assert cube.status.values.tolist() == ["ok", "ok"] and cube.error.values.tolist() == ["", ""]
    assert cube.attrs["metricalc_version"] == mc.__version__
    assert {k: cube.attrs[k] for k in qc.PROTOCOL_ATTRS} == ATTRS
    assert qc.validate(cube) is cube


def test_new_cube_fills_sentinels_and_derives_n_relevant():
    coords = {
        "scene": ["x"] * 3,
        "pair": ["1-2"] * 3,
        "keypoint_set": ["k"] * 3,
        "query_keypoint": [0, 1, 2],
    }
    c = qc.new_cube(["d"], coords, {"ap": [[0.5, np.nan, 1.0]]}, attrs=qc.DEFAULT_ATTRS)
    assert c.n_relevant.values.tolist() == [[1, 0, 1]]
    assert c.better.values.tolist() == [[-1, -1, -1]] and c.ties.values.tolist() == [[-1] * 3]
    assert c.nn_correct.values.tolist() == [[-1] * 3] and np.isnan(c.nn_error.values).all()
    assert c.split.values.tolist() == ["other"] * 3 and np.isnan(c.x.values).all()
    assert np.isnan(c.processing_time_ms.values).all()
    assert "sequence" not in c.dims
    empty = qc.new_cube(["d"], coords, {}, attrs=qc.DEFAULT_ATTRS)  # nothing known: missing
    assert empty.n_relevant.values.tolist() == [[-1, -1, -1]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": {"better": [[1.5, 0]], "ties": [[0, 0]]}}, r"better.*integers.*1\.5"),
        ({"data": {"better": [[1, 0]]}}, "'better' but not 'ties'"),
        ({"data": {"rank": [[1, 0]]}}, "unknown variable 'rank'"),
        ({"data": {"ap": [[0.5]]}}, r"shape \(1, 2\)"),
        ({"data": {"n_relevant": [[300, 0]]}}, "does not fit int8"),
        (
            {"query_coords": {"scene": ["a", "a"], "pair": ["1-2"] * 2, "keypoint_set": ["k"] * 2}},
            "lacks 'query_keypoint'",
        ),
        (
            {
                "query_coords": {
                    "scene": ["a", 7],
                    "pair": ["1-2"] * 2,
                    "keypoint_set": ["k"] * 2,
                    "query_keypoint": [0, 1],
                }
            },
            r"scene.*strings.*7",
        ),
        ({"per_sequence": {"retrieval_ap": [[0.5]]}}, "needs sequences="),
        ({"attrs": {"tau_px": 3.0}}, "lack 'border_px'"),
        ({"attrs": {**qc.DEFAULT_ATTRS, "tie_policy": "random"}}, "tie_policy"),
    ],
)
def test_new_cube_rejects_bad_input(kwargs, message):
    arguments = {
        "descriptors": ["d"],
        "query_coords": {
            "scene": ["a", "a"],
            "pair": ["1-2"] * 2,
            "keypoint_set": ["k"] * 2,
            "query_keypoint": [0, 1],
        },
        "data": {"ap": [[0.5, np.nan]]},
        "attrs": qc.DEFAULT_ATTRS,
    }
    arguments.update(kwargs)
    with pytest.raises(InvalidInputError, match=message):
        qc.new_cube(**arguments)


def test_sentinels_and_split_helpers():
    assert qc.sentinel_array("better", 2).tolist() == [-1, -1]
    assert qc.sentinel_array("nn_mutual", (1, 1)).dtype == np.int8
    assert np.isnan(qc.sentinel_array("retrieval_ap", (2, 2))).all()
    assert qc.sentinel_array("status", 1).tolist() == ["ok"]
    with pytest.raises(InvalidInputError, match="'rank' is not a QueryCube variable"):
        qc.sentinel_array("rank", 1)
    assert qc.split_of(["i_x", "v_y", "z"]).tolist() == ["illumination", "viewpoint", "other"]


def test_error_record():
    record = qc.error_record("brief", "ValueError: no keypoints", attrs=ATTRS)
    assert dict(record.sizes) == {"descriptor": 1, "query": 0}
    assert record.status.values.tolist() == ["error"]
    assert record.error.values.tolist() == ["ValueError: no keypoints"]
    with pytest.raises(InvalidInputError, match="non-empty message"):
        qc.error_record("brief", "", attrs=ATTRS)


# ---------------------------------------------------------------------------------------------
# validate: one bad case at a time
# ---------------------------------------------------------------------------------------------


def _set(name, index, value):
    def edit(c):
        values = c[name].values.copy()
        if values.dtype.kind == "U":  # fixed width: make room for longer strings
            values = values.astype(object)
        values[index] = value
        if values.dtype == object:
            values = values.astype(str)
        if name in c.coords:
            return c.assign_coords({name: (c[name].dims, values)})
        return c.assign({name: (c[name].dims, values)})

    return edit


def _assign(name, value):
    return lambda c: c.assign({name: value(c)})


def _attrs(**changes):
    def edit(c):
        c = c.copy()
        c.attrs = {**c.attrs, **changes}
        return c

    return edit


def _drop_attr(name):
    def edit(c):
        c = c.copy()
        c.attrs = {k: v for k, v in c.attrs.items() if k != name}
        return c

    return edit


BAD_CASES = {
    # structure and dtypes
    "missing dim": (lambda c: c.rename_dims(query="q"), "lacks the dimension 'query'"),
    "extra dim": (lambda c: c.expand_dims(run=1), "unknown dimensions"),
    "missing coord": (lambda c: c.drop_vars("pair"), "lacks the variable 'pair'"),
    "missing variable": (lambda c: c.drop_vars("nn_mutual"), "lacks the variable 'nn_mutual'"),
    "wrong dims": (
        lambda c: c.transpose("query", "descriptor", "sequence"),
        r"'better' must have dims \('descriptor', 'query'\)",
    ),
    "float32 ap": (
        _assign("ap", lambda c: c.ap.astype(np.float32)),
        "'ap' must have dtype float64",
    ),
    "int64 n_relevant": (
        _assign("n_relevant", lambda c: c.n_relevant.astype(np.int64)),
        "'n_relevant' must have dtype int8",
    ),
    "numeric scene": (
        lambda c: c.assign_coords(scene=("query", np.arange(12))),
        "'scene' must hold strings",
    ),
    "coord as data": (lambda c: c.reset_coords("x"), "'x' must be a coordinate"),
    "per-sequence without dim": (
        lambda c: c.drop_dims("sequence").assign(verification_ap=("descriptor", [0.1, 0.2])),
        "no 'sequence' dimension",
    ),
    # attrs
    "missing attr": (_drop_attr("tau_px"), "lack 'tau_px'"),
    "missing version": (_drop_attr("metricalc_version"), "lack 'metricalc_version'"),
    "bad tau": (_attrs(tau_px=-1.0), "tau_px must be a finite number >= 0.*-1.0"),
    "bad tie policy": (_attrs(tie_policy="random"), "tie_policy must be one of.*'random'"),
    "bad keypoints": (_attrs(keypoints="locked:"), "keypoints must be .*'locked:'"),
    "bad seed": (_attrs(seed=1.5), "seed must be an integer"),
    "bad distance": (_attrs(distance="cosine"), "distance must be one of"),
    # coordinate values
    "bad split": (_set("split", 3, "daylight"), r"'split' must be one of.*'daylight'.*query 3"),
    "bad pair": (_set("pair", 4, "2"), r"'pair' must be '1-k'.*'2'.*query 4"),
    "negative keypoint": (_set("query_keypoint", 5, -3), r"'query_keypoint' must be >= 0.*-3"),
    "duplicate query": (
        _set("query_keypoint", 1, 0),
        "same query twice: query 1 .* repeats query 0",
    ),
    "duplicate descriptor": (_set("descriptor", 1, "sift"), "'descriptor' must be unique"),
    "duplicate sequence": (_set("sequence", 1, "i_a"), "'sequence' must be unique"),
    # per-query values
    "n_relevant 2": (
        _set("n_relevant", (1, 4), 2),
        r"'n_relevant' must be 1, 0 or -1.*found 2 at descriptor 'orb', query 4 "
        r"\(scene='i_a', pair='1-3', keypoint_set='sift', query_keypoint=1\)",
    ),
    "better -2": (_set("better", (0, 0), -2), r"'better' must be a count >= 0, or -1.*-2"),
    "better/ties not together": (_set("ties", (0, 0), -1), "ties must be -1 together"),
    "ranked without ground truth": (
        lambda c: _set("ties", (0, 2), 0)(_set("better", (0, 2), 0)(c)),
        r"'better' must be -1 where n_relevant != 1.*query 2",
    ),
    "ap where R = 0": (_set("ap", (0, 2), 0.5), "'ap' must be NaN where n_relevant != 1"),
    "ap NaN where R = 1": (_set("ap", (1, 1), np.nan), r"'ap' must be in \[0, 1\].*nan"),
    "ap above 1": (_set("ap", (0, 0), 1.5), r"'ap' must be in \[0, 1\].*1\.5"),
    "ap not from rank stats": (
        _set("ap", (0, 0), 0.6),
        r"'ap' must equal ap_from_rank_stats.*'expected'.*0\.6",
    ),
    "nn_correct 2": (_set("nn_correct", (0, 0), 2), "'nn_correct' must be 1, 0 or -1"),
    "correct without ground truth": (
        _set("nn_correct", (0, 2), 1),
        "'nn_correct' can be 1 only where R = 1",
    ),
    "negative distance": (_set("nn_distance", (1, 0), -0.5), r"'nn_distance' must be >= 0.*-0\.5"),
    "infinite error": (_set("nn_error", (1, 0), np.inf), "'nn_error' must be finite"),
    "n_candidates -2": (_set("n_candidates", (0, 0), -2), "'n_candidates' must be a count"),
    "value where missing": (
        lambda c: _set("n_relevant", (0, 2), -1)(c),
        r"must hold the sentinel where n_relevant == -1",
    ),
    # per-descriptor and per-sequence values
    "bad status": (_set("status", 0, "failed"), r"'status' must be 'ok' or 'error'.*'failed'"),
    "message while ok": (_set("error", 1, "boom"), r"'error' must be '' where status is 'ok'"),
    "error without message": (_set("status", 1, "error"), "must hold a message"),
    "negative time": (_set("processing_time_ms", 0, -1.0), "'processing_time_ms' must be >= 0"),
    "retrieval ap above 1": (
        _set("retrieval_ap", (0, 1), 2.0),
        r"'retrieval_ap' must be in \[0, 1\].*sequence 'v_b'",
    ),
    "negative count": (_set("retrieval_num_distractors", (1, 0), -5), "must be a count >= 0"),
}


def test_validate_accepts_good_cubes(cube):
    assert qc.validate(cube) is cube
    assert qc.validate(make_cube(sequences=False)) is not None
    assert qc.validate(cube.isel(query=slice(0, 0))) is not None  # no queries at all


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_validate_rejects(cube, case):
    edit, message = BAD_CASES[case]
    bad = edit(cube)
    with pytest.raises(InvalidInputError, match=message):
        qc.validate(bad)


def test_validate_rejects_a_non_dataset():
    with pytest.raises(InvalidInputError, match=r"xarray\.Dataset; got DataArray"):
        qc.validate(xr.DataArray([1]))


def test_validate_lazy_checks_structure_only(cube):
    bad = _set("ap", (0, 0), 0.6)(cube).chunk({"query": 4})
    assert isinstance(bad.ap.data, da.Array)
    assert qc.validate(bad) is bad  # values of dask variables are not computed
    with pytest.raises(InvalidInputError, match="must have dtype float64"):
        qc.validate(bad.assign(ap=bad.ap.astype(np.float32)))  # dtypes still are
    with pytest.raises(InvalidInputError, match="lack 'seed'"):
        qc.validate(_drop_attr("seed")(bad))


# ---------------------------------------------------------------------------------------------
# combine
# ---------------------------------------------------------------------------------------------


def test_combine_scene_disjoint_parts_of_one_run(cube):
    first = make_cube(scenes=("v_b",), time_ms=np.array([1.0, 2.0]))
    second = make_cube(scenes=("i_a",), time_ms=np.array([10.0, 20.0]))
    both = qc.combine([first, second])
    # sorted by scene, pair, keypoint_set, query_keypoint: the whole run, in its canonical order
    xr.testing.assert_identical(
        both.drop_vars("processing_time_ms"), cube.drop_vars("processing_time_ms")
    )
    assert both.processing_time_ms.values.tolist() == [11.0, 22.0]  # times of the parts add up
    assert both.sequence.values.tolist() == ["i_a", "v_b"]


def test_combine_descriptor_disjoint_cubes(cube):
    sift = make_cube(descriptors=("sift",))
    orb = make_cube(descriptors=("orb",), offset=1)  # orb's better is 1 in make_cube(...)
    both = qc.combine([sift, orb])
    assert both.descriptor.values.tolist() == ["sift", "orb"]
    xr.testing.assert_identical(
        both.drop_vars("processing_time_ms"), cube.drop_vars("processing_time_ms")
    )
    reverse = qc.combine([orb, sift])  # descriptors in order of first appearance
    assert reverse.descriptor.values.tolist() == ["orb", "sift"]
    xr.testing.assert_identical(reverse.sel(descriptor=["sift", "orb"]), both)


def test_combine_native_union_fills_missing_queries():
    sift = make_cube(descriptors=("sift",), keypoint_set="sift")
    orb = make_cube(descriptors=("orb",), keypoint_set="orb", scenes=("i_a",))
    both = qc.combine([sift, orb])
    assert both.sizes["query"] == 12 + 6
    # i_a, pair 1-2: orb's queries, then sift's; then pair 1-3
    assert both.keypoint_set.values.tolist()[:12] == (["orb"] * 3 + ["sift"] * 3) * 2
    orb_row = both.sel(descriptor="orb")
    own = both.keypoint_set.values == "orb"
    assert (orb_row.n_relevant.values[~own] == -1).all()
    assert (orb_row.better.values[~own] == -1).all() and np.isnan(orb_row.ap.values[~own]).all()
    assert (both.sel(descriptor="sift").n_relevant.values[own] == -1).all()
    # per-sequence: orb has no v_b results
    assert np.isnan(both.retrieval_ap.sel(descriptor="orb", sequence="v_b"))
    assert both.retrieval_num_distractors.sel(descriptor="orb", sequence="v_b") == -1
    # the native union keeps every value of each part
    np.testing.assert_array_equal(orb_row.ap.values[own], orb.ap.sel(descriptor="orb").values)


def test_combine_with_an_error_record(cube):
    record = qc.error_record("brief", "RuntimeError: boom", attrs=ATTRS)
    both = qc.combine([cube, record])
    assert both.descriptor.values.tolist() == ["sift", "orb", "brief"]
    brief = both.sel(descriptor="brief")
    assert (brief.n_relevant.values == -1).all() and np.isnan(brief.ap.values).all()
    assert str(brief.status.values) == "error" and str(brief.error.values) == "RuntimeError: boom"
    assert np.isnan(brief.verification_ap.values).all()
    xr.testing.assert_identical(both.sel(descriptor=["sift", "orb"]), cube)


def test_combine_refuses_different_protocols(cube):
    other = make_cube(scenes=("v_c",), attrs={**ATTRS, "tau_px": 5.0})
    with pytest.raises(
        InvalidInputError, match=r"attr 'tau_px' is 3\.0 in cube 0 but 5\.0 in cube 1"
    ):
        qc.combine([cube, other])
    native = make_cube(scenes=("v_c",), attrs={**ATTRS, "keypoints": "native"})
    with pytest.raises(InvalidInputError, match=r"'keypoints' is 'locked:sift' .* 'native'"):
        qc.combine([cube, native])


def test_combine_merges_the_distance_of_descriptors_from_separate_runs(cube):
    assert cube.attrs["distance"] != "hamming"
    binary = make_cube(scenes=("v_c",), attrs={**ATTRS, "distance": "hamming"})
    both = qc.combine([cube, binary])
    assert both.attrs["distance"] == "mixed"
    assert (
        qc.combine([cube, make_cube(scenes=("v_c",))]).attrs["distance"] == cube.attrs["distance"]
    )


def test_combine_refuses_conflicting_duplicates_and_accepts_identical_ones(cube):
    again = qc.combine([cube, cube, make_cube()])
    xr.testing.assert_identical(again, cube)  # identical duplicates: no change, no time added
    conflicting = make_cube(offset=5)
    with pytest.raises(
        InvalidInputError,
        match=r"better of descriptor 'sift' at query 0 \(scene='i_a', pair='1-2', "
        r"keypoint_set='sift', query_keypoint=0\) is 0 in cube 0 but 5 in cube 1",
    ):
        qc.combine([cube, conflicting])
    retrieval = cube.copy(deep=True)
    retrieval.retrieval_ap.values[1, 1] = 0.75
    with pytest.raises(
        InvalidInputError, match="retrieval_ap of descriptor 'orb' at sequence 'v_b'"
    ):
        qc.combine([cube, retrieval])
    moved = cube.copy(deep=True)
    moved.x.values[0] = 99.0
    with pytest.raises(InvalidInputError, match=r"has x=0\.0 in cube 0 but x=99\.0 in cube 1"):
        qc.combine([cube, moved])


def test_combine_edge_cases(cube):
    with pytest.raises(InvalidInputError, match="at least one cube"):
        qc.combine([])
    with pytest.raises(InvalidInputError, match=r"cube 1 is invalid: .*'ap' must have dtype"):
        qc.combine([cube, cube.assign(ap=cube.ap.astype(np.float32))])
    xr.testing.assert_identical(qc.combine([cube]), cube)
    # pairs sort numerically; extra per-query variables are carried with sentinels
    coords = {
        "scene": ["s"] * 2,
        "pair": ["1-10", "1-9"],
        "keypoint_set": ["k"] * 2,
        "query_keypoint": [0, 0],
    }
    c = qc.new_cube(["d"], coords, {"ap": [[0.5, 1.0]]}, attrs=ATTRS)
    c = c.assign(score=(("descriptor", "query"), np.array([[3.0, 4.0]])))
    d = make_cube(descriptors=("e",), scenes=("s",), sequences=False)
    both = qc.combine([c, d])
    assert both.sel(descriptor="d").pair.values.tolist() == [
        "1-2",
        "1-2",
        "1-2",
        "1-3",
        "1-3",
        "1-3",
        "1-9",
        "1-10",
    ]
    assert both.score.sel(descriptor="d").values[-2:].tolist() == [4.0, 3.0]
    assert np.isnan(both.score.sel(descriptor="e").values).all()
    # extra string variables are not truncated to the width of the first cube's strings
    short = make_cube(descriptors=("a",), sequences=False).assign(note=("descriptor", ["x"]))
    long = make_cube(descriptors=("b",), sequences=False).assign(note=("descriptor", ["longer"]))
    assert qc.combine([short, long]).note.values.tolist() == ["x", "longer"]
    # metricalc_version lists the versions of the parts
    old = c.copy()
    old.attrs = {**c.attrs, "metricalc_version": "0.0.1"}
    assert qc.combine([old, d]).attrs["metricalc_version"] == f"0.0.1, {mc.__version__}"


def test_combine_error_part_of_a_descriptor_marks_it_failed(cube):
    first = make_cube(scenes=("i_a",))
    record = qc.error_record("orb", "MemoryError: v_b", attrs=ATTRS)
    both = qc.combine([first, record])
    assert both.status.values.tolist() == ["ok", "error"]
    assert both.error.values.tolist() == ["", "MemoryError: v_b"]
    assert (both.n_relevant.sel(descriptor="orb").values != -1).any()  # its results are kept


# ---------------------------------------------------------------------------------------------
# save / open
# ---------------------------------------------------------------------------------------------


def test_save_open_round_trip(cube, tmp_path):
    path = tmp_path / "sub" / "cube.nc"
    qc.save(cube, path)
    opened = qc.open_cube(path)
    xr.testing.assert_identical(opened, cube)
    assert opened.attrs == cube.attrs
    assert all(type(opened.attrs[k]) is type(cube.attrs[k]) for k in cube.attrs)
    for name in ("scene", "pair", "descriptor", "status", "error", "sequence"):
        assert opened[name].dtype.kind == "U"
        assert opened[name].values.tolist() == cube[name].values.tolist()
    for name in cube.variables:
        assert opened[name].dtype == cube[name].dtype or opened[name].dtype.kind == "U", name
    assert os.listdir(path.parent) == ["cube.nc"]  # no temporary file left
    # unicode and error records survive too
    odd = qc.combine([cube, qc.error_record("ünï", "Fehler: Größe ≠ 3", attrs=ATTRS)])
    qc.save(odd, path)
    xr.testing.assert_identical(qc.open_cube(path), odd)


def test_open_lazy_gives_dask_arrays_and_the_same_reductions(cube, tmp_path):
    path = tmp_path / "cube.nc"
    qc.save(cube, path)
    for chunks in ({}, {"query": 10_000, "descriptor": 1}, "auto"):
        lazy = qc.open_cube(path, chunks=chunks)
        assert isinstance(lazy.ap.data, da.Array) and isinstance(lazy.better.data, da.Array)
        assert isinstance(lazy.scene.data, da.Array)  # decoded from the file's codes per chunk
        assert isinstance(lazy.status.data, np.ndarray)
        assert qc.is_lazy(lazy) and not qc.is_lazy(cube)
        mean = lazy.ap.mean("query")
        assert isinstance(mean.data, da.Array)
        np.testing.assert_allclose(mean.values, cube.ap.mean("query").values)
        # a lazy coordinate groups with its known labels: the vocabulary the file recorded
        labels = lazy.scene.encoding["vocabulary"]
        by_scene = lazy.ap.groupby(scene=UniqueGrouper(labels=labels)).mean().compute()
        xr.testing.assert_allclose(by_scene, cube.ap.groupby("scene").mean())
        assert int((lazy.n_relevant == 1).sum()) == int((cube.n_relevant == 1).sum())
        xr.testing.assert_identical(lazy.compute(), cube)
        lazy.close()


def test_lazy_cubes_save_and_combine(cube, tmp_path):
    path = tmp_path / "cube.nc"
    qc.save(cube, path)
    lazy = qc.open_cube(path, chunks={})
    qc.save(lazy, tmp_path / "copy.nc")  # written chunk by chunk
    xr.testing.assert_identical(qc.open_cube(tmp_path / "copy.nc"), cube)
    qc.save(lazy, path)  # over the file it was opened from
    xr.testing.assert_identical(qc.open_cube(path), cube)
    more = qc.combine([lazy, qc.error_record("brief", "failed", attrs=ATTRS)])
    assert more.descriptor.values.tolist() == ["sift", "orb", "brief"]
    lazy.close()


def test_save_is_atomic(cube, tmp_path, monkeypatch):
    path = tmp_path / "cube.nc"
    qc.save(cube, path)
    before = path.read_bytes()
    with pytest.raises(InvalidInputError):
        qc.save(cube.drop_vars("ap"), path)  # invalid: refused before writing
    assert path.read_bytes() == before

    def broken(self, *args, **kwargs):
        target = args[0]  # a temporary file, or the memory the file is written to first
        target.write(b"half") if hasattr(target, "write") else Path(target).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken)
    with pytest.raises(OSError, match="disk full"):
        qc.save(make_cube(offset=3), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["cube.nc"]


def test_open_cube_errors_name_the_file(cube, tmp_path):
    missing = tmp_path / "nope.nc"
    with pytest.raises(InvalidInputError, match=f"cube file {re.escape(str(missing))} does not"):
        qc.open_cube(missing)
    with pytest.raises(InvalidInputError, match="is not a file"):
        qc.open_cube(tmp_path)
    corrupt = tmp_path / "corrupt.nc"
    corrupt.write_bytes(b"\x89HDF\r\n\x1a\nthis is not a cube" * 10)
    with pytest.raises(InvalidInputError, match=f"{re.escape(str(corrupt))} is not a readable"):
        qc.open_cube(corrupt)
    truncated = tmp_path / "truncated.nc"
    qc.save(cube, truncated)
    truncated.write_bytes(truncated.read_bytes()[:2000])
    with pytest.raises(InvalidInputError, match=re.escape(str(truncated))):
        qc.open_cube(truncated)
    other = tmp_path / "other.nc"
    xr.Dataset({"a": ("x", [1, 2])}).to_netcdf(other, engine="h5netcdf")
    with pytest.raises(
        InvalidInputError, match=rf"{re.escape(str(other))} is not a valid QueryCube"
    ):
        qc.open_cube(other)


# ---------------------------------------------------------------------------------------------
# from_dataframe
# ---------------------------------------------------------------------------------------------


def test_from_dataframe_with_rank_statistics():
    df = pd.DataFrame(
        {
            "descriptor": ["mine", "mine", "mine", "theirs"],
            "scene": ["v_boat", "v_boat", "i_dome", "v_boat"],
            "pair": ["1-2", "1-2", "1-6", "1-2"],
            "query": [4, 3, 0, 4],
            "better": [2, -1, 0, 2],
            "ties": [3, -1, 0, 3],
            "x": [1.0, 2.0, 3.0, 1.0],
            "y": [4.0, 5.0, 6.0, 4.0],
        }
    )
    c = qc.from_dataframe(df, attrs={"dataset": "hpatches", "distance": "l2"})
    assert c.descriptor.values.tolist() == ["mine", "theirs"]
    # queries sorted by scene, pair, keypoint_set, query
    assert c.scene.values.tolist() == ["i_dome", "v_boat", "v_boat"]
    assert c.query_keypoint.values.tolist() == [0, 3, 4]
    assert c.split.values.tolist() == ["illumination", "viewpoint", "viewpoint"]
    assert c.keypoint_set.values.tolist() == ["external"] * 3
    assert c.x.values.tolist() == [3.0, 2.0, 1.0]
    mine = c.sel(descriptor="mine")
    assert mine.ap.values[2] == pytest.approx(HAND_AP)  # mean(1/3, 1/4, 1/5, 1/6) = 0.2375
    assert mine.ap.values[0] == 1.0 and np.isnan(mine.ap.values[1])
    assert mine.n_relevant.values.tolist() == [1, 0, 1]
    theirs = c.sel(descriptor="theirs")
    assert theirs.n_relevant.values.tolist() == [-1, -1, 1]  # no row: missing
    assert theirs.ap.values[2] == pytest.approx(HAND_AP)
    assert c.attrs["dataset"] == "hpatches" and c.attrs["keypoints"] == "external"
    assert c.attrs["tie_policy"] == "expected"
    for policy, ap in (("workbench", 0.2), ("optimistic", 1 / 3), ("pessimistic", 1 / 6)):
        other = qc.from_dataframe(df, tie_policy=policy)
        assert other.ap.sel(descriptor="mine").values[2] == pytest.approx(ap)
        assert other.attrs["tie_policy"] == policy


def test_from_dataframe_with_ap_only():
    df = pd.DataFrame(
        {
            "descriptor": ["mine"] * 3,
            "scene": ["s1", "s1", "s2"],
            "query": [0, 1, 0],
            "ap": [HAND_AP, np.nan, 1.0],
            "nn_correct": [0, 0, 1],
        }
    )
    c = qc.from_dataframe(df)
    assert c.better.values.tolist() == [[-1, -1, -1]] and c.ties.values.tolist() == [[-1] * 3]
    assert c.n_relevant.values.tolist() == [[1, 0, 1]]
    np.testing.assert_array_equal(c.ap.values, [[HAND_AP, np.nan, 1.0]])
    assert c.pair.values.tolist() == ["", "", ""] and c.split.values.tolist() == ["other"] * 3
    assert c.nn_correct.values.tolist() == [[0, 0, 1]]
    assert c.nn_mutual.values.tolist() == [[-1, -1, -1]]


def test_from_dataframe_optional_columns_and_defaults():
    df = pd.DataFrame(
        {
            "descriptor": ["a", "b", "a"],
            "scene": ["v_x"] * 3,
            "query": [0, 0, 1],
            # nullable integers: <NA> means "no relevant item"
            "better": pd.array([1, 0, pd.NA], dtype="Int64"),
            "ties": pd.array([0, 0, pd.NA], dtype="Int64"),
            "ap": [0.5, 1.0, np.nan],
            "n_relevant": [1, 1, 0],
            "processing_time_ms": [12.5, 3.0, 12.5],
        }
    )
    c = qc.from_dataframe(df, attrs={"keypoints": "native"})
    assert c.keypoint_set.values.tolist() == ["a", "a", "b"]  # native: each its own queries
    assert c.n_relevant.values.tolist() == [[1, 0, -1], [-1, -1, 1]]
    assert c.processing_time_ms.values.tolist() == [12.5, 3.0]
    locked = qc.from_dataframe(df, attrs={"keypoints": "locked:sift"})
    assert locked.keypoint_set.values.tolist() == ["sift", "sift"]
    assert locked.n_relevant.values.tolist() == [[1, 0], [1, -1]]
    # cubes from tables combine with each other (same protocol)
    more = df.assign(scene="i_y")
    both = qc.combine([locked, qc.from_dataframe(more, attrs={"keypoints": "locked:sift"})])
    assert both.scene.values.tolist() == ["i_y", "i_y", "v_x", "v_x"]


GOOD = {
    "descriptor": ["d", "d"],
    "scene": ["s", "s"],
    "query": [0, 1],
    "better": [0, 2],
    "ties": [0, 3],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"descriptor": None}, "lacks the required column 'descriptor'"),
        ({"scene": None}, "lacks the required column 'scene'"),
        ({"query": None}, "lacks the required column 'query'"),
        ({"ties": None}, "lacks the column 'ties'"),
        ({"better": None, "ties": None}, "lacks the column 'ap'"),
        ({"rank": [1, 2]}, "column 'rank' is not a QueryCube column"),
        ({"query": [0, 0]}, r"rows 0 and 1 are the same \(descriptor, query\)"),
        ({"scene": ["s", 3]}, r"column 'scene', row 1: expected a non-empty string; got 3"),
        ({"descriptor": ["d", ""]}, r"column 'descriptor', row 1: expected a non-empty string"),
        ({"query": ["0", "a"]}, r"column 'query', row 0: expected a number; got '0'"),
        ({"query": [0, -1]}, r"column 'query', row 1: expected an integer >= 0; got -1"),
        ({"query": [0, 1.5]}, r"column 'query', row 1: expected an integer >= 0; got 1\.5"),
        ({"query": [0, np.nan]}, r"column 'query', row 1: expected an integer; got NaN"),
        ({"better": [0, "x"]}, r"column 'better', row 1: expected a number; got 'x'"),
        ({"better": [0, -1]}, r"column 'ties', row 1: must be -1 \(or NaN\) exactly where"),
        ({"n_relevant": [1, 0]}, r"column 'n_relevant', row 1: must be 1 where better"),
        ({"n_relevant": [1, 2]}, r"column 'n_relevant', row 1: expected one of \[0, 1\]"),
        ({"ap": [1.0, 0.5]}, r"column 'ap', row 1: disagrees with ap_from_rank_stats"),
        ({"ap": [1.0, 1.5]}, r"column 'ap', row 1: expected in \[0, 1\] or NaN; got 1\.5"),
        ({"split": ["viewpoint", "day"]}, r"column 'split', row 1: expected one of"),
        ({"pair": ["1-2", "2"]}, r"column 'pair', row 1: expected '1-k'"),
        ({"x": [1.0, np.inf]}, r"column 'x', row 1: expected a finite number"),
        ({"nn_correct": [1, 5]}, r"column 'nn_correct', row 1: expected one of \[-1, 0, 1\]"),
        ({"processing_time_ms": [1.0, 2.0]}, r"processing_time_ms', rows 0 and 1: one value"),
        ({"gt_distance": [1.0, -2.0]}, r"column 'gt_distance', row 1: expected a finite number"),
    ],
)
def test_from_dataframe_errors_name_column_and_row(change, message):
    columns = {**GOOD, **change}
    df = pd.DataFrame({k: v for k, v in columns.items() if v is not None})
    with pytest.raises(InvalidInputError, match=message):
        qc.from_dataframe(df)


def test_from_dataframe_more_errors():
    with pytest.raises(InvalidInputError, match="needs a pandas DataFrame; got dict"):
        qc.from_dataframe(GOOD)
    df = pd.DataFrame(GOOD, index=["first", "second"]).assign(query=[5, 5])
    with pytest.raises(InvalidInputError, match="rows 'first' and 'second' are the same"):
        qc.from_dataframe(df)
    with pytest.raises(InvalidInputError, match="contradicts attrs"):
        qc.from_dataframe(
            pd.DataFrame(GOOD), attrs={"tie_policy": "workbench"}, tie_policy="expected"
        )
    with pytest.raises(InvalidInputError, match="tie_policy must be one of"):
        qc.from_dataframe(pd.DataFrame(GOOD), tie_policy="median")
    moved = pd.DataFrame({**GOOD, "descriptor": ["d", "e"], "query": [0, 0], "x": [1.0, 2.0]})
    with pytest.raises(
        InvalidInputError, match=r"column 'x': rows 0 and 1 describe the same query"
    ):
        qc.from_dataframe(moved)
    only_ap = pd.DataFrame({**GOOD, "ap": [1.0, np.nan], "n_relevant": [1, 1]}).drop(
        columns=["better", "ties"]
    )
    with pytest.raises(InvalidInputError, match=r"column 'n_relevant', row 1: must be 1 where ap"):
        qc.from_dataframe(only_ap)


def test_from_dataframe_empty_table():
    df = pd.DataFrame({"descriptor": [], "scene": [], "query": [], "ap": []})
    c = qc.from_dataframe(df)
    assert dict(c.sizes) == {"descriptor": 0, "query": 0}


# ---------------------------------------------------------------------------------------------
# docs
# ---------------------------------------------------------------------------------------------


def test_docs_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    cube = namespace["cube"]
    assert isinstance(cube, xr.Dataset) and qc.validate(cube) is cube
    np.testing.assert_allclose(cube.ap.sel(descriptor="mine").values, [1.0, HAND_AP, np.nan])
    np.testing.assert_allclose(cube.ap.sel(descriptor="baseline").values, [np.nan, 1 / 6, np.nan])
    assert cube.n_relevant.sel(descriptor="baseline").values.tolist() == [-1, 1, -1]


def test_docs_table_lists_every_variable_and_attr():
    text = DOC.read_text()
    names = [
        *qc.QUERY_VARIABLES,
        *qc.DESCRIPTOR_VARIABLES,
        *qc.SEQUENCE_VARIABLES,
        *qc.QUERY_COORDS,
        *qc.PROTOCOL_ATTRS,
        "metricalc_version",
    ]
    for name in names:
        assert f"`{name}`" in text, name
