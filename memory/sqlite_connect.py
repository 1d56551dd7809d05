"""The one way memento's stores open an SQLite database: read-write, or read-only without leaving side files behind.

A WAL database opened with ``mode=ro`` in a writable directory leaves its ``-wal`` and ``-shm`` files behind: a
read-only connection may not checkpoint, so the last one to close cannot remove them. A read-only open of a
writable file therefore connects ``mode=rw`` with ``PRAGMA query_only=ON``: every write is refused just the same,
and closing the last connection checkpoints and removes the side files. Only a file (or directory) the process
cannot write falls back to ``mode=ro``. The case bank, the trajectory bank and the memory database all connect here.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from memento.memory.sqlite_connect import connect_sqlite
    >>> db = Path(tempfile.mkdtemp()) / "x.db"
    >>> writer = connect_sqlite(db)
    >>> _ = writer.executescript("PRAGMA journal_mode=WAL; CREATE TABLE t (x)")
    >>> writer.close()
    >>> reader = connect_sqlite(db, read_only=True)
    >>> reader.execute("SELECT count(*) FROM t").fetchone()
    (0,)
    >>> reader.close()
    >>> sorted(p.name for p in db.parent.iterdir())
    ['x.db']
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["connect_sqlite"]


def connect_sqlite(
    path: str | os.PathLike[str], *, read_only: bool = False, timeout: float = 30.0
) -> sqlite3.Connection:
    """A connection to the database at ``path``, shareable between threads, in autocommit mode.

    Args:
        path: The database file. Created when missing unless ``read_only``.
        read_only: Refuse every write. The file must exist; it is never created, and no ``-wal``/``-shm`` files
            are left behind in a writable directory once the last connection closes.
        timeout: Seconds to wait for another writer's lock (SQLite's busy timeout).

    Raises:
        sqlite3.Error: The file cannot be opened (callers turn it into their one-line error).
    """
    path = Path(path)
    if not read_only:
        return sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=timeout)
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    uri = f"{path.resolve().as_uri()}?mode={'rw' if writable else 'ro'}"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=timeout)
    if writable:
        try:
            conn.execute("PRAGMA query_only=ON")
        except BaseException:
            conn.close()
            raise
    return conn
