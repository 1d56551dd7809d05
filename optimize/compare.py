"""Compare learning from the web (memory methods) with prompt optimisation (GEPA, MIPROv2, BootstrapFewShot).

One task, one metric, one seeded train/test split, the same LM roles for every method. Each method is a pluggable
:class:`MethodRunner` with two phases:

1. **train** on the training set, leaving a *frozen artefact* in ``DIR/<method>/``: a compiled program's JSON state
   (``program.json``, reloadable with ``program.load``) and/or a memory directory (``memory/``);
2. **test**: the program is rebuilt *from the artefact* (so what is scored is exactly what was saved, with memory
   frozen) and evaluated on the test set.

Each phase runs under a :class:`memento.records.usage.UsageMeter`, so its LM calls, tokens and judge calls are counted
by role, plus searches, fetches and wall time (:class:`memento.optimize.costs.PhaseCost`). The report
(:mod:`memento.optimize.report`) adds each method's bootstrap 95% CI and the paired-bootstrap difference against a
baseline method.

Methods: any registered program (``closed_book``, ``few_shot``, ``react``, ``aet`` ...: built, saved, tested),
``<optimiser>:<base>`` (``gepa:react``, ``miprov2:aet``, ``bootstrap:closed_book``), and the memory methods
``memento``, ``react_memory`` (ReAct reading MEMENTO memory), ``cbr``, ``jitmem`` and the case-memory baselines
``closed_book_cases`` / ``few_shot_cases`` (reading the bank ``cbr`` trains). Register your own with
:func:`register_runner`.

The pieces: :mod:`~memento.optimize.method_spec` (which methods), :mod:`~memento.optimize.compare_data` (the
split), :mod:`~memento.optimize.compare_context` (what runners share), :mod:`~memento.optimize.runners` (one
runner per family) and :mod:`~memento.optimize.web_tally`; this module is the harness that runs them and writes
the report. Every public name of those modules is importable from here.

Resumable: a method whose ``DIR/<method>/done`` marker exists is not rerun; a method whose training finished
(``train.json``) is only tested again; a crash in one method is recorded (status ``error``) and the others go on.

Example:
    >>> from memento.optimize.compare import compare  # doctest: +SKIP
    >>> report = compare("multihop", ["closed_book", "aet", "gepa:react"], data=examples, n_train=12, n_test=8,
    ...                  budget="tiny", out_dir="runs/cmp", settings=settings)  # doctest: +SKIP
    >>> report.methods["gepa:react"].vs_baseline.diff  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import dspy

from memento.core.config import Settings
from memento.core.errors import Cancelled, ConfigError, LMUnavailableError, MementoError
from memento.core.presets import apply_preset
from memento.core.types import utcnow
from memento.llm.lm_errors import raise_if_fatal
from memento.llm.structured_adapter import StructuredAdapter
from memento.optimize.budgets import CompareBudget, budget_from_settings, resolve_budget
from memento.optimize.compare_context import (
    CompareContext,
    CompareObserver,
    MethodRunner,
    TrainOutcome,
    metered,
)
from memento.optimize.compare_data import example_id, split_examples
from memento.optimize.costs import PhaseCost, role_models
from memento.optimize.method_spec import MethodSpec, parse_methods, reads_memory_of
from memento.optimize.report import BaselineDiff, CompareReport, MethodResult, write_report
from memento.optimize.runners import (
    CaseBankRunner,
    CaseMemoryRunner,
    JitMemRunner,
    MementoRunner,
    OptimizerRunner,
    ProgramRunner,
    register_runner,
    runner_for,
)
from memento.optimize.web_tally import CountingWeb, Tallied, WebTally
from memento.records.leakage import LeakageAudit
from memento.tasks.task import Task, get_task
from memento.utils.files import atomic_write_text
from memento.utils.text import error_line

__all__ = [
    "compare",
    "method_cache",
    "MethodSpec",
    "parse_methods",
    "split_examples",
    "example_id",
    "CompareContext",
    "CompareObserver",
    "TrainOutcome",
    "MethodRunner",
    "register_runner",
    "CaseBankRunner",
    "CaseMemoryRunner",
    "JitMemRunner",
    "MementoRunner",
    "OptimizerRunner",
    "ProgramRunner",
    "WebTally",
    "Tallied",
    "CountingWeb",
]

logger = logging.getLogger(__name__)


# -- phases -------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def method_cache(directory: Path) -> Iterator[None]:
    """Give the enclosed method its own DSPy response cache (memory and disk, in ``directory``).

    DSPy's cache is process-wide and ignores rollout ids at temperature 0: with one cache, a later method would be
    served the earlier methods' identical calls and report 0 LM calls. Each method starts empty (and a resumed
    comparison finds its own cache again); whether caching is on at all follows the current cache.
    """
    previous = dspy.cache
    dspy.configure_cache(
        enable_disk_cache=bool(getattr(previous, "enable_disk_cache", True)),
        enable_memory_cache=bool(getattr(previous, "enable_memory_cache", True)),
        disk_cache_dir=str(directory),
    )
    try:
        yield
    finally:
        with dspy._cache_lock:
            dspy.cache = previous


def _eval_command(ctx: CompareContext, spec: MethodSpec, method_dir: Path, artefacts: dict[str, str]) -> str:
    """The ``memento eval`` command line that reloads this method's frozen artefact."""
    method = spec.base if spec.kind == "optimizer" else spec.name
    parts = ["memento eval", "--task", ctx.task.name, "--data", "TEST_DATA", "--method", method]
    if "program" in artefacts:
        parts += ["--program", str((method_dir / artefacts["program"]).resolve())]
    if "memory" in artefacts:
        parts += ["--memory", str((method_dir / artefacts["memory"]).resolve())]
    if ctx.settings.web.corpus is not None:
        parts += ["--corpus", str(ctx.settings.web.corpus)]
    if ctx.settings.run.preset != "none":
        parts += ["--preset", ctx.settings.run.preset]
    jit = ctx.settings.jitmem
    if spec.name == "jitmem" and jit.protocol == "stream":
        parts += ["--jitmem-protocol", "stream", "--orderings", str(jit.orderings), "--stream-batch"]
        parts += [str(jit.stream_batch), "--warm" if jit.warm else "--cold"]
    return " ".join(parts)


