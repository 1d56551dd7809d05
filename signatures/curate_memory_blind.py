"""JitMem's curator ablation without task conditioning: curate past trajectories without knowing the next task."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["CurateMemoryBlind"]


@reads_data
class CurateMemoryBlind(dspy.Signature):
    """You are a memory curator for a research agent. You are given a few raw trajectories of past tasks (each with
    its task, the steps taken, the tool calls and results, and the final answer; a label says whether it succeeded
    when one is shown). You do not know the agent's next task.

    Write general guidance the agent should read before its next task:
    1. Relevant past experiences: what these past tasks established (facts, sources, entities).
    2. Strategies that worked: the search queries, sources and decomposition steps that led to good answers, and
       the dead ends or mistakes to avoid (especially from runs labelled as failures).
    3. General guidance: concrete habits and checks that transfer to similar tasks.

    Caution: the past answers belong to other tasks, and their success labels were given by an LLM judge, not checked
    against ground truth, so they may be wrong: pass on what to verify and how, not conclusions to copy.

    Be concise and concrete, and never copy the trajectories wholesale."""

    past_trajectories: str = data_input("Raw trajectories of past tasks")
    payload: str = dspy.OutputField(desc="Curated guidance: past experiences, strategies that worked, general advice")
