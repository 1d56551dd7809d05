"""The storage layer under memento's stores: one small connection API, two backends (SQLite and PostgreSQL).

The MEMENTO memory (``memory.db``), the case bank (``cbr``) and the trajectory bank (``jitmem``) each open a
:class:`Database` on a part of a memory location (:mod:`memento.memory.location`) and speak one SQL: ``?``
placeholders, ``ON CONFLICT`` upserts and ``RETURNING``, which both backends run; table definitions use the
placeholders of :meth:`Database.ddl` (``{serial}``, ``{blob}``, ``{real}``, ``{now}``) for the few types they spell
differently. Each backend lives in its own module:

* :class:`~memento.memory.sqlite_database.SQLiteDatabase`: one file per part (WAL), embedded, nothing to start.
* :class:`~memento.memory.postgres_database.PostgresDatabase`: one schema per part of a shared database (psycopg 3,
  the ``[postgres]`` extra).

The guarantees are the same on both. :meth:`Database.transaction` is one atomic write: SQLite's ``BEGIN IMMEDIATE``
admits one writer per file, and PostgreSQL takes a transaction-level advisory lock on the part at ``BEGIN``, so
write transactions of a part run one at a time, in the order they commit, and sequence numbers (``seq``, ``rid``)
grow in commit order on both. The lock is held only for the transaction: appends from many processes interleave and
none is lost. What must be serial over longer spans (a training batch's commit, a Q-gate update, rollback) takes the
part's writer lock (:meth:`Database.writer_lock`: the OS lock of the directory, or a session advisory lock). Readers
see committed data only.

Example:
    >>> import tempfile
    >>> from memento.memory.backends import open_database
    >>> db = open_database(tempfile.mkdtemp(), "demo.db")
    >>> db.create_schema("CREATE TABLE IF NOT EXISTS t (rid {serial}, x TEXT NOT NULL)")
    >>> with db.transaction():
    ...     rid = db.execute("INSERT INTO t (x) VALUES (?) RETURNING rid", ("a",)).fetchone()[0]
    >>> db.query("SELECT rid, x FROM t")
    [(1, 'a')]
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from memento.memory.location import Location

__all__ = [
    "Cursor",
    "Database",
    "DatabaseError",
    "IntegrityError",
    "WriterLock",
]


class DatabaseError(Exception):
    """A backend error (the driver's exception is the cause); stores turn it into their one-line errors."""


class IntegrityError(DatabaseError):
    """A constraint was violated (a duplicate key)."""


class Cursor(Protocol):
    """What :meth:`Database.execute` returns (the driver's cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class WriterLock(Protocol):
    """One writer per memory part across processes; re-entrant within a process; a context manager."""

    @property
    def held(self) -> bool: ...

    def acquire(self) -> Any: ...

    def release(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


class Database(abc.ABC):
    """A connection to one part of a memory, shared by the threads of one store object.

    Attributes:
        location: The part's location.
        backend: ``"sqlite"`` or ``"postgres"``.
        read_only: Every write is refused by the database itself.
        lock: Guards the connection (a store holds it around a transaction and its reads).
    """

    backend: str = ""
    #: spellings of the DDL placeholders
    TYPES: dict[str, str] = {}

    def __init__(self, location: Location, *, read_only: bool, what: str = "memory") -> None:
        self.location = location
        self.read_only = read_only
        self.what = what
        self.lock = threading.RLock()
        self.conn: Any = None  # the driver's connection (None once closed)
        self._in_tx = 0
        #: what the writers of the open transaction keep about it (emptied when it ends)
        self.tx_cache: dict[Any, Any] = {}

    # -- statements ----------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement (``?`` placeholders); driver errors become :class:`DatabaseError`."""

    @abc.abstractmethod
    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters."""

    def insert_returning(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[Any]:
        """Run an ``INSERT ... RETURNING x`` once per row of parameters and return each row's ``x``, in order (one
        batch, not one round trip per row, on PostgreSQL)."""
        return [self.execute(sql, row).fetchone()[0] for row in rows]

    def defer(self, sql: str, params: Sequence[Any] = ()) -> None:
        """A write inside :meth:`transaction` whose outcome nobody reads (an upsert, a change-log row): sent with
        the next statement of this connection or at commit, consecutive writes of one statement as one batch (one
        round trip on PostgreSQL instead of one each), in the order they were made, so every read through this
        connection sees them. Outside a transaction, or on SQLite (no round trips), it runs at once."""
        self.execute(sql, params)

    def peek(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """A read that no deferred write can change (the caller knows, e.g. a row none of them touches): it runs
        without sending them first."""
        return self.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """All rows of a read, under the connection's lock."""
        with self.lock:
            return [tuple(row) for row in self.execute(sql, params).fetchall()]

    def ddl(self, template: str) -> str:
        """A table definition with the backend's spelling of ``{serial}``, ``{blob}``, ``{real}`` and ``{now}``."""
        return template.format(**self.TYPES)

    # -- transactions ---------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One atomic write, one at a time per part across processes (see the module docstring).

        Nested use joins the outer transaction. Rolled back when the block raises.
        """
        with self.lock:
            if self._in_tx:
                self._in_tx += 1
                try:
                    yield self
                finally:
                    self._in_tx -= 1
                return
            self._begin()
            self._in_tx = 1
            self.tx_cache = {}
            try:
                yield self
            except BaseException:
                self._in_tx = 0
                self.tx_cache = {}
                self._rollback()
                raise
            self._in_tx = 0
            self.tx_cache = {}
            _crash_point(self)
            self._commit()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Database]:
        """Reads that see one consistent state of the part (a read transaction; writers are not blocked). On a
        connection that holds its snapshot (:meth:`hold_snapshot`) the reads simply join it."""
        with self.lock:
            if self.held_snapshot:
                yield self
                return
            self.execute(self.SNAPSHOT)
            self._in_tx = 1
            try:
                yield self
            finally:
                self._in_tx = 0
                self._rollback()

    def hold_snapshot(self) -> None:
        """Pin this read-only connection to the part as it is now, for the rest of its life: a read transaction left
        open (SQLite's WAL snapshot; PostgreSQL's ``REPEATABLE READ``), so what writers commit from now on stays
        invisible to it. A test-time reader of a memory a trainer keeps writing holds one."""
        with self.lock:
            self.execute(self.SNAPSHOT)
            self.execute(self.SNAPSHOT_PROBE).fetchall()  # the snapshot is taken at the first read
            self.held_snapshot = True

    #: the statement that opens a read transaction
    SNAPSHOT = "BEGIN"
    #: a first read inside it (which fixes the snapshot)
    SNAPSHOT_PROBE = "SELECT 1"
    held_snapshot = False

    @property
    def in_transaction(self) -> bool:
        """Whether this connection is inside :meth:`transaction`."""
        return self._in_tx > 0

    @abc.abstractmethod
    def _begin(self) -> None: ...

    @abc.abstractmethod
    def _commit(self) -> None: ...

    @abc.abstractmethod
    def _rollback(self) -> None: ...

    # -- schema --------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_schema(self, ddl: str) -> None:
        """Run table definitions (``IF NOT EXISTS``, with :meth:`ddl` placeholders) once per part, safely when
        several processes open the same part at once."""

    @abc.abstractmethod
    def has_table(self, table: str) -> bool:
        """Whether the part holds ``table``."""

    @abc.abstractmethod
    def columns(self, table: str) -> set[str]:
        """The column names of ``table`` (empty when it does not exist)."""

    def add_column(self, table: str, column: str, definition: str) -> None:
        """Add a column when missing (a migration; ``definition`` may use :meth:`ddl` placeholders). Checked and
        added inside a write transaction, so processes opening a new part at once add it once (checked outside
        one, two of them would both see it missing and the second ``ALTER TABLE`` would fail)."""
        with self.transaction():
            if column not in self.columns(table):
                self.execute(f"ALTER TABLE {table} ADD COLUMN {column} {self.ddl(definition)}")

    # -- locks and lifecycle ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def writer_lock(self, *, wait: bool = True, on_wait: Callable[[str], None] | None = None) -> WriterLock:
        """The part's writer lock (not taken yet)."""

    @abc.abstractmethod
    def size_bytes(self) -> int:
        """The part's size on disk (files, or the schema's tables with their indexes and TOAST)."""

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.conn is None


