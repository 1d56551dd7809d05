"""Evaluate a program on examples with a metric: per-example records, mean with a bootstrap 95% CI, usage.

Each example runs the program (``program(**example.inputs())``) and then the metric, each under its own
:class:`memento.records.usage.UsageMeter`, so the program's LM calls and the judge's calls are reported apart. A program
or metric failure on one example is recorded on that example (score 0) and the run goes on; only a fatal error
(:class:`memento.core.errors.FatalError`, e.g. an LM that cannot be used at all; see
:func:`memento.core.error_policy.handle_error`) stops it.

Example:
    >>> from memento.metrics.evaluation import evaluate, write_results
    >>> result = evaluate(program, examples, task.metric, threads=4)  # doctest: +SKIP
    >>> round(result.mean, 2), result.ci  # doctest: +SKIP
    (0.45, (0.25, 0.65))
    >>> write_results(result, "runs/eval")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dspy
from pydantic import BaseModel, Field

from memento.core.dating import parse_iso
from memento.core.error_policy import handle_error
from memento.core.errors import Cancelled, FatalError
from memento.core.types import Trajectory, Usage, utcnow
from memento.execution.threads import run_parallel
from memento.metrics.behaviour import behaviour_of, summarize_behaviour
from memento.metrics.eval_journal import EvalJournal
from memento.metrics.example_result import ExampleResult
from memento.metrics.stats import bootstrap_ci
from memento.records.leakage import LeakageAudit
from memento.records.usage import UsageMeter
from memento.utils.files import atomic_write_text
from memento.utils.text import error_line

__all__ = [
    "ExampleResult",
    "EvalResult",
    "evaluate",
    "score_example",
    "write_results",
    "render_markdown",
    "aggregate",
    "prediction_fields",
]

logger = logging.getLogger(__name__)

_WEB_KEYS = ("searches", "fetches", "fetch_cache_hits", "unique_urls", "repeated_urls")


class EvalResult(BaseModel):
    """All examples' outcomes plus the aggregate: mean score, bootstrap 95% CI, usage totals."""

    task: str = ""
    method: str = ""
    metric: str = ""
    higher_is_better: bool = True
    n: int = 0
    mean: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    errors: int = 0
    judge_errors: int = 0
    measures: dict[str, float] = Field(default_factory=dict)  # means of extra measures over the scored examples
    # questions per sample, steps per question, repeated URLs, scratchpad size (metrics.behaviour.summarize_behaviour)
    behaviour: dict[str, float] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    judge_usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    created_at: str = Field(default_factory=lambda: utcnow().isoformat())
    complete: bool = True  # False: the run stopped early (``error`` says why); ``examples`` holds the finished ones
    error: str | None = None
    total: int = 0  # examples the run was given (``n`` of them finished)
    resumed: int = 0  # finished examples reused from an earlier, interrupted run with the same run key
    run_key: dict[str, Any] | None = None  # what changes answers (records.provenance.run_key): resume when equal
    # the memory every example read, pinned when the program was built (memento.memory.pins.memory_pins): the
    # MEMENTO memory version and the banks' high-water marks
    memory: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None  # settings, models, versions, data hashes, times (records.provenance)
    # JitMem's stream protocol: mean ± std over orderings, the cold-start curve (jitmem_stream.run_orderings)
    stream: dict[str, Any] | None = None
    leakage: LeakageAudit | None = None  # the leakage audit's totals over the examples (memento.records.leakage)
    examples: list[ExampleResult] = Field(default_factory=list)

    @property
    def scores(self) -> list[float]:
        return [e.score for e in self.examples]

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | bool) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def prediction_fields(pred: Any) -> dict[str, Any]:
    """A prediction's output fields as JSON-ready values (the trajectory left out)."""
    if pred is None:
        return {}
    if isinstance(pred, dspy.Prediction):
        data = dict(pred.items())
    elif isinstance(pred, dict):
        data = dict(pred)
    else:
        data = {"output": pred}
    data.pop("trajectory", None)
    fields: dict[str, Any] = _jsonable(data)
    return fields


