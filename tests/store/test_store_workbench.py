"""The DescriptorWorkbench import on the real export files: the cube holds the metadata's scene
values (parsed here independently with a regular expression), the summaries recomputed from the
scenes match the file's columns within the rounding bound, a tampered copy's rows are reported,
and malformed files are refused with file, line and key."""

from __future__ import annotations

import math
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from store_cases import PERFORMANCE, SUMMARY, real, tampered_copy

from metricalc.errors import InvalidInputError
from metricalc.store import (
    MAP_TOLERANCE,
    WORKBENCH_BENCHMARK,
    get_experiment,
    import_workbench,
    list_experiments,
    read_workbench,
    to_dataframe,
    write_cube,
)

PAIR = re.compile(r"([^=;]+)=([^;]*);")
SCENE_KEY = re.compile(r"(.+)_(true_map_with_zeros|true_map|query_count|excluded_count)$")
SAME_NAME = (
    "true_map_macro",
    "true_map_micro",
    "mean_average_precision",
    "processing_time_ms",
    "metadata",
)
"""The columns of the export stored as they are under the same name."""


def scenes_by_regex(metadata: str) -> pd.DataFrame:
    """The per-scene values of a metadata string, parsed without metricalc."""
    values: dict[str, dict[str, float]] = {}
    for key, value in PAIR.findall(metadata):
        match = SCENE_KEY.fullmatch(key)
        if match:
            values.setdefault(match[1], {})[match[2]] = float(value)
    return pd.DataFrame(values).T.sort_index()


@pytest.fixture(scope="module")
def performance() -> pd.DataFrame:
    return pd.read_csv(real(PERFORMANCE))


@pytest.fixture(scope="module")
def export():
    return read_workbench(real(PERFORMANCE))


def test_the_cube_holds_the_metadata(export, performance):
    cube = export.cube
    assert cube.sizes == {"descriptor": 42, "scene": 12}
    assert cube.descriptor.values.tolist() == performance.descriptor_type.tolist()
    assert cube.experiment_id.values.tolist() == performance.experiment_id.tolist()
    assert cube.line.values.tolist() == list(range(2, 44))
    for i, row in performance.iterrows():
        scenes = scenes_by_regex(row.metadata)
        one = cube.isel(descriptor=i).sel(scene=scenes.index.tolist())
        np.testing.assert_array_equal(one.true_map.values, scenes.true_map.values)
        np.testing.assert_array_equal(one.true_map_with_zeros.values, scenes.true_map_with_zeros)
        np.testing.assert_array_equal(one.query_count.values, scenes.query_count.values)
        np.testing.assert_array_equal(one.excluded_count.values, scenes.excluded_count.values)
    assert cube.split.sel(scene="v_wall") == "viewpoint"
    assert cube.query_count.dtype == np.int64


def test_recomputed_summaries_match_the_file(export, performance):
    assert export.checked_rows == 42 and len(export.mismatches) == 0
    checks = export.checks
    assert len(checks) == 42 * 6 and checks.ok.all()
    for i, row in performance.iterrows():
        s = scenes_by_regex(row.metadata)
        q, e = s.query_count, s.excluded_count
        independent = {
            "true_map_macro": s.true_map[q > 0].mean(),
            "true_map_micro": (s.true_map * q).sum() / q.sum(),
            # DescriptorWorkbench: the scenes with an R = 1 query (here: every scene)
            "true_map_macro_with_zeros": s.true_map_with_zeros[q > 0].mean(),
            "true_map_micro_with_zeros": (s.true_map * q).sum() / (q + e).sum(),
        }
        mine = checks[checks.line == i + 2].set_index("check")
        for name, value in independent.items():
            assert mine.loc[name, "recomputed"] == pytest.approx(value, abs=1e-15)
            assert mine.loc[name, "file"] == row[name]
            # the rounding bound holds on the real file (observed: at most 1.9e-7)
            assert abs(row[name] - value) <= MAP_TOLERANCE
    worst = checks[checks.tolerance > 0].difference.abs().max()
    assert 1e-8 < worst < MAP_TOLERANCE  # the check is not trivially exact
    counts = checks[checks.check.str.startswith("total_")]
    assert (counts.difference == 0).all() and len(counts) == 84


