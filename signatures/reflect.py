"""Reflect: the gap analysis between waves of the Adaptive Exploration Tree (MEMENTO §3.3)."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field

from memento.llm.output_schema import limit
from memento.signatures._fields import (
    caller_context,
    craft_knowledge,
    data_input,
    decomposition_rules,
    reads_data,
    takes_guidance,
    task_goal,
)

__all__ = ["ProposedQuestion", "Reflect", "EXPLORE_UNTIL_BUDGET", "STOP_WHEN_ESTABLISHED"]


class ProposedQuestion(BaseModel):
    """A new sub-question and the node of the research tree it refines."""

    question: str = Field(description="a self-contained sub-question with its entities named explicitly")
    parent_id: str = Field(
        default="root",
        description="id of the existing node this question refines or drills into ('root' for the task itself)",
    )


#: ``stopping_rule`` with ``budgets.stop_early`` off (the default; MEMENTO explores until the budget is spent)
EXPLORE_UNTIL_BUDGET = (
    "Explore until the question budget is spent: as long as remaining_budget is above zero, propose sub-questions "
    "on every element the final answer needs that no sourced answer establishes yet, then on elements resting on "
    "one weak or unsourced answer, then on facts that would sharpen the answer. Propose nothing only when no "
    "useful question is left."
)
#: ``stopping_rule`` with ``budgets.stop_early`` on
STOP_WHEN_ESTABLISHED = (
    "Stop early when the findings suffice: propose nothing only when every element the final answer needs (every "
    "output the task goal names, for every entity and condition of the task) is established by an answer with a "
    "source. Otherwise propose the sub-questions that close the remaining gaps."
)


@reads_data
@takes_guidance
class Reflect(dspy.Signature):
    """You review research in progress on a task and decide what is still missing.

    You see the research tree so far (each node's id, status, question and answer), the session memory (every
    answer found in this session with its sources) and your own earlier reflections. Compare what the final
    answer needs (the task goal names every output it must give) with what has been established. Look for gaps:
    an entity, attribute or condition of the task that no answer covers; a chained question whose next link can
    now be asked because an earlier answer named the entity; answers that contradict each other or rest on weak
    or missing sources; sub-questions that failed or came back unanswered and deserve a better-phrased retry.

    Write a short reflection stating what is known, what is missing and why. Then propose new sub-questions that
    close the most important gaps, at most `remaining_budget` of them. Each proposal names the node it refines:
    use that node's id as parent_id when the question drills into or repairs that node's question (the node will
    then be answered from its children), and "root" when it covers a new part of the task. Never propose a
    question that the session memory already answers or that repeats an existing node. When to stop is given by
    the stopping rule.

    Use the research-strategy insights (craft knowledge) and decomposition rules when they apply."""

    task: str = dspy.InputField(desc="the research task: every input of this task instance")
    task_goal: str = task_goal()
    context: str = caller_context()
    craft_knowledge: str = craft_knowledge()
    decomposition_rules: str = decomposition_rules()
    research_tree: str = data_input("the nodes so far: id, wave, status, question and answer")
    session_memory: str = data_input("answers found in this session with their sources")
    previous_reflections: str = data_input("your reflections after earlier waves; may be empty")
    remaining_budget: int = dspy.InputField(desc="how many more sub-questions may be asked in this session")
    stopping_rule: str = dspy.InputField(desc="when to propose no more sub-questions")
    reflection: str = dspy.OutputField(desc="what is known, what is missing, and why (a few sentences)")
    new_questions: list[ProposedQuestion] = limit(
        dspy.OutputField(
            desc="new sub-questions with the id of the node each refines; an empty list when nothing is missing"
        ),
        max_items_from="remaining_budget",
    )
