"""Phase C of MEMENTO's training (supervised reflection), one call per valid scored run: per target element,
whether a sub-question covered it and correctly (:class:`~memento.signatures.assess_coverage.AssessCoverage`),
then M2 operations (:class:`~memento.signatures.distill_decomposition_rules.DistillDecompositionRules`). An M2
rule injected into a run is credited by the run's outcome (support on success, contradiction on failure) and the
LLM's operations on it for that run are ignored: one vote per run and rule.

Example:
    >>> plan = trainer.reflection.plan(examples, state)  # doctest: +SKIP
    >>> counts = trainer.reflection.apply(batch, plan, tx, backings)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memento.core.types import EvidenceRecord
from memento.core.untrusted import quote_data
from memento.execution.threads import run_parallel
from memento.memory.canonicalizer import Candidate
from memento.metrics.success import succeeded
from memento.optimize import run_digest
from memento.optimize.batch_report import DistillerStats
from memento.optimize.rule_votes import apply_votes, numbered_rules, split_ops
from memento.optimize.trainer_records import (
    BatchCheckpoint,
    ReflectionPlan,
    RuleVote,
    RunDigest,
    RunRecord,
    is_valid,
    run_backing,
)
from memento.programs.memento_program import injected_items
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.optimize.memento_trainer import MementoTrainer


__all__ = ["ReflectionPhase"]


class ReflectionPhase:
    """Phase C: coverage of each valid run's targets, then its M2 decomposition-rule operations."""

    def __init__(self, trainer: MementoTrainer) -> None:
        self.trainer = trainer

    def coverage(self, state: BatchCheckpoint, example: Any, run: RunRecord) -> str:
        traj = run.trajectory
        digest = state.digests.get(run.id) or RunDigest(tree=run_digest.judged_tree(traj))
        labels = {k: v for k, v in example.items() if k not in self.trainer._inputs(example) and k not in ("docs",)}
        # the gold labels are the user's; the judge's feedback may quote the prediction, so it is quoted data
        expected = (
            f"labels: {one_line(json.dumps(labels, default=str), 1500)}\njudge feedback: {quote_data(run.feedback)}"
        )
        out = self.trainer.calls.call(
            self.trainer.calls.stats(state, "coverage"),
            digest.tree_summarised,
            f"coverage assessment for {run.id}",
            lambda: self.trainer.learner.assess_coverage(
                task=traj.task_text, expected=expected, sub_questions=quote_data(digest.tree) or "(none)"
            ),
        )
        rows = []
        for c in getattr(out, "coverage", None) or []:
            c = c if isinstance(c, dict) else c.model_dump()
            mark = "correct" if c.get("correct") else ("covered, wrong" if c.get("covered") else "MISSED")
            rows.append(f"  * {c.get('target', '')}: {mark} ({one_line(c.get('sub_question', ''), 160)})")
        cov = "\n".join(rows) or ("  (coverage unavailable)" if out is None else "  (no targets)")
        return (
            f"score {float(run.score or 0.0):.2f}\nsub-questions:\n{digest.tree or '(none)'}\n"
            f"feedback: {one_line(run.feedback, 600)}\ncoverage:\n{cov}"
        )

    def decomposition(
        self, state: BatchCheckpoint, example: Any, run: RunRecord
    ) -> tuple[list[RuleVote], list[Candidate]]:
        traj = run.trajectory
        judged = self.coverage(state, example, run)
        success = succeeded(run.score, threshold=self.trainer.success_threshold)
        injected = set(injected_items(traj).get("decomposition", []))
        auto = [
            RuleVote(rule_id=rule_id, run_id=run.id, op="reinforce" if success else "contradict", auto=True)
            for rule_id in sorted(injected)
        ]
        shown = self.trainer.calls.shown(self.trainer.memory.decomposition, traj)
        digest = state.digests.get(run.id)
        out = self.trainer.calls.call(
            self.trainer.calls.stats(state, "decomposition"),
            bool(digest and digest.tree_summarised),
            f"decomposition-rule distillation for {run.id}",
            lambda: self.trainer.learner.distill_decomposition(
                task=traj.task_text, judged_run=quote_data(judged), current_rules=quote_data(numbered_rules(shown))
            ),
        )
        votes, adds = split_ops(
            getattr(out, "operations", None) or [],
            shown,
            run.id,
            judged[: self.trainer.evidence_chars],
            run_backing(run),
        )
        # one vote per run and rule: the outcome credit of an injected rule wins over the LLM's operation on it
        return auto + [v for v in votes if v.rule_id not in injected], self.trainer.calls.guarded(run, adds)

    def plan(self, examples: list[Any], state: BatchCheckpoint) -> ReflectionPlan:
        for name in ("coverage", "decomposition"):
            state.distillers[name] = DistillerStats()
        state.guard_rejected = [g for g in state.guard_rejected if g.store != "decomposition"]
        if not self.trainer._writes("decomposition"):
            return ReflectionPlan()
        judged = [(ex, run) for ex, run in zip(examples, state.runs, strict=True) if run.score is not None]
        judged = [(ex, run) for ex, run in judged if is_valid(run)]
        got = run_parallel(lambda pair: self.decomposition(state, *pair), judged, threads=self.trainer.threads)
        plan = ReflectionPlan(votes=[v for votes, _adds in got for v in votes])
        plan.adds = self.trainer.canonicalizer.plan("decomposition", [c for _votes, adds in got for c in adds])
        self.trainer.calls.note_guard(state, "decomposition", plan.adds)
        return plan

    def apply(self, batch: int, plan: ReflectionPlan, tx: Any, backings: dict[str, EvidenceRecord]) -> dict[str, int]:
        if not self.trainer._writes("decomposition"):
            return {}
        retired = apply_votes(
            self.trainer.memory.decomposition,
            plan.votes,
            batch,
            tx,
            backings,
            retire_min_runs=self.trainer.retire_min_runs,
        )
        got = self.trainer.memory.apply("decomposition", plan.adds, batch=batch, tx=tx) if plan.adds else {}
        return {
            "reject": got.get("reject", 0),
            "merge": got.get("merge", 0),
            "contradict": got.get("contradict", 0),
            "retired": retired,
        }
