"""M1 craft knowledge: free-text research-strategy insights with provenance (MEMENTO §3.4).

Entries are learned without labels and grow by deltas (Phase A: each valid run's insights are canonicalised into the
store one by one: added, or merged into / edited with the entry they duplicate; the store is never rewritten
wholesale and has no entry cap, the injection budget selects); an entry that several runs of a batch show to be wrong
is retired (:meth:`CraftKnowledge.remove`, kept in the change log) and read by ``Decompose`` and ``Reflect``.
:meth:`CraftKnowledge.relevant` keeps what applies to the current task: a lexical prefilter (SQLite FTS5) plus the
most supported entries, optionally re-ranked by embedding similarity, then the relevance stage it is handed (the
learning module's :class:`memento.signatures.judge_relevance.JudgeRelevance` predictor).

Example:
    >>> import tempfile
    >>> from memento.memory.sqlite_store import SQLiteStore
    >>> craft = CraftKnowledge(SQLiteStore(tempfile.mkdtemp()))
    >>> _ = craft.add("For court cases, read the docket before news coverage.", provenance=["t1"])
    >>> [e.text for e in craft.relevant("Who won the court case?")]
    ['For court cases, read the docket before news coverage.']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memento.core.dating import DateFilter
from memento.core.types import CraftEntry, EvidenceRecord, new_id
from memento.memory.sqlite_store import SQLiteStore, Transaction, index_columns

__all__ = ["CraftKnowledge"]

logger = logging.getLogger(__name__)


class CraftKnowledge:
    """The M1 store inside a memory database (store name ``"craft"``).

    Args:
        db: The memory database.
        embedder: Optional :class:`memento.memory.embedder.Embedder` used to re-rank the prefiltered entries.
    """

    store = "craft"

    def __init__(self, db: SQLiteStore, *, embedder: Any = None) -> None:
        self.db = db
        self.embedder = embedder

    # -- reads -------------------------------------------------------------------------------------------
    def all(self, *, dates: DateFilter | None = None) -> list[CraftEntry]:
        """Every entry (those ``dates`` lets a task see), ordered by id."""
        return [CraftEntry.model_validate(row["data"]) for row in self.db.items(self.store, dates=dates)]

    def __len__(self) -> int:
        return self.db.count(self.store)

    def get(self, entry_id: str) -> CraftEntry | None:
        """One entry by id."""
        rows = self.db.query("SELECT data FROM items WHERE store=? AND id=?", (self.store, entry_id))
        return CraftEntry.model_validate_json(rows[0][0]) if rows else None

    def candidates(
        self, task_text: str, k: int = 5, *, exclude_task_id: str | None = None, dates: DateFilter | None = None
    ) -> list[CraftEntry]:
        """Lexical matches plus the most supported entries, re-ranked by embedding similarity when possible; only
        entries ``dates`` lets the task see compete."""
        pool: dict[str, CraftEntry] = {}
        hits = self.db.fts_search(self.store, task_text, limit=4 * k, exclude_task_id=exclude_task_id, dates=dates)
        for data, _rank in hits:
            pool.setdefault(data["id"], CraftEntry.model_validate(data))
        for data in self.db.top_by_weight(self.store, limit=2 * k, exclude_task_id=exclude_task_id, dates=dates):
            pool.setdefault(data["id"], CraftEntry.model_validate(data))
        entries = list(pool.values())
        if self.embedder is not None and len(entries) > 1:
            vectors = self.embedder.embed([task_text] + [e.text for e in entries])
            sims = vectors[1:] @ vectors[0]
            # ties (equal similarity and support) go by batch then text, not by the random id: two runs that learn
            # the same memory rank it the same (threads vs Ray, a rerun)
            order = sorted(
                range(len(entries)),
                key=lambda i: (-float(sims[i]), -entries[i].support, entries[i].batch, entries[i].text, entries[i].id),
            )
            entries = [entries[i] for i in order]
        return entries[: 2 * k]

    def relevant(
        self,
        task_text: str,
        k: int = 5,
        *,
        exclude_task_id: str | None = None,
        judge: Callable[[str, list[str]], list[int] | None] | None = None,
        dates: DateFilter | None = None,
    ) -> list[CraftEntry]:
        """The entries that apply to this task: prefilter, then the ``judge`` relevance stage when given.

        ``judge(task, texts)`` returns the 1-based numbers of the applicable entries (possibly none: nothing
        applies) or None when its answer cannot be used; then the prefilter's order is kept.
        """
        entries = self.candidates(task_text, k, exclude_task_id=exclude_task_id, dates=dates)
        if not entries or judge is None:
            return entries[:k]
        keep = judge(task_text, [e.text for e in entries])
        if keep is not None:
            entries = [entries[i - 1] for i in dict.fromkeys(keep) if 1 <= i <= len(entries)]
        return entries[:k]

    # -- writes ------------------------------------------------------------------------------------------
    def put(self, entry: CraftEntry, *, tx: Transaction | None = None) -> CraftEntry:
        """Insert or replace an entry."""
        data = entry.model_dump(mode="json")
        with self.db.write(tx, batch=entry.batch) as t:
            t.put(self.store, entry.id, data, **index_columns(self.store, data))
        return entry

    def add(
        self,
        text: str,
        *,
        provenance: list[str] | None = None,
        batch: int = 0,
        evidence: EvidenceRecord | None = None,
        tx: Transaction | None = None,
    ) -> CraftEntry:
        """Store a new entry (``evidence``: the pages and runs behind it, which date it)."""
        entry = CraftEntry(
            id=new_id("c-"),
            text=text.strip(),
            provenance=sorted(set(provenance or [])),
            batch=batch,
            evidence=evidence or EvidenceRecord(),
        )
        return self.put(entry, tx=tx)

    def remove(self, entry_id: str, *, batch: int | None = None, tx: Transaction | None = None) -> None:
        """Retire an entry: it leaves the store (never injected again); the change log keeps it with its ``batch``
        (the trainer retires an entry that several runs of a batch showed to be wrong)."""
        with self.db.write(tx, batch=batch) as t:
            t.delete(self.store, entry_id, op="retire")
