"""Canonicalisation: decide whether a candidate memory item duplicates, contradicts or differs from a stored one."""

from __future__ import annotations

from typing import Literal

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["MergeCanonical"]


@reads_data
class MergeCanonical(dspy.Signature):
    """You keep a memory store free of near-duplicates. Compare a stored item and a new candidate of the same
    kind (a research insight, a rule, or a fact about an entity). Answer `same` when they say the same thing
    (then write `merged`: one sentence that keeps everything either says), `contradicts` when both are about the
    same thing but cannot both be true (then `merged` is the candidate, which supersedes the stored item), or
    `distinct` when they are about different things (then `merged` is empty)."""

    kind: str = dspy.InputField(desc="craft insight | decomposition rule | web-action rule | fact")
    stored: str = data_input("the stored item")
    candidate: str = data_input("the new candidate")
    verdict: Literal["same", "contradicts", "distinct"] = dspy.OutputField()
    merged: str = dspy.OutputField(desc="the canonical text (same), the candidate (contradicts), or empty")