def _test_phase(
    ctx: CompareContext,
    spec: MethodSpec,
    program: dspy.Module,
    method_dir: Path,
    models: dict[str, str],
    remote_fields: dict[str, Any] | None = None,
) -> tuple[list[float], int, dict[str, float], PhaseCost, LeakageAudit | None, dict[str, float], dict[str, Any] | None]:
    """Evaluate the reloaded program on the test set; per-example records (their leakage audits included) go to
    ``method_dir/test/``. Under the Ray executor the workers build the program from ``remote_fields`` (the runner's
    ``remote``) and score each example; the memory version this process loaded is the one they must read. Returns
    the scores, the failed examples, the metric's measures, the cost, the leakage audit and the behaviour
    (``metrics.behaviour``), and the memory pins the program read.

    Each finished example is appended to ``method_dir/test/journal.jsonl`` as it finishes (by this process, also
    when a Ray worker ran it); a rerun after an interruption (even SIGKILL) tests only the examples the journal does
    not hold.
    """
    from memento.memory.pins import memory_pins
    from memento.metrics.eval_journal import EvalJournal
    from memento.metrics.evaluation import evaluate, write_results

    test_dir = method_dir / "test"
    journal = EvalJournal.in_dir(
        test_dir, run_key={"method": spec.name, "test_ids": [example_id(ex, ctx.task) for ex in ctx.testset]}
    )
    journal.memory = memory_pins(program)  # what every test example reads (pinned when the program was loaded)
    if remote_fields is not None:  # Ray workers read the memory at the version and state pinned here
        version = getattr(getattr(program, "memory", None), "version", None)
        remote_fields = {**remote_fields, "memory_version": version, "memory_pins": journal.memory}
    remote = ctx.remote(remote_fields)
    observer = ctx.observer
    previous = journal.finished()
    header = journal.header() if previous else None
    if header is not None and header.get("memory") != journal.memory:  # the memory changed since: test again
        logger.warning("%s: the memory changed since the journal's examples were tested; testing all again", spec.name)
        journal.discard()
        previous = []
    if previous:
        logger.info("%s: %d test examples already finished (journal); not run again", spec.name, len(previous))
    try:
        with metered(ctx.roles) as (meter, clock):
            result = evaluate(
                program,
                ctx.testset,
                ctx.metric,
                threads=ctx.threads,
                roles=ctx.roles,
                task=ctx.task.name,
                method=spec.name,
                seed=ctx.seed,
                progress=None
                if observer is None
                else lambda r: observer.example(spec.name, "test", r.score, bool(r.error)),
                out_dir=test_dir,
                previous=previous,
                remote=remote,
                labels={"memory": journal.memory},
                journal=journal,
            )
    finally:
        journal.close()
    write_results(result, test_dir)
    journal.discard()
    searches = sum(row.usage.searches for row in result.examples)
    fetches = sum(row.usage.fetches for row in result.examples)
    cost = PhaseCost.from_usage(meter.usage(), wall_seconds=clock[1], searches=searches, fetches=fetches, models=models)
    measures = {k: float(v) for k, v in result.measures.items()}
    return (
        [float(row.score) for row in result.examples],
        result.errors,
        measures,
        cost,
        result.leakage,
        dict(result.behaviour),
        result.memory,
    )


