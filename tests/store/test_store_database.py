"""The database file: schema and pragmas, migrations from version 1 (in place, data kept),
transactions (a failing or killed write leaves nothing), concurrent writers and readers in
several processes, and files that are not a metricalc database."""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import xarray as xr
from store_cases import PERFORMANCE, real

import metricalc as mc
from metricalc.datasets import example_cube
from metricalc.errors import InvalidInputError
from metricalc.store import (
    SCHEMA_VERSION,
    get_experiment,
    list_experiments,
    open_db,
    record_experiment,
    to_dataframe,
)
from metricalc.store import database as database_module
from metricalc.store import records as records_module
from metricalc.store import rows as rows_module
from metricalc.store.schema import (
    EXPERIMENT_COLUMNS,
    MIGRATIONS,
    RESULT_COLUMNS,
    SCENE_COLUMNS,
    SEED_COLUMNS,
)


def columns(db: Path, table: str) -> list[str]:
    with sqlite3.connect(db) as connection:
        return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]


@functools.cache
def example_sets() -> tuple[xr.Dataset, xr.Dataset]:
    """The metric set and the per-scene metrics of ``example_cube()``, computed once per process
    (a second each)."""
    cube = example_cube()
    return mc.metric_set(cube), mc.scene_metrics(cube)


def example(db: Path, tag: str = "run", *, sets: tuple | None = None, **kwargs) -> int:
    """Record the metric sets of ``example_cube()`` (or ``sets``: metric set, scenes)."""
    metrics, scenes = example_sets() if sets is None else sets
    return record_experiment(
        db,
        tag=tag,
        benchmark=kwargs.pop("benchmark", "hpatches"),
        config=kwargs.pop("config", {"tag": tag}),
        metrics=metrics.copy(deep=True),
        scenes=scenes.copy(deep=True),
        **kwargs,
    )


def test_schema_and_pragmas(tmp_path):
    db = tmp_path / "sub" / "r.sqlite"  # the folder is created
    example(db)
    version_1 = [name for name in EXPERIMENT_COLUMNS if name != "protocol"]
    assert columns(db, "experiments") == ["id", *version_1, "protocol"]  # added by version 2
    assert columns(db, "results") == [
        "id",
        "experiment_id",
        "descriptor",
        *SEED_COLUMNS,
        "metadata",
        "status",
        "error",
        "extra",
    ]
    assert set(columns(db, "results")) == {"id", "experiment_id", *RESULT_COLUMNS}
    assert columns(db, "scenes") == ["id", "result_id", *SCENE_COLUMNS]
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    with open_db(db) as connection:
        assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000


def v1_database(path: Path, metadata: str) -> None:
    """A database as version 1 of the schema wrote it, with one experiment."""
    connection = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](connection)
    connection.execute("PRAGMA user_version = 1")
    connection.execute(
        "INSERT INTO experiments (benchmark, tag, status, error, config_hash, config, "
        "metricalc_version, versions, timings, created_at, updated_at) VALUES "
        "('hpatches', 'old', 'ok', '', 'abc', '{\"a\":1}', '0.0.1', '{}', '{\"eval\":1.5}', "
        "'2025-01-01T00:00:00.000+00:00', '2025-01-01T00:00:00.000+00:00')"
    )
    connection.execute(
        "INSERT INTO results (experiment_id, descriptor, true_map_micro, true_map_macro, "
        "metadata) VALUES (1, 'sift', 0.25, 0.5, ?)",
        (metadata,),
    )
    connection.execute(
        "INSERT INTO scenes (result_id, scene, true_map, true_map_with_zeros, query_count, "
        "excluded_count) VALUES (1, 'i_dome', 0.5, 0.25, 10, 10)"
    )
    connection.close()


def test_migration_from_version_1_keeps_the_data(tmp_path):
    db = tmp_path / "v1.sqlite"
    metadata = real(PERFORMANCE).read_text().splitlines()[1]
    metadata = metadata.split(",")[19]  # the first row's metadata string (no commas in it)
    assert metadata.startswith("compute_time_ms=")
    v1_database(db, metadata)
    inode = db.stat().st_ino
    frame = to_dataframe(db)  # opening migrates
    assert db.stat().st_ino == inode  # in place
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 3
    assert columns(db, "results")[-3:] == ["status", "error", "extra"]
    row = frame.iloc[0]
    assert (row.tag, row.descriptor, row.true_map_micro, row.true_map_macro) == (
        "old",
        "sift",
        0.25,
        0.5,
    )
    assert row.metadata == metadata and row.status == "ok" and row.error == ""
    # version 2 copied the metric-set keys of the metadata string into extra, and version 3
    # renamed DescriptorWorkbench's hit rate precision_at_10 hit_rate_at_10
    assert row.r0_rate == 0.094528 and row.total_queries_processed == 101938
    assert row.hit_rate_at_10 == 0.289804 and "precision_at_10" not in frame.columns
    old = get_experiment(db, "old")
    assert old.config == {"a": 1} and old.timings == {"eval": 1.5} and old.protocol == {}
    scene = old.scenes.iloc[0]
    assert (scene.scene, scene.query_count, scene.true_map) == ("i_dome", 10, 0.5)
    assert scene.image_count is mc.store.frames.pd.NA
    example(db, tag="new")  # and the migrated file takes new experiments
    assert list_experiments(db).tag.tolist() == ["new", "old"]


