"""Write-time distillation (JitMem's ablation): summarise a trajectory when it is stored, before any task is known."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["DistillTrajectory"]


@reads_data
class DistillTrajectory(dspy.Signature):
    """You are summarising a research agent's completed run into a reusable memory entry. Future tasks are not
    known yet, so keep what is most likely to be reusable: what the task asked, the facts established (with their
    sources), the search queries and sources that worked, the mistakes or dead ends to avoid, and the final answer.
    Write a compact entry of a few sentences or bullet points; do not copy tool outputs verbatim."""

    task: str = dspy.InputField(desc="The task the agent solved")
    trajectory: str = data_input("What the agent did: sub-questions, tool calls and their results, in order")
    distillate: str = dspy.OutputField(desc="The reusable memory entry")
