"""The outcome of one evaluated example: its prediction, score, feedback and measures, behaviour, usage, the leakage
audit and the node that ran it (what ``results.json`` lists and the eval journal appends).

Example:
    >>> from memento.metrics.example_result import ExampleResult
    >>> ExampleResult(index=0, score=1.0).model_dump()["score"]
    1.0
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from memento.core.types import Trajectory, Usage
from memento.records.leakage import LeakageAudit

__all__ = ["ExampleResult"]


class ExampleResult(BaseModel):
    """The outcome of one example."""

    index: int
    id: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    prediction: dict[str, Any] = Field(default_factory=dict)
    score: float = 0.0
    feedback: str = ""
    measures: dict[str, float] = Field(default_factory=dict)  # extra numeric metric outputs (em, f1, tvd, kl...)
    # how the program worked (MEMENTO Table 8/10: questions, steps, web use, scratchpad, memory; metrics.behaviour)
    behaviour: dict[str, float] = Field(default_factory=dict)
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)  # the program's usage (LM calls, tokens, web)
    judge_usage: Usage = Field(default_factory=Usage)  # the metric's LM usage (judges)
    seconds: float = 0.0
    leakage: LeakageAudit | None = None  # what it was shown dated on/after its cutoff (memento.records.leakage)
    node: str | None = None  # the Ray node that ran it (--executor ray); None: this process
    trajectory: Trajectory | None = Field(default=None, exclude=True)
