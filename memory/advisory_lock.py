"""One writer per PostgreSQL memory part: a session advisory lock, the counterpart of the directory's OS lock.

:class:`AdvisoryLock` behaves as :class:`~memento.memory.dir_lock.DirectoryLock` does: a second process (on any
machine) waits for it, or with ``wait=False`` fails with one line naming the holder; it is re-entrant inside one
process from any thread; and it cannot go stale: the server releases it when the holder's connection ends (a crash,
a lost machine). The lock lives on a connection of its own whose ``application_name`` says who holds it (pid, host
and the command line, secrets scrubbed), which is how the message names the holder.

Example:
    >>> from memento.memory.location import parse_location
    >>> with AdvisoryLock(parse_location("postgresql://postgres@127.0.0.1:5432/team")) as lock:  # doctest: +SKIP
    ...     lock.held
    True
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from memento.core.errors import MemoryLockedError
from memento.memory.location import PostgresLocation
from memento.memory.postgres_connection import WRITER_LOCK, connect, lock_key

__all__ = ["AdvisoryLock", "advisory_lock_holder"]

logger = logging.getLogger(__name__)

_POLL_SECONDS = 0.1


class _Held:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.count = 0


_registry: dict[str, _Held] = {}
_registry_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}


def _key_lock(key: str) -> threading.Lock:
    with _registry_lock:
        return _key_locks.setdefault(key, threading.Lock())


def _holder_name() -> str:
    from memento.memory.dir_lock import _command_line

    return f"pid {os.getpid()} on {socket.gethostname()} ({_command_line()})"


def advisory_lock_holder(conn: Any, location: PostgresLocation) -> str | None:
    """Who holds the writer lock of ``location``'s part (its connection's application name), or None."""
    kind, obj = lock_key(location.schema, WRITER_LOCK)
    row = conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid::bigint = %s "
        "AND l.objid::bigint = %s AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (kind, obj & 0xFFFFFFFF),
    ).fetchone()
    return str(row[0]) if row and row[0] else None


class AdvisoryLock:
    """An exclusive, process-level writer lock on a PostgreSQL memory part, used as a context manager.

    Args:
        location: The part.
        wait: Wait for the holder (default) or raise :class:`~memento.core.errors.MemoryLockedError` naming it.
        on_wait: Called once with a one-line message when the lock is busy and the caller waits (default: logged).
    """

    def __init__(
        self, location: PostgresLocation, *, wait: bool = True, on_wait: Callable[[str], None] | None = None
    ) -> None:
        self.location = location
        self.wait = wait
        self.on_wait = on_wait
        self._entered = False
        self._key = f"{location.root}#{location.schema}"

    @property
    def held(self) -> bool:
        """Whether this process holds the lock now."""
        with _registry_lock:
            return self._key in _registry

    def acquire(self) -> AdvisoryLock:
        """Take the lock; returns self (see the class docstring)."""
        with _key_lock(self._key):
            with _registry_lock:
                held = _registry.get(self._key)
                if held is not None:
                    held.count += 1
                    self._entered = True
                    return self
            conn = connect(self.location, what="memory", application_name=f"memento {_holder_name()}")
            try:
                self._lock(conn)
            except BaseException:
                conn.close()
                raise
            held = _Held(conn)
            held.count = 1
            with _registry_lock:
                _registry[self._key] = held
            self._entered = True
            return self

    def _try(self, conn: Any) -> bool:
        kind, obj = lock_key(self.location.schema, WRITER_LOCK)
        return bool(conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (kind, obj)).fetchone()[0])

    def _lock(self, conn: Any) -> None:
        if self._try(conn):
            return
        holder = advisory_lock_holder(conn, self.location) or "another session"
        holder = holder.removeprefix("memento ")
        if not self.wait:
            raise MemoryLockedError(
                f"memory {self.location.label} is in use by {holder}; wait for it to finish or run without --no-wait"
            )
        (self.on_wait or logger.warning)(
            f"memory {self.location.label} is in use by {holder}; waiting for it to finish"
        )
        from memento.core.cancel import check_cancelled

        while True:  # poll, so a cancel (Ctrl-C) still stops a waiting writer
            check_cancelled()
            if self._try(conn):
                return
            time.sleep(_POLL_SECONDS)

    def release(self) -> None:
        """Leave the lock; the last exit of this process unlocks the part (closing its connection)."""
        if not self._entered:
            return
        self._entered = False
        with _registry_lock:
            held = _registry.get(self._key)
            if held is None:
                return
            held.count -= 1
            if held.count > 0:
                return
            del _registry[self._key]
        held.conn.close()  # the server releases a session's advisory locks when it ends

    def __enter__(self) -> AdvisoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