def test_a_tampered_copy_is_reported(tmp_path, performance):
    path, expected = tampered_copy(tmp_path)
    result = read_workbench(path)
    failed = result.mismatches
    assert {line: set(group.check) for line, group in failed.groupby("line")} == expected
    five = failed[failed.line == 5].iloc[0]
    assert five.difference == pytest.approx(3e-6, abs=MAP_TOLERANCE)
    assert five.descriptor == performance.descriptor_type[5 - 2]
    assert five.experiment_id == performance.experiment_id[5 - 2]
    thirty = failed[(failed.line == 30) & (failed.check == "total_queries_processed")].iloc[0]
    assert (thirty.file, thirty.recomputed) == (
        scenes_by_regex(performance.metadata[30 - 2]).query_count.sum(),
        scenes_by_regex(performance.metadata[30 - 2]).query_count.sum() + 1,
    )
    assert result.cube.status.values.tolist().count("mismatch") == 3
    db = tmp_path / "r.sqlite"
    import_workbench(result, db=db)
    listed = list_experiments(db).set_index("tag")
    by_line = {row.line: f"dw-{row.experiment_id}" for row in result.rows}
    for line in expected:
        assert listed.loc[by_line[line], "status"] == "mismatch"
        assert "recomputed" in listed.loc[by_line[line], "error"]
    assert listed.loc[by_line[20], "status"] == "ok"
    assert (listed.status == "ok").sum() == 42 - 3


def test_a_stricter_tolerance_reports_the_rounding(export):
    strict = read_workbench(export.path, tolerance=1e-8)
    assert len(strict.mismatches) > 0
    assert set(strict.mismatches.check) <= {
        "true_map_macro",
        "true_map_micro",
        "true_map_macro_with_zeros",
        "true_map_micro_with_zeros",
    }
    with pytest.raises(InvalidInputError, match="tolerance must be"):
        read_workbench(export.path, tolerance=-1)


def test_import_stores_every_row(tmp_path, export, performance):
    db = tmp_path / "r.sqlite"
    done = import_workbench(export, db=db)
    assert done.tags == tuple(f"dw-{i}" for i in performance.experiment_id)
    results = to_dataframe(db, benchmark=WORKBENCH_BENCHMARK).set_index("tag")
    assert len(results) == 42
    for row in performance.itertuples():
        stored = results.loc[f"dw-{row.experiment_id}"]
        assert stored.descriptor == row.descriptor_type
        for column in SAME_NAME:  # the metadata string verbatim
            assert stored[column] == getattr(row, column), column
        assert stored.hit_rate_at_1 == row.precision_at_1  # DescriptorWorkbench's hit rate
        assert stored.true_map_macro_by_scene_including_zeros == row.true_map_macro_with_zeros
        assert stored.mean_precision == row.legacy_mean_precision
        assert stored.total_matches == row.total_matches
        s = scenes_by_regex(row.metadata)
        for split, prefix in (("viewpoint", "v_"), ("illumination", "i_")):
            part = s[s.index.str.startswith(prefix)]
            # DescriptorWorkbench's split mAPs: means over the scenes; the micro variant weighted
            assert stored[f"{split}_map"] == pytest.approx(part.true_map.mean(), abs=1e-15)
            assert stored[f"{split}_map_including_zeros"] == pytest.approx(
                part.true_map_with_zeros.mean(), abs=1e-15
            )
            assert stored[f"{split}_map_micro"] == pytest.approx(
                (part.true_map * part.query_count).sum() / part.query_count.sum(), abs=1e-15
            )
        assert math.isnan(stored.keypoint_verification_ap)
    scenes = to_dataframe(db, "scenes")
    assert len(scenes) == 42 * 12 and scenes.image_count.isna().all()
    one = get_experiment(db, "dw-42")
    assert one.config["source"] == PERFORMANCE.name and one.config["normalization"] == "L2"
    assert one.timings == {"detect": 0.0, "compute": 2.792, "match": 0.835, "processing": 51.84}
    again = import_workbench(export, db=db)  # the same file again: replaced quietly
    assert again.tags == done.tags and len(list_experiments(db)) == 42


