"""The cold-start exploration agent: learn how to research a kind of task before any experience (MEMENTO §3.4).

When craft knowledge (M1) is empty, :class:`ExplorationAgent` spends the exploration budget on search-and-scrape
cycles about *how to research* the kind of task (not on answering it) and returns research-strategy insights
that seed M1. At test time the budget is 0 by default (MEMENTO runs legal with 3 and no write-back).

Example:
    >>> from memento.programs.exploration_agent import ExplorationAgent
    >>> agent = ExplorationAgent(max_steps=3)
    >>> out = agent(task_kind="Predict who wins a U.S. Supreme Court case", web=web_tools)  # doctest: +SKIP
    >>> out.insights  # doctest: +SKIP
    ['Read the question presented and the lower-court ruling before news coverage.', ...]
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.error_policy import handle_error
from memento.memory.canonicalizer import is_no_data
from memento.programs.bound_react import BoundReAct
from memento.programs.toolbox import SCRAPE, SEARCH_WEB, Toolbox
from memento.signatures.explore_research_craft import ExploreResearchCraft

if TYPE_CHECKING:
    from memento.core.types import AgentStep, ToolCall
    from memento.web.web_tools import WebTools

__all__ = ["ExplorationAgent"]

logger = logging.getLogger(__name__)


class ExplorationAgent(dspy.Module):
    """A ReAct agent over ``search_web`` and ``scrape`` that writes research-strategy insights.

    Args:
        max_steps: the exploration budget: the hard cap on search-and-scrape steps per call.
        max_insights: how many insights to keep.

    A call ``agent(task_kind=..., web=WebTools)`` returns ``dspy.Prediction(insights=[...], steps=int)``;
    "no data" insights are dropped, and a failed exploration returns no insights (never raises, except for an
    unreachable LM).
    """

    usage_stage = "explore"

    def __init__(self, *, max_steps: int = 3, max_insights: int = 5) -> None:
        super().__init__()
        self.max_steps = max(1, int(max_steps))
        self.max_insights = max_insights
        self.agent = BoundReAct(ExploreResearchCraft, [SEARCH_WEB, SCRAPE], max_iters=self.max_steps)

    def forward(
        self,
        *,
        task_kind: str,
        web: WebTools | None,
        max_steps: int | None = None,
        node_id: str = "explore",
        record: Callable[[ToolCall], None] | None = None,
        record_step: Callable[[AgentStep], None] | None = None,
    ) -> dspy.Prediction:
        """Explore; ``record``/``record_step`` receive every tool call and agent step, tagged with ``node_id``."""
        if web is None or (max_steps is not None and max_steps <= 0):
            return dspy.Prediction(insights=[], steps=0)
        limit = self.max_steps if max_steps is None else min(max_steps, self.max_steps)
        box = Toolbox(web, node_id=node_id, record=record, record_step=record_step)
        try:
            out = self.agent(
                task_kind=task_kind,
                tools=box.functions(with_memory=False),
                on_step=box.step,
                max_iters=limit,
            )
        except Exception as exc:  # noqa: BLE001 - exploration is an optional warm-up
            handle_error(exc, where="exploration", log=logger)
            return dspy.Prediction(insights=[], steps=0)
        insights: list[str] = []
        for item in out.insights or []:
            text = " ".join(str(item).split())
            if text and not is_no_data(text) and text not in insights:
                insights.append(text)
        return dspy.Prediction(insights=insights[: self.max_insights], steps=int(out.steps))

    @staticmethod
    def describe(task: Any, examples: list[str]) -> str:
        """The ``task_kind`` text: the task's name and final-answer instructions plus a few example instances."""
        doc = " ".join((getattr(task.signature, "__doc__", "") or "").split())
        shown = "\n".join(f"- {e[:300]}" for e in examples[:3])
        return f"Task kind: {task.name}. {doc}\nExample instances:\n{shown}".strip()
