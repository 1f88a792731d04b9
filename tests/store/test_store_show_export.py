"""``metricalc db show`` and ``metricalc db export`` report the same numbers: for every experiment
of a database holding both real DescriptorWorkbench exports and a metricalc run with a failed
descriptor, the results and scene rows of ``db show --json`` equal the rows ``db export`` writes
for that tag, and the totals (queries processed and excluded) equal the sums of the scene rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from store_cases import PERFORMANCE, SUMMARY, make_cube, real

import metricalc as mc
from metricalc.cli import main
from metricalc.store import record_experiment


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("db") / "r.sqlite"
    assert main(["db", "import-workbench", str(real(PERFORMANCE)), "--db", str(path)]) == 0
    argv = ["db", "import-workbench", str(real(SUMMARY)), "--db", str(path)]
    assert main([*argv, "--tag-prefix", "dws-"]) == 0
    cube = make_cube(broken=True)
    record_experiment(
        path, tag="run", benchmark="hpatches", config={"k": 1},
        metrics=mc.metric_set(cube), scenes=mc.scene_metrics(cube),
    )  # fmt: skip
    return path


def cli_json(capsys, *argv: str) -> object:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("tag", ["dw-5", "dw-42", "dws-7", "run"])
def test_show_and_export_agree(db, capsys, tag):
    shown = cli_json(capsys, "db", "show", tag, "--db", str(db), "--json")
    rows = cli_json(capsys, "db", "export", "--db", str(db), "--tag", tag, "--format", "json")
    scenes = cli_json(
        capsys,
        "db",
        "export",
        "--db",
        str(db),
        "--tag",
        tag,
        "--format",
        "json",
        "--table",
        "scenes",
    )
    assert len(shown["results"]) == len(rows) and len(shown["scenes"]) == len(scenes)
    for one, row in zip(shown["results"], rows, strict=True):
        assert {k: v for k, v in row.items() if k not in ("benchmark", "tag")} == one
    for one, row in zip(shown["scenes"], scenes, strict=True):
        assert {k: v for k, v in row.items() if k not in ("benchmark", "tag")} == one
    for row in rows:  # the totals are the sums of the scene rows
        own = [s for s in scenes if s["descriptor"] == row["descriptor"]]
        if own and row.get("total_queries_processed") is not None:
            assert row["total_queries_processed"] == sum(s["query_count"] for s in own)
            assert row["total_queries_excluded"] == sum(s["excluded_count"] for s in own)


@pytest.mark.parametrize(
    ("table", "column", "value", "verb", "message"),
    [
        ("experiments", "config", "{bad json", "show", "column config: not valid JSON"),
        ("experiments", "timings", b"\xff\x00", "show", "column timings: not UTF-8 text"),
        ("experiments", "protocol", "[1,", "show", "column protocol: not valid JSON"),
        ("results", "extra", "[1,", "export", "column extra: not valid JSON"),
        ("results", "true_map_micro", "abc", "export", "column true_map_micro, row of "),
        ("scenes", "query_count", "many", "scenes", "'many' is not an integer"),
        ("scenes", "true_map", b"\x01", "scenes", "is not a number"),
    ],
)
def test_a_damaged_database_is_named_not_a_traceback(
    db, tmp_path, capsys, table, column, value, verb, message
):
    import shutil
    import sqlite3

    damaged = tmp_path / "damaged.sqlite"
    shutil.copy(db, damaged)
    with sqlite3.connect(damaged) as connection:
        tag, experiment = connection.execute(
            "SELECT tag, id FROM experiments ORDER BY id LIMIT 1"
        ).fetchone()
        target = {
            "experiments": ("id = ?", experiment),
            "results": ("experiment_id = ?", experiment),
            "scenes": ("result_id IN (SELECT id FROM results WHERE experiment_id = ?)", experiment),
        }[table]
        connection.execute(f"UPDATE {table} SET {column} = ? WHERE {target[0]}", (value, target[1]))
    argv = {
        "show": ["db", "show", tag, "--db", str(damaged)],
        "export": ["db", "export", "--db", str(damaged), "--format", "json"],
        "scenes": ["db", "export", "--db", str(damaged), "--table", "scenes", "--format", "csv"],
    }[verb]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(damaged.name) in err and message in err, err


def test_an_import_killed_mid_transaction_leaves_the_database_as_it_was(db, tmp_path):
    import shutil
    import signal
    import subprocess
    import sys
    import textwrap

    from metricalc.store import to_dataframe

    copy = tmp_path / "copy.sqlite"
    shutil.copy(db, copy)
    before = {t: to_dataframe(copy, t) for t in ("experiments", "results", "scenes")}
    script = textwrap.dedent(
        f"""
        import os, signal
        from metricalc.store import workbench_store
        from metricalc.cli import main

        real = workbench_store.write_experiment
        calls = []

        def dying(*args, **kwargs):  # killed after 5 of the 42 rows are written, uncommitted
            calls.append(1)
            if len(calls) > 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        workbench_store.write_experiment = dying
        main(["db", "import-workbench", {str(real(PERFORMANCE))!r}, "--db", {str(copy)!r},
              "--tag-prefix", "killed-"])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    for table, frame in before.items():  # SQLite's journal rolls the open transaction back
        after = to_dataframe(copy, table)
        assert after.equals(frame), table
