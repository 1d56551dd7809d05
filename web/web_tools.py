"""The agent's web tools: typed ``search``/``open`` calls, and ``search_web``/``scrape`` text tools for ``dspy.ReAct``.

A :class:`WebTools` is made per task (it carries that task's date cutoff and undated policy). The typed calls
return :class:`~memento.core.types.SearchResults` (every hit, whole snippets), :class:`~memento.core.types.PageResult`
(the full scrubbed page text) or :class:`~memento.core.types.ToolError`; they count searches and fetches and record
nothing. The text tools are thin wrappers: typed call, then the one renderer (:mod:`memento.web.tool_output`, page text
clipped to ``page_chars`` there and only there), then the one recorder into ``tool_calls`` (node-less calls;
agents of a tree record through their own :class:`~memento.web.tool_output.ToolRecorder`, see
:class:`memento.programs.toolbox.Toolbox`). Tools never raise into the agent: a failure is an ``error:`` text
answer plus a ToolCall with ``error`` set.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any

from memento.core.error_policy import handle_error
from memento.core.errors import DataError
from memento.core.types import PageResult, SearchHit, SearchResults, ToolCall, ToolError, ToolResult
from memento.core.untrusted import quote_data
from memento.utils.scrub import scrub_url
from memento.web.errors import UndatedRefused
from memento.web.search_result import SearchBackend, UndatedPolicy, coerce_date, filter_by_cutoff
from memento.web.tool_output import PAGE_CHARS, SNIPPET_CHARS, ToolRecorder, render_result, render_search
from memento.web.url_cache import normalize_url

__all__ = ["WebTools", "clean_url"]

logger = logging.getLogger(__name__)


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
        page_chars: int = PAGE_CHARS,
        snippet_chars: int = SNIPPET_CHARS,
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
        self._lock = threading.Lock()
        self.tool_calls: list[ToolCall] = []  # calls made through the string tools (no node: bare dspy.ReAct use)
        self.recorder = ToolRecorder(self._append)
        self._searches = 0
        self._fetches = 0
        self._cache_hits = 0
        self._seen: set[str] = set()
        self._repeated = 0
        self._undated_dropped = 0  # results and pages the "drop" policy removed (recorded in the run's dating)

    # ------------------------------------------------------------ typed calls
    def search(self, query: str) -> SearchResults | ToolError:
        """Search the backend under the cutoff: every hit (whole snippets), or a :class:`ToolError`.

        Counts the search; records nothing (callers record through a :class:`ToolRecorder` with their node id).
        """
        query = (query or "").strip()
        with self._lock:
            self._searches += 1
        if not query:
            return ToolError(reason="empty query", message="error: empty query")
        try:
            found = self._search(query)
        except Exception as exc:  # a tool never raises into the agent (a fatal error stops the run)
            failure = handle_error(exc, where="search", log=logger)
            return ToolError(reason=failure.reason, message=f"error: search failed: {failure.message}")
        hits = [SearchHit(url=r.url, title=r.title, snippet=r.snippet, published=r.published) for r in found]
        return SearchResults(query=query, hits=hits, cutoff=self.cutoff)

    def open(self, url: str) -> PageResult | ToolError:
        """Read a page (offline corpus, else the fetcher) under the cutoff: its full scrubbed text, or a
        :class:`ToolError`. Counts the fetch, cache hits and repeated URLs; records nothing."""
        url = clean_url(url)
        key = normalize_url(url) if url else url
        with self._lock:
            self._fetches += 1
            if key in self._seen:
                self._repeated += 1
            else:
                self._seen.add(key)
        if not url:
            return ToolError(reason="empty url", message="error: empty url")
        try:
            page = self._open(url)
        except UndatedRefused as exc:  # the undated policy at work: counted, then answered as any refusal
            self._drop_count(1)
            failure = handle_error(exc, where=f"scrape of {scrub_url(url)}", log=logger)
            return ToolError(reason=failure.reason, message=f"error: {failure.message}")
        except Exception as exc:  # never raise into the agent (a fatal error stops the run)
            failure = handle_error(exc, where=f"scrape of {scrub_url(url)}", log=logger)
            return ToolError(reason=failure.reason, message=f"error: {failure.message}")
        cached = bool(getattr(page, "from_cache", False))
        if cached:
            with self._lock:
                self._cache_hits += 1
        final = str(page.final_url or page.url or url)
        return PageResult.of_text(
            url=url,
            final_url=final if final != url else "",
            title=page.title or "",
            published=page.published,
            cached=cached,
            text=page.text or "",
        )

    def _search(self, query: str) -> list[Any]:
        """The backend's results under the cutoff and the undated policy; under ``drop`` with a cutoff, the undated
        results that the ranking would have shown are counted (``undated_dropped``) and the dated ones fill in."""
        if not self._takes_undated:  # a minimal backend (the bare protocol): apply the undated policy here
            found = self.backend.search(query, k=self.k, before=self.cutoff)
            kept = filter_by_cutoff(found, self.cutoff, self.undated)
            self._drop_count(sum(1 for r in found if r.published is None) if self.undated == "drop" else 0)
            return kept
        if self.undated == "keep" or self.cutoff is None:
            return list(self.backend.search(query, k=self.k, before=self.cutoff, undated=self.undated))
        ranked = list(self.backend.search(query, k=self.k, before=self.cutoff, undated="keep"))
        undated = sum(1 for r in ranked if r.published is None)
        if not undated:
            return ranked  # the same results "drop" would give
        self._drop_count(undated)
        return list(self.backend.search(query, k=self.k, before=self.cutoff, undated="drop"))

    def _drop_count(self, n: int) -> None:
        if n:
            with self._lock:
                self._undated_dropped += n

    # ------------------------------------------------------------------ tools
    def search_web(self, query: str) -> str:
        """Search the web and return a numbered list of results (url, title, date, snippet).

        Use short keyword queries naming the entity and the fact you need (e.g. "Paul Clyne district attorney
        county"). Open a promising result with scrape(url) to read the full page.
        """
        started = time.perf_counter()
        result = self.search(query)
        self.recorder.record("search_web", {"query": (query or "").strip()}, result, started=started)
        return quote_data(self.render(result))

    def scrape(self, url: str) -> str:
        """Open a web page (a URL from search_web results) and return its main text, clipped to a budget."""
        started = time.perf_counter()
        result = self.open(url)
        self.recorder.record("scrape", {"url": scrub_url(clean_url(url))}, result, started=started)
        return quote_data(self.render(result))

    def render(self, result: ToolResult, *, hits: list[SearchHit] | None = None) -> str:
        """The observation text of a typed result under this task's budgets (``page_chars``, ``snippet_chars``)."""
        if hits is not None and isinstance(result, SearchResults):
            return render_search(result, snippet_chars=self.snippet_chars, hits=hits)
        return render_result(result, page_chars=self.page_chars, snippet_chars=self.snippet_chars)

    # ------------------------------------------------------------- accounting
    def counts(self) -> dict[str, int]:
        """``searches``, ``fetches`` (scrape calls), ``fetch_cache_hits`` (served from the URL cache),
        ``unique_urls`` (distinct normalised URLs scraped), ``repeated_urls`` (scrapes of an already-scraped URL)
        and ``undated_dropped`` (results and pages the ``drop`` undated policy removed).
        """
        with self._lock:
            return {
                "searches": self._searches,
                "fetches": self._fetches,
                "fetch_cache_hits": self._cache_hits,
                "unique_urls": len(self._seen),
                "repeated_urls": self._repeated,
                "undated_dropped": self._undated_dropped,
            }

    def _append(self, call: ToolCall) -> None:
        with self._lock:
            self.tool_calls.append(call)

    def tools(self) -> list[Any]:
        """The tool functions, for ``dspy.ReAct(signature, tools=web_tools.tools())``; their text is quoted data
        (:func:`memento.core.untrusted.quote_data`): add :data:`memento.core.untrusted.DATA_RULE` to the agent's
        instructions."""
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
