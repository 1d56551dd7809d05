"""Per-sample session memory of the Adaptive Exploration Tree: every answer found so far, with its evidence.

It lives for one program call. Reflection reads it as text (:meth:`SessionMemory.render`) and the sub-question
agent's ``search_memory`` tool queries it (:meth:`SessionMemory.search`), so a question answered earlier in the
session is answered again from memory rather than from the web. Like every memory it honours the task's date filter:
an answer resting on a page dated on or after the cutoff (or on an undated page under ``drop``) is never shown, and
the trajectory's dating record counts it (store ``session``).

Example:
    >>> from memento.programs.session_memory import SessionMemory
    >>> from memento.core.dating import DateFilter
from memento.core.types import DatingRecord, Evidence
    >>> memory = SessionMemory()
    >>> memory.add("n1", "Who wrote Dune?", "Frank Herbert", [Evidence(url="https://example.org/dune")])
    >>> memory.search("Who is the author of Dune?")[0].answer
    'Frank Herbert'
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from memento.core.dating import DateFilter
from memento.core.types import DatingRecord, Evidence

__all__ = ["SessionEntry", "SessionMemory"]

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    """a an and are as at be by did do does for from has have how in is it its of on or that the their this to was
    were what when where which who whom whose why with""".split()
)


def _terms(text: str) -> set[str]:
    return {t for t in _WORD.findall(text.lower()) if t not in _STOPWORDS and (len(t) > 1 or t.isdigit())}


@dataclass(frozen=True)
class SessionEntry:
    """One answer of the session: the node it answered, the question, the answer and its evidence."""

    node_id: str
    question: str
    answer: str
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)

    def render(self, *, with_snippets: bool = False) -> str:
        """One block of prompt-ready text: ``[node] Q: ... A: ... Sources: ...``."""
        lines = [f"[{self.node_id}] Q: {self.question}", f"    A: {self.answer}"]
        if self.evidence:
            urls = ", ".join(e.url for e in self.evidence)
            lines.append(f"    Sources: {urls}")
            if with_snippets:
                for e in self.evidence:
                    if e.snippet:
                        lines.append(f"    - {e.title or e.url}: {e.snippet}")
        return "\n".join(lines)


class SessionMemory:
    """Thread-safe store of the answers of one session, searchable by word overlap.

    Scoring is the share of the query's content words found in an entry's question and answer (ties broken by
    recency), which is exact for the paraphrases that matter here and needs no index.

    Args:
        dates: the task's date filter: an entry is shown only when every page it rests on passes it.
        dating: where the entries it hides are counted (store ``session``).
    """

    def __init__(self, *, dates: DateFilter | None = None, dating: DatingRecord | None = None) -> None:
        self._entries: list[SessionEntry] = []
        self._terms: list[set[str]] = []
        self._lock = threading.Lock()
        self.dates = dates
        self.dating = dating
        self._hidden = [0, 0]  # entries hidden: dated on/after the cutoff, undated under drop

    def add(self, node_id: str, question: str, answer: str, evidence: list[Evidence] | None = None) -> SessionEntry:
        """Remember an answer (answers that are empty are ignored by :meth:`search` but still returned). An answer
        the date filter forbids is counted and kept out of :meth:`entries`, :meth:`search` and :meth:`render`."""
        entry = SessionEntry(node_id, question, answer, tuple(evidence or ()))
        why = self._verdict(entry)
        with self._lock:
            if why is not None:
                self._hidden[0 if why == "after" else 1] += 1
                if self.dating is not None:
                    self.dating.count_hidden("session", self._hidden[0], self._hidden[1])
                return entry
            self._entries.append(entry)
            self._terms.append(_terms(question + " " + answer))
        return entry

    def _verdict(self, entry: SessionEntry) -> str | None:
        """Why the filter hides an entry (its first page that fails), or ``None`` when it may be shown."""
        if self.dates is None:
            return None
        for ev in entry.evidence:
            why = self.dates.verdict(ev.published)
            if why is not None:
                return why
        return None

    def entries(self) -> list[SessionEntry]:
        """All entries shown to the task, oldest first."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def search(self, query: str, k: int = 3) -> list[SessionEntry]:
        """The ``k`` entries sharing most content words with the query (none when nothing overlaps)."""
        wanted = _terms(query)
        if not wanted:
            return []
        with self._lock:
            scored = [
                (len(wanted & terms) / len(wanted), i, entry)
                for i, (entry, terms) in enumerate(zip(self._entries, self._terms, strict=True))
                if entry.answer.strip()
            ]
        scored = [s for s in scored if s[0] > 0]
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [entry for _, _, entry in scored[:k]]

    def render(self, *, with_snippets: bool = True, max_chars: int = 12000) -> str:
        """Every entry as text for reflection (newest entries kept when over ``max_chars``)."""
        blocks = [e.render(with_snippets=with_snippets) for e in self.entries()]
        out: list[str] = []
        used = 0
        for block in reversed(blocks):
            if used + len(block) > max_chars and out:
                out.append(f"[... {len(blocks) - len(out)} earlier entries omitted]")
                break
            out.append(block)
            used += len(block) + 1
        return "\n".join(reversed(out)) if out else "(empty: nothing answered yet)"
