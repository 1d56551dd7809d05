"""The M1 relevance check: which stored research-strategy insights apply to the current task."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["JudgeRelevance"]


@reads_data
class JudgeRelevance(dspy.Signature):
    """You curate a research agent's memory of research strategies. Given the task the agent is about to research
    and a numbered list of strategy insights learned on earlier tasks, return the numbers of the insights that
    would actually help with THIS task (same kind of question, same kind of sources, same pitfalls). Leave out
    insights about a different domain or a different kind of question. Return an empty list when none applies."""

    task: str = dspy.InputField(desc="the task about to be researched")
    entries: str = data_input("numbered strategy insights, one per line")
    relevant: list[int] = dspy.OutputField(desc="numbers of the insights that apply, most useful first")