def _run_method(
    ctx: CompareContext, spec: MethodSpec, models: dict[str, str], log: Callable[[str], None]
) -> MethodResult:
    method_dir = ctx.out_dir / spec.slug
    done, result_file, train_file = method_dir / "done", method_dir / "result.json", method_dir / "train.json"
    if done.exists() and result_file.exists():
        log(f"{spec.name}: already done, not rerun")
        finished = MethodResult.model_validate_json(result_file.read_text(encoding="utf-8"))
        if ctx.observer is not None:
            ctx.observer.method_done(finished, method_dir)
        return finished
    method_dir.mkdir(parents=True, exist_ok=True)
    runner = runner_for(spec)
    record = MethodResult(method=spec.name, kind=spec.kind, base=spec.base, started_at=utcnow())
    record.budgets = ctx.budget.for_method(spec.optimizer or ("memory" if spec.kind == "memory" else ""))
    record.example_ids = [example_id(ex, ctx.task) for ex in ctx.testset]
    phase = "train"
    try:
        if train_file.exists():
            trained = MethodResult.model_validate_json(train_file.read_text(encoding="utf-8"))
            record.costs.train, record.budgets, record.info = trained.costs.train, trained.budgets, trained.info
            record.curve, record.growth, record.artefacts = trained.curve, trained.growth, trained.artefacts
            log(f"{spec.name}: training already finished, testing the saved artefact")
        else:
            log(f"{spec.name}: training")
            if ctx.observer is not None:
                ctx.observer.phase(spec.name, "train", None)
            try:
                with metered(ctx.roles) as (meter, clock):
                    outcome = runner.train(ctx, spec, method_dir)
            finally:  # a crashed training phase still reports what it spent
                record.costs.train = PhaseCost.from_usage(meter.usage(), wall_seconds=clock[1], models=models)
            record.costs.train.searches, record.costs.train.fetches = outcome.searches, outcome.fetches
            if outcome.budget:  # the budget as applied (after clamping) replaces the nominal one
                record.budgets = dict(outcome.budget)
            record.info, record.curve, record.growth = outcome.info, outcome.curve, outcome.growth
            record.artefacts = dict(outcome.artefacts)
            record.artefacts["eval"] = _eval_command(ctx, spec, method_dir, outcome.artefacts)
            atomic_write_text(train_file, record.model_dump_json(indent=2))  # lets a rerun skip training
        phase = "test"
        log(f"{spec.name}: testing on {len(ctx.testset)} examples")
        if ctx.observer is not None:
            ctx.observer.phase(spec.name, "test", len(ctx.testset))
        custom = getattr(runner, "test", None)
        streamed = custom(ctx, spec, method_dir, models) if custom is not None else None
        if streamed is not None:  # a runner with its own test protocol (JitMem's test stream)
            record.scores, record.failed_examples, record.measures, record.costs.test, stream_info = streamed[:5]
            record.info = {**record.info, "stream": stream_info}
            record.leakage = streamed[5] if len(streamed) > 5 else None
            record.behaviour = dict((stream_info or {}).get("behaviour") or {})
        else:
            program = runner.load(ctx, spec, method_dir)
            remote = getattr(runner, "remote", None)
            fields = remote(ctx, spec, method_dir) if remote is not None and ctx.executor is not None else None
            tested = _test_phase(ctx, spec, program, method_dir, models, fields)
            (
                record.scores,
                record.failed_examples,
                record.measures,
                record.costs.test,
                record.leakage,
                record.behaviour,
                pins,
            ) = tested
            if pins is not None:  # the memory version / bank rows every test example read
                record.info = {**record.info, "memory": pins}
        record.artefacts["predictions"] = "test/"
        record.status = "done"
        if record.scores and record.failed_examples >= len(record.scores):  # failure is not a score of 0
            record.status = "error"
            record.error = f"test: every example failed ({record.failed_examples} of {len(record.scores)})"
    except (LMUnavailableError, KeyboardInterrupt, Cancelled):
        raise
    except Exception as exc:  # one method's crash is recorded; the comparison goes on
        raise_if_fatal(exc)
        if isinstance(exc, MementoError):
            logger.warning("%s failed in its %s phase: %s", spec.name, phase, exc)
        else:
            logger.exception("%s failed in its %s phase", spec.name, phase)
        record.status = "error"
        record.error = f"{phase}: {error_line(exc)}"
        atomic_write_text(method_dir / "error.txt", "".join(traceback.format_exception(exc)))
    record.finished_at = utcnow()
    atomic_write_text(result_file, record.model_dump_json(indent=2))
    if record.status == "done":
        atomic_write_text(done, record.finished_at.isoformat() + "\n")
    log(f"{spec.name}: {record.status}" + (f" ({record.error})" if record.error else ""))
    if ctx.observer is not None:
        ctx.observer.method_done(record, method_dir)
    return record


