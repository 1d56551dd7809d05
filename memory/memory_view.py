"""A task's view of MEMENTO's memory (:class:`MemoryView`): what one task instance may read and what it was given.

It hides what the task's own run wrote and what its date filter forbids before any ranking or budget, injects
each store within its budget (whole under the ``paper`` profile, as far as the model's context allows), and
records which items it injected, so the trainer can credit them.

Example:
    >>> view = memory.view(exclude_task_id="q1", dates=DateFilter.of("2020-01-01"))  # doctest: +SKIP
    >>> view.web_action_rules("find the paper title")  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from memento.core.dating import DateFilter
from memento.core.types import CraftEntry, DatingRecord
from memento.memory.memory_budgets import STORES, RelevanceStage
from memento.memory.rule_book import RuleBook
from memento.memory.sqlite_store import estimate_tokens

if TYPE_CHECKING:
    from memento.memory.memento_memory import MementoMemory


__all__ = ["MemoryView"]


class MemoryView:
    """A :class:`~memento.core.protocols.MemoryProvider` over a memory for one task instance.

    Hides items whose provenance includes ``exclude_task_id`` and items the task's date filter forbids (dated on or
    after its cutoff; undated ones under ``drop``), before any ranking or budget; reads nothing from a masked store
    (``search`` included) and records what it injected in :attr:`injected` (store -> item ids), which the trainer
    reads to credit rules, and every item it shows (with its date) and how many each store hid in ``dating``
    (the trajectory's :class:`~memento.core.types.DatingRecord`: what the leakage audit counts). Under the ``budgeted``
    profile each store is injected within its token budget; under ``paper`` M1-M3 are injected whole (every live item
    the task may see, heaviest first; M4 by relevance, within its budget), as MEMENTO does, unless a store outgrows
    ``budgets.paper_max_tokens`` (what fits the model's context): then its heaviest items that fit are injected and
    :attr:`cut` says what was left out (store -> (injected, total)).

    Args:
        memory: the memory read.
        exclude_task_id: the task whose own items are hidden.
        relevance: the M1 relevance stage ``relevance(task, entries) -> numbers | None`` (None: prefilter only).
        dates: the task's :class:`~memento.core.dating.DateFilter` (None: no cutoff).
        dating: where shown items and hidden counts are recorded (None: not recorded).
    """

    def __init__(
        self,
        memory: MementoMemory,
        *,
        exclude_task_id: str | None = None,
        relevance: RelevanceStage | None = None,
        dates: DateFilter | None = None,
        dating: DatingRecord | None = None,
    ) -> None:
        self.memory = memory
        self.exclude_task_id = exclude_task_id
        self.relevance = relevance
        self.dates = dates
        self.dating = dating
        self.injected: dict[str, list[str]] = {name: [] for name in STORES}
        self.cut: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._relevant: dict[str, list[CraftEntry]] = {}
        self._counted: set[str] = set()

    def _record(self, store: str, items: list[Any], *, injected: bool = True) -> None:
        """Record items shown in a prompt (``injected``: also in :attr:`injected`, which the trainer credits)."""
        with self._lock:
            for item in items:
                if injected and item.id not in self.injected[store]:
                    self.injected[store].append(item.id)
            if self.dating is not None:
                self.dating.show(store, [(item.id, item.evidence.dated) for item in items])
        self._count_hidden(store)

    def _count_hidden(self, store: str) -> None:
        """Record once how many items of ``store`` this task's date filter hides."""
        if self.dating is None or self.dates is None or not self.dates.active or store in self._counted:
            return
        statuses = ("active", "downweighted") if store in ("decomposition", "web_action") else ("active",)
        after, undated = self.memory.db.hidden_counts(store, self.dates, statuses=statuses)
        with self._lock:
            self._counted.add(store)
            self.dating.count_hidden(store, after, undated)

    def readable(self, store: str) -> bool:
        """Whether ``store`` is read (not masked)."""
        return store in self.memory.stores

    def relevant_craft(self, task_text: str) -> list[CraftEntry]:
        """The M1 entries the relevance check finds applicable to the task (computed once per task text)."""
        if not self.readable("craft"):
            return []
        with self._lock:
            if task_text in self._relevant:
                return self._relevant[task_text]
        entries = self.memory.craft.relevant(
            task_text,
            self.memory.budgets.craft_k,
            exclude_task_id=self.exclude_task_id,
            judge=self.relevance,
            dates=self.dates,
        )
        with self._lock:
            self._relevant[task_text] = entries
        return entries

    def _whole(self, store: str, lines: list[tuple[Any, str]]) -> tuple[list[str], list[Any]]:
        """The paper profile: every ``(item, line)`` of a store, heaviest first, until ``paper_max_tokens`` is spent
        (the model's context); returns the lines and items injected, and says a cut once."""
        cap = self.memory.budgets.paper_max_tokens
        kept: list[str] = []
        items: list[Any] = []
        used = 0
        for item, line in lines:
            cost = estimate_tokens(line) + 1
            if used + cost > cap:
                break
            kept.append(line)
            items.append(item)
            used += cost
        if len(kept) < len(lines):
            with self._lock:
                self.cut[store] = (len(kept), len(lines))
            self.memory.say_cut(store, len(kept), len(lines), cap)
        return kept, items

    def craft_knowledge(self, task_text: str) -> str:
        """M1: relevant entries within the craft budget (``budgeted``), or every entry (``paper``)."""
        if not self.readable("craft"):
            return ""
        if self.memory.profile == "paper":
            entries = [e for e in self.memory.craft.all(dates=self.dates) if self.exclude_task_id not in e.provenance]
            entries.sort(key=lambda e: (-e.support, e.id))
            lines, chosen = self._whole("craft", [(e, f"- {e.text}") for e in entries])
            self._record("craft", chosen)
            return "\n".join(lines)
        budget = self.memory.budgets.craft
        lines, used, chosen = [], 0, []
        for entry in self.relevant_craft(task_text):
            line = f"- {entry.text}"
            cost = estimate_tokens(line) + 1
            if used + cost > budget:
                continue
            lines.append(line)
            chosen.append(entry)
            used += cost
        self._record("craft", chosen)
        return "\n".join(lines)

    def _rules(self, book: RuleBook, task_text: str, budget: int) -> str:
        if not self.readable(book.store):
            return ""
        if self.memory.profile == "paper":
            rules = book.live(exclude_task_id=self.exclude_task_id, dates=self.dates)
            lines, chosen = self._whole(book.store, [(r, book.render_rule(r)) for r in rules])
            self._record(book.store, chosen)
            return "\n".join(lines)
        rules = book.select(task_text, budget_tokens=budget, exclude_task_id=self.exclude_task_id, dates=self.dates)
        self._record(book.store, rules)
        return "\n".join(book.render_rule(r) for r in rules)

    def decomposition_rules(self, task_text: str) -> str:
        """M2 rules, best by weight, within the decomposition budget (all of them under ``paper``)."""
        return self._rules(self.memory.decomposition, task_text, self.memory.budgets.decomposition)

    def web_action_rules(self, task_text: str) -> str:
        """M3 rules, best by weight, within the web-action budget (all of them under ``paper``)."""
        return self._rules(self.memory.web_action, task_text, self.memory.budgets.web_action)

    def known_facts(self, task_text: str) -> str:
        """M4 facts about the task's entities, within the facts budget (both profiles)."""
        if not self.readable("facts"):
            return ""
        facts = self.memory.facts.for_task(
            task_text, budget_tokens=self.memory.budgets.facts, exclude_task_id=self.exclude_task_id, dates=self.dates
        )
        self._record("facts", facts)
        return "\n".join(self.memory.facts.render_fact(f) for f in facts)

    def search(self, query: str, k: int | None = None) -> list[str]:
        """M4 facts matching a query (the ``search_memory`` tool): at most ``budgets.search_k`` hits (``[memory]
        search_k``; a smaller ``k`` asks for fewer); nothing when M4 is masked."""
        if not self.readable("facts"):
            return []
        limit = self.memory.budgets.search_k if k is None else min(k, self.memory.budgets.search_k)
        facts = self.memory.facts.search_facts(query, limit, exclude_task_id=self.exclude_task_id, dates=self.dates)
        self._record("facts", facts, injected=False)
        return [self.memory.facts.render_fact(f) for f in facts]

    def pin_info(self) -> dict[str, Any]:
        """See :meth:`MementoMemory.pin_info`."""
        return self.memory.pin_info()

    def __deepcopy__(self, memo: dict[int, Any]) -> MemoryView:
        return self

    def __copy__(self) -> MemoryView:
        return self
