"""Live web search through the ``ddgs`` metasearch package (no API key).

Date cutoff: DuckDuckGo accepts a custom date range (``df=YYYY-MM-DD..YYYY-MM-DD``), so a cutoff in the past is
sent as the range ``1990-01-01..<cutoff - 1 day>`` to the ``duckduckgo`` engine; the relative limits ``d/w/m/y``
of the other engines only select *recent* pages, the opposite of a cutoff, so they are never used. Results are
then always filtered locally: text results carry no date field, but many snippets start with one
("Mar 3, 2021 — ..."), which is parsed; the rest are undated and follow the undated policy.

Example:
    >>> from memento.web.ddgs_backend import DDGSBackend
    >>> DDGSBackend().search("DSPy framework", k=5)  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any

from memento.web.errors import SearchError
from memento.web.limits import process_semaphore
from memento.web.search_result import SearchResult, UndatedPolicy, coerce_date, filter_by_cutoff, parse_date

__all__ = ["DDGSBackend"]

logger = logging.getLogger(__name__)

_EPOCH = dt.date(1990, 1, 1)
_LEAD = re.compile(r"^\s*(.{6,20}?)\s*(?:—|–|·|\.\.\.|-)\s+")


class DDGSBackend:
    """A :class:`~memento.web.search_result.SearchBackend` over ``ddgs.DDGS().text``.

    Args:
        client: a ``DDGS``-like object with ``text(query, **kwargs) -> list[dict]`` (default: a lazily created
            ``ddgs.DDGS``; tests inject a fake).
        backend: the ddgs engines (``"auto"``, ``"duckduckgo"``, ``"bing,brave"`` ...) used without a cutoff.
        region: ddgs region (``"us-en"``).
        safesearch: ``"on"``, ``"moderate"`` or ``"off"``.
        timeout: request timeout in seconds.
        max_concurrent: searches in flight across the process (shared semaphore).
        date_range: send past cutoffs to DuckDuckGo as a custom date range.

    Example:
        >>> backend = DDGSBackend(region="uk-en")  # doctest: +SKIP
        >>> backend.search("Brexit referendum result", k=5, before=datetime.date(2016, 6, 20))  # doctest: +SKIP
    """

    source_name = "ddgs"

    def __init__(
        self,
        *,
        client: Any | None = None,
        backend: str = "auto",
        region: str = "us-en",
        safesearch: str = "moderate",
        timeout: float = 20.0,
        max_concurrent: int = 8,
        date_range: bool = True,
    ) -> None:
        self._client = client
        self.backend = backend
        self.region = region
        self.safesearch = safesearch
        self.timeout = timeout
        self.date_range = date_range
        self._semaphore = process_semaphore("search", max_concurrent)

    def __deepcopy__(self, memo: dict[int, Any]) -> DDGSBackend:
        return self

    def _get_client(self) -> Any:
        if self._client is None:
            from ddgs import DDGS

            self._client = DDGS(timeout=int(max(1, self.timeout)))
        return self._client

    def provider_args(self, before: dt.date | None, *, today: dt.date | None = None) -> dict[str, Any]:
        """The ddgs arguments expressing the cutoff ``before`` (``{}`` when the provider cannot help)."""
        today = today or dt.date.today()
        if before is None or before > today or not self.date_range:
            return {}
        end = max(_EPOCH, before - dt.timedelta(days=1))
        return {"backend": "duckduckgo", "timelimit": f"{_EPOCH.isoformat()}..{end.isoformat()}"}

    def search(
        self, query: str, k: int = 10, before: dt.date | str | None = None, *, undated: UndatedPolicy = "keep"
    ) -> list[SearchResult]:
        """Up to ``k`` web results for ``query`` published before ``before`` (undated per ``undated``)."""
        before = coerce_date(before)
        kwargs: dict[str, Any] = {
            "region": self.region,
            "safesearch": self.safesearch,
            "max_results": k * 2 if before else k,
            "backend": self.backend,
        }
        kwargs.update(self.provider_args(before))
        with self._semaphore:
            try:
                rows = self._get_client().text(query, **kwargs) or []
            except Exception as exc:
                if "no results" in str(exc).lower():
                    return []
                raise SearchError(f"ddgs search failed for {query!r}: {type(exc).__name__}: {exc}") from exc
        results = []
        seen: set[str] = set()
        for row in rows:
            url = (row.get("href") or row.get("url") or "").strip()
            if not url or url in seen:
                continue
            seen.add(url)
            snippet = row.get("body") or row.get("snippet") or ""
            published = parse_date(row.get("date")) or _snippet_date(snippet)
            results.append(
                SearchResult(url=url, title=row.get("title") or "", snippet=snippet, published=published, source="ddgs")
            )
        return filter_by_cutoff(results, before, undated)[:k]


def _snippet_date(snippet: str) -> dt.date | None:
    """A leading date of a search snippet (``"Mar 3, 2021 — ..."``, ``"2021-03-03 · ..."``)."""
    m = _LEAD.match(snippet)
    return parse_date(m.group(1)) if m else None
