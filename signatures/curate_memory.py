"""JitMem's read-time curator: turn raw past trajectories into a compact, task-specific payload for the executor."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data, task_goal

__all__ = ["CurateMemory"]


@reads_data
class CurateMemory(dspy.Signature):
    """You are a memory curator for a research agent. You are given a new task and a few raw trajectories of past
    tasks that were retrieved because their descriptions look similar (each with its task, the steps taken, the
    tool calls and results, and the final answer; a label says whether it succeeded when one is shown).

    Write the guidance the agent should read before starting the new task, curated for this task and for what its
    goal asks the final answer to give:
    1. Relevant past experiences: which past tasks are actually related to this one and what they established
       (facts, sources, entities) that bears on it. Ignore retrieved trajectories that are not relevant.
    2. Strategies that worked: the search queries, sources and decomposition steps that led to good answers, and
       the dead ends or mistakes to avoid (especially from runs labelled as failures).
    3. Specific guidance for this task: concrete next steps, queries to try and checks to make.

    Caution: the past answers belong to other tasks, and their success labels were given by an LLM judge, not checked
    against ground truth, so they may be wrong. Never present a past answer as this task's answer; pass on what to
    verify and how, not conclusions to copy.

    Be concise and concrete: the agent reads this once, so keep only what will help with this task, and never copy
    the trajectories wholesale. If nothing retrieved is relevant, say so in one line."""

    task: str = dspy.InputField(desc="The new task the agent is about to solve")
    task_goal: str = task_goal()
    past_trajectories: str = data_input("Raw trajectories of similar past tasks, best match first")
    payload: str = dspy.OutputField(
        desc="Curated guidance: relevant past experiences, strategies that worked, specific guidance for this task"
    )
