"""Phase A, M1: rewrite the craft-knowledge store from its current entries and this batch's insights."""

from __future__ import annotations

import dspy

__all__ = ["ConsolidateCraftKnowledge"]


class ConsolidateCraftKnowledge(dspy.Signature):
    """You maintain a research agent's craft knowledge: a short list of research-strategy insights. Rewrite the
    list from the current entries and the new insights collected in this batch: keep entries that are still
    useful, merge entries that say the same thing into one sentence, add new insights that are not yet covered,
    and drop entries that are vague or specific to a single task. Keep every entry one self-contained sentence
    and keep the list at most `max_entries` long, most useful first."""

    current_entries: str = dspy.InputField(desc="the current craft-knowledge entries, one per line (may be empty)")
    new_insights: str = dspy.InputField(desc="insights distilled from this batch's runs, one per line")
    max_entries: int = dspy.InputField(desc="the maximum number of entries to keep")
    entries: list[str] = dspy.OutputField(desc="the rewritten craft knowledge, one sentence per entry")
