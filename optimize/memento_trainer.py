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

Example:
    >>> trainer = MementoTrainer(program, task.metric, memory, batch_size=10, threads=4)  # doctest: +SKIP
    >>> reports = trainer.fit(trainset)  # doctest: +SKIP
    >>> reports[-1].distillers["web_rules"].seen  # doctest: +SKIP
    10
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import dspy
from pydantic import BaseModel, Field

from memento.dating import DateFilter, held_pages, run_evidence
from memento.errors import ConfigError, DataError, LMUnavailableError, handle_error
from memento.lm_failures import LMFailureWatch
from memento.memory.canonicalizer import Candidate, Canonicalizer, CanonicalOp, is_no_data
from memento.memory.memento_memory import MementoMemory
from memento.memory.memory_guard import MemoryGuard
from memento.memory.rule_book import RuleBook
from memento.memory.sqlite_store import estimate_tokens
from memento.metrics.as_float import score_of
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD, succeeded
from memento.optimize import run_digest
from memento.optimize.batch_report import (
    DISTILLERS,
    BatchReport,
    CharCounts,
    DistillerStats,
    GuardRejection,
    RuleCounts,
    summarize_trajectories,
)
from memento.programs.memento_learner import MementoLearner
from memento.programs.memento_program import injected_items
from memento.text import one_line
from memento.threads import run_parallel
from memento.types import EvidenceRecord, SourcePage, SourceRun, Trajectory
from memento.untrusted import quote_data
from memento.usage import UsageMeter

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

PHASES: tuple[str, ...] = ("forward", "consolidated", "scored", "done")
_KEY = "trainer/batch/{:05d}"
_RUN_KEY = "{}/run/{}"  # a forward run that finished, until the batch's own checkpoint holds every run


class _StaleBatch(Exception):
    """The batch's checkpoint changed under this run (another writer): its write is abandoned."""


class _CorruptCheckpoint(Exception):
    """A batch's checkpoint row cannot be read back (truncated JSON, a record of the wrong shape)."""


def forward_run(program: Any, inputs: dict[str, Any], cutoff: Any, task_id: str) -> RunRecord:
    """One forward run of Phase A: ``program`` on one example's inputs; a crash is a failed run, not a failed batch."""
    try:
        pred = program(**inputs, cutoff=cutoff, task_id=task_id)
    except Exception as exc:  # noqa: BLE001 - one broken example is a failed run, not a failed batch
        failure = handle_error(exc, where=f"forward pass on {task_id}", log=logger)
        trajectory = Trajectory(task_text=str(inputs), task_id=task_id, error=failure.reason)
        return RunRecord(id=task_id, trajectory=trajectory, crashed=True)
    prediction = {k: v for k, v in pred.items() if k != "trajectory"}
    return RunRecord(id=task_id, prediction=json.loads(json.dumps(prediction, default=str)), trajectory=pred.trajectory)


