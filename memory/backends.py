"""Which backend a part of a memory is on, and what that decides: opening the part (SQLite file or PostgreSQL
schema), whether it exists, its writer lock and who holds it.

Example:
    >>> from memento.memory.backends import open_database
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d, open_database(d, "memory.db") as db:
    ...     db.has_table("items")
    False
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from memento.memory.database import Database, WriterLock
from memento.memory.location import LocationLike, parse_location

__all__ = ["writer_lock_holder", "writer_active", "part_exists", "open_database", "writer_lock"]


def writer_lock_holder(location: LocationLike) -> str | None:
    """Who holds the writer lock of a memory part (``"pid 123 ..."``), or None: the directory's lock file, or the
    PostgreSQL session holding the part's advisory lock."""
    loc = parse_location(location)
    if loc.backend == "postgres":
        from memento.memory.advisory_lock import advisory_lock_holder
        from memento.memory.postgres_database import connect

        with contextlib.closing(connect(loc)) as conn:  # type: ignore[arg-type]
            holder = advisory_lock_holder(conn, loc)  # type: ignore[arg-type]
        return holder.removeprefix("memento ") if holder else None
    from memento.memory.dir_lock import lock_holder

    return lock_holder(loc.path)  # type: ignore[union-attr]


def writer_active(location: LocationLike) -> bool:
    """Whether a writer holds the writer lock of a memory part now (this process or another), found without taking
    it or creating anything: a reader's question, is a batch being written?"""
    loc = parse_location(location)
    if loc.backend == "postgres":
        return writer_lock_holder(loc) is not None
    from memento.memory.dir_lock import writer_active as directory_writer_active

    return directory_writer_active(loc.path)  # type: ignore[union-attr]


def part_exists(location: LocationLike, file_name: str, table: str, *, what: str = "memory") -> bool:
    """Whether the part at ``location`` holds ``table``: its SQLite file exists (the table is then assumed), or its
    PostgreSQL schema has the table. Nothing is created."""
    from memento.core.errors import DataError

    loc = parse_location(location)
    if loc.backend == "sqlite":
        return (loc.path / file_name).is_file()  # type: ignore[union-attr]
    try:
        with contextlib.closing(open_database(loc, file_name, read_only=True, what=what)) as db:
            return db.has_table(table)
    except DataError:
        return False


def open_database(
    location: LocationLike, file_name: str, *, read_only: bool = False, create: bool = True, what: str = "memory"
) -> Database:
    """Open a part of a memory on its backend.

    Args:
        location: The part (a directory, or a PostgreSQL location with its part).
        file_name: The SQLite file inside the directory (``memory.db``, ``cases.db``, ...); PostgreSQL ignores it.
        read_only: Refuse every write; the database (or schema) must exist and is never created.
        create: Create a missing directory (SQLite) or schema (PostgreSQL) when writable.
        what: How errors name the store ("memory", "case bank", ...).

    Raises:
        memento.core.errors.DataError: the part cannot be opened (missing when read-only, unreachable, not a database).
    """
    loc = parse_location(location)
    if loc.backend == "postgres":
        from memento.memory.postgres_database import PostgresDatabase

        return PostgresDatabase(loc, read_only=read_only, create=create, what=what)  # type: ignore[arg-type]
    from memento.memory.sqlite_database import SQLiteDatabase

    return SQLiteDatabase(loc, file_name, read_only=read_only, create=create, what=what)  # type: ignore[arg-type]


def writer_lock(
    location: LocationLike, *, wait: bool = True, on_wait: Callable[[str], None] | None = None
) -> WriterLock:
    """The writer lock of a memory part without opening its stores: the directory's OS lock
    (:class:`~memento.memory.dir_lock.DirectoryLock`) or the part's advisory lock
    (:class:`~memento.memory.advisory_lock.AdvisoryLock`)."""
    loc = parse_location(location)
    if loc.backend == "postgres":
        from memento.memory.advisory_lock import AdvisoryLock

        return AdvisoryLock(loc, wait=wait, on_wait=on_wait)  # type: ignore[arg-type]
    from memento.memory.dir_lock import DirectoryLock

    return DirectoryLock(loc.path, wait=wait, on_wait=on_wait)  # type: ignore[union-attr]
