"""The tool-using sub-question agent of the Adaptive Exploration Tree (MEMENTO §3.3).

A ``dspy.ReAct`` agent (:class:`memento.programs.bound_react.BoundReAct`) over ``search_memory`` (the session memory
plus any attached declarative memory, consulted before the web), ``search_web`` and ``scrape``. Its step count is
capped at ``max_steps`` (``budgets.steps_per_question``) and counted. It never raises for a failed sub-question:
an unparseable reply, a tool crash or running out of steps yields ``status="failed"`` with the error, while an LM
that cannot be reached at all (:class:`memento.core.errors.LMUnavailableError`) propagates to stop the run.

M3 web-action rules arrive in the ``web_action_rules`` input, M4 known facts in ``known_facts`` and task-level
caller guidance (e.g. a JitMem payload) in ``context``.

Example:
    >>> from memento.programs.sub_question_agent import SubQuestionAgent
    >>> agent = SubQuestionAgent(max_steps=10)
    >>> out = agent(question="Who wrote Dune?", web=web_tools)  # doctest: +SKIP
    >>> out.status, out.answer, [e.url for e in out.evidence], out.steps  # doctest: +SKIP
    ('answered', 'Frank Herbert', ['corpus://dune'], 2)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError
from memento.core.types import AgentStep, ToolCall
from memento.core.untrusted import quote_data
from memento.programs.bound_react import BoundReAct
from memento.programs.toolbox import SCRAPE, SEARCH_MEMORY, SEARCH_WEB, Toolbox
from memento.signatures.solve_sub_question import SolveSubQuestion

if TYPE_CHECKING:
    from memento.core.protocols import MemoryProvider
    from memento.programs.session_memory import SessionMemory
    from memento.web.web_tools import WebTools

__all__ = ["SubQuestionAgent"]

logger = logging.getLogger(__name__)


class SubQuestionAgent(dspy.Module):
    """Answer one sub-question with memory and web tools under a hard step cap.

    Args:
        max_steps: the hard cap on tool steps (the ``finish`` step included, as in ``dspy.ReAct``).
        signature: the agent's signature (default :class:`memento.signatures.solve_sub_question.SolveSubQuestion`).

    Calling it returns a ``dspy.Prediction`` with ``answer`` (str or None), ``sources`` (cited URLs), ``evidence``
    (:class:`memento.core.types.Evidence` for cited URLs that were actually seen), ``steps``, ``status``
    (``answered``/``failed``), ``error``, ``warnings`` (e.g. cited URLs no tool returned, dropped) and ``tool_calls``
    (``search_memory`` calls among them, with what they found).
    """

    usage_stage = "solve"

    def __init__(self, *, max_steps: int = 10, signature: type[dspy.Signature] = SolveSubQuestion) -> None:
        super().__init__()
        if max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps
        self.agent = BoundReAct(signature, [SEARCH_MEMORY, SEARCH_WEB, SCRAPE], max_iters=max_steps)

    def forward(
        self,
        *,
        question: str,
        task: str = "",
        task_goal: str = "",
        web_action_rules: str = "",
        known_facts: str = "",
        context: str = "",
        web: WebTools | None = None,
        session: SessionMemory | None = None,
        memory: MemoryProvider | None = None,
        node_id: str = "root",
        record: Callable[[ToolCall], None] | None = None,
        record_step: Callable[[AgentStep], None] | None = None,
    ) -> dspy.Prediction:
        """Research ``question`` and return the outcome (never raises for a failed sub-question)."""
        if not question or not str(question).strip():
            raise ConfigError("a sub-question must be non-empty")
        box = Toolbox(web, node_id=node_id, session=session, memory=memory, record=record, record_step=record_step)
        outcome: dict[str, Any] = {
            "answer": None,
            "sources": [],
            "evidence": [],
            "steps": 0,
            "error": None,
            "warnings": [],
        }
        try:
            pred = self.agent(
                tools=box.functions(),
                on_step=box.step,
                task=task or question,
                task_goal=task_goal,
                question=question,
                web_action_rules=web_action_rules,
                known_facts=quote_data(known_facts),
                context=context,
            )
        except Exception as exc:
            failure = handle_error(exc, where=f"sub-question {node_id}", log=logger)
            outcome.update(status="failed", error=failure.reason[:500])
            outcome["steps"] = len(box.calls)
            return dspy.Prediction(**outcome, tool_calls=box.calls)
        answer = str(pred.get("answer") or "").strip()
        sources = [str(s) for s in (pred.get("sources") or []) if str(s).strip()]
        evidence, dropped = box.evidence_for(sources)
        outcome.update(answer=answer or None, sources=sources, evidence=evidence, steps=pred.steps)
        if not pred.finished:
            outcome.update(status="failed", error=f"ran out of steps ({self.max_steps}) before finishing")
        elif not answer:
            outcome.update(status="failed", error="the agent finished without an answer")
        else:
            outcome["status"] = "answered"
        outcome["warnings"].extend(box.failures)
        if dropped:
            outcome["warnings"].append(f"cited URLs no tool returned were dropped: {', '.join(dropped[:5])}")
        return dspy.Prediction(**outcome, tool_calls=box.calls)
