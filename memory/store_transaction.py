"""The write handle of a memory transaction (:class:`Transaction`): every put and delete is logged in the change log
with the record before and after, secrets are scrubbed, writes are batched and checkpoints are written atomically
with them; and the rows the store returns (:class:`VersionInfo`, :class:`ItemRow`).

Example:
    >>> with store.transaction(batch=1) as tx:  # doctest: +SKIP
    ...     tx.put("craft", "c-1", {"id": "c-1", "text": "Search official sources first."})
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from memento.memory.database import Database

__all__ = ["Transaction", "VersionInfo", "ItemRow", "now_iso", "dumps"]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class VersionInfo(dict[str, Any]):
    """One version row: ``version``, ``parent``, ``batch``, ``end_seq``, ``note``, ``created_at``, ``status``."""


class ItemRow(dict[str, Any]):
    """One item row: ``store``, ``id``, ``data`` (the record as a dict) and the index columns (``dated``: the ISO
    date of its evidence, ``None`` when undated)."""


class Transaction:
    """The write handle inside :meth:`SQLiteStore.transaction`: every put/delete is logged with before/after."""

    def __init__(self, conn: Database, batch: int | None) -> None:
        self.conn = conn
        self.batch = batch
        self.changed = 0
        # the records the database transaction wrote or read (JSON; None: absent), shared by every Transaction
        # that joins it: writes go out batched (Database.defer), and a record written here is not read back
        self._known: dict[Any, str | None] = conn.tx_cache

    def checkpoint(self, key: str) -> Any:
        """A checkpoint value as seen inside this transaction (for a commit conditional on it), or None."""
        row = self.conn.execute("SELECT value FROM checkpoints WHERE key=?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def get(self, store: str, item_id: str) -> dict[str, Any] | None:
        """The stored record of an item, or None."""
        key = (store, item_id)
        if key not in self._known:
            # no deferred write touches an item this transaction has not seen: read without sending them
            row = self.conn.peek("SELECT data FROM items WHERE store=? AND id=?", key).fetchone()
            self._known[key] = None if row is None else str(row[0])
        known = self._known[key]
        return None if known is None else json.loads(known)

    def existing(self, store: str, item_id: str) -> dict[str, Any]:
        """The stored record of an item that must exist (``KeyError(item_id)`` when it does not)."""
        data = self.get(store, item_id)
        if data is None:
            raise KeyError(item_id)
        return data

    def put(
        self,
        store: str,
        item_id: str,
        data: dict[str, Any],
        *,
        text: str = "",
        entity: str = "",
        status: str = "active",
        weight: float = 0.0,
        tasks: list[str] | None = None,
        dated: str | None = None,
        op: str | None = None,
    ) -> None:
        """Insert or replace an item; logs ``add`` or ``update`` (or ``op``) with the before/after records.
        Secrets and URL passwords never enter memory (:func:`memento.utils.scrub.scrub_data`). ``dated``: the ISO date
        of
        the item's evidence (:func:`index_columns` computes it), ``None`` when undated."""
        from memento.utils.scrub import scrub, scrub_data

        data, text = scrub_data(data), scrub(text)
        before = self.get(store, item_id)
        if before == data:
            return
        task_col = "|" + "|".join(sorted(set(tasks or []))) + "|" if tasks else ""
        record = dumps(data)
        self.conn.defer(
            "INSERT INTO items (store, id, text, entity, status, weight, batch, tasks, data, dated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (store, id) DO UPDATE SET text=excluded.text, "
            "entity=excluded.entity, status=excluded.status, weight=excluded.weight, batch=excluded.batch, "
            "tasks=excluded.tasks, data=excluded.data, dated=excluded.dated",
            (store, item_id, text, entity, status, weight, int(self.batch or 0), task_col, record, dated),
        )
        self._known[(store, item_id)] = record
        self._log(op or ("add" if before is None else "update"), store, item_id, before, data)

    def delete(self, store: str, item_id: str, *, op: str = "delete") -> None:
        """Delete an item (logged with its last record)."""
        before = self.get(store, item_id)
        if before is None:
            return
        self.conn.defer("DELETE FROM items WHERE store=? AND id=?", (store, item_id))
        self._known[(store, item_id)] = None
        self._log(op, store, item_id, before, None)

    def set_checkpoint(self, key: str, value: Any, *, version: int | None = None) -> None:
        """Write a resumable checkpoint atomically with the memory changes of this transaction (secrets scrubbed:
        a trainer's checkpoint holds its runs, whose predictions may echo what a provider sent)."""
        from memento.utils.scrub import scrub, scrub_data

        self.conn.defer(
            "INSERT INTO checkpoints (key, version, value) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET version=excluded.version, value=excluded.value",
            (key, version, scrub(dumps(scrub_data(value)))),
        )

    def delete_checkpoints(self, prefix: str) -> None:
        """Delete every checkpoint whose key starts with ``prefix`` (inside this transaction)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        self.conn.execute("DELETE FROM checkpoints WHERE key LIKE ? ESCAPE '\\'", (escaped + "%",))

    def _log(self, op: str, store: str, item_id: str, before: Any, after: Any) -> None:
        self.conn.defer(
            "INSERT INTO changes (batch, op, store, item_id, before, after, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                self.batch,
                op,
                store,
                item_id,
                None if before is None else dumps(before),
                None if after is None else dumps(after),
                now_iso(),
            ),
        )
        self.changed += 1
