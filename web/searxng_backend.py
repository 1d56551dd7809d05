"""Web search through a SearXNG instance's JSON API (``GET <base>/search?q=...&format=json``).

The instance must have the ``json`` format enabled (``search.formats`` in its settings.yml). Date cutoff:
SearXNG's ``time_range`` (day/week/month/year) only selects *recent* pages, the opposite of a cutoff, so it is
not sent; results are filtered locally on their ``publishedDate`` (undated ones follow the undated policy), and
further result pages are read (up to ``max_pages``) when filtering left fewer than ``k``.

Example:
    >>> from memento.web.searxng_backend import SearXNGBackend
    >>> SearXNGBackend("http://localhost:8888").search("DSPy", k=5)  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from memento.web.errors import SearchError
from memento.web.limits import process_semaphore
from memento.web.search_result import SearchResult, UndatedPolicy, coerce_date, filter_by_cutoff, parse_date

__all__ = ["SearXNGBackend"]

logger = logging.getLogger(__name__)


class SearXNGBackend:
    """A :class:`~memento.web.search_result.SearchBackend` over a SearXNG instance.

    Args:
        base_url: the instance URL (``http://localhost:8888``).
        timeout: request timeout in seconds.
        user_agent: the User-Agent header.
        max_concurrent: searches in flight across the process (shared semaphore).
        max_pages: result pages read at most per search.
        categories: SearXNG categories (``"general"``).
        language: SearXNG language (``"en"``, ``"all"``).

    Example:
        >>> backend = SearXNGBackend("http://127.0.0.1:8888", max_pages=2)  # doctest: +SKIP
        >>> backend.search("Treaty of Lisbon", k=5, before=datetime.date(2008, 1, 1))  # doctest: +SKIP
    """

    source_name = "searxng"

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 20.0,
        user_agent: str = "memento-dspy",
        max_concurrent: int = 8,
        max_pages: int = 3,
        categories: str = "general",
        language: str = "all",
    ) -> None:
        import requests

        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.user_agent = user_agent
        self.max_pages = max_pages
        self.categories = categories
        self.language = language
        self._session = requests.Session()
        self._semaphore = process_semaphore("search", max_concurrent)

    def __deepcopy__(self, memo: dict[int, Any]) -> SearXNGBackend:
        return self

    def search(
        self, query: str, k: int = 10, before: dt.date | str | None = None, *, undated: UndatedPolicy = "keep"
    ) -> list[SearchResult]:
        """Up to ``k`` results for ``query`` published before ``before`` (undated per ``undated``)."""
        before = coerce_date(before)
        kept: list[SearchResult] = []
        seen: set[str] = set()
        for page in range(1, self.max_pages + 1):
            rows = self._page(query, page)
            if not rows:
                break
            batch = []
            for row in rows:
                url = (row.get("url") or "").strip()
                if not url or url in seen:
                    continue
                seen.add(url)
                batch.append(
                    SearchResult(
                        url=url,
                        title=row.get("title") or "",
                        snippet=row.get("content") or "",
                        published=parse_date(row.get("publishedDate") or row.get("pubdate")),
                        source="searxng",
                    )
                )
            kept.extend(filter_by_cutoff(batch, before, undated))
            if len(kept) >= k:
                break
        return kept[:k]

    def _page(self, query: str, page: int) -> list[dict[str, Any]]:
        import requests

        params: dict[str, Any] = {
            "q": query,
            "format": "json",
            "pageno": page,
            "categories": self.categories,
            "language": self.language,
        }
        with self._semaphore:
            try:
                resp = self._session.get(
                    f"{self.base_url}/search",
                    params=params,
                    headers={"User-Agent": self.user_agent, "Accept": "application/json"},
                    timeout=self.timeout,
                )
            except requests.exceptions.RequestException as exc:
                raise SearchError(f"SearXNG at {self.base_url} unreachable: {type(exc).__name__}") from exc
        if resp.status_code == 403:
            raise SearchError(f"SearXNG at {self.base_url} refused format=json (enable it in search.formats)")
        if resp.status_code != 200:
            raise SearchError(f"SearXNG at {self.base_url} answered HTTP {resp.status_code}")
        try:
            data = resp.json()
        except ValueError:
            raise SearchError(f"SearXNG at {self.base_url} did not answer JSON") from None
        rows = data.get("results") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise SearchError(f"SearXNG at {self.base_url} answered JSON without a results list")
        return [r for r in rows if isinstance(r, dict)]
