"""The ``memento compare`` command: memory methods vs GEPA/MIPROv2/BootstrapFewShot on one task, metric and split."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from memento.cli.commands._common import cancellable, cli_errors, console, err_console
from memento.cli.commands._observe import observe, report_hint
from memento.cli.commands._options import EmbedderOpt, Flags, LimitOpt, MetricOpt, TaskOpt, embedder_named, with_flags
from memento.cli.terminal_table import Cell, responsive_table
from memento.core.errors import ConfigError

__all__ = ["register"]


def _progress(line: str, console: Console | None = None) -> None:
    """One progress line on stderr, printed literally (``gepa:closed_book:`` is a method name, not an emoji code;
    brackets are not markup)."""
    (console or err_console).print(f"[dim]compare[/dim] {escape(line)}", highlight=False, emoji=False)


@cli_errors
@cancellable
@with_flags("lm", "preset", "corpus", "threads", "executor", "seed", "research", "test_exploration", "observe",
            "memory", "cbr", "cbr_training", "jitmem", "jitmem_train_gate", "jitmem_train_executor",
            "compare")  # fmt: skip
def compare(
    task: TaskOpt,
    methods: Annotated[
        str,
        typer.Option(
            "--methods",
            help="Comma-separated methods: closed_book, few_shot, react, react_memory, aet, memento, cbr, jitmem, "
            "closed_book_cases, few_shot_cases, "
            "gepa:<base>, miprov2:<base>, bootstrap:<base> (base: react, aet, closed_book ...).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Comparison directory (an existing one is resumed).")],
    train: Annotated[Path | None, typer.Option("--train", help="Training examples (the task's format).")] = None,
    test: Annotated[Path | None, typer.Option("--test", help="Test examples (the task's format).")] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="One data file split with --seed into --n-train/--n-test.")
    ] = None,
    n_train: Annotated[
        int | None, typer.Option("--n-train", min=1, help="Training examples taken from --data.")
    ] = None,
    n_test: Annotated[int | None, typer.Option("--n-test", min=1, help="Test examples taken from --data.")] = None,
    limit: LimitOpt = None,
    baseline: Annotated[str, typer.Option("--baseline", help="Method the paired bootstrap compares with.")] = (
        "closed_book"
    ),
    metric: MetricOpt = "default",
    embedder: EmbedderOpt = "minilm",
    *,
    flags: Flags,
) -> None:
    """Compare methods on one task: train each (frozen artefact in OUT/<method>/), test all on the same split.

    Writes OUT/results.json, OUT/results.md and PNG plots; rerunning resumes (finished methods are not rerun).
    """
    from memento.core.types import utcnow
    from memento.optimize.compare import compare as run_compare
    from memento.records.provenance import provenance
    from memento.tasks.task import get_task

    started_at = utcnow().isoformat()
    settings = flags.settings()
    if data is not None and (train is not None or test is not None):
        raise ConfigError("give either --data (split by seed) or --train and --test, not both")
    if data is None and (train is None or test is None):
        raise ConfigError("give --train and --test, or --data with --n-train/--n-test")
    from memento.core.paths import readable_file, writable_dir
    from memento.optimize.compare import parse_methods

    parse_methods([*methods.split(","), baseline])  # unknown methods or baseline: refused before any work
    writable_dir(out, what="--out")  # at or under a file: one line, before any work
    for path in (p for p in (data, train, test) if p is not None):
        readable_file(path, what="data file", error=ConfigError)
    if train is not None and test is not None and train.resolve() == test.resolve():
        raise ConfigError(f"--train and --test are the same file ({train}): the scores would measure memorisation")
    vectors = embedder_named(embedder)
    import memento

    roles = memento.configure(settings, set_default=False)
    task_obj = get_task(task, roles=roles, threads=settings.run.threads)  # the task's options to its constructor
    kwargs: dict[str, Any] = {}
    if data is not None:
        kwargs["data"] = task_obj.load(data, limit=limit)
        kwargs["n_train"], kwargs["n_test"] = n_train, n_test
    else:
        assert train is not None and test is not None  # refused above otherwise
        kwargs["trainset"] = task_obj.load(train, limit=limit)
        kwargs["testset"] = task_obj.load(test, limit=limit)
    from memento.cli.progress import CompareProgress

    seen = observe(settings, roles)  # --log-lm, --mlflow: until the command ends
    tracking = seen.compare_tracking(f"compare {task_obj.name} ({out.name})", settings)  # parent run
    from memento.execution.ray_executor import executor_for

    with executor_for(settings) as executor:  # --executor ray: test examples and MEMENTO's forward runs on a cluster
        if executor is not None:
            err_console.print(f"memento: {executor.describe()}", markup=False, highlight=False)
        data_files = {"data": data, "train": train, "test": test}
        where = executor.info() if executor is not None else None
        with CompareProgress(forward=tracking) as bars:  # on stderr: a bar per method and phase
            report = run_compare(
                task_obj,
                methods,
                out_dir=out,
                settings=settings,
                baseline=baseline,
                metric=metric,
                embedder=vectors,
                progress=lambda line: _progress(line, bars.console),
                observer=bars,
                roles=roles,
                provenance=provenance(settings, data_files=data_files, started_at=started_at, executor=where),
                executor=executor,
                embedder_name=embedder,
                **kwargs,
            )
    rows: list[list[Cell]] = []
    for name, res in report.methods.items():
        score = "–" if res.mean is None else f"{res.mean:.3f} [{res.ci_low:.3f}, {res.ci_high:.3f}]"
        diff = "–" if res.vs_baseline is None else f"{res.vs_baseline.diff:+.3f}"
        # Text cells: method names and errors are shown literally (no emoji codes, no markup)
        status = (
            Text(res.status) if res.status == "done" else Text.assemble((res.status, "red"), f": {res.error or ''}")
        )
        rows.append(
            [
                Text(name),
                status,
                score,
                f"{res.failed_examples}/{len(res.scores)}",
                diff,
                f"{res.costs.train.lm_calls} ({res.costs.train.cached_lm_calls})",
                f"{res.costs.test.lm_calls} ({res.costs.test.cached_lm_calls})",
                str(res.costs.train.judge_calls + res.costs.test.judge_calls),
                f"{res.costs.train.wall_seconds:.1f}",
                f"{res.costs.test.wall_seconds:.1f}",
            ]
        )
    table = responsive_table(  # method names stay whole; one block per method when the terminal is narrow
        f"memento compare: {report.task} ({report.split['n_train']} train / {report.split['n_test']} test)",
        ["method", "status", "score [95% CI]", "failed", f"Δ vs\n{report.baseline}", "train LM\ncalls (cached)",
         "test LM\ncalls (cached)", "judge\ncalls", "train\ns", "test\ns"],
        rows,
        right={3, 4, 5, 6, 7, 8, 9},
    )  # fmt: skip
    console.print(table)
    for line in method_details(report):
        console.print(line, markup=False, highlight=False, emoji=False)
    if tracking is not None:
        tracking.log_report(report, out)
    console.print(f"wrote {out / 'results.json'}, {out / 'results.md'} and plots")
    report_hint(out)
    failed = [name for name, res in report.methods.items() if res.status == "error"]
    if failed:
        err_console.print(
            f"memento: {len(failed)} method(s) failed: {', '.join(failed)} (see {out / 'results.md'})",
            markup=False,
            emoji=False,
            highlight=False,
        )
        raise typer.Exit(1)


def method_details(report: Any) -> list[str]:
    """What the table cannot hold, one line each: JitMem's stream protocol (mean ± std over orderings, the score per
    stream batch) and the score of every CBR training pass (Memento's iteration table)."""
    from memento.optimize.jitmem_stream import describe_stream

    lines: list[str] = []
    for name, res in report.methods.items():
        stream = (res.info or {}).get("stream")
        if stream:
            lines += [f"{name} stream: {line}" for line in describe_stream(stream)]
        passes = (res.info or {}).get("passes") or []
        if len(passes) > 1:
            scores = ", ".join(
                f"{p['pass']}: {'–' if p['score'] is None else format(p['score'], '.3f')}" for p in passes
            )
            lines.append(f"{name} training score per pass: {scores}")
    return lines


def register(app: typer.Typer) -> None:
    """Add `compare` to the CLI."""
    app.command("compare")(compare)