def test_the_summary_export(tmp_path, export):
    summary = read_workbench(real(SUMMARY))
    assert len(summary.rows) == 386 and summary.cube is None and summary.checks.empty
    db = tmp_path / "r.sqlite"
    import_workbench(export, db=db)
    before = to_dataframe(db, "experiments")
    with pytest.raises(InvalidInputError, match=r"41 tag\(s\) .* already hold a different import"):
        import_workbench(summary, db=db)
    pd.testing.assert_frame_equal(to_dataframe(db, "experiments"), before)  # nothing written
    import_workbench(summary, db=db, tag_prefix="dws-")
    frame = to_dataframe(db, tags=["dws-392"]).iloc[0]
    assert frame.descriptor == "libtorch_hardnet_baseline"
    assert frame.processing_time_ms == pytest.approx(21067.0)
    assert frame.true_map_macro == 0.8291770574280103
    assert pd.isna(frame.metadata)
    assert get_experiment(db, "dws-392").config["experiment_name"] == (
        "cnn_descriptor_reference_keynet_sift_pairs"
    )
    import_workbench(summary, db=db, overwrite=True)  # replaces dw-1 .. dw-42 (but dw-11)
    assert get_experiment(db, "dw-42").config["source"] == SUMMARY.name
    assert get_experiment(db, "dw-11").config["source"] == PERFORMANCE.name


def test_cube_file_round_trip(tmp_path, export):
    path = write_cube(export.cube, tmp_path / "cube.nc")
    with xr.open_dataset(path, engine="h5netcdf") as back:
        assert back.load().identical(export.cube)
    assert [p.name for p in tmp_path.iterdir()] == ["cube.nc"]


