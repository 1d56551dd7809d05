"""Canonicalisation of memory candidates: reject the unsupported, merge near-duplicates, detect contradictions.

Before a candidate (craft insight, rule or fact) is stored, :class:`Canonicalizer` first runs the memory guard
(:class:`memento.memory.memory_guard.MemoryGuard`, deterministic: fixed answers, meta-instructions, text copied
from or echoing a page's injection; a rejection says why in ``CanonicalOp.guard``), then rejects empty and
"no data" candidates (a cheap pattern check, then the ``check`` stage: the learning module's
:class:`~memento.signatures.check_candidate.CheckCandidate` predictor, against the candidate's own
evidence). It then looks for near-duplicates among the stored items (SQLite FTS5 prefilter, then embedding
cosine similarity) and among the candidates accepted so far; a pair above the threshold goes to the ``merge``
stage (:class:`~memento.signatures.merge_canonical.MergeCanonical`): ``same`` merges (the runs behind
the candidate become support of the target; a merged text the guard rejects cancels the merge), ``contradicts``
supersedes a fact, raises a rule's contradiction count (``contradict``) and rejects a craft insight, ``distinct``
adds. The stages are plain callables handed in
by :class:`memento.programs.memento_learner.MementoLearner` (``memory/`` never imports ``programs/``); without
them only the pattern check and exact duplicates apply. Planning makes the LLM calls; the caller applies the
plan in one transaction.

Example:
    >>> import tempfile
    >>> from memento.memory.embedder import HashingEmbedder
    >>> from memento.memory.sqlite_store import SQLiteStore
from memento.types import EvidenceRecord
    >>> canon = Canonicalizer(SQLiteStore(tempfile.mkdtemp()), embedder=HashingEmbedder())
    >>> plan = canon.plan("web_action", [Candidate(text="Quote exact titles."), Candidate(text="No data")])
    >>> [op.action for op in plan]
    ['add', 'reject']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from memento.memory.memory_guard import MemoryGuard
from memento.memory.sqlite_store import SQLiteStore
from memento.types import EvidenceRecord

__all__ = ["Canonicalizer", "Candidate", "CanonicalOp", "CheckStage", "MergeStage", "is_no_data", "KINDS"]

#: ``check(kind, candidate, evidence) -> (accepted, reason)``
CheckStage = Callable[[str, str, str], tuple[bool, str]]
#: ``merge(kind, stored, candidate) -> (verdict, merged text)``
MergeStage = Callable[[str, str, str], tuple[str, str]]

logger = logging.getLogger(__name__)

KINDS = {
    "craft": "craft insight",
    "decomposition": "decomposition rule",
    "web_action": "web-action rule",
    "facts": "fact",
}
_NO_DATA = re.compile(
    r"^\W*(no (data|information|info|answer|results?|evidence)|not (found|available|known|stated|specified)|"
    r"unknown|n/?a|none|nothing( found)?|could not (be )?(find|found|establish(ed)?|determine(d)?)|"
    r"unable to (find|determine|establish)|i (do not|don't) know)\b",
    re.IGNORECASE,
)


def is_no_data(text: str) -> bool:
    """True for empty or "no data"-style texts ("not found", "unknown", "could not determine" ...)."""
    stripped = (text or "").strip()
    return len(stripped) < 8 or bool(_NO_DATA.match(stripped))


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


class Candidate(BaseModel):
    """A proposed memory item: its text, provenance (the ids of the runs that back it), for facts the entity and
    sources, ``evidence``: what it was derived from as text (the backing runs' records, a fact's source pages) for
    the check, and ``backing``: the :class:`~memento.types.EvidenceRecord` the stored item will carry (the pages
    the runs read, with their dates, and the runs with their cutoffs: what dates the item and names its sources).

    For the memory guard (never serialised): ``pages``, the texts the backing runs read (page texts, snippets,
    titles, injected passages found in them), and ``task``, the text of the task they researched."""

    text: str
    provenance: list[str] = Field(default_factory=list)
    entity: str = ""
    sources: list[str] = Field(default_factory=list)
    support: int = 1
    evidence: str = ""
    pages: list[str] = Field(default_factory=list, exclude=True, repr=False)
    task: str = Field(default="", exclude=True, repr=False)
    backing: EvidenceRecord = Field(default_factory=EvidenceRecord)


class CanonicalOp(BaseModel):
    """The planned fate of one candidate.

    ``action``: ``add``; ``merge`` into ``target`` (a stored id, or ``"new:<i>"`` for the i-th op of the plan)
    with text ``merged``; ``supersede`` the stored fact ``target``; ``contradict`` the rule ``target`` (its
    contradiction count grows by the candidate's runs); ``reject`` (``reason`` says why; ``guard`` lists the memory
    guard's reasons when the guard rejected it).
    """

    action: Literal["add", "merge", "supersede", "contradict", "reject"]
    candidate: Candidate
    target: str | None = None
    merged: str = ""
    reason: str = ""
    similarity: float = 0.0
    guard: list[str] = Field(default_factory=list)


class Canonicalizer:
    """Plans how candidates enter a store of a memory database.

    Args:
        db: The memory database (stored items are read, never written).
        embedder: Embedder for near-duplicate detection (default: :func:`memento.memory.embedder.default_embedder`).
        threshold: Cosine similarity at or above which a pair is a near-duplicate candidate.
        check: The correctness/sufficiency stage (``MementoLearner.check``); None: the pattern check only.
        merge: The merge judgement stage (``MementoLearner.merge``); None: only exact duplicates merge.
        pool: How many stored items the lexical prefilter passes to the embedding comparison.
        guard: The memory guard run before any LLM stage (``[trainer] guard``); None: no guard.
    """

    def __init__(
        self,
        db: SQLiteStore,
        *,
        embedder: Any = None,
        threshold: float = 0.8,
        check: CheckStage | None = None,
        merge: MergeStage | None = None,
        pool: int = 20,
        guard: MemoryGuard | None = None,
    ) -> None:
        self.db = db
        if embedder is None:
            from memento.memory.embedder import default_embedder

            embedder = default_embedder()
        self.embedder = embedder
        self.threshold = threshold
        self.check = check
        self.merge = merge
        self.pool = pool
        self.guard = guard

    # -- steps -------------------------------------------------------------------------------------------
    def guarded(self, store: str, candidate: Candidate, text: str | None = None) -> list[str]:
        """The memory guard's reasons to reject ``text`` (default: the candidate's text); [] without a guard."""
        if self.guard is None:
            return []
        return self.guard.inspect(
            store,
            candidate.text if text is None else text,
            entity=candidate.entity,
            pages=candidate.pages,
            task=candidate.task,
        )

    def accept(self, store: str, candidate: Candidate) -> tuple[bool, str]:
        """The correctness/sufficiency check: (accepted, reason)."""
        if is_no_data(candidate.text):
            return False, "no data"
        if store == "facts" and not candidate.entity.strip():
            return False, "fact without an entity"
        if store == "facts" and candidate.backing.runs and not candidate.backing.pages:
            return False, "no source page the run read"  # its cited sources were never opened nor shown to it
        if self.check is None:
            return True, "pattern check only"
        text = f"[{candidate.entity}] {candidate.text}" if candidate.entity else candidate.text
        return self.check(KINDS[store], text, candidate.evidence)

    def _stored(self, store: str, candidate: Candidate) -> list[tuple[str, str]]:
        """(id, text) of stored items that could duplicate the candidate (lexical prefilter)."""
        statuses = ("active", "downweighted") if store in ("decomposition", "web_action") else ("active",)
        query = f"{candidate.entity} {candidate.text}" if store == "facts" else candidate.text
        hits = self.db.fts_search(store, query, statuses=statuses, limit=self.pool)
        out = []
        for data, _rank in hits:
            if store == "facts" and _norm(data.get("entity", "")) != _norm(candidate.entity):
                continue
            out.append((data["id"], data.get("text", "")))
        return out

    def resolve(self, store: str, stored: str, candidate: str) -> tuple[str, str]:
        """The LLM merge judgement: (verdict, merged text); without an LM only exact duplicates are ``same``."""
        if _norm(stored) == _norm(candidate):
            return "same", stored
        if self.merge is None:
            return "distinct", ""
        verdict, merged = self.merge(KINDS[store], stored, candidate)
        merged = merged.strip()
        if verdict == "same" and (not merged or is_no_data(merged)):
            merged = stored
        if verdict == "contradicts":
            merged = candidate
        return verdict, merged

    # -- the plan ----------------------------------------------------------------------------------------
    def plan(self, store: str, candidates: list[Candidate]) -> list[CanonicalOp]:
        """Decide, in order, what happens to each candidate (no writes; apply with the stores' methods)."""
        if store not in KINDS:
            raise ValueError(f"unknown store {store!r}")
        ops: list[CanonicalOp] = []
        accepted: list[tuple[str, Candidate]] = []  # ("new:i", candidate) of planned additions
        for candidate in candidates:
            candidate.text = candidate.text.strip()
            blocked = self.guarded(store, candidate)
            if blocked:  # deterministic, before any LLM stage: an obeying model cannot talk past it
                reason = "memory guard: " + "; ".join(blocked)
                ops.append(CanonicalOp(action="reject", candidate=candidate, reason=reason, guard=blocked))
                continue
            ok, reason = self.accept(store, candidate)
            if not ok:
                ops.append(CanonicalOp(action="reject", candidate=candidate, reason=reason))
                continue
            pool = self._stored(store, candidate) + [
                (key, c.text) for key, c in accepted if store != "facts" or _norm(c.entity) == _norm(candidate.entity)
            ]
            best: tuple[str, str, float] | None = None
            if pool:
                vectors = self.embedder.embed([candidate.text] + [text for _, text in pool])
                sims = vectors[1:] @ vectors[0]
                i = int(sims.argmax())
                if float(sims[i]) >= self.threshold or _norm(pool[i][1]) == _norm(candidate.text):
                    best = (pool[i][0], pool[i][1], float(sims[i]))
            if best is None:
                accepted.append((f"new:{len(ops)}", candidate))
                ops.append(CanonicalOp(action="add", candidate=candidate))
                continue
            target, text, sim = best
            verdict, merged = self.resolve(store, text, candidate.text)
            blocked = self.guarded(store, candidate, merged) if verdict == "same" and merged != text else []
            if blocked:  # the merge stage wrote instruction-like text: keep the stored item as it is
                blocked = [f"merged text: {why}" for why in blocked]
                reason = "memory guard: " + "; ".join(blocked)
                ops.append(
                    CanonicalOp(action="reject", candidate=candidate, target=target, reason=reason, guard=blocked)
                )
                continue
            if verdict == "same":
                ops.append(
                    CanonicalOp(action="merge", candidate=candidate, target=target, merged=merged, similarity=sim)
                )
            elif verdict == "contradicts" and store == "facts" and not target.startswith("new:"):
                ops.append(
                    CanonicalOp(action="supersede", candidate=candidate, target=target, merged=merged, similarity=sim)
                )
            elif verdict == "contradicts" and store in ("decomposition", "web_action"):
                ops.append(CanonicalOp(action="contradict", candidate=candidate, target=target, similarity=sim))
            elif verdict == "contradicts":
                ops.append(
                    CanonicalOp(action="reject", candidate=candidate, target=target, reason="contradicts an item")
                )
            else:
                accepted.append((f"new:{len(ops)}", candidate))
                ops.append(CanonicalOp(action="add", candidate=candidate, similarity=sim))
        return ops
