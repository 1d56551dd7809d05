"""MEMENTO's batch learning loop (§3.5): forward pass, unsupervised consolidation, judging, supervised reflection.

For each batch of the training set, :meth:`MementoTrainer.fit`:

* **Phase A** runs the program over the batch in parallel with the current memory (each run excludes what its
  own task wrote), then consolidates without ground truth: M1 is rewritten from per-sample craft insights of
  the valid runs (:class:`~memento.signatures.distill_craft_insights.DistillCraftInsights`,
  :class:`~memento.signatures.consolidate_craft_knowledge.ConsolidateCraftKnowledge`), M3 is updated from the
  search logs (:class:`~memento.signatures.distill_web_rules.DistillWebRules`) and M4 folds the facts extracted
  from the runs (:class:`~memento.signatures.extract_facts.ExtractFacts`), every candidate going through the
  :class:`~memento.memory.canonicalizer.Canonicalizer`.
* **Phase B** scores each prediction with the metric (an LLM judge where the task has one); failed runs are
  excluded from Phase C.
* **Phase C** reflects with supervision: per target element, whether a sub-question covered it and correctly
  (:class:`~memento.signatures.assess_coverage.AssessCoverage`); M2 rules injected into successful runs gain
  support, those injected into failed runs gain contradiction; the LLM proposes add / reinforce / contradict /
  remove operations (:class:`~memento.signatures.distill_decomposition_rules.DistillDecompositionRules`),
  canonicalised before they are applied.
* A new memory version is committed.

The LLM stages run under the ``reflection_lm`` role when ``roles`` is given. Each phase's result is written
in the same SQLite transaction as its memory changes (checkpoints ``trainer/batch/<n>``), so ``fit`` on a
directory with a half-finished batch resumes it at the next phase and never applies a batch twice.

Example:
    >>> trainer = MementoTrainer(program, task.metric, memory, batch_size=10, threads=4)  # doctest: +SKIP
    >>> reports = trainer.fit(trainset)  # doctest: +SKIP
    >>> reports[-1].version, reports[-1].rules["decomposition"].total_support  # doctest: +SKIP
    (6, 41)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import dspy

from memento.errors import ConfigError, DataError, LMUnavailableError
from memento.lm import raise_if_fatal
from memento.lm_failures import LMFailureWatch
from memento.memory.canonicalizer import Candidate, Canonicalizer, is_no_data
from memento.memory.memento_memory import MementoMemory
from memento.memory.rule_book import RuleBook
from memento.metrics.as_float import score_of
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD, succeeded
from memento.optimize.batch_report import BatchReport, CharCounts, RuleCounts, summarize_trajectories
from memento.programs.memento_program import injected_items
from memento.signatures.assess_coverage import AssessCoverage
from memento.signatures.consolidate_craft_knowledge import ConsolidateCraftKnowledge
from memento.signatures.distill_craft_insights import DistillCraftInsights
from memento.signatures.distill_decomposition_rules import DistillDecompositionRules
from memento.signatures.distill_web_rules import DistillWebRules
from memento.signatures.extract_facts import ExtractFacts
from memento.text import one_line
from memento.threads import run_parallel
from memento.types import Trajectory
from memento.usage import UsageMeter

__all__ = ["MementoTrainer", "PHASES", "example_id"]

logger = logging.getLogger(__name__)

PHASES: tuple[str, ...] = ("forward", "consolidated", "scored", "done")
_KEY = "trainer/batch/{:05d}"
_CLIP = 500


class _StaleBatch(Exception):
    """The batch's checkpoint changed under this run (another writer): its write is abandoned."""


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


def _ops_text(rules: list[Any]) -> str:
    return "\n".join(
        f"{i}. {r.text} (support {r.support}, contradicted {r.contradiction})" for i, r in enumerate(rules, 1)
    )


