"""Search results, the search-backend protocol and the date-cutoff filter every backend shares.

Cutoff semantics (used by every backend and by the fetcher): with ``before=date``, anything published ON or AFTER
that date is dropped; undated items follow a policy, ``"keep"`` (default) or ``"drop"``.

Example:
    >>> import datetime as dt
    >>> from memento.web.search_result import SearchResult, filter_by_cutoff
    >>> rs = [SearchResult(url="https://a", published=dt.date(2019, 5, 1)), SearchResult(url="https://b")]
    >>> [r.url for r in filter_by_cutoff(rs, before=dt.date(2019, 1, 1))]
    ['https://b']
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

__all__ = [
    "SearchResult",
    "SearchBackend",
    "UndatedPolicy",
    "filter_by_cutoff",
    "passes_cutoff",
    "parse_date",
    "coerce_date",
]

UndatedPolicy = Literal["keep", "drop"]


class SearchResult(BaseModel):
    """One hit of a search backend.

    Attributes:
        url: the page URL (``corpus://<doc_id>`` for offline-corpus documents without a URL).
        title: the page title.
        snippet: a short excerpt.
        published: the publication date when the backend knows it.
        source: the backend that produced it (``"offline"``, ``"ddgs"``, ``"searxng"``).
    """

    model_config = ConfigDict(extra="forbid")

    url: str
    title: str = ""
    snippet: str = ""
    published: dt.date | None = None
    source: str = ""


@runtime_checkable
class SearchBackend(Protocol):
    """Anything that answers a query with ranked results published before an optional cutoff."""

    def search(
        self, query: str, k: int = 10, before: dt.date | None = None, *, undated: UndatedPolicy = "keep"
    ) -> list[SearchResult]:
        """Return up to ``k`` results; with ``before``, none published on or after it (undated per ``undated``)."""
        ...


def passes_cutoff(published: dt.date | None, before: dt.date | None, undated: UndatedPolicy = "keep") -> bool:
    """Whether an item dated ``published`` may be shown under the cutoff ``before``.

    No cutoff lets everything through; a dated item passes when strictly earlier than the cutoff; an undated
    item passes when the policy is ``"keep"``.
    """
    if before is None:
        return True
    if published is None:
        return undated == "keep"
    return published < before


def filter_by_cutoff(
    results: Iterable[SearchResult], before: dt.date | None, undated: UndatedPolicy = "keep"
) -> list[SearchResult]:
    """The results that pass :func:`passes_cutoff`, in their original order."""
    return [r for r in results if passes_cutoff(r.published, before, undated)]


_ISO = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})")
_MONTHS = {
    m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))
}
_MDY = re.compile(r"^\s*([A-Za-z]{3})[a-z]*\.?\s+(\d{1,2}),\s*(\d{4})")
_DMY = re.compile(r"^\s*(\d{1,2})\s+([A-Za-z]{3})[a-z]*\.?,?\s+(\d{4})")


def parse_date(value: object) -> dt.date | None:
    """A date from a ``date``/``datetime``, an ISO string (``2020-03-01``, ``2020-03-01T10:00:00Z``) or an English
    leading date (``Mar 3, 2021``, ``3 March 2021``); ``None`` when there is none or it is invalid."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    text = str(value)
    try:
        m = _ISO.match(text)
        if m:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        m = _MDY.match(text)
        if m and m[1].lower() in _MONTHS:
            return dt.date(int(m[3]), _MONTHS[m[1].lower()], int(m[2]))
        m = _DMY.match(text)
        if m and m[2].lower() in _MONTHS:
            return dt.date(int(m[3]), _MONTHS[m[2].lower()], int(m[1]))
    except ValueError:
        return None
    return None


def coerce_date(value: dt.date | str | None) -> dt.date | None:
    """A cutoff given as a date or an ISO string; ``ValueError`` on a string that is not a date."""
    if value is None or isinstance(value, dt.date):
        return value.date() if isinstance(value, dt.datetime) else value
    parsed = parse_date(value)
    if parsed is None:
        raise ValueError(f"not a date: {value!r}")
    return parsed
