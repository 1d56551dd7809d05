"""Cold start: research how to research a kind of task, seeding M1 with craft insights."""

from __future__ import annotations

import dspy

from memento.signatures._fields import reads_data

__all__ = ["ExploreResearchCraft"]


@reads_data
class ExploreResearchCraft(dspy.Signature):
    """You prepare a research agent for a new kind of task before it has any experience. Using web search and
    page scraping, find out how experts research tasks like the examples shown: which sources are authoritative,
    how to formulate queries, which facts must be checked, common pitfalls. Then write general research-strategy
    insights (one sentence each) that would help answer such tasks. Do not answer the example tasks."""

    task_kind: str = dspy.InputField(desc="a description of the kind of task, with a few example instances")
    insights: list[str] = dspy.OutputField(desc="research-strategy insights for this kind of task")
