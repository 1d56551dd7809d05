"""The coverage judge of the sales task: how well does the predicted pitch cover ONE reference value proposition?

The rubric is MEMENTO's sales evaluator (Appendix G, Table 9): an experienced sales evaluator reads the whole
predicted pitch against one ground-truth value proposition and scores it 0 (miss) to 5 (bullseye) on the product,
the customer's pain point, the value and the hero evidence (specific numbers, names, unique mechanisms). The metric
(:class:`memento.metrics.coverage_judge.CoverageJudge`) asks it once per ground-truth item (|G| calls) and shows it at
most a fixed number of propositions of bounded length, so padding a pitch cannot pay.
"""

from __future__ import annotations

from typing import Literal

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["JudgeCoverage"]


@reads_data
class JudgeCoverage(dspy.Signature):
    """You are an experienced B2B sales leader who reviews the pitches your sales development representatives
    prepare. You compare the PREDICTED PITCH (a short list of value propositions for this customer) with ONE
    ground-truth value proposition that the seller actually offered this customer, and score how well the pitch
    covers that one value proposition. A value proposition names the seller's product, the customer's pain point,
    the value the product brings, and the hero evidence that makes it real for this customer (specific numbers,
    names, unique mechanisms, events or initiatives).

    Give an integer score on this rubric:
    0 = miss: nothing in the pitch addresses the ground truth's product or pain point.
    1 = marketing fluff: only generic benefits (saves money, improves efficiency, scales) that could be said to any
        customer.
    2 = topic match: the right product or the right pain point, but not the solution or the outcome.
    3 = soft match: the core value proposition is there, but without the hero evidence (the numbers, names or
        unique mechanisms that make it specific).
    4 = strong: the core value and the key mechanism or outcome; it may miss a minor detail.
    5 = bullseye: the product, the pain, the value and the specific metric or evidence all match.
    Score the best coverage anywhere in the pitch. Judge the substance, not the wording: length, breadth,
    confidence or enthusiasm earn nothing, and a pitch that lists many generic propositions is fluff; score only the
    pitch's substance."""

    customer: str = dspy.InputField(desc="The customer the pitch is for")
    ground_truth: str = dspy.InputField(desc="ONE reference value proposition (pain point, mechanism, evidence)")
    pitch: str = data_input("The predicted pitch: its numbered value propositions")
    rationale: str = dspy.OutputField(
        desc="Product, pain point, value and hero evidence compared with the pitch, then the level they reach"
    )
    score: Literal[0, 1, 2, 3, 4, 5] = dspy.OutputField(desc="The rubric score, 0 to 5")
