"""The leakage audit: what each example was shown that is dated on or after its cutoff (expected 0).

An example's audit is read from its trajectory, independently of the filter's decisions: the memory items recorded
with the prompts (:class:`~memento.core.types.DatingRecord` ``shown``: store, id and the item's own date) and every page
and search result in its tool calls, each compared with the example's cutoff. What the filter and the undated policy
kept away comes from the same record (``hidden``, ``undated_dropped``, ``pages_undated_dropped``): those counts are
the filter's, the rest is the audit's own. ``results.json`` and ``results.md`` of ``memento eval`` and ``memento
compare`` carry it per example and in total; ``memento report`` lists it; a comparison whose methods saw post-cutoff
items says so at the top of its report.

Example:
    >>> import datetime as dt
    >>> from memento.core.types import DatingRecord, ShownItem, Trajectory
    >>> traj = Trajectory(task_text="q", cutoff=dt.date(2003, 1, 1), dating=DatingRecord(
    ...     cutoff=dt.date(2003, 1, 1), shown=[ShownItem(store="facts", id="f-1", dated=dt.date(2007, 1, 1))]))
    >>> audit = LeakageAudit.of(traj)
    >>> audit.items_after_cutoff, audit.leaked
    (1, 1)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memento.core.types import Trajectory

__all__ = ["LeakageAudit", "StoreAudit", "audit_lines"]

_COUNTS = (
    "items_shown",
    "items_after_cutoff",
    "items_undated_kept",
    "pages_shown",
    "pages_after_cutoff",
    "pages_undated_kept",
    "items_hidden",
    "items_undated_dropped",
    "pages_undated_dropped",
)


class StoreAudit(BaseModel):
    """One store's part of an audit: items shown, shown after the cutoff, undated shown, hidden, undated dropped."""

    model_config = ConfigDict(extra="forbid")

    shown: int = 0
    after_cutoff: int = 0
    undated_kept: int = 0
    hidden: int = 0
    undated_dropped: int = 0

    def plus(self, other: StoreAudit) -> StoreAudit:
        return StoreAudit(**{k: getattr(self, k) + getattr(other, k) for k in type(self).model_fields})


