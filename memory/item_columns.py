"""How a memory item is indexed and weighed: its index columns (text, entity, status, weight, tasks, date), a rule's
weight from its support and contradictions, the date of its evidence, and the tokens of a text (the unit of every
memory budget).

Example:
    >>> from memento.memory.item_columns import rule_weight
    >>> round(rule_weight(3, 0), 3), rule_weight(3, 0, "retired")
    (1.858, 0.0)
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from memento.core.dating import iso

__all__ = ["estimate_tokens", "fts_query", "rule_weight", "item_date", "index_columns"]


_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be by for from has have how in is it its of on or that the this to was were what when "
    "where which who whom why will with does did do into than then there their they them about after before".split()
)


@functools.lru_cache(maxsize=16_384)
def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as litellm counts them for a model without its own tokenizer (tiktoken's
    ``cl100k_base``), cached per text: memory budgets re-count the same rules and facts on every selection
    (``bench/bench_tokens.py`` measures the cost).

    Example:
        >>> estimate_tokens("When a river is named, ask for its length.")
        11
    """
    return len(_cl100k().encode(text, disallowed_special=())) if text else 0


@functools.cache
def _cl100k() -> Any:
    """tiktoken's ``cl100k_base``, read offline from the copy litellm ships, without importing litellm (8 s of a
    cold start; issue 21): litellm itself points ``TIKTOKEN_CACHE_DIR`` at that folder when it is imported."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        bundled = Path(folder) / "litellm_core_utils" / "tokenizers"
        if bundled.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
            break
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def fts_query(text: str, *, max_terms: int = 32) -> str:
    """An ``OR`` query (FTS5 syntax) of the distinct content words of ``text`` ("" when there are none)."""
    seen: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in _STOP or word in seen:
            continue
        seen.append(word)
        if len(seen) >= max_terms:
            break
    return " OR ".join(f'"{w}"' for w in seen)


def rule_weight(support: int, contradiction: int, status: str = "active") -> float:
    """A rule's ranking weight: the smoothed support ratio times its evidence mass, scaled down by status.

    ``(s + 1) / (s + c + 2) * log2(2 + s)``; a down-weighted rule (contradictions exceed support) counts a
    quarter, a retired one nothing.
    """
    import math

    base = (support + 1) / (support + contradiction + 2) * math.log2(2 + support)
    return {"active": 1.0, "downweighted": 0.25}.get(status, 0.0) * base


def item_date(data: dict[str, Any]) -> str | None:
    """The ISO date of a record's evidence (:class:`~memento.core.types.EvidenceRecord`), ``None`` when undated (a
    record without evidence: stored before items were dated)."""
    from memento.core.types import EvidenceRecord

    evidence = data.get("evidence")
    if not evidence:
        return None
    return iso(EvidenceRecord.model_validate(evidence).dated)


def index_columns(store: str, data: dict[str, Any]) -> dict[str, Any]:
    """The indexed columns (text, entity, status, weight, tasks, dated) of a record of ``store``."""
    provenance = list(data.get("provenance") or [])
    dated = item_date(data)
    if store in ("decomposition", "web_action"):
        status = str(data.get("status", "active"))
        weight = rule_weight(int(data.get("support", 0)), int(data.get("contradiction", 0)), status)
        return {"text": data.get("text", ""), "status": status, "weight": weight, "tasks": provenance, "dated": dated}
    if store == "facts":
        status = "superseded" if data.get("superseded_by") else "active"
        return {
            "text": data.get("text", ""),
            "entity": data.get("entity", ""),
            "status": status,
            "weight": float(data.get("support", 1)),
            "tasks": provenance,
            "dated": dated,
        }
    return {"text": data.get("text", ""), "weight": float(data.get("support", 1)), "tasks": provenance, "dated": dated}
