"""The coverage judge of the sales task: how well does ONE predicted value proposition cover ONE reference one?

The rubric follows MEMENTO's sales evaluator (Appendix G, Table 9): an experienced sales evaluator scores a
proposition on the product, the customer's pain point, the mechanism and the hero evidence (specific numbers,
names, events), 0 (miss) to 5 (bullseye). The metric (:class:`memento.metrics.coverage_judge.CoverageJudge`) asks
it once per (ground truth, prediction) pair and keeps each ground truth's best match, so extra propositions earn
nothing.
"""

from __future__ import annotations

from typing import Literal

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["JudgeCoverage"]


@reads_data
class JudgeCoverage(dspy.Signature):
    """You are an experienced B2B sales leader who reviews the value propositions your sales development
    representatives prepare. You compare ONE predicted value proposition with ONE ground-truth value proposition
    that the seller actually offered this customer. A value proposition names the seller's product, the customer's
    pain point, the mechanism by which the product relieves it, and the hero evidence that makes the need real for
    this customer (specific numbers, names, events or initiatives).

    Give an integer score on this rubric:
    0 = miss: the prediction is about a different need; nothing of the ground truth's pain point or product.
    1 = marketing fluff: a generic benefit (saves money, improves efficiency, scales) that could be said to any
        customer, without the ground truth's specific pain point, mechanism or evidence.
    2 = topic match: the right area or product, but neither the ground truth's specific pain point nor its
        mechanism.
    3 = soft match: the right pain point, but the product or mechanism is vague or partly wrong, and the hero
        evidence is missing.
    4 = strong argument: the right product, pain point and a convincing mechanism, but the hero evidence (the
        ground truth's specific numbers, names or events) is missing or only partly there.
    5 = bullseye: the same product, pain point and mechanism, backed by the same hero evidence.
    Judge the substance, not the wording: length, confidence or enthusiasm earn nothing; score only the
    proposition's substance."""

    customer: str = dspy.InputField(desc="The customer the propositions are for")
    ground_truth: str = dspy.InputField(desc="The reference value proposition (pain point, mechanism, evidence)")
    predicted: str = data_input("ONE predicted value proposition to score")
    rationale: str = dspy.OutputField(
        desc="Product, pain point, mechanism and hero evidence compared one by one, then the level they reach"
    )
    score: Literal[0, 1, 2, 3, 4, 5] = dspy.OutputField(desc="The rubric score, 0 to 5")
