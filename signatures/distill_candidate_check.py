"""Canonicalisation: the correctness and sufficiency check a candidate passes before it is stored."""

from __future__ import annotations

import dspy

__all__ = ["CheckCandidate"]


class CheckCandidate(dspy.Signature):
    """You guard a research agent's long-term memory. Decide whether a candidate item may be stored. Reject it
    when it carries no information ("no data", "not found", "unknown", a restatement of the question), when the
    supporting evidence does not back it, or when it is too vague to act on. Accept it when it is specific,
    self-contained and supported."""

    kind: str = dspy.InputField(desc="craft insight | decomposition rule | web-action rule | fact")
    candidate: str = dspy.InputField(desc="the item proposed for storage")
    evidence: str = dspy.InputField(desc="what the item was derived from (may be empty)")
    accept: bool = dspy.OutputField(desc="true when the item may be stored")
    reason: str = dspy.OutputField(desc="one short reason")
