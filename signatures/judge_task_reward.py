"""The deployed-time reward of Memento CBR: a judge scores a finished run when no reference answer exists."""

from __future__ import annotations

from typing import Literal

import dspy

from memento.signatures._fields import data_input, reads_data, task_goal

__all__ = ["JudgeTaskReward", "REWARD_ANCHORS"]

#: the grades the judge may give (discrete anchors: a calibrated judge, comparable rewards across runs)
REWARD_ANCHORS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


@reads_data
class JudgeTaskReward(dspy.Signature):
    """You are grading how well a research agent accomplished its task, without access to a reference answer.
    The grade becomes the reward stored with the agent's plan in its case bank, where future plans learn from it,
    so be strict and calibrated.

    Read the task, its goal (what the final answer must give), the plan the agent followed, the findings its
    sub-tasks produced (with their sources) and its final answer. Grade on exactly one of these anchors:
    1.0  = the final answer gives everything the task goal asks for, specific and complete, and every part of it
           is supported by the findings;
    0.75 = everything is given, but one part is weakly supported, or a minor part is missing or vague;
    0.5  = about half: some required outputs or facts are given and supported, others are missing or unsupported;
    0.25 = mostly missing or unsupported: only a minor part of what the task asks for is given with support;
    0.0  = the answer is missing, off-task, contradicted by the findings, or asserts facts the findings never
           established.

    Grade only what the agent did and answered."""

    task: str = dspy.InputField(desc="The task the agent was given")
    task_goal: str = task_goal()
    plan: str = data_input("The sub-tasks the agent planned and executed, in order")
    findings: str = data_input("Each sub-task's result and sources, or its failure")
    final_answer: str = data_input("The agent's final output fields")
    reasoning: str = dspy.OutputField(desc="Each required output checked against the findings, then the anchor")
    # DSPy parses the reply into one of these floats; PEP 586 admits no float literals, hence the coded ignore
    reward: Literal[0.0, 0.25, 0.5, 0.75, 1.0] = dspy.OutputField(  # type: ignore[valid-type]
        desc="The grade: 0.0, 0.25, 0.5, 0.75 or 1.0"
    )
