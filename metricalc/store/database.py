"""Opening the results database: WAL mode, busy timeout, foreign keys, migrations, transactions.

One SQLite file (stdlib :mod:`sqlite3`) holds every experiment. Several processes may write it
at once (two runs with different tags, a run and an import): the file is in WAL mode (readers
never block the writer, the writer never blocks readers) and every connection waits up to
:data:`BUSY_TIMEOUT_S` seconds for the write lock instead of failing. Every write is one
``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction (:func:`transaction`): it takes the write lock
first, so two writers queue instead of deadlocking on a read lock, and an error (or a kill)
before ``COMMIT`` leaves the database as it was. Queries bind every value as a parameter
(``?``); the only SQL built from values is ``PRAGMA user_version = <int>``, which SQLite cannot
parameterize and which only ever receives a version number of :mod:`metricalc.store.schema`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from metricalc.errors import InvalidInputError, MetricalcError
from metricalc.store.schema import MIGRATIONS, SCHEMA_VERSION, TABLES

__all__ = ["BUSY_TIMEOUT_S", "DEFAULT_DB", "DatabaseBusyError", "open_db", "transaction"]

DEFAULT_DB = Path("outputs") / "metricalc.sqlite"
"""The database file when none is named (relative to the working directory)."""

BUSY_TIMEOUT_S = 60.0
"""Seconds a connection waits for another process's write to finish before giving up."""


class DatabaseBusyError(MetricalcError):
    """The database stayed locked by another writer for longer than :data:`BUSY_TIMEOUT_S`."""


def _user_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: ``BEGIN IMMEDIATE``, then ``COMMIT``, or ``ROLLBACK`` on any
    exception (re-raised), so a failing write leaves nothing half-written."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Apply the missing migrations in one transaction (a no-op for a current database)."""
    version = _user_version(connection)
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise InvalidInputError(
            f"{path}: database schema version {version} is newer than this metricalc supports "
            f"({SCHEMA_VERSION}); upgrade metricalc to read it"
        )
    with transaction(connection):
        version = _user_version(connection)  # another process may have migrated meanwhile
        if version == 0:
            tables = [
                name
                for (name,) in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            if tables:
                raise InvalidInputError(
                    f"{path}: an SQLite database but not a metricalc one (user_version 0, tables "
                    f"{tables}); expected an empty file or a metricalc results database with "
                    f"tables {list(TABLES)}"
                )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[target - 1](connection)
            connection.execute(f"PRAGMA user_version = {int(target)}")


def _path(db: str | os.PathLike[str]) -> Path:
    if not isinstance(db, (str, os.PathLike)):
        raise InvalidInputError(f"db must be a path to a database file; got {type(db).__name__}")
    path = Path(db)
    if path.is_dir():
        raise InvalidInputError(f"db {path} is a directory; expected a database file path")
    return path


def _use_wal(connection: sqlite3.Connection) -> None:
    """Switch ``connection``'s database to WAL journaling, waiting up to :data:`BUSY_TIMEOUT_S`.

    SQLite answers ``PRAGMA journal_mode = WAL`` with "database is locked" at once, without
    calling the busy handler, while another connection holds a lock on a database still in
    rollback mode (e.g. the first writer creating the file). The switch is retried here every
    50 ms until the timeout, then the error is raised.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def open_db(db: str | os.PathLike[str], *, create: bool = True) -> Iterator[sqlite3.Connection]:
    """A connection to the database ``db``, migrated to the current schema, closed on exit.

    The connection is in autocommit mode (writes go through :func:`transaction`), with foreign
    keys enforced, WAL journaling and a busy timeout of :data:`BUSY_TIMEOUT_S`.

    Parameters
    ----------
    db : path
        The database file. Its folder is created with it when ``create`` is true.
    create : bool
        Create the file if it does not exist; otherwise a missing file is an error.

    Raises
    ------
    InvalidInputError
        ``db`` is missing (``create=False``), a directory, not an SQLite file, another
        program's SQLite database, or written by a newer metricalc.
    DatabaseBusyError
        Another process held the write lock for longer than the busy timeout.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from metricalc.store.database import open_db
    >>> with tempfile.TemporaryDirectory() as tmp, open_db(pathlib.Path(tmp) / "r.sqlite") as c:
    ...     c.execute("PRAGMA journal_mode").fetchone()[0], c.execute("PRAGMA user_version").fetchone()[0]
    ('wal', 3)
    """  # noqa: E501
    path = _path(db)
    if not path.exists():
        if not create:
            raise InvalidInputError(
                f"no database at {path}: record an experiment or import a DescriptorWorkbench "
                "export first (or name the file with --db)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as error:
        raise InvalidInputError(f"cannot open database {path}: {error}") from error
    try:
        connection.execute("PRAGMA foreign_keys = ON")
        _use_wal(connection)
        _migrate(connection, path)
        yield connection
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            raise DatabaseBusyError(
                f"database {path} stayed locked by another writer for more than "
                f"{BUSY_TIMEOUT_S:g} s: {error}"
            ) from error
        raise InvalidInputError(f"database {path}: {error}") from error
    except sqlite3.DatabaseError as error:  # "file is not a database", corruption, constraints
        raise InvalidInputError(
            f"database {path}: {error}; expected a metricalc results database (SQLite)"
        ) from error
    finally:
        connection.close()