# -- aggregation --------------------------------------------------------------------------------------------------
def _summarise(report: CompareReport, seed: int) -> None:
    from memento.metrics.stats import bootstrap_ci, paired_bootstrap

    base = report.methods.get(report.baseline)
    base_scores = dict(zip(base.example_ids, base.scores, strict=False)) if base and base.status == "done" else {}
    totals = report.preprocess.model_copy()
    for name, res in report.methods.items():
        totals = totals.plus(res.costs.total)
        if res.status != "done" or not res.scores:
            res.mean = res.ci_low = res.ci_high = None
            res.vs_baseline = None
            continue
        mean, lo, hi = bootstrap_ci(res.scores, n=1000, seed=seed)
        res.mean, res.ci_low, res.ci_high = float(mean), float(lo), float(hi)
        res.vs_baseline = None
        if base_scores and name != report.baseline:
            pairs = [(s, base_scores[i]) for i, s in zip(res.example_ids, res.scores, strict=False) if i in base_scores]
            if pairs:
                diff, dlo, dhi = paired_bootstrap([a for a, _ in pairs], [b for _, b in pairs], n=1000, seed=seed)
                res.vs_baseline = BaselineDiff(
                    baseline=report.baseline, diff=float(diff), ci_low=float(dlo), ci_high=float(dhi), n=len(pairs)
                )
    report.totals = totals


def _resolve_metric(task: Task, metric: str | Callable[..., Any] | None, roles: Any) -> Callable[..., Any]:
    """The metric to use; a named kind (``None``: the task's default) is a new instance at every call, so each
    method gets its own (a memoising judge shared across methods would make later methods' judge costs smaller)."""
    if callable(metric):
        return metric
    kind = "default" if metric is None else metric
    make = getattr(task, "make_metric", None)
    if make is None:
        if kind == "default":
            return task.metric
        raise ConfigError(f"task {task.name!r} offers no metric {kind!r} (only its default metric)")
    made: Callable[..., Any] = make(kind, roles=roles)
    return made


def _check_overlap(
    trainset: Sequence[dspy.Example], testset: Sequence[dspy.Example], task: Task, log: Callable[[str], None]
) -> None:
    """Refuse a test set that lies wholly inside the training set; warn when they share some examples."""
    train_ids = {example_id(ex, task) for ex in trainset}
    shared = [i for i in (example_id(ex, task) for ex in testset) if i in train_ids]
    if shared and len(shared) == len(testset):
        raise ConfigError(
            f"every test example is also a training example ({len(shared)} of {len(testset)}): the scores would "
            "measure memorisation; give a separate test file or split one file with --data"
        )
    if shared:
        message = f"warning: {len(shared)} of {len(testset)} test examples are also training examples"
        logger.warning("%s", message)
        log(message)


