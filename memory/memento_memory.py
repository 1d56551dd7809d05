"""MEMENTO's dual memory in one place: M1 craft knowledge, M2/M3 rule books, M4 domain facts.

:class:`MementoMemory` opens ``<dir>/memory.db`` (or a PostgreSQL database: ``postgresql://host/db``) and exposes
the four stores, versions (one per training batch), snapshots, diffs, rollback, freezing and a deterministic export
to readable markdown + JSON. It implements :class:`memento.core.protocols.MemoryProvider`; :meth:`MementoMemory.view`
returns a provider that hides what a given task's own run wrote and records which items it injected (the trainer
credits them).

Its parts live one per module: :mod:`~memento.memory.memory_budgets` (the four stores and their budgets),
:mod:`~memento.memory.memory_view` (a task's view) and :mod:`~memento.memory.memory_diff` (version diffs).

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

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memento.core.dating import DateFilter
from memento.core.types import CraftEntry, DatingRecord, Fact, Rule
from memento.memory.craft_knowledge import CraftKnowledge
from memento.memory.domain_store import DomainStore
from memento.memory.location import LocationLike
from memento.memory.memory_budgets import (
    PAPER_CONTEXT_SHARE,
    PAPER_NAMES,
    STORE_TITLES,
    STORES,
    MemoryBudgets,
    RelevanceStage,
    budgets_from_settings,
)
from memento.memory.memory_diff import MemoryDiff, StoreDiff, changed_chars, visible_text
from memento.memory.memory_view import MemoryView
from memento.memory.rule_book import RuleBook
from memento.memory.sqlite_store import SQLiteStore, Transaction, index_columns
from memento.utils.files import atomic_write_text

if TYPE_CHECKING:
    from memento.memory.item_record import ItemRecord

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
    "PAPER_CONTEXT_SHARE",
]

logger = logging.getLogger(__name__)


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
        from memento.core.errors import ConfigError

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
        from memento.core.errors import DataError

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
            STORE_TITLES[store],
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
        return len(set(candidate.provenance)) or int(candidate.support)

    @staticmethod
    def _new_runs(candidate: Any, provenance: list[str]) -> int:
        if not candidate.provenance:
            return int(candidate.support)
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
            o = {k[1]: visible_text(name, v) for k, v in old.items() if k[0] == name}
            n = {k[1]: visible_text(name, v) for k, v in new.items() if k[0] == name}
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
                    d.chars_modified += changed_chars(o[item_id], n[item_id])
            out[name] = d
        return MemoryDiff(a=a, b=b, stores=out)

    def content_items(self) -> Iterator[ItemRecord]:
        """Every item of M1-M4 as a normalised record, to compare two memories by content
        (:func:`memento.memory.memory_contents.diff_items`): no ids (a superseded fact says only that it is),
        provenance and sources as sorted sets."""
        from memento.memory.item_record import ItemRecord, sorted_list

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
        from memento.core.errors import DataError
        from memento.core.paths import writable_dir

        out = writable_dir(out_dir, what="export directory", error=DataError)
        snap = self.snapshot(version)
        atomic_write_text(out / "memory.json", json.dumps(snap, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        header = f"(memory version {snap['version']}, batch {snap['batch']})"
        craft = [CraftEntry.model_validate(d) for d in snap["stores"]["craft"]]
        lines = [f"# {STORE_TITLES['craft']} {header}", ""]
        lines += [f"- {e.text}  \n  `{e.id}` support {e.support}, batch {e.batch}" for e in craft] or ["_empty_"]
        atomic_write_text(out / "craft.md", "\n".join(lines) + "\n")
        for name in ("decomposition", "web_action"):
            rules = [Rule.model_validate(d) for d in snap["stores"][name]]
            rules.sort(key=lambda r: (r.status == "retired", -r.support, r.id))
            lines = [f"# {STORE_TITLES[name]} {header}", ""]
            lines += [
                f"- [{r.status}] {r.text}  \n  `{r.id}` support {r.support}, contradiction {r.contradiction}, "
                f"batches {r.created_batch}-{r.updated_batch}, tasks {', '.join(r.provenance) or '-'}"
                for r in rules
            ] or ["_empty_"]
            atomic_write_text(out / f"{name}_rules.md", "\n".join(lines) + "\n")
        facts = [Fact.model_validate(d) for d in snap["stores"]["facts"]]
        facts.sort(key=lambda f: (f.entity.lower(), f.superseded_by is not None, f.id))
        lines = [f"# {STORE_TITLES['facts']} {header}", ""]
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
