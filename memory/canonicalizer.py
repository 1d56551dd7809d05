"""Canonicalisation of memory candidates: reject the unsupported, merge by meaning, detect contradictions.

Before a candidate (craft insight, rule or fact) is stored, :class:`Canonicalizer` first runs the memory guard
(:class:`memento.memory.memory_guard.MemoryGuard`, deterministic: fixed answers, meta-instructions, text copied
from or echoing a page's injection; a rejection says why in ``CanonicalOp.guard``), then rejects empty and
"no data" candidates (a cheap pattern check, then the ``check`` stage: the learning module's
:class:`~memento.signatures.check_candidate.CheckCandidate` predictor, against the candidate's own
evidence). It then looks for the stored items (and the candidates accepted so far) that may say the same thing or
the opposite: every stored item of the store is a possible match (SQLite FTS5 hits plus the heaviest ``scan`` live
items), scored by the larger of two similarities, the embedder's cosine and the text overlap of their content words
(:func:`text_overlap`: character n-grams, so ``quotes``/``quotation`` or ``blogs``/``weblogs`` meet). The
``max_judged`` (3) best items scoring at least ``threshold`` go, best first, to the ``merge`` stage
(:class:`~memento.signatures.merge_canonical.MergeCanonical`) until one is ``same`` or ``contradicts``: ``same``
merges (the runs behind the candidate become support of the target; a merged text the guard rejects cancels the
merge), ``contradicts`` supersedes a fact, raises a
rule's contradiction count (``contradict``) and rejects a craft insight; when all are ``distinct`` the candidate is
added. So paraphrases and direct contradictions, whose cosine is often far below a near-duplicate's (MiniLM: 0.5-0.9
for rules that mean the same, 0.6-0.9 for "use site:gov" against "avoid site:gov"), reach the judge, at most three
judge calls per candidate. ``threshold`` defaults by embedder: 0.45 for a sentence-transformers model, 0.15 for the
hashing embedder (word overlap only: it cannot match paraphrases that share no words; the measured rates of both are
in docs/benchmarks.md, ``bench/bench_canonical.py``). The stages are plain callables handed in by
:class:`memento.programs.memento_learner.MementoLearner` (``memory/`` never imports ``programs/``); without them only
the pattern check and exact duplicates apply. Planning makes the LLM calls; the caller applies the plan in one
transaction.

Example:
    >>> import tempfile
    >>> from memento.memory.embedder import HashingEmbedder
    >>> from memento.memory.sqlite_store import SQLiteStore
from memento.core.types import EvidenceRecord
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

from memento.core.types import EvidenceRecord
from memento.memory.memory_guard import MemoryGuard
from memento.memory.sqlite_store import SQLiteStore

__all__ = [
    "Canonicalizer",
    "Candidate",
    "CanonicalOp",
    "CheckStage",
    "MergeStage",
    "is_no_data",
    "text_overlap",
    "default_threshold",
    "KINDS",
]

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


_STOPWORDS = frozenset(
    """a an and are as at be by did do does for from has have how in is it its of on or that the their this to was
    were what when where which who whom whose why with any each then than them they there these those your
    you""".split()
)


def _grams(text: str) -> dict[str, int]:
    """Character 3-5-grams of the content words (stopwords dropped), each word padded with spaces."""
    out: dict[str, int] = {}
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOPWORDS:
            continue
        padded = f" {word} "
        for n in (3, 4, 5):
            for i in range(len(padded) - n + 1):
                gram = padded[i : i + n]
                out[gram] = out.get(gram, 0) + 1
    return out


def text_overlap(a: str, b: str) -> float:
    """Cosine of the two texts' content-word character n-grams (0..1): word overlap that tolerates inflection and
    compounds (``quotes``/``quotation``, ``blogs``/``weblogs``), the second similarity of the canonicaliser.

    Example:
        >>> round(text_overlap("Quote the full name.", "Full names in quotation marks."), 2) > 0.3
        True
    """
    ga, gb = _grams(a), _grams(b)
    if not ga or not gb:
        return 0.0
    dot = sum(count * gb.get(gram, 0) for gram, count in ga.items())
    norm = (sum(c * c for c in ga.values()) * sum(c * c for c in gb.values())) ** 0.5
    return float(dot / norm) if norm else 0.0


def default_threshold(embedder: Any) -> float:
    """The lowest similarity at which a stored item is judged against a candidate: 0.45 for a sentence-transformers
    embedder (paraphrases score 0.5-0.9 under MiniLM, unrelated rules of one domain below 0.45), 0.15 for any other
    (the hashing embedder and plain text overlap: shared words are all they see)."""
    return 0.45 if str(getattr(embedder, "name", "")).startswith("st:") else 0.15


class Candidate(BaseModel):
    """A proposed memory item: its text, provenance (the ids of the runs that back it), for facts the entity and
    sources, ``evidence``: what it was derived from as text (the backing runs' records, a fact's source pages) for
    the check, and ``backing``: the :class:`~memento.core.types.EvidenceRecord` the stored item will carry (the pages
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
        embedder: Embedder for similarity (default: :func:`memento.memory.embedder.default_embedder`).
        threshold: The lowest similarity (the larger of the embedder's cosine and :func:`text_overlap`) at which a
            stored item goes to the merge judgement (default: :func:`default_threshold` of the embedder).
        check: The correctness/sufficiency stage (``MementoLearner.check``); None: the pattern check only.
        merge: The merge judgement stage (``MementoLearner.merge``); None: only exact duplicates merge.
        pool: How many lexical (FTS5) matches are compared.
        scan: How many of the heaviest live items are compared as well (paraphrases share few words).
        max_judged: The most stored items judged against one candidate (judge calls per candidate).
        guard: The memory guard run before any LLM stage (``[trainer] guard``); None: no guard.

    Attributes:
        judge_calls: merge judgements asked so far (the bench reports them per candidate).
        check_calls: correctness checks asked so far (an identical candidate and evidence is asked once a plan).
    """

    def __init__(
        self,
        db: SQLiteStore,
        *,
        embedder: Any = None,
        threshold: float | None = None,
        check: CheckStage | None = None,
        merge: MergeStage | None = None,
        pool: int = 20,
        guard: MemoryGuard | None = None,
        scan: int = 500,
        max_judged: int = 3,
    ) -> None:
        self.db = db
        if embedder is None:
            from memento.memory.embedder import default_embedder

            embedder = default_embedder()
        self.embedder = embedder
        self.threshold = default_threshold(embedder) if threshold is None else float(threshold)
        self.check = check
        self.merge = merge
        self.pool = pool
        self.guard = guard
        self.scan = scan
        self.max_judged = max(1, int(max_judged))
        self.judge_calls = 0
        self.check_calls = 0
        self._checks: dict[tuple[str, str, str], tuple[bool, str]] = {}  # this plan's check verdicts

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
        key = (KINDS[store], text, candidate.evidence)
        if key not in self._checks:  # a candidate proposed again with the same evidence is checked once a plan
            self.check_calls += 1
            self._checks[key] = self.check(*key)
        return self._checks[key]

    def _stored(self, store: str, candidate: Candidate) -> list[tuple[str, str]]:
        """(id, text) of the stored items that may say the same as the candidate: the FTS5 matches and the heaviest
        live items (a paraphrase may share no word); facts only of the candidate's entity."""
        statuses = ("active", "downweighted") if store in ("decomposition", "web_action") else ("active",)
        query = f"{candidate.entity} {candidate.text}" if store == "facts" else candidate.text
        rows = [data for data, _rank in self.db.fts_search(store, query, statuses=statuses, limit=self.pool)]
        rows += self.db.top_by_weight(store, statuses=statuses, limit=self.scan)
        out: dict[str, str] = {}
        for data in rows:
            if store == "facts" and _norm(data.get("entity", "")) != _norm(candidate.entity):
                continue
            out.setdefault(data["id"], data.get("text", ""))
        return list(out.items())

    def nearest(self, text: str, pool: list[tuple[str, str]]) -> list[tuple[str, str, float]]:
        """The items of ``pool`` that go to the judge for ``text``: an exact duplicate alone, else the
        ``max_judged`` most similar scoring at least ``threshold``, best first, as ``(id, text, similarity)``."""
        if not pool:
            return []
        for key, stored in pool:
            if _norm(stored) == _norm(text):
                return [(key, stored, 1.0)]
        vectors = self.embedder.embed([text] + [stored for _, stored in pool])
        cosines = vectors[1:] @ vectors[0]
        scored = [
            (key, stored, max(float(cos), text_overlap(text, stored)))
            for (key, stored), cos in zip(pool, cosines, strict=True)
        ]
        scored = [item for item in scored if item[2] >= self.threshold]
        scored.sort(key=lambda item: -item[2])
        return scored[: self.max_judged]

    def resolve(self, store: str, stored: str, candidate: str) -> tuple[str, str]:
        """The LLM merge judgement: (verdict, merged text); without an LM only exact duplicates are ``same``."""
        if _norm(stored) == _norm(candidate):
            return "same", stored
        if self.merge is None:
            return "distinct", ""
        self.judge_calls += 1
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
        self._checks = {}
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
            verdict, merged, target, sim = "distinct", "", "", 0.0
            for key, text, score in self.nearest(candidate.text, pool):
                verdict, merged = self.resolve(store, text, candidate.text)
                target, sim = key, score
                if verdict in ("same", "contradicts"):
                    break
            if verdict not in ("same", "contradicts"):
                accepted.append((f"new:{len(ops)}", candidate))
                ops.append(CanonicalOp(action="add", candidate=candidate, similarity=sim))
                continue
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
        return ops
