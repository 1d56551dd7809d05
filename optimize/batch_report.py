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

from memento.metrics.behaviour import behaviour_of, summarize_behaviour

__all__ = [
    "BatchReport",
    "RuleCounts",
    "CharCounts",
    "DistillerStats",
    "DISTILLERS",
    "GuardRejection",
    "reports_table",
    "summarize_trajectories",
]

_STORES = ("craft", "decomposition", "web_action", "facts")
#: the per-run distillers: M1 craft insights, M3 web-action rules, M4 facts (Phase A); coverage, M2 rules (Phase C)
DISTILLERS: tuple[str, ...] = ("craft_insights", "web_rules", "facts", "coverage", "decomposition")


class DistillerStats(BaseModel):
    """What one distiller saw in a batch: ``runs`` offered to it, ``seen`` (a run's record reached a prompt),
    ``summarised`` (the record was over budget and an LLM summary was shown instead; for facts: split into
    several calls), ``failed`` (calls that failed and were recorded, not retried)."""

    runs: int = 0
    seen: int = 0
    summarised: int = 0
    failed: int = 0


class GuardRejection(BaseModel):
    """A candidate the memory guard kept out of memory: its store, text (and entity for a fact), the guard's reasons
    and the runs that proposed it."""

    store: str
    text: str
    entity: str = ""
    reasons: list[str] = Field(default_factory=list)
    runs: list[str] = Field(default_factory=list)

    def line(self) -> str:
        """One line for a terminal: ``[craft] 'text' rejected: reason; reason (runs: a, b)``."""
        shown = self.text if len(self.text) <= 100 else self.text[:99] + "…"
        runs = f" (runs: {', '.join(self.runs)})" if self.runs else ""
        return f"[{self.store}] {shown!r} rejected: {'; '.join(self.reasons)}{runs}"


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
    ``chars`` (per store: after / added / deleted / modified); canonicalisation: candidates merged, contradicted
    (a new rule contradicting a stored one raises its contradiction count) and rejected; ``rules_retired`` and
    ``craft_retired`` (M1 entries that several runs showed wrong, deleted); ``injected``: mean memory items injected
    per run, per store (M1-M4). Behaviour (forward pass): ``questions_per_sample``,
    ``steps_per_question``, ``searches``, ``unique_urls``, ``repeated_urls``, ``lm_calls``; learning cost:
    ``train_lm_calls`` and per learning stage ``train_stages``. Outcome: ``mean_score`` over scored runs,
    ``valid_runs``/``failed_runs`` (``crashed_runs``: no trajectory at all, counted apart). Audit: ``distillers``
    says per distiller how many runs it was offered, saw and saw summarised; ``summary_failures`` counts the run
    texts whose LLM summary failed (their head and tail were shown instead); ``guard_rejected`` lists every
    candidate the memory guard (``[trainer] guard``) kept out, with its reasons.
    """

    batch: int
    version: int
    examples: int = 0
    valid_runs: int = 0
    failed_runs: int = 0
    crashed_runs: int = 0
    mean_score: float | None = None
    rules: dict[str, RuleCounts] = Field(default_factory=_rule_counts)
    chars: dict[str, CharCounts] = Field(default_factory=_char_counts)
    craft_entries: int = 0
    facts: int = 0
    facts_superseded: int = 0
    candidates_rejected: int = 0
    candidates_merged: int = 0
    candidates_contradicted: int = 0
    craft_retired: int = 0
    injected: dict[str, float] = Field(default_factory=dict)
    questions_per_sample: float = 0.0
    steps_per_question: float = 0.0
    scratchpad_chars: float = 0.0  # per sample: answered sub-questions with their answers (metrics.behaviour)
    searches: int = 0
    unique_urls: int = 0
    repeated_urls: int = 0
    lm_calls: int = 0
    train_lm_calls: int = 0
    train_stages: dict[str, int] = Field(default_factory=dict)
    distillers: dict[str, DistillerStats] = Field(default_factory=dict)
    guard_rejected: list[GuardRejection] = Field(default_factory=list)
    summary_failures: int = 0
    rules_retired: int = 0
    seconds: dict[str, float] = Field(default_factory=dict)


def summarize_trajectories(trajectories: list[Any]) -> dict[str, Any]:
    """Behaviour figures of a batch's trajectories (:mod:`memento.metrics.behaviour`, as ``memento eval`` reports
    them): questions per sample and steps per question (root nodes excluded), the scratchpad's size per sample, and
    the batch's totals of searches, URLs and LM calls."""
    summary = summarize_behaviour(behaviour_of(t) for t in trajectories)
    return {
        "questions_per_sample": summary.get("questions_per_sample", 0.0),
        "steps_per_question": summary.get("steps_per_question", 0.0),
        "scratchpad_chars": summary.get("scratchpad_chars_per_sample", 0.0),
        "searches": sum(t.usage.searches for t in trajectories),
        "unique_urls": sum(t.usage.unique_urls for t in trajectories),
        "repeated_urls": sum(t.usage.repeated_urls for t in trajectories),
        "lm_calls": sum(t.usage.lm_calls for t in trajectories),
    }


