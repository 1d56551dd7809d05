"""MEMENTO's dual memory in one place: M1 craft knowledge, M2/M3 rule books, M4 domain facts.

:class:`MementoMemory` opens ``<dir>/memory.db`` (or a PostgreSQL database: ``postgresql://host/db``) and exposes
the four stores, versions (one per training batch), snapshots, diffs, rollback, freezing and a deterministic export
to readable markdown + JSON. It implements :class:`memento.protocols.MemoryProvider`; :meth:`MementoMemory.view`
returns a provider that hides what a given task's own run wrote and records which items it injected (the trainer
credits them).

Example:
    >>> import tempfile
    >>> from memento.memory.memento_memory import MementoMemory
    >>> memory = MementoMemory(tempfile.mkdtemp())
    >>> with memory.transaction(batch=1) as tx:
    ...     _ = memory.web_action.add("Search the exact title in quotes.", batch=1, tx=tx)
    >>> memory.commit_version(batch=1)
    1
    >>> "exact title" in memory.web_action_rules("find the paper title")
    True
"""

from __future__ import annotations

import difflib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from memento.dating import DateFilter
from memento.files import atomic_write_text
from memento.memory.craft_knowledge import CraftKnowledge
from memento.memory.domain_store import DomainStore
from memento.memory.location import LocationLike
from memento.memory.rule_book import RuleBook
from memento.memory.sqlite_store import SQLiteStore, Transaction, estimate_tokens, index_columns
from memento.types import CraftEntry, DatingRecord, Fact, Rule

if TYPE_CHECKING:
    from memento.memory.memory_contents import ItemRecord

__all__ = [
    "MementoMemory",
    "MemoryView",
    "MemoryBudgets",
    "StoreDiff",
    "MemoryDiff",
    "STORES",
    "PAPER_NAMES",
    "RelevanceStage",
    "budgets_from_settings",
    "open_memory",
]

logger = logging.getLogger(__name__)