def example_id(example: Any, index: int) -> str:
    """A stable id for a training example: its ``id`` field, else a hash of its inputs (index as tiebreak)."""
    value = example.get("id") if hasattr(example, "get") else None
    if value not in (None, ""):
        return str(value)
    inputs = example.inputs().toDict() if hasattr(example, "inputs") else dict(example)
    digest = hashlib.sha1(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"ex-{digest}-{index}"


def _phase_index(phase: str | None) -> int:
    return PHASES.index(phase) if phase in PHASES else -1


def _norm_source(url: str) -> str:
    from memento.web.web_tools import clean_url

    return clean_url(url).rstrip("/").lower()


def _read_sources(trajectory: Trajectory, cited: list[str]) -> list[SourcePage]:
    """The cited sources a run actually read (a page it opened or a search result it was shown), as it read them
    (URL and date); a source it never saw is dropped (MEMENTO's facts rest on pages, not on what the model wrote)."""
    seen: dict[str, SourcePage] = {}
    for page in held_pages(trajectory):
        key = _norm_source(page.url)
        if key not in seen or (page.published is not None and seen[key].published is None):
            seen[key] = page
    out: list[SourcePage] = []
    for url in cited:
        found = seen.get(_norm_source(url))
        if found is not None and found not in out:
            out.append(found)
    return out


def _numbered(rules: list[Any]) -> str:
    return "\n".join(f"{i}. {RuleBook.render_rule(r)[2:]}" for i, r in enumerate(rules, 1))


def _injected_per_run(trajectories: list[Trajectory]) -> dict[str, float]:
    """Mean memory items injected per run, by paper store name (M1-M4), from the runs' ``injected_memory``."""
    if not trajectories:
        return {}
    names = {"craft": "M1", "decomposition": "M2", "web_action": "M3", "facts": "M4"}
    totals = dict.fromkeys(names.values(), 0)
    for trajectory in trajectories:
        for store, ids in injected_items(trajectory).items():
            if store in names:
                totals[names[store]] += len(ids)
    return {name: round(total / len(trajectories), 3) for name, total in totals.items()}


# -- records of a batch -------------------------------------------------------------------------------------
class RunRecord(BaseModel):
    """One forward run of a batch: its prediction and trajectory, then its score and the judge's feedback.

    ``crashed``: the program raised before producing a trajectory (counted apart in the report).
    """

    id: str
    prediction: dict[str, Any] = Field(default_factory=dict)
    trajectory: Trajectory
    crashed: bool = False
    score: float | None = None
    feedback: str = ""
    # instruction-like passages of the pages the run read (memory guard), kept here because a checkpointed
    # trajectory keeps no page text
    injections: list[str] = Field(default_factory=list)


class RunDigest(BaseModel):
    """What the distillers read of one run, each text within its budget (summarised when it was over)."""

    record: str = ""
    record_summarised: bool = False
    search_log: str = ""
    search_log_summarised: bool = False
    tree: str = ""
    tree_summarised: bool = False
    summary_failures: int = 0


class RuleVote(BaseModel):
    """One run's verdict on one stored rule (``auto``: M2 outcome credit of an injected rule)."""

    rule_id: str
    run_id: str
    op: Literal["reinforce", "contradict", "remove"]
    auto: bool = False


class ConsolidationPlan(BaseModel):
    """Phase A's planned memory changes (applied in one transaction)."""

    craft: list[CanonicalOp] = Field(default_factory=list)
    craft_votes: list[RuleVote] = Field(default_factory=list)  # runs proposing to retire an M1 entry they were given
    web_votes: list[RuleVote] = Field(default_factory=list)
    web_adds: list[CanonicalOp] = Field(default_factory=list)
    facts: list[CanonicalOp] = Field(default_factory=list)


class ReflectionPlan(BaseModel):
    """Phase C's planned M2 changes (applied in one transaction)."""

    votes: list[RuleVote] = Field(default_factory=list)
    adds: list[CanonicalOp] = Field(default_factory=list)


class BatchCheckpoint(BaseModel):
    """The resumable state of one batch, written atomically with each phase's memory changes."""

    fingerprint: str
    phase: str
    base_version: int
    runs: list[RunRecord]
    seconds: dict[str, float] = Field(default_factory=dict)
    train_lm_calls: int = 0
    train_stages: dict[str, int] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    digests: dict[str, RunDigest] = Field(default_factory=dict)
    distillers: dict[str, DistillerStats] = Field(default_factory=dict)
    guard_rejected: list[GuardRejection] = Field(default_factory=list)
    report: BatchReport | None = None


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
        self._lock = threading.Lock()
        # the Ray executor's forward pass (memento.ray_executor.RayExecutor.forward_runs): takes (inputs, cutoff,
        # task id) per example and returns their RunRecords, run on the cluster against this memory's version;
        # on_result(j, run) is called here as each run returns (its checkpoint)
        self.remote_forward: Callable[..., list[RunRecord]] | None = None

    @classmethod
    def from_settings(
        cls, program: Any, metric: Callable[..., Any], memory: MementoMemory, settings: Any, **kwargs: Any
    ) -> MementoTrainer:
        """A trainer configured by the ``[trainer]`` and ``[run]`` sections of :class:`memento.config.Settings`."""
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
            return self.task.inputs(example)
        return example.inputs().toDict()

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
        except _StaleBatch:
            saved = self._saved_checkpoint(_KEY.format(batch)) or {}
            if saved.get("phase") == "done" and saved.get("report"):
                self._emit(batch, "done", "already applied by another writer; skipped")
                return BatchReport.model_validate(saved["report"])
            raise DataError(
                f"batch {batch} in {self.memory.directory} was advanced by another writer; rerun to resume it"
            ) from None

    @staticmethod
    def _guard(tx: Any, key: str, phase: str | None) -> None:
        """Go on only if the batch's stored phase is still ``phase`` (what this run last wrote or read)."""
        if (tx.checkpoint(key) or {}).get("phase") != phase:
            raise _StaleBatch

    def _stop_on_lm_failure(self, batch: int, runs: list[RunRecord]) -> None:
        """Refuse to go on with a batch the LM failed: too many failed calls in a row, or no valid run at all."""
        watch = self.lm_watch
        valid = sum(self._valid(r) for r in runs)
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

    def _saved_checkpoint(self, key: str) -> dict[str, Any] | None:
        """The stored checkpoint, validated; a truncated or corrupt row raises :class:`_CorruptCheckpoint`."""
        try:
            saved = self.memory.db.checkpoint(key)
            if saved is not None:
                BatchCheckpoint.model_validate(saved)
        except ValueError as exc:  # json.JSONDecodeError and pydantic's ValidationError are ValueErrors
            raise _CorruptCheckpoint(one_line(f"{type(exc).__name__}: {exc}", 160)) from None
        return saved

    def _recover_checkpoint(self, batch: int, key: str, fingerprint: str, reason: str) -> BatchReport | None:
        """After a corrupt checkpoint, one warning line, then: a batch committed as a version is not run again (a
        second run would count its evidence twice): its checkpoint is rewritten as done, with a report that has
        only the batch and version (the figures were in the lost row); any other batch returns ``None`` once its
        uncommitted changes are undone and its checkpoint dropped, so it starts afresh."""
        committed = [v for v in self.memory.db.versions() if v["batch"] == batch and v["status"] == "committed"]
        where = f"batch {batch}: the checkpoint in {self.memory.directory} is unreadable ({reason})"
        if committed:
            info = committed[-1]
            version = int(info["version"])
            logger.warning("%s; the batch was committed as version %d, so it is not run again", where, version)
            report = BatchReport(batch=batch, version=version)
            state = BatchCheckpoint(
                fingerprint=fingerprint, phase="done", base_version=int(info["parent"] or 0), runs=[], report=report
            )
            with self.memory.transaction(batch=batch) as tx:
                tx.set_checkpoint(key, state.model_dump(mode="json"), version=version)
            self._emit(batch, "done", f"committed as version {version}; its figures were lost with the checkpoint")
            return report
        undone = self.memory.rollback(self.memory.version)  # also drops every uncommitted checkpoint
        logger.warning("%s; starting the batch afresh (%d uncommitted changes undone)", where, undone)
        return None

    def _run_batch(self, batch: int, examples: list[Any], ids: list[str]) -> BatchReport:
        key = _KEY.format(batch)
        fp = self.fingerprint(ids)
        try:
            saved = self._saved_checkpoint(key)
        except _CorruptCheckpoint as exc:
            recovered = self._recover_checkpoint(batch, key, fp, str(exc))
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
            finished = self._finished_runs(key, fp)
            resumed = f" ({len(finished)} finished before, kept)" if finished else ""
            self._emit(batch, "forward", f"{len(examples)} examples{resumed}")
            with self.lm_watch:
                runs = self._forward(examples, ids, batch=batch, key=key, fingerprint=fp, finished=finished)
            self._stop_on_lm_failure(batch, runs)
            self._find_injections(runs)
            state = BatchCheckpoint(fingerprint=fp, phase="forward", base_version=self.memory.version, runs=runs)
            state.seconds["forward"] = round(time.perf_counter() - started, 3)
            with self.memory.transaction(batch=batch) as tx:
                self._guard(tx, key, None)
                tx.set_checkpoint(key, state.model_dump(mode="json"))
                tx.delete_checkpoints(_RUN_KEY.format(key, ""))  # the batch's checkpoint holds every run now

        if _phase_index(state.phase) < _phase_index("consolidated"):
            started = time.perf_counter()
            self._emit(batch, "consolidate", "M1 insights, M3 search logs, M4 facts (one call per run)")
            plan = self._metered(state, lambda: self._consolidation_plan(state))
            state.seconds["consolidate"] = round(time.perf_counter() - started, 3)
            with self.memory.transaction(batch=batch) as tx:
                self._guard(tx, key, state.phase)
                self._count(state, self._apply_consolidation(batch, plan, tx, self._backings(state)))
                state.phase = "consolidated"
                tx.set_checkpoint(key, state.model_dump(mode="json"))

        if _phase_index(state.phase) < _phase_index("scored"):
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
                self._guard(tx, key, phase)
                tx.set_checkpoint(key, state.model_dump(mode="json"))

        started = time.perf_counter()
        self._emit(batch, "reflect", "M2 coverage and rule operations (one call per valid run)")
        plan_c = self._metered(state, lambda: self._reflection_plan(examples, state))
        state.seconds["reflect"] = round(time.perf_counter() - started, 3)
        with self.memory.transaction(batch=batch) as tx:
            self._guard(tx, key, state.phase)  # another writer applied or advanced it meanwhile: never twice
            self._count(state, self._apply_reflection(batch, plan_c, tx, self._backings(state)))
            version = self.memory.commit_version(batch=batch, note=f"batch {batch}: {len(state.runs)} examples", tx=tx)
            report = self._report(batch, version, state)
            state.phase, state.report = "done", report
            tx.set_checkpoint(key, state.model_dump(mode="json"), version=version)
        self._emit(batch, "done", f"version {version}")
        return report

    @classmethod
    def _backings(cls, state: BatchCheckpoint) -> dict[str, EvidenceRecord]:
        """Each run's evidence (run id -> the pages it opened and the run), for the votes it casts."""
        return {run.id: cls._backing(run) for run in state.runs}

    @staticmethod
    def _count(state: BatchCheckpoint, counts: dict[str, int]) -> None:
        for name, value in counts.items():
            state.counts[name] = state.counts.get(name, 0) + value

    # -- Phase A: forward pass -----------------------------------------------------------------------------
    def _finished_runs(self, key: str, fingerprint: str) -> dict[int, RunRecord]:
        """Forward runs of this batch that finished before an interruption (their own checkpoints), by index."""
        finished: dict[int, RunRecord] = {}
        try:
            saved_runs = self.memory.db.checkpoints(_RUN_KEY.format(key, ""))
        except ValueError:  # a damaged row: every run of the pass is done again
            logger.warning("the forward run checkpoints of %s are unreadable; the forward pass is done again", key)
            return finished
        for run_key, saved in saved_runs.items():
            try:
                if saved.get("fingerprint") == fingerprint:
                    finished[int(run_key.rsplit("/", 1)[1])] = RunRecord.model_validate(saved["run"])
            except (ValueError, KeyError, TypeError, AttributeError):  # a damaged row: that run is simply redone
                logger.warning("forward run checkpoint %s is unreadable; the run is done again", run_key)
        return finished

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
                    tx.set_checkpoint(_RUN_KEY.format(key, f"{i:05d}"), saved)

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

    def _guarded(self, run: RunRecord, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates with what the memory guard compares them with: the run's reading and its task."""
        if self.guard is not None:
            pages = [*run_digest.read_texts(run.trajectory), *run.injections]
            for candidate in candidates:
                candidate.pages, candidate.task = pages, run.trajectory.task_text
        return candidates

    def _note_guard(self, state: BatchCheckpoint, store: str, ops: list[CanonicalOp]) -> None:
        """Record the memory guard's rejections in the batch state (the report lists them) and the log."""
        for op in ops:
            if not op.guard:
                continue
            cand = op.candidate
            logger.warning("memory guard rejected a %s candidate (%s): %s", store, one_line(cand.text, 120), op.reason)
            with self._lock:
                state.guard_rejected.append(
                    GuardRejection(
                        store=store, text=one_line(cand.text, 500), entity=cand.entity, reasons=op.guard,
                        runs=sorted(set(cand.provenance)),
                    )
                )  # fmt: skip

    @staticmethod
    def _valid(run: RunRecord) -> bool:
        trajectory = run.trajectory
        if run.crashed or trajectory.error:
            return False
        answered = [n for n in trajectory.nodes if n.parent_id is not None and n.status == "answered"]
        values = [v for v in run.prediction.values() if v not in (None, "", [], {})]
        return bool(values) and (bool(answered) or not trajectory.nodes)

    @staticmethod
    def _recorded(run: RunRecord) -> bool:
        return not run.crashed and run_digest.has_record(run.trajectory)

    # -- Phase A: digests (summarise what is over budget) ----------------------------------------------------
    def _summary(self, task: str, text: str, budget: int) -> str:
        """An LLM summary within ``budget``; a text longer than ``summary_input_chars`` is summarised in parts."""
        if len(text) <= self.summary_input_chars:
            return self.learner.summarize(task, text, budget)[:budget]
        parts, current = [], ""
        for block in text.split("\n"):
            if current and len(current) + len(block) + 1 > self.summary_input_chars:
                parts.append(current)
                current = ""
            current = f"{current}\n{block}" if current else block[: self.summary_input_chars]
        parts.append(current)
        share = max(100, budget // len(parts) - 1)
        return "\n".join(self.learner.summarize(task, part, share)[:share] for part in parts)[:budget]

    def _fit(self, task: str, render: Callable[[int], str], budget: int, digest: RunDigest) -> tuple[str, bool]:
        """The most detailed rendering within ``budget`` (fewer result titles first), else an LLM summary."""
        text = ""
        for titles in run_digest.TITLE_LADDER:
            text = render(titles)
            if len(text) <= budget:
                return text, False
        text = render(run_digest.TITLE_LADDER[0])
        try:
            return self._summary(task, text, budget), True
        except Exception as exc:  # noqa: BLE001 - a failed summary falls back to the record's head and tail
            handle_error(exc, where="run summary (head and tail kept)", log=logger)
            with self._lock:
                digest.summary_failures += 1
            half = budget // 2 - 40
            return f"{text[:half]}\n[... {len(text) - 2 * half} characters not shown ...]\n{text[-half:]}", True

    def _digest(self, run: RunRecord) -> RunDigest:
        traj = run.trajectory
        task = one_line(traj.task_text, 2000)
        digest = RunDigest()
        digest.record, digest.record_summarised = self._fit(
            task, lambda titles: run_digest.run_record(traj, titles=titles), self.record_chars, digest
        )
        digest.search_log, digest.search_log_summarised = self._fit(
            task, lambda titles: run_digest.search_log(traj, titles=titles), self.search_log_chars, digest
        )
        digest.tree, digest.tree_summarised = self._fit(
            task, lambda _titles: run_digest.judged_tree(traj), self.record_chars, digest
        )
        return digest

    def _digests(self, state: BatchCheckpoint) -> dict[str, RunDigest]:
        missing = [r for r in state.runs if self._recorded(r) and r.id not in state.digests]
        made = run_parallel(self._digest, missing, threads=self.threads)
        for run, digest in zip(missing, made, strict=True):
            state.digests[run.id] = digest
        return state.digests

    # -- Phase A: per-run distillers ---------------------------------------------------------------------------
    def _stats(self, state: BatchCheckpoint, name: str) -> DistillerStats:
        with self._lock:
            return state.distillers.setdefault(name, DistillerStats())

    def _seen(self, stats: DistillerStats, summarised: bool) -> None:
        with self._lock:
            stats.runs += 1
            stats.seen += 1
            stats.summarised += int(summarised)

    def _try(self, stats: DistillerStats, what: str, fn: Callable[[], Any]) -> Any:
        try:
            with self.learner.reflection():
                return fn()
        except Exception as exc:  # noqa: BLE001 - a failed distiller call is recorded, the batch goes on
            handle_error(exc, where=what, log=logger)
            with self._lock:
                stats.failed += 1
            return None

    def _call(self, stats: DistillerStats, summarised: bool, what: str, fn: Callable[[], Any]) -> Any:
        self._seen(stats, summarised)
        return self._try(stats, what, fn)

    def _craft_in_use(self, trajectory: Trajectory) -> list[Any]:
        """The M1 entries injected into a run (its typed ``injected_memory``), in injection order."""
        entries = [self.memory.craft.get(entry_id) for entry_id in injected_items(trajectory).get("craft", [])]
        return [entry for entry in entries if entry is not None]

    def _insights(self, state: BatchCheckpoint, run: RunRecord) -> tuple[list[Candidate], list[RuleVote]]:
        """A run's M1 candidates (its distilled insights, only for a valid run, and its exploration insights) and
        its votes to retire M1 entries it was given."""
        digest = state.digests[run.id]
        traj = run.trajectory
        found: list[Candidate] = []
        votes: list[RuleVote] = []
        if self._valid(run):  # a failed run's record teaches no craft (MEMENTO distils M1 from valid runs)
            in_use = self._craft_in_use(traj)
            numbered = "\n".join(f"{i}. {entry.text}" for i, entry in enumerate(in_use, 1))
            out = self._call(
                self._stats(state, "craft_insights"),
                digest.record_summarised,
                f"craft insights for {run.id}",
                lambda: self.learner.distill_insights(
                    task=traj.task_text,
                    run_record=quote_data(digest.record),
                    craft_in_use=quote_data(numbered) if numbered else "(none)",
                ),
            )
            texts = [str(t).strip() for t in (getattr(out, "insights", None) or []) if str(t).strip()]
            evidence = digest.record[: self.evidence_chars]
            backing = self._backing(run)  # the pages the run opened (exploration included) and the run
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
        return self._guarded(run, found), votes

    def _web_rules(self, state: BatchCheckpoint, run: RunRecord) -> tuple[list[RuleVote], list[Candidate]]:
        digest = state.digests[run.id]
        traj = run.trajectory
        shown = self._shown(self.memory.web_action, traj)
        out = self._call(
            self._stats(state, "web_rules"),
            digest.search_log_summarised,
            f"web-rule distillation for {run.id}",
            lambda: self.learner.distill_web_rules(
                task=traj.task_text,
                search_log=quote_data(digest.search_log) or "(no searches)",
                current_rules=quote_data(_numbered(shown)),
            ),
        )
        votes, adds = self._split_ops(
            getattr(out, "operations", None) or [], shown, run.id, digest.search_log, self._backing(run)
        )
        return votes, self._guarded(run, adds)

    def _facts(self, state: BatchCheckpoint, run: RunRecord) -> list[Candidate]:
        traj = run.trajectory
        stats = self._stats(state, "facts")
        chunks = run_digest.findings(traj, is_no_data=is_no_data, max_chars=self.record_chars)
        self._seen(stats, len(chunks) > 1)  # a run without answered findings is seen and yields no fact
        found: list[Candidate] = []
        for chunk in chunks:
            out = self._try(
                stats,
                f"fact extraction for {run.id}",
                functools.partial(self.learner.extract_facts, task=traj.task_text, findings=quote_data(chunk)),
            )
            for item in getattr(out, "facts", None) or []:
                data = item if isinstance(item, dict) else item.model_dump()
                cited = [str(s) for s in data.get("sources", []) or []]
                pages = _read_sources(traj, cited)  # only sources the run opened or was shown count
                sources = [page.url for page in pages]
                found.append(
                    Candidate(
                        text=str(data.get("fact", "")),
                        entity=str(data.get("entity", "")),
                        sources=sources,
                        provenance=[run.id],
                        evidence=run_digest.page_text(traj, sources, max_chars=self.evidence_chars),
                        backing=EvidenceRecord.of(pages, [SourceRun(task_id=run.id, cutoff=traj.cutoff)]),
                    )
                )
        return self._guarded(run, found)

    @staticmethod
    def _backing(run: RunRecord) -> EvidenceRecord:
        """What an item a run proposes or votes on rests on: the pages the run opened and the run (its cutoff)."""
        return run_evidence(run.trajectory.model_copy(update={"task_id": run.id}))

    def _dates(self, trajectory: Trajectory) -> DateFilter:
        """The date filter of a run's task (its cutoff, the program's undated policy and filter switch)."""
        return DateFilter.of(
            trajectory.cutoff,
            getattr(self.program, "undated", "keep"),
            enabled=bool(getattr(self.program, "cutoff_filter", True)),
        )

    def _shown(self, book: RuleBook, trajectory: Trajectory) -> list[Any]:
        """The stored rules a distiller sees for a run, those its task may see (its cutoff): the whole book under
        ``paper`` (heaviest first, as far as the model's context allows), else the best within the budget."""
        dates = self._dates(trajectory)
        if getattr(self.memory, "profile", "budgeted") != "paper":
            return book.select(trajectory.task_text, budget_tokens=self.rules_shown_tokens, dates=dates)
        cap = self.memory.budgets.paper_max_tokens
        shown, used = [], 0
        for rule in book.live(dates=dates):
            used += estimate_tokens(book.render_rule(rule)) + 1
            if used > cap:
                break
            shown.append(rule)
        return shown

    @staticmethod
    def _split_ops(
        ops: list[Any], shown: list[Any], run_id: str, evidence: str, backing: EvidenceRecord | None = None
    ) -> tuple[list[RuleVote], list[Candidate]]:
        """One run's numbered ops -> votes on shown rules, plus ``add`` candidates backed by that run."""
        votes: list[RuleVote] = []
        adds: list[Candidate] = []
        for item in ops:
            data = item if isinstance(item, dict) else item.model_dump()
            op = data.get("op")
            if op == "add":
                if str(data.get("text", "")).strip():
                    adds.append(
                        Candidate(
                            text=str(data["text"]),
                            provenance=[run_id],
                            evidence=evidence,
                            backing=backing or EvidenceRecord(),
                        )
                    )
                continue
            number = data.get("rule")
            if isinstance(number, int) and 1 <= number <= len(shown) and op in ("reinforce", "contradict", "remove"):
                votes.append(RuleVote(rule_id=shown[number - 1].id, run_id=run_id, op=op))
        return votes, adds

    def _consolidation_plan(self, state: BatchCheckpoint) -> ConsolidationPlan:
        recorded = [r for r in state.runs if self._recorded(r)]
        self._digests(state)
        for name in ("craft_insights", "web_rules", "facts"):
            state.distillers[name] = DistillerStats()
        state.guard_rejected = [g for g in state.guard_rejected if g.store == "decomposition"]  # a rerun: planned anew
        plan = ConsolidationPlan()
        if self._writes("craft"):
            insights = run_parallel(lambda r: self._insights(state, r), recorded, threads=self.threads)
            plan.craft = self.canonicalizer.plan("craft", [c for group, _votes in insights for c in group])
            plan.craft_votes = [v for _group, votes in insights for v in votes]
            self._note_guard(state, "craft", plan.craft)
        if self._writes("web_action"):
            web = run_parallel(lambda r: self._web_rules(state, r), recorded, threads=self.threads)
            plan.web_votes = [v for votes, _adds in web for v in votes]
            plan.web_adds = self.canonicalizer.plan("web_action", [c for _votes, adds in web for c in adds])
            self._note_guard(state, "web_action", plan.web_adds)
        if self._writes("facts"):
            facts = run_parallel(lambda r: self._facts(state, r), recorded, threads=self.threads)
            plan.facts = self.canonicalizer.plan("facts", [c for group in facts for c in group])
            self._note_guard(state, "facts", plan.facts)
        return plan

    # -- applying votes: one per run and rule ------------------------------------------------------------------
    def _apply_votes(
        self, book: RuleBook, votes: list[RuleVote], batch: int, tx: Any, backings: dict[str, EvidenceRecord]
    ) -> int:
        """Apply the batch's votes: support and contradiction grow by numbers of runs, the voting runs' evidence
        joins each rule's (``backings``: run id -> its evidence); returns rules retired."""
        tally: dict[str, dict[str, set[str]]] = {}
        for vote in votes:
            ops = tally.setdefault(vote.rule_id, {"reinforce": set(), "contradict": set(), "remove": set()})
            ops[vote.op].add(vote.run_id)
        retired = 0
        for rule_id, ops in tally.items():
            if tx.get(book.store, rule_id) is None:
                continue
            against = ops["contradict"] | ops["remove"]
            support = ops["reinforce"] - against  # a run voting both ways counts for neither
            against = against - ops["reinforce"]
            evidence = EvidenceRecord()
            for run_id in sorted(support | against):
                evidence = evidence.merged(backings.get(run_id))
            rule = book.reinforce(
                rule_id,
                support=len(support),
                contradiction=len(against),
                task_ids=sorted(support | against),
                batch=batch,
                evidence=evidence,
                tx=tx,
            )
            removers = ops["remove"] - ops["reinforce"]
            if len(removers) >= self.retire_min_runs and rule.contradiction > rule.support:
                book.retire(
                    rule_id,
                    batch=batch,
                    reason=f"{len(removers)} runs proposed removal ({', '.join(sorted(removers))})",
                    tx=tx,
                )
                retired += 1
        return retired

    def _retire_craft(self, plan: ConsolidationPlan, batch: int, tx: Any) -> int:
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
            if len(against) < self.retire_min_runs or len(runs) <= len(supporters.get(entry_id, set())):
                continue
            data = tx.get("craft", entry_id)
            if data is None:
                continue
            self.memory.craft.remove(entry_id, batch=batch, tx=tx)
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

    def _apply_consolidation(
        self, batch: int, plan: ConsolidationPlan, tx: Any, backings: dict[str, EvidenceRecord]
    ) -> dict[str, int]:
        counts = {"reject": 0, "merge": 0, "contradict": 0, "retired": 0, "craft_retired": 0}
        if self._writes("web_action"):
            counts["retired"] += self._apply_votes(self.memory.web_action, plan.web_votes, batch, tx, backings)
        for store, ops in (("craft", plan.craft), ("web_action", plan.web_adds), ("facts", plan.facts)):
            if not ops:
                continue
            got = self.memory.apply(store, ops, batch=batch, tx=tx)
            for name in ("reject", "merge", "contradict"):
                counts[name] += got.get(name, 0)
        if self._writes("craft") and plan.craft_votes:
            counts["craft_retired"] += self._retire_craft(plan, batch, tx)
        return counts

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

    # -- Phase C: supervised reflection, one call per valid run -------------------------------------------------
    def _coverage(self, state: BatchCheckpoint, example: Any, run: RunRecord) -> str:
        traj = run.trajectory
        digest = state.digests.get(run.id) or RunDigest(tree=run_digest.judged_tree(traj))
        labels = {k: v for k, v in example.items() if k not in self._inputs(example) and k not in ("docs",)}
        # the gold labels are the user's; the judge's feedback may quote the prediction, so it is quoted data
        expected = (
            f"labels: {one_line(json.dumps(labels, default=str), 1500)}\njudge feedback: {quote_data(run.feedback)}"
        )
        out = self._call(
            self._stats(state, "coverage"),
            digest.tree_summarised,
            f"coverage assessment for {run.id}",
            lambda: self.learner.assess_coverage(
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

    def _decomposition(
        self, state: BatchCheckpoint, example: Any, run: RunRecord
    ) -> tuple[list[RuleVote], list[Candidate]]:
        traj = run.trajectory
        judged = self._coverage(state, example, run)
        success = succeeded(run.score, threshold=self.success_threshold)
        injected = set(injected_items(traj).get("decomposition", []))
        auto = [
            RuleVote(rule_id=rule_id, run_id=run.id, op="reinforce" if success else "contradict", auto=True)
            for rule_id in sorted(injected)
        ]
        shown = self._shown(self.memory.decomposition, traj)
        digest = state.digests.get(run.id)
        out = self._call(
            self._stats(state, "decomposition"),
            bool(digest and digest.tree_summarised),
            f"decomposition-rule distillation for {run.id}",
            lambda: self.learner.distill_decomposition(
                task=traj.task_text, judged_run=quote_data(judged), current_rules=quote_data(_numbered(shown))
            ),
        )
        votes, adds = self._split_ops(
            getattr(out, "operations", None) or [], shown, run.id, judged[: self.evidence_chars], self._backing(run)
        )
        # one vote per run and rule: the outcome credit of an injected rule wins over the LLM's operation on it
        return auto + [v for v in votes if v.rule_id not in injected], self._guarded(run, adds)

    def _reflection_plan(self, examples: list[Any], state: BatchCheckpoint) -> ReflectionPlan:
        for name in ("coverage", "decomposition"):
            state.distillers[name] = DistillerStats()
        state.guard_rejected = [g for g in state.guard_rejected if g.store != "decomposition"]
        if not self._writes("decomposition"):
            return ReflectionPlan()
        judged = [(ex, run) for ex, run in zip(examples, state.runs, strict=True) if run.score is not None]
        judged = [(ex, run) for ex, run in judged if self._valid(run)]
        got = run_parallel(lambda pair: self._decomposition(state, *pair), judged, threads=self.threads)
        plan = ReflectionPlan(votes=[v for votes, _adds in got for v in votes])
        plan.adds = self.canonicalizer.plan("decomposition", [c for _votes, adds in got for c in adds])
        self._note_guard(state, "decomposition", plan.adds)
        return plan

    def _apply_reflection(
        self, batch: int, plan: ReflectionPlan, tx: Any, backings: dict[str, EvidenceRecord]
    ) -> dict[str, int]:
        if not self._writes("decomposition"):
            return {}
        retired = self._apply_votes(self.memory.decomposition, plan.votes, batch, tx, backings)
        got = self.memory.apply("decomposition", plan.adds, batch=batch, tx=tx) if plan.adds else {}
        return {
            "reject": got.get("reject", 0),
            "merge": got.get("merge", 0),
            "contradict": got.get("contradict", 0),
            "retired": retired,
        }

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
        valid = sum(self._valid(r) for r in runs)
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
            injected=_injected_per_run(trajectories),
            train_lm_calls=state.train_lm_calls,
            train_stages=dict(state.train_stages),
            distillers={name: state.distillers.get(name, DistillerStats()) for name in DISTILLERS},
            guard_rejected=list(state.guard_rejected),
            summary_failures=sum(d.summary_failures for d in state.digests.values()),
            seconds=state.seconds,
            **summarize_trajectories(trajectories),
        )
