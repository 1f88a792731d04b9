"""Every experiment run is recorded in the results database: ok, failed, interrupted, cached;
concurrent runs of different tags both land."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from metricalc.errors import InvalidInputError
from metricalc.experiment import BENCHMARKS, default_db, run
from metricalc.store import COLUMN_SOURCES, get_experiment, list_experiments
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["data.scenes=[camera]", "data.size=192", "model.max_keypoints=100"]
"""Two scenes (i_camera, v_camera), 10 image pairs, small images: a run takes seconds."""


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _metricalc(*args, check=True):
    """``metricalc *args`` in-process (tests/cli_helpers.py)."""
    done = run_cli(*args)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _eval(outputs, tag, *extra):
    return [
        sys.executable, "-m", "metricalc", "run", "hpatches", "--conf", "sift", "--tag", tag,
        "--outputs", str(outputs), "--no-progress", *SMALL, *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Two runs of different tags started at the same time, sharing the default database."""
    outputs = tmp_path_factory.mktemp("outputs")
    # the synthetic benchmark first, so that the two runs overlap in their work, not in waiting
    assert run("hpatches", "sift", tag="warmup", overrides=SMALL, outputs=outputs, db=False)
    started = [
        subprocess.Popen(
            _eval(outputs, tag, "model.max_keypoints=120"),
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("one", "two")
    ]
    for process in started:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        assert f"recorded in {outputs / 'metricalc.sqlite'}" in out
    return outputs


def _summaries(outputs, tag):
    return json.loads((outputs / "results" / "hpatches" / tag / "summaries.json").read_text())


def _assert_recorded_values(row, summaries):
    """Every scalar of summaries.json is stored: in its seed column or under its own name."""
    columns = {source: column for column, source in COLUMN_SOURCES.items()}
    checked = 0
    for key, value in summaries.items():
        if isinstance(value, dict):  # ransac_sweep: per threshold, not a scalar
            continue
        stored = row[columns.get(key, key)]
        if value is None:
            assert stored is None or (isinstance(stored, float) and math.isnan(stored)), key
        else:
            assert stored == value, key
        checked += 1
    assert checked >= 40
    assert row["mean_average_precision"] == summaries["true_map_macro_by_scene"]


def test_concurrent_runs_are_both_recorded_with_their_summaries(outputs):
    db = outputs / "metricalc.sqlite"
    assert default_db(outputs) == db
    listing = json.loads(_metricalc("db", "list", "--db", str(db), "--json").stdout)
    assert {(r["tag"], r["status"], r["descriptors"]) for r in listing} == {
        ("one", "ok", 1),
        ("two", "ok", 1),
    }
    for tag in ("one", "two"):
        shown = json.loads(_metricalc("db", "show", tag, "--db", str(db), "--json").stdout)
        assert shown["status"] == "ok" and shown["error"] == ""
        assert shown["config"]["model"]["max_keypoints"] == 120
        (row,) = shown["results"]
        assert row["descriptor"] == tag
        _assert_recorded_values(row, _summaries(outputs, tag))
        assert {s["scene"] for s in shown["scenes"]} == {"i_camera", "v_camera"}
        record = json.loads((outputs / "results" / "hpatches" / tag / "run.json").read_text())
        assert shown["timings"] == pytest.approx(record["timings"])
        assert shown["versions"] == record["versions"]
        assert {"opencv-python-headless", "opencv-contrib-python-headless"} & set(shown["versions"])
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    table = _metricalc("db", "list", "--db", str(db)).stdout  # the terminal listing
    assert "one" in table and "two" in table and "hpatches" in table


def test_a_cached_run_is_recorded_again(outputs, tmp_path):
    before = get_experiment(default_db(outputs), "one")
    again = run("hpatches", "sift", tag="one", overrides=[*SMALL, "model.max_keypoints=120"],
                outputs=outputs)  # fmt: skip
    assert again.status == "ok" and not again.exported and not again.evaluated
    assert again.db == default_db(outputs) and again.experiment_id == before.id
    after = get_experiment(again.db, "one")
    assert after.id == before.id and after.created_at == before.created_at
    assert after.updated_at > before.updated_at
    assert after.timings["total"] == pytest.approx(again.timings["total"])
    # into another database (--db): the cached run lands there with the same values
    other = tmp_path / "elsewhere.sqlite"
    done = _metricalc(*_eval(outputs, "one", "model.max_keypoints=120", "--db", str(other))[3:])
    assert f"recorded in {other}" in done.stdout
    row = get_experiment(other, "one").results.iloc[0]
    _assert_recorded_values(row.to_dict(), _summaries(outputs, "one"))


def test_a_failed_run_is_recorded_with_its_error(outputs, tmp_path):
    db = tmp_path / "runs.sqlite"
    failing = [f"model.features={tmp_path / 'none'}", "model.descriptor=mine"]
    done = _metricalc(*_eval(outputs, "failing", *failing, "--db", str(db))[3:], check=False)
    assert done.returncode == 2
    assert "run 'failing' failed: InvalidInputError: missing features file" in done.stderr
    assert f"recorded as failed in {db}" in done.stderr
    shown = json.loads(_metricalc("db", "show", "failing", "--db", str(db), "--json").stdout)
    assert shown["status"] == "error"
    assert shown["error"].startswith("InvalidInputError: missing features file")
    assert str(tmp_path / "none") in shown["error"]
    assert shown["results"] == [] and shown["scenes"] == []
    record = json.loads((outputs / "results/hpatches/failing/run.json").read_text())
    assert shown["error"] == record["error"]
    # the Python API records it the same way (and returns the result, not raising)
    result = run("hpatches", "sift", tag="failing", overrides=[*SMALL, *failing], outputs=outputs,
                 db=db)  # fmt: skip
    assert result.status == "error" and result.db == db
    assert get_experiment(db, "failing").error == result.error


def test_an_ok_tag_that_fails_later_is_recorded_as_failed(outputs, tmp_path, monkeypatch):
    """The database holds the last run of a tag: an interrupted rerun replaces the ok row."""
    db = tmp_path / "runs.sqlite"
    first = run("hpatches", "sift", tag="warmup", overrides=SMALL, outputs=outputs, db=db)
    assert get_experiment(db, "warmup").status == "ok" and first.status == "ok"

    def interrupted(ctx):
        raise KeyboardInterrupt

    monkeypatch.setattr(BENCHMARKS["hpatches"], "export", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run("hpatches", "sift", tag="warmup", overrides=SMALL, outputs=outputs, db=db,
            overwrite=True)  # fmt: skip
    stored = get_experiment(db, "warmup")
    assert stored.status == "error" and "KeyboardInterrupt" in stored.error
    assert len(stored.results) == 0


def test_refused_runs_are_not_recorded_and_a_bad_database_is_refused_first(outputs, tmp_path):
    db = default_db(outputs)
    before = get_experiment(db, "two")
    with pytest.raises(InvalidInputError, match="data/model configuration differs"):
        run("hpatches", "sift", tag="two", overrides=[*SMALL, "model.max_keypoints=50"],
            outputs=outputs)  # fmt: skip
    assert get_experiment(db, "two").updated_at == before.updated_at
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not an SQLite file, it is just text" * 4)
    with pytest.raises(InvalidInputError, match=r"bad\.sqlite"):
        run("hpatches", "sift", tag="never", overrides=SMALL, outputs=outputs, db=bad)
    assert not (outputs / "results" / "hpatches" / "never").exists()  # refused before any work
    with pytest.raises(InvalidInputError, match="db must be"):
        run("hpatches", "sift", tag="never", overrides=SMALL, outputs=outputs, db=3)


def test_db_false_records_nothing(outputs):
    tags = set(list_experiments(default_db(outputs))["tag"])
    result = run("hpatches", "sift", tag="one", overrides=[*SMALL, "model.max_keypoints=120"],
                 outputs=outputs, db=False)  # fmt: skip
    assert result.db is None and result.experiment_id is None
    assert set(list_experiments(default_db(outputs))["tag"]) == tags
