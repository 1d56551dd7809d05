"""JitMem's storage gate: did this run succeed at its task? Only accepted trajectories enter the bank."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data, task_goal

__all__ = ["JudgeSuccess"]


@reads_data
class JudgeSuccess(dspy.Signature):
    """You are judging whether an agent successfully completed a task, without access to a reference answer.

    Read the task, the agent's trajectory (its sub-questions, tool calls, the evidence they returned) and its final
    answer. Accept the run only if the final answer actually gives what the task goal asks for, is specific and
    complete, and is supported by the evidence the agent gathered rather than guessed or contradicted by it.
    Reject runs that end in an error, give up, answer a different question, or assert facts the trajectory never
    established. Accepted runs are kept as experience for future tasks, so when in doubt, reject.
    Judge only what the agent did and answered."""

    task: str = dspy.InputField(desc="The task the agent was given")
    task_goal: str = task_goal()
    trajectory: str = data_input("What the agent did: sub-questions, tool calls and their results, in order")
    final_answer: str = data_input("The agent's final output fields")
    reasoning: str = dspy.OutputField(desc="Brief check of the answer against the task and the evidence")
    success: bool = dspy.OutputField(desc="True if the agent completed the task correctly and with support")
