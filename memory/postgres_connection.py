"""A connection to the PostgreSQL server of a memory, and the advisory lock keys of its parts.

Example:
    >>> from memento.memory.postgres_connection import WRITER_LOCK, lock_key
    >>> lock_key("memento_x", WRITER_LOCK)[0] == WRITER_LOCK
    True
"""

from __future__ import annotations

import zlib
from typing import Any

from memento.core.errors import DataError
from memento.memory.location import PostgresLocation
from memento.utils.extras import require
from memento.utils.text import error_line

__all__ = ["TX_LOCK", "WRITER_LOCK", "lock_key", "connect"]


#: the first half of the advisory lock keys memento takes; the second is a hash of the part's schema
TX_LOCK = 0x4D54  # ('MT') a write transaction of a part


WRITER_LOCK = 0x4D57  # ('MW') a part's writer lock (a training batch, a Q-gate update)


_SCHEMA_LOCK = 0x4D53  # ('MS') schema creation in a database


def lock_key(schema: str, kind: int = TX_LOCK) -> tuple[int, int]:
    """The advisory lock key ``(kind, object)`` of a memory part (both signed 32-bit, as PostgreSQL takes them)."""
    value = zlib.crc32(schema.encode())
    return kind, value - (1 << 32) if value >= 1 << 31 else value


def _server_message(exc: BaseException) -> str:
    """The server's message on one line, without its DETAIL/HINT lines."""
    lines = str(exc).strip().splitlines()
    return error_line(Exception(lines[0]), with_type=False) if lines else type(exc).__name__


def connect(location: PostgresLocation, *, what: str = "memory", application_name: str = "memento") -> Any:
    """An autocommit psycopg connection to ``location``'s database with its part's schema first on the path."""
    require("postgres", "a PostgreSQL memory")
    import psycopg

    try:
        return psycopg.connect(
            location.conninfo(),
            autocommit=True,
            connect_timeout=30,
            application_name=application_name[:63],
            options=f"-c search_path={location.schema}",
        )
    except psycopg.Error as exc:
        raise DataError(f"cannot open the {what} at {location.label}: {_server_message(exc)}") from None
