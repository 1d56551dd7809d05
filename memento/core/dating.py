"""Dated memory: the cutoff filter every memory read goes through, the evidence of a run, the undated policy.

Every stored memory item (M1-M4 entries, CBR cases, JitMem trajectories) carries one
:class:`~memento.core.types.EvidenceRecord` (the pages behind it with their publication dates, the runs with their
cutoffs) and that record's newest date (``dated``; ``None``: undated). A task with cutoff C is shown only items
dated strictly before C, the rule pages already follow (:func:`memento.web.search_result.passes_cutoff`); undated
items follow the one undated policy (``[web] undated``, the same setting as undated pages).

:class:`DateFilter` is that rule as one object, used by every store and every read path *before* top-K (an SQL
condition for the MEMENTO stores, a mask over the BM25 scores of the trajectory bank, a FAISS ID selector for the
case bank), so K eligible items come back when the store holds them. A store also counts what the filter kept
away (:meth:`DateFilter.hidden_sql`), which runs record in their :class:`~memento.core.types.DatingRecord`.

Example:
    >>> import datetime as dt
    >>> rule = DateFilter.of("2003-01-01", "keep")
    >>> rule.admits(dt.date(2001, 6, 1)), rule.admits(dt.date(2003, 1, 1)), rule.admits(None)
    (True, False, True)
    >>> rule.sql("dated")
    ('(dated IS NULL OR dated < ?)', ['2003-01-01'])
    >>> DateFilter.of(None).sql("dated")
    ('', [])
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from memento.core.types import EvidenceRecord, SourcePage, SourceRun

if TYPE_CHECKING:
    from memento.core.types import ToolCall, Trajectory

__all__ = [
    "DateFilter",
    "UndatedChoice",
    "NO_FILTER",
    "iso",
    "parse_iso",
    "resolve_undated",
    "read_pages",
    "held_pages",
    "run_evidence",
    "trajectory_evidence",
]

UndatedPolicy = Literal["keep", "drop"]
T = TypeVar("T")


def iso(value: dt.date | None) -> str | None:
    """A date as the ISO text the stores keep in their ``dated`` columns (``None`` stays ``None``)."""
    return value.isoformat() if value is not None else None


def parse_iso(value: Any) -> dt.date | None:
    """A ``dated`` column's value back as a date (``None``, ``""`` and unreadable text are ``None``)."""
    if value in (None, ""):
        return None
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


@dataclass(frozen=True)
class DateFilter:
    """What one task may see of memory: items dated strictly before ``cutoff``; undated items per ``undated``.

    Args:
        cutoff: the task's cutoff (``None``: no cutoff, everything passes, as for pages).
        undated: ``keep`` or ``drop`` items without a date (the one undated policy).
        enabled: ``False`` switches the date filter off (``[memory] cutoff_filter = false``): everything passes,
            and the leakage audit then reports what a task saw after its cutoff.

    Example:
        >>> import datetime as dt
        >>> DateFilter.of("2003-01-01", "drop").split([("a", dt.date(2001, 1, 1)), ("b", None)], lambda x: x[1])
        ([('a', datetime.date(2001, 1, 1))], 0, 1)
    """

    cutoff: dt.date | None = None
    undated: UndatedPolicy = "keep"
    enabled: bool = True

    @classmethod
    def of(cls, cutoff: dt.date | str | None, undated: str = "keep", *, enabled: bool = True) -> DateFilter:
        """A filter from a cutoff given as a date or ISO text."""
        from memento.core.errors import ConfigError

        if undated not in ("keep", "drop"):
            raise ConfigError(f"undated must be 'keep' or 'drop', not {undated!r}")
        day = parse_iso(cutoff)
        if cutoff not in (None, "") and day is None:
            raise ConfigError(f"invalid cutoff {cutoff!r}: expected a date (YYYY-MM-DD)")
        return cls(cutoff=day, undated=undated, enabled=enabled)  # type: ignore[arg-type]

    @property
    def active(self) -> bool:
        """Whether anything can be kept away (the filter is on and the task has a cutoff)."""
        return self.enabled and self.cutoff is not None

    def admits(self, dated: dt.date | None) -> bool:
        """Whether an item dated ``dated`` may be shown."""
        return self.verdict(dated) is None

    def verdict(self, dated: dt.date | None) -> Literal["after", "undated"] | None:
        """Why an item is kept away: ``after`` (dated on or after the cutoff), ``undated`` (the drop policy), or
        ``None`` (it is shown)."""
        if not self.active or self.cutoff is None:
            return None
        if dated is None:
            return None if self.undated == "keep" else "undated"
        return None if dated < self.cutoff else "after"

    def split(self, items: Iterable[T], date_of: Callable[[T], dt.date | None]) -> tuple[list[T], int, int]:
        """``(shown, hidden after the cutoff, undated dropped)`` of items in memory, order kept."""
        shown: list[T] = []
        after = undated = 0
        for item in items:
            why = self.verdict(date_of(item))
            if why is None:
                shown.append(item)
            elif why == "after":
                after += 1
            else:
                undated += 1
        return shown, after, undated

    def sql(self, column: str = "dated") -> tuple[str, list[str]]:
        """The SQL condition of what may be shown, over a column of ISO date text, with its parameters
        (``("", [])`` when everything passes). ISO dates compare as text in date order."""
        if not self.active or self.cutoff is None:
            return "", []
        if self.undated == "keep":
            return f"({column} IS NULL OR {column} < ?)", [self.cutoff.isoformat()]
        return f"({column} IS NOT NULL AND {column} < ?)", [self.cutoff.isoformat()]

    def hidden_sql(self, column: str = "dated") -> tuple[tuple[str, list[str]] | None, str | None]:
        """The SQL conditions counting what the filter keeps away: items dated on or after the cutoff (with its
        parameter) and undated items under ``drop`` (``None`` for a count that is always 0)."""
        if not self.active or self.cutoff is None:
            return None, None
        after = (f"({column} IS NOT NULL AND {column} >= ?)", [self.cutoff.isoformat()])
        return after, (f"({column} IS NULL)" if self.undated == "drop" else None)


