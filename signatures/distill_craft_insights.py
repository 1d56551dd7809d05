"""Phase A, M1: per-sample research-craft insights distilled from one run, without ground truth."""

from __future__ import annotations

import dspy

from memento.llm.output_schema import limit
from memento.signatures._fields import data_input, reads_data

__all__ = ["DistillCraftInsights"]


@reads_data
class DistillCraftInsights(dspy.Signature):
    """You study how a research agent worked on one task to learn research craft that transfers to similar tasks.
    From the task and the record of the run (sub-questions asked, answers found, searches made and which pages
    were useful), write short, general insights on HOW to research this kind of task: which sources to consult,
    which questions to ask first, what to verify, which pitfalls to avoid. Do not state facts about the specific
    entities of this task and do not judge whether the final answer is right (no ground truth is available).
    Return at most three insights, each a single self-contained sentence.
    The run was also given some earlier insights (craft in use, numbered). List the numbers of any that the record
    shows to be wrong or misleading for this kind of task (an entry is retired when several runs agree); leave the
    list empty when none is, which is the usual case."""

    task: str = dspy.InputField(desc="the task that was researched")
    run_record: str = data_input("sub-questions, answers, searches and scraped pages of the run")
    craft_in_use: str = data_input("the earlier insights this run was given, numbered (may be empty)")
    insights: list[str] = limit(
        dspy.OutputField(desc="at most three transferable research-strategy insights"), max_items=3
    )
    retire: list[int] = dspy.OutputField(desc="numbers of insights in use that this run shows wrong (usually none)")