class LeakageAudit(BaseModel):
    """The leakage audit of one example (``cutoff`` set) or of many (the totals: ``examples`` counted).

    ``items_after_cutoff`` and ``pages_after_cutoff`` should be 0: anything else is information from after the
    example's cutoff that reached a prompt. ``items_undated_kept`` / ``pages_undated_kept``: undated ones shown
    (the ``keep`` policy). ``items_hidden``: items the memory held dated on or after the cutoff and the filter kept
    away (on ``legal`` this counts rules learned from later cases); ``items_undated_dropped`` /
    ``pages_undated_dropped``: what the ``drop`` policy removed. ``after_cutoff`` names the offenders
    (``store:id date``, at most 20). ``filtered`` is false when the memory date filter was switched off.
    """

    model_config = ConfigDict(extra="forbid")

    cutoff: dt.date | None = None
    filtered: bool = True
    undated: str = "keep"
    items_shown: int = 0
    items_after_cutoff: int = 0
    items_undated_kept: int = 0
    pages_shown: int = 0
    pages_after_cutoff: int = 0
    pages_undated_kept: int = 0
    items_hidden: int = 0
    items_undated_dropped: int = 0
    pages_undated_dropped: int = 0
    by_store: dict[str, StoreAudit] = Field(default_factory=dict)
    after_cutoff: list[str] = Field(default_factory=list)
    examples: int = 1  # examples audited (totals)
    examples_with_cutoff: int = 0
    examples_leaking: int = 0  # examples shown anything dated on or after their cutoff

    @property
    def leaked(self) -> int:
        """Items and pages shown that are dated on or after the cutoff (the number that should be 0)."""
        return self.items_after_cutoff + self.pages_after_cutoff

    @classmethod
    def of(cls, trajectory: Trajectory | None, *, cutoff: dt.date | None = None) -> LeakageAudit:
        """The audit of one example's trajectory (``cutoff``: the example's, when the trajectory has none)."""
        audit = cls(examples=1)
        if trajectory is None:
            return audit.model_copy(update={"cutoff": cutoff, "examples_with_cutoff": int(cutoff is not None)})
        cut = trajectory.cutoff or cutoff
        dating = trajectory.dating
        audit.cutoff = cut
        audit.examples_with_cutoff = int(cut is not None)
        if dating is not None:
            audit.filtered, audit.undated = dating.filtered, dating.undated
            for item in dating.shown:
                store = audit.by_store.setdefault(item.store, StoreAudit())
                store.shown += 1
                if item.dated is None:
                    store.undated_kept += 1
                elif cut is not None and item.dated >= cut:
                    store.after_cutoff += 1
                    if len(audit.after_cutoff) < 20:
                        audit.after_cutoff.append(f"{item.store}:{item.id} {item.dated.isoformat()}")
            for name, n in dating.hidden.items():
                audit.by_store.setdefault(name, StoreAudit()).hidden += n
            for name, n in dating.undated_dropped.items():
                audit.by_store.setdefault(name, StoreAudit()).undated_dropped += n
            audit.pages_undated_dropped = dating.pages_undated_dropped
        for store in audit.by_store.values():
            audit.items_shown += store.shown
            audit.items_after_cutoff += store.after_cutoff
            audit.items_undated_kept += store.undated_kept
            audit.items_hidden += store.hidden
            audit.items_undated_dropped += store.undated_dropped
        pages = _pages(trajectory)
        audit.pages_shown = len(pages)
        for url, published in sorted(pages.items()):
            if published is None:
                audit.pages_undated_kept += 1
            elif cut is not None and published >= cut:
                audit.pages_after_cutoff += 1
                if len(audit.after_cutoff) < 20:
                    audit.after_cutoff.append(f"page:{url} {published.isoformat()}")
        audit.examples_leaking = int(audit.leaked > 0)
        return audit

    @classmethod
    def total(cls, audits: list[LeakageAudit]) -> LeakageAudit:
        """The sum of many examples' audits (``cutoff`` none, ``examples`` the number summed)."""
        out = cls(examples=0, filtered=all(a.filtered for a in audits) if audits else True)
        for audit in audits:
            for name in (*_COUNTS, "examples", "examples_with_cutoff", "examples_leaking"):
                setattr(out, name, getattr(out, name) + getattr(audit, name))
            for store, part in audit.by_store.items():
                out.by_store[store] = out.by_store.get(store, StoreAudit()).plus(part)
            room = 20 - len(out.after_cutoff)
            out.after_cutoff += audit.after_cutoff[: max(0, room)]
        policies = {a.undated for a in audits}
        out.undated = policies.pop() if len(policies) == 1 else "mixed"
        return out

    def summary(self) -> str:
        """One line: what was shown after the cutoff, undated ones kept, what the filter hid."""
        lead = (
            f"{self.leaked} shown dated on or after the cutoff ({self.items_after_cutoff} memory items, "
            f"{self.pages_after_cutoff} pages"
            + (f"; {self.examples_leaking} of {self.examples} examples" if self.examples > 1 else "")
            + ")"
        )
        return (
            f"{lead}; undated kept: {self.items_undated_kept} items, {self.pages_undated_kept} pages; hidden by the "
            f"cutoff filter: {self.items_hidden} items; dropped as undated ({self.undated}): "
            f"{self.items_undated_dropped} items, {self.pages_undated_dropped} pages"
            + ("" if self.filtered else "; the memory date filter was OFF")
        )


def _pages(trajectory: Trajectory) -> dict[str, dt.date | None]:
    """Every page and search result a run was shown, once per URL, with its newest known date."""
    out: dict[str, dt.date | None] = {}

    def see(url: str, published: dt.date | None) -> None:
        known = out.get(url)
        if url not in out or (published is not None and (known is None or published > known)):
            out[url] = published

    for call in trajectory.tool_calls:
        if call.search is not None:
            for hit in call.search.hits:
                see(hit.url, hit.published)
        if call.page is not None:
            see(call.page.address, call.page.published)
    return out


def audit_lines(audit: LeakageAudit | dict[str, Any] | None) -> list[str]:
    """Markdown lines of an audit's totals and its stores (``[]`` without one)."""
    if audit is None:
        return []
    if isinstance(audit, dict):
        audit = LeakageAudit.model_validate(audit)
    lines = [f"- {audit.summary()}"]
    for store, part in sorted(audit.by_store.items()):
        lines.append(
            f"  - `{store}`: shown {part.shown} (after the cutoff {part.after_cutoff}, undated {part.undated_kept}), "
            f"hidden {part.hidden}, undated dropped {part.undated_dropped}"
        )
    if audit.after_cutoff:
        lines.append("  - shown after the cutoff: " + ", ".join(f"`{x}`" for x in audit.after_cutoff))
    return lines