def small(tmp_path: Path, text: str, name: str = "export.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


SCENE = (
    "i_a_excluded_count=0;i_a_query_count=4;i_a_true_map=0.500000;i_a_true_map_with_zeros=0.500000;"
)


def test_repeated_descriptor_types_get_distinct_labels(tmp_path):
    path = small(
        tmp_path,
        f"experiment_id,descriptor_type,true_map_micro,true_map_macro,metadata\n"
        f"1,sift,0.5,0.5,{SCENE}\n2,sift,0.5,0.5,{SCENE}\n3,orb,0.5,0.5,{SCENE}\n",
    )
    cube = read_workbench(path).cube
    assert cube.descriptor.values.tolist() == ["sift#1", "sift#2", "orb"]


def test_success_false_is_an_error_row(tmp_path):
    path = small(
        tmp_path,
        "experiment_id,descriptor_type,true_map_micro,true_map_macro,metadata\n"
        f"1,sift,0.5,0.5,{SCENE}success=false;\n",
    )
    db = tmp_path / "r.sqlite"
    import_workbench(path, db=db)
    row = list_experiments(db).iloc[0]
    assert row.status == "error" and "success=false" in row.error


def test_a_scene_with_only_excluded_queries_is_no_mismatch(tmp_path):
    """Its true_map is undefined (nan) and its query count 0: it adds nothing to the micro
    mAPs, which are (4 * 0.5) / 4 and (4 * 0.5) / (4 + 3) by hand."""
    empty = (
        "i_b_excluded_count=3;i_b_query_count=0;i_b_true_map=nan;i_b_true_map_with_zeros=0.000000;"
    )
    path = small(
        tmp_path,
        "experiment_id,descriptor_type,true_map_macro,true_map_micro,true_map_micro_with_zeros,"
        f"illumination_map,metadata\n1,sift,0.5,0.5,{2 / 7!r},0.5,{SCENE}{empty}\n",
    )
    export = read_workbench(path)
    assert export.mismatches.empty, export.mismatches.to_string()
    assert export.checks.set_index("check")["recomputed"].to_dict() == pytest.approx(
        {"true_map_macro": 0.5, "true_map_micro": 0.5, "true_map_micro_with_zeros": 2 / 7}
    )


HEADER = "experiment_id,descriptor_type,true_map_micro,true_map_macro,metadata\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", r"empty file; expected a CSV header"),
        (
            "experiment_id,true_map_macro\n1,0.5\n",
            r"line 1: missing column\(s\) \['descriptor_type', 'true_map_micro'\]",
        ),
        (
            "experiment_id,descriptor_type,descriptor_type,true_map_macro,true_map_micro\n",
            "appear twice",
        ),
        (HEADER + f"1,sift,nan,0.5,{SCENE}\n", r"'true_map_micro': 'nan', but the row's 1 scenes"),
        (HEADER, "a header but no rows"),
        (
            HEADER + f"1,sift,0.5,0.5,{SCENE}\n2,orb,0.5,0.5,x,y\n",
            "line 3: 6 fields, the header has 5",
        ),
        (
            HEADER + f"1,sift,0.5,abc,{SCENE}\n",
            r"line 2, column 'true_map_macro': 'abc' is not a number",
        ),
        (HEADER + f"1,sift,0.5,,{SCENE}\n", r"line 2, column 'true_map_macro': empty"),
        (
            HEADER + f"4.5,sift,0.5,0.5,{SCENE}\n",
            r"line 2, column 'experiment_id': '4.5' is not an integer",
        ),
        (HEADER + f"1,,0.5,0.5,{SCENE}\n", r"line 2, column 'descriptor_type': empty"),
        (
            HEADER + f"1,sift,0.5,0.5,{SCENE}\n1,orb,0.5,0.5,{SCENE}\n",
            "experiment_id 1 already on line 2",
        ),
        (HEADER + "1,sift,0.5,0.5,a=1;b;\n", r"line 2, column 'metadata': parse_metadata: pair 2"),
        (
            HEADER
            + "1,sift,0.5,0.5,i_a_true_map=0.5;i_a_true_map_with_zeros=0.5;i_a_excluded_count=0;\n",
            r"line 2, column 'metadata'.*not \['i_a_query_count'\]",
        ),
        (
            HEADER + f"1,sift,0.5,0.5,{SCENE.replace('excluded_count=0', 'excluded_count=-1')}\n",
            r"line 2, column 'metadata': metadata key i_a_excluded_count=-1; expected an integer",
        ),
        (
            HEADER + f"1,sift,0.5,0.5,{SCENE.replace('query_count=4', 'query_count=4.000000')}\n",
            r"metadata key i_a_query_count=4.0; expected an integer >= 0",
        ),
        (
            HEADER
            + f"1,sift,0.5,0.5,{SCENE.replace('i_a_true_map=0.500000', 'i_a_true_map=1.500000')}\n",
            r"metadata key i_a_true_map=1.5 is outside \[0, 1\]",
        ),
        (
            HEADER
            + f"1,sift,0.5,0.5,{SCENE.replace('i_a_true_map=0.500000', 'i_a_true_map=high')}\n",
            r"metadata key i_a_true_map='high'; expected a number",
        ),
        (
            HEADER + f"{'1' * 40},sift,0.5,0.5,{SCENE}\n",
            r"column 'experiment_id': 1{40} is outside the 64-bit integers",
        ),
        (HEADER + f"9223372036854775808,sift,0.5,0.5,{SCENE}\n", "outside the 64-bit integers"),
        (
            HEADER + f"1,sift,0.5,1e308,{SCENE}\n",
            r"column 'true_map_macro': '1e308'; expected a fraction in \[0, 1\]",
        ),
        (HEADER + f"1,sift,0.5,-0.1,{SCENE}\n", r"'-0.1'; expected a fraction in \[0, 1\]"),
        (HEADER + f"1,sift,0.5,inf,{SCENE}\n", r"'inf'; expected a fraction"),
        (
            HEADER.replace("metadata", "total_matches,metadata")
            + f"1,sift,0.5,0.5,1e308,{SCENE}\n",
            r"column 'total_matches': '1e308'; expected a count, 0 .. 2\*\*53",
        ),
        (
            HEADER.replace("metadata", "total_matches,metadata") + f"1,sift,0.5,0.5,2.5,{SCENE}\n",
            r"'2.5'; expected a count",
        ),
        (
            HEADER.replace("metadata", "processing_time_ms,metadata")
            + f"1,sift,0.5,0.5,-3,{SCENE}\n",
            r"column 'processing_time_ms': '-3'; expected a finite number >= 0",
        ),
    ],
)
def test_malformed_files(tmp_path, text, message):
    path = small(tmp_path, text)
    with pytest.raises(InvalidInputError, match=message) as raised:
        read_workbench(path)
    assert str(raised.value).startswith(str(path))  # every message names the file
    db = tmp_path / "r.sqlite"
    with pytest.raises(InvalidInputError, match=message):
        import_workbench(path, db=db)
    assert not db.exists()


