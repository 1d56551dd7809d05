"""The ``memento eval`` command: run a method over a task's examples, score them, write results.json.

Example:
    memento eval --task multihop --data ../shared/data/multihop/questions.jsonl --limit 20 \\
        --method closed_book --lm openai/gpt-4o-mini --out runs/eval-multihop
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from memento.cli.commands._common import METHODS_HELP, cancellable, cli_errors, console, err_console
from memento.cli.commands._observe import JsonOpt, eval_payload, observe, print_json, report_hint
from memento.cli.commands._options import Flags, LimitOpt, MetricOpt, TaskOpt, with_flags
from memento.core.errors import Cancelled, ConfigError, DataError, LMUnavailableError, MementoError
from memento.core.paths import writable_dir
from memento.memory.location import DirectoryLocation, Location, parse_location
from memento.records.usage import UsageMeter
from memento.utils.text import one_line

__all__ = ["register", "eval_", "print_summary"]

logger = logging.getLogger(__name__)


def print_summary(result: Any, path: Path, *, show: int = 10) -> None:
    """Print a rich summary of an :class:`memento.metrics.evaluation.EvalResult`."""
    table = Table(title=f"{result.task} · {result.method} · {result.metric}", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("id")
    table.add_column("prediction")
    table.add_column("score", justify="right")
    table.add_column("note")
    for record in result.examples[:show]:
        first = next(iter(record.prediction.values()), "") if record.prediction else ""
        note = record.error or record.feedback
        style = "red" if record.error else None
        table.add_row(
            str(record.index),
            escape(one_line(record.id or "", 24)),
            escape(one_line(first, 50)),
            f"{record.score:.3f}",
            escape(one_line(note, 60)),
            style=style,
        )
    console.print(table)
    if len(result.examples) > show:
        console.print(f"[dim]… {len(result.examples) - show} more in results.json[/dim]")
    u, j = result.usage, result.judge_usage
    console.print(
        f"[bold]mean {result.mean:.3f}[/bold] (95% CI {result.ci_low:.3f}–{result.ci_high:.3f}) over {result.n} "
        f"examples; errors {result.errors}, judge errors {result.judge_errors}"
    )
    if result.measures:
        console.print("measures: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(result.measures.items())))
    if result.behaviour:
        from memento.metrics.behaviour import describe_behaviour

        console.print(f"behaviour: {describe_behaviour(result.behaviour)}")
    console.print(
        f"LM calls {u.lm_calls} (cached {u.cached_lm_calls}), tokens {u.prompt_tokens}+{u.completion_tokens}"
        + (f" ({u.cached_prompt_tokens} prompt tokens cached)" if u.cached_prompt_tokens else "")
        + ", "
        f"judge calls {j.lm_calls}, searches {u.searches}, fetches {u.fetches}, {result.seconds:.1f}s"
    )
    console.print(f"results: {escape(str(path))}")


@cli_errors
@cancellable
@with_flags("lm", "preset", "corpus", "threads", "executor", "research", "test_exploration", "observe", "memory", "cbr",
            "jitmem")  # fmt: skip
def eval_(
    task: TaskOpt,
    data: Annotated[Path, typer.Option("--data", help="The task's data file (JSONL or the JUSTICE CSV).")],
    limit: LimitOpt = None,
    method: Annotated[str, typer.Option("--method", "-m", help=f"One of: {METHODS_HELP}.")] = ("closed_book"),
    metric: MetricOpt = "default",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory for results.json.")] = None,
    program_file: Annotated[
        Path | None, typer.Option("--program", help="A saved program state (program.save) to load first.")
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option("--memory", help="Memory: a directory or postgresql://user@host:port/db; opened frozen."),
    ] = None,
    train: Annotated[
        Path | None, typer.Option("--train", help="Labelled examples for methods that need them (few_shot demos).")
    ] = None,
    llm_scrub: Annotated[
        bool,
        typer.Option(
            "--llm-scrub/--no-llm-scrub",
            help="legal: also let the LM scrub names left in the facts after the deterministic replacement.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh", help="Replace results already in --out instead of resuming them (or refusing other results)."
        ),
    ] = False,
    *,
    flags: Flags,
) -> None:
    """Evaluate a method on a task's data: per-example scores, mean with 95% CI, usage; writes results.json.

    Ctrl-C stops the run within seconds and keeps the finished examples (complete: false); rerunning the same
    command resumes them. An --out holding results of another method or settings is refused (use --fresh).
    """
    import memento
    from memento.cli.commands.run import resolve_task
    from memento.cli.progress import ScoreProgress
    from memento.core.types import utcnow
    from memento.execution.ray_executor import executor_for
    from memento.metrics.evaluation import evaluate
    from memento.programs.registry import build_program
    from memento.records.provenance import file_sha256, provenance, run_key

    started_at = utcnow().isoformat()

    if not data.exists():
        raise DataError(f"data file not found: {data}")
    if program_file is not None and not program_file.exists():
        raise ConfigError(f"program file not found: {program_file}")
    if train is not None and not train.exists():
        raise DataError(f"training file not found: {train}")
    from memento.core.presets import apply_preset

    settings = apply_preset(flags.settings(), method, task)  # [run] preset: the method's paper setup
    location = parse_location(memory) if memory is not None else None  # one line for a bad location, before any call
    stream_protocol = method == "jitmem" and settings.jitmem.protocol == "stream"
    if stream_protocol and settings.jitmem.warm and memory is None:
        raise ConfigError("--warm starts the test stream from a training bank: give it with --memory DIR")
    roles = memento.configure(settings)
    # the task's options go to its constructor (a task without an llm_scrub option refuses --llm-scrub)
    task_spec = resolve_task(task, roles=roles, threads=settings.run.threads, llm_scrub=llm_scrub or None)
    fallback_dir = settings.run.output_dir / f"eval-{task_spec.name}-{method}"
    # checked before any LM call (a bad --out must not cost a run), created only when results are written
    out_dir = writable_dir(out or fallback_dir, what="--out")
    extra: dict[str, Any] = {"llm_scrub": llm_scrub, "memory": str(memory) if memory else None}
    for label, path in (("program_sha256", program_file), ("train_sha256", train)):
        extra[label] = file_sha256(path) if path is not None else None
    data_sha = file_sha256(data)
    key = run_key(settings, task=task_spec.name, method=method, metric=metric, data_sha256=data_sha, extra=extra)
    from memento.metrics.eval_journal import EvalJournal

    journal = EvalJournal.in_dir(out_dir, run_key=key)  # each finished example, on disk as it finishes
    if fresh:
        journal.discard()
    previous = [] if fresh else previous_results(out_dir / "results.json", key, journal=journal)
    seen = observe(settings, roles, run_name=f"eval {method}")  # --log-lm, --mlflow: until the command ends
    with UsageMeter(roles) as load_meter:
        examples = task_spec.load(data, limit=limit)
    if not examples:
        raise DataError(f"no examples in {data}")
    report = getattr(task_spec, "last_load_report", None)
    if report is not None and report.skipped:
        err_console.print(f"memento: {report.summary()}", markup=False, highlight=False)
    if llm_scrub and report is not None:
        calls = load_meter.usage().lm_calls
        err_console.print(
            f"memento: LLM scrub accepted for {report.scrubbed} of {report.loaded} examples ({calls} LM calls)",
            markup=False,
            highlight=False,
        )
    score = task_spec.make_metric(metric, roles=roles)
    trainset = task_spec.load(train) if train is not None else None
    data_files = {"data": data, "train": train, "program": program_file}
    finish = _Finish(settings, data_files, started_at, out_dir=out_dir, fallback_dir=fallback_dir, seen=seen)
    if stream_protocol:  # JitMem's test protocol: the bank grows over the test stream, over seeded orderings
        with executor_for(settings) as executor:  # --executor ray: each stream batch's tasks on the cluster
            remote_for = None
            if executor is not None:
                finish.executor = executor.info()
                err_console.print(f"memento: {executor.describe()}", markup=False, highlight=False)
                remote_for = _stream_on(
                    executor, task=task_spec.name, metric=metric, program_state=_program_state(program_file)
                )
            streamed = _eval_jitmem_stream(task_spec, examples, score, settings=settings, roles=roles, memory=location,
                                           out_dir=out_dir, metric_name=f"{task_spec.name} {metric} metric",
                                           remote_for=remote_for, program_file=program_file)  # fmt: skip
        finish(streamed.model_copy(update={"run_key": key}), method=method, as_json=as_json)
        return
    from memento.programs.registry import method_info

    info = method_info(method)
    if memory is not None and info is not None and not info.memory:
        variant = f"{method}_memory" if method_info(f"{method}_memory") is not None else None
        hint = f": use --method {variant} to read it" if variant else ""
        err_console.print(
            f"memento: warning: method {method} reads no memory; --memory is ignored{hint}",
            markup=False,
            highlight=False,
        )
    # evaluation is test time: memory-bearing methods read their memory and never write to it
    program = build_program(
        method, task=task_spec, settings=settings, roles=roles, trainset=trainset, memory_dir=location, frozen=True
    )
    if program_file is not None:
        _load_program(program, program_file)
    from memento.memory.pins import memory_pins

    labels: dict[str, Any] = {"run_key": key}
    # the memory the program read, pinned when it was opened: one version per results file (Ray workers read it too)
    labels["memory"] = journal.memory = _pins_of_run(memory_pins(program), previous, out_dir, journal)
    if previous:
        err_console.print(
            f"memento: resuming {out_dir}: {sum(1 for r in previous if not r.error)} finished examples are kept",
            markup=False,
            highlight=False,
        )
    try:
        with executor_for(settings) as executor:
            remote = None
            if executor is not None:  # Ray: each example a task on the cluster; the workers build the program
                remote = executor.examples(
                    executor.spec(
                        method=method,
                        task=task_spec.name,
                        metric=metric,
                        memory=location,
                        frozen=True,
                        program_state=_program_state(program_file),
                        trainset=trainset,
                        memory_version=getattr(getattr(program, "memory", None), "version", None),
                        memory_pins=labels["memory"],
                    )
                )
                finish.executor = executor.info()
                err_console.print(f"memento: {executor.describe()}", markup=False, highlight=False)
            labels["provenance"] = provenance(
                settings, data_files=data_files, started_at=started_at, executor=finish.executor
            )
            bar = ScoreProgress(f"eval {method}", total=len(examples))  # on stderr: elapsed, ETA, running mean
            for record in previous:  # resumed examples count as done (before the bar shows): a finished eval's
                if record.error is None:  # rerun shows a full bar
                    bar.advance(score=record.score)
            with bar:
                result = evaluate(
                    program,
                    examples,
                    score,
                    threads=settings.run.threads,
                    roles=roles,
                    task=task_spec.name,
                    method=method,
                    seed=settings.run.seed,
                    metric_name=f"{task_spec.name} {metric} metric",
                    progress=lambda record: bar.advance(score=record.score, error=bool(record.error)),
                    out_dir=out_dir,
                    previous=previous,
                    labels=labels,
                    remote=remote,
                    journal=journal,
                )
    except (LMUnavailableError, Cancelled) as exc:
        journal.close()  # kept: a rerun resumes from it
        partial = getattr(exc, "partial_result", None)
        if partial is None:
            raise
        where = f"partial results (complete: false) in {out_dir / 'results.json'}"
        if isinstance(exc, Cancelled):
            raise Cancelled(
                f"{exc} after {partial.n} of {partial.total} examples; {where}; rerun the same command to finish"
            ) from None
        err_console.print(
            f"memento: stopped after {partial.n} of {partial.total} examples; {where}", markup=False, highlight=False
        )
        raise
    except BaseException:
        journal.close()
        raise
    finish(result, method=method, as_json=as_json)
    journal.discard()  # every example is in the complete results.json now


class _Finish:
    """The end of an evaluation: provenance, ``results.json`` (in ``run.output_dir`` when ``--out`` cannot be
    written), MLflow, the summary (or ``--json``), and an error when every example failed."""

    def __init__(
        self,
        settings: Any,
        data_files: dict[str, Any],
        started_at: str,
        *,
        out_dir: Path,
        fallback_dir: Path,
        seen: Any,
    ) -> None:
        self.settings, self.data_files, self.started_at = settings, data_files, started_at
        self.out_dir, self.fallback_dir, self.seen = out_dir, fallback_dir, seen
        self.executor: dict[str, Any] | None = None  # the Ray executor's info (provenance), None: threads

    def __call__(self, result: Any, *, method: str, as_json: bool) -> None:
        from memento.metrics.evaluation import write_results
        from memento.records.provenance import provenance

        result.provenance = provenance(
            self.settings, data_files=self.data_files, started_at=self.started_at, executor=self.executor
        )
        try:
            path = write_results(result, self.out_dir)
        except OSError as exc:
            if self.out_dir == self.fallback_dir:
                raise
            err_console.print(
                f"memento: cannot write results to {self.out_dir} ({type(exc).__name__}: {exc}); writing to "
                f"{self.fallback_dir}",
                markup=False,
                highlight=False,
            )
            path = write_results(result, self.fallback_dir)
        if self.seen.tracker is not None:
            self.seen.tracker.log_eval(result, path.parent)
        if as_json:
            print_json(eval_payload(path))
        else:
            print_summary(result, path)
            if result.stream is not None:
                from memento.optimize.jitmem_stream import describe_stream

                for line in describe_stream(result.stream):
                    console.print(f"jitmem stream: {escape(line)}")
                console.print(f"stream summary: {escape(str(path.parent / 'stream.json'))}")
            report_hint(path.parent)
        if result.n and result.errors == result.n:
            raise MementoError(f"every example of {method} failed ({result.n} of {result.n}); see {path}")


def _eval_jitmem_stream(
    task_spec: Any,
    examples: list[Any],
    score: Any,
    *,
    settings: Any,
    roles: Any,
    memory: Location | None,
    out_dir: Path,
    metric_name: str,
    remote_for: Any = None,
    program_file: Path | None = None,
) -> Any:
    """Run the test set as JitMem streams over ``jitmem.orderings`` seeded orderings (``OUT/stream.json``: mean ± std
    over orderings, the cold-start curve); returns the evaluation result (``results.json`` like any method). A saved
    program state (``--program``: e.g. a curator tuned by ``optimize-curator``) is loaded into each ordering's agent."""
    from memento.optimize.jitmem_stream import run_orderings
    from memento.programs.registry import build_program

    jit = settings.jitmem
    if jit.warm and memory is not None and not isinstance(memory, DirectoryLocation):
        raise ConfigError("--warm copies the training bank into each stream: give a directory memory (--memory DIR)")
    warm_bank = memory.path / "jitmem" if jit.warm and isinstance(memory, DirectoryLocation) else None
    if warm_bank is not None and not (warm_bank / "trajectories.sqlite3").is_file():
        raise DataError(f"no JitMem bank at {warm_bank} to start the stream from")
    tasks = [task_spec.preprocess(ex) for ex in examples]

    def build(memory_dir: Path) -> Any:
        agent = build_program("jitmem", task=task_spec, settings=settings, roles=roles, memory_dir=memory_dir)
        if program_file is not None:
            _load_program(agent, program_file)
        return agent

    result = run_orderings(
        build,
        tasks,
        orderings=jit.orderings,
        batch_size=jit.stream_batch,
        seed=settings.run.seed,
        metric=score,
        threads=settings.run.threads,
        out_dir=out_dir,
        warm_bank=warm_bank,
        warm_size=jit.warm_size,
        remote_for=remote_for,
    )
    return result.eval_result(tasks, task=task_spec, metric_name=metric_name, seed=settings.run.seed)


