"""Fakes and probes for memory tests: an embedder that looks vectors up (:class:`LookupEmbedder`), the labelled rule
pairs (:func:`load_rule_pairs`) and which of them reach the canonicaliser's merge judge (:func:`judge_reach`).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["LookupEmbedder", "load_rule_pairs", "judge_reach"]


class LookupEmbedder:
    """An embedder over a fixed table: each known text maps to its vector (synthetic worlds of tests and benchmarks).

    Example:
        >>> import numpy as np
        >>> emb = LookupEmbedder(2)
        >>> emb.table["a"] = np.array([1.0, 0.0])
        >>> emb.embed(["a"]).tolist(), emb.name
        ([[1.0, 0.0]], 'lookup-2')
    """

    def __init__(self, dim: int, name: str = "lookup") -> None:
        self.dim = dim
        self.name = f"{name}-{dim}"
        self.table: dict[str, Any] = {}

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        return np.stack([self.table[t] for t in texts]).astype(np.float32)


# -- canonicalisation: which stored rules reach the merge judge (tests/data/rule_pairs.jsonl) ------------------------
def load_rule_pairs(path: Any) -> list[dict[str, Any]]:
    """The labelled rule pairs of ``path`` (JSONL: ``id``, ``label`` paraphrase | contradiction | unrelated,
    ``store`` craft | decomposition | web_action, ``stored``, ``new``)."""
    from pathlib import Path

    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        if row.get("label") not in ("paraphrase", "contradiction", "unrelated") or not row.get("stored"):
            raise ValueError(f"{path}: malformed rule pair {row.get('id')!r}")
    return rows


def judge_reach(
    pairs: list[dict[str, Any]], *, embedder: Any, threshold: float | None = None, canonicalizer: Any = None
) -> dict[str, Any]:
    """Which labelled pairs reach the canonicaliser's merge judge.

    Every distinct ``stored`` text is stored in its store of one memory (the background each new rule is compared
    with); each pair's ``new`` text is then planned as a candidate with a merge stage that records what it is asked
    and answers ``distinct``. A pair *reaches the judge* when its stored text is among the items judged against its
    new one. Returns ``{"rates": {label: share}, "reached": {label: [ids]}, "missed": {label: [ids]},
    "calls": [judge calls per new rule], "threshold": the canonicaliser's threshold}``. ``canonicalizer``: the
    class to measure (default :class:`~memento.memory.canonicalizer.Canonicalizer`; a bench passes a variant).
    """
    import tempfile

    from memento.memory.canonicalizer import Candidate, Canonicalizer
    from memento.memory.craft_knowledge import CraftKnowledge
    from memento.memory.rule_book import RuleBook
    from memento.memory.sqlite_store import SQLiteStore

    with tempfile.TemporaryDirectory() as directory:
        db = SQLiteStore(directory)
        try:
            seen: set[tuple[str, str]] = set()
            for row in pairs:
                key = (row["store"], row["stored"])
                if key in seen:
                    continue
                seen.add(key)
                if row["store"] == "craft":
                    CraftKnowledge(db).add(row["stored"])
                else:
                    RuleBook(db, row["store"]).add(row["stored"], support=1)
            asked: list[str] = []

            def merge(kind: str, stored: str, candidate: str) -> tuple[str, str]:
                asked.append(stored)
                return "distinct", ""

            canon = (canonicalizer or Canonicalizer)(db, embedder=embedder, merge=merge, threshold=threshold)
            reached: dict[str, list[str]] = {"paraphrase": [], "contradiction": [], "unrelated": []}
            missed: dict[str, list[str]] = {"paraphrase": [], "contradiction": [], "unrelated": []}
            calls: list[int] = []
            for row in pairs:
                asked.clear()
                canon.plan(row["store"], [Candidate(text=row["new"])])
                calls.append(len(asked))
                (reached if row["stored"] in asked else missed)[row["label"]].append(row["id"])
        finally:
            db.close()
    rates = {label: len(reached[label]) / max(1, len(reached[label]) + len(missed[label])) for label in reached}
    return {"rates": rates, "reached": reached, "missed": missed, "calls": calls, "threshold": canon.threshold}