def _metric_outputs(result: Any) -> tuple[float, str, dict[str, float]]:
    if isinstance(result, dspy.Prediction | dict):
        items = dict(result.items())
        score = float(items.pop("score", 0.0) or 0.0)
        feedback = str(items.pop("feedback", "") or "")
        measures = {k: float(v) for k, v in items.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        return score, feedback, measures
    if isinstance(result, bool | int | float):
        return float(result), "", {}
    raise TypeError(f"metric returned {type(result).__name__}, expected a Prediction or a number")


def _example_id(example: Any, index: int) -> str | None:
    value = example.get("id") if hasattr(example, "get") else None
    return str(value) if value is not None else None


def score_example(
    program: Callable[..., Any], metric: Callable[..., Any], example: Any, index: int, *, roles: Any | None = None
) -> ExampleResult:
    """Run ``program`` on one example and score it: the record of example ``index`` (failures recorded on it).

    The program and the metric each run under their own :class:`memento.records.usage.UsageMeter`; only a fatal error
    (:class:`memento.core.errors.FatalError`) or a cancel leaves this function.
    """
    inputs = dict(example.inputs()) if hasattr(example, "inputs") else dict(example)
    record = ExampleResult(index=index, id=_example_id(example, index), inputs=_jsonable(inputs))
    t0 = time.perf_counter()
    pred: Any = None
    meter = UsageMeter(roles)
    try:
        with meter:
            pred = program(**inputs)
    except Exception as exc:
        record.error = handle_error(exc, where=f"example {record.id or index}", log=logger).reason
    usage = meter.usage()
    trajectory = getattr(pred, "trajectory", None) if pred is not None else None
    cutoff = parse_iso(inputs.get("cutoff", example.get("cutoff") if hasattr(example, "get") else None))
    record.leakage = LeakageAudit.of(trajectory if isinstance(trajectory, Trajectory) else None, cutoff=cutoff)
    if isinstance(trajectory, Trajectory):
        record.trajectory = trajectory
        record.behaviour = behaviour_of(trajectory)
        for key in _WEB_KEYS:
            setattr(usage, key, getattr(trajectory.usage, key))
        if trajectory.error and record.error is None:
            record.error = trajectory.error
    record.usage = usage
    record.prediction = prediction_fields(pred)
    if pred is not None:
        judge_meter = UsageMeter(roles)
        try:
            with judge_meter:
                result = metric(example, pred)
            record.score, record.feedback, record.measures = _metric_outputs(result)
        except Exception as exc:
            failure = handle_error(exc, where=f"metric on example {record.id or index}", log=logger)
            record.error = record.error or f"metric: {failure.reason}"
        record.judge_usage = judge_meter.usage()
        if isinstance(trajectory, Trajectory):
            trajectory.score = record.score
    record.seconds = round(time.perf_counter() - t0, 6)
    return record


def evaluate(
    program: Callable[..., Any],
    examples: Sequence[dspy.Example],
    metric: Callable[..., Any],
    *,
    threads: int = 1,
    roles: Any | None = None,
    task: str = "",
    method: str = "",
    seed: int = 0,
    metric_name: str | None = None,
    progress: Callable[[ExampleResult], None] | None = None,
    out_dir: str | Path | None = None,
    previous: Sequence[ExampleResult] = (),
    labels: dict[str, Any] | None = None,
    remote: Callable[[list[tuple[int, Any]], Callable[[ExampleResult], None]], None] | None = None,
    journal: EvalJournal | None = None,
) -> EvalResult:
    """Run ``program`` on every example and score it with ``metric``.

    Args:
        program: a callable taking the example's inputs as keyword arguments (a ``dspy.Module``).
        examples: ``dspy.Example`` objects with their inputs marked (``with_inputs``).
        metric: ``metric(example, pred)`` returning ``dspy.Prediction(score, feedback, ...)`` or a number.
        threads: examples run in parallel (DSPy context and usage meters reach the workers).
        roles: the LM roles, so usage is attributed per role (``judge_calls`` = calls of ``judge_lm``).
        task, method: labels written into the result.
        seed: seed of the bootstrap interval.
        metric_name: the metric's label in the result (default: its ``__name__``).
        progress: called with each finished example (from worker threads).
        out_dir: where a partial ``results.json`` goes if the run stops early (the caller writes the full one).
        previous: finished examples of an interrupted run with the same run key: those (same index and id,
            no error) are kept and not run again.
        labels: extra fields of the result (``run_key``, ``provenance``), written into partial results too.
        remote: runs ``(index, example)`` pairs elsewhere (the Ray executor's :meth:`~memento.execution.ray_executor.
            RayExecutor.examples`: :func:`score_example` on the cluster) and hands each finished record to its second
            argument; ``None``: ``threads`` threads of this process.
        journal: where each finished example is appended the moment it finishes (:class:`EvalJournal`), so a
            killed run loses nothing that finished; the caller removes it once the complete results are written.

    Returns:
        An :class:`EvalResult`; examples keep the input order.

    Raises:
        FatalError: e.g. LMUnavailableError, the LM cannot be used (unreachable server, refused key). The examples
            finished until then are kept: the exception's ``partial_result`` is an :class:`EvalResult` marked
            ``complete=False``, also written to ``out_dir/results.json`` when ``out_dir`` is given.
        Cancelled: a cancel (Ctrl-C, SIGTERM) stopped the run; the finished examples are kept the same way.
    """
    started = time.perf_counter()
    finished: list[ExampleResult] = []
    finished_lock = threading.Lock()

    def finish(record: ExampleResult) -> None:
        if journal is not None:
            journal.append(record)  # on disk before anything reports it finished (a Ray worker's record too)
        with finished_lock:
            finished.append(record)
        if progress is not None:
            progress(record)

    def run_one(item: tuple[int, dspy.Example]) -> ExampleResult:
        record = score_example(program, metric, item[1], item[0], roles=roles)
        finish(record)
        return record

    extra = dict(labels or {})
    labels = {"task": task, "method": method, "seed": seed, "total": len(examples)}
    labels["metric_name"] = metric_name or getattr(metric, "__name__", type(metric).__name__)
    reused = {}
    for record in previous:
        if record.error is None and 0 <= record.index < len(examples):
            if record.id == _example_id(examples[record.index], record.index):
                reused[record.index] = record
    finished.extend(reused.values())
    todo = [(i, ex) for i, ex in enumerate(examples) if i not in reused]
    extra["resumed"] = len(reused)
    try:
        if remote is not None:
            remote(todo, finish)
        else:
            run_parallel(run_one, todo, threads=threads)
    except (FatalError, Cancelled) as exc:
        with finished_lock:
            done = sorted(finished, key=lambda r: r.index)
        partial = aggregate(done, metric, started, **labels).model_copy(update=extra)
        partial.complete, partial.error = False, error_line(exc)
        exc.partial_result = partial  # type: ignore[union-attr]  # an ad-hoc attribute; eval reads it by getattr
        if out_dir is not None:
            try:
                path = write_results(partial, out_dir)
                logger.warning("evaluation stopped after %d of %d examples; partial results: %s", partial.n,
                               len(examples), path)  # fmt: skip
            except OSError as write_exc:
                logger.error("could not write the partial results to %s: %s", out_dir, write_exc)
        raise
    records = sorted(finished, key=lambda r: r.index)
    return aggregate(records, metric, started, **labels).model_copy(update=extra)


def aggregate(
    records: list[ExampleResult],
    metric: Any,
    started: float,
    *,
    task: str,
    method: str,
    seed: int,
    total: int,
    metric_name: str,
) -> EvalResult:
    """The aggregate result (mean, bootstrap CI, usage totals, measures, behaviour) of these example records."""
    scores = [r.score for r in records]
    mean, lo, hi = bootstrap_ci(scores, seed=seed)
    usage, judge_usage = Usage(), Usage()
    for r in records:
        usage = usage.add(r.usage)
        judge_usage = judge_usage.add(r.judge_usage)
    measure_names = sorted({k for r in records for k in r.measures})
    measures = {}
    for name in measure_names:
        values = [r.measures[name] for r in records if name in r.measures]
        measures[name] = sum(values) / len(values)
    judge = getattr(metric, "wrapped_metric", metric)
    audits = [r.leakage for r in records if r.leakage is not None]
    return EvalResult(
        task=task,
        method=method,
        metric=metric_name,
        n=len(records),
        total=total,
        mean=mean,
        ci_low=lo,
        ci_high=hi,
        errors=sum(1 for r in records if r.error),
        judge_errors=int(getattr(judge, "judge_errors", 0) or 0),
        measures=measures,
        behaviour=summarize_behaviour(r.behaviour for r in records),
        usage=usage,
        judge_usage=judge_usage,
        seconds=round(time.perf_counter() - started, 6),
        leakage=LeakageAudit.total(audits) if audits else None,
        examples=records,
    )


def write_results(result: EvalResult, out_dir: str | Path) -> Path:
    """Write ``results.json``, ``results.md`` (the summary and the leakage audit, per example and in total) and
    ``trajectories.jsonl`` (when programs returned trajectories) atomically.

    Returns:
        The path of ``results.json``.
    """
    out = Path(out_dir)
    data = result.model_dump(mode="json")
    data["ci"] = [data["ci_low"], data["ci_high"]]
    text = json.dumps(_jsonable(data), indent=2, ensure_ascii=False)
    path = out / "results.json"
    atomic_write_text(path, text + "\n")
    atomic_write_text(out / "results.md", render_markdown(result))
    lines = []
    for record in result.examples:
        if record.trajectory is not None:
            if result.provenance is not None and record.trajectory.provenance is None:
                record.trajectory.provenance = result.provenance
            lines.append(record.trajectory.model_dump_json())
    lines.extend(_kept_trajectories(result, out / "trajectories.jsonl"))
    if lines:
        atomic_write_text(out / "trajectories.jsonl", "\n".join(lines) + "\n")
    return path


def _num(value: float) -> str:
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.3f}"


