"""Decompose: wave 0 of the Adaptive Exploration Tree (MEMENTO §3.3)."""

from __future__ import annotations

import dspy

from memento.llm.output_schema import limit
from memento.signatures._fields import caller_context, craft_knowledge, decomposition_rules, takes_guidance, task_goal

__all__ = ["Decompose"]


@takes_guidance
class Decompose(dspy.Signature):
    """You plan the research for a task that will be answered from web evidence.

    The task goal says what the final answer must give and under which constraints: plan for every output it names,
    and respect its constraints (for example "do not identify the case") in every sub-question you write.

    Break the task into focused, self-contained sub-questions whose answers, taken together, are enough to
    produce the final answer. Each sub-question must be answerable by one short web investigation (a few searches
    and page reads) and must name its entities explicitly: never write "he", "the film" or "that company" — write
    the name, because each sub-question is researched on its own, without the task text.

    Cover the whole task: every entity, attribute, date, comparison or condition it mentions needs a sub-question
    that establishes it. For chained questions ("the director of the film that ..."), ask for the first link
    first; later links are asked in later waves once the earlier answers are known. Prefer fewer, sharper
    questions over many vague ones and do not repeat a question in other words.

    Use the research-strategy insights (craft knowledge) and the decomposition rules when they apply to this task:
    a rule "when <pattern>, add a sub-question that covers <X>" means you must add that sub-question whenever the
    task matches the pattern. Return at most `max_questions` sub-questions, most fundamental first."""

    task: str = dspy.InputField(desc="the research task to decompose: every input of this task instance")
    task_goal: str = task_goal()
    context: str = caller_context()
    craft_knowledge: str = craft_knowledge()
    decomposition_rules: str = decomposition_rules()
    max_questions: int = dspy.InputField(desc="the largest number of sub-questions you may return")
    sub_questions: list[str] = limit(
        dspy.OutputField(
            desc="self-contained sub-questions, one per item, entities named explicitly, most fundamental first"
        ),
        max_items_from="max_questions",
    )
