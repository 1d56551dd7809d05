"""Where a memory lives: a directory (SQLite, the default) or a PostgreSQL database, named by one string.

Every way of naming a memory (``--memory``, ``[memory] dir`` / ``MEMENTO_MEMORY_DIR``, ``build_program(memory_dir=)``,
``memento memory copy SRC DST``) goes through :func:`parse_location`; the form decides the backend:

* ``postgresql://[user@]host[:port]/database`` (or ``postgres://``) is a PostgreSQL database. The password is never
  part of a location (it would end up in saved settings, logs and run records): it comes from ``PGPASSWORD`` or
  ``~/.pgpass``, and a location that carries one is refused with one line that does not repeat it. libpq
  parameters may follow as a query (``?sslmode=require``).
* anything else is a directory (``~`` expanded); another ``scheme://`` is refused rather than becoming a directory.

A memory has parts: the MEMENTO stores at its root, the case bank in ``cbr`` and the trajectory bank in ``jitmem``.
``location / "cbr"`` names a part: a sub-directory, or a named part of the same database (a PostgreSQL schema;
written ``postgresql://host/db/cbr``).

Example:
    >>> from memento.memory.location import parse_location
    >>> loc = parse_location("postgresql://alice@db.internal:5433/team")
    >>> (loc.backend, loc.host, loc.port, loc.database, str(loc / "cbr"))
    ('postgres', 'db.internal', 5433, 'team', 'postgresql://alice@db.internal:5433/team/cbr')
    >>> parse_location("runs/memory").backend
    'sqlite'
    >>> parse_location("postgresql://alice:secret@db/team")
    Traceback (most recent call last):
    ...
    memento.core.errors.ConfigError: a memory location must not contain a password: use PGPASSWORD or ~/.pgpass
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from pydantic import BeforeValidator, PlainSerializer

from memento.core.errors import ConfigError

__all__ = [
    "DirectoryLocation",
    "Location",
    "LocationLike",
    "MemoryLocation",
    "PostgresLocation",
    "is_postgres",
    "parse_location",
]

Backend = Literal["sqlite", "postgres"]
_SCHEMES = ("postgresql", "postgres")
_PART = re.compile(r"^[A-Za-z0-9_.-]+$")
_REFUSED_PARAMS = frozenset({"password", "passfile"})  # a password never travels in a location


@dataclass(frozen=True)
class DirectoryLocation:
    """A memory in a local directory: one SQLite file per part (``memory.db``, ``cbr/cases.db``, ...)."""

    path: Path
    backend: Backend = field(default="sqlite", init=False)

    def __truediv__(self, part: str) -> DirectoryLocation:
        return DirectoryLocation(self.path / part)

    def __str__(self) -> str:
        return str(self.path)

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def label(self) -> str:
        """How messages name this location."""
        return str(self.path)

    def exists(self) -> bool:
        """Whether the directory exists (a memory may still be empty)."""
        return self.path.exists()


@dataclass(frozen=True)
class PostgresLocation:
    """A memory in a PostgreSQL database; ``parts`` name the part (a schema of that database).

    ``schema`` is where the part's tables live: ``memento`` for the root, ``memento_cbr`` for ``/cbr``; a long or
    odd part name is shortened with a hash (PostgreSQL names are at most 63 bytes).
    """

    host: str
    database: str
    user: str | None = None
    port: int | None = None
    params: tuple[tuple[str, str], ...] = ()
    parts: tuple[str, ...] = ()
    backend: Backend = field(default="postgres", init=False)

    def __truediv__(self, part: str) -> PostgresLocation:
        pieces = [p for p in str(part).split("/") if p]
        for piece in pieces:
            if not _PART.match(piece) or piece in (".", ".."):
                raise ConfigError(f"memory part {piece!r}: use letters, digits, '_', '-' and '.'")
        return PostgresLocation(self.host, self.database, self.user, self.port, self.params, (*self.parts, *pieces))

    @property
    def root(self) -> PostgresLocation:
        """The database's memory root (no part)."""
        return PostgresLocation(self.host, self.database, self.user, self.port, self.params)

    def __str__(self) -> str:
        user = f"{quote(self.user, safe='')}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port else ""
        path = "/".join([quote(self.database, safe=""), *self.parts])
        query = f"?{urlencode(self.params)}" if self.params else ""
        return f"postgresql://{user}{host}{port}/{path}{query}"

    @property
    def label(self) -> str:
        """How messages name this location (never with a password: a location cannot hold one)."""
        return str(self)

    @property
    def schema(self) -> str:
        """The PostgreSQL schema of this part."""
        name = "_".join(["memento", *(re.sub(r"[^a-z0-9_]", "_", p.lower()) for p in self.parts)])
        if len(name) > 63 or name != "_".join(["memento", *self.parts]):
            digest = hashlib.sha1("/".join(self.parts).encode()).hexdigest()[:10]
            name = f"{name[:50]}_{digest}"
        return name

    def conninfo(self) -> str:
        """The libpq connection string (password: PGPASSWORD or ~/.pgpass, read by libpq itself)."""
        items: list[tuple[str, str]] = [("host", self.host), ("dbname", self.database)]
        if self.user:
            items.append(("user", self.user))
        if self.port:
            items.append(("port", str(self.port)))
        items += list(self.params)
        return " ".join(f"{key}='{_quote_conninfo(value)}'" for key, value in items)

    def exists(self) -> bool:
        """Always true: whether the database holds a memory is the stores' question."""
        return True


