"""Plug points shared across layers, as ``Protocol`` classes.

:class:`MemoryProvider` is what a research program asks of attached memory (MEMENTO's M1-M4); an
:class:`memento.programs.AdaptiveExplorationTree` with ``memory=None`` behaves as if every method returned "".
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["MemoryProvider"]


@runtime_checkable
class MemoryProvider(Protocol):
    """Read-side view of persistent memory for one task instance.

    Every method returns prompt-ready text, already limited to the provider's token budget ("" when empty).
    ``exclude_task_id`` lets a trainer hide what a task's own run wrote (a task never retrieves its own memory).
    """

    def craft_knowledge(self, task_text: str) -> str:
        """M1: research-strategy insights relevant to this task (for Decompose and Reflect)."""
        ...

    def decomposition_rules(self, task_text: str) -> str:
        """M2: "When <pattern>, add a sub-question that covers <pattern>" rules (for Decompose and Reflect)."""
        ...

    def web_action_rules(self, task_text: str) -> str:
        """M3: query formulation, URL selection and scraping rules (for the sub-question agent's instructions)."""
        ...

    def known_facts(self, task_text: str) -> str:
        """M4: domain facts about this task's entities (for the solver's context)."""
        ...

    def search(self, query: str, k: int = 5) -> list[str]:
        """M4 facts matching a query, one line each with its sources (for the ``search_memory`` tool)."""
        ...