_commits: dict[str, int] = {}
_commits_lock = threading.Lock()


def _crash_point(db: Database) -> None:
    """A test hook: ``MEMENTO_TEST_CRASH_AT_COMMIT="memory:3"`` ends the process (exit 70, no cleanup) just before
    the 3rd commit of a ``memory`` transaction (``case bank``, ``trajectory bank``: the other parts), every write of
    that transaction sent but not committed, as a crash or a lost machine would."""
    spec = os.environ.get("MEMENTO_TEST_CRASH_AT_COMMIT")
    if not spec:
        return
    part, _, nth = spec.rpartition(":")
    if part != db.what:
        return
    with _commits_lock:
        _commits[db.what] = _commits.get(db.what, 0) + 1
        if _commits[db.what] == int(nth):
            db.execute("SELECT 1")  # the deferred writes reach the server first
            os._exit(70)


#: names that lived here until the backend choice moved to :mod:`memento.memory.backends` (it imports this module):
#: served from there for one release, with a DeprecationWarning naming the new path
_MOVED = {"open_database", "part_exists", "writer_lock", "writer_lock_holder", "writer_active"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"memento.memory.database.{name} moved to memento.memory.backends.{name}", DeprecationWarning, stacklevel=2
        )
        # a forward of a moved name, resolved when asked for: not an import of this module's (that would be a cycle)
        return getattr(importlib.import_module("memento.memory.backends"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
