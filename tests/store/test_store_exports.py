"""Exports of the database tables in CSV, JSON and Parquet: each file read back with an
independent reader (pandas' CSV reader, the json module, pyarrow) equals to_dataframe."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from store_cases import make_cube

import metricalc as mc
from metricalc.errors import InvalidInputError
from metricalc.store import FORMATS, export_table, record_experiment, to_dataframe


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("exports") / "r.sqlite"
    cube = make_cube(1, broken=True)
    metrics, scenes = mc.metric_set(cube), mc.scene_metrics(cube)
    for tag in ("locked", "native"):
        record_experiment(
            path,
            tag=tag,
            benchmark="hpatches",
            config={"tag": tag, "note": 'commas, "quotes"\nand a newline'},
            metrics=metrics,
            scenes=scenes,
            timings={"eval": 1.25},
        )
    record_experiment(
        path,
        tag="failed",
        benchmark="hpatches",
        config={},
        status="error",
        error="Traceback: boom, with a comma",
    )
    return path


def assert_same(read: pd.DataFrame, frame: pd.DataFrame) -> None:
    """Equal values column by column: numbers exactly (NaN == NaN, NA == NaN), text as text."""
    assert list(read.columns) == list(frame.columns)
    assert len(read) == len(frame)
    for column in frame.columns:
        want, got = frame[column], read[column]
        if pd.api.types.is_numeric_dtype(want.dtype) and not pd.api.types.is_bool_dtype(want.dtype):
            np.testing.assert_array_equal(
                got.to_numpy(np.float64, na_value=np.nan),
                want.to_numpy(np.float64, na_value=np.nan),
                err_msg=column,
            )
        else:
            assert _text(got) == _text(want), column


def _text(values: pd.Series) -> list[str | None]:
    def one(v):
        missing = v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
        return None if missing else str(v)

    return [one(v) for v in values]


@pytest.mark.parametrize("table", ["results", "scenes", "experiments"])
def test_csv(db, tmp_path, table):
    frame = to_dataframe(db, table)
    out = export_table(db, tmp_path / f"{table}.csv", table=table)
    read = pd.read_csv(out, keep_default_na=False, na_values=[""])
    if table == "results":
        # empty strings (the error of an ok row) read back as NaN from CSV: compare as text
        read["error"] = read["error"].fillna("")
    if table == "experiments":
        read["error"] = read["error"].fillna("")
    assert_same(read, frame)


@pytest.mark.parametrize("table", ["results", "scenes", "experiments"])
def test_json(db, tmp_path, table):
    frame = to_dataframe(db, table)
    out = export_table(db, tmp_path / f"{table}.json", table=table)
    rows = json.loads(out.read_text())  # strict JSON: no NaN tokens
    assert isinstance(rows, list) and len(rows) == len(frame)
    assert all(list(row) == list(frame.columns) for row in rows)
    assert_same(pd.DataFrame(rows, columns=frame.columns), frame)
    if table == "results":
        broken = next(row for row in rows if row["descriptor"] == "broken")
        assert broken["true_map_micro"] is None and broken["status"] == "error"
        assert isinstance(rows[0]["total_queries_processed"], int)


@pytest.mark.parametrize("table", ["results", "scenes", "experiments"])
def test_parquet(db, tmp_path, table):
    frame = to_dataframe(db, table)
    out = export_table(db, tmp_path / "t.data", format="parquet", table=table)
    read = pq.read_table(out).to_pandas()
    assert_same(read, frame)
    if table == "scenes":
        assert str(read["image_count"].dtype) == "Int64" and read["query_count"].dtype == "int64"


def test_selection(db, tmp_path):
    out = export_table(db, tmp_path / "one.csv", tags=["native"], table="scenes")
    read = pd.read_csv(out)
    assert set(read.tag) == {"native"} and len(read) == len(to_dataframe(db, "scenes")) // 2
    assert to_dataframe(db, benchmark="nothing").empty


def test_no_partial_files(db, tmp_path):
    for fmt in FORMATS:
        export_table(db, tmp_path / "out" / f"r.{fmt}")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["r.csv", "r.json", "r.parquet"]


def test_refusals(db, tmp_path):
    with pytest.raises(InvalidInputError, match="cannot tell the export format"):
        export_table(db, tmp_path / "r.xlsx")
    with pytest.raises(InvalidInputError, match="format must be one of"):
        export_table(db, tmp_path / "r.csv", format="xml")
    with pytest.raises(InvalidInputError, match="is a directory"):
        export_table(db, tmp_path)
    with pytest.raises(InvalidInputError, match="table must be one of"):
        export_table(db, tmp_path / "r.csv", table="nope")
    with pytest.raises(InvalidInputError, match="no database at"):
        export_table(tmp_path / "none.sqlite", tmp_path / "r.csv")
    assert not (tmp_path / "r.csv").exists()
