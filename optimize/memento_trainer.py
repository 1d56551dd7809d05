"""MEMENTO's batch learning loop (§3.5, Appendix D): forward pass, per-run distillation, judging, reflection.

For each batch of the training set, :meth:`MementoTrainer.fit`:

* **Phase A** runs the program over the batch in parallel with the current memory (each run excludes what its
  own task wrote; exploration insights are recorded in the trajectories, not written), then distils *every run
  that left a record*, one run per call (map), and merges the proposals across the batch by canonicalisation
  (reduce), so a rule's support is the number of independent runs that back it:
  M1 craft insights (:class:`~memento.signatures.distill_craft_insights.DistillCraftInsights`) and the runs'
  exploration insights enter M1 as deltas (add, or merge into one entry); M3 operations come from each run's
  search log (:class:`~memento.signatures.distill_web_rules.DistillWebRules`); M4 facts
  (:class:`~memento.signatures.extract_facts.ExtractFacts`) are checked against their own source pages.
  A record over its budget is summarised (:class:`~memento.signatures.summarize_run.SummarizeRun`, a
  metered LLM step counted in the report), never cut.
* **Phase B** scores each prediction with the metric (an LLM judge where the task has one); failed runs are
  excluded from Phase C.
* **Phase C** reflects with supervision, per valid run: per target element, whether a sub-question covered it
  and correctly (:class:`~memento.signatures.assess_coverage.AssessCoverage`), then M2 operations
  (:class:`~memento.signatures.distill_decomposition_rules.DistillDecompositionRules`). An M2 rule injected into
  a run is credited automatically by the run's outcome (support on success, contradiction on failure) and the
  LLM's operations on it for that run are ignored: one vote per run and rule.
* A new memory version is committed.

Every LM stage is a predictor of the learning module (:class:`~memento.programs.memento_learner.MementoLearner`,
``reflection_lm``). Each phase's result is written in the same SQLite transaction as its memory changes
(:class:`BatchCheckpoint` under ``trainer/batch/<n>``), so ``fit`` on a directory with a half-finished batch
resumes it at the next phase and never applies a batch twice.

:class:`MementoTrainer` is the loop (phases in order, forward pass, scoring, report); its parts live one per
module: :mod:`~memento.optimize.trainer_records` (runs, digests, votes, plans, the batch checkpoint),
:mod:`~memento.optimize.trainer_checkpoints` (stale and corrupt checkpoints), :mod:`~memento.optimize.run_digests`
(records within budget), :mod:`~memento.optimize.distiller_calls` (counted, failure-tolerant, guarded calls),
:mod:`~memento.optimize.rule_votes` (one vote per run and rule), :mod:`~memento.optimize.consolidation_phase`
(Phase A) and :mod:`~memento.optimize.reflection_phase` (Phase C).

Example:
    >>> trainer = MementoTrainer(program, task.metric, memory, batch_size=10, threads=4)  # doctest: +SKIP
    >>> reports = trainer.fit(trainset)  # doctest: +SKIP
    >>> reports[-1].distillers["web_rules"].seen  # doctest: +SKIP
    10
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

import dspy

from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError, DataError, LMUnavailableError
from memento.core.types import EvidenceRecord
from memento.execution.threads import run_parallel
from memento.llm.lm_failures import LMFailureWatch
from memento.memory.canonicalizer import Canonicalizer
from memento.memory.memento_memory import MementoMemory
from memento.memory.memory_guard import MemoryGuard
from memento.metrics.as_float import score_of
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD
from memento.optimize import run_digest
from memento.optimize.batch_report import (
    DISTILLERS,
    BatchReport,
    CharCounts,
    DistillerStats,
    RuleCounts,
    summarize_trajectories,
)
from memento.optimize.consolidation_phase import ConsolidationPhase
from memento.optimize.distiller_calls import DistillerCalls
from memento.optimize.reflection_phase import ReflectionPhase
from memento.optimize.run_digests import RunDigester
from memento.optimize.trainer_checkpoints import BATCH_KEY, RUN_KEY, CorruptCheckpoint, StaleBatch, TrainerCheckpoints
from memento.optimize.trainer_records import (
    PHASES,
    BatchCheckpoint,
    ConsolidationPlan,
    ReflectionPlan,
    RuleVote,
    RunDigest,
    RunRecord,
    example_id,
    forward_run,
    injected_per_run,
    is_valid,
    phase_index,
    run_backing,
)
from memento.programs.memento_learner import MementoLearner
from memento.records.usage import UsageMeter

__all__ = [
    "MementoTrainer",
    "PHASES",
    "example_id",
    "forward_run",
    "RunRecord",
    "RunDigest",
    "RuleVote",
    "ConsolidationPlan",
    "ReflectionPlan",
    "BatchCheckpoint",
]

logger = logging.getLogger(__name__)


class MementoTrainer:
    """Learns MEMENTO memory from a labelled training set, one batch (one memory version) at a time.

    Args:
        program: a :class:`~memento.programs.memento_program.Memento` (any program returning ``trajectory``
            works) whose memory is ``memory``.
        metric: the task metric ``metric(example, pred) -> Prediction(score, feedback) | float``.
        memory: the writable :class:`~memento.memory.memento_memory.MementoMemory` the program reads.
        batch_size: examples per batch (10 in MEMENTO; ``[trainer] batch_size``).
        threads: parallel forward passes and distillation calls.
        roles: LM roles; the learning stages run under ``roles.reflection_lm``.
        learner: the learning module (default: a new :class:`MementoLearner` under ``roles``).
        canonicalizer: defaults to a :class:`~memento.memory.canonicalizer.Canonicalizer` with the memory's
            embedder (or the default one) and the learner's check and merge stages.
        success_threshold: a run scoring strictly above this succeeded (credits its injected M2 rules) in Phase C
            (``trainer.success_threshold``; the rule of :func:`memento.metrics.success.succeeded`).
        record_chars: budget of one run's record in a distiller prompt (craft insights, M2 judged run, facts).
        search_log_chars: budget of one run's search log (M3), separate so the queries always reach M3.
        evidence_chars: budget of a candidate's evidence for the canonicaliser's check (a fact's source pages,
            the record of the run that proposes a rule or insight).
        rules_shown_tokens: budget of the current rules shown to a rule distiller (all of them under ``paper``).
        retire_min_runs: a rule is retired when at least this many runs of a batch propose removing it and its
            contradictions then exceed its support (the retirement is logged).
        summary_input_chars: the longest text one summary call reads; a longer record is summarised in parts, so
            no learning prompt grows with the run.
        on_event: called as ``on_event(batch, phase, detail)`` when a phase starts (the CLI's progress).
        max_consecutive_lm_failures: training stops (``LMUnavailableError``, nothing committed for the batch)
            once this many LM calls failed in a row (``trainer.max_consecutive_lm_failures``); a batch whose
            forward pass has no valid run because LM calls failed is never committed either, so a rerun retries it.
        guard: the memory guard (``[trainer] guard``): ``True`` a default
            :class:`~memento.memory.memory_guard.MemoryGuard`, ``False``/``None`` none, or a guard of your own. It
            rejects instruction-like candidates before any LLM check; the batch report lists what it rejected and
            why (``guard_rejected``). A ``canonicalizer`` passed in keeps its own guard.
    """

    def __init__(
        self,
        program: Any,
        metric: Callable[..., Any],
        memory: MementoMemory,
        batch_size: int = 10,
        *,
        threads: int = 4,
        roles: Any = None,
        learner: MementoLearner | None = None,
        canonicalizer: Canonicalizer | None = None,
        success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
        record_chars: int = 16_000,
        search_log_chars: int = 12_000,
        evidence_chars: int = 6_000,
        rules_shown_tokens: int = 1_500,
        retire_min_runs: int = 2,
        summary_input_chars: int = 48_000,
        on_event: Callable[[int, str, str], None] | None = None,
        max_consecutive_lm_failures: int = 3,
        guard: bool | MemoryGuard | None = True,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if memory.frozen:
            raise ConfigError("the trainer needs a writable memory; this one is frozen")
        attached = getattr(program, "memory", None)
        if attached is not None and attached is not memory:
            raise ConfigError("the program reads another memory than the one being trained; pass the same object")
        for name, value in (("record_chars", record_chars), ("search_log_chars", search_log_chars)):
            if value < 200:
                raise ConfigError(f"{name} must be >= 200, got {value}")
        self.program = program
        self.metric = metric
        self.memory = memory
        self.batch_size = batch_size
        self.threads = max(1, threads)
        self.roles = roles
        self.learner = learner or MementoLearner(roles=roles)
        self.guard: MemoryGuard | None = MemoryGuard() if guard is True else (guard or None)
        self.canonicalizer = canonicalizer or Canonicalizer(
            memory.db, embedder=memory.embedder, check=self.learner.check, merge=self.learner.merge, guard=self.guard
        )
        self.success_threshold = success_threshold
        self.record_chars = record_chars
        self.search_log_chars = search_log_chars
        self.evidence_chars = evidence_chars
        self.rules_shown_tokens = rules_shown_tokens
        self.retire_min_runs = max(1, retire_min_runs)
        self.summary_input_chars = max(1_000, summary_input_chars)
        self.on_event = on_event
        self.lm_watch = LMFailureWatch(max_consecutive=max_consecutive_lm_failures)
        self.task = getattr(program, "task", None)
        self.checkpoints = TrainerCheckpoints(self)
        self.digester = RunDigester(self)
        self.calls = DistillerCalls(self)
        self.consolidation = ConsolidationPhase(self)
        self.reflection = ReflectionPhase(self)
        # the Ray executor's forward pass (memento.execution.ray_executor.RayExecutor.forward_runs): takes (inputs,
        # cutoff, task id) per example and returns their RunRecords, run on the cluster against this memory's version;
        # on_result(j, run) is called here as each run returns (its checkpoint)
        self.remote_forward: Callable[..., list[RunRecord]] | None = None

    @classmethod
    def from_settings(
        cls, program: Any, metric: Callable[..., Any], memory: MementoMemory, settings: Any, **kwargs: Any
    ) -> MementoTrainer:
        """A trainer configured by the ``[trainer]`` and ``[run]`` sections of :class:`memento.core.config.Settings`."""
        section = settings.trainer
        options: dict[str, Any] = {
            "threads": settings.run.threads,
            "success_threshold": section.success_threshold,
            "record_chars": section.record_chars,
            "search_log_chars": section.search_log_chars,
            "evidence_chars": section.evidence_chars,
            "rules_shown_tokens": section.rules_shown_tokens,
            "retire_min_runs": section.retire_min_runs,
            "max_consecutive_lm_failures": section.max_consecutive_lm_failures,
            "summary_input_chars": section.summary_input_chars,
            "guard": section.guard,
        }
        options.update(kwargs)
        batch_size = options.pop("batch_size", None) or section.batch_size
        return cls(program, metric, memory, batch_size, **options)

    @classmethod
    def for_program(cls, program: Any, metric: Callable[..., Any], settings: Any, **kwargs: Any) -> MementoTrainer:
        """:meth:`from_settings` for a program built by the ``memento`` method's builder with ``frozen=False``: the
        memory it trains is the program's own, the learner the one behind its learning stages.

        Example:
            >>> program = build_program("memento", task="qa", settings=s, frozen=False)  # doctest: +SKIP
            >>> MementoTrainer.for_program(program, metric, s).fit(trainset)  # doctest: +SKIP
        """
        learner = getattr(getattr(program, "stages", None), "learner", None)
        if learner is not None:
            kwargs.setdefault("learner", learner)
        kwargs.setdefault("roles", getattr(program, "roles", None))
        return cls.from_settings(program, metric, program.memory, settings, **kwargs)

    # -- plumbing ----------------------------------------------------------------------------------------
    def _emit(self, batch: int, phase: str, detail: str = "") -> None:
        logger.info("batch %d: %s %s", batch, phase, detail)
        if self.on_event is not None:
            self.on_event(batch, phase, detail)

    def _inputs(self, example: Any) -> dict[str, Any]:
        if self.task is not None:
            task_inputs: dict[str, Any] = self.task.inputs(example)
            return task_inputs
        inputs: dict[str, Any] = example.inputs().toDict()
        return inputs

    def _cutoff(self, example: Any) -> Any:
        return self.task.cutoff(example) if self.task is not None else example.get("cutoff")

    def _writes(self, store: str) -> bool:
        return store in getattr(self.memory, "stores", (store,))

    @staticmethod
    def fingerprint(ids: list[str]) -> str:
        """A digest of a batch's example ids (a resumed batch must be the same batch)."""
        return hashlib.sha1("\n".join(ids).encode()).hexdigest()[:16]

    # -- the loop ----------------------------------------------------------------------------------------
    def fit(self, trainset: list[Any]) -> list[BatchReport]:
        """Learn from ``trainset`` batch by batch; resumes a half-finished batch; returns every batch's report."""
        if not trainset:
            raise DataError("the training set is empty")
        ids = [example_id(ex, i) for i, ex in enumerate(trainset)]
        if len(set(ids)) != len(ids):
            raise DataError("training examples must have distinct ids (duplicate 'id' values in the data)")
        reports: list[BatchReport] = []
        for start in range(0, len(trainset), self.batch_size):
            batch = start // self.batch_size + 1
            examples = trainset[start : start + self.batch_size]
            reports.append(self.run_batch(batch, examples, ids[start : start + self.batch_size]))
        return reports

    def _metered(self, state: BatchCheckpoint, fn: Callable[[], Any]) -> Any:
        with UsageMeter(self.roles) as meter:
            out = fn()
        usage = meter.usage()
        state.train_lm_calls += usage.lm_calls
        for stage, stats in usage.by_stage.items():
            state.train_stages[stage] = state.train_stages.get(stage, 0) + stats.lm_calls
        return out

    def run_batch(self, batch: int, examples: list[Any], ids: list[str]) -> BatchReport:
        """Run (or resume) one batch through phases A, B and C and commit its version.

        Every write is conditional on the batch's checkpoint being the one this run last saw, so a batch is applied
        exactly once even if two writers interleave (the CLI also holds the directory's lock).
        """
        try:
            return self._run_batch(batch, examples, ids)
        except StaleBatch:
            saved = self.checkpoints.saved(BATCH_KEY.format(batch)) or {}
            if saved.get("phase") == "done" and saved.get("report"):
                self._emit(batch, "done", "already applied by another writer; skipped")
                return BatchReport.model_validate(saved["report"])
            raise DataError(
                f"batch {batch} in {self.memory.directory} was advanced by another writer; rerun to resume it"
            ) from None

    def _stop_on_lm_failure(self, batch: int, runs: list[RunRecord]) -> None:
        """Refuse to go on with a batch the LM failed: too many failed calls in a row, or no valid run at all."""
        watch = self.lm_watch
        valid = sum(is_valid(r) for r in runs)
        if watch.tripped or (valid == 0 and watch.failed > 0):
            why = (
                f"{watch.streak} consecutive LM calls failed"
                if watch.tripped
                else f"no valid run; {watch.failed} LM calls failed"
            )
            raise LMUnavailableError(
                f"training stopped at batch {batch} ({why}; last: {watch.last_error}); nothing committed for "
                "this batch: fix the LM and rerun to retry it"
            )

    def _run_batch(self, batch: int, examples: list[Any], ids: list[str]) -> BatchReport:
        key = BATCH_KEY.format(batch)
        fp = self.fingerprint(ids)
        try:
            saved = self.checkpoints.saved(key)
        except CorruptCheckpoint as exc:
            recovered = self.checkpoints.recover(batch, key, fp, str(exc))
            if recovered is not None:
                return recovered
            saved = None
        if saved and saved.get("fingerprint") != fp:
            raise DataError(
                f"batch {batch} in {self.memory.directory} was started on different examples; "
                "train on the same data or use a new --memory directory"
            )
        state = BatchCheckpoint.model_validate(saved) if saved else None
        if state is not None and state.phase == "done" and state.report is not None:
            self._emit(batch, "done", "already applied; skipped")
            return state.report
        if state is None:
            started = time.perf_counter()
            finished = self.checkpoints.finished_runs(key, fp)
            resumed = f" ({len(finished)} finished before, kept)" if finished else ""
            self._emit(batch, "forward", f"{len(examples)} examples{resumed}")
            with self.lm_watch:
                runs = self._forward(examples, ids, batch=batch, key=key, fingerprint=fp, finished=finished)
            self._stop_on_lm_failure(batch, runs)
            self._find_injections(runs)
            state = BatchCheckpoint(fingerprint=fp, phase="forward", base_version=self.memory.version, runs=runs)
            state.seconds["forward"] = round(time.perf_counter() - started, 3)
            with self.memory.transaction(batch=batch) as tx:
                self.checkpoints.guard(tx, key, None)
                tx.set_checkpoint(key, state.model_dump(mode="json"))
                tx.delete_checkpoints(RUN_KEY.format(key, ""))  # the batch's checkpoint holds every run now

        if phase_index(state.phase) < phase_index("consolidated"):
            started = time.perf_counter()
            self._emit(batch, "consolidate", "M1 insights, M3 search logs, M4 facts (one call per run)")
            plan = self._metered(state, lambda: self.consolidation.plan(state))
            state.seconds["consolidate"] = round(time.perf_counter() - started, 3)
            with self.memory.transaction(batch=batch) as tx:
                self.checkpoints.guard(tx, key, state.phase)
                self._count(state, self.consolidation.apply(batch, plan, tx, self._backings(state)))
                state.phase = "consolidated"
                tx.set_checkpoint(key, state.model_dump(mode="json"))

        if phase_index(state.phase) < phase_index("scored"):
            started = time.perf_counter()
            self._emit(batch, "score", "metric / judge")
            scored = run_parallel(
                lambda pair: self._score(examples[pair[0]], pair[1]), list(enumerate(state.runs)), threads=self.threads
            )
            for run, (score, feedback) in zip(state.runs, scored, strict=True):
                run.score, run.feedback = score, feedback
            state.seconds["score"] = round(time.perf_counter() - started, 3)
            phase, state.phase = state.phase, "scored"
            with self.memory.transaction(batch=batch) as tx:
                self.checkpoints.guard(tx, key, phase)
                tx.set_checkpoint(key, state.model_dump(mode="json"))

        started = time.perf_counter()
        self._emit(batch, "reflect", "M2 coverage and rule operations (one call per valid run)")
        plan_c = self._metered(state, lambda: self.reflection.plan(examples, state))
        state.seconds["reflect"] = round(time.perf_counter() - started, 3)
        with self.memory.transaction(batch=batch) as tx:
            self.checkpoints.guard(tx, key, state.phase)  # another writer applied or advanced it meanwhile: never twice
            self._count(state, self.reflection.apply(batch, plan_c, tx, self._backings(state)))
            version = self.memory.commit_version(batch=batch, note=f"batch {batch}: {len(state.runs)} examples", tx=tx)
            report = self._report(batch, version, state)
            state.phase, state.report = "done", report
            tx.set_checkpoint(key, state.model_dump(mode="json"), version=version)
        self._emit(batch, "done", f"version {version}")
        return report

    @classmethod
    def _backings(cls, state: BatchCheckpoint) -> dict[str, EvidenceRecord]:
        """Each run's evidence (run id -> the pages it opened and the run), for the votes it casts."""
        return {run.id: run_backing(run) for run in state.runs}

    @staticmethod
    def _count(state: BatchCheckpoint, counts: dict[str, int]) -> None:
        for name, value in counts.items():
            state.counts[name] = state.counts.get(name, 0) + value

    # -- Phase A: forward pass -----------------------------------------------------------------------------

    def _forward(
        self,
        examples: list[Any],
        ids: list[str],
        *,
        batch: int | None = None,
        key: str | None = None,
        fingerprint: str = "",
        finished: dict[int, RunRecord] | None = None,
    ) -> list[RunRecord]:
        """Run the program over the batch; with a ``key``, each finished run is checkpointed the moment it ends (a
        SIGTERM or a crash mid-pass loses none), and the runs in ``finished`` are not run again.

        Under the Ray executor (``remote_forward``) the runs are tasks on the cluster and this process checkpoints
        each one as its task returns."""
        done = dict(finished or {})
        todo = [i for i in range(len(examples)) if i not in done]
        jobs = [(self._inputs(examples[i]), self._cutoff(examples[i]), ids[i]) for i in todo]

        def checkpoint(i: int, run: RunRecord) -> None:
            if key is not None and not run.crashed:
                saved = {"fingerprint": fingerprint, "run": run.model_dump(mode="json")}
                with self.memory.transaction(batch=batch) as tx:
                    tx.set_checkpoint(RUN_KEY.format(key, f"{i:05d}"), saved)

        if self.remote_forward is not None:  # the Ray executor: each run a task on the cluster (memory read there)
            runs = list(self.remote_forward(jobs, on_result=lambda j, run: checkpoint(todo[j], run)))
        else:

            def one(j: int) -> RunRecord:
                run = forward_run(self.program, *jobs[j])
                checkpoint(todo[j], run)
                return run

            runs = run_parallel(one, list(range(len(jobs))), threads=self.threads)
        done.update(zip(todo, runs, strict=True))
        return [done[i] for i in range(len(examples))]

    def _find_injections(self, runs: list[RunRecord]) -> None:
        """Keep, per run, the instruction-like passages of the pages it read (for the guard, after a resume too)."""
        if self.guard is None:
            return
        for run in runs:
            if not run.crashed:
                found = (p for text in run_digest.read_texts(run.trajectory) for p in self.guard.injections(text))
                run.injections = list(dict.fromkeys(found))

    # -- Phase B: scoring ------------------------------------------------------------------------------------
    def _score(self, example: Any, run: RunRecord) -> tuple[float | None, str]:
        trajectory = run.trajectory
        if run.crashed or trajectory.error or not run.prediction:
            return None, f"run failed: {trajectory.error or 'no prediction'}"
        pred = dspy.Prediction(**run.prediction, trajectory=trajectory)
        try:
            result = self.metric(example, pred)
        except Exception as exc:  # noqa: BLE001 - an unscorable run is excluded from Phase C
            return None, str(handle_error(exc, where=f"metric on {run.id}", log=logger))
        feedback = getattr(result, "feedback", None) or (result.get("feedback") if isinstance(result, dict) else "")
        return score_of(result), str(feedback or "")

    # -- report ----------------------------------------------------------------------------------------------
    def _report(self, batch: int, version: int, state: BatchCheckpoint) -> BatchReport:
        runs = state.runs
        trajectories = [r.trajectory for r in runs]
        diff = self.memory.diff(state.base_version, version)
        scores = [float(r.score) for r in runs if r.score is not None]
        rules = {}
        for name, book in (("decomposition", self.memory.decomposition), ("web_action", self.memory.web_action)):
            stats = book.stats()
            rules[name] = RuleCounts(
                rules=stats["rules"],
                total_support=stats["total_support"],
                total_contradiction=stats["total_contradiction"],
                rules_contradicted=stats["rules_contradicted"],
            )
        chars = {
            name: CharCounts(
                after=d.chars_after, added=d.chars_added, deleted=d.chars_deleted, modified=d.chars_modified
            )
            for name, d in diff.stores.items()
        }
        fact_stats = self.memory.facts.stats()
        valid = sum(is_valid(r) for r in runs)
        crashed = sum(r.crashed for r in runs)
        return BatchReport(
            batch=batch,
            version=version,
            examples=len(runs),
            valid_runs=valid,
            failed_runs=len(runs) - valid,
            crashed_runs=crashed,
            mean_score=round(sum(scores) / len(scores), 4) if scores else None,
            rules=rules,
            chars=chars,
            craft_entries=len(self.memory.craft),
            facts=fact_stats["facts"],
            facts_superseded=fact_stats["superseded"],
            candidates_rejected=state.counts.get("reject", 0),
            candidates_merged=state.counts.get("merge", 0),
            candidates_contradicted=state.counts.get("contradict", 0),
            rules_retired=state.counts.get("retired", 0),
            craft_retired=state.counts.get("craft_retired", 0),
            injected=injected_per_run(trajectories),
            train_lm_calls=state.train_lm_calls,
            train_stages=dict(state.train_stages),
            distillers={name: state.distillers.get(name, DistillerStats()) for name in DISTILLERS},
            guard_rejected=list(state.guard_rejected),
            summary_failures=sum(d.summary_failures for d in state.digests.values()),
            seconds=state.seconds,
            **summarize_trajectories(trajectories),
        )
