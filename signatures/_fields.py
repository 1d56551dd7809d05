"""Input fields that several signatures share, written once: a field's ``desc`` is part of every prompt that uses it.

Example:
    >>> import dspy
    >>> class Ask(dspy.Signature):
    ...     task_goal: str = task_goal()
    ...     answer: str = dspy.OutputField()
    >>> Ask.input_fields["task_goal"].json_schema_extra["desc"].startswith("what the task asks for")
    True
"""

from __future__ import annotations

from typing import Any

import dspy

__all__ = ["caller_context", "craft_knowledge", "decomposition_rules", "task_goal"]


def task_goal() -> Any:
    """The task goal: the task's instructions and every output its final answer must give."""
    return dspy.InputField(desc="what the task asks for: its instructions and every output the final answer must give")


def caller_context() -> Any:
    """Free-text guidance the caller passes with the task (``context=``)."""
    return dspy.InputField(desc="extra guidance for this task from the caller; may be empty")


def craft_knowledge() -> Any:
    """MEMENTO's M1 craft knowledge, rendered."""
    return dspy.InputField(desc="research-strategy insights learned on earlier tasks; may be empty")


def decomposition_rules() -> Any:
    """MEMENTO's M2 decomposition rules, rendered."""
    return dspy.InputField(desc="learned rules 'When <pattern>, add a sub-question that covers <X>'; may be empty")
