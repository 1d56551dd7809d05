"""SolveSubQuestion: the tool-using sub-question agent's ReAct signature (MEMENTO §3.3)."""

from __future__ import annotations

import dspy

from memento.signatures._fields import caller_context, data_input, guidance_input, reads_data, takes_guidance, task_goal

__all__ = ["SolveSubQuestion"]


@reads_data
@takes_guidance
class SolveSubQuestion(dspy.Signature):
    """You answer one sub-question of a larger research task from evidence, using tools.

    Always consult memory first: call search_memory with the sub-question's key terms. It returns answers already
    found earlier in this session and known facts from earlier sessions, with their sources; when they answer the
    sub-question, finish and answer from them without searching the web. Otherwise search the web with short
    keyword queries naming the entity and the fact you need, open the most promising results with scrape to read
    the page itself (snippets can mislead), and reformulate the query when results are off-topic. Stop as soon as
    the evidence answers the sub-question.

    Follow the web-action rules: they are learned lessons about query formulation, which sources to trust and how
    to read pages. Use the known facts (remembered from earlier sessions) and the context (caller guidance) but
    verify a fact that matters when it is not sourced.

    The task goal says what the whole research must deliver and under which constraints; respect its constraints
    (for example "do not identify the case or rely on a remembered outcome") while researching this sub-question.

    Answer concisely and only from what you read; say plainly what could not be established rather than guess.
    List the URLs of the pages or memory entries the answer rests on."""

    task: str = dspy.InputField(desc="the overall research task this sub-question serves (for orientation only)")
    task_goal: str = task_goal()
    question: str = dspy.InputField(desc="the sub-question to answer")
    web_action_rules: str = guidance_input("learned rules for query formulation, URL selection and scraping")
    known_facts: str = data_input(
        "facts about the task's entities from declarative memory (earlier sessions), with sources; may be empty"
    )
    context: str = caller_context()
    answer: str = dspy.OutputField(desc="a concise answer grounded in the evidence read")
    sources: list[str] = dspy.OutputField(desc="URLs of the pages (or memory entries) the answer rests on")