def _stream_on(executor: Any, *, task: str, metric: str, program_state: dict[str, Any] | None = None) -> Any:
    """``run_orderings(remote_for=...)``: an ordering's stream batches on the Ray workers, each over that ordering's
    bank (opened read-only by its location at the batch's version), with the ``--program`` state loaded."""

    def remote_for(memory_dir: Path) -> Any:
        return executor.stream_runs(
            lambda version: executor.spec(
                method="jitmem",
                task=task,
                metric=metric,
                memory=memory_dir,
                frozen=True,
                memory_version=version,
                program_state=program_state,
            )
        )

    return remote_for


def _program_state(path: Path | None) -> dict[str, Any] | None:
    """A saved program state (``--program``) as the Ray workers load it: the file's JSON."""
    if path is None:
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read program state from {path}: {type(exc).__name__}: {exc}") from None
    return state if isinstance(state, dict) else None


def _load_program(program: Any, program_file: Path) -> None:
    """Load a saved program state (``--program``) into ``program``; a file of another program or a corrupt one is one
    clear line."""
    try:
        program.load(str(program_file))
    except Exception as exc:  # noqa: BLE001 - any load failure becomes one line
        raise ConfigError(f"cannot load program state from {program_file}: {type(exc).__name__}: {exc}") from None


