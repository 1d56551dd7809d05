"""Phase C: per target element, was there a sub-question covering it and did it lead to correct coverage?"""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field

from memento.signatures._fields import data_input, reads_data

__all__ = ["AssessCoverage", "TargetCoverage"]


class TargetCoverage(BaseModel):
    """How one element of the expected answer was covered by the research tree."""

    target: str = Field(description="the element of the expected answer")
    covered: bool = Field(description="some sub-question asked about it")
    correct: bool = Field(description="that sub-question's answer was right about it")
    sub_question: str = Field(default="", description="the covering sub-question, if any")


@reads_data
class AssessCoverage(dspy.Signature):
    """You audit a research run against the expected answer. Split the expected answer into its target elements
    (the facts, entities or values it consists of). For each target element say whether one of the agent's
    sub-questions asked about it (`covered`) and whether the answer that sub-question obtained was correct about
    it (`correct`), quoting the covering sub-question."""

    task: str = dspy.InputField(desc="the task that was researched")
    expected: str = dspy.InputField(desc="the expected (ground-truth) answer and the judge's feedback")
    sub_questions: str = data_input("the sub-questions asked, each with the answer it obtained")
    coverage: list[TargetCoverage] = dspy.OutputField(desc="one entry per target element")