class MementoTrainer:
    """Learns MEMENTO memory from a labelled training set, one batch (one memory version) at a time.

    Args:
        program: a :class:`~memento.programs.memento_program.Memento` (any program returning ``trajectory``
            works) whose memory is ``memory``.
        metric: the task metric ``metric(example, pred) -> Prediction(score, feedback) | float``.
        memory: the writable :class:`~memento.memory.memento_memory.MementoMemory` the program reads.
        batch_size: examples per batch (10 in MEMENTO).
        threads: parallel forward passes and distillation calls.
        roles: LM roles; the distillation stages run under ``roles.reflection_lm``.
        canonicalizer: defaults to a :class:`~memento.memory.canonicalizer.Canonicalizer` with the memory's
            embedder (or the default one).
        success_threshold: a run scoring strictly above this succeeded (credits its rules) in Phase C
            (``trainer.success_threshold``; the rule of :func:`memento.metrics.success.succeeded`).
        max_craft_entries: the size M1 is kept to when rewritten.
        on_event: called as ``on_event(batch, phase, detail)`` when a phase starts (the CLI's progress).
        max_consecutive_lm_failures: training stops (``LMUnavailableError``, nothing committed for the batch)
            once this many LM calls failed in a row (``trainer.max_consecutive_lm_failures``); a batch whose
            forward pass has no valid run because LM calls failed is never committed either, so a rerun retries it.
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
        canonicalizer: Canonicalizer | None = None,
        success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
        max_craft_entries: int = 12,
        on_event: Callable[[int, str, str], None] | None = None,
        max_consecutive_lm_failures: int = 3,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if memory.frozen:
            raise ConfigError("the trainer needs a writable memory; this one is frozen")
        attached = getattr(program, "memory", None)
        if attached is not None and attached is not memory:
            raise ConfigError("the program reads another memory than the one being trained; pass the same object")
        self.program = program
        self.metric = metric
        self.memory = memory
        self.batch_size = batch_size
        self.threads = max(1, threads)
        self.roles = roles
        self.canonicalizer = canonicalizer or Canonicalizer(
            memory.db, embedder=memory.embedder, lm=getattr(roles, "reflection_lm", None)
        )
        self.success_threshold = success_threshold
        self.max_craft_entries = max_craft_entries
        self.on_event = on_event
        self.lm_watch = LMFailureWatch(max_consecutive=max_consecutive_lm_failures)
        self.task = getattr(program, "task", None)
        self.distill_insights = dspy.Predict(DistillCraftInsights)
        self.consolidate_craft = dspy.Predict(ConsolidateCraftKnowledge)
        self.distill_web_rules = dspy.Predict(DistillWebRules)
        self.extract_facts = dspy.Predict(ExtractFacts)
        self.assess_coverage = dspy.Predict(AssessCoverage)
        self.distill_decomposition = dspy.Predict(DistillDecompositionRules)

    # -- plumbing ----------------------------------------------------------------------------------------
    def _emit(self, batch: int, phase: str, detail: str = "") -> None:
        logger.info("batch %d: %s %s", batch, phase, detail)
        if self.on_event is not None:
            self.on_event(batch, phase, detail)

    @contextlib.contextmanager
    def _reflection(self) -> Iterator[None]:
        lm = getattr(self.roles, "reflection_lm", None)
        if lm is not None:
            with dspy.context(lm=lm):
                yield
        else:
            yield

    def _inputs(self, example: Any) -> dict[str, Any]:
        if self.task is not None:
            return self.task.inputs(example)
        return example.inputs().toDict()

    def _cutoff(self, example: Any) -> Any:
        return self.task.cutoff(example) if self.task is not None else example.get("cutoff")

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

    def run_batch(self, batch: int, examples: list[Any], ids: list[str]) -> BatchReport:
        """Run (or resume) one batch through phases A, B and C and commit its version.

        Every write is conditional on the batch's checkpoint being the one this run last saw, so a batch is applied
        exactly once even if two writers interleave (the CLI also holds the directory's lock).
        """
        try:
            return self._run_batch(batch, examples, ids)
        except _StaleBatch:
            state = self.memory.db.checkpoint(_KEY.format(batch)) or {}
            if state.get("phase") == "done":
                self._emit(batch, "done", "already applied by another writer; skipped")
                return BatchReport.model_validate(state["report"])
            raise DataError(
                f"batch {batch} in {self.memory.directory} was advanced by another writer; rerun to resume it"
            ) from None

    @staticmethod
    def _guard(tx: Any, key: str, phase: str | None) -> None:
        """Go on only if the batch's stored phase is still ``phase`` (what this run last wrote or read)."""
        if (tx.checkpoint(key) or {}).get("phase") != phase:
            raise _StaleBatch

    def _run_batch(self, batch: int, examples: list[Any], ids: list[str]) -> BatchReport:
        key = _KEY.format(batch)
        fp = self.fingerprint(ids)
        state = self.memory.db.checkpoint(key) or {}
        if state and state.get("fingerprint") != fp:
            raise DataError(
                f"batch {batch} in {self.memory.directory} was started on different examples; "
                "train on the same data or use a new --memory directory"
            )
        if state.get("phase") == "done":
            self._emit(batch, "done", "already applied; skipped")
            return BatchReport.model_validate(state["report"])
        seconds: dict[str, float] = dict(state.get("seconds", {}))
        train_calls = int(state.get("train_lm_calls", 0))
        if _phase_index(state.get("phase")) < _phase_index("forward"):
            started = time.perf_counter()
            self._emit(batch, "forward", f"{len(examples)} examples")
            with self.lm_watch:
                runs = self._forward(examples, ids)
            self._stop_on_lm_failure(batch, runs)
            seconds["forward"] = round(time.perf_counter() - started, 3)
            state = {
                "fingerprint": fp,
                "phase": "forward",
                "base_version": self.memory.version,
                "runs": runs,
                "seconds": seconds,
                "train_lm_calls": 0,
            }
            with self.memory.transaction(batch=batch) as tx:
                self._guard(tx, key, None)
                tx.set_checkpoint(key, state)
        runs = state["runs"]
        trajectories = [Trajectory.model_validate(r["trajectory"]) for r in runs]
        counts = dict(state.get("counts", {"reject": 0, "merge": 0}))

        if _phase_index(state["phase"]) < _phase_index("consolidated"):
            started = time.perf_counter()
            self._emit(batch, "consolidate", "M1 insights, M3 search logs, M4 facts")
            with UsageMeter(self.roles) as meter, self._reflection():
                plan = self._consolidation_plan(batch, runs, trajectories)
            train_calls += meter.usage().lm_calls
            seconds["consolidate"] = round(time.perf_counter() - started, 3)
            with self.memory.transaction(batch=batch) as tx:
                self._guard(tx, key, state["phase"])
                for name, value in self._apply_consolidation(batch, plan, tx).items():
                    counts[name] = counts.get(name, 0) + value
                state.update(phase="consolidated", seconds=seconds, train_lm_calls=train_calls, counts=counts)
                tx.set_checkpoint(key, state)

        if _phase_index(state["phase"]) < _phase_index("scored"):
            started = time.perf_counter()
            self._emit(batch, "score", "metric / judge")
            scored = run_parallel(
                lambda pair: self._score(examples[pair[0]], pair[1]), list(enumerate(runs)), threads=self.threads
            )
            for run, (score, feedback) in zip(runs, scored, strict=True):
                run["score"], run["feedback"] = score, feedback
            seconds["score"] = round(time.perf_counter() - started, 3)
            phase = state["phase"]
            state.update(phase="scored", runs=runs, seconds=seconds)
            with self.memory.transaction(batch=batch) as tx:
                self._guard(tx, key, phase)
                tx.set_checkpoint(key, state)

        started = time.perf_counter()
        self._emit(batch, "reflect", "M2 coverage and rule operations")
        with UsageMeter(self.roles) as meter, self._reflection():
            plan = self._reflection_plan(batch, examples, runs, trajectories)
        train_calls += meter.usage().lm_calls
        seconds["reflect"] = round(time.perf_counter() - started, 3)
        with self.memory.transaction(batch=batch) as tx:
            self._guard(tx, key, state["phase"])  # another writer applied or advanced it meanwhile: never twice
            for name, value in self._apply_reflection(batch, plan, tx).items():
                counts[name] = counts.get(name, 0) + value
            version = self.memory.commit_version(batch=batch, note=f"batch {batch}: {len(runs)} examples", tx=tx)
            report = self._report(
                batch, version, state["base_version"], runs, trajectories, seconds, train_calls, counts, tx
            )
            state.update(
                phase="done",
                report=report.model_dump(mode="json"),
                seconds=seconds,
                train_lm_calls=train_calls,
                counts=counts,
            )
            tx.set_checkpoint(key, state, version=version)
        self._emit(batch, "done", f"version {version}")
        return report

    def _stop_on_lm_failure(self, batch: int, runs: list[dict[str, Any]]) -> None:
        """Refuse to go on with a batch the LM failed: too many failed calls in a row, or no valid run at all."""
        watch = self.lm_watch
        valid = sum(self._valid(r, Trajectory.model_validate(r["trajectory"])) for r in runs)
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

    # -- Phase A: forward pass -----------------------------------------------------------------------------
    def _forward(self, examples: list[Any], ids: list[str]) -> list[dict[str, Any]]:
        def one(pair: tuple[int, Any]) -> dict[str, Any]:
            i, example = pair
            try:
                pred = self.program(**self._inputs(example), cutoff=self._cutoff(example), task_id=ids[i])
                trajectory = pred.trajectory
                prediction = {k: v for k, v in pred.items() if k != "trajectory"}
            except Exception as exc:  # noqa: BLE001 - one broken example is a failed run, not a failed batch
                raise_if_fatal(exc)
                if isinstance(exc, ConfigError):
                    raise
                logger.warning("forward pass failed on %s: %s", ids[i], exc)
                trajectory = Trajectory(task_text=str(self._inputs(example)), task_id=ids[i], error=str(exc)[:300])
                prediction = {}
            return {
                "id": ids[i],
                "prediction": json.loads(json.dumps(prediction, default=str)),
                "trajectory": trajectory.model_dump(mode="json"),
            }

        return run_parallel(one, list(enumerate(examples)), threads=self.threads)

    @staticmethod
    def _valid(run: dict[str, Any], trajectory: Trajectory) -> bool:
        if trajectory.error:
            return False
        answered = [n for n in trajectory.nodes if n.parent_id is not None and n.status == "answered"]
        values = [v for v in run["prediction"].values() if v not in (None, "", [], {})]
        return bool(values) and (bool(answered) or not trajectory.nodes)

    @staticmethod
    def _run_record(trajectory: Trajectory) -> str:
        lines = []
        for node in trajectory.nodes:
            if node.parent_id is None:
                continue
            lines.append(f"[{node.status}] Q: {node.question}\n  A: {one_line(node.answer, 300) or '(none)'}")
        useful = {e.url for n in trajectory.nodes for e in n.evidence}
        for call in trajectory.tool_calls:
            if call.kind == "search_web":
                lines.append(f"search: {call.args.get('query', '')!r} -> {len(call.result_urls)} results")
            elif call.kind == "scrape":
                url = call.args.get("url", "")
                lines.append(f"scrape: {url} ({'used as evidence' if url in useful else 'not used'})")
        return "\n".join(lines)[:6000]

    def _consolidation_plan(self, batch: int, runs: list[dict], trajectories: list[Trajectory]) -> dict[str, Any]:
        valid = [(r, t) for r, t in zip(runs, trajectories, strict=True) if self._valid(r, t)]

        def insights(pair: tuple[dict, Trajectory]) -> list[tuple[str, str]]:
            run, traj = pair
            try:
                out = self.distill_insights(task=traj.task_text, run_record=self._run_record(traj))
            except Exception as exc:  # noqa: BLE001
                raise_if_fatal(exc)
                logger.warning("craft insights failed for %s: %s", run["id"], exc)
                return []
            return [(str(text).strip(), run["id"]) for text in (out.insights or []) if str(text).strip()]

        def facts(pair: tuple[dict, Trajectory]) -> list[Candidate]:
            run, traj = pair
            findings = "\n".join(
                f"Q: {n.question}\nA: {one_line(n.answer, 400)}\nEvidence: "
                + "; ".join(f"{e.url} {one_line(e.snippet, 160)}" for e in n.evidence[:4])
                for n in traj.nodes
                if n.parent_id is not None and n.status == "answered" and not is_no_data(n.answer or "")
            )
            if not findings:
                return []
            try:
                out = self.extract_facts(task=traj.task_text, findings=findings[:8000])
            except Exception as exc:  # noqa: BLE001
                raise_if_fatal(exc)
                logger.warning("fact extraction failed for %s: %s", run["id"], exc)
                return []
            found = []
            for item in out.facts or []:
                data = item if isinstance(item, dict) else item.model_dump()
                found.append(
                    Candidate(
                        text=str(data.get("fact", "")),
                        entity=str(data.get("entity", "")),
                        sources=[str(s) for s in data.get("sources", []) or []],
                        provenance=[run["id"]],
                        evidence=findings[:2000],
                    )
                )
            return found

        per_run_insights = run_parallel(insights, valid, threads=self.threads)
        per_run_facts = run_parallel(facts, valid, threads=self.threads)
        plan: dict[str, Any] = {"craft": None, "web_ops": [], "web_adds": [], "facts": []}

        # M1: rewrite from this batch's insights (skipped when no valid run produced any)
        flat = [pair for group in per_run_insights for pair in group]
        if flat:
            current = self.memory.craft.all()
            try:
                out = self.consolidate_craft(
                    current_entries="\n".join(e.text for e in current),
                    new_insights="\n".join(text for text, _ in flat),
                    max_entries=self.max_craft_entries,
                )
                entries = [str(e).strip() for e in (out.entries or []) if str(e).strip() and not is_no_data(str(e))]
            except Exception as exc:  # noqa: BLE001 - keep the old M1 when the rewrite fails
                raise_if_fatal(exc)
                logger.warning("craft consolidation failed: %s", exc)
                entries = []
            if entries:
                plan["craft"] = self._craft_provenance(entries[: self.max_craft_entries], flat, current)

        # M3: operations from the search logs
        logs = []
        for run, traj in valid:
            searches = [c for c in traj.tool_calls if c.kind in ("search_web", "scrape")]
            if searches:
                logs.append(f"## task {run['id']}: {one_line(traj.task_text, 200)}\n{self._run_record(traj)}")
        if logs:
            shown = self.memory.web_action.select("\n".join(logs), budget_tokens=1500)
            try:
                out = self.distill_web_rules(search_logs="\n\n".join(logs)[:12000], current_rules=_ops_text(shown))
                ops = list(out.operations or [])
            except Exception as exc:  # noqa: BLE001
                raise_if_fatal(exc)
                logger.warning("web-rule distillation failed: %s", exc)
                ops = []
            searched = [run["id"] for run, _ in valid]
            plan["web_ops"], adds = self._split_ops(ops, shown, searched)
            plan["web_adds"] = self.canonicalizer.plan("web_action", adds)

        # M4: facts, canonicalised
        plan["facts"] = self.canonicalizer.plan("facts", [c for group in per_run_facts for c in group])
        return plan

    def _craft_provenance(
        self, entries: list[str], insights: list[tuple[str, str]], current: list[Any]
    ) -> list[tuple[str, list[str], int]]:
        """(text, provenance, support) per rewritten entry: the tasks whose insights it is closest to."""
        by_text = {e.text: e for e in current}
        embedder = self.canonicalizer.embedder
        vectors = embedder.embed(entries + [text for text, _ in insights])
        entry_vecs, insight_vecs = vectors[: len(entries)], vectors[len(entries) :]
        sims = insight_vecs @ entry_vecs.T  # insights x entries
        out = []
        for j, text in enumerate(entries):
            owners = [insights[i][1] for i in range(len(insights)) if int(sims[i].argmax()) == j]
            old = by_text.get(text)
            provenance = sorted(set(owners) | set(old.provenance if old else []))
            support = (old.support if old else 0) + len(owners) or 1
            out.append((text, provenance, support))
        return out

    @staticmethod
    def _split_ops(
        ops: list[Any], shown: list[Any], task_ids: list[str]
    ) -> tuple[list[tuple[str, str, list[str]]], list[Candidate]]:
        """Numbered ops -> (op, rule id, task ids) on shown rules, plus ``add`` candidates."""
        updates: list[tuple[str, str, list[str]]] = []
        adds: list[Candidate] = []
        for item in ops:
            data = item if isinstance(item, dict) else item.model_dump()
            op = data.get("op")
            if op == "add":
                if str(data.get("text", "")).strip():
                    adds.append(
                        Candidate(str(data["text"]), provenance=list(task_ids), evidence=data.get("reason", ""))
                    )
                continue
            number = data.get("rule")
            if isinstance(number, int) and 1 <= number <= len(shown) and op in ("reinforce", "contradict", "remove"):
                updates.append((op, shown[number - 1].id, list(task_ids)))
        return updates, adds

    def _apply_rule_ops(self, book: RuleBook, updates: list[tuple[str, str, list[str]]], batch: int, tx: Any) -> None:
        for op, rule_id, task_ids in updates:
            if tx.get(book.store, rule_id) is None:
                continue
            if op == "reinforce":
                book.reinforce(rule_id, support=1, task_ids=task_ids, batch=batch, tx=tx)
            elif op == "contradict":
                book.reinforce(rule_id, contradiction=1, task_ids=task_ids, batch=batch, tx=tx)
            elif op == "remove":
                book.retire(rule_id, batch=batch, tx=tx)

    def _apply_consolidation(self, batch: int, plan: dict[str, Any], tx: Any) -> dict[str, int]:
        counts = {"reject": 0, "merge": 0}
        if plan["craft"]:
            self.memory.craft.replace_all(plan["craft"], batch=batch, tx=tx)
        self._apply_rule_ops(self.memory.web_action, plan["web_ops"], batch, tx)
        for store, ops in (("web_action", plan["web_adds"]), ("facts", plan["facts"])):
            got = self.memory.apply(store, ops, batch=batch, tx=tx)
            counts["reject"] += got["reject"]
            counts["merge"] += got["merge"]
        return counts

    # -- Phase B: scoring ------------------------------------------------------------------------------------
    def _score(self, example: Any, run: dict[str, Any]) -> tuple[float | None, str]:
        trajectory = Trajectory.model_validate(run["trajectory"])
        if trajectory.error or not run["prediction"]:
            return None, f"run failed: {trajectory.error or 'no prediction'}"
        pred = dspy.Prediction(**run["prediction"], trajectory=trajectory)
        try:
            result = self.metric(example, pred)
        except Exception as exc:  # noqa: BLE001 - an unscorable run is excluded from Phase C
            raise_if_fatal(exc)
            logger.warning("metric failed on %s: %s", run["id"], exc)
            return None, f"metric failed: {exc}"
        feedback = getattr(result, "feedback", None) or (result.get("feedback") if isinstance(result, dict) else "")
        return score_of(result), str(feedback or "")

    # -- Phase C: supervised reflection ----------------------------------------------------------------------
    def _reflection_plan(
        self, batch: int, examples: list[Any], runs: list[dict], trajectories: list[Trajectory]
    ) -> dict[str, Any]:
        judged = [
            (ex, run, traj)
            for ex, run, traj in zip(examples, runs, trajectories, strict=True)
            if run.get("score") is not None and self._valid(run, traj)
        ]
        credit: list[tuple[str, str, bool]] = []  # (rule id, task id, success)
        for _ex, run, traj in judged:
            success = succeeded(run["score"], threshold=self.success_threshold)
            for rule_id in injected_items(traj).get("decomposition", []):
                credit.append((rule_id, run["id"], success))

        def coverage(item: tuple[Any, dict, Trajectory]) -> str:
            ex, run, traj = item
            subs = "\n".join(
                f"- {n.question} -> {one_line(n.answer, 200) or '(no answer)'}" for n in traj.nodes if n.parent_id
            )
            labels = {k: v for k, v in ex.items() if k not in self._inputs(ex) and k not in ("docs",)}
            expected = f"labels: {one_line(json.dumps(labels, default=str), 1500)}\njudge feedback: {run['feedback']}"
            try:
                out = self.assess_coverage(task=traj.task_text, expected=expected, sub_questions=subs or "(none)")
                rows = []
                for c in out.coverage or []:
                    c = c if isinstance(c, dict) else c.model_dump()
                    mark = "correct" if c.get("correct") else ("covered, wrong" if c.get("covered") else "MISSED")
                    rows.append(f"  * {c.get('target', '')}: {mark} ({one_line(c.get('sub_question', ''), 160)})")
                cov = "\n".join(rows) or "  (no targets)"
            except Exception as exc:  # noqa: BLE001
                raise_if_fatal(exc)
                logger.warning("coverage assessment failed for %s: %s", run["id"], exc)
                cov = "  (coverage unavailable)"
            return (
                f"## task {run['id']} (score {float(run['score']):.2f}): {one_line(traj.task_text, 300)}\n"
                f"sub-questions:\n{subs or '(none)'}\nfeedback: {one_line(run['feedback'], 300)}\ncoverage:\n{cov}"
            )

        reports = run_parallel(coverage, judged, threads=self.threads)
        plan: dict[str, Any] = {"credit": credit, "ops": [], "adds": []}
        if reports:
            text = "\n\n".join(reports)
            shown = self.memory.decomposition.select(text, budget_tokens=1500)
            try:
                out = self.distill_decomposition(judged_runs=text[:12000], current_rules=_ops_text(shown))
                ops = list(out.operations or [])
            except Exception as exc:  # noqa: BLE001
                raise_if_fatal(exc)
                logger.warning("decomposition-rule distillation failed: %s", exc)
                ops = []
            plan["ops"], adds = self._split_ops(ops, shown, [run["id"] for _ex, run, _t in judged])
            plan["adds"] = self.canonicalizer.plan("decomposition", adds)
        return plan

    def _apply_reflection(self, batch: int, plan: dict[str, Any], tx: Any) -> dict[str, int]:
        book = self.memory.decomposition
        for rule_id, task_id, success in plan["credit"]:
            if tx.get(book.store, rule_id) is None:
                continue
            if success:
                book.reinforce(rule_id, support=1, task_ids=[task_id], batch=batch, tx=tx)
            else:
                book.reinforce(rule_id, contradiction=1, task_ids=[task_id], batch=batch, tx=tx)
        self._apply_rule_ops(book, plan["ops"], batch, tx)
        got = self.memory.apply("decomposition", plan["adds"], batch=batch, tx=tx)
        return {"reject": got["reject"], "merge": got["merge"]}

    # -- report ----------------------------------------------------------------------------------------------
    def _report(
        self,
        batch: int,
        version: int,
        base_version: int,
        runs: list[dict],
        trajectories: list[Trajectory],
        seconds: dict[str, float],
        train_calls: int,
        counts: dict[str, int],
        tx: Any,
    ) -> BatchReport:
        diff = self.memory.diff(base_version, version)
        scores = [float(r["score"]) for r in runs if r.get("score") is not None]
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
        valid = sum(self._valid(r, t) for r, t in zip(runs, trajectories, strict=True))
        return BatchReport(
            batch=batch,
            version=version,
            examples=len(runs),
            valid_runs=valid,
            failed_runs=len(runs) - valid,
            mean_score=round(sum(scores) / len(scores), 4) if scores else None,
            rules=rules,
            chars=chars,
            craft_entries=len(self.memory.craft),
            facts=fact_stats["facts"],
            facts_superseded=fact_stats["superseded"],
            candidates_rejected=counts.get("reject", 0),
            candidates_merged=counts.get("merge", 0),
            train_lm_calls=train_calls,
            seconds=seconds,
            **summarize_trajectories(trajectories),
        )
