"""Moving a memory between locations and backends (``memento memory copy SRC DST``), losslessly.

A memory has up to three parts: the MEMENTO stores at its root (items, the change log, versions, checkpoints), the
case bank in ``cbr`` (cases with their embeddings and generations, logged gate pairs, the Q-gate) and the trajectory
bank in ``jitmem`` (trajectories, records, pages stored once by hash, applied batch keys). :func:`copy_memory`
copies every row of every table of each part that exists, keeping row numbers (change-log sequence numbers, case
rowids, trajectory sequence numbers), so versions, rollbacks and resumable checkpoints mean the same in the copy.
The Q-gate moves between ``qgate.pt`` (a directory) and the ``gate_state`` table (PostgreSQL) byte for byte. Indexes
(FAISS, BM25) are not copied: they are mirrors of the tables and are rebuilt where the copy is opened.

Each part is read inside one transaction of the source (a consistent snapshot; writers of that part wait for it)
and written inside one transaction of the destination, which must hold no memory yet. Every table is then compared
row by row through a digest of its normalised content, and the copy is refused (an error, the destination left as
written for inspection) if one differs.

Example:
    >>> import tempfile
    >>> from memento.memory.memento_memory import MementoMemory
    >>> src, dst = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> _ = MementoMemory(src).facts.add("Nile", "The Nile flows north.")
    >>> report = copy_memory(src, dst)
    >>> [(part.part, part.rows["items"]) for part in report.parts]
    [('memory', 1)]
    >>> MementoMemory(dst).facts.search("Nile")
    ['[Nile] The Nile flows north.']
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memento.core.errors import DataError
from memento.memory.backends import open_database
from memento.memory.database import Database
from memento.memory.location import DirectoryLocation, Location, LocationLike, parse_location

__all__ = ["CopyReport", "PartCopy", "copy_memory", "gate_bytes", "table_digests"]

_CHUNK = 500


@dataclass(frozen=True)
class _Part:
    name: str  # "memory", "cbr", "jitmem"
    sub: str  # the part's sub-location ("" for the root)
    file_name: str  # the SQLite file
    tables: tuple[tuple[str, str], ...]  # (table, key column) in copy order


_PARTS = (
    _Part(
        "memory",
        "",
        "memory.db",
        (("meta", "key"), ("items", "rowid"), ("changes", "seq"), ("versions", "version"), ("checkpoints", "key")),
    ),
    _Part(
        "cbr",
        "cbr",
        "cases.db",
        (("meta", "key"), ("cases", "rid"), ("gate_pairs", "pid"), ("gate_state", "name"), ("changes", "seq")),
    ),
    _Part(
        "jitmem",
        "jitmem",
        "trajectories.sqlite3",
        (
            ("meta", "key"),
            ("trajectories", "seq"),
            ("records", "seq"),
            ("applied_batches", "key"),
            ("pages", "sha256"),
            ("evidence", "seq"),
            ("changes", "id"),
        ),
    ),
)
_MARKER = {"memory": "items", "cbr": "cases", "jitmem": "trajectories"}


@dataclass
class PartCopy:
    """What was copied of one part: rows per table, and whether a Q-gate file/row moved."""

    part: str
    source: str
    destination: str
    rows: dict[str, int] = field(default_factory=dict)
    gate: bool = False


@dataclass
class CopyReport:
    """Every part copied (in order: memory, cbr, jitmem), each verified identical."""

    source: str
    destination: str
    parts: list[PartCopy] = field(default_factory=list)


def _sub(location: Location, sub: str) -> Location:
    return location / sub if sub else location


def _open_if_present(location: Location, part: _Part) -> Database | None:
    if isinstance(location, DirectoryLocation) and not (location.path / part.file_name).is_file():
        return None
    try:
        db = open_database(location, part.file_name, read_only=True, what=part.name)
    except DataError:
        return None
    if not db.has_table(_MARKER[part.name]):
        db.close()
        return None
    return db


def _normal(value: Any) -> Any:
    """A value as both backends give it back (bytes for blobs, floats for reals)."""
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _rows(db: Database, table: str, columns: Sequence[str], key: str) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``table`` in key order, a chunk at a time (keyset pagination)."""
    cols = ", ".join(columns)
    last: Any = None
    while True:
        if last is None:
            chunk = db.query(f"SELECT {cols} FROM {table} ORDER BY {key} LIMIT ?", (_CHUNK,))
        else:
            chunk = db.query(f"SELECT {cols} FROM {table} WHERE {key} > ? ORDER BY {key} LIMIT ?", (last, _CHUNK))
        if not chunk:
            return
        yield [tuple(_normal(v) for v in row) for row in chunk]
        last = chunk[-1][columns.index(key)]