#: the filter of a task without a cutoff: everything passes
NO_FILTER = DateFilter()


@dataclass(frozen=True)
class UndatedChoice:
    """The undated policy that applies and why (``memento config show`` prints it)."""

    policy: UndatedPolicy
    reason: str


def resolve_undated(setting: str | None, task: Any = None) -> UndatedChoice:
    """The one undated policy: the user's setting (``[web] undated``, ``MEMENTO_WEB_UNDATED``) wins; without one a
    task's declared default applies (a task declares one only where its paper does: ``Task.undated_policy``);
    otherwise undated pages and memory items are kept.

    Example:
        >>> resolve_undated("drop").policy, resolve_undated(None).policy
        ('drop', 'keep')
    """
    name = getattr(task, "name", "") or "the task"
    if setting in ("keep", "drop"):
        return UndatedChoice(setting, "set by web.undated")  # type: ignore[arg-type]
    declared = getattr(task, "undated_policy", None)
    if declared in ("keep", "drop"):
        return UndatedChoice(declared, f"web.undated is not set; task {name!r} declares {declared!r} as its default")
    if task is None:
        return UndatedChoice("keep", "web.undated is not set: undated pages and memory items are kept")
    return UndatedChoice(
        "keep", f"web.undated is not set and task {name!r} declares no default: undated pages and memory items are kept"
    )


def read_pages(run: Trajectory | Iterable[ToolCall], *, node_ids: Iterable[str] | None = None) -> list[SourcePage]:
    """The pages a run (or a list of its tool calls) opened: its successful ``scrape`` calls, exploration included,
    with their dates; ``node_ids`` keeps only the calls of those nodes."""
    wanted = set(node_ids) if node_ids is not None else None
    calls = run.tool_calls if hasattr(run, "tool_calls") else run
    out = []
    for call in calls:
        if call.page is None or (wanted is not None and call.node_id not in wanted):
            continue
        out.append(SourcePage(url=call.page.address, published=call.page.published))
        if call.page.final_url and call.page.url != call.page.address:  # a citation of the URL asked for
            out.append(SourcePage(url=call.page.url, published=call.page.published))
    return out


def held_pages(trajectory: Trajectory) -> list[SourcePage]:
    """Every page a run's record holds: the pages it opened and every search result it was shown."""
    out = read_pages(trajectory)
    for call in trajectory.tool_calls:
        if call.search is not None:
            out.extend(SourcePage(url=hit.url, published=hit.published) for hit in call.search.hits)
    return out


def run_evidence(trajectory: Trajectory, *, pages: Iterable[SourcePage] | None = None) -> EvidenceRecord:
    """The evidence of what one run learned: ``pages`` (default: the pages it opened) and the run itself (its task
    id and cutoff)."""
    chosen = read_pages(trajectory) if pages is None else list(pages)
    return EvidenceRecord.of(chosen, [SourceRun(task_id=trajectory.task_id, cutoff=trajectory.cutoff)])


def trajectory_evidence(trajectory: Trajectory) -> EvidenceRecord:
    """The evidence of a stored trajectory: every page it holds (opened pages and search results) and its run."""
    return run_evidence(trajectory, pages=held_pages(trajectory))
