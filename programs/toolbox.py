"""Per-call tool functions for the agents: ``search_memory``, ``search_web`` and ``scrape``, recorded per node.

A :class:`Toolbox` is made for one agent run (one sub-question, or one flat ReAct task). It calls the sample's
:class:`memento.web.web_tools.WebTools` (shared by all nodes of the sample, so URL counts stay per sample) through
its typed calls (``search``, ``open``), records each call whole through a
:class:`memento.web.tool_output.ToolRecorder` made with this run's node id, and gives the agent the text of the one
renderer (:mod:`memento.web.tool_output`). It answers ``search_memory`` from the session memory and any attached
:class:`memento.core.protocols.MemoryProvider`, optionally rewrites queries and reranks the typed hits through
callables, records the agent's steps (:meth:`Toolbox.step`, thought, tool, arguments and the call that answered)
and remembers every URL seen with its title/date/snippet so the agent's cited sources become
:class:`memento.core.types.Evidence` (taken from the typed results: no tool text is parsed). URLs the LM writes with
punctuation around them (``corpus://d1.``, ``(https://...)``) are cleaned before they are opened or matched, and a
web layer that raises becomes an ``error:`` observation the agent reads: a tool never raises into the agent (only a
fatal error propagates, to stop the run; see :func:`memento.core.error_policy.handle_error`).

Example:
    >>> from memento.programs.toolbox import Toolbox
    >>> box = Toolbox(web=None, node_id="n1")
    >>> box.functions()["search_web"]("dune author")
    'error: web search is not available in this session'
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memento.core.error_policy import handle_error
from memento.core.errors import Failure
from memento.core.types import AgentStep, Evidence, PageResult, SearchHit, SearchResults, ToolCall, ToolError
from memento.programs.bound_react import tool_spec
from memento.utils.scrub import scrub_url
from memento.utils.text import one_line
from memento.web.tool_output import ToolRecorder, render_result
from memento.web.web_tools import clean_url as web_clean_url

if TYPE_CHECKING:
    from memento.core.protocols import MemoryProvider
    from memento.programs.session_memory import SessionMemory
    from memento.web.web_tools import WebTools

__all__ = ["Toolbox", "SEARCH_MEMORY", "SEARCH_WEB", "SCRAPE", "clean_url", "Reranker"]

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

#: ``f(query, results) -> hits``: a reranker returns the hits to show, best first (a subset drops the others)
Reranker = Callable[[str, SearchResults], list[SearchHit]]


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


def _tool_error(failure: Failure) -> ToolError:
    return ToolError(reason=failure.reason, message=f"error: {failure}")


class Toolbox:
    """The tool functions of one agent run, with per-node recording and evidence tracking.

    Args:
        web: the sample's web tools (``None``: web tools answer that the web is unavailable).
        node_id: the tree node the calls belong to (recorded on each :class:`ToolCall` and :class:`AgentStep`).
        session: the sample's session memory for ``search_memory``.
        memory: attached persistent memory; its ``search`` joins the session hits.
        record: called with each ToolCall as it happens (e.g. appends to the trajectory).
        record_step: called with each :class:`AgentStep` of the agent (e.g. appends to the trajectory).
        rewrite: ``f(query) -> query`` applied before every web search (query-rewriting baseline).
        rerank: a :data:`Reranker` applied to every result list of two or more hits (rerank baseline); the record
            keeps every hit in engine order, the agent reads the reranked ones.
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
        record_step: Callable[[AgentStep], None] | None = None,
        rewrite: Callable[[str], str] | None = None,
        rerank: Reranker | None = None,
        memory_k: int = 5,
    ) -> None:
        self.web = web
        self.node_id = node_id
        self.session = session
        self.memory = memory
        self.record = record
        self.record_step = record_step
        self.rewrite = rewrite
        self.rerank = rerank
        self.memory_k = memory_k
        self.recorder = ToolRecorder(self._log, node_id=node_id)
        self.calls: list[ToolCall] = []
        self.steps: list[AgentStep] = []
        self.seen: dict[str, Evidence] = {}
        self.scraped: list[str] = []
        self.failures: list[str] = []  # recovered failures of helpers (query rewriting, reranking), one line each
        self._stepped = 0  # calls already attributed to a step

    def functions(self, *, with_memory: bool = True) -> dict[str, Callable[..., str]]:
        """The tool functions by name, for :class:`memento.programs.bound_react.BoundReAct`."""
        tools: dict[str, Callable[..., str]] = {"search_web": self.search_web, "scrape": self.scrape}
        if with_memory:
            tools["search_memory"] = self.search_memory
        return tools

    def step(self, index: int, thought: str, tool_name: str, tool_args: dict[str, Any], observation: str) -> None:
        """Record one agent step (the ``on_step`` hook of :class:`~memento.programs.bound_react.BoundReAct`).

        The step points at the call its tool recorded (an agent calls its tools one at a time, so that is the last
        call since the previous step); a step without one (``finish``, an unknown tool) keeps its observation text.
        """
        call = self.calls[-1] if len(self.calls) > self._stepped else None
        self._stepped = len(self.calls)
        step = AgentStep(
            node_id=self.node_id,
            index=index,
            thought=str(thought or ""),
            tool_name=str(tool_name or ""),
            tool_args=dict(tool_args or {}),
            call_id=call.id if call is not None else None,
            observation="" if call is not None else str(observation or ""),
        )
        self.steps.append(step)
        if self.record_step is not None:
            self.record_step(step)

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
            text = "\n".join(parts)
        elif error:
            text = f"error: memory search failed ({error}); search the web instead."
        else:
            text = "Nothing in memory matches; search the web."
        self.recorder.record("search_memory", {"query": query}, text, started=started, result_urls=urls, error=error)
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
            result: SearchResults | ToolError = self.web.search(sent)
        except Exception as exc:  # a tool never raises into the agent: it reads the error and goes on
            result = _tool_error(handle_error(exc, where="search_web", log=logger))
        args = {"query": sent} if sent == query else {"query": sent, "original_query": query}
        self.recorder.record("search_web", args, result, started=started)
        shown: list[SearchHit] | None = None
        if isinstance(result, SearchResults):
            for hit in result.hits:
                self._see(Evidence(url=hit.url, title=hit.title, snippet=hit.snippet[:400], published=hit.published))
            if self.rerank is not None and len(result.hits) > 1:
                try:
                    shown = list(self.rerank(sent, result)) or None  # an empty ranking keeps the engine's order
                except Exception as exc:  # keep the engine's order
                    handle_error(exc, where="reranking", record=self.failures.append, log=logger)
        text = self._render(result, hits=shown)
        if sent != query:
            text = f"(searched for: {sent})\n{text}"
        return text

    def scrape(self, url: str = "") -> str:
        """Read a page through the sample's WebTools (see :data:`SCRAPE`)."""
        started = time.perf_counter()
        url = clean_url(url)
        if self.web is None:
            return self._unavailable("scrape", {"url": scrub_url(url)}, started)
        try:
            result: PageResult | ToolError = self.web.open(url)
        except Exception as exc:  # a tool never raises into the agent: it reads the error and goes on
            result = _tool_error(handle_error(exc, where="scrape", log=logger))  # scrubbed: no password anywhere
        self.recorder.record("scrape", {"url": scrub_url(url)}, result, started=started)
        if isinstance(result, PageResult):
            known = self.seen.get(_norm_url(result.address)) or self.seen.get(_norm_url(result.url))
            published = result.published or (known.published if known is not None else None)
            page = Evidence(
                url=result.address, title=result.title, snippet=one_line(result.text)[:400], published=published
            )
            self._see(page, overwrite=True)
            if result.final_url:  # a citation of the URL asked for finds the page too
                self._see(page.model_copy(update={"url": result.url}), overwrite=True)
            self.scraped.append(page.url)
        return self._render(result)

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
        error = ToolError(reason="no web", message="error: web search is not available in this session")
        self.recorder.record(kind, args, error, started=started)
        return error.message

    def _render(self, result: SearchResults | PageResult | ToolError, *, hits: list[SearchHit] | None = None) -> str:
        render = getattr(self.web, "render", None)
        if callable(render):  # the sample's page and snippet budgets
            return str(render(result, hits=hits))
        return render_result(result)

    def _log(self, call: ToolCall) -> None:
        self.calls.append(call)
        if self.record is not None:
            self.record(call)