def _page_value(value: Any, backend: str) -> Any:
    """A page text as ``backend`` stores it (SQLite: text; PostgreSQL: UTF-8 bytes)."""
    if backend == "sqlite":
        return value.decode() if isinstance(value, bytes) else value
    return value.encode() if isinstance(value, str) else value


def _digest_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b": hashlib.sha256(value).hexdigest()}
    if isinstance(value, float):
        return {"f": value.hex()}
    return value


def table_digests(location: LocationLike) -> dict[str, dict[str, tuple[int, str]]]:
    """``{part: {table: (rows, sha256)}}`` over the normalised content of every table of every part present
    (page texts compared as text, so a directory and a PostgreSQL copy of one memory digest the same; the Q-gate,
    a file in a directory and a row in PostgreSQL, is not among them: :func:`gate_bytes`)."""
    loc = parse_location(location)
    out: dict[str, dict[str, tuple[int, str]]] = {}
    for part in _PARTS:
        db = _open_if_present(_sub(loc, part.sub), part)
        if db is None:
            continue
        try:
            out[part.name] = {
                table: _digest(db, table, key, part)
                for table, key in part.tables
                if db.has_table(table) and table != "gate_state"  # the gate: qgate.pt or a row, compared as bytes
            }
        finally:
            db.close()
    return out


def _digest(db: Database, table: str, key: str, part: _Part) -> tuple[int, str]:
    columns = sorted(db.columns(table))
    digest, count = hashlib.sha256(), 0
    for chunk in _rows(db, table, columns, key):
        for row in chunk:
            values = list(row)
            if part.name == "jitmem" and table == "pages":
                values[columns.index("text")] = _page_value(values[columns.index("text")], "sqlite")
            digest.update(json.dumps([_digest_value(v) for v in values], sort_keys=True, default=str).encode())
            count += 1
    return count, digest.hexdigest()


def _create_destination(part: _Part, dst: Location, src_db: Database) -> Database:
    """Open the destination part through its store (so its schema is exactly the store's) and return a connection."""
    meta = dict(src_db.query("SELECT key, value FROM meta"))
    if part.name == "memory":
        from memento.memory.sqlite_store import SQLiteStore

        SQLiteStore(dst).close()
    elif part.name == "cbr":
        from memento.memory.case_store import CaseStore

        info = json.loads(meta.get("embedder") or "{}")
        CaseStore(
            dst, embedder_name=str(info.get("name")), dim=int(info.get("dim", 0)), lock=threading.RLock(), frozen=False
        ).close()
    else:
        from memento.memory.trajectory_bank import TrajectoryBank

        bank = TrajectoryBank(dst, policy=meta.get("policy") or "success_only")
        bank._db.close()  # nothing to apply or index: the rows come next
    return open_database(dst, part.file_name, what=part.name)


def _check_empty(part: _Part, dst: Location) -> None:
    db = _open_if_present(dst, part)
    if db is None:
        return
    try:
        rows = db.query(f"SELECT count(*) FROM {_MARKER[part.name]}")[0][0]
    finally:
        db.close()
    if rows:
        raise DataError(f"{dst} already holds a {part.name} part ({rows} rows): copy into an empty location")


def _copy_gate(part_copy: PartCopy, src: Location, dst: Location, dst_db: Database) -> None:
    """qgate.pt <-> gate_state (a PostgreSQL bank's row is copied with the table)."""
    from memento.utils.files import atomic_write_bytes

    if isinstance(src, DirectoryLocation):
        path = src.path / "qgate.pt"
        if not path.is_file():
            return
        data = path.read_bytes()
        if isinstance(dst, DirectoryLocation):
            atomic_write_bytes(dst.path / "qgate.pt", data)
        else:
            with dst_db.transaction():
                dst_db.execute("INSERT INTO gate_state (name, version, state) VALUES ('qgate', 1, ?)", (data,))
        part_copy.gate = True
    elif isinstance(dst, DirectoryLocation):
        rows = dst_db.query("SELECT state FROM gate_state WHERE name='qgate'")
        if rows:
            atomic_write_bytes(dst.path / "qgate.pt", bytes(rows[0][0]))
            with dst_db.transaction():
                dst_db.execute("DELETE FROM gate_state")  # a directory bank keeps its gate in qgate.pt only
            part_copy.gate = True
    else:
        part_copy.gate = bool(dst_db.query("SELECT 1 FROM gate_state"))