def test_result_columns_the_file_lacks_are_named(tmp_path, export, capsys):
    from metricalc.cli import main
    from metricalc.store.workbench_file import METRIC_COLUMNS

    assert export.absent_columns == []  # the performance export has every result column
    path = small(tmp_path, HEADER + f"1,sift,0.5,0.5,{SCENE}\n")
    lacking = read_workbench(path).absent_columns
    assert lacking == [c for c in METRIC_COLUMNS if c not in ("true_map_macro", "true_map_micro")]
    assert main(["db", "import-workbench", str(path), "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert f"not in the file, stored as NULL: {', '.join(lacking)}" in out
    summary = read_workbench(real(SUMMARY)).absent_columns  # processing_time_s counts
    assert "processing_time_ms" not in summary and "total_matches" in summary


def test_unreadable_files(tmp_path):
    with pytest.raises(InvalidInputError, match="no such file"):
        read_workbench(tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(
        b"experiment_id,descriptor_type,true_map_macro,true_map_micro\n1,\xff\xfe,0.5,0.5\n"
    )
    with pytest.raises(InvalidInputError, match=r"binary\.csv line"):
        read_workbench(binary)


def test_import_is_one_transaction(tmp_path, monkeypatch, export):
    from metricalc.store import workbench_store

    db = tmp_path / "r.sqlite"
    calls = []
    original = workbench_store.write_experiment

    def fail_on_the_tenth(connection, experiment, results):
        calls.append(experiment.tag)
        if len(calls) == 10:
            raise KeyboardInterrupt
        return original(connection, experiment, results)

    monkeypatch.setattr(workbench_store, "write_experiment", fail_on_the_tenth)
    with pytest.raises(KeyboardInterrupt):
        import_workbench(export, db=db)
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)
        assert connection.execute("SELECT COUNT(*) FROM scenes").fetchone() == (0,)


def test_names_with_control_characters_are_printed_escaped(tmp_path, capsys):
    from metricalc.cli import main

    hostile = tmp_path / "evil\x1b[2J\rname.csv"
    hostile.write_text(HEADER + f"1,sift,0.5,0.5,{SCENE}\n")
    assert main(["db", "import-workbench", str(hostile), "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "evil\\x1b[2J\\x0dname.csv" in out
