"""The ``memento train`` command: learn MEMENTO memory (M1-M4) from a labelled training set, batch by batch.

Example:
    memento train --task multihop --data ../shared/data/multihop/questions.jsonl --limit 30 \\
        --memory runs/mem-multihop --batch-size 10 --corpus ../shared/data/multihop/corpus.jsonl \\
        --lm openai/gpt-4o-mini

Rerunning the same command on the same ``--memory`` resumes a half-finished batch and skips finished ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from memento.cli.commands._common import cancellable, cli_errors, console, err_console, memory_lock
from memento.cli.commands._observe import observe, report_hint
from memento.cli.commands._options import (
    EmbedderOpt,
    Flags,
    LimitOpt,
    MetricOpt,
    NoWaitOpt,
    TaskOpt,
    embedder_named,
    section,
    with_flags,
)
from memento.core.errors import DataError

__all__ = ["register", "train"]

logger = logging.getLogger(__name__)

#: The trainer's phases in order, with their progress labels (a batch is four steps: A, A, B, C).
_PHASES = ("forward", "consolidate", "score", "reflect", "done")
_LABELS = ("A: forward pass", "A: consolidation", "B: scoring", "C: reflection", "done")
_PHASE_LABEL = dict(zip(_PHASES, _LABELS, strict=True))


@cli_errors
@cancellable
@with_flags("lm", "preset", "corpus", "threads", "executor", "research", "observe", "memory", "trainer")
def train(
    task: TaskOpt,
    data: Annotated[Path, typer.Option("--data", help="The task's training data file.")],
    memory: Annotated[
        str | None,
        typer.Option("--memory", help="Memory: a directory or postgresql://user@host:port/db (default: memory.dir)."),
    ] = None,
    limit: LimitOpt = None,
    metric: MetricOpt = "default",
    embedder: EmbedderOpt = "minilm",
    no_wait: NoWaitOpt = False,
    *,
    flags: Flags,
) -> None:
    """Train MEMENTO memory: per batch, forward pass + consolidation (A), scoring (B), reflection (C), new version."""

    import memento
    from memento.cli.commands.run import resolve_task

    if not data.exists():
        raise DataError(f"data file not found: {data}")
    from memento.core.presets import apply_preset

    # the run records the directory it trains; [run] preset: MEMENTO's paper setup
    settings = apply_preset(flags.settings(memory=section(dir=memory)), "memento", task)
    roles = memento.configure(settings)
    seen = observe(settings, roles, run_name=f"train {task}")  # --log-lm, --mlflow: until the command ends
    task_spec = resolve_task(task, roles=roles, threads=settings.run.threads)
    examples = task_spec.load(data, limit=limit)
    if not examples:
        raise DataError(f"no examples in {data}")
    score = task_spec.make_metric(metric, roles=roles)
    directory = settings.memory.dir  # the location --memory gave (parsed with the settings), else [memory] dir
    vectors = embedder_named(embedder)
    from memento.execution.ray_executor import executor_for

    with memory_lock(directory, no_wait=no_wait):  # one writer per memory, for all of its writes
        with executor_for(settings) as executor:  # --executor ray: Phase A's runs on the cluster
            if executor is not None:
                executor.check_memory(directory)
                err_console.print(f"memento: {executor.describe()}", markup=False, highlight=False)
            reports = _fit(directory, vectors, task_spec, examples, score, settings, roles, executor=executor,
                           embedder_name=embedder)  # fmt: skip
    if seen.tracker is not None:
        seen.tracker.log_training(reports, directory)
    report_hint(directory)


def _fit(
    directory: Any,
    vectors: Any,
    task_spec: Any,
    examples: list[Any],
    score: Any,
    settings: Any,
    roles: Any,
    *,
    executor: Any = None,
    embedder_name: str | None = None,
) -> list[Any]:
    """Open the memory (under its lock) and train it batch by batch with a progress display; returns the batch
    reports. With the Ray ``executor`` each batch's forward pass runs on the cluster: the workers open the memory
    read-only at the version the batch starts from; distillation and commits stay here."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from memento.cli.progress import progress_console
    from memento.optimize.batch_report import reports_table
    from memento.optimize.memento_trainer import MementoTrainer
    from memento.programs.registry import build_program

    # the memento builder's training form: writable memory, the learner, [trainer] exploration steps per sample
    program = build_program(
        "memento", task=task_spec, settings=settings, roles=roles, memory_dir=directory, frozen=False, embedder=vectors
    )
    store, budgets = program.memory, program.budgets
    batch_size = settings.trainer.batch_size
    batches = (len(examples) + batch_size - 1) // batch_size
    console.print(
        f"training memory [bold]{directory}[/bold] (version {store.version}) on {len(examples)} {task_spec.name} "
        f"examples: {batches} batches of {batch_size} (profile {store.profile}, stores "
        f"{','.join(sorted(store.stores))}, exploration {budgets.exploration} steps per sample)"
    )
    with Progress(
        TextColumn("[bold]batch {task.fields[batch]}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=progress_console(),  # progress on stderr, results on stdout
        transient=False,
    ) as progress:
        bar = progress.add_task("starting", total=batches * 4, batch=1)

        def on_event(batch: int, phase: str, detail: str) -> None:
            done = (batch - 1) * 4 + _PHASES.index(phase)
            progress.update(bar, completed=done, batch=batch, description=f"{_PHASE_LABEL[phase]} {detail}".strip())

        trainer = MementoTrainer.for_program(program, score, settings, on_event=on_event)
        if executor is not None:
            trainer.remote_forward = executor.forward_runs(
                lambda: executor.spec(
                    method="memento",
                    task=task_spec.name,
                    memory=directory,
                    frozen="forward",
                    embedder=embedder_name,
                    memory_version=store.version,
                )
            )
        reports = trainer.fit(examples)
    console.print(reports_table(reports))
    for report in reports:
        for rejection in report.guard_rejected:  # the memory guard says what it kept out, and why
            console.print(f"memory guard, batch {report.batch}: {rejection.line()}", markup=False, highlight=False)
    if not settings.trainer.guard:
        console.print("memory guard off (trainer.guard = false): candidates met only the LLM check", markup=False)
    console.print(f"memory {directory}: version {store.version}")
    return reports


def register(app: typer.Typer) -> None:
    """Add `train` to the CLI."""
    app.command("train")(train)
