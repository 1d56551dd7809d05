"""The ReAct-family baselines: a flat tool-using agent over ``search_web`` and ``scrape`` with a step cap.

Variants (same inputs and outputs as the Adaptive Exploration Tree):

* ``ReActAgent(task, web=...)`` - plain ReAct (method ``react``);
* ``ReActAgent(task, web=..., memory=provider)`` - the attached memory's text given as context (``react_memory``);
* ``query_rewriting=True`` - an LLM rewrites every query before it is searched (``react_rewrite``);
* ``rerank=True`` - an LLM reorders every result list, dropping irrelevant results (``react_rerank``);
* both together (``react_rewrite_rerank``).

Example:
    >>> from memento.programs.react_agent import ReActAgent
    >>> agent = ReActAgent("qa", web=factory, query_rewriting=True, rerank=True)  # doctest: +SKIP
    >>> agent(question="Who directed Inception?").answer  # doctest: +SKIP
    'Christopher Nolan'
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.errors import ConfigError
from memento.core.types import Node, SearchHit, SearchResults
from memento.core.untrusted import quote_data
from memento.memory.location import Location
from memento.programs.bound_react import BoundReAct
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall, ResearchProgram, join_context
from memento.programs.toolbox import SCRAPE, SEARCH_WEB, Toolbox
from memento.signatures.final_answer import answer_signature
from memento.signatures.rerank_results import RerankResults
from memento.signatures.rewrite_query import RewriteQuery
from memento.web.tool_output import render_search

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles
    from memento.tasks.task import Task

__all__ = ["ReActAgent"]

logger = logging.getLogger(__name__)


class ReActAgent(ResearchProgram):
    """A flat ``dspy.ReAct`` agent over the web tools, capped at ``max_steps`` tool steps.

    Args:
        task: the task spec or its name; the agent's signature is the task's, plus ``context``.
        web: factory of per-sample web tools (required).
        budgets: ``steps_per_question`` is the default step cap.
        memory: attached memory; its text (M1-M4) is given as context (the ``react_memory`` baseline).
        query_rewriting: rewrite each query with an LLM (:class:`memento.signatures.rewrite_query.RewriteQuery`).
        rerank: rerank each result list with an LLM (:class:`memento.signatures.rerank_results.RerankResults`).
        max_steps: the step cap (default ``budgets.steps_per_question``).
        history_window: the steps of its own trajectory the agent sees at each step (``None``: all).

    Example:
        >>> agent = ReActAgent("qa", web=factory, max_steps=8)  # doctest: +SKIP
        >>> agent(question="...").trajectory.nodes[0].steps <= 8  # doctest: +SKIP
        True
    """

    needs_web = True

    def __init__(
        self,
        task: Task | str,
        *,
        query_rewriting: bool = False,
        rerank: bool = False,
        max_steps: int | None = None,
        history_window: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(task, **kwargs)
        self.max_steps = max_steps or self.budgets.steps_per_question
        if self.max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1, got {self.max_steps}")
        self.query_rewriting = query_rewriting
        self.rerank = rerank
        suffix = "ReAct" + ("Memory" if self.memory is not None else "")
        self.agent = BoundReAct(
            answer_signature(self.task, findings=False, suffix=suffix),
            [SEARCH_WEB, SCRAPE],
            max_iters=self.max_steps,
            history_window=history_window,
        )
        self.agent.usage_stage = "solve"
        self.rewriter = dspy.Predict(RewriteQuery) if query_rewriting else None
        if self.rewriter is not None:
            self.rewriter.usage_stage = "rewrite"
        self.reranker = dspy.Predict(RerankResults) if rerank else None
        if self.reranker is not None:
            self.reranker.usage_stage = "rerank"
        name = "react"
        if self.memory is not None:
            name += "_memory"
        if query_rewriting:
            name += "_rewrite"
        if rerank:
            name += "_rerank"
        self.method = name

    def research(self, call: ResearchCall) -> dict[str, Any]:
        started = time.perf_counter()
        context = join_context(call.context, self.memory_text(call))
        rewrite = (lambda query: self._rewrite(call, query)) if self.rewriter is not None else None
        rerank = (lambda query, results: self._rerank(call, query, results)) if self.reranker is not None else None
        box = Toolbox(
            call.web,
            node_id="root",
            record=call.add_tool_call,
            record_step=call.add_step,
            rewrite=rewrite,
            rerank=rerank,
        )
        node = Node(id="root", parent_id=None, wave=0, question=call.task_text)
        call.trajectory.nodes.append(node)
        try:
            pred = self.agent(tools=box.functions(with_memory=False), on_step=box.step, context=context, **call.inputs)
        except Exception as exc:
            node.status = "failed"
            node.steps = len(box.calls)
            node.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            raise
        finally:
            call.trajectory.timings["solve_s"] = round(time.perf_counter() - started, 6)
        outputs = {name: pred.get(name) for name in self.task.output_fields}
        node.steps = pred.steps
        first = outputs.get(self.task.output_fields[0])
        node.answer = str(first) if first not in (None, "") else None
        sources = outputs.get("sources")
        cited = sources if isinstance(sources, list) else []
        node.evidence, dropped = box.evidence_for([str(u) for u in cited])
        if dropped:
            call.note(f"cited URLs no tool returned: {', '.join(dropped[:5])}")
        if not pred.finished:
            node.status = "failed"
            node.error = f"ran out of steps ({self.max_steps}) before finishing; the answer was extracted anyway"
        else:
            node.status = "answered" if node.answer else "failed"
        node.answered_seq = 1 if node.answer else None
        return outputs

    def _rewrite(self, call: ResearchCall, query: str) -> str:
        assert self.rewriter is not None  # wired only when query rewriting is on
        return str(self.rewriter(task=call.task_text, query=query).rewritten_query or "").strip()

    def _rerank(self, call: ResearchCall, query: str, results: SearchResults) -> list[SearchHit]:
        """The hits the LM ranked, best first (unranked hits are dropped); ``[]`` keeps the engine's order."""
        shown = render_search(results, snippet_chars=call.web.snippet_chars if call.web is not None else 240)
        assert self.reranker is not None  # wired only when reranking is on
        pred = self.reranker(task=call.task_text, query=query, results=quote_data(shown))
        order: list[int] = []
        for value in pred.ranking or []:
            try:
                index = int(value)
            except (TypeError, ValueError):
                continue
            if 1 <= index <= len(results.hits) and index not in order:
                order.append(index)
        return [results.hits[i - 1] for i in order]


