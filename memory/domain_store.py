"""M4 domain store: entity-keyed facts with sources and batch (MEMENTO §3.4).

A fact that contradicts an older one supersedes it: the old fact is kept and marked (``superseded_by``),
never deleted. :meth:`DomainStore.for_task` retrieves facts about the entities named in the current sample
(FTS5 over the entity column) within a token budget, for the solver's context; :meth:`DomainStore.search`
serves the ``search_memory`` tool.

Example:
    >>> import tempfile
    >>> from memento.memory.sqlite_store import SQLiteStore
    >>> facts = DomainStore(SQLiteStore(tempfile.mkdtemp()))
    >>> _ = facts.add("Dune", "Dune was written by Frank Herbert.", sources=["https://example.org/dune"])
    >>> facts.search("who wrote dune")
    ['[Dune] Dune was written by Frank Herbert. (sources: https://example.org/dune)']
"""

from __future__ import annotations

import logging

from memento.core.dating import DateFilter
from memento.core.types import EvidenceRecord, Fact, new_id
from memento.memory.sqlite_store import SQLiteStore, Transaction, estimate_tokens, index_columns

__all__ = ["DomainStore"]

logger = logging.getLogger(__name__)


class DomainStore:
    """The M4 store (store name ``"facts"``) inside a memory database.

    Args:
        db: The memory database.
    """

    store = "facts"

    def __init__(self, db: SQLiteStore) -> None:
        self.db = db

    # -- reads -------------------------------------------------------------------------------------------
    def all(self, *, include_superseded: bool = True) -> list[Fact]:
        """Every fact, ordered by id."""
        facts = [Fact.model_validate(row["data"]) for row in self.db.items(self.store)]
        return facts if include_superseded else [f for f in facts if f.superseded_by is None]

    def __len__(self) -> int:
        return self.db.count(self.store, statuses=("active",))

    def get(self, fact_id: str) -> Fact | None:
        """One fact by id."""
        rows = self.db.query("SELECT data FROM items WHERE store=? AND id=?", (self.store, fact_id))
        return Fact.model_validate_json(rows[0][0]) if rows else None

    def about(self, entity: str, *, include_superseded: bool = False) -> list[Fact]:
        """The facts stored under exactly this entity name (case-insensitive)."""
        rows = self.db.query(
            "SELECT data FROM items WHERE store=? AND lower(entity)=lower(?) ORDER BY id", (self.store, entity)
        )
        facts = [Fact.model_validate_json(row[0]) for row in rows]
        return facts if include_superseded else [f for f in facts if f.superseded_by is None]

    @staticmethod
    def render_fact(fact: Fact) -> str:
        """One line for a fact: ``[entity] text (sources: ...)``."""
        sources = f" (sources: {', '.join(fact.sources[:3])})" if fact.sources else ""
        return f"[{fact.entity}] {fact.text}{sources}"

    def for_task(
        self,
        task_text: str,
        *,
        budget_tokens: int,
        exclude_task_id: str | None = None,
        pool: int = 64,
        dates: DateFilter | None = None,
    ) -> list[Fact]:
        """Current facts about the entities this task names, within the budget.

        Facts compete by entity match first (FTS5 rank over the entity column), then by support (the number of
        independent runs that produced the fact), then by id; only facts ``dates`` lets the task see compete.
        """
        hits = self.db.fts_search(
            self.store, task_text, columns=("entity",), limit=pool, exclude_task_id=exclude_task_id, dates=dates
        )
        rank = {data["id"]: round(r, 6) for data, r in hits}
        ranked = sorted((Fact.model_validate(data) for data, _r in hits), key=lambda f: (rank[f.id], -f.support, f.id))
        chosen: list[Fact] = []
        used = 0
        for fact in ranked:
            cost = estimate_tokens(self.render_fact(fact)) + 1
            if used + cost > budget_tokens:
                continue
            chosen.append(fact)
            used += cost
        return chosen

    def search(
        self, query: str, k: int = 5, *, exclude_task_id: str | None = None, dates: DateFilter | None = None
    ) -> list[str]:
        """Current facts matching a query (entity and text), one line each with sources."""
        return [self.render_fact(f) for f in self.search_facts(query, k, exclude_task_id=exclude_task_id, dates=dates)]

    def search_facts(
        self, query: str, k: int = 5, *, exclude_task_id: str | None = None, dates: DateFilter | None = None
    ) -> list[Fact]:
        """:meth:`search` as facts: the ``k`` best current facts a task may see (``dates``), best first."""
        hits = self.db.fts_search(self.store, query, limit=k, exclude_task_id=exclude_task_id, dates=dates)
        return [Fact.model_validate(data) for data, _rank in hits]

    def stats(self) -> dict[str, int]:
        """Counts for reports: current and superseded facts, entities, characters of current facts.

        A fact's characters are those of ``entity: text``, as the model sees it and as ``MementoMemory.diff`` counts
        them, so ``memory stats`` and ``memory diff`` agree on sizes.
        """
        facts = self.all()
        current = [f for f in facts if f.superseded_by is None]
        return {
            "facts": len(current),
            "superseded": len(facts) - len(current),
            "entities": len({f.entity.lower() for f in current}),
            "chars": sum(len(f"{f.entity}: {f.text}") for f in current),
        }

    # -- writes ------------------------------------------------------------------------------------------
    def put(self, fact: Fact, *, tx: Transaction | None = None) -> Fact:
        """Insert or replace a fact."""
        data = fact.model_dump(mode="json")
        with self.db.write(tx, batch=fact.batch) as t:
            t.put(self.store, fact.id, data, **index_columns(self.store, data))
        return fact

    def add(
        self,
        entity: str,
        text: str,
        *,
        sources: list[str] | None = None,
        batch: int = 0,
        provenance: list[str] | None = None,
        evidence: EvidenceRecord | None = None,
        tx: Transaction | None = None,
    ) -> Fact:
        """Store a new fact (``evidence``: its source pages as the runs read them and the runs, which date it)."""
        fact = self.new_fact(entity, text, sources=sources, batch=batch, provenance=provenance, evidence=evidence)
        return self.put(fact, tx=tx)

    def merge_into(
        self,
        fact_id: str,
        *,
        text: str | None = None,
        sources: list[str] | None = None,
        support: int = 1,
        provenance: list[str] | None = None,
        batch: int = 0,
        evidence: EvidenceRecord | None = None,
        tx: Transaction | None = None,
    ) -> Fact:
        """Fold a duplicate into an existing fact: counts summed, sources, provenance and evidence united."""
        with self.db.write(tx, batch=batch) as t:
            data = t.existing(self.store, fact_id)
            fact = Fact.model_validate(data)
            fact = fact.model_copy(
                update={
                    "text": (text or fact.text).strip(),
                    "sources": list(dict.fromkeys([*fact.sources, *(sources or [])])),
                    "support": fact.support + support,
                    "provenance": sorted(set(fact.provenance) | set(provenance or [])),
                    "evidence": fact.evidence.merged(evidence),
                }
            )
            return self.put(fact, tx=t)

    def supersede(self, old_id: str, new: Fact, *, tx: Transaction | None = None) -> Fact:
        """Store ``new`` and mark ``old_id`` as superseded by it (the old fact is kept)."""
        with self.db.write(tx, batch=new.batch) as t:
            data = t.existing(self.store, old_id)
            self.put(new, tx=t)
            old = Fact.model_validate(data).model_copy(update={"superseded_by": new.id})
            self.put(old, tx=t)
        return new

    def new_fact(
        self,
        entity: str,
        text: str,
        *,
        sources: list[str] | None = None,
        batch: int = 0,
        provenance: list[str] | None = None,
        evidence: EvidenceRecord | None = None,
    ) -> Fact:
        """A fact record not yet stored (for :meth:`supersede`)."""
        return Fact(
            id=new_id("f-"),
            entity=entity.strip(),
            text=text.strip(),
            sources=list(dict.fromkeys(sources or [])),
            batch=batch,
            provenance=sorted(set(provenance or [])),
            evidence=evidence or EvidenceRecord(),
        )