def render_markdown(result: EvalResult) -> str:
    """``results.md`` of an evaluation: the score, usage, and the leakage audit in total and per example."""
    from memento.records.leakage import audit_lines

    lines = [
        f"# memento eval: {result.task} · {result.method}",
        "",
        f"Metric `{result.metric}`: mean {_num(result.mean)} (95% CI {_num(result.ci_low)}–{_num(result.ci_high)}) "
        f"over {result.n} of {result.total or result.n} examples; errors {result.errors}."
        + ("" if result.complete else f" Incomplete: {result.error}."),
        "",
    ]
    audit = result.leakage
    if audit is not None and audit.leaked:
        lines += [
            f"**Leakage: {audit.leaked} memory items and pages dated on or after their example's cutoff were shown "
            f"({audit.examples_leaking} of {audit.examples} examples).**",
            "",
        ]
    lines += ["## Leakage audit", ""]
    lines += audit_lines(audit) or ["- no audit (no example recorded one)"]
    rows = [r for r in result.examples if r.leakage is not None]
    if rows:
        lines += [
            "",
            "| # | id | cutoff | items shown | after cutoff | undated kept | hidden | undated dropped | pages shown | "
            "pages after cutoff | undated pages kept | undated pages dropped |",
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            a = r.leakage
            assert a is not None
            lines.append(
                f"| {r.index} | {r.id or ''} | {a.cutoff or '–'} | {a.items_shown} | {a.items_after_cutoff} | "
                f"{a.items_undated_kept} | {a.items_hidden} | {a.items_undated_dropped} | {a.pages_shown} | "
                f"{a.pages_after_cutoff} | {a.pages_undated_kept} | {a.pages_undated_dropped} |"
            )
    lines += [
        "",
        "After cutoff: memory items and pages shown that are dated on or after the example's cutoff (expected 0), "
        "counted from the item ids and pages recorded with its prompts. Hidden: items in memory dated on or after "
        "the cutoff, kept away by the filter. Undated: per the undated policy (`[web] undated`).",
    ]
    return "\n".join(lines) + "\n"


def _kept_trajectories(result: EvalResult, path: Path) -> list[str]:
    """Lines of an earlier ``trajectories.jsonl`` that belong to the examples a resumed run reused."""
    if not result.resumed or not path.exists():
        return []
    wanted = {json.dumps(r.inputs, sort_keys=True) for r in result.examples if r.trajectory is None}
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            inputs = json.loads(line).get("inputs")
        except (json.JSONDecodeError, AttributeError):
            continue
        if json.dumps(inputs, sort_keys=True) in wanted:
            kept.append(line)
    return kept
