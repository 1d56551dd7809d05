"""The agent's web tools: ``search_web`` and ``scrape`` as plain documented functions ready for ``dspy.ReAct``.

A :class:`WebTools` is made per task (it carries that task's date cutoff and undated policy) and records every
call as a :class:`~memento.types.ToolCall` for the trajectory. Tools never raise into the agent: a failure is a
short text answer plus a ToolCall with ``error`` set.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any

from memento.errors import DataError, handle_error
from memento.scrub import scrub, scrub_data, scrub_url
from memento.text import clip
from memento.types import ToolCall
from memento.web.search_result import SearchBackend, UndatedPolicy, coerce_date, filter_by_cutoff
from memento.web.url_cache import normalize_url

__all__ = ["WebTools", "clean_url"]

logger = logging.getLogger(__name__)

_RESULT_CHARS = 300  # how much of a tool's answer is kept in the ToolCall record


class WebTools:
    """Search and scrape tools for one task, with a date cutoff, recorded calls and URL counts.

    Args:
        backend: the search backend (an :class:`~memento.web.offline_corpus.OfflineCorpus`, DDGS, SearXNG ...).
            When it has a ``get(url)`` method (the offline corpus), ``scrape`` serves its documents without HTTP.
        fetcher: a :class:`~memento.web.fetcher.Fetcher` for other URLs; ``None`` restricts scraping to the corpus.
        cutoff: nothing published on or after this date is shown (date or ISO string).
        undated: ``"keep"`` or ``"drop"`` items without a date when a cutoff is set.
        k: results per search.
        page_chars: page text budget of ``scrape`` (longer pages are clipped).
        snippet_chars: snippet budget per search result.

    Example:
        >>> from memento.web.offline_corpus import OfflineCorpus
        >>> tools = WebTools(OfflineCorpus("corpus_index"), cutoff="2020-01-01")  # doctest: +SKIP
        >>> agent = dspy.ReAct("question -> answer", tools=[tools.search_web, tools.scrape])  # doctest: +SKIP
    """

    def __init__(
        self,
        backend: SearchBackend,
        fetcher: Any | None = None,
        *,
        cutoff: dt.date | str | None = None,
        undated: UndatedPolicy = "keep",
        k: int = 5,
        page_chars: int = 4000,
        snippet_chars: int = 240,
    ) -> None:
        if undated not in ("keep", "drop"):
            raise DataError(f"undated must be 'keep' or 'drop', not {undated!r}")
        self.backend = backend
        self.fetcher = fetcher
        try:
            self.cutoff: dt.date | None = coerce_date(cutoff)
        except ValueError:
            raise DataError(f"the cutoff must be a date (YYYY-MM-DD), not {cutoff!r}") from None
        self.undated: UndatedPolicy = undated
        self.k = k
        self.page_chars = page_chars
        self.snippet_chars = snippet_chars
        self._takes_undated = _accepts_undated(backend)
        self.tool_calls: list[ToolCall] = []
        self._lock = threading.Lock()
        self._searches = 0
        self._fetches = 0
        self._cache_hits = 0
        self._seen: set[str] = set()
        self._repeated = 0

    # ------------------------------------------------------------------ tools
    def search_web(self, query: str) -> str:
        """Search the web and return a numbered list of results (url, title, date, snippet).

        Use short keyword queries naming the entity and the fact you need (e.g. "Paul Clyne district attorney
        county"). Open a promising result with scrape(url) to read the full page.
        """
        query = (query or "").strip()
        start = time.perf_counter()
        with self._lock:
            self._searches += 1
        if not query:
            return self._record("search_web", {"query": query}, "error: empty query", start, error="empty query")
        try:
            if self._takes_undated:
                results = self.backend.search(query, k=self.k, before=self.cutoff, undated=self.undated)
            else:  # a minimal backend (the bare protocol): apply the undated policy here
                results = filter_by_cutoff(
                    self.backend.search(query, k=self.k, before=self.cutoff), self.cutoff, self.undated
                )
        except Exception as exc:  # a tool never raises into the agent (a fatal error stops the run)
            failure = handle_error(exc, where="search", log=logger)
            text = f"error: search failed: {failure.message}"
            return self._record("search_web", {"query": query}, text, start, error=failure.reason)
        if not results:
            text = f"No results for {query!r}" + (f" published before {self.cutoff}." if self.cutoff else ".")
            return self._record("search_web", {"query": query}, text, start)
        lines = []
        for i, r in enumerate(results, 1):
            date = f" ({r.published.isoformat()})" if r.published else ""
            snippet = clip(" ".join(r.snippet.split()), self.snippet_chars)
            title = " ".join((r.title or r.url).split())
            lines.append(f"[{i}] {title}{date}\n    {r.url}\n    {snippet}")
        return self._record(
            "search_web", {"query": query}, "\n".join(lines), start, result_urls=[r.url for r in results]
        )

    def scrape(self, url: str) -> str:
        """Open a web page (a URL from search_web results) and return its main text, clipped to a budget."""
        url = clean_url(url)
        start = time.perf_counter()
        key = normalize_url(url) if url else url
        with self._lock:
            self._fetches += 1
            if key in self._seen:
                self._repeated += 1
            else:
                self._seen.add(key)
        if not url:
            return self._record("scrape", {"url": scrub_url(url)}, "error: empty url", start, error="empty url")
        try:
            page = self._open(url)
        except Exception as exc:  # never raise into the agent (a fatal error stops the run)
            failure = handle_error(exc, where=f"scrape of {scrub_url(url)}", log=logger)
            return self._record(
                "scrape", {"url": scrub_url(url)}, f"error: {failure.message}", start, error=failure.reason
            )
        cached = bool(getattr(page, "from_cache", False))
        if cached:
            with self._lock:
                self._cache_hits += 1
        text = page.text or ""
        body = text[: self.page_chars]
        if len(text) > self.page_chars:
            body += f"\n[... clipped: {len(text) - self.page_chars} more characters]"
        date = f"\nPublished: {page.published.isoformat()}" if page.published else ""
        header = f"Title: {' '.join((page.title or '').split())}\nURL: {page.final_url or page.url}{date}\n\n"
        return self._record(
            "scrape",
            {"url": scrub_url(url)},
            header + body,
            start,
            result_urls=[scrub_url(page.final_url or page.url)],
            cached=cached,
        )

    # ------------------------------------------------------------- accounting
    def counts(self) -> dict[str, int]:
        """``searches``, ``fetches`` (scrape calls), ``fetch_cache_hits`` (served from the URL cache),
        ``unique_urls`` (distinct normalised URLs scraped) and ``repeated_urls`` (scrapes of an already-scraped URL).
        """
        with self._lock:
            return {
                "searches": self._searches,
                "fetches": self._fetches,
                "fetch_cache_hits": self._cache_hits,
                "unique_urls": len(self._seen),
                "repeated_urls": self._repeated,
            }

    def tools(self) -> list[Any]:
        """The tool functions, for ``dspy.ReAct(signature, tools=web_tools.tools())``."""
        return [self.search_web, self.scrape]

    # --------------------------------------------------------------- internals
    def _open(self, url: str) -> Any:
        getter = getattr(self.backend, "page", None)
        if callable(getter):
            page = getter(url, before=self.cutoff, undated=self.undated)
            if page is not None:
                return page
        if url.startswith("corpus://"):
            from memento.web.errors import NotInCorpus

            raise NotInCorpus(f"{url} is not in the offline corpus", url=url)
        if self.fetcher is None:
            from memento.web.errors import NotCached

            raise NotCached(f"{url} is not in the offline corpus and live fetching is off", url=url)
        return self.fetcher.fetch(url, before=self.cutoff, undated=self.undated)

    def _record(
        self,
        kind: str,
        args: dict[str, Any],
        text: str,
        start: float,
        *,
        result_urls: list[str] | None = None,
        cached: bool = False,
        error: str | None = None,
    ) -> str:
        text = scrub(text)  # what the agent reads (and so the LM prompt) never carries a secret or URL password
        call = ToolCall(
            kind=kind,
            args=scrub_data(args),
            result=clip(text, _RESULT_CHARS),
            result_urls=result_urls or [],
            cached=cached,
            ms=round((time.perf_counter() - start) * 1000, 3),
            error=error,
        )
        with self._lock:
            self.tool_calls.append(call)
        return text


def _accepts_undated(backend: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(backend.search).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return True
    return any(p.name == "undated" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


_TRAILING = ".,;:!?"
_PAIRS = {")": "(", "]": "[", "}": "{"}


def clean_url(url: str | None) -> str:
    """A URL as an LM wrote it, without the quoting and punctuation around it.

    Strips blanks, quotes, angle brackets, a wrapping ``[...]``, trailing sentence punctuation and closing brackets
    that have no opening partner in the URL (``https://x.org/a_(b)`` keeps its parenthesis; ``https://x.org/a).``
    loses both).
    """
    url = (url or "").strip().strip("<>\"'`")
    changed = True
    while url and changed:
        changed = False
        if len(url) > 1 and url[0] in "([{" and url[-1] == {"(": ")", "[": "]", "{": "}"}[url[0]]:
            url, changed = url[1:-1], True
        elif url[-1] in _TRAILING:
            url, changed = url[:-1], True
        elif url[-1] in _PAIRS and url.count(url[-1]) > url.count(_PAIRS[url[-1]]):
            url, changed = url[:-1], True
        elif url[0] in "([{" and url.count(url[0]) > url.count({"(": ")", "[": "]", "{": "}"}[url[0]]):
            url, changed = url[1:], True
        url = url.strip().strip("<>\"'`")
    return url
