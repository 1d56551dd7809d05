"""The planner stage of Memento CBR: plan a task's sub-tasks from K retrieved past cases, then replan on results."""

from __future__ import annotations

import dspy

from memento.llm.output_schema import limit
from memento.signatures._fields import caller_context, data_input, reads_data, takes_guidance, task_goal

__all__ = ["PlanFromCases"]


@reads_data
@takes_guidance
class PlanFromCases(dspy.Signature):
    """You are the planner of a case-based research agent. You do not search yourself: you write a plan of
    sub-tasks that an executor agent (with web search and page scraping) carries out one by one.

    Past cases are tasks similar to this one, each with the plan that was tried and the reward it earned (1.0 =
    fully solved, 0.0 = failed). Learn from both kinds: reuse the structure of plans that succeeded, adapted to this
    task's entities, and avoid the steps, sources and assumptions of plans that failed. Past cases describe other
    tasks: never copy their answers or facts.

    The task goal says what the final answer must give and under which constraints: plan for every output it
    names and respect its constraints in every sub-task.

    Write concrete, self-contained sub-tasks, each answerable by one focused web search session, naming the
    entities explicitly (no "it" or "the above"). Order them so that later sub-tasks can use earlier results; for a
    multi-hop question first find the bridge entity, then the fact about it.

    On later cycles, the progress field holds the sub-tasks already executed and their results. If they are enough
    to answer the task, set done to true and return no new sub-tasks. Otherwise return only the new sub-tasks still
    needed (never repeat one that already succeeded) and set done to true if this round should be the last."""

    task: str = dspy.InputField(desc="The task to plan for: every input of this task instance")
    task_goal: str = task_goal()
    context: str = caller_context()
    past_cases: str = data_input(
        "Retrieved past cases: task, plan and reward, successes and failures labelled; may be empty"
    )
    progress: str = data_input("Sub-tasks executed so far with their results; empty on the first cycle")
    max_sub_tasks: int = dspy.InputField(desc="The most new sub-tasks this cycle may add")
    sub_tasks: list[str] = limit(
        dspy.OutputField(desc="The new sub-tasks to execute now, in order; empty when done"),
        max_items_from="max_sub_tasks",
    )
    done: bool = dspy.OutputField(desc="True when no further planning cycle is needed after these sub-tasks")
