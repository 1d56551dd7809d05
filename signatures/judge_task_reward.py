"""The deployed-time reward of Memento CBR: a judge scores a finished run when no reference answer exists."""

from __future__ import annotations

import dspy

__all__ = ["JudgeTaskReward"]


class JudgeTaskReward(dspy.Signature):
    """You are grading how well a research agent accomplished its task, without access to a reference answer.
    The grade becomes the reward stored with the agent's plan in its case bank, where future plans learn from it,
    so be strict and calibrated.

    Read the task, the plan the agent followed, the findings its sub-tasks produced (with their sources) and its
    final answer. Give 1.0 only when the final answer gives exactly what the task goal asks for, is specific and
    complete, and is supported by the findings. Give 0.0 when the answer is missing, off-task, contradicted by the
    findings, or asserts facts the findings never established. Use values in between for partly correct or partly
    supported answers (for example 0.5 when one of two required facts is supported)."""

    task: str = dspy.InputField(desc="The task the agent was given")
    task_goal: str = dspy.InputField(
        desc="What the task asks for: its instructions and every output the final answer must give"
    )
    plan: str = dspy.InputField(desc="The sub-tasks the agent planned and executed, in order")
    findings: str = dspy.InputField(desc="Each sub-task's result and sources (or its failure)")
    final_answer: str = dspy.InputField(desc="The agent's final output fields")
    reasoning: str = dspy.OutputField(desc="Brief check of the answer against the task and the findings")
    reward: float = dspy.OutputField(desc="The grade, a number from 0.0 (failed) to 1.0 (fully accomplished)")
