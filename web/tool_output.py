"""The one renderer of tool results (what an agent, a curator or a report reads) and the one tool-call recorder.

Web tools return typed results (:class:`~memento.core.types.SearchResults`, :class:`~memento.core.types.PageResult`,
:class:`~memento.core.types.ToolError`, see :meth:`memento.web.web_tools.WebTools.search` and ``.open``). Text is made
from them only here, at the moment a prompt needs it: a search is a numbered list (each snippet clipped to
``snippet_chars``), a page its header and text clipped to ``page_chars``. Records are made only by
:class:`ToolRecorder`, which writes the whole typed result into a :class:`~memento.core.types.ToolCall` tagged with the
node that made the call (known when the recorder is built: nothing is matched up afterwards).

Example:
    >>> from memento.core.types import SearchHit, SearchResults
    >>> hit = SearchHit(url="corpus://dune", title="Dune", snippet="A 1965 novel.")
    >>> print(render_result(SearchResults(query="dune", hits=[hit])))
    [1] Dune
        corpus://dune
        A 1965 novel.
    >>> calls = []
    >>> recorder = ToolRecorder(calls.append, node_id="n1")
    >>> _ = recorder.record("search_web", {"query": "dune"}, SearchResults(query="dune"))
    >>> calls[0].node_id, calls[0].search.query
    ('n1', 'dune')
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from memento.core.types import PageResult, SearchHit, SearchResults, ToolCall, ToolError, ToolResult
from memento.utils.text import one_line

__all__ = [
    "PAGE_CHARS",
    "SNIPPET_CHARS",
    "ToolRecorder",
    "render_search",
    "render_page",
    "render_result",
    "render_call",
    "call_line",
    "result_summary",
]

#: default page-text budget of an observation (``WebTools.page_chars``)
PAGE_CHARS = 4000
#: default snippet budget per search result in an observation (``WebTools.snippet_chars``)
SNIPPET_CHARS = 240


def render_search(
    results: SearchResults, *, snippet_chars: int = SNIPPET_CHARS, hits: list[SearchHit] | None = None
) -> str:
    """A numbered result list (``[n] title (date)`` / url / snippet); ``hits`` overrides the order shown (a reranked
    subset: the others are counted as omitted)."""
    shown = results.hits if hits is None else hits
    if not results.hits:
        when = f" published before {results.cutoff}." if results.cutoff else "."
        return f"No results for {results.query!r}{when}"
    lines = []
    for i, hit in enumerate(shown, 1):
        date = f" ({hit.published.isoformat()})" if hit.published else ""
        title = one_line(hit.title or hit.url)
        lines.append(f"[{i}] {title}{date}\n    {hit.url}\n    {one_line(hit.snippet, snippet_chars)}")
    omitted = len(results.hits) - len(shown)
    if omitted > 0:
        lines.append(f"({omitted} less relevant results omitted)")
    return "\n".join(lines)


def render_page(page: PageResult, *, page_chars: int = PAGE_CHARS) -> str:
    """The page's header (title, URL, date) and its text clipped to ``page_chars`` (saying how much was left out).

    A page whose text is not in memory (read back from JSON without the bank) says so instead of its text.
    """
    date = f"\nPublished: {page.published.isoformat()}" if page.published else ""
    header = f"Title: {one_line(page.title)}\nURL: {page.address}{date}\n\n"
    if not page.text_loaded:
        return header + f"[page text not loaded: {page.chars} characters, sha256 {page.sha256[:12]}]"
    body = page.text[:page_chars]
    if len(page.text) > page_chars:
        body += f"\n[... clipped: {len(page.text) - page_chars} more characters]"
    return header + body


def render_result(result: ToolResult | str, *, page_chars: int = PAGE_CHARS, snippet_chars: int = SNIPPET_CHARS) -> str:
    """The observation text of a typed result (an error reads ``error: ...``; text is returned as it is)."""
    if isinstance(result, SearchResults):
        return render_search(result, snippet_chars=snippet_chars)
    if isinstance(result, PageResult):
        return render_page(result, page_chars=page_chars)
    if isinstance(result, ToolError):
        return result.message or f"error: {result.reason}"
    return str(result)


def render_call(call: ToolCall, *, page_chars: int = PAGE_CHARS, snippet_chars: int = SNIPPET_CHARS) -> str:
    """The observation text of a recorded call, re-rendered from its typed result.

    Records written before results were typed carry only their clipped observation in ``result``: it is shown as
    it is (the compatibility path for old trajectory banks).
    """
    if call.search is not None:
        return render_search(call.search, snippet_chars=snippet_chars)
    if call.page is not None:
        return render_page(call.page, page_chars=page_chars)
    if call.error and not call.result:
        return f"error: {call.error}"
    return call.result


def result_summary(call: ToolCall, *, result_chars: int | None = 300) -> str:
    """A call's result on one line, clipped to ``result_chars`` (``None``: whole): a search lists every hit as
    ``title <url>``, a page is ``title <url>: text``; ``""`` for an error or an empty result."""
    if call.error:
        return ""
    if call.search is not None:
        hits = call.search.hits
        text = f"{len(hits)} results: " + " | ".join(f"{one_line(h.title or h.url)} <{h.url}>" for h in hits)
        if not hits:
            text = "0 results"
    elif call.page is not None:
        page = call.page
        body = page.text if page.text_loaded else f"[{page.chars} characters not loaded]"
        text = f"{one_line(page.title)} <{page.address}>: {body}"
    else:
        text = call.result
    return text.strip() if result_chars is None else one_line(text, result_chars)


def call_line(call: ToolCall, *, result_chars: int | None = 300) -> str:
    """One compact line per call for prompts: ``- kind(args) -> result`` (see :func:`result_summary`)."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.args.items())
    line = f"- {call.kind}({args})"
    if call.error:
        return f"{line} -> error: {one_line(call.error, 160)}"
    return f"{line} -> {result_summary(call, result_chars=result_chars) or '(empty)'}"