def _reset_sequences(db: Database, part: _Part) -> None:
    """PostgreSQL identity columns continue after the copied row numbers (SQLite's AUTOINCREMENT already does)."""
    if db.backend != "postgres":
        return
    serials = {"items": "rowid", "cases": "rid", "gate_pairs": "pid", "trajectories": "seq"}
    for table, key in part.tables:
        column = serials.get(table, key if table == "changes" else None)
        if column is None:
            continue
        db.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
            f"coalesce((SELECT max({column}) FROM {table}), 0) + 1, false)"
        )


def _copy_part(part: _Part, src: Location, dst: Location) -> PartCopy | None:
    src_db = _open_if_present(src, part)
    if src_db is None:
        return None
    report = PartCopy(part.name, str(src), str(dst))
    try:
        _check_empty(part, dst)
        dst_db = _create_destination(part, dst, src_db)
        try:
            with src_db.snapshot(), dst_db.transaction():
                for table, key in part.tables:
                    if not src_db.has_table(table):
                        continue
                    columns = sorted(src_db.columns(table) & dst_db.columns(table))
                    marks = ", ".join("?" for _ in columns)
                    update = ", ".join(f"{c}=excluded.{c}" for c in columns if c != key)
                    conflict = f" ON CONFLICT ({key}) DO UPDATE SET {update}" if table == "meta" else ""
                    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}){conflict}"
                    count = 0
                    for chunk in _rows(src_db, table, columns, key):
                        if table == "pages":
                            at = columns.index("text")
                            chunk = [(*r[:at], _page_value(r[at], dst_db.backend), *r[at + 1 :]) for r in chunk]
                        dst_db.executemany(sql, chunk)
                        count += len(chunk)
                    report.rows[table] = count
                _reset_sequences(dst_db, part)
            if part.name == "cbr":
                _copy_gate(report, src, dst, dst_db)
        finally:
            dst_db.close()
    finally:
        src_db.close()
    return report


def copy_memory(source: LocationLike, destination: LocationLike) -> CopyReport:
    """Copy every part of the memory at ``source`` to ``destination`` (see the module docstring).

    Raises:
        DataError: nothing to copy at ``source``, the destination already holds a memory part, or the copy differs
            from its source (named by part and table).
    """
    src, dst = parse_location(source), parse_location(destination)
    if str(src) == str(dst):
        raise DataError(f"cannot copy a memory onto itself ({src})")
    report = CopyReport(str(src), str(dst))
    for part in _PARTS:
        copied = _copy_part(part, _sub(src, part.sub), _sub(dst, part.sub))
        if copied is not None:
            report.parts.append(copied)
    if not report.parts:
        raise DataError(f"no memory at {src} (no memory.db, cbr/ or jitmem/ part)")
    before, after = table_digests(src), table_digests(dst)
    for part_name, tables in before.items():
        for table, (rows, digest) in tables.items():
            got = after.get(part_name, {}).get(table)
            if got != (rows, digest):
                raise DataError(f"the copy of {part_name}/{table} differs from its source ({rows} rows at {src})")
    _check_gate(src, dst)
    return report


def gate_bytes(location: LocationLike) -> bytes | None:
    """The saved Q-gate of the memory at ``location`` (``cbr/qgate.pt`` or the ``gate_state`` row), or None."""
    return _gate_bytes(parse_location(location))


def _gate_bytes(location: Location) -> bytes | None:
    cbr = location / "cbr"
    if isinstance(cbr, DirectoryLocation):
        path = cbr.path / "qgate.pt"
        return path.read_bytes() if path.is_file() else None
    db = _open_if_present(cbr, _PARTS[1])
    if db is None:
        return None
    try:
        rows = db.query("SELECT state FROM gate_state WHERE name='qgate'")
        return bytes(rows[0][0]) if rows else None
    finally:
        db.close()


def _check_gate(src: Location, dst: Location) -> None:
    if _gate_bytes(src) != _gate_bytes(dst):
        raise DataError(f"the Q-gate copied to {dst} differs from its source")
