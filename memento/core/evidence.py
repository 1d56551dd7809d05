"""Dated evidence: what a stored item or a run's output rests on (the pages read, the runs, their dates), what was
shown to a task and what the cutoff hid (the leakage audit's record).

Example:
    >>> from memento.core.evidence import EvidenceRecord, SourcePage
    >>> EvidenceRecord(pages=[SourcePage(url="https://a.org/x", published="2020-05-01")]).dated
    datetime.date(2020, 5, 1)
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field, model_validator

from memento.core.record import _Record

__all__ = ["Evidence", "SourcePage", "SourceRun", "EvidenceRecord", "source_matches", "ShownItem", "DatingRecord"]


class Evidence(_Record):
    """A source an answer rests on."""

    url: str
    title: str = ""
    snippet: str = ""
    published: dt.date | None = None


class SourcePage(_Record):
    """A page behind a stored memory item: its URL and publication date (``None``: the page gave no date)."""

    url: str
    published: dt.date | None = None


class SourceRun(_Record):
    """A run behind a stored memory item: the id of the task it ran and that task's date cutoff (``None``: none)."""

    task_id: str
    cutoff: dt.date | None = None


def _evidence_date(pages: list[SourcePage], runs: list[SourceRun]) -> dt.date | None:
    """The newest date of the evidence (see :class:`EvidenceRecord`); ``None`` when any part of it is unknown."""
    cutoffs = [run.cutoff for run in runs]
    bound = None if not cutoffs or any(c is None for c in cutoffs) else max(c for c in cutoffs if c is not None)
    if not pages:
        return bound
    dates = [page.published or bound for page in pages]
    if any(d is None for d in dates):
        return None
    return max(d for d in dates if d is not None)


def _later(new: dt.date | None, old: dt.date | None) -> bool:
    """Whether ``new`` is a known date newer than ``old`` (any known date beats an unknown one)."""
    return new is not None and (old is None or new > old)


class EvidenceRecord(_Record):
    """What a stored memory item rests on: the pages behind it (URLs with publication dates) and the runs (task
    ids with their cutoffs) that learned it. Every store keeps one per item (M1-M4 entries, cases, trajectories).

    ``dated`` is the newest date of that evidence, recomputed whenever a record is built: each page counts with
    its publication date, an undated page with the cutoff of the runs that read it (the latest of them); an item
    without pages takes the latest cutoff of its runs. When a part has no date at all (an undated page read by a
    run without a cutoff, a run without a cutoff, no evidence) the item is undated (``None``). A task with cutoff
    C is shown only items dated strictly before C (:class:`memento.core.dating.DateFilter`); undated items follow the
    undated policy.

    Example:
        >>> record = EvidenceRecord(pages=[SourcePage(url="https://a.org/x", published=dt.date(2001, 5, 1))],
        ...                         runs=[SourceRun(task_id="t1", cutoff=dt.date(2008, 1, 1))])
        >>> record.dated
        datetime.date(2001, 5, 1)
        >>> EvidenceRecord(pages=[SourcePage(url="https://a.org/y")], runs=record.runs).dated
        datetime.date(2008, 1, 1)
    """

    pages: list[SourcePage] = Field(default_factory=list)
    runs: list[SourceRun] = Field(default_factory=list)
    dated: dt.date | None = None

    @model_validator(mode="after")
    def _date(self) -> EvidenceRecord:
        self.dated = _evidence_date(self.pages, self.runs)
        return self

    @classmethod
    def of(cls, pages: Any = (), runs: Any = ()) -> EvidenceRecord:
        """A record of these pages and runs, each URL and task id once, sorted (a URL seen both dated and undated
        keeps its newest known date; a task id keeps its latest known cutoff)."""
        by_url: dict[str, SourcePage] = {}
        for item in pages:
            page = item if isinstance(item, SourcePage) else SourcePage.model_validate(item)
            seen = by_url.get(page.url)
            if seen is None or _later(page.published, seen.published):
                by_url[page.url] = page
        by_task: dict[str, SourceRun] = {}
        for item in runs:
            run = item if isinstance(item, SourceRun) else SourceRun.model_validate(item)
            known = by_task.get(run.task_id)
            if known is None or _later(run.cutoff, known.cutoff):
                by_task[run.task_id] = run
        return cls(
            pages=sorted(by_url.values(), key=lambda p: p.url), runs=sorted(by_task.values(), key=lambda r: r.task_id)
        )

    def merged(self, other: EvidenceRecord | None) -> EvidenceRecord:
        """The union of two records (an item merged with a candidate, a rule reinforced by another run)."""
        if other is None:
            return self
        return EvidenceRecord.of([*self.pages, *other.pages], [*self.runs, *other.runs])

    @property
    def urls(self) -> list[str]:
        """The pages' URLs, sorted."""
        return [page.url for page in self.pages]

    @property
    def task_ids(self) -> list[str]:
        """The runs' task ids, sorted."""
        return [run.task_id for run in self.runs]

    @property
    def empty(self) -> bool:
        """No page and no run (an item stored before items were dated)."""
        return not self.pages and not self.runs

    def names(self, source: str) -> bool:
        """Whether a page of this record is ``source``: a URL (the same page, compared without scheme case,
        ``www.``, trailing slash or fragment) or a domain (the host or any subdomain of it).

        Example:
            >>> EvidenceRecord(pages=[SourcePage(url="https://news.evil.org/a")]).names("evil.org")
            True
        """
        return any(source_matches(page.url, source) for page in self.pages)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return ""
    return host.lower().removeprefix("www.")