class ToolRecorder:
    """Writes one :class:`~memento.core.types.ToolCall` per tool call, whole and typed, into a sink.

    Args:
        sink: called with each record (a trajectory's ``add_tool_call``, a list's ``append``).
        node_id: the tree node (or agent) the calls belong to; fixed when the recorder is made, so a record is
            right when it is written even with many nodes calling tools at once.

    Example:
        >>> calls = []
        >>> rec = ToolRecorder(calls.append, node_id="q1")
        >>> rec.record("scrape", {"url": "corpus://x"}, ToolError(reason="NotInCorpus: x")).error
        'NotInCorpus: x'
    """

    def __init__(self, sink: Callable[[ToolCall], None] | None, *, node_id: str | None = None) -> None:
        self.sink = sink
        self.node_id = node_id

    def record(
        self, kind: str, args: dict[str, Any], outcome: ToolResult | str, *, started: float | None = None, **extra: Any
    ) -> ToolCall:
        """Record a call's outcome (typed result, error, or a text result such as ``search_memory``'s).

        ``extra`` sets other :class:`~memento.core.types.ToolCall` fields (``result_urls`` of a text result, ``error``).
        """
        fields: dict[str, Any] = {"kind": kind, "args": dict(args), "node_id": self.node_id}
        if started is not None:
            fields["ms"] = round((time.perf_counter() - started) * 1000, 3)
        if isinstance(outcome, SearchResults):
            fields.update(search=outcome, result_urls=outcome.urls)
        elif isinstance(outcome, PageResult):
            fields.update(page=outcome, result_urls=[outcome.address], cached=outcome.cached)
        elif isinstance(outcome, ToolError):
            fields.update(error=outcome.reason)
        else:
            fields["result"] = str(outcome)
        fields.update(extra)
        call = ToolCall(**fields)
        if self.sink is not None:
            self.sink(call)
        return call