# -- registry builders ------------------------------------------------------------------------------------------
def _react(task: Task, settings: Settings, roles: Roles | None, **options: Any) -> ReActAgent:
    from memento.web.factory import web_tools_factory

    return ReActAgent(
        task,
        web=web_tools_factory(settings),
        budgets=settings.budgets.model_copy(),
        threads=settings.run.threads,
        roles=roles,
        **options,
    )


@register_method("react")
def _build_react(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ReActAgent:
    return _react(task, settings, roles)


@register_method("react_rewrite")
def _build_react_rewrite(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ReActAgent:
    return _react(task, settings, roles, query_rewriting=True)


@register_method("react_rerank")
def _build_react_rerank(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ReActAgent:
    return _react(task, settings, roles, rerank=True)


@register_method("react_rewrite_rerank")
def _build_react_rewrite_rerank(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ReActAgent:
    return _react(task, settings, roles, query_rewriting=True, rerank=True)


@register_method("react_memory", reads="memento")
def _build_react_memory(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ReActAgent:
    from memento.memory.sqlite_store import memory_exists

    memory_dir = memory_dir or settings.memory.dir
    if memory_dir is None or not memory_exists(memory_dir):
        raise ConfigError(
            f"method react_memory needs an existing memory directory (--memory DIR); {memory_dir} does not exist"
        )
    from memento.memory.memento_memory import open_memory

    memory = open_memory(settings.memory, memory_dir, read_only=True, context_tokens=settings.role("lm").context_tokens)
    return _react(task, settings, roles, memory=memory)
