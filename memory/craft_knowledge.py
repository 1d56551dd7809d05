"""M1 craft knowledge: free-text research-strategy insights with provenance (MEMENTO §3.4).

Entries are learned without labels (Phase A: rewritten from the per-sample insights of valid runs) and read
by ``Decompose`` and ``Reflect``. :meth:`CraftKnowledge.relevant` keeps what applies to the current task:
a lexical prefilter (SQLite FTS5) plus the most supported entries, optionally re-ranked by embedding
similarity, then an LLM relevance check (:class:`memento.signatures.judge_relevance.JudgeRelevance`).

Example:
    >>> import tempfile
    >>> from memento.memory.sqlite_store import SQLiteStore
    >>> craft = CraftKnowledge(SQLiteStore(tempfile.mkdtemp()))
    >>> _ = craft.add("For court cases, read the docket before news coverage.", provenance=["t1"])
    >>> [e.text for e in craft.relevant("Who won the court case?", check=False)]
    ['For court cases, read the docket before news coverage.']
"""

from __future__ import annotations

import logging
from typing import Any

import dspy

from memento.memory.sqlite_store import SQLiteStore, Transaction, index_columns
from memento.types import CraftEntry, new_id

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
    def all(self) -> list[CraftEntry]:
        """Every entry, ordered by id."""
        return [CraftEntry.model_validate(row["data"]) for row in self.db.items(self.store)]

    def __len__(self) -> int:
        return self.db.count(self.store)

    def get(self, entry_id: str) -> CraftEntry | None:
        """One entry by id."""
        rows = self.db.query("SELECT data FROM items WHERE store=? AND id=?", (self.store, entry_id))
        return CraftEntry.model_validate_json(rows[0][0]) if rows else None

    def candidates(self, task_text: str, k: int = 5, *, exclude_task_id: str | None = None) -> list[CraftEntry]:
        """Lexical matches plus the most supported entries, re-ranked by embedding similarity when possible."""
        pool: dict[str, CraftEntry] = {}
        for data, _rank in self.db.fts_search(self.store, task_text, limit=4 * k, exclude_task_id=exclude_task_id):
            pool.setdefault(data["id"], CraftEntry.model_validate(data))
        for data in self.db.top_by_weight(self.store, limit=2 * k, exclude_task_id=exclude_task_id):
            pool.setdefault(data["id"], CraftEntry.model_validate(data))
        entries = list(pool.values())
        if self.embedder is not None and len(entries) > 1:
            vectors = self.embedder.embed([task_text] + [e.text for e in entries])
            sims = vectors[1:] @ vectors[0]
            order = sorted(range(len(entries)), key=lambda i: (-float(sims[i]), -entries[i].support, entries[i].id))
            entries = [entries[i] for i in order]
        return entries[: 2 * k]

    def relevant(
        self,
        task_text: str,
        k: int = 5,
        *,
        exclude_task_id: str | None = None,
        check: bool = True,
        lm: Any = None,
    ) -> list[CraftEntry]:
        """The entries that apply to this task: prefilter, then (``check`` and an LM available) an LLM check.

        The LLM sees the numbered candidates and returns the numbers of those that apply; if its answer cannot
        be used, the prefilter's order is kept.
        """
        entries = self.candidates(task_text, k, exclude_task_id=exclude_task_id)
        if not entries:
            return []
        lm = lm or dspy.settings.lm
        if check and lm is not None:
            from memento.lm import raise_if_fatal
            from memento.signatures.judge_relevance import JudgeRelevance

            numbered = "\n".join(f"{i}. {e.text}" for i, e in enumerate(entries, 1))
            try:
                verdict = dspy.Predict(JudgeRelevance)(task=task_text, entries=numbered, lm=lm)
                keep = [int(i) for i in (verdict.relevant or [])]
                entries = [entries[i - 1] for i in dict.fromkeys(keep) if 1 <= i <= len(entries)]
            except Exception as exc:  # noqa: BLE001 - a bad judgement keeps the prefilter's choice
                raise_if_fatal(exc)
                logger.warning("craft relevance check failed, keeping the prefilter order: %s", exc)
        return entries[:k]

    # -- writes ------------------------------------------------------------------------------------------
    def put(self, entry: CraftEntry, *, tx: Transaction | None = None) -> CraftEntry:
        """Insert or replace an entry."""
        data = entry.model_dump(mode="json")
        with self.db.write(tx, batch=entry.batch) as t:
            t.put(self.store, entry.id, data, **index_columns(self.store, data))
        return entry

    def add(
        self, text: str, *, provenance: list[str] | None = None, batch: int = 0, tx: Transaction | None = None
    ) -> CraftEntry:
        """Store a new entry."""
        entry = CraftEntry(id=new_id("c-"), text=text.strip(), provenance=sorted(set(provenance or [])), batch=batch)
        return self.put(entry, tx=tx)

    def remove(self, entry_id: str, *, tx: Transaction | None = None) -> None:
        """Delete an entry (the change log keeps it)."""
        with self.db.write(tx) as t:
            t.delete(self.store, entry_id)

    def replace_all(
        self, texts: list[tuple[str, list[str], int]], *, batch: int, tx: Transaction | None = None
    ) -> list[CraftEntry]:
        """Rewrite M1: keep entries whose text is unchanged, add new ones, delete the rest.

        ``texts`` holds ``(text, provenance, support)`` triples.
        """
        with self.db.write(tx, batch=batch) as t:
            current = {e.text: e for e in self.all()}
            out: list[CraftEntry] = []
            keep: set[str] = set()
            for text, provenance, support in texts:
                text = text.strip()
                if not text or text in {e.text for e in out}:
                    continue
                old = current.get(text)
                if old is not None:
                    entry = old.model_copy(
                        update={"provenance": sorted(set(old.provenance) | set(provenance)), "support": support}
                    )
                else:
                    entry = CraftEntry(
                        id=new_id("c-"), text=text, provenance=sorted(set(provenance)), batch=batch, support=support
                    )
                keep.add(entry.id)
                out.append(self.put(entry, tx=t))
            for entry in current.values():
                if entry.id not in keep:
                    t.delete(self.store, entry.id)
        return out
