"""The database under MEMENTO's memory: versions and an append-only change log, on SQLite or PostgreSQL.

Every memory store (M1 craft knowledge, M2/M3 rule books, M4 domain facts) keeps its items in one table
``items(store, id, ...)`` of the memory's database: ``<dir>/memory.db`` (SQLite, the default) or the ``memento``
schema of a PostgreSQL database (:mod:`memento.memory.database`: one SQL, two backends). Lexical retrieval over
item text and entity is one BM25 ranking on both backends (:class:`~memento.memory.text_index.TextIndex`, kept in
step with the table through the change log). Every write goes through :meth:`SQLiteStore.transaction`, which opens
one transaction (one writer at a time per memory, on both backends) and appends one row per changed item to the
change log ``changes`` (batch, op, store, item id, before JSON, after JSON). A crash inside the transaction leaves
the database at its previous state.

Versions: :meth:`SQLiteStore.commit_version` records the log position at the end of a training batch. The
state of any version is the current state with the later log entries undone in reverse order, so
:meth:`SQLiteStore.state_at` rebuilds it and :meth:`SQLiteStore.rollback` restores it by appending the
inverse changes (the log stays append-only: a rollback is itself audited).

Its parts live one per module: :mod:`~memento.memory.memory_schema` (the layout and migrations),
:mod:`~memento.memory.store_transaction` (the logged write handle) and :mod:`~memento.memory.item_columns` (index
columns, rule weights, token estimates).

Example:
    >>> import tempfile
    >>> from memento.memory.sqlite_store import SQLiteStore
    >>> db = SQLiteStore(tempfile.mkdtemp())
    >>> with db.transaction(batch=1) as tx:
    ...     tx.put("craft", "c-1", {"id": "c-1", "text": "Search official sources first."}, text="Search ...")
    >>> db.commit_version(batch=1, note="first batch")
    1
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memento.core.dating import DateFilter
from memento.core.errors import DataError, MemoryFrozenError
from memento.memory.backends import open_database
from memento.memory.database import Database, DatabaseError
from memento.memory.item_columns import estimate_tokens, fts_query, index_columns, item_date, rule_weight
from memento.memory.location import DirectoryLocation, LocationLike, PostgresLocation, parse_location
from memento.memory.memory_schema import DB_NAME, DROP_FTS, FTS_STORES, SCHEMA, SCHEMA_VERSION, memory_exists
from memento.memory.store_transaction import ItemRow, Transaction, VersionInfo, now_iso
from memento.memory.text_index import TextIndex, query_terms

__all__ = [
    "SQLiteStore",
    "Transaction",
    "VersionInfo",
    "ItemRow",
    "fts_query",
    "estimate_tokens",
    "rule_weight",
    "index_columns",
    "item_date",
    "FTS_STORES",
    "DB_NAME",
    "memory_exists",
    "SCHEMA_VERSION",
]

logger = logging.getLogger(__name__)


def _task_pattern(task_id: str) -> str:
    """The LIKE pattern matching a provenance column (``|t1|t2|``) that contains ``task_id`` literally."""
    escaped = task_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%|{escaped}|%"


class SQLiteStore:
    """The database of one memory (``<dir>/memory.db``, or the ``memento`` schema of a PostgreSQL database), safe to
    share between threads.

    One connection guarded by a re-entrant lock serves every thread; other processes (``memento memory stats``,
    another machine's run) read committed data while a trainer writes. ``frozen`` makes every write raise
    :class:`~memento.core.errors.MemoryFrozenError`. (The name is historical: the backend is chosen by the location.)

    A read-only handle is **pinned** to the version that is the head when it opens (:attr:`pinned`): every read
    sees exactly that version for the handle's whole life, whatever a writer commits meanwhile. The handle holds a
    read snapshot (:meth:`~memento.memory.database.Database.hold_snapshot`); when a writer is between versions (it
    holds the memory's writer lock and a training batch has written some of its phases), an SQLite snapshot is
    copied into memory and the changes made since the head version are undone there, exactly as :meth:`rollback`
    would (on PostgreSQL those changes stay visible, with a warning). Changes made after the head version with no
    writer at work (items written through the API without committing a version) are shown; the pin's ``end_seq``
    is then the last change-log entry.

    Args:
        directory: The memory's location: a directory (created when missing, unless ``read_only``) or a
            ``postgresql://`` location (:func:`~memento.memory.location.parse_location`).
        read_only: Open the database read-only, frozen and pinned.
    """

    def __init__(self, directory: LocationLike, *, read_only: bool = False) -> None:
        self.location = parse_location(directory)
        #: the directory (SQLite) or the PostgreSQL location: what messages name
        self.directory: Path | PostgresLocation = (
            self.location if isinstance(self.location, PostgresLocation) else self.location.path
        )
        self.frozen = read_only
        self.pinned: VersionInfo | None = None  # the version a read-only handle shows (None: a writable handle)
        self.path = self.location.path / DB_NAME if isinstance(self.location, DirectoryLocation) else None
        try:
            self.db = open_database(self.location, DB_NAME, read_only=read_only, what="memory")
        except DatabaseError as exc:
            raise DataError(f"{self.path or self.location.label} is not a usable memory database: {exc}") from None
        self.lock = self.db.lock
        self._text = TextIndex()
        try:
            if not read_only:
                self.db.create_schema(SCHEMA + (DROP_FTS if self.db.backend == "sqlite" else ""))
                self._migrate()
                self.db.execute(
                    "INSERT INTO meta (key, value) VALUES ('head_version', '0') ON CONFLICT (key) DO NOTHING"
                )
            self.db.execute("SELECT count(*) FROM items").fetchone()
            #: the ``dated`` column's expression in queries: NULL (undated) for a read-only database from before it
            self.dated_column = "dated" if self._has_column("items", "dated") else "NULL"
            if read_only:
                self._pin()
        except DatabaseError as exc:
            self.db.close()
            raise DataError(f"{self.path or self.location.label} is not a usable memory database: {exc}") from None

    # -- pinning (read-only handles) ---------------------------------------------------------------------
    def _pin(self) -> None:
        """Show the head version of this moment for the rest of this handle's life (see the class docstring)."""
        from memento.memory.backends import writer_active

        with self.lock:
            self.db.hold_snapshot()
            head = self.head_version
            info = VersionInfo(self.version_info(head))
            last = self.last_seq()
            if last > int(info["end_seq"]):
                if writer_active(self.location) and hasattr(self.db, "copy_into_memory"):
                    self._undo_into_memory(head)  # a trainer is between versions: undo its changes since the head
                else:  # no writer at work (items written without a version), or no private copy on this backend
                    if writer_active(self.location):
                        logger.warning("memory %s: a writer is between versions; this reader sees its changes",
                                       self.location.label)  # fmt: skip
                    info["end_seq"] = last
            self.pinned = info

    def _undo_into_memory(self, version: int) -> None:
        """Go on with an in-memory copy of the snapshot whose items are restored to ``version``.

        The restore appends its inverse changes to the copy's log (as :meth:`rollback` does), so every undo
        computation over the copy (:meth:`state_at`, diffs, the text index) stays valid. Nothing on disk changes.
        """
        self.db.copy_into_memory()  # type: ignore[attr-defined]  # SQLiteDatabase only (checked by the caller)
        self.frozen = False
        try:
            with self.transaction(batch=None) as tx:
                self._restore(tx, self.state_at(version), op="pin")
        finally:
            self.frozen = True
        self.db.execute("PRAGMA query_only=ON")

    @property
    def conn(self) -> Database:
        """The database connection (kept under this name for callers written against the SQLite store)."""
        return self.db

    def _has_column(self, table: str, column: str) -> bool:
        return column in self.db.columns(table)

    def _migrate(self) -> None:
        """Bring an older database to :data:`SCHEMA_VERSION`: schema 1 gains ``items.dated`` (its items are
        undated: they carry no evidence) and its index."""
        with self.db.transaction():  # one process at a time (concurrent CREATE INDEX IF NOT EXISTS can collide)
            if not self._has_column("items", "dated"):
                self.db.add_column("items", "dated", "TEXT")
                logger.info("memory %s: schema 1 migrated to %d (items.dated; old items are undated)", self.path,
                            SCHEMA_VERSION)  # fmt: skip
            self.db.execute("CREATE INDEX IF NOT EXISTS items_dated ON items (store, dated)")
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET "
                "value=excluded.value",
                (str(SCHEMA_VERSION),),
            )

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    def freeze(self) -> None:
        """Make this handle read-only: later writes raise MemoryFrozenError."""
        self.frozen = True

    def _check_writable(self) -> None:
        if self.frozen:
            raise MemoryFrozenError(f"memory at {self.location.label} is frozen (read-only); writes are not allowed")

    # -- reads -------------------------------------------------------------------------------------------
    def query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query under the lock and return all rows."""
        return self.db.query(sql, params)

    def meta(self, key: str, default: str | None = None) -> str | None:
        """A value of the ``meta`` table."""
        rows = self.query("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0][0] if rows else default

    @property
    def head_version(self) -> int:
        """The version the current state corresponds to (0: empty memory, nothing committed)."""
        return int(self.meta("head_version", "0") or 0)

    def versions(self) -> list[VersionInfo]:
        """Every version ever committed, oldest first (rolled-back ones have ``status='rolled_back'``)."""
        rows = self.query(
            "SELECT version, parent, batch, end_seq, note, created_at, status FROM versions ORDER BY version"
        )
        keys = ("version", "parent", "batch", "end_seq", "note", "created_at", "status")
        return [VersionInfo(zip(keys, row, strict=True)) for row in rows]

    def version_info(self, version: int) -> VersionInfo:
        """One version row (DataError when unknown; version 0 is the empty memory)."""
        if version == 0:
            return VersionInfo(version=0, parent=None, batch=0, end_seq=0, note="empty", created_at="", status="")
        for info in self.versions():
            if info["version"] == version:
                return info
        known = ", ".join(str(v["version"]) for v in self.versions()) or "none"
        raise DataError(f"unknown memory version {version} (known: {known})")

    def last_seq(self) -> int:
        """The sequence number of the last change-log entry (0 when empty)."""
        return int(self.query("SELECT coalesce(max(seq), 0) FROM changes")[0][0])

    def items(self, store: str | None = None, *, dates: DateFilter | None = None) -> list[ItemRow]:
        """Current items (of one store, or all), ordered by store and id; ``dates`` keeps those a task may see."""
        sql = f"SELECT store, id, status, weight, batch, data, {self.dated_column} FROM items"
        where, params = self._where(store=store, dates=dates)
        rows = self.query(sql + where + " ORDER BY store, id", params)
        return [
            ItemRow(store=s, id=i, status=st, weight=w, batch=b, data=json.loads(d), dated=dt_)
            for s, i, st, w, b, d, dt_ in rows
        ]

    def _where(self, *, store: str | None = None, dates: DateFilter | None = None) -> tuple[str, list[Any]]:
        conditions: list[str] = []
        params: list[Any] = []
        if store is not None:
            conditions.append("store=?")
            params.append(store)
        if dates is not None:
            clause, args = dates.sql(self.dated_column)
            if clause:
                conditions.append(clause)
                params.extend(args)
        return (" WHERE " + " AND ".join(conditions) if conditions else ""), params

    def hidden_counts(
        self, store: str, dates: DateFilter | None, *, statuses: tuple[str, ...] = ("active",)
    ) -> tuple[int, int]:
        """How many items of ``store`` (with one of ``statuses``) the filter keeps away from a task: ``(dated on or
        after the cutoff, undated dropped)``."""
        if dates is None:
            return 0, 0
        after, undated = dates.hidden_sql(self.dated_column)
        marks = ",".join("?" for _ in statuses)
        base = f"SELECT count(*) FROM items WHERE store=? AND status IN ({marks}) AND "
        counts = []
        for clause in (after, (undated, []) if undated else None):
            if clause is None:
                counts.append(0)
                continue
            condition, args = clause
            counts.append(int(self.query(base + condition, [store, *statuses, *args])[0][0]))
        return counts[0], counts[1]

    def state_at(self, version: int | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """``{(store, id): record}`` of a version (the head when None), rebuilt by undoing later changes."""
        with self.lock:
            state = {(row["store"], row["id"]): row["data"] for row in self.items()}
            if version is None:
                return state
            end_seq = int(self.version_info(version)["end_seq"])
            rows = self.db.execute(
                "SELECT store, item_id, before FROM changes WHERE seq > ? ORDER BY seq DESC", (end_seq,)
            ).fetchall()
        for store, item_id, before in rows:
            if before is None:
                state.pop((store, item_id), None)
            else:
                state[(store, item_id)] = json.loads(before)
        return state

    def changes(self, *, since_seq: int = 0, until_seq: int | None = None) -> list[dict[str, Any]]:
        """Change-log entries with ``since_seq < seq <= until_seq``, oldest first."""
        sql = "SELECT seq, batch, op, store, item_id, before, after, at FROM changes WHERE seq > ?"
        params: list[Any] = [since_seq]
        if until_seq is not None:
            sql += " AND seq <= ?"
            params.append(until_seq)
        keys = ("seq", "batch", "op", "store", "item_id", "before", "after", "at")
        out = []
        for row in self.query(sql + " ORDER BY seq", params):
            entry = dict(zip(keys, row, strict=True))
            for key in ("before", "after"):
                entry[key] = None if entry[key] is None else json.loads(entry[key])
            out.append(entry)
        return out

    def checkpoint(self, key: str) -> Any:
        """A checkpoint value written by :meth:`Transaction.set_checkpoint`, or None."""
        rows = self.query("SELECT value FROM checkpoints WHERE key=?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def checkpoints(self, prefix: str) -> dict[str, Any]:
        """All checkpoints whose key starts with ``prefix``."""
        rows = self.query("SELECT key, value FROM checkpoints WHERE key LIKE ? ORDER BY key", (prefix + "%",))
        return {key: json.loads(value) for key, value in rows}

    def fts_search(
        self,
        store: str,
        text: str,
        *,
        statuses: tuple[str, ...] = ("active",),
        columns: tuple[str, ...] = ("text", "entity"),
        limit: int = 20,
        exclude_task_id: str | None = None,
        dates: DateFilter | None = None,
    ) -> list[tuple[dict[str, Any], float]]:
        """Items of ``store`` matching the content words of ``text`` (BM25), best first, with their rank.

        The rank is the negated BM25 score (lower is better, as FTS5 ranks), computed by the in-process index
        (:mod:`~memento.memory.text_index`) the same way on every backend. ``exclude_task_id`` drops items whose
        provenance includes that task (a task never reads its own memory); ``dates`` keeps only items the task may
        see; the filters (status, provenance, dates) apply before the ``limit`` best are taken.
        """
        if not query_terms(text) or limit <= 0 or store not in FTS_STORES:
            return []
        with self.lock:
            self._sync_text()
            ranked = self._text.search(store, text, columns=columns)
        marks = ",".join("?" for _ in statuses)
        where = f"status IN ({marks})"
        extra: list[Any] = [*statuses]
        if exclude_task_id:
            where += " AND tasks NOT LIKE ? ESCAPE '\\'"
            extra.append(_task_pattern(exclude_task_id))
        if dates is not None:
            clause, args = dates.sql(self.dated_column)
            if clause:
                where += " AND " + clause
                extra.extend(args)
        out: list[tuple[dict[str, Any], float]] = []
        step = max(4 * limit, 256)
        for start in range(0, len(ranked), step):  # best first, until ``limit`` pass the filters
            chunk = ranked[start : start + step]
            ids = ",".join("?" for _ in chunk)
            rows = self.query(
                f"SELECT rowid, data FROM items WHERE rowid IN ({ids}) AND {where}", [r for r, _ in chunk] + extra
            )
            found = {int(rowid): data for rowid, data in rows}
            for rowid, score in chunk:
                if rowid in found:
                    out.append((json.loads(found[rowid]), -score))
                    if len(out) >= limit:
                        return out
        return out

    def _sync_text(self) -> None:
        """Bring the BM25 index up to the change log (under the lock): replay the items changed since the last
        sequence number it applied, or index every item on first use."""
        last = int(self.db.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0])
        index = self._text
        if index.seq == last and (last or index.ready):
            return
        if not index.ready or last < index.seq:
            index.clear()
            for rowid, store, item_id, text, entity in self.db.execute(
                "SELECT rowid, store, id, text, entity FROM items"
            ).fetchall():
                index.put(store, item_id, int(rowid), text, entity)
            index.seq, index.ready = last, True
            return
        changed = self.db.execute(
            "SELECT DISTINCT store, item_id FROM changes WHERE seq > ? AND seq <= ?", (index.seq, last)
        ).fetchall()
        by_store: dict[str, list[str]] = {}
        for store, item_id in changed:
            by_store.setdefault(store, []).append(item_id)
        for store, item_ids in by_store.items():
            for start in range(0, len(item_ids), 500):
                part = item_ids[start : start + 500]
                marks = ",".join("?" for _ in part)
                rows = self.db.execute(
                    f"SELECT rowid, id, text, entity FROM items WHERE store=? AND id IN ({marks})", (store, *part)
                ).fetchall()
                present = {item_id: (int(rowid), text, entity) for rowid, item_id, text, entity in rows}
                for item_id in part:
                    if item_id in present:
                        index.put(store, item_id, *present[item_id])
                    else:
                        index.remove(store, item_id)
        index.seq = last

    def top_by_weight(
        self,
        store: str,
        *,
        statuses: tuple[str, ...] = ("active",),
        limit: int = 20,
        exclude_task_id: str | None = None,
        dates: DateFilter | None = None,
    ) -> list[dict[str, Any]]:
        """The ``limit`` heaviest items of ``store`` with one of ``statuses`` (index scan, not a full sort), only
        those ``dates`` lets the task see."""
        marks = ",".join("?" for _ in statuses)
        sql = f"SELECT data FROM items WHERE store=? AND status IN ({marks})"
        params: list[Any] = [store, *statuses]
        if exclude_task_id:
            sql += " AND tasks NOT LIKE ? ESCAPE '\\'"
            params.append(_task_pattern(exclude_task_id))
        if dates is not None:
            clause, args = dates.sql(self.dated_column)
            if clause:
                sql += " AND " + clause
                params.extend(args)
        sql += " ORDER BY weight DESC LIMIT ?"
        params.append(limit)
        return [json.loads(row[0]) for row in self.query(sql, params)]

    def count(self, store: str, *, statuses: tuple[str, ...] | None = None) -> int:
        """How many items ``store`` holds (optionally only with some statuses)."""
        if statuses is None:
            return int(self.query("SELECT count(*) FROM items WHERE store=?", (store,))[0][0])
        marks = ",".join("?" for _ in statuses)
        rows = self.query(f"SELECT count(*) FROM items WHERE store=? AND status IN ({marks})", (store, *statuses))
        return int(rows[0][0])

    # -- writes ------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self, tx: Transaction | None = None, *, batch: int | None = None) -> Iterator[Transaction]:
        """Join the caller's transaction ``tx`` or open a new one."""
        if tx is not None:
            self._check_writable()
            yield tx
        else:
            with self.transaction(batch=batch) as own:
                yield own

    @contextlib.contextmanager
    def transaction(self, *, batch: int | None = None) -> Iterator[Transaction]:
        """One atomic update (rolled back when the block raises): one memory transaction at a time across
        processes, on both backends (:meth:`memento.memory.database.Database.transaction`)."""
        self._check_writable()
        with self.lock:
            try:
                with self.db.transaction():
                    yield Transaction(self.db, batch)
            except BaseException:
                self._text.clear()  # it may have indexed this transaction's rolled-back writes: rebuilt when next used
                raise

    def commit_version(self, *, batch: int | None, note: str = "", tx: Transaction | None = None) -> int:
        """Record the current state as a new version (number = highest ever + 1) and make it the head."""
        if tx is None:
            with self.transaction(batch=batch) as own:
                return self.commit_version(batch=batch, note=note, tx=own)
        from memento.utils.scrub import scrub

        conn = tx.conn
        version = int(conn.execute("SELECT coalesce(max(version), 0) FROM versions").fetchone()[0]) + 1
        parent = int(conn.execute("SELECT value FROM meta WHERE key='head_version'").fetchone()[0])
        end_seq = int(conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0])
        conn.execute(
            "INSERT INTO versions (version, parent, batch, end_seq, note, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (version, parent or None, batch, end_seq, scrub(note), now_iso()),
        )
        conn.execute("UPDATE meta SET value=? WHERE key='head_version'", (str(version),))
        return version

    def rollback(self, version: int) -> int:
        """Restore the state of ``version`` (appending the inverse changes) and make it the head.

        Later versions are marked ``rolled_back``; checkpoints tied to them are dropped, so a trainer
        re-learns those batches. Version 0 is the empty memory (every committed version is then marked rolled
        back, and a trainer starts over). A rolled-back version cannot be restored (DataError: retrain instead).
        Returns the number of items changed.
        """
        self._check_writable()
        info = self.version_info(version)
        if info["status"] == "rolled_back":  # its batch's checkpoints are gone: a trainer would re-apply it
            raise DataError(f"version {version} was rolled back; retrain instead")
        with self.transaction(batch=None) as tx:
            self._restore(tx, self.state_at(version), op="rollback")
            tx.conn.execute(
                "UPDATE versions SET status='rolled_back' WHERE version > ? AND status='committed'", (version,)
            )
            tx.conn.execute("DELETE FROM checkpoints WHERE version IS NULL OR version > ?", (version,))
            tx.conn.execute("UPDATE meta SET value=? WHERE key='head_version'", (str(info["version"]),))
            # the restored state is exactly the target version's: future undo computations stay valid
            return tx.changed

    def _restore(self, tx: Transaction, target: dict[tuple[str, str], dict[str, Any]], *, op: str) -> None:
        """Make the items exactly ``target`` (a version's ``state_at``) inside ``tx``, logging each change as ``op``."""
        current = {(row["store"], row["id"]): row["data"] for row in self.items()}
        for key in sorted(set(current) | set(target)):
            store, item_id = key
            want = target.get(key)
            if want is None:
                tx.delete(store, item_id, op=op)
            elif current.get(key) != want:
                tx.put(store, item_id, want, op=op, **index_columns(store, want))

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` ("ok" when the file is sound); on PostgreSQL "ok" when every table
        reads (the server guards its own pages)."""
        if self.db.backend != "sqlite":
            for table in ("meta", "items", "changes", "versions", "checkpoints"):
                self.query(f"SELECT count(*) FROM {table}")
            return "ok"
        return str(self.query("PRAGMA integrity_check")[0][0])
