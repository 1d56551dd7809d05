"""The binary verdict judge: does a prediction state the same answer as the reference?"""

from __future__ import annotations

from typing import Literal

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["JudgeVerdict"]


@reads_data
class JudgeVerdict(dspy.Signature):
    """You are a strict grader comparing a predicted answer with the reference answer to the same question.

    Decide whether the prediction gives the same answer as the reference. Judge the substance, not the wording:
    paraphrases, synonyms, added precision that stays consistent with the reference, and differences in case,
    punctuation or articles are correct. A prediction is incorrect if it gives a different answer, hedges between
    several answers, contradicts the reference in any part that matters, is less specific than the reference (a
    country where the reference names a city, a decade where it names a year), covers only part of it (one of two
    names, one element of a list), or does not answer at all. For an outcome question (who won a case) only the
    outcome stated by the prediction counts, not its reasoning.
    Judge only the answer the prediction gives."""

    question: str = dspy.InputField(desc="The question or task that was answered")
    reference_answer: str = dspy.InputField(desc="The correct answer; several accepted answers are separated by ' | '")
    predicted_answer: str = data_input("The answer to grade")
    rationale: str = dspy.OutputField(desc="One or two sentences comparing the prediction with the reference")
    verdict: Literal["correct", "incorrect"] = dspy.OutputField(desc="correct if it matches the reference")