def _pins_of_run(pins: dict[str, Any] | None, previous: list[Any], out_dir: Path, journal: Any) -> Any:
    """The memory pins of this run (:func:`memento.memory.pins.memory_pins`). Examples finished earlier read the
    memory pinned then: resuming them against a memory that has changed since is refused (one results file, one
    memory version)."""
    from memento.memory.pins import describe_pins

    if not previous:
        return pins
    recorded: list[Any] = []
    header = journal.header()
    if header is not None and "memory" in header:
        recorded.append(header["memory"])
    if (out_dir / "results.json").exists():
        try:
            recorded.append(json.loads((out_dir / "results.json").read_text(encoding="utf-8")).get("memory"))
        except (OSError, ValueError, AttributeError):
            pass
    for earlier in recorded:
        if earlier != pins:
            raise ConfigError(
                f"{out_dir} holds examples that read another state of the memory ({describe_pins(earlier)}; "
                f"now {describe_pins(pins)}); use another --out, or --fresh to evaluate every example on the memory "
                "as it is"
            )
    return pins


def previous_results(path: Path, key: dict[str, Any], *, journal: Any = None) -> list[Any]:
    """Finished examples of an earlier run at ``path`` with the same run key; refuses (one line) another run's.

    With a ``journal`` (:class:`memento.metrics.eval_journal.EvalJournal`), the examples it recorded are added
    (a run killed before it could write ``results.json`` left only those); its record of an example wins.
    """
    examples = _results_file_examples(path, key) if path.exists() else []
    if journal is None:
        return examples
    by_index = {record.index: record for record in examples}
    by_index.update({record.index: record for record in journal.finished()})
    return [by_index[i] for i in sorted(by_index)]


def _results_file_examples(path: Path, key: dict[str, Any]) -> list[Any]:
    """The examples of a ``results.json`` written under the same run key (one-line refusal otherwise)."""
    from memento.metrics.evaluation import ExampleResult
    from memento.records.provenance import key_mismatch

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        old_key = data.get("run_key")
        examples = [ExampleResult.model_validate(e) for e in data.get("examples") or []]
    except (OSError, ValueError, AttributeError) as exc:
        message = f"{path} exists but cannot be read ({type(exc).__name__}); use another --out or --fresh"
        raise ConfigError(message) from None
    if not isinstance(old_key, dict):
        raise ConfigError(f"{path} holds results without a run key (older memento); use another --out or --fresh")
    diff = key_mismatch(old_key, key)
    if diff is not None:
        raise ConfigError(
            f"{path} holds results of another run ({diff}); use another --out, or --fresh to replace them"
        )
    return examples


def register(app: typer.Typer) -> None:
    """Add `eval` to the CLI."""
    app.command("eval")(eval_)
