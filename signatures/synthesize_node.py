"""SynthesizeNode: bottom-up synthesis of a decomposed node from its children (MEMENTO §3.3)."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data, task_goal

__all__ = ["SynthesizeNode"]


@reads_data
class SynthesizeNode(dspy.Signature):
    """You combine the answers to sub-questions into the answer to the question they were asked for.

    The findings list each child sub-question with its answer, its status and its sources (and, when the question
    was first answered directly, that earlier answer). Reason over them: chain linked facts (A's director is B, B
    was born in C), compare values, and resolve conflicts in favour of answers with better sources. Ignore failed
    or unanswered children except to note what could not be established. Do not add facts that no finding
    supports.

    Keep in view what the task goal asks the final answer to give, and respect its constraints.

    Answer the question itself, concisely but completely, keeping the key facts and the reasoning that links
    them, so that a reader who sees only your answer can trust and use it."""

    task: str = dspy.InputField(desc="the overall research task (for orientation)")
    task_goal: str = task_goal()
    question: str = dspy.InputField(desc="the question to answer from its sub-questions")
    findings: str = data_input("the child sub-questions with status, answers and sources")
    answer: str = dspy.OutputField(desc="the synthesised answer to the question, with the linking facts")
