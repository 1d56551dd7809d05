"""A connection to the PostgreSQL server of a memory, and the advisory lock keys of its parts.

Example:
    >>> from memento.memory.postgres_connection import WRITER_LOCK, lock_key
    >>> lock_key("memento_x", WRITER_LOCK)[0] == WRITER_LOCK
    True
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from memento.core.errors import DataError
from memento.memory.location import PostgresLocation
from memento.utils.extras import require
from memento.utils.text import error_line

__all__ = ["TX_LOCK", "WRITER_LOCK", "lock_key", "connect", "escape_nul", "unescape_nul"]


#: the first half of the advisory lock keys memento takes; the second is a hash of the part's schema
TX_LOCK = 0x4D54  # ('MT') a write transaction of a part


WRITER_LOCK = 0x4D57  # ('MW') a part's writer lock (a training batch, a Q-gate update)


_SCHEMA_LOCK = 0x4D53  # ('MS') schema creation in a database


def lock_key(schema: str, kind: int = TX_LOCK) -> tuple[int, int]:
    """The advisory lock key ``(kind, object)`` of a memory part (both signed 32-bit, as PostgreSQL takes them)."""
    value = zlib.crc32(schema.encode())
    return kind, value - (1 << 32) if value >= 1 << 31 else value


#: PostgreSQL's TEXT cannot hold a NUL character (SQLite's can, and a page or a model's reply may carry one): text
#: travels escaped, NUL as U+FFFF "0" and U+FFFF itself (a Unicode noncharacter) as U+FFFF "1", so that every string
#: a store writes reads back unchanged on both backends, and equal strings stay equal in SQL comparisons
_ESCAPE = "\uffff"
_ESCAPED = re.compile("\uffff([01])")


def escape_nul(text: str) -> str:
    r"""``text`` as PostgreSQL stores it (see :func:`unescape_nul`).

    Example:
        >>> unescape_nul(escape_nul("a\x00b\uffff")) == "a\x00b\uffff"
        True
    """
    if "\x00" not in text and _ESCAPE not in text:
        return text
    return text.replace(_ESCAPE, _ESCAPE + "1").replace("\x00", _ESCAPE + "0")


def unescape_nul(text: str) -> str:
    """The string :func:`escape_nul` stored as ``text``."""
    if _ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else _ESCAPE, text)


def _register_text_adapters(conn: Any) -> None:
    """Every ``str`` parameter of ``conn`` is sent through :func:`escape_nul` and every text value read through
    :func:`unescape_nul` (psycopg's own dumper and loaders, extended)."""
    from psycopg.abc import Buffer
    from psycopg.types.string import StrDumperUnknown, TextLoader

    class NulSafeDumper(StrDumperUnknown):
        def dump(self, obj: str) -> Buffer | None:
            return super().dump(escape_nul(obj))

    class NulSafeLoader(TextLoader):
        def load(self, data: Any) -> Any:
            value = super().load(data)
            return unescape_nul(value) if isinstance(value, str) else value

    conn.adapters.register_dumper(str, NulSafeDumper)
    for name in ("text", "varchar", "bpchar"):
        conn.adapters.register_loader(name, NulSafeLoader)


def _server_message(exc: BaseException) -> str:
    """The server's message on one line, without its DETAIL/HINT lines."""
    lines = str(exc).strip().splitlines()
    return error_line(Exception(lines[0]), with_type=False) if lines else type(exc).__name__


def connect(location: PostgresLocation, *, what: str = "memory", application_name: str = "memento") -> Any:
    """An autocommit psycopg connection to ``location``'s database with its part's schema first on the path."""
    require("postgres", "a PostgreSQL memory")
    import psycopg

    try:
        conn = psycopg.connect(
            location.conninfo(),
            autocommit=True,
            connect_timeout=30,
            application_name=application_name[:63],
            options=f"-c search_path={location.schema}",
        )
    except psycopg.Error as exc:
        raise DataError(f"cannot open the {what} at {location.label}: {_server_message(exc)}") from None
    _register_text_adapters(conn)
    return conn