def _page_key(url: str) -> str:
    from urllib.parse import urlsplit

    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return text.lower()
    host = (parts.hostname or "").lower().removeprefix("www.")
    port = f":{parts.port}" if parts.port not in (None, 80, 443) else ""
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{host}{port}{path}{query}"


def source_matches(url: str, source: str) -> bool:
    """Whether the page ``url`` is the ``source`` a user named: a URL (the same page) or a domain (its host or a
    subdomain; ``www.`` ignored).

    Example:
        >>> source_matches("https://www.evil.org/x/", "https://evil.org/x"), source_matches("https://a.org", "org")
        (True, True)
    """
    wanted = source.strip()
    if not wanted:
        return False
    if "://" in wanted:
        return _page_key(url) == _page_key(wanted)
    domain = wanted.lower().strip(".").removeprefix("www.")
    host = _host(url)
    return bool(host) and (host == domain or host.endswith("." + domain))


class ShownItem(_Record):
    """A memory item shown in one of a run's prompts: its store, id and date (``None``: undated)."""

    store: str
    id: str
    dated: dt.date | None = None


class DatingRecord(_Record):
    """What a run's cutoff let it see: the memory items shown (with their dates), and what the filter and the
    undated policy kept away (per store), for the leakage audit (:mod:`memento.records.leakage`).

    ``hidden``: items each store held dated on or after the cutoff (never shown); ``undated_dropped``: undated
    items the ``drop`` policy kept away; ``pages_undated_dropped``: web results and pages the ``drop`` policy
    removed. ``filtered=False`` when the memory date filter was switched off (``[memory] cutoff_filter``).
    """

    cutoff: dt.date | None = None
    undated: Literal["keep", "drop"] = "keep"
    filtered: bool = True
    shown: list[ShownItem] = Field(default_factory=list)
    hidden: dict[str, int] = Field(default_factory=dict)
    undated_dropped: dict[str, int] = Field(default_factory=dict)
    pages_undated_dropped: int = 0

    def show(self, store: str, items: Any) -> None:
        """Record items shown: ``(id, dated)`` pairs (each id once per store)."""
        known = {(s.store, s.id) for s in self.shown}
        for item_id, dated in items:
            if (store, str(item_id)) not in known:
                known.add((store, str(item_id)))
                self.shown.append(ShownItem(store=store, id=str(item_id), dated=dated))

    def count_hidden(self, store: str, hidden: int, undated: int) -> None:
        """Record a store's hidden counts (the largest seen, when a store is consulted more than once)."""
        if hidden:
            self.hidden[store] = max(self.hidden.get(store, 0), hidden)
        if undated:
            self.undated_dropped[store] = max(self.undated_dropped.get(store, 0), undated)

    def absorb(self, other: DatingRecord | None) -> None:
        """Add another record's shown items and counts (an executor's record inside a JitMem call)."""
        if other is None:
            return
        for item in other.shown:
            self.show(item.store, [(item.id, item.dated)])
        for store, n in other.hidden.items():
            self.count_hidden(store, n, 0)
        for store, n in other.undated_dropped.items():
            self.count_hidden(store, 0, n)
        self.pages_undated_dropped += other.pages_undated_dropped
