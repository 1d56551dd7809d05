"""Phase A of MEMENTO's training (consolidation): every run that left a record is distilled, one run per call
(map), and the proposals are merged across the batch by canonicalisation (reduce), so a rule's support is the
number of independent runs that back it: M1 craft insights (valid runs only, plus the runs' exploration insights;
a run may vote to retire an M1 entry it was given), M3 operations from each run's search log, M4 facts checked
against the pages the run actually read (:func:`read_sources`). The plan is applied in one transaction.

Example:
    >>> plan = trainer.consolidation.plan(state)  # doctest: +SKIP
    >>> counts = trainer.consolidation.apply(batch, plan, tx, backings)  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from memento.core.dating import held_pages
from memento.core.types import EvidenceRecord, SourcePage, SourceRun, Trajectory
from memento.core.untrusted import quote_data
from memento.execution.threads import run_parallel
from memento.memory.canonicalizer import Candidate, is_no_data
from memento.optimize import run_digest
from memento.optimize.batch_report import DistillerStats
from memento.optimize.rule_votes import apply_votes, numbered_rules, split_ops
from memento.optimize.trainer_records import (
    BatchCheckpoint,
    ConsolidationPlan,
    RuleVote,
    RunRecord,
    is_recorded,
    is_valid,
    run_backing,
)
from memento.programs.memento_program import injected_items
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.optimize.memento_trainer import MementoTrainer


__all__ = ["ConsolidationPhase", "read_sources", "norm_source"]

logger = logging.getLogger(__name__)


def norm_source(url: str) -> str:
    from memento.web.web_tools import clean_url

    return clean_url(url).rstrip("/").lower()


def read_sources(trajectory: Trajectory, cited: list[str]) -> list[SourcePage]:
    """The cited sources a run actually read (a page it opened or a search result it was shown), as it read them
    (URL and date); a source it never saw is dropped (MEMENTO's facts rest on pages, not on what the model wrote)."""
    seen: dict[str, SourcePage] = {}
    for page in held_pages(trajectory):
        key = norm_source(page.url)
        if key not in seen or (page.published is not None and seen[key].published is None):
            seen[key] = page
    out: list[SourcePage] = []
    for url in cited:
        found = seen.get(norm_source(url))
        if found is not None and found not in out:
            out.append(found)
    return out


class ConsolidationPhase:
    """Phase A: M1 insights, M3 web-rule operations and M4 facts, planned per run and applied per batch."""

    def __init__(self, trainer: MementoTrainer) -> None:
        self.trainer = trainer

    def craft_in_use(self, trajectory: Trajectory) -> list[Any]:
        """The M1 entries injected into a run (its typed ``injected_memory``), in injection order."""
        entries = [self.trainer.memory.craft.get(entry_id) for entry_id in injected_items(trajectory).get("craft", [])]
        return [entry for entry in entries if entry is not None]

    def insights(self, state: BatchCheckpoint, run: RunRecord) -> tuple[list[Candidate], list[RuleVote]]:
        """A run's M1 candidates (its distilled insights, only for a valid run, and its exploration insights) and
        its votes to retire M1 entries it was given."""
        digest = state.digests[run.id]
        traj = run.trajectory
        found: list[Candidate] = []
        votes: list[RuleVote] = []
        if is_valid(run):  # a failed run's record teaches no craft (MEMENTO distils M1 from valid runs)
            in_use = self.craft_in_use(traj)
            numbered = "\n".join(f"{i}. {entry.text}" for i, entry in enumerate(in_use, 1))
            out = self.trainer.calls.call(
                self.trainer.calls.stats(state, "craft_insights"),
                digest.record_summarised,
                f"craft insights for {run.id}",
                lambda: self.trainer.learner.distill_insights(
                    task=traj.task_text,
                    run_record=quote_data(digest.record),
                    craft_in_use=quote_data(numbered) if numbered else "(none)",
                ),
            )
            texts = [str(t).strip() for t in (getattr(out, "insights", None) or []) if str(t).strip()]
            evidence = digest.record[: self.trainer.evidence_chars]
            backing = run_backing(run)  # the pages the run opened (exploration included) and the run
            found = [Candidate(text=t, provenance=[run.id], evidence=evidence, backing=backing) for t in texts]
            for number in getattr(out, "retire", None) or []:
                if isinstance(number, int) and 1 <= number <= len(in_use):
                    votes.append(RuleVote(rule_id=in_use[number - 1].id, run_id=run.id, op="remove"))
        for exploration in traj.explorations:
            for text in exploration.insights:
                found.append(
                    Candidate(
                        text=text,
                        provenance=[run.id],
                        evidence=f"{exploration.when.replace('_', ' ')} exploration of the web for the task: "
                        f"{one_line(traj.task_text, 600)}",
                        backing=backing,
                    )
                )
        return self.trainer.calls.guarded(run, found), votes

    def web_rules(self, state: BatchCheckpoint, run: RunRecord) -> tuple[list[RuleVote], list[Candidate]]:
        digest = state.digests[run.id]
        traj = run.trajectory
        shown = self.trainer.calls.shown(self.trainer.memory.web_action, traj)
        out = self.trainer.calls.call(
            self.trainer.calls.stats(state, "web_rules"),
            digest.search_log_summarised,
            f"web-rule distillation for {run.id}",
            lambda: self.trainer.learner.distill_web_rules(
                task=traj.task_text,
                search_log=quote_data(digest.search_log) or "(no searches)",
                current_rules=quote_data(numbered_rules(shown)),
            ),
        )
        votes, adds = split_ops(
            getattr(out, "operations", None) or [], shown, run.id, digest.search_log, run_backing(run)
        )
        return votes, self.trainer.calls.guarded(run, adds)

    def facts(self, state: BatchCheckpoint, run: RunRecord) -> list[Candidate]:
        traj = run.trajectory
        stats = self.trainer.calls.stats(state, "facts")
        chunks = run_digest.findings(traj, is_no_data=is_no_data, max_chars=self.trainer.record_chars)
        self.trainer.calls.seen(stats, len(chunks) > 1)  # a run without answered findings is seen and yields no fact
        found: list[Candidate] = []
        for chunk in chunks:
            out = self.trainer.calls.attempt(
                stats,
                f"fact extraction for {run.id}",
                functools.partial(self.trainer.learner.extract_facts, task=traj.task_text, findings=quote_data(chunk)),
            )
            for item in getattr(out, "facts", None) or []:
                data = item if isinstance(item, dict) else item.model_dump()
                cited = [str(s) for s in data.get("sources", []) or []]
                pages = read_sources(traj, cited)  # only sources the run opened or was shown count
                sources = [page.url for page in pages]
                found.append(
                    Candidate(
                        text=str(data.get("fact", "")),
                        entity=str(data.get("entity", "")),
                        sources=sources,
                        provenance=[run.id],
                        evidence=run_digest.page_text(traj, sources, max_chars=self.trainer.evidence_chars),
                        backing=EvidenceRecord.of(pages, [SourceRun(task_id=run.id, cutoff=traj.cutoff)]),
                    )
                )
        return self.trainer.calls.guarded(run, found)

    def plan(self, state: BatchCheckpoint) -> ConsolidationPlan:
        recorded = [r for r in state.runs if is_recorded(r)]
        self.trainer.digester.digests(state)
        for name in ("craft_insights", "web_rules", "facts"):
            state.distillers[name] = DistillerStats()
        state.guard_rejected = [g for g in state.guard_rejected if g.store == "decomposition"]  # a rerun: planned anew
        plan = ConsolidationPlan()
        if self.trainer._writes("craft"):
            insights = run_parallel(lambda r: self.insights(state, r), recorded, threads=self.trainer.threads)
            plan.craft = self.trainer.canonicalizer.plan("craft", [c for group, _votes in insights for c in group])
            plan.craft_votes = [v for _group, votes in insights for v in votes]
            self.trainer.calls.note_guard(state, "craft", plan.craft)
        if self.trainer._writes("web_action"):
            web = run_parallel(lambda r: self.web_rules(state, r), recorded, threads=self.trainer.threads)
            plan.web_votes = [v for votes, _adds in web for v in votes]
            plan.web_adds = self.trainer.canonicalizer.plan("web_action", [c for _votes, adds in web for c in adds])
            self.trainer.calls.note_guard(state, "web_action", plan.web_adds)
        if self.trainer._writes("facts"):
            facts = run_parallel(lambda r: self.facts(state, r), recorded, threads=self.trainer.threads)
            plan.facts = self.trainer.canonicalizer.plan("facts", [c for group in facts for c in group])
            self.trainer.calls.note_guard(state, "facts", plan.facts)
        return plan

    def retire_craft(self, plan: ConsolidationPlan, batch: int, tx: Any) -> int:
        """Retire the M1 entries that at least ``retire_min_runs`` runs of the batch (given the entry) showed to be
        wrong, more runs than merged new support into it; removed from the store, kept in the change log."""
        removers: dict[str, set[str]] = {}
        for vote in plan.craft_votes:
            removers.setdefault(vote.rule_id, set()).add(vote.run_id)
        supporters: dict[str, set[str]] = {}
        for op in plan.craft:
            if op.action == "merge" and op.target:
                supporters.setdefault(op.target, set()).update(op.candidate.provenance)
        retired = 0
        for entry_id, runs in sorted(removers.items()):
            against = runs - supporters.get(entry_id, set())
            if len(against) < self.trainer.retire_min_runs or len(runs) <= len(supporters.get(entry_id, set())):
                continue
            data = tx.get("craft", entry_id)
            if data is None:
                continue
            self.trainer.memory.craft.remove(entry_id, batch=batch, tx=tx)
            logger.info(
                "M1 entry %s retired in batch %d: %d runs showed it wrong (%s): %s",
                entry_id,
                batch,
                len(against),
                ", ".join(sorted(against)),
                one_line(str(data.get("text", "")), 200),
            )
            retired += 1
        return retired

    def apply(
        self, batch: int, plan: ConsolidationPlan, tx: Any, backings: dict[str, EvidenceRecord]
    ) -> dict[str, int]:
        counts = {"reject": 0, "merge": 0, "contradict": 0, "retired": 0, "craft_retired": 0}
        if self.trainer._writes("web_action"):
            counts["retired"] += apply_votes(
                self.trainer.memory.web_action,
                plan.web_votes,
                batch,
                tx,
                backings,
                retire_min_runs=self.trainer.retire_min_runs,
            )
        for store, ops in (("craft", plan.craft), ("web_action", plan.web_adds), ("facts", plan.facts)):
            if not ops:
                continue
            got = self.trainer.memory.apply(store, ops, batch=batch, tx=tx)
            for name in ("reject", "merge", "contradict"):
                counts[name] += got.get(name, 0)
        if self.trainer._writes("craft") and plan.craft_votes:
            counts["craft_retired"] += self.retire_craft(plan, batch, tx)
        return counts