def test_a_failing_migration_leaves_version_1(tmp_path, monkeypatch):
    db = tmp_path / "v1.sqlite"
    v1_database(db, "r0_rate=0.5;")

    def broken(connection):
        MIGRATIONS[1](connection)  # every statement of version 2 ...
        raise RuntimeError("disk full")  # ... then a failure before the commit

    monkeypatch.setattr(database_module, "MIGRATIONS", (MIGRATIONS[0], broken))
    with pytest.raises(RuntimeError, match="disk full"):
        to_dataframe(db)
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "extra" not in columns(db, "results")
    monkeypatch.undo()
    assert to_dataframe(db).r0_rate.tolist() == [0.5]


def test_migration_3_names_hit_rates_and_precisions_apart(tmp_path):
    db = tmp_path / "v2.sqlite"
    v1_database(db, "r0_rate=0.5;")
    connection = sqlite3.connect(db, isolation_level=None)
    MIGRATIONS[1](connection)
    connection.execute("PRAGMA user_version = 2")
    old = '{"precision_at_10":0.75,"ir_precision_at_10":0.075,"recall_at_10":0.75,"r0_rate":0.5}'
    connection.execute("UPDATE results SET extra = ?", (old,))
    connection.close()
    row = to_dataframe(db).iloc[0]  # opening migrates to version 3
    assert (row.hit_rate_at_10, row.precision_at_10, row.recall_at_10) == (0.75, 0.075, 0.75)
    assert "ir_precision_at_10" not in row.index and row.r0_rate == 0.5
    with sqlite3.connect(db) as connection:
        text = connection.execute("SELECT extra FROM results").fetchone()[0]
    assert text.index("hit_rate_at_10") < text.index('"precision_at_10"') < text.index("recall")


def test_files_that_are_not_a_metricalc_database(tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database " * 100)
    with pytest.raises(InvalidInputError, match=r"notes\.sqlite: file is not a database"):
        list_experiments(text)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(InvalidInputError, match=r"not a metricalc one .*\['people'\]"):
        example(other)
    newer = tmp_path / "newer.sqlite"
    example(newer)
    with sqlite3.connect(newer) as connection:
        connection.execute("PRAGMA user_version = 99")
    with pytest.raises(InvalidInputError, match="schema version 99 is newer"):
        list_experiments(newer)
    with pytest.raises(InvalidInputError, match="is a directory"):
        example(tmp_path)


def test_a_failing_write_leaves_the_earlier_experiment(tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    example(db, tag="run", timings={"eval": 1.0})
    before = get_experiment(db, "run")
    calls = []

    def fail_after_first(connection, result_id, rows, statement):
        calls.append(result_id)
        connection.executemany(statement, [(result_id, *row) for row in rows])
        raise OSError("No space left on device")

    monkeypatch.setattr(records_module, "_insert_scenes", fail_after_first)
    with pytest.raises(OSError, match="No space left"):
        example(db, tag="run", config={"changed": True}, timings={"eval": 2.0})
    with pytest.raises(OSError, match="No space left"):
        example(db, tag="brand-new")
    assert calls  # the writes did start
    monkeypatch.undo()
    after = get_experiment(db, "run")
    assert after.config == before.config and after.timings == {"eval": 1.0}
    assert after.updated_at == before.updated_at
    assert after.results.equals(before.results) and after.scenes.equals(before.scenes)
    assert list_experiments(db).tag.tolist() == ["run"]


def test_a_constraint_violation_rolls_back(tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    example(db, tag="kept")
    # bypass the Python checks: the database's own CHECK refuses a negative count
    monkeypatch.setattr(
        rows_module,
        "scene_rows",
        lambda scenes, descriptors: {
            d: [("i_x", 0.5, 0.5, -1, 0, None, None)] for d in descriptors
        },
    )
    with pytest.raises(InvalidInputError, match="CHECK constraint failed"):
        example(db, tag="bad")
    monkeypatch.undo()
    assert list_experiments(db).tag.tolist() == ["kept"]


KILLED_WRITER = """
import sys, time
from metricalc.store.database import open_db, transaction
from metricalc.store.records import write_experiment
from metricalc.store.rows import ResultRow, experiment_row
row = experiment_row(tag="killed", benchmark="hpatches", config={}, status="ok", error="",
                     timings=None, versions=None, protocol={})
with open_db(sys.argv[1]) as connection, transaction(connection):
    result = ResultRow(descriptor="sift", columns={"true_map_micro": 0.5})
    write_experiment(connection, row, [result])
    print("written, not committed", flush=True)
    time.sleep(60)
"""


def test_a_killed_writer_leaves_nothing(tmp_path):
    db = tmp_path / "r.sqlite"
    example(db, tag="kept")
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(db)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(mc.__file__).parents[1])},
    )
    try:
        assert writer.stdout.readline().strip() == "written, not committed"
        assert list_experiments(db).tag.tolist() == ["kept"]  # readers are not blocked (WAL)
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait(timeout=30)
        writer.stdout.close()
    assert list_experiments(db).tag.tolist() == ["kept"]
    example(db, tag="after")  # the lock died with the writer
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert list_experiments(db).tag.tolist() == ["after", "kept"]


