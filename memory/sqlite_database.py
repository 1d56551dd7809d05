"""The SQLite backend of the storage layer: one file per memory part, WAL, ``BEGIN IMMEDIATE`` transactions.

The default backend: embedded, nothing to start. A part is a directory holding one database file (``memory.db``,
``cbr/cases.db``, ``jitmem/trajectories.sqlite3``); its writer lock is the directory's OS lock
(:class:`~memento.memory.dir_lock.DirectoryLock`). A read-only open never creates or changes anything
(:func:`~memento.memory.sqlite_connect.connect_sqlite`).

Example:
    >>> import tempfile
    >>> from memento.memory.location import parse_location
    >>> db = SQLiteDatabase(parse_location(tempfile.mkdtemp()), "x.db", read_only=False)
    >>> db.backend, db.path.name
    ('sqlite', 'x.db')
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from memento.core.errors import DataError
from memento.memory.database import Cursor, Database, DatabaseError, IntegrityError, WriterLock
from memento.memory.location import DirectoryLocation
from memento.memory.sqlite_connect import connect_sqlite

__all__ = ["SQLiteDatabase"]


def _wrap(exc: sqlite3.Error) -> DatabaseError:
    if isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(str(exc))
    return DatabaseError(str(exc))


class SQLiteDatabase(Database):
    """One SQLite file of a memory directory (see the module docstring).

    Args:
        location: The directory.
        file_name: The database file inside it.
        read_only: Open read-only (the file must exist).
        create: Create the directory when missing (writable opens).
        what: How errors name the store.
    """

    backend = "sqlite"
    SNAPSHOT_PROBE = "SELECT count(*) FROM sqlite_master"
    TYPES = {
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "blob": "BLOB",
        "real": "REAL",
        "now": "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
    }

    def __init__(
        self, location: DirectoryLocation, file_name: str, *, read_only: bool, create: bool = True, what: str = "memory"
    ) -> None:
        super().__init__(location, read_only=read_only, what=what)
        self.directory = location.path
        self.path = self.directory / file_name
        if self.directory.exists() and not self.directory.is_dir():
            raise DataError(f"{what} directory {self.directory} is a file, not a directory")
        if self.path.is_dir():
            raise DataError(f"{self.path} is a directory, not a {what} database")
        if read_only and not self.path.is_file():
            raise DataError(f"no {what} at {self.directory} (missing {file_name})")
        if not read_only and create:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DataError(f"cannot create the {what} directory {self.directory}: {exc.strerror or exc}") from None
        try:
            self.conn: sqlite3.Connection | None = connect_sqlite(self.path, read_only=read_only)
        except sqlite3.Error as exc:
            raise DataError(f"cannot open the {what} database {self.path}: {exc}") from None
        try:
            self.conn.execute("PRAGMA busy_timeout=30000")
            if not read_only:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:  # not a database: the store says so in its words
            self.conn.close()
            raise DatabaseError(str(exc)) from None

    @property
    def db(self) -> sqlite3.Connection:
        if self.conn is None:
            raise DatabaseError(f"database {self.path} is closed")
        return self.conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        try:
            return self.db.execute(sql, tuple(params))
        except sqlite3.Error as exc:
            raise _wrap(exc) from exc

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self.db.executemany(sql, [tuple(r) for r in rows])
        except sqlite3.Error as exc:
            raise _wrap(exc) from exc

    def copy_into_memory(self) -> None:
        """Go on with a private in-memory copy of what this connection reads now (its held snapshot, if any): a
        pinned reader then changes its copy, never the file. The copy accepts writes until ``PRAGMA
        query_only=ON``."""
        with self.lock:
            copy = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            try:
                self.db.backup(copy)  # within this connection's read snapshot
            except sqlite3.Error as exc:
                copy.close()
                raise _wrap(exc) from exc
            self.db.close()
            self.conn = copy
            self.held_snapshot = False

    def _begin(self) -> None:
        self.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        self.execute("COMMIT")

    def _rollback(self) -> None:
        if self.conn is not None and self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def create_schema(self, ddl: str) -> None:
        with self.lock:
            try:
                self.db.executescript(self.ddl(ddl))
            except sqlite3.Error as exc:
                raise _wrap(exc) from exc

    def has_table(self, table: str) -> bool:
        rows = self.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,))
        return bool(rows)

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.query(f"PRAGMA table_info({table})")}

    def writer_lock(self, *, wait: bool = True, on_wait: Callable[[str], None] | None = None) -> WriterLock:
        from memento.memory.dir_lock import DirectoryLock

        return DirectoryLock(self.directory, wait=wait, on_wait=on_wait)

    def size_bytes(self) -> int:
        files = (self.path.with_name(self.path.name + suffix) for suffix in ("", "-wal", "-shm"))
        return sum(p.stat().st_size for p in files if p.is_file())
