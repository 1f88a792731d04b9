"""metricalc.fileio: JSON-safe values and atomic writes, the one home every writer uses."""

from __future__ import annotations

import json
import math
import os
import stat

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write, csv_text, current_umask, json_safe, temporary_path


def _expected(value):
    """The JSON value of a leaf, by the rule written out case by case."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    return value


_floats = st.floats(allow_nan=True, allow_infinity=True)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**62), 2**62),
    _floats,
    st.text(max_size=5),
    _floats.map(np.float64),
    st.floats(width=32).map(np.float32),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(0, 2**63).map(np.uint64),
    st.booleans().map(np.bool_),
)


def _pairs(value):
    """(converted, expected) leaves of a nested value, walked alongside its conversion."""
    converted = json_safe(value)
    out = []

    def walk(original, safe):
        if isinstance(original, dict):
            assert isinstance(safe, dict)
            assert list(safe) == [str(k) for k in original]
            for k, v in original.items():
                walk(v, safe[str(k)])
        elif isinstance(original, (list, tuple)):
            assert isinstance(safe, list) and len(safe) == len(original)
            for a, b in zip(original, safe, strict=True):
                walk(a, b)
        else:
            out.append((safe, _expected(original)))

    walk(value, converted)
    return converted, out


@given(
    st.recursive(
        _leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.lists(children, max_size=4).map(tuple),
            st.dictionaries(
                st.one_of(st.text(max_size=3), st.integers(0, 9)), children, max_size=4
            ).filter(lambda d: len({str(k) for k in d}) == len(d)),  # colliding keys: below
        ),
        max_leaves=20,
    )
)
def test_json_safe_converts_every_leaf_and_is_strict_json(value):
    converted, pairs = _pairs(value)
    for safe, expected in pairs:
        assert type(safe) is type(expected)
        assert safe == expected
    text = json.dumps(converted, allow_nan=False)  # raises on NaN / inf / NumPy types
    assert json.loads(text) == converted


@given(st.lists(_floats, min_size=1, max_size=12), st.sampled_from([(12,), (3, 4), (2, 2, 3)]))
def test_json_safe_of_arrays_is_the_nested_list_with_nulls(values, shape):
    array = np.resize(np.array(values, dtype=np.float64), shape)
    converted = json_safe(array)
    expected = [_expected(v) for v in array.ravel().tolist()]
    flat = np.array(converted, dtype=object).ravel().tolist()
    assert np.array(converted, dtype=object).shape == shape
    assert flat == expected
    json.dumps(converted, allow_nan=False)


def test_json_safe_refuses_keys_equal_as_strings():
    with pytest.raises(InvalidInputError, match=r"keys \['5', 5\] become the same JSON key"):
        json_safe({"ok": {"5": None, 5: 1.0}})


def test_json_safe_of_other_numpy_scalars_and_zero_d_arrays():
    assert json_safe(np.str_("sift")) == "sift" and type(json_safe(np.str_("sift"))) is str
    assert json_safe(np.array(2.5)) == 2.5
    assert json_safe(np.array(np.nan)) is None
    assert json_safe(np.datetime64("2024-01-02")).isoformat() == "2024-01-02"


def test_atomic_write_text_and_bytes(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    assert atomic_write(target, "héllo\n") == target
    assert target.read_bytes() == "héllo\n".encode()
    atomic_write(str(target), b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert os.listdir(target.parent) == ["out.txt"]


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "cube.nc"
    target.write_text("old")
    with pytest.raises(RuntimeError), temporary_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".cube.nc.")
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["cube.nc"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_get_the_mode_the_umask_gives(tmp_path, umask):
    old = os.umask(umask)
    try:
        assert current_umask() == umask
        text = atomic_write(tmp_path / "a.json", "{}")
        with temporary_path(tmp_path / "b.nc") as tmp:
            tmp.write_bytes(b"cdf")
    finally:
        os.umask(old)
    for path in (text, tmp_path / "b.nc"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # 0644 under umask 022


def test_temporary_path_suffix(tmp_path):
    with temporary_path(tmp_path / "f.png", suffix=".png") as tmp:
        assert tmp.suffix == ".png"
        tmp.write_bytes(b"png")
    assert (tmp_path / "f.png").read_bytes() == b"png"


def test_atomic_write_errors_propagate_and_leave_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        atomic_write(blocker / "out.txt", "x")  # the parent is a file
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(OSError):
        atomic_write(folder, "x")  # cannot rename a file over a folder
    assert os.listdir(folder) == [] and sorted(os.listdir(tmp_path)) == ["file", "folder"]


_FORMULA_TEXT = st.text(alphabet="=+-@\t\rab1.,\"' ", max_size=8)


@given(st.lists(st.tuples(_FORMULA_TEXT, st.floats(allow_nan=False, width=32)), max_size=6))
def test_csv_text_writes_no_cell_a_spreadsheet_runs(rows):
    import csv
    import io

    import pandas as pd

    frame = pd.DataFrame({"=name": [r[0] for r in rows], "value": [r[1] for r in rows]})
    read = list(csv.reader(io.StringIO(csv_text(frame), newline="")))
    assert read[0] == ["'=name", "value"]
    for (text, value), (cell, number) in zip(rows, read[1:], strict=True):
        if text.startswith(("=", "+", "-", "@", "\t", "\r")) and not _is_number(text):
            assert cell == "'" + text
        else:
            assert cell == text
        assert float(number) == pytest.approx(value)  # numbers, negative ones too, unchanged


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_metric_set_and_report_csv_files_neutralise_formulas(tmp_path, make_query_cube):
    import csv

    from metricalc.export import write_metric_set
    from metricalc.metrics import metric_set
    from metricalc.report.builder import build
    from metricalc.report.study import study_from_dict

    hostile = "=HYPERLINK(\"http://x\",\"y\")"
    cube = make_query_cube({hostile: 0.8, "-sift": 0.5, "orb": 0.3}, seed=2)
    files = write_metric_set(metric_set(cube), tmp_path / "metrics")
    study = study_from_dict(
        {"data": {"dataset": "synthetic"}, "baseline": "orb", "outputs": ["csv"],
         "tests": {"n_resamples": 99, "rank": False}, "figures": ["forest"]},
        source=tmp_path / "s.yaml",
    )  # fmt: skip
    report = build(study, cubes={"": cube}, out=tmp_path / "report", progress=False)
    written = [p for p in [*files, *report.files] if p.suffix == ".csv"]
    assert {p.name for p in written} >= {"metrics.csv", "table.csv", "comparisons.csv"}
    for path in written:
        with path.open(newline="") as handle:
            cells = [c for row in csv.reader(handle) for c in row]
        formulas = [c for c in cells if c.startswith(("=", "@", "+", "-")) and not _is_number(c)]
        assert not formulas, path.name
        assert "'" + hostile in cells or path.name == "rankings.csv", path.name
