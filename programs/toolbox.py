"""Per-call tool functions for the agents: ``search_memory``, ``search_web`` and ``scrape``, recorded per node.

A :class:`Toolbox` is made for one agent run (one sub-question, or one flat ReAct task). It wraps the sample's
:class:`memento.web.web_tools.WebTools` (shared by all nodes of the sample, so URL counts stay per sample), tags the
web layer's :class:`memento.types.ToolCall` records with the node that made them, answers ``search_memory`` from
the session memory and any attached :class:`memento.protocols.MemoryProvider`, optionally rewrites queries and
reranks results through callables, and remembers every URL seen with its title/date/snippet so the agent's cited
sources become :class:`memento.types.Evidence`. URLs the LM writes with punctuation around them (``corpus://d1.``,
``(https://...)``) are cleaned before they are opened or matched, and a web layer that raises becomes an ``error:``
observation the agent reads: a tool never raises into the agent (only a fatal error propagates, to stop the run;
see :func:`memento.errors.handle_error`).

Example:
    >>> from memento.programs.toolbox import Toolbox
    >>> box = Toolbox(web=None, node_id="n1")
    >>> box.functions()["search_web"]("dune author")
    'error: web search is not available in this session'
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memento.errors import Failure, handle_error
from memento.programs.bound_react import tool_spec
from memento.scrub import scrub_url
from memento.text import clip
from memento.types import Evidence, ToolCall
from memento.web.web_tools import clean_url as web_clean_url

if TYPE_CHECKING:
    from memento.programs.session_memory import SessionMemory
    from memento.protocols import MemoryProvider
    from memento.web.web_tools import WebTools

__all__ = ["Toolbox", "SEARCH_MEMORY", "SEARCH_WEB", "SCRAPE", "clean_url", "parse_results"]

logger = logging.getLogger(__name__)

SEARCH_MEMORY = tool_spec(
    "search_memory",
    "Search memory BEFORE the web: answers already found earlier in this research session and known facts from "
    "earlier sessions, each with its sources. Use the key terms of the question as the query.",
    {"query": "string"},
)
SEARCH_WEB = tool_spec(
    "search_web",
    "Search the web and return a numbered list of results (title, date, url, snippet). Use short keyword queries "
    "naming the entity and the fact you need. Open a promising result with scrape(url) to read the full page.",
    {"query": "string"},
)
SCRAPE = tool_spec(
    "scrape",
    "Open a web page (a URL from search_web results) and return its main text, clipped to a budget.",
    {"url": "string"},
)

_claim_lock = threading.Lock()
_RESULT_HEAD = re.compile(r"^\[(\d+)\]\s+(.*?)(?:\s+\((\d{4}-\d{2}-\d{2})\))?\s*$")
_URL_LINE = re.compile(r"^\s+(\S+://\S+)\s*$")
_RESULT_CHARS = 300


def parse_results(text: str) -> list[tuple[str, Evidence]]:
    """Split ``search_web`` output into ``(block text, Evidence)`` per numbered result, in order.

    The format is the web layer's: ``[n] title (date)`` then an indented URL line then an indented snippet.
    Returns ``[]`` when the text is not a result list (no results, an error).
    """
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if _RESULT_HEAD.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    out: list[tuple[str, Evidence]] = []
    for block in blocks:
        head = _RESULT_HEAD.match(block[0])
        assert head is not None
        url = next((m.group(1) for line in block[1:] if (m := _URL_LINE.match(line))), None)
        if url is None:
            continue
        snippet = " ".join(line.strip() for line in block[1:] if line.strip() and line.strip() != url)
        try:
            published = dt.date.fromisoformat(head.group(3)) if head.group(3) else None
        except ValueError:  # "(2020-13-45)" in a title is no date
            published = None
        evidence = Evidence(url=url, title=head.group(2), snippet=snippet[:400], published=published)
        out.append(("\n".join(block), evidence))
    return out


def _parse_page(text: str) -> Evidence | None:
    """Evidence from ``scrape`` output (``Title: ...`` / ``URL: ...`` / ``Published: ...`` header, then text)."""
    head, _, body = text.partition("\n\n")
    fields: dict[str, str] = {}
    for line in head.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            fields[key.strip().lower()] = value.strip()
    url = fields.get("url")
    if not url:
        return None
    try:
        published = dt.date.fromisoformat(fields["published"][:10]) if fields.get("published") else None
    except ValueError:
        published = None
    return Evidence(url=url, title=fields.get("title", ""), snippet=" ".join(body.split())[:400], published=published)


_MARKDOWN_LINK = re.compile(r"^\[[^\]]*\]\((\S+)\)\W*$")


def clean_url(url: str | None) -> str:
    """A URL as an LM wrote it, without the quotes, brackets and sentence punctuation around it.

    The web layer's :func:`memento.web.web_tools.clean_url`, plus the markdown link ``[title](url)``:
    ``"corpus://d1."``, ``(https://x.org/a)``, ``[https://x.org/a]``, ``<https://x.org/a>,`` and
    ``[title](https://x.org/a)`` all become the bare URL; a bracket that belongs to the URL
    (``https://x.org/A_(b)``) stays.

    Example:
        >>> clean_url("[Dune](https://x.org/A_(b)).")
        'https://x.org/A_(b)'
    """
    url = str(url or "").strip()
    link = _MARKDOWN_LINK.match(url)
    return web_clean_url(link.group(1) if link else url)


def _norm_url(url: str) -> str:
    return scrub_url(clean_url(url)).rstrip("/").lower()


def _error_text(failure: Failure) -> str:
    return f"error: {failure}"


class Toolbox:
    """The tool functions of one agent run, with per-node recording and evidence tracking.

    Args:
        web: the sample's web tools (``None``: web tools answer that the web is unavailable).
        node_id: the tree node the calls belong to (recorded on each :class:`ToolCall`).
        session: the sample's session memory for ``search_memory``.
        memory: attached persistent memory; its ``search`` joins the session hits.
        record: called with each ToolCall as it happens (e.g. appends to the trajectory).
        rewrite: ``f(query) -> query`` applied before every web search (query-rewriting baseline).
        rerank: ``f(query, results_text) -> results_text`` applied to every result list (rerank baseline).
        memory_k: facts taken from ``memory.search`` per query.
    """

    def __init__(
        self,
        web: WebTools | None,
        *,
        node_id: str = "root",
        session: SessionMemory | None = None,
        memory: MemoryProvider | None = None,
        record: Callable[[ToolCall], None] | None = None,
        rewrite: Callable[[str], str] | None = None,
        rerank: Callable[[str, str], str] | None = None,
        memory_k: int = 5,
    ) -> None:
        self.web = web
        self.node_id = node_id
        self.session = session
        self.memory = memory
        self.record = record
        self.rewrite = rewrite
        self.rerank = rerank
        self.memory_k = memory_k
        self.calls: list[ToolCall] = []
        self.seen: dict[str, Evidence] = {}
        self.scraped: list[str] = []
        self.memory_hits = 0
        self.failures: list[str] = []  # recovered failures of helpers (query rewriting, reranking), one line each

    def functions(self, *, with_memory: bool = True) -> dict[str, Callable[..., str]]:
        """The tool functions by name, for :class:`memento.programs.bound_react.BoundReAct`."""
        tools: dict[str, Callable[..., str]] = {"search_web": self.search_web, "scrape": self.scrape}
        if with_memory:
            tools["search_memory"] = self.search_memory
        return tools

    # -- tools ---------------------------------------------------------------------------------------------------
    def search_memory(self, query: str = "") -> str:
        """Search the session memory and attached memory (see :data:`SEARCH_MEMORY`)."""
        started = time.perf_counter()
        query = str(query or "").strip()
        parts: list[str] = []
        urls: list[str] = []
        error = None
        if self.session is not None and query:
            hits = self.session.search(query, k=3)
            if hits:
                parts.append("Answered earlier in this session:")
                for entry in hits:
                    parts.append(entry.render())
                    for ev in entry.evidence:
                        self._see(ev)
                        urls.append(ev.url)
        if self.memory is not None and query:
            try:
                facts = list(self.memory.search(query, k=self.memory_k) or [])
            except Exception as exc:  # a broken memory answers with an error line, the agent goes on
                facts, error = [], handle_error(exc, where="memory search", log=logger).reason
            if facts:
                parts.append("Known facts from earlier sessions:")
                parts.extend(f"- {fact}" for fact in facts)
        if parts:
            self.memory_hits += 1
            text = "\n".join(parts)
        elif error:
            text = f"error: memory search failed ({error}); search the web instead."
        else:
            text = "Nothing in memory matches; search the web."
        self._log(
            ToolCall(
                kind="search_memory",
                args={"query": query},
                result=clip(text, _RESULT_CHARS),
                result_urls=urls,
                ms=_ms(started),
                error=error,
                node_id=self.node_id,
            )
        )
        return text

    def search_web(self, query: str = "") -> str:
        """Search the web through the sample's WebTools (see :data:`SEARCH_WEB`)."""
        started = time.perf_counter()
        query = str(query or "").strip()
        if self.web is None:
            return self._unavailable("search_web", {"query": query}, started)
        sent = query
        if self.rewrite is not None and query:
            try:
                sent = (self.rewrite(query) or "").strip() or query
            except Exception as exc:  # search the original query
                handle_error(exc, where="query rewriting", record=self.failures.append, log=logger)
        try:
            text = self.web.search_web(sent)
        except Exception as exc:  # a tool never raises into the agent: it reads the error and goes on
            text = _error_text(handle_error(exc, where="search_web", log=logger))
        record = self._claim("search_web", {"query": sent}, text, started)
        if sent != query:
            record.args["original_query"] = query
        results = parse_results(text)
        for _, ev in results:
            self._see(ev)
        if self.rerank is not None and len(results) > 1:
            try:
                text = self.rerank(sent, text)
            except Exception as exc:  # keep the engine's order
                handle_error(exc, where="reranking", record=self.failures.append, log=logger)
        if sent != query:
            text = f"(searched for: {sent})\n{text}"
        return text

    def scrape(self, url: str = "") -> str:
        """Read a page through the sample's WebTools (see :data:`SCRAPE`)."""
        started = time.perf_counter()
        url = clean_url(url)
        if self.web is None:
            return self._unavailable("scrape", {"url": url}, started)
        try:
            text = self.web.scrape(url)
        except Exception as exc:  # a tool never raises into the agent: it reads the error and goes on
            text = _error_text(handle_error(exc, where="scrape", log=logger))  # scrubbed: no password anywhere
        self._claim("scrape", {"url": scrub_url(url)}, text, started)
        page = _parse_page(text)
        if page is not None:
            known = self.seen.get(_norm_url(page.url))
            if known is not None and not page.published:
                page.published = known.published
            self._see(page, overwrite=True)
            self.scraped.append(page.url)
        return text

    # -- evidence ------------------------------------------------------------------------------------------------
    def evidence_for(self, sources: list[str] | None) -> tuple[list[Evidence], list[str]]:
        """Evidence for the URLs an agent cited: ``(kept, dropped)``; cited URLs never seen are dropped.

        When none of the citations were seen, the pages the agent read stand in as its evidence.
        """
        kept: list[Evidence] = []
        dropped: list[str] = []
        done: set[str] = set()
        for url in sources or []:
            key = _norm_url(str(url))
            if not key or key in done:
                continue
            done.add(key)
            ev = self.seen.get(key)
            if ev is None:
                dropped.append(str(url))
            else:
                kept.append(ev)
        if not kept:
            for url in self.scraped:
                key = _norm_url(url)
                if key not in done:
                    done.add(key)
                    kept.append(self.seen[key])
        return kept, dropped

    # -- internals -----------------------------------------------------------------------------------------------
    def _see(self, ev: Evidence, *, overwrite: bool = False) -> None:
        key = _norm_url(ev.url)
        if overwrite or key not in self.seen:
            self.seen[key] = ev

    def _unavailable(self, kind: str, args: dict[str, Any], started: float) -> str:
        text = "error: web search is not available in this session"
        self._log(ToolCall(kind=kind, args=args, result=text, ms=_ms(started), error="no web", node_id=self.node_id))
        return text

    def _claim(self, kind: str, args: dict[str, Any], text: str, started: float) -> ToolCall:
        """Tag the web layer's record of this call with the node (or make one when the web layer keeps none)."""
        record = None
        calls = getattr(self.web, "tool_calls", None)
        if isinstance(calls, list):
            with _claim_lock:
                unclaimed = [c for c in reversed(calls) if c.node_id is None and c.kind == kind]
                # the web layer may have recorded cleaned or redacted args: the result text then identifies the call
                record = next((c for c in unclaimed if c.args == args), None) or next(
                    (c for c in unclaimed if _same_result(c.result, text)), None
                )
                if record is not None:
                    record.node_id = self.node_id
        if record is None:
            urls = [ev.url for _, ev in parse_results(text)] if kind == "search_web" else []
            page = _parse_page(text) if kind == "scrape" else None
            if page is not None:
                urls = [page.url]
            error = text[len("error: ") :][:200] if text.startswith("error: ") else None
            if "url" in args:  # a password in a URL never reaches the trajectory
                args = {**args, "url": scrub_url(str(args["url"]))}
            record = ToolCall(
                kind=kind,
                args=dict(args),
                result=clip(text, _RESULT_CHARS),
                result_urls=urls,
                ms=_ms(started),
                error=error,
                node_id=self.node_id,
            )
        self._log(record)
        return record

    def _log(self, call: ToolCall) -> None:
        self.calls.append(call)
        if self.record is not None:
            self.record(call)


def _same_result(recorded: str | None, text: str) -> bool:
    """Whether a (possibly clipped, ``…``-ended) recorded result is the text a tool returned."""
    if not recorded:
        return False
    return recorded == text or (recorded.endswith("…") and text.startswith(recorded[:-1]))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