STORES: tuple[str, ...] = ("craft", "decomposition", "web_action", "facts")
#: the paper's store names (Table 8) -> store names
PAPER_NAMES: dict[str, str] = {"M1": "craft", "M2": "decomposition", "M3": "web_action", "M4": "facts"}
#: ``relevance(task, entries) -> 1-based numbers of the applicable entries, or None when the check is unusable``
RelevanceStage = Callable[[str, list[str]], "list[int] | None"]
_TITLES = {
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
    """The :class:`MemoryBudgets` of a ``[memory]`` settings section (:class:`memento.config.MemorySettings`);
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


def open_memory(
    section: Any, directory: LocationLike | None = None, *, context_tokens: int | None = None, **kwargs: Any
) -> MementoMemory:
    """A :class:`MementoMemory` configured by a ``[memory]`` settings section (profile, stores, budgets);
    ``context_tokens``: the agent model's context (``[lm] context_tokens``), which bounds the paper profile."""
    return MementoMemory(
        directory if directory is not None else section.dir,
        profile=section.profile,
        stores=section.stores,
        budgets=budgets_from_settings(section, context_tokens=context_tokens),
        **kwargs,
    )


class StoreDiff(BaseModel):
    """What changed in one store between two versions (characters as in MEMENTO Tables 15-16).

    ``modified`` lists every item whose record changed (text, support, contradiction, status...);
    ``chars_modified`` counts only the changed characters of their text.
    """

    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    chars_after: int = 0
    chars_added: int = 0
    chars_deleted: int = 0
    chars_modified: int = 0


class MemoryDiff(BaseModel):
    """The per-store differences between version ``a`` and version ``b``."""

    a: int
    b: int
    stores: dict[str, StoreDiff]

    def summary(self) -> str:
        """One line per store: ``+added -removed ~modified``."""
        return "\n".join(
            f"{name}: +{d.added.__len__()} -{d.removed.__len__()} ~{d.modified.__len__()} "
            f"(chars +{d.chars_added} -{d.chars_deleted} ~{d.chars_modified}, after {d.chars_after})"
            for name, d in self.stores.items()
        )


def _visible_text(store: str, data: dict[str, Any]) -> str:
    """The text that counts as a store's content (retired rules and superseded facts excluded)."""
    if store in ("decomposition", "web_action") and data.get("status") == "retired":
        return ""
    if store == "facts":
        if data.get("superseded_by"):
            return ""
        return f"{data.get('entity', '')}: {data.get('text', '')}"
    return str(data.get("text", ""))


def _changed_chars(old: str, new: str) -> int:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


class MemoryView:
    """A :class:`~memento.protocols.MemoryProvider` over a memory for one task instance.

    Hides items whose provenance includes ``exclude_task_id`` and items the task's date filter forbids (dated on or
    after its cutoff; undated ones under ``drop``), before any ranking or budget; reads nothing from a masked store
    (``search`` included) and records what it injected in :attr:`injected` (store -> item ids), which the trainer
    reads to credit rules, and every item it shows (with its date) and how many each store hid in ``dating``
    (the trajectory's :class:`~memento.types.DatingRecord`: what the leakage audit counts). Under the ``budgeted``
    profile each store is injected within its token budget; under ``paper`` M1-M3 are injected whole (every live item
    the task may see, heaviest first; M4 by relevance, within its budget), as MEMENTO does, unless a store outgrows
    ``budgets.paper_max_tokens`` (what fits the model's context): then its heaviest items that fit are injected and
    :attr:`cut` says what was left out (store -> (injected, total)).

    Args:
        memory: the memory read.
        exclude_task_id: the task whose own items are hidden.
        relevance: the M1 relevance stage ``relevance(task, entries) -> numbers | None`` (None: prefilter only).
        dates: the task's :class:`~memento.dating.DateFilter` (None: no cutoff).
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


class MementoMemory:
    """Persistent MEMENTO memory in a directory (``<dir>/memory.db``) or a PostgreSQL database; implements
    ``MemoryProvider``.

    Attributes ``craft`` (M1), ``decomposition`` (M2), ``web_action`` (M3) and ``facts`` (M4) are the stores.
    Deep and shallow copies return the same object (GEPA/MIPROv2 deep-copy programs; memory must not fork).
    Thread-safe: every store shares one locked connection.

    Args:
        directory: The memory's location: a directory (created when missing unless ``read_only``) or
            ``postgresql://[user@]host[:port]/db`` (:mod:`memento.memory.location`).
        embedder: Embedder for craft re-ranking and canonicalisation (default: none for retrieval).
        budgets: Token budgets of injected memory.
        read_only: Open read-only, frozen and pinned to the version that is the head now (``memento eval`` with
            ``--memory``; a writer's later commits stay invisible to this handle: :meth:`pin_info`).
        profile: ``budgeted`` (each store within its budget) or ``paper`` (M1-M3 whole, M4 by relevance).
        stores: The stores read and written, by store name or paper name (``M1``..``M4``); the others are masked:
            never injected, never searched, never written (MEMENTO Table 8 ablation). Default: all four.
        relevance: The M1 relevance stage used by views that are not given one (None: prefilter only).

    Example:
        >>> memory = MementoMemory("runs/memory")  # doctest: +SKIP
        >>> memory.freeze(); memory.version  # doctest: +SKIP
        2
    """

    def __init__(
        self,
        directory: LocationLike,
        *,
        embedder: Any = None,
        budgets: MemoryBudgets | None = None,
        read_only: bool = False,
        profile: str = "budgeted",
        stores: Iterable[str] | None = None,
        relevance: RelevanceStage | None = None,
    ) -> None:
        from memento.errors import ConfigError

        if profile not in ("budgeted", "paper"):
            raise ConfigError(f"unknown memory profile {profile!r}: use budgeted or paper")
        names = [PAPER_NAMES.get(str(name).strip(), str(name).strip()) for name in (stores or STORES)]
        unknown = [name for name in names if name not in STORES]
        if unknown:
            raise ConfigError(f"unknown memory store(s) {', '.join(unknown)}: use M1, M2, M3, M4")
        self.db = SQLiteStore(directory, read_only=read_only)
        self.directory = self.db.directory  # a Path, or the PostgreSQL location
        self.location = self.db.location
        self.embedder = embedder
        self.budgets = budgets or MemoryBudgets()
        self.profile = profile
        self.stores: frozenset[str] = frozenset(names)
        self.relevance = relevance
        self._cuts_said: set[str] = set()
        self._said_lock = threading.Lock()
        self.craft = CraftKnowledge(self.db, embedder=embedder)
        self.decomposition = RuleBook(self.db, "decomposition")
        self.web_action = RuleBook(self.db, "web_action")
        self.facts = DomainStore(self.db)

    def close(self) -> None:
        """Close the database connection (the WAL side files go with the last connection)."""
        self.db.close()

    def __enter__(self) -> MementoMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MementoMemory({str(self.directory)!r}, version={self.version}, frozen={self.frozen})"

    # -- identity under copies ---------------------------------------------------------------------------
    def __deepcopy__(self, memo: dict[int, Any]) -> MementoMemory:
        return self

    def __copy__(self) -> MementoMemory:
        return self

    def __getstate__(self) -> dict[str, Any]:
        from memento.errors import DataError

        raise DataError("MementoMemory cannot be pickled; reopen it with MementoMemory(location)")

    def say_cut(self, store: str, injected: int, total: int, cap: int) -> None:
        """Say once per store (a warning line) that the paper profile could not inject a store whole."""
        with self._said_lock:
            if store in self._cuts_said:
                return
            self._cuts_said.add(store)
        logger.warning(
            "paper profile: %s injects its %d heaviest of %d items (%d tokens fit the model's context: "
            "[memory] paper_max_tokens, or a quarter of [lm] context_tokens)",
            _TITLES[store],
            injected,
            total,
            cap,
        )

    # -- versions and writes -----------------------------------------------------------------------------
    def pin_info(self) -> dict[str, Any]:
        """What this memory shows, for results files: ``{"memento_memory": {"version": v, "end_seq": n}}``.

        A read-only memory is pinned to the version that was the head when it opened
        (:class:`~memento.memory.sqlite_store.SQLiteStore`); ``end_seq`` is the last change-log entry it shows (that
        version's own, unless items were written after it without a version and no writer is at work): the state
        is the items with every later change undone, on any backend.
        """
        pinned = self.db.pinned
        if pinned is not None:
            version, end_seq = int(pinned["version"]), int(pinned["end_seq"])
        else:
            version = self.version
            end_seq = int(self.db.version_info(version)["end_seq"])
        return {"memento_memory": {"version": version, "end_seq": end_seq}}

    @property
    def version(self) -> int:
        """The version the current state belongs to (0: empty)."""
        return self.db.head_version

    @property
    def frozen(self) -> bool:
        """Whether writes are refused."""
        return self.db.frozen

    def freeze(self) -> MementoMemory:
        """Make the memory read-only (writes raise MemoryFrozenError). Returns self."""
        self.db.freeze()
        return self

    @contextmanager
    def transaction(self, *, batch: int | None = None) -> Iterator[Transaction]:
        """One atomic update across the stores (pass ``tx=`` to the stores' write methods)."""
        with self.db.transaction(batch=batch) as tx:
            yield tx

    def commit_version(self, *, batch: int | None = None, note: str = "", tx: Transaction | None = None) -> int:
        """Record the current state as a new version and return its number."""
        return self.db.commit_version(batch=batch, note=note, tx=tx)

    def versions(self) -> list[dict[str, Any]]:
        """All versions, oldest first."""
        return [dict(v) for v in self.db.versions()]

    def rollback(self, version: int) -> int:
        """Restore ``version`` (audited in the change log); returns the number of items changed."""
        changed = self.db.rollback(version)
        logger.info("memory %s rolled back to version %d (%d items changed)", self.directory, version, changed)
        return changed

    def apply(self, store: str, ops: list[Any], *, batch: int, tx: Transaction) -> dict[str, int]:
        """Apply a :class:`~memento.memory.canonicalizer.Canonicalizer` plan to a store inside ``tx``.

        Returns counts per action. Counts are numbers of independent runs: an added item starts with as much
        support as it has backing runs (its provenance), a ``merge`` adds the candidate's runs that the target
        does not already count (so one run proposing the same item twice counts once), unites provenance (and
        sources for facts) and adopts the merged text; ``contradict`` adds the candidate's runs to a rule's
        contradiction count. A masked store is never written (every op counts as ``reject``).
        """
        created: dict[str, str] = {}
        counts = {"add": 0, "merge": 0, "supersede": 0, "contradict": 0, "reject": 0}
        if store not in self.stores:
            counts["reject"] = len(ops)
            return counts
        for i, op in enumerate(ops):
            counts[op.action] += 1
            if op.action == "reject":
                continue
            target = created.get(op.target, op.target) if op.target else None
            made = self._apply_one(store, op, target, batch=batch, tx=tx)
            if made is not None:
                created[f"new:{i}"] = made
        return counts

    @staticmethod
    def _runs(candidate: Any) -> int:
        return len(set(candidate.provenance)) or candidate.support

    @staticmethod
    def _new_runs(candidate: Any, provenance: list[str]) -> int:
        if not candidate.provenance:
            return candidate.support
        return len(set(candidate.provenance) - set(provenance))

    def _apply_one(self, store: str, op: Any, target: str | None, *, batch: int, tx: Transaction) -> str | None:
        """Apply one planned op; returns the id of a created item."""
        cand = op.candidate
        if target is None and op.action != "add":
            raise ValueError(f"a {op.action!r} op on the {store} store names no target")
        ref = target or ""  # used by the ops other than "add" only, which have a target
        if store == "facts":
            if op.action == "add":
                fact = self.facts.new_fact(
                    cand.entity,
                    cand.text,
                    sources=cand.sources,
                    batch=batch,
                    provenance=cand.provenance,
                    evidence=cand.backing,
                )
                return self.facts.put(fact.model_copy(update={"support": self._runs(cand)}), tx=tx).id
            if op.action == "merge":
                old = Fact.model_validate(tx.get("facts", ref))
                self.facts.merge_into(
                    ref,
                    text=op.merged,
                    sources=cand.sources,
                    support=self._new_runs(cand, old.provenance),
                    provenance=cand.provenance,
                    batch=batch,
                    evidence=cand.backing,
                    tx=tx,
                )
            elif op.action == "supersede":
                new = self.facts.new_fact(
                    cand.entity,
                    op.merged or cand.text,
                    sources=cand.sources,
                    batch=batch,
                    provenance=cand.provenance,
                    evidence=cand.backing,
                )
                self.facts.supersede(ref, new.model_copy(update={"support": self._runs(cand)}), tx=tx)
            return None
        if store == "craft":
            if op.action == "add":
                entry = CraftEntry(
                    text=cand.text,
                    provenance=sorted(set(cand.provenance)),
                    batch=batch,
                    support=self._runs(cand),
                    evidence=cand.backing,
                )
                return self.craft.put(entry, tx=tx).id
            if op.action == "merge":  # an edit of one entry (a delta), never a rewrite of the store
                current = CraftEntry.model_validate(tx.get("craft", ref))
                self.craft.put(
                    current.model_copy(
                        update={
                            "text": op.merged or current.text,
                            "support": current.support + self._new_runs(cand, current.provenance),
                            "provenance": sorted(set(current.provenance) | set(cand.provenance)),
                            "evidence": current.evidence.merged(cand.backing),
                        }
                    ),
                    tx=tx,
                )
            return None
        book = self.decomposition if store == "decomposition" else self.web_action
        if op.action == "add":
            rule = book.add(
                cand.text,
                provenance=cand.provenance,
                batch=batch,
                support=self._runs(cand),
                evidence=cand.backing,
                tx=tx,
            )
            return rule.id
        existing = Rule.model_validate(tx.get(book.store, ref))
        fresh = self._new_runs(cand, existing.provenance)
        if op.action == "contradict":
            book.reinforce(
                ref, contradiction=fresh, task_ids=cand.provenance, batch=batch, evidence=cand.backing, tx=tx
            )
            return None
        rule = book.reinforce(ref, support=fresh, task_ids=cand.provenance, batch=batch, evidence=cand.backing, tx=tx)
        if op.merged and op.merged != rule.text:
            book.update_text(ref, op.merged, batch=batch, tx=tx)
        return None

    def forget(self, query: Any, *, note: str = "") -> tuple[int | None, dict[str, list[dict[str, Any]]]]:
        """Remove every item ``query`` (a :class:`~memento.memory.forget.ForgetQuery`) matches, as a new version.

        Each removal is a change-log line (op ``forget``); a fact that a forgotten fact had superseded is current
        again (op ``unsupersede``) unless it is forgotten too. The version's note says what was asked, so ``memory
        diff`` shows what went and ``memory rollback`` to the version before brings it back. Returns the new version
        (``None`` when nothing matched: no version is made) and the removed records per store.
        """
        self.db._check_writable()
        removed: dict[str, list[dict[str, Any]]] = {}
        with self.transaction(batch=None) as tx:
            rows = self.db.items()
            gone = set()
            for row in rows:
                reason = query.match_item(row["store"], row["data"])
                if reason is not None:
                    tx.delete(row["store"], row["id"], op="forget")
                    removed.setdefault(row["store"], []).append({**row["data"], "_reason": reason})
                    gone.add(row["id"])
            if not gone:
                return None, {}
            for row in rows:  # a fact superseded by a forgotten fact is current again
                data = row["data"]
                if row["store"] == "facts" and row["id"] not in gone and data.get("superseded_by") in gone:
                    revived = {**data, "superseded_by": None}
                    tx.put("facts", row["id"], revived, op="unsupersede", **index_columns("facts", revived))
            version = self.commit_version(batch=None, note=note or f"forget: {query.describe()}", tx=tx)
        logger.info("memory %s: forgot %d items (%s); version %d", self.directory, len(gone), query.describe(), version)
        return version, removed

    # -- inspection --------------------------------------------------------------------------------------
    def snapshot(self, version: int | None = None) -> dict[str, Any]:
        """The memory at a version (the current state when None) as plain data, items sorted by id."""
        state = self.db.state_at(version)
        info = self.db.version_info(self.version if version is None else version)
        stores: dict[str, list[dict[str, Any]]] = {name: [] for name in STORES}
        for (store, _item_id), data in sorted(state.items()):
            stores.setdefault(store, []).append(data)
        return {
            "version": info["version"],
            "batch": info["batch"],
            "note": info["note"],
            "created_at": info["created_at"],
            "stores": stores,
        }

    def diff(self, a: int, b: int) -> MemoryDiff:
        """What changed from version ``a`` to version ``b`` in each store."""
        old, new = self.db.state_at(a), self.db.state_at(b)
        out: dict[str, StoreDiff] = {}
        for name in STORES:
            o = {k[1]: _visible_text(name, v) for k, v in old.items() if k[0] == name}
            n = {k[1]: _visible_text(name, v) for k, v in new.items() if k[0] == name}
            o = {k: v for k, v in o.items() if v}
            n = {k: v for k, v in n.items() if v}
            records_o = {k[1]: v for k, v in old.items() if k[0] == name}
            records_n = {k[1]: v for k, v in new.items() if k[0] == name}
            d = StoreDiff(chars_after=sum(len(t) for t in n.values()))
            for item_id in sorted(set(o) | set(n)):
                if item_id not in o:
                    d.added.append(item_id)
                    d.chars_added += len(n[item_id])
                elif item_id not in n:
                    d.removed.append(item_id)
                    d.chars_deleted += len(o[item_id])
                elif o[item_id] != n[item_id] or records_o[item_id] != records_n[item_id]:
                    d.modified.append(item_id)  # text, support, contradiction or status changed
                    d.chars_modified += _changed_chars(o[item_id], n[item_id])
            out[name] = d
        return MemoryDiff(a=a, b=b, stores=out)

    def content_items(self) -> Iterator[ItemRecord]:
        """Every item of M1-M4 as a normalised record, to compare two memories by content
        (:func:`memento.memory.memory_contents.diff_items`): no ids (a superseded fact says only that it is),
        provenance and sources as sorted sets."""
        from memento.memory.memory_contents import ItemRecord, sorted_list

        books: tuple[tuple[str, Callable[[], Iterable[BaseModel]]], ...] = (
            ("M1", self.craft.all),
            ("M2", self.decomposition.all),
            ("M3", self.web_action.all),
            ("M4", self.facts.all),
        )
        for paper, items in books:
            for item in items():
                data = item.model_dump(mode="json", exclude={"id"})
                if "superseded_by" in data:
                    data["superseded"] = data.pop("superseded_by") is not None
                for key in ("provenance", "sources"):
                    if isinstance(data.get(key), list):
                        data[key] = sorted_list(data[key])
                yield ItemRecord.of(paper, data)

    def stats(self) -> dict[str, Any]:
        """Counts per store and the version."""
        return {
            "version": self.version,
            "versions": len(self.db.versions()),
            "frozen": self.frozen,
            "craft": {"entries": len(self.craft), "chars": sum(len(e.text) for e in self.craft.all())},
            "decomposition": dict(self.decomposition.stats()),
            "web_action": dict(self.web_action.stats()),
            "facts": self.facts.stats(),
        }

    def export(self, out_dir: str | Path, *, version: int | None = None) -> Path:
        """Write ``memory.json`` and one markdown file per store; deterministic (same version -> same bytes)."""
        from memento.errors import DataError
        from memento.paths import writable_dir

        out = writable_dir(out_dir, what="export directory", error=DataError)
        snap = self.snapshot(version)
        atomic_write_text(out / "memory.json", json.dumps(snap, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        header = f"(memory version {snap['version']}, batch {snap['batch']})"
        craft = [CraftEntry.model_validate(d) for d in snap["stores"]["craft"]]
        lines = [f"# {_TITLES['craft']} {header}", ""]
        lines += [f"- {e.text}  \n  `{e.id}` support {e.support}, batch {e.batch}" for e in craft] or ["_empty_"]
        atomic_write_text(out / "craft.md", "\n".join(lines) + "\n")
        for name in ("decomposition", "web_action"):
            rules = [Rule.model_validate(d) for d in snap["stores"][name]]
            rules.sort(key=lambda r: (r.status == "retired", -r.support, r.id))
            lines = [f"# {_TITLES[name]} {header}", ""]
            lines += [
                f"- [{r.status}] {r.text}  \n  `{r.id}` support {r.support}, contradiction {r.contradiction}, "
                f"batches {r.created_batch}-{r.updated_batch}, tasks {', '.join(r.provenance) or '-'}"
                for r in rules
            ] or ["_empty_"]
            atomic_write_text(out / f"{name}_rules.md", "\n".join(lines) + "\n")
        facts = [Fact.model_validate(d) for d in snap["stores"]["facts"]]
        facts.sort(key=lambda f: (f.entity.lower(), f.superseded_by is not None, f.id))
        lines = [f"# {_TITLES['facts']} {header}", ""]
        entity = None
        for fact in facts:
            if fact.entity != entity:
                entity = fact.entity
                lines += ["", f"## {entity}"]
            mark = f" ~~superseded by {fact.superseded_by}~~" if fact.superseded_by else ""
            sources = ", ".join(fact.sources) or "-"
            lines.append(f"- {fact.text}{mark}  \n  `{fact.id}` sources {sources}; support {fact.support}")
        if not facts:
            lines.append("_empty_")
        atomic_write_text(out / "facts.md", "\n".join(lines) + "\n")
        return out

    # -- MemoryProvider (no exclusion) -------------------------------------------------------------------
    def view(
        self,
        *,
        exclude_task_id: str | None = None,
        relevance: RelevanceStage | None = None,
        dates: DateFilter | None = None,
        dating: DatingRecord | None = None,
    ) -> MemoryView:
        """A provider for one task instance that hides memory written by ``exclude_task_id``'s own run and every item
        its date filter ``dates`` forbids; it records what it shows in ``dating`` (see :class:`MemoryView`)."""
        return MemoryView(
            self, exclude_task_id=exclude_task_id, relevance=relevance or self.relevance, dates=dates, dating=dating
        )

    def craft_knowledge(self, task_text: str) -> str:
        """See :meth:`MemoryView.craft_knowledge`."""
        return self.view().craft_knowledge(task_text)

    def decomposition_rules(self, task_text: str) -> str:
        """See :meth:`MemoryView.decomposition_rules`."""
        return self.view().decomposition_rules(task_text)

    def web_action_rules(self, task_text: str) -> str:
        """See :meth:`MemoryView.web_action_rules`."""
        return self.view().web_action_rules(task_text)

    def known_facts(self, task_text: str) -> str:
        """See :meth:`MemoryView.known_facts`."""
        return self.view().known_facts(task_text)

    def search(self, query: str, k: int | None = None) -> list[str]:
        """See :meth:`MemoryView.search`."""
        return self.view().search(query, k)
