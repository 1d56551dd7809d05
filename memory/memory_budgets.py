"""The four stores of MEMENTO's memory (M1 craft knowledge, M2 decomposition rules, M3 web-action rules, M4 domain
facts: their names, the paper's names and titles) and the budgets of what a task is given from them
(:class:`MemoryBudgets`: tokens per store, ``search_memory`` hits, the paper profile's cap).

Example:
    >>> from memento.memory.memory_budgets import PAPER_NAMES, MemoryBudgets
    >>> PAPER_NAMES["M3"], MemoryBudgets().web_action
    ('web_action', 300)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "STORES",
    "PAPER_NAMES",
    "STORE_TITLES",
    "RelevanceStage",
    "MemoryBudgets",
    "PAPER_CONTEXT_SHARE",
    "budgets_from_settings",
]


STORES: tuple[str, ...] = ("craft", "decomposition", "web_action", "facts")
#: the paper's store names (Table 8) -> store names
PAPER_NAMES: dict[str, str] = {"M1": "craft", "M2": "decomposition", "M3": "web_action", "M4": "facts"}
#: ``relevance(task, entries) -> 1-based numbers of the applicable entries, or None when the check is unusable``
RelevanceStage = Callable[[str, list[str]], "list[int] | None"]
#: each store's title in exports and warnings
STORE_TITLES = {
    "craft": "M1 craft knowledge",
    "decomposition": "M2 decomposition rules",
    "web_action": "M3 web-action rules",
    "facts": "M4 domain facts",
}


class MemoryBudgets(BaseModel):
    """Token budgets of injected memory, per store, and the number of ``search_memory`` hits.

    ``paper_max_tokens``: under the ``paper`` profile (M1-M3 injected whole) the most one store may inject, so the
    prompt still fits the model's context; a store larger than that is cut (heaviest items kept) and the cut is said
    once in a warning line and noted in each run's trajectory. :func:`open_memory` derives it from the ``lm`` role's
    ``context_tokens`` when that is set (a quarter of the context per store: two stores share a prompt, and the task,
    the research so far and the tool results need the rest).
    """

    craft: int = Field(default=300, ge=0)
    decomposition: int = Field(default=300, ge=0)
    web_action: int = Field(default=300, ge=0)
    facts: int = Field(default=400, ge=0)
    craft_k: int = Field(default=5, ge=1)
    search_k: int = Field(default=5, ge=1)
    paper_max_tokens: int = Field(default=8000, ge=1)


#: the share of the model's context one store may fill under the ``paper`` profile
PAPER_CONTEXT_SHARE = 4


def budgets_from_settings(section: Any, *, context_tokens: int | None = None) -> MemoryBudgets:
    """The :class:`MemoryBudgets` of a ``[memory]`` settings section (:class:`memento.core.config.MemorySettings`);
    ``context_tokens`` (the ``lm`` role's context) sets the paper profile's per-store size to a quarter of it."""
    paper = getattr(section, "paper_max_tokens", MemoryBudgets().paper_max_tokens)
    if context_tokens:
        paper = max(1, int(context_tokens) // PAPER_CONTEXT_SHARE)
    return MemoryBudgets(
        craft=section.craft_tokens,
        decomposition=section.decomposition_tokens,
        web_action=section.web_action_tokens,
        facts=section.facts_tokens,
        craft_k=section.craft_k,
        search_k=section.search_k,
        paper_max_tokens=paper,
    )