def reports_table(reports: list[BatchReport]) -> Any:
    """A ``rich.table.Table`` with one row per measure and one column per batch (fits a narrow terminal)."""
    from rich.table import Table

    rows: list[tuple[str, list[str]]] = [
        ("memory version", [str(r.version) for r in reports]),
        ("mean score", ["-" if r.mean_score is None else f"{r.mean_score:.3f}" for r in reports]),
        ("valid runs", [f"{r.valid_runs}/{r.examples}" for r in reports]),
        ("crashed runs", [str(r.crashed_runs) for r in reports]),
        *[(f"{_LABELS[name]}: runs seen (summarised)", [_seen(r, name) for r in reports]) for name in DISTILLERS],
        ("summaries failed (head+tail shown)", [str(r.summary_failures) for r in reports]),
        ("M2 rules", [str(r.rules["decomposition"].rules) for r in reports]),
        ("M2 support/contradiction", [_sup_con(r.rules["decomposition"]) for r in reports]),
        ("M3 rules", [str(r.rules["web_action"].rules) for r in reports]),
        ("M3 support/contradiction", [_sup_con(r.rules["web_action"]) for r in reports]),
        ("candidates merged/contradicted/rejected", [_canon(r) for r in reports]),
        ("rules retired / M1 entries retired", [f"{r.rules_retired}/{r.craft_retired}" for r in reports]),
        ("M1 chars (+added/-deleted/~modified)", [_chars(r.chars["craft"]) for r in reports]),
        ("M4 facts", [str(r.facts) for r in reports]),
        ("memory guard rejections", [str(len(r.guard_rejected)) for r in reports]),
        ("questions per sample", [f"{r.questions_per_sample:.1f}" for r in reports]),
        ("steps per question", [f"{r.steps_per_question:.1f}" for r in reports]),
        ("scratchpad chars per sample", [f"{r.scratchpad_chars:.0f}" for r in reports]),
        ("searches", [str(r.searches) for r in reports]),
        ("unique/repeated URLs", [f"{r.unique_urls}/{r.repeated_urls}" for r in reports]),
        ("LM calls (forward+training)", [f"{r.lm_calls}+{r.train_lm_calls}" for r in reports]),
        ("items injected per run (M1/M2/M3/M4)", [_injected(r) for r in reports]),
    ]
    table = Table(title="MEMENTO training batches")
    table.add_column("batch")
    for r in reports:
        table.add_column(str(r.batch), justify="right")
    for label, values in rows:
        table.add_row(label, *values)
    return table


_LABELS = {
    "craft_insights": "A: M1 insights",
    "web_rules": "A: M3 web rules",
    "facts": "A: M4 facts",
    "coverage": "C: coverage",
    "decomposition": "C: M2 rules",
}


def _seen(report: BatchReport, name: str) -> str:
    stats = report.distillers.get(name)
    if stats is None:
        return "-"
    return f"{stats.seen}/{stats.runs} ({stats.summarised})"


def _sup_con(counts: RuleCounts) -> str:
    return f"{counts.total_support}/{counts.total_contradiction}"


def _chars(counts: CharCounts) -> str:
    return f"{counts.after} (+{counts.added}/-{counts.deleted}/~{counts.modified})"


def _canon(report: BatchReport) -> str:
    return f"{report.candidates_merged}/{report.candidates_contradicted}/{report.candidates_rejected}"


def _injected(report: BatchReport) -> str:
    if not report.injected:
        return "-"
    return "/".join(f"{report.injected.get(name, 0.0):.1f}" for name in ("M1", "M2", "M3", "M4"))
