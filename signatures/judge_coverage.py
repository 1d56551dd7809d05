"""The coverage judge of the sales task: how well do the predicted value propositions cover one reference one?"""

from __future__ import annotations

import dspy

__all__ = ["JudgeCoverage"]


class JudgeCoverage(dspy.Signature):
    """You grade how well a list of predicted value propositions covers ONE ground-truth value proposition that a
    seller actually offered a customer. A value proposition names a customer pain point, the mechanism by which
    the seller's product addresses it, and the evidence for it.

    Compare the ground truth with the best-matching predicted proposition and give an integer score on this rubric:
    0 = miss: no predicted proposition addresses this pain point;
    1 = marketing fluff: only a generic benefit (saves money, improves efficiency) that could apply to anyone;
    2 = topic match: the right general area, but neither the specific pain point nor the mechanism;
    3 = soft match: the right pain point, but a vague or partly wrong mechanism;
    4 = strong argument: the right pain point and a convincing mechanism, missing some specifics of the ground truth;
    5 = bullseye: the same pain point, mechanism and substance as the ground truth.
    Score only this ground-truth proposition; do not reward predicted propositions about other needs."""

    customer: str = dspy.InputField(desc="The customer the propositions are for")
    ground_truth: str = dspy.InputField(desc="The reference value proposition (pain point, mechanism, evidence)")
    predicted: str = dspy.InputField(desc="The predicted value propositions, numbered")
    rationale: str = dspy.OutputField(desc="Which predicted proposition matches best and why it earns the score")
    score: int = dspy.OutputField(desc="The rubric score: an integer from 0 to 5")