def _quote_conninfo(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


Location = DirectoryLocation | PostgresLocation
LocationLike = str | os.PathLike[str] | DirectoryLocation | PostgresLocation


def is_postgres(value: LocationLike | None) -> bool:
    """Whether ``value`` names a PostgreSQL memory (without validating it)."""
    if isinstance(value, PostgresLocation):
        return True
    if value is None or isinstance(value, DirectoryLocation):
        return False
    text = os.fspath(value) if not isinstance(value, str) else value
    return _scheme_of(text) in _SCHEMES


def _scheme_of(text: str) -> str | None:
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):/", text)
    return match.group(1).lower() if match else None


def parse_location(value: LocationLike) -> Location:
    """The location ``value`` names: a :class:`PostgresLocation` for a ``postgresql://`` DSN, else a directory.

    Raises:
        ConfigError: a password in the DSN (the message never repeats it), another URL scheme, or a malformed DSN.
    """
    if isinstance(value, DirectoryLocation | PostgresLocation):
        return value
    text = value if isinstance(value, str) else os.fspath(value)
    text = text.strip()
    scheme = _scheme_of(text)
    if scheme is None:
        if not text:
            raise ConfigError("a memory location is empty: give a directory or postgresql://host/database")
        return DirectoryLocation(Path(text).expanduser())
    if scheme not in _SCHEMES:
        if len(scheme) == 1:  # a Windows drive letter such as C:/ is a directory
            return DirectoryLocation(Path(text).expanduser())
        raise ConfigError(f"memory location scheme {scheme!r} is not supported: use a directory or postgresql://")
    rest = text[len(scheme) + 1 :]
    if not rest.startswith("//"):  # a DSN that went through Path() lost a slash: postgresql:/host/db
        rest = "/" + rest
    return _parse_dsn("postgresql:" + rest)


def _parse_dsn(text: str) -> PostgresLocation:
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError as exc:
        raise ConfigError(f"malformed PostgreSQL location: {str(exc).splitlines()[0]}") from None
    if url.password is not None or "password" in (url.username or ""):
        raise ConfigError("a memory location must not contain a password: use PGPASSWORD or ~/.pgpass")
    params = tuple(parse_qsl(url.query, keep_blank_values=True))
    if any(key.lower() in _REFUSED_PARAMS for key, _ in params):
        raise ConfigError("a memory location must not contain a password: use PGPASSWORD or ~/.pgpass")
    if url.fragment:
        raise ConfigError("a PostgreSQL memory location takes no #fragment")
    host = url.hostname or ""
    if not host:
        raise ConfigError("a PostgreSQL memory location needs a host: postgresql://[user@]host[:port]/database")
    pieces = [unquote(p) for p in url.path.split("/") if p]
    if not pieces:
        raise ConfigError("a PostgreSQL memory location needs a database: postgresql://[user@]host[:port]/database")
    location = PostgresLocation(
        host=host,
        database=pieces[0],
        user=unquote(url.username) if url.username else None,
        port=port,
        params=params,
    )
    return location / "/".join(pieces[1:]) if len(pieces) > 1 else location


#: a settings field holding a memory location (``[memory] dir``): parsed on assignment, written back as its string
MemoryLocation = Annotated[
    DirectoryLocation | PostgresLocation,
    BeforeValidator(parse_location),
    PlainSerializer(str, return_type=str),
]