def _check_split(out_dir: Path, split: dict[str, Any]) -> None:
    """Refuse to resume a directory that holds a comparison with another split, task, metric, LM roles or budget
    (finished methods would be reported next to ones run under different conditions)."""
    path = out_dir / "split.json"
    if path.exists():
        previous = json.loads(path.read_text(encoding="utf-8"))
        keys = ("task", "seed", "train_ids", "test_ids", "lm_roles", "metric", "budget")
        changed = [k for k in keys if previous.get(k) != split.get(k)]
        if "method_settings" in previous and previous["method_settings"] != split.get("method_settings"):
            changed.append("[cbr]/[jitmem] settings")
        if changed:
            raise ConfigError(
                f"{out_dir} holds a comparison with a different {', '.join(changed)}; "
                "use another --out directory (or remove it) to start a new comparison"
            )
        return
    atomic_write_text(path, json.dumps(split, indent=2))


def compare(
    task: Task | str,
    methods: str | Sequence[str],
    *,
    out_dir: str | Path,
    settings: Settings | None = None,
    roles: Any = None,
    data: Sequence[dspy.Example] | None = None,
    trainset: Sequence[dspy.Example] | None = None,
    testset: Sequence[dspy.Example] | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
    budget: CompareBudget | str | None = None,
    budget_overrides: dict[str, Any] | None = None,
    baseline: str = "closed_book",
    threads: int | None = None,
    seed: int | None = None,
    metric: str | Callable[..., Any] | None = None,
    progress: Callable[[str], None] | None = None,
    embedder: Any = None,
    observer: CompareObserver | None = None,
    provenance: dict[str, Any] | None = None,
    executor: Any = None,
    embedder_name: str | None = None,
) -> CompareReport:
    """Train and test every method on one split with one metric and write ``results.json``/``results.md``/plots.

    Args:
        task: the task (or its registered name); its metric scores every method unless ``metric`` is given.
        methods: ``"closed_book,aet,gepa:react"`` or a list. The baseline is added when missing.
        out_dir: the comparison directory (created; an existing one is resumed).
        settings: effective settings (LM roles, web, budgets of a research session, threads, seed).
        roles: the LM roles; built from ``settings`` with :func:`memento.llm.lm.configure` when ``None``.
        data: examples to split with ``seed`` into ``n_train``/``n_test``; or give ``trainset`` and ``testset``.
        budget: ``None`` (the ``[compare]`` settings section: its preset and explicit values), a preset name
            (``tiny``/``light``/``medium``: replaces the section's preset) or a :class:`CompareBudget`.
        budget_overrides: explicit budget values applied over the preset (``{"gepa_max_metric_calls": 40}``).
        baseline: the method every other is compared with (paired bootstrap over the test examples).
        threads: evaluation threads (default ``settings.run.threads``).
        seed: split/optimiser/bootstrap seed (default ``settings.run.seed``).
        metric: the metric every method is trained and tested with: ``None`` (the task's), a kind the task offers
            through ``make_metric`` (``"judge"``: an LLM verdict judge under the ``judge_lm`` role; ``"em"``...),
            or a callable ``(example, pred, trace=None, pred_name=None, pred_trace=None) -> Prediction(score,
            feedback)``.
        progress: called with one line per step (the CLI prints them).
        embedder: the text embedder of the memory methods' stores (default: theirs, MiniLM when available).
        observer: follows phases, examples and finished methods (progress bars, MLflow tracking).
        provenance: what produced the comparison (:func:`memento.records.provenance.provenance`); stored in the report,
            its ``ended_at`` updated when the comparison ends.
        executor: a started :class:`memento.execution.ray_executor.RayExecutor`: each method's test examples and
        MEMENTO's
            training forward passes run on the cluster (``metric`` must then be a name, not a callable);
            ``None``: threads of this process.
        embedder_name: the ``--embedder`` name the Ray workers load (``embedder`` is this process's object).

    Returns:
        The :class:`CompareReport` that was written to ``out_dir``.

    Raises:
        ConfigError: bad methods, sizes or budget, or a directory holding another comparison.
        LMUnavailableError: the LM cannot be reached (the comparison stops; finished methods stay recorded).
    """
    from memento.llm.lm import configure

    log = progress or (lambda line: logger.info("%s", line))
    settings = settings or Settings()
    seed = settings.run.seed if seed is None else seed
    threads = settings.run.threads if threads is None else threads
    if budget is None or isinstance(budget, str):
        budget = budget_from_settings(settings, budget, budget_overrides)
    elif budget_overrides:
        budget = resolve_budget(budget.preset, {**budget.model_dump(exclude={"preset"}), **budget_overrides})
    specs = parse_methods(methods)
    if baseline not in {s.name for s in specs}:
        specs = [*parse_methods([baseline]), *specs]
    # memento before react_memory, cbr before the case-memory baselines: they read the memory those train
    specs.sort(key=lambda s: 1 if reads_memory_of(s.name) else 0)

    if trainset is None or testset is None:
        if data is None:
            raise ConfigError("give either data (to split) or both trainset and testset")
        trainset, testset = split_examples(data, n_train=n_train, n_test=n_test, seed=seed)
    if not trainset or not testset:
        raise ConfigError("the train and test sets must both be non-empty")
    roles = roles if roles is not None else configure(settings, set_default=False)
    # a task named here takes its options in its constructor; a task object passed in keeps its own
    task_obj = get_task(task, roles=roles, threads=threads) if isinstance(task, str) else task
    _check_overlap(trainset, testset, task_obj, log)
    models = role_models(roles)
    # preprocessing (e.g. an LLM PII scrub) happens once, before any method sees an example; its cost is reported
    # structured outputs for every role (memento.llm.structured_adapter), unless the caller installed an adapter
    adapter = dspy.settings.adapter or StructuredAdapter()
    lm = getattr(roles, "lm", None) or dspy.settings.lm
    with dspy.context(lm=lm, adapter=adapter), metered(roles) as (meter, clock):
        train = [task_obj.preprocess(ex) for ex in trainset]
        test = [task_obj.preprocess(ex) for ex in testset]
    preprocess_cost = PhaseCost.from_usage(meter.usage(), wall_seconds=clock[1], models=models)
    metric_name = "default" if metric is None else metric if isinstance(metric, str) else ""
    metric_fn = _resolve_metric(task_obj, metric, roles)
    metric_name = f"{task_obj.name}:{metric_name or getattr(metric_fn, '__name__', type(metric_fn).__name__)}"
    from memento.core.paths import writable_dir

    out = writable_dir(out_dir, what="comparison directory")
    out.mkdir(parents=True, exist_ok=True)
    split = {
        "task": task_obj.name,
        "seed": seed,
        "n_train": len(train),
        "n_test": len(test),
        "train_ids": [example_id(ex, task_obj) for ex in train],
        "test_ids": [example_id(ex, task_obj) for ex in test],
        "lm_roles": models,
        "metric": metric_name,
        "budget": budget.model_dump(),
        "method_settings": {"cbr": settings.cbr.model_dump(), "jitmem": settings.jitmem.model_dump()},
    }
    _check_split(out, split)
    ctx = CompareContext(task_obj, settings, roles, metric_fn, train, budget, threads, seed, test, out)
    ctx.embedder, ctx.observer = embedder, observer
    if executor is not None:
        if callable(metric):
            raise ConfigError("--executor ray: give the metric by name (a Ray worker builds it), not a callable")
        ctx.executor = executor
        ctx.worker = {"task": task_obj.name, "metric": metric or "default", "trainset": train}
        if embedder_name is not None:
            ctx.worker["embedder"] = embedder_name
    report = CompareReport(
        task=task_obj.name,
        metric=metric_name,
        higher_is_better=task_obj.higher_is_better,
        baseline=baseline,
        seed=seed,
        split={k: split[k] for k in ("n_train", "n_test", "train_ids", "test_ids")},
        lm_roles=models,
        budget=budget.model_dump(),
        preprocess=preprocess_cost,
        provenance=provenance,
    )
    with dspy.context(lm=lm, adapter=adapter):
        for spec in specs:
            # each method gets its own metric instance: judge memos never carry one method's verdicts to another
            method_ctx = (
                ctx if callable(metric) else dataclasses.replace(ctx, metric=_resolve_metric(task_obj, metric, roles))
            )
            # [run] preset: each method's paper setup (explicit values win)
            method_ctx = dataclasses.replace(method_ctx, settings=apply_preset(settings, spec.name, task_obj.name))
            with method_cache(out / spec.slug / "lm-cache"):
                report.methods[spec.name] = _run_method(method_ctx, spec, models, log)
            _summarise(report, seed)
            write_report(report, out, plots=False)  # after every method: a crash later keeps what is done
    report.created_at = dt.datetime.now(dt.UTC)
    if report.provenance is not None:
        report.provenance = {**report.provenance, "ended_at": report.created_at.isoformat()}
    _summarise(report, seed)
    write_report(report, out)
    return report