# ---- several processes at once -------------------------------------------------------------

WRITERS, EXPERIMENTS = 4, 6


def _writer(db: str, worker: int, start, sets: tuple) -> None:
    """Record EXPERIMENTS experiments of its own and replace a common one each time (the
    metric sets ``sets`` computed once by the test)."""
    start.wait()
    for i in range(EXPERIMENTS):
        example(Path(db), tag=f"w{worker}-{i}", sets=sets, timings={"eval": float(i)})
        example(Path(db), tag="common", sets=sets, config={"writer": worker, "round": i})


def _reader(db: str, start, stop, out) -> None:
    """Read snapshots while the writers write: each must be consistent (every experiment with
    its one result row and its scene row)."""
    start.wait()
    snapshots = 0
    while not stop.is_set() or snapshots == 0:
        try:
            with open_db(Path(db), create=False) as connection:
                connection.execute("BEGIN")
                (n_exp,) = connection.execute("SELECT COUNT(*) FROM experiments").fetchone()
                (n_res,) = connection.execute("SELECT COUNT(*) FROM results").fetchone()
                (n_scn,) = connection.execute("SELECT COUNT(*) FROM scenes").fetchone()
                connection.execute("COMMIT")
        except InvalidInputError:  # the first writer has not created the file yet
            continue
        if not n_exp == n_res == n_scn:
            out.put(f"inconsistent snapshot: {n_exp} experiments, {n_res} results, {n_scn} scenes")
            return
        snapshots += 1
    out.put(snapshots)


def test_concurrent_writers(tmp_path):
    db = tmp_path / "contested.sqlite"  # created by the racing writers themselves
    # processes forked from one server that imported this module (a fresh interpreter each
    # would spend seconds importing it)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    start, stop, out = context.Barrier(WRITERS + 1), context.Event(), context.Queue()
    sets = example_sets()
    writers = [
        context.Process(target=_writer, args=(str(db), w, start, sets)) for w in range(WRITERS)
    ]
    reader = context.Process(target=_reader, args=(str(db), start, stop, out))
    for process in [*writers, reader]:
        process.start()
    for process in writers:
        process.join(timeout=300)
    stop.set()
    reader.join(timeout=60)
    assert [p.exitcode for p in writers] == [0] * WRITERS
    assert reader.exitcode == 0
    result = out.get(timeout=10)
    assert isinstance(result, int) and result > 0, result
    listed = list_experiments(db)
    expected = {f"w{w}-{i}" for w in range(WRITERS) for i in range(EXPERIMENTS)} | {"common"}
    assert set(listed.tag) == expected and len(listed) == len(expected)
    assert (listed.descriptors == 1).all()
    assert len(to_dataframe(db, "scenes")) == len(expected)
    common = get_experiment(db, "common")
    assert common.config["round"] == EXPERIMENTS - 1  # the last write of some writer won
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_opening_waits_for_a_writer_creating_the_file(tmp_path):
    # SQLite refuses the switch to WAL at once, without its busy handler, while another
    # connection writes a database still in rollback mode (the first writer creating the file)
    path = tmp_path / "new.sqlite"
    creator = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    creator.execute("BEGIN IMMEDIATE")  # the write lock, as a writer creating the schema holds it
    probe = sqlite3.connect(path, timeout=5, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        probe.execute("PRAGMA journal_mode = WAL")  # what open_db has to wait through
    probe.close()
    release = threading.Timer(0.3, creator.execute, ["COMMIT"])
    release.start()
    try:
        with open_db(path) as connection:
            assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        release.join()
        creator.close()
