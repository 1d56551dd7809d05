"""The per-batch report of MEMENTO's learning loop (the paper's Tables 15-16, plus behaviour and cost).

Example:
    >>> from memento.optimize.batch_report import BatchReport, reports_table
    >>> report = BatchReport(batch=1, version=1, examples=3)
    >>> report.rules["decomposition"].rules
    0
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["BatchReport", "RuleCounts", "CharCounts", "reports_table", "summarize_trajectories"]

_STORES = ("craft", "decomposition", "web_action", "facts")


class RuleCounts(BaseModel):
    """Rule-book counts after a batch."""

    rules: int = 0
    total_support: int = 0
    total_contradiction: int = 0
    rules_contradicted: int = 0


class CharCounts(BaseModel):
    """Characters of a store after a batch and what the batch added, deleted and modified."""

    after: int = 0
    added: int = 0
    deleted: int = 0
    modified: int = 0


def _rule_counts() -> dict[str, RuleCounts]:
    return {"decomposition": RuleCounts(), "web_action": RuleCounts()}


def _char_counts() -> dict[str, CharCounts]:
    return {name: CharCounts() for name in _STORES}


class BatchReport(BaseModel):
    """What one training batch did to memory and how the agent behaved on it.

    Memory: ``rules`` (per rule book: rules, total support, total contradiction, rules contradicted) and
    ``chars`` (per store: after / added / deleted / modified). Behaviour (forward pass): ``questions_per_sample``,
    ``steps_per_question``, ``searches``, ``unique_urls``, ``repeated_urls``, ``lm_calls``; learning cost:
    ``train_lm_calls``. Outcome: ``mean_score`` over scored runs, ``valid_runs``/``failed_runs``.
    """

    batch: int
    version: int
    examples: int = 0
    valid_runs: int = 0
    failed_runs: int = 0
    mean_score: float | None = None
    rules: dict[str, RuleCounts] = Field(default_factory=_rule_counts)
    chars: dict[str, CharCounts] = Field(default_factory=_char_counts)
    craft_entries: int = 0
    facts: int = 0
    facts_superseded: int = 0
    candidates_rejected: int = 0
    candidates_merged: int = 0
    questions_per_sample: float = 0.0
    steps_per_question: float = 0.0
    searches: int = 0
    unique_urls: int = 0
    repeated_urls: int = 0
    lm_calls: int = 0
    train_lm_calls: int = 0
    seconds: dict[str, float] = Field(default_factory=dict)


def summarize_trajectories(trajectories: list[Any]) -> dict[str, Any]:
    """Behaviour figures of a batch's trajectories (root nodes excluded from question counts)."""
    questions = [len([n for n in t.nodes if n.parent_id is not None]) for t in trajectories]
    steps = [n.steps for t in trajectories for n in t.nodes if n.parent_id is not None]
    return {
        "questions_per_sample": round(sum(questions) / len(questions), 3) if questions else 0.0,
        "steps_per_question": round(sum(steps) / len(steps), 3) if steps else 0.0,
        "searches": sum(t.usage.searches for t in trajectories),
        "unique_urls": sum(t.usage.unique_urls for t in trajectories),
        "repeated_urls": sum(t.usage.repeated_urls for t in trajectories),
        "lm_calls": sum(t.usage.lm_calls for t in trajectories),
    }


def reports_table(reports: list[BatchReport]) -> Any:
    """A ``rich.table.Table`` with one row per batch."""
    from rich.table import Table

    table = Table(title="MEMENTO training batches")
    for column in (
        "batch",
        "ver",
        "score",
        "valid",
        "M2 rules",
        "M2 sup/con",
        "M3 rules",
        "M3 sup/con",
        "M1 chars (+/-/~)",
        "M4 facts",
        "q/sample",
        "steps/q",
        "searches",
        "uniq/rep URLs",
        "LM calls",
    ):
        table.add_column(column, justify="right")
    for r in reports:
        m2, m3, m1 = r.rules["decomposition"], r.rules["web_action"], r.chars["craft"]
        table.add_row(
            str(r.batch),
            str(r.version),
            "-" if r.mean_score is None else f"{r.mean_score:.3f}",
            f"{r.valid_runs}/{r.examples}",
            str(m2.rules),
            f"{m2.total_support}/{m2.total_contradiction}",
            str(m3.rules),
            f"{m3.total_support}/{m3.total_contradiction}",
            f"{m1.after} (+{m1.added}/-{m1.deleted}/~{m1.modified})",
            str(r.facts),
            f"{r.questions_per_sample:.1f}",
            f"{r.steps_per_question:.1f}",
            str(r.searches),
            f"{r.unique_urls}/{r.repeated_urls}",
            f"{r.lm_calls}+{r.train_lm_calls}",
        )
    return table
