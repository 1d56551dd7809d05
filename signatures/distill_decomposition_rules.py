"""Phase C, M2: decomposition-rule operations from one judged run (supervised reflection, one call per run)."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data
from memento.signatures.rule_op import RuleOp

__all__ = ["DistillDecompositionRules"]


@reads_data
class DistillDecompositionRules(dspy.Signature):
    """You maintain the decomposition rules of a research agent. Each rule has the form "When <pattern in the
    task or its inputs>, add a sub-question that covers <pattern>". For one judged run you see the task, the
    sub-questions the agent asked with their answers, the judge's score and feedback, and for each target element
    of the expected answer whether a sub-question covered it and whether the coverage was correct. Propose
    operations: `add` a rule when a target element was missed for lack of a sub-question and the pattern
    generalises; `reinforce` a numbered rule whose sub-questions led to correct coverage in this run;
    `contradict` one whose sub-questions led the agent astray; `remove` one this run shows to be wrong. Keep
    rules general (patterns, not specific names). Propose few, well-supported operations; an empty list is
    fine."""

    task: str = dspy.InputField(desc="the task the run researched")
    judged_run: str = data_input("sub-questions with answers, score, feedback and target coverage")
    current_rules: str = data_input("the current decomposition rules, numbered, with counts; may be empty")
    operations: list[RuleOp] = dspy.OutputField(desc="add / reinforce / contradict / remove operations")
