"""Phase A, M3: web-action rule operations from one run's search log (unsupervised, one call per run)."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data
from memento.signatures.rule_op import RuleOp

__all__ = ["DistillWebRules"]


@reads_data
class DistillWebRules(dspy.Signature):
    """You maintain the web-action rules of a research agent: rules about query formulation, choosing which URLs
    to open, and scraping constraints. Read the search log of one research run (per sub-question: the queries
    issued, the titles of the results returned, which pages were scraped and whether they were used as evidence)
    and the numbered current rules, each with its support and contradiction counts. Propose operations:
    `reinforce` a rule this log shows working, `contradict` a rule this log shows failing, `remove` a rule this
    log shows to be wrong, and `add` a new general rule that this log supports (e.g. "Put the full name of the
    entity in quotes when the name is ambiguous"). Rules must be general, not about this task's entities. Propose
    few, well-supported operations; an empty list is fine."""

    task: str = dspy.InputField(desc="the task the run researched")
    search_log: str = data_input("per sub-question: queries, result titles, scraped pages, usefulness")
    current_rules: str = data_input("the current web-action rules, numbered, with counts; may be empty")
    operations: list[RuleOp] = dspy.OutputField(desc="add / reinforce / contradict / remove operations")
