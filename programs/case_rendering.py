"""The text a case-based agent reads and writes: retrieved cases for the planner (labelled SUCCESS or FAILURE by
their reward), a compact tool-call sequence for the executor-level bank, the plan as executed (what a case
stores), the sub-tasks' findings for the replanner and the answer, and a prediction's outputs as one line.

Example:
    >>> from memento.programs.case_rendering import render_outputs
    >>> render_outputs({"answer": "Paris"})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from memento.core.types import Case, Node, Plan, PlanStep, ToolCall
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD, succeeded
from memento.utils.text import one_line

__all__ = ["RESULT_CHARS", "render_cases", "render_tool_plan", "executed_plan", "render_findings", "render_outputs"]


RESULT_CHARS = 600


def render_cases(cases: list[tuple[Case, float]], *, threshold: float = DEFAULT_SUCCESS_THRESHOLD) -> str:
    """Prompt text for retrieved cases; each is labelled SUCCESS (reward strictly above ``threshold``, the rule of
    :func:`memento.metrics.success.succeeded`) or FAILURE, with its reward."""
    if not cases:
        return ""
    blocks = []
    for i, (case, _score) in enumerate(cases, 1):
        label = "SUCCESS" if succeeded(case.reward, threshold=threshold) else "FAILURE"
        blocks.append(f"Case {i} [{label}, reward {case.reward:.2f}]\nTask: {case.task_text}\nPlan:\n{case.plan}")
    return "\n\n".join(blocks)


def render_tool_plan(tool_calls: list[ToolCall], *, limit: int = 8) -> str:
    """A compact tool-call sequence (``search_web(query='...') -> 3 results``) for the executor-level bank."""
    lines = []
    for call in tool_calls[:limit]:
        args = ", ".join(f"{k}={one_line(str(v), 80)!r}" for k, v in call.args.items())
        outcome = f"error: {one_line(call.error, 80)}" if call.error else f"{len(call.result_urls)} urls"
        lines.append(f"{call.kind}({args}) -> {outcome}")
    if len(tool_calls) > limit:
        lines.append(f"... {len(tool_calls) - limit} more calls")
    return "\n".join(lines)


def executed_plan(nodes: list[Node]) -> Plan:
    """The plan as executed (what a case stores, rendered): every sub-task by cycle, with its outcome."""
    return Plan(
        steps=[
            PlanStep(
                cycle=node.wave + 1,
                sub_task=node.question,
                outcome="answered" if node.status == "answered" else "failed",
            )
            for node in nodes
        ]
    )


def render_findings(nodes: list[Node]) -> str:
    blocks = []
    for i, node in enumerate(nodes, 1):
        if node.status == "answered":
            sources = ", ".join(e.url for e in node.evidence[:4]) or "no sources"
            blocks.append(
                f"{i}. {node.question}\n   Result: {one_line(node.answer, RESULT_CHARS)}\n   Sources: {sources}"
            )
        else:
            blocks.append(f"{i}. {node.question}\n   Failed: {one_line(node.error, 200) or 'no answer'}")
    return "\n".join(blocks)


def render_outputs(outputs: dict[str, Any]) -> str:
    """The root's answer as text: the single output's value, else ``field: value`` lines."""
    if len(outputs) == 1:
        return str(next(iter(outputs.values())))
    return "\n".join(f"{name}: {value}" for name, value in outputs.items())
