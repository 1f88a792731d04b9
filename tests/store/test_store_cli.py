"""``metricalc db ...`` run as a user runs it (in-process, ``tests/cli_helpers.py``), without
``COLUMNS`` in the environment (as a pipe or a log file sees it)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr
from store_cases import PERFORMANCE, SUMMARY, make_cube, real, tampered_copy

import metricalc as mc
from metricalc.store import record_experiment, to_dataframe
from tests.cli_helpers import CliResult, run_cli


def run(*args: str, cwd: Path | None = None) -> CliResult:
    return run_cli(*args, cwd=cwd, env={"COLUMNS": None})


def assert_clean_error(result: CliResult, message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("metricalc: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """The real detailed export imported, plus one metricalc run."""
    path = tmp_path_factory.mktemp("cli") / "r.sqlite"
    result = run("db", "import-workbench", str(real(PERFORMANCE)), "--db", str(path))
    assert result.returncode == 0, result.stderr
    assert "imported 42 row(s)" in result.stdout and "42 match, 0 do not" in result.stdout
    cube = make_cube(2)
    record_experiment(
        path,
        tag="sift",
        benchmark="hpatches",
        config={"model": "sift"},
        metrics=mc.metric_set(cube),
        scenes=mc.scene_metrics(cube),
        timings={"eval": 1.5},
    )
    return path


def test_import_with_cube_and_json(tmp_path):
    db, cube = tmp_path / "w.sqlite", tmp_path / "cube.nc"
    result = run(
        "db",
        "import-workbench",
        str(real(PERFORMANCE)),
        "--db",
        str(db),
        "--out",
        str(cube),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["rows"] == payload["checked_rows"] == 42 and payload["mismatches"] == []
    assert payload["tags"][0] == "dw-42" and payload["tolerance"] == 5e-7
    with xr.open_dataset(cube, engine="h5netcdf") as opened:
        assert opened.sizes == {"descriptor": 42, "scene": 12}
    # a second file whose ids clash: refused, nothing written, no traceback
    clash = run("db", "import-workbench", str(real(SUMMARY)), "--db", str(db))
    assert_clean_error(clash, "41 tag(s) of benchmark 'descriptorworkbench' already hold")
    assert len(to_dataframe(db, "experiments")) == 42
    ok = run("db", "import-workbench", str(SUMMARY), "--db", str(db), "--tag-prefix", "dws-")
    assert ok.returncode == 0 and "nothing to recompute" in ok.stdout
    no_cube = run("db", "import-workbench", str(SUMMARY), "--db", str(db), "--out", "x.nc")
    assert_clean_error(no_cube, "no per-scene metadata")


def test_a_tampered_copy_exits_1_and_names_the_rows(tmp_path):
    path, expected = tampered_copy(tmp_path)
    result = run("db", "import-workbench", str(path), "--db", str(tmp_path / "t.sqlite"))
    assert result.returncode == 1, result.stderr
    assert "39 match, 3 do not" in result.stdout and "rows that do not match" in result.stdout
    as_json = run("db", "import-workbench", str(path), "--db", str(tmp_path / "t.sqlite"), "--json")
    assert as_json.returncode == 1
    failed = json.loads(as_json.stdout)["mismatches"]
    assert {row["line"] for row in failed} == set(expected)


def test_list_and_show(db):
    listed = run("db", "list", "--db", str(db))
    assert (
        listed.returncode == 0 and "43 experiment(s)" in listed.stdout and "dw-42" in listed.stdout
    )
    as_json = json.loads(run("db", "list", "--db", str(db), "--json").stdout)
    assert len(as_json) == 43 and {"tag", "status", "descriptors"} <= set(as_json[0])
    only = json.loads(
        run("db", "list", "--db", str(db), "--benchmark", "hpatches", "--json").stdout
    )
    assert [row["tag"] for row in only] == ["sift"]
    shown = run("db", "show", "sift", "--db", str(db), "--scenes")
    assert shown.returncode == 0, shown.stderr
    frame = to_dataframe(db, tags=["sift"]).set_index("descriptor")
    assert f"{100 * frame.loc['orb', 'true_map_micro']:.2f}" in shown.stdout
    assert "per scene" in shown.stdout and "v_d" in shown.stdout
    detail = json.loads(run("db", "show", "dw-42", "--db", str(db), "--json").stdout)
    assert (
        detail["benchmark"] == "descriptorworkbench" and detail["config"]["normalization"] == "L2"
    )
    assert detail["results"][0]["true_map_macro"] == pd.read_csv(PERFORMANCE).true_map_macro[0]
    assert len(detail["scenes"]) == 12


def test_export_formats(db, tmp_path):
    csv_text = run(
        "db",
        "export",
        "--format",
        "csv",
        "--db",
        str(db),
        "--table",
        "scenes",
        "--tag",
        "dw-1",
        "--tag",
        "dw-2",
    )
    assert csv_text.returncode == 0
    assert csv_text.stdout == to_dataframe(db, "scenes", tags=["dw-1", "dw-2"]).to_csv(index=False)
    json_text = run("db", "export", "--format", "json", "--db", str(db), "--benchmark", "hpatches")
    assert [row["descriptor"] for row in json.loads(json_text.stdout)] == ["sift", "orb", "brief"]
    out = tmp_path / "all.parquet"
    written = run("db", "export", "--format", "parquet", "--out", str(out), "--db", str(db))
    assert written.returncode == 0 and out.exists()
    assert len(pd.read_parquet(out)) == 45  # 42 imported rows + 3 descriptors
    assert_clean_error(run("db", "export", "--format", "parquet", "--db", str(db)), "give --out")


def test_default_database_path(tmp_path):
    result = run("db", "import-workbench", str(real(PERFORMANCE)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "outputs" / "metricalc.sqlite").exists()
    assert "dw-1" in run("db", "list", cwd=tmp_path).stdout


def test_errors(tmp_path, db):
    assert_clean_error(run("db", "list", "--db", str(tmp_path / "none.sqlite")), "no database at")
    assert_clean_error(run("db", "show", "nope", "--db", str(db)), "no experiment with tag 'nope'")
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "experiment_id,descriptor_type,true_map_macro,true_map_micro\n1,sift,0.5,0.5\n2,orb\n"
    )
    assert_clean_error(
        run("db", "import-workbench", str(bad), "--db", str(tmp_path / "x.sqlite")),
        f"{bad} line 3: 2 fields, the header has 4",
    )
    assert not (tmp_path / "x.sqlite").exists()
    not_db = tmp_path / "text.sqlite"
    not_db.write_text("hello " * 200)
    assert_clean_error(run("db", "list", "--db", str(not_db)), "file is not a database")
    usage = run("db", "export", "--db", str(db))
    assert usage.returncode == 2 and "--format" in usage.stderr


def _real_rows() -> list[list[str]]:
    import csv

    with real(PERFORMANCE).open(newline="") as handle:
        return list(csv.reader(handle))


def _write_rows(path: Path, rows: list[list[str]]) -> Path:
    import csv

    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


def test_a_nan_map_is_refused_before_anything_is_written(tmp_path):
    rows = _real_rows()
    rows[3][rows[0].index("true_map_macro")] = "nan"  # file line 4
    bad = _write_rows(tmp_path / "nan.csv", rows)
    out, db = tmp_path / "wb.nc", tmp_path / "r.sqlite"
    result = run("db", "import-workbench", str(bad), "--db", str(db), "--out", str(out))
    assert_clean_error(result, f"{bad} line 4, column 'true_map_macro': 'nan', but the row's 12")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists() and not db.exists()


def test_an_export_without_true_map_micro_is_refused(tmp_path):
    rows = _real_rows()
    column = rows[0].index("true_map_micro")
    bad = _write_rows(tmp_path / "no_micro.csv", [r[:column] + r[column + 1 :] for r in rows])
    out, db = tmp_path / "wb.nc", tmp_path / "r.sqlite"
    result = run("db", "import-workbench", str(bad), "--db", str(db), "--out", str(out))
    assert_clean_error(result, f"{bad} line 1: missing column(s) ['true_map_micro']")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists() and not db.exists()
