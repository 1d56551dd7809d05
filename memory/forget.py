"""Provenance and removal across a memory directory: which items a source taught, and forgetting them.

Every stored item names the pages and runs behind it (its :class:`~memento.core.types.EvidenceRecord`), so a memory
directory can answer "what did this site teach?" (``memento memory show --source DOMAIN``) and drop it
(``memento memory forget``). A :class:`ForgetQuery` selects items by id, by source (a page URL or a domain: its host
and subdomains) or by text (case-insensitive). :func:`forget_items` applies it to every store of the directory:

* MEMENTO's M1-M4 items (``memory.db``) are removed as a new version whose change-log lines say ``forget``, so
  ``memento memory diff`` shows them and ``memento memory rollback`` to the version before restores them;
* CBR cases (``cbr/cases.db``) and JitMem trajectories (``jitmem/trajectories.sqlite3``), which have no versions,
  get tombstones recorded in their bank's change log: they are never retrieved again.

Example:
    >>> query = ForgetQuery(sources=("evil.org",))
    >>> from memento.core.types import EvidenceRecord, SourcePage
    >>> query.match("f-1", EvidenceRecord(pages=[SourcePage(url="https://evil.org/a")]), ["some fact"])
    'source evil.org'
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memento.core.errors import ConfigError
from memento.core.types import EvidenceRecord, source_matches
from memento.memory.location import Location, parse_location

__all__ = ["ForgetQuery", "ForgottenItem", "ForgetReport", "MemoryItem", "memory_items", "forget_items"]

logger = logging.getLogger(__name__)

_CASES_DIR = "cbr"
_BANK_DIR = "jitmem"


@dataclass(frozen=True)
class ForgetQuery:
    """What to forget (or show): items with one of ``ids``, backed by one of ``sources`` (a page URL or a domain),
    or whose text contains one of ``texts`` (case-insensitive). An item matching any of them is selected."""

    ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (self.ids or self.sources or self.texts):
            raise ConfigError("say what to forget: --id, --source (a URL or a domain) or --text")
        if any(not str(s).strip() for s in (*self.ids, *self.sources, *self.texts)):
            raise ConfigError("an empty --id, --source or --text would match everything; give a value")

    def describe(self) -> str:
        """The query in one line (the version note of a forget)."""
        parts = [f"id {i}" for i in self.ids] + [f"source {s}" for s in self.sources]
        parts += [f"text {t!r}" for t in self.texts]
        return ", ".join(parts)

    def match(
        self, item_id: str, evidence: EvidenceRecord, texts: list[str], urls: list[str] | tuple[str, ...] = ()
    ) -> str | None:
        """Why an item is selected (``id X``, ``source S``, ``text T``), or ``None``; ``urls``: more source URLs
        it names (a fact's ``sources``)."""
        if item_id in self.ids:
            return f"id {item_id}"
        for source in self.sources:
            if evidence.names(source) or any(source_matches(url, source) for url in urls):
                return f"source {source}"
        lowered = "\n".join(texts).lower()
        for text in self.texts:
            if text.lower() in lowered:
                return f"text {text!r}"
        return None

    def match_item(self, store: str, data: dict[str, Any]) -> str | None:
        """:meth:`match` for a MEMENTO item record of ``store``."""
        evidence = EvidenceRecord.model_validate(data.get("evidence") or {})
        texts = [str(data.get("text", "")), str(data.get("entity", ""))]
        return self.match(str(data.get("id", "")), evidence, texts, urls=list(data.get("sources") or []))


@dataclass(frozen=True)
class MemoryItem:
    """One stored item of a memory directory, as ``memory show --source`` lists it."""

    store: str
    id: str
    text: str
    dated: dt.date | None
    evidence: EvidenceRecord


@dataclass(frozen=True)
class ForgottenItem:
    """One item forgotten: its store, id, text and why it was selected."""

    store: str
    id: str
    text: str
    reason: str


@dataclass
class ForgetReport:
    """What :func:`forget_items` did: the MEMENTO memory's version before and after (``None`` when untouched), the items
    removed (M1-M4) or tombstoned (cases, trajectories), and whether it only looked (``dry_run``)."""

    version_before: int | None = None
    version_after: int | None = None
    items: list[ForgottenItem] = field(default_factory=list)
    dry_run: bool = False

    def counts(self) -> dict[str, int]:
        """Items per store."""
        out: dict[str, int] = {}
        for item in self.items:
            out[item.store] = out.get(item.store, 0) + 1
        return out


def _case_store(directory: Location, *, frozen: bool) -> Any | None:
    """The case store of ``<directory>/cbr`` without its embedder or index (none is needed to list or tombstone)."""
    import threading

    from memento.memory.case_store import CaseStore, bank_exists, read_embedder_info

    bank = directory / _CASES_DIR
    if not bank_exists(bank):
        return None
    name, dim = read_embedder_info(bank)
    return CaseStore(bank, embedder_name=name, dim=dim, lock=threading.RLock(), frozen=frozen)


def _trajectory_bank(directory: Location, *, read_only: bool) -> Any | None:
    """The JitMem bank of ``<directory>/jitmem`` with the policy it was created with (``None`` when there is none)."""
    from memento.memory.trajectory_bank import TrajectoryBank, bank_exists

    bank = directory / _BANK_DIR
    if not bank_exists(bank):
        return None
    reader = TrajectoryBank.open_read_only(bank)
    if read_only:
        return reader
    policy = reader.policy
    reader.close()
    return TrajectoryBank(bank, policy=policy)


def memory_items(directory: str | Path | Location, query: ForgetQuery | None = None) -> list[MemoryItem]:
    """Every live item of a memory (a directory or a PostgreSQL location: M1-M4, cases, trajectories), or those
    ``query`` selects; read-only."""
    from memento.memory.memento_memory import MementoMemory
    from memento.memory.sqlite_store import memory_exists

    directory = parse_location(directory)
    out: list[MemoryItem] = []
    if memory_exists(directory):
        with MementoMemory(directory, read_only=True) as memory:
            for row in memory.db.items():
                data = row["data"]
                if row["store"] == "facts" and data.get("superseded_by"):
                    continue
                if row["store"] in ("decomposition", "web_action") and data.get("status") == "retired":
                    continue
                if query is not None and query.match_item(row["store"], data) is None:
                    continue
                text = f"[{data.get('entity')}] {data.get('text')}" if row["store"] == "facts" else data.get("text")
                evidence = EvidenceRecord.model_validate(data.get("evidence") or {})
                out.append(MemoryItem(row["store"], row["id"], str(text or ""), evidence.dated, evidence))
    cases = _case_store(directory, frozen=True)
    if cases is not None:
        try:
            for namespace in cases.all_namespaces():
                for case in cases.cases(namespace):
                    texts = [case.task_text, case.plan]
                    if query is None or query.match(case.id, case.evidence, texts) is not None:
                        out.append(MemoryItem("cases", case.id, case.task_text, case.evidence.dated, case.evidence))
        finally:
            cases.close()
    bank = _trajectory_bank(directory, read_only=True)
    if bank is not None:
        try:
            for entry in bank.entries():
                if entry.forgotten:
                    continue
                if query is not None and _bank_reason(bank, entry, query) is None:
                    continue
                out.append(MemoryItem("trajectories", entry.item_id, entry.task_text, entry.dated, entry.evidence))
        finally:
            bank.close()
    return out


def _bank_reason(bank: Any, entry: Any, query: ForgetQuery) -> str | None:
    """Why ``query`` selects a stored trajectory (its text is loaded only when a text is asked for)."""
    reason = query.match(entry.item_id, entry.evidence, [entry.task_text])
    if reason is None and entry.task_id in query.ids:
        reason = f"id {entry.task_id}"
    if reason is None and query.texts:
        reason = query.match(entry.item_id, EvidenceRecord(), [bank.full_text(entry.seq)])
    return reason


def forget_items(directory: str | Path | Location, query: ForgetQuery, *, dry_run: bool = False) -> ForgetReport:
    """Forget what ``query`` selects in every store of a memory (see the module docstring); the caller holds the
    memory's writer lock. ``dry_run`` only reports what would go."""
    from memento.memory.memento_memory import MementoMemory
    from memento.memory.sqlite_store import memory_exists

    directory = parse_location(directory)
    report = ForgetReport(dry_run=dry_run)
    if memory_exists(directory):
        with MementoMemory(directory, read_only=dry_run) as memory:
            report.version_before = report.version_after = memory.version
            if dry_run:
                for row in memory.db.items():
                    reason = query.match_item(row["store"], row["data"])
                    if reason is not None:
                        report.items.append(ForgottenItem(row["store"], row["id"], _text(row["data"]), reason))
            else:
                version, removed = memory.forget(query)
                if version is not None:
                    report.version_after = version
                for store, records in removed.items():
                    for data in records:
                        report.items.append(ForgottenItem(store, str(data["id"]), _text(data), data["_reason"]))
    cases = _case_store(directory, frozen=dry_run)
    if cases is not None:
        try:
            chosen: list[tuple[str, str, str]] = []
            for namespace in cases.all_namespaces():
                for case in cases.cases(namespace):
                    reason = query.match(case.id, case.evidence, [case.task_text, case.plan])
                    if reason is not None:
                        chosen.append((case.id, case.task_text, reason))
            if chosen and not dry_run:
                from memento.memory.backends import writer_lock

                with writer_lock(directory / _CASES_DIR):  # the case bank's own writer lock
                    for case_id, _case_text, reason in chosen:
                        cases.forget([case_id], reason=reason)
            report.items += [ForgottenItem("cases", cid, text, reason) for cid, text, reason in chosen]
        finally:
            cases.close()
    bank = _trajectory_bank(directory, read_only=dry_run)
    if bank is not None:
        try:
            hits = [(entry, _bank_reason(bank, entry, query)) for entry in bank.entries() if not entry.forgotten]
            for entry, reason in hits:
                if reason is None:
                    continue
                if not dry_run:
                    bank.forget([entry.seq], reason=reason)
                report.items.append(ForgottenItem("trajectories", entry.item_id, entry.task_text, reason))
        finally:
            bank.close()
    return report


def _text(data: dict[str, Any]) -> str:
    if data.get("entity"):
        return f"[{data['entity']}] {data.get('text', '')}"
    return str(data.get("text", ""))
