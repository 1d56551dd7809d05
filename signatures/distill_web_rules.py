"""Phase A, M3: web-action rule operations from the batch's search logs (unsupervised)."""

from __future__ import annotations

import dspy

from memento.signatures.rule_op import RuleOp

__all__ = ["DistillWebRules"]


class DistillWebRules(dspy.Signature):
    """You maintain the web-action rules of a research agent: rules about query formulation, choosing which URLs
    to open, and scraping constraints. Read the search logs of this batch (queries issued, results returned,
    pages scraped and whether they yielded usable evidence) and the numbered current rules. Propose operations:
    `reinforce` a rule the logs show working, `contradict` a rule the logs show failing, `remove` a rule that is
    wrong or useless, and `add` a new general rule that the logs support (e.g. "Put the full name of the entity
    in quotes when the name is ambiguous"). Rules must be general, not about one task's entities. Propose few,
    well-supported operations; an empty list is fine."""

    search_logs: str = dspy.InputField(desc="per task: queries, results, scraped URLs and their usefulness")
    current_rules: str = dspy.InputField(desc="the current web-action rules, numbered (may be empty)")
    operations: list[RuleOp] = dspy.OutputField(desc="add / reinforce / contradict / remove operations")
