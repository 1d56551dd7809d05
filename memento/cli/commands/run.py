"""The ``memento run`` command: answer one question with a research program, print the answer and its tree.

Example:
    memento run --task multihop --question "Which city was the director of Inception born in?" \\
        --lm openai/gpt-4o-mini --corpus examples/multihop/corpus.jsonl --trace --out run.json
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.tree import Tree

from memento.cli.commands._common import METHODS_HELP, cancellable, cli_errors, console, err_console, memory_lock
from memento.cli.commands._observe import JsonOpt, observe, print_json, report_hint
from memento.cli.commands._options import Flags, NoWaitOpt, TaskOpt, with_flags
from memento.core.errors import ConfigError, DataError
from memento.core.paths import writable_dir
from memento.memory.location import Location, parse_location
from memento.utils.files import atomic_write_text
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.core.types import Node, Trajectory
    from memento.programs.adaptive_exploration_tree import TreeEvent
    from memento.tasks.task import Task

__all__ = ["register", "run", "resolve_task", "render_tree_rich"]

logger = logging.getLogger(__name__)

_STATUS_STYLE = {"answered": "green", "decomposed": "cyan", "failed": "red", "pending": "yellow"}


def resolve_task(name: str, **options: Any) -> Task:
    """The registered task ``name`` (importing ``memento.tasks.<name>`` if needed), built with its constructor
    options (:func:`memento.tasks.task.get_task`: ``roles``, ``threads``, ``llm_scrub``...); ``multihop`` falls back
    to qa."""
    from memento.tasks.task import get_task, task_names

    if name not in task_names():
        try:
            importlib.import_module(f"memento.tasks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"memento.tasks.{name}":
                raise
    if name == "multihop" and name not in task_names():
        logger.info("task multihop is not registered; using qa")
        name = "qa"
    return get_task(name, **options)


def _label(node: Node) -> str:
    style = _STATUS_STYLE.get(node.status, "white")
    steps = f", {node.steps} steps" if node.steps else ""
    head = f"[bold]{escape(node.id)}[/bold] [{style}]{node.status}[/{style}] [dim](wave {node.wave}{steps})[/dim]"
    line = f"{head} {escape(one_line(node.question, 110))}"
    if node.answer:
        line += f"\n[dim]→[/dim] {escape(one_line(node.answer, 160))}"
    if node.status == "failed" and node.error:
        line += f"\n[red dim]{escape(one_line(node.error, 160))}[/red dim]"
    return line


def render_tree_rich(trajectory: Trajectory) -> Tree:
    """A compact rich tree of a trajectory's nodes (status, wave, steps, question and answer)."""
    roots = [n for n in trajectory.nodes if n.parent_id is None]
    tree = Tree(f"[bold]{escape(one_line(trajectory.task_text, 120))}[/bold] [dim]({trajectory.method})[/dim]")

    def add(branch: Tree, node: Node) -> None:
        for child in trajectory.children(node.id):
            add(branch.add(_label(child)), child)

    for root in roots:
        if root.id == "root" and root.wave < 0:
            if root.answer:
                tree.add(f"[bold]synthesis[/bold] → {escape(one_line(root.answer, 200))}")
            add(tree, root)
        else:
            add(tree.add(_label(root)), root)
    return tree


def _trace_printer(event: TreeEvent) -> None:
    secs = f"[dim]{event.seconds:.2f}s[/dim]"
    if event.kind == "decompose":
        console.print(f"[bold]decompose[/bold] {secs}: {len(event.nodes)} sub-questions")
        for node in event.nodes:
            console.print(f"  {escape(node.id)}: {escape(one_line(node.question, 110))}")
    elif event.kind == "wave":
        console.print(f"[bold]wave {event.wave}[/bold] solved {secs}")
        for node in event.nodes:
            console.print("  " + _label(node).replace("\n", "\n    "))
    elif event.kind == "reflect":
        console.print(f"[bold]reflect[/bold] after wave {event.wave} {secs}: {escape(one_line(event.text, 200))}")
        for node in event.nodes:
            console.print(
                f"  + {escape(node.id)} (under {escape(str(node.parent_id))}): {escape(one_line(node.question, 110))}"
            )
        if not event.nodes:
            console.print("  no new sub-questions: exploration ends")
    elif event.kind == "synthesize":
        console.print(f"[bold]synthesize[/bold] {secs}: {escape(one_line(event.text, 200))}")


def _writable_dir(path: Path, flag: str) -> None:
    """Check ``path`` can be created or written (it is created when the trajectory is written)."""
    writable_dir(path, what=flag)


def _names_a_directory(out: str) -> bool:
    """Whether ``--out`` as typed ends with a path separator (``runs/``, ``runs/.``): a directory, created if new."""
    import os

    seps = tuple(sep for sep in (os.sep, os.altsep) if sep)
    return out.endswith(seps) or out.endswith(tuple(sep + "." for sep in seps)) or out in (".", "..")


def _check_out(out: str | Path | None, output_dir: Path) -> tuple[Path, str | None]:
    """Where the trajectory goes: ``(directory, file name)``, checked before any LM call.

    The name is ``None`` when the file is named after the run (``run-<stamp>-<task id>.json``): without ``--out``
    (in ``run.output_dir``), and when ``--out`` is an existing directory or ends with a separator (``runs/``: a
    directory, created when the trajectory is written; ``Path`` would drop the slash and write a file ``runs``).
    """
    if out is None:
        _writable_dir(output_dir, "run.output_dir")
        return output_dir, None
    if not str(out).strip():
        raise ConfigError("--out is empty: give a file or a directory (ending in '/')")
    as_dir = _names_a_directory(str(out))
    out = Path(out).expanduser()
    if as_dir and not out.is_dir():
        _writable_dir(out, "--out")  # at or under a file: one line; nothing is created until the write
        return out, None
    if out.is_dir():
        err_console.print(
            f"memento: --out {out} is a directory: the trajectory will be written inside it as "
            "run-<stamp>-<task id>.json",
            highlight=False,
            soft_wrap=True,
        )
        _writable_dir(out, "--out")
        return out, None
    _writable_dir(out.parent, "--out")
    return out.parent, out.name


def _save_trajectory(trajectory: Trajectory, path: Path, fallback_dir: Path) -> Path:
    """Write the trajectory to ``path``; when that fails, to ``fallback_dir`` (run.output_dir), then the temp dir.

    Returns the path written. Raises:
        DataError: no location could be written (each failure named).
    """
    data = trajectory.model_dump(mode="json")
    candidates = [path]
    for directory in (fallback_dir, Path(tempfile.gettempdir()) / "memento-runs"):
        candidate = directory / path.name
        if candidate not in candidates:
            candidates.append(candidate)
    failures: list[str] = []
    for candidate in candidates:
        if failures:
            err_console.print(
                f"memento: cannot write the trajectory to {failures[-1]}; writing to {candidate}",
                highlight=False,
                soft_wrap=True,
            )
        try:
            _write_json(candidate, data)
            return candidate
        except OSError as exc:
            failures.append(f"{candidate} ({type(exc).__name__}: {exc.strerror or exc})")
    raise DataError(f"the trajectory could not be written: {'; '.join(failures)}")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically (temp file + rename), so an interrupted run never leaves a truncated file."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False))


def _task_inputs(task_spec: Task, question: str | None, inputs: list[str], example: Path | None) -> dict[str, Any]:
    """The task's inputs from ``--question``, ``--input name=value`` (repeatable) and ``--example FILE.json``.

    Raises:
        ConfigError: an unknown or missing input field, a malformed ``--input``, or a bad example file (one line).
    """
    from memento.core.paths import read_text

    fields = list(task_spec.input_fields)
    values: dict[str, Any] = {}
    if example is not None:
        try:
            data = json.loads(read_text(example, what="example file", error=ConfigError))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"example file {example} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"example file {example} must hold a JSON object with the fields {fields}")
        values.update({k: v for k, v in data.items() if k in fields})
    for item in inputs:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--input {item!r} is not name=value (the task {task_spec.name!r} takes {fields})")
        if name.strip() not in fields:
            raise ConfigError(f"--input {name.strip()!r} is not an input of task {task_spec.name!r}: it takes {fields}")
        values[name.strip()] = value
    if question is not None:
        if len(fields) != 1 and "question" not in fields:
            raise ConfigError(
                f"task {task_spec.name!r} takes inputs {fields}: pass them with --input name=value or --example FILE"
            )
        values["question" if "question" in fields else fields[0]] = question
    missing = [f for f in fields if values.get(f) is None or (isinstance(values[f], str) and not values[f].strip())]
    if missing:
        how = "--question TEXT" if fields == ["question"] else "--input name=value or --example FILE.json"
        raise ConfigError(f"task {task_spec.name!r} needs {', '.join(missing)}: pass {how}")
    return values


@cli_errors
@cancellable
@with_flags(
    "lm", "preset", "corpus", "threads", "research", "test_exploration", "log_lm", "replay_lm", "cbr", "payload_tokens"
)
def run(
    question: Annotated[
        str | None, typer.Option("--question", "-q", help="The question (tasks with one text input).")
    ] = None,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", "-i", help="A task input as name=value (repeatable), for any task's inputs."),
    ] = None,
    example: Annotated[
        Path | None, typer.Option("--example", help="A JSON file with the task's inputs (e.g. a data row).")
    ] = None,
    task: TaskOpt = "multihop",
    method: Annotated[str, typer.Option("--method", "-m", help=f"One of: {METHODS_HELP}.")] = "aet",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="Trajectory JSON file, or a directory to write it in: an existing one, or a path ending in '/' "
            "(default: run.output_dir).",
        ),
    ] = None,
    trace: Annotated[bool, typer.Option("--trace", help="Print each wave as it happens.")] = False,
    cutoff: Annotated[
        str | None, typer.Option("--cutoff", help="Hide sources published on or after this date (YYYY-MM-DD).")
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option("--memory", help="Memory: a directory or postgresql://user@host:port/db (memory methods)."),
    ] = None,
    no_wait: NoWaitOpt = False,
    as_json: JsonOpt = False,
    *,
    flags: Flags,
) -> None:
    """Answer one question with a research program; print the answer and a compact tree; save the trajectory."""
    import memento
    from memento.core.types import utcnow
    from memento.records.provenance import provenance

    started_at = utcnow().isoformat()
    if question is not None and not question.strip():
        raise ConfigError("--question is empty: give the question to research")
    from memento.core.presets import apply_preset

    settings = apply_preset(flags.settings(), method, task)  # [run] preset: the method's paper setup
    roles = memento.configure(settings)
    observe(settings, roles)  # --log-lm: every LM call of this command, until it exits
    task_spec = resolve_task(task, roles=roles, threads=settings.run.threads)
    task_inputs = _task_inputs(task_spec, question, inputs or [], example)
    out_dir, out_name = _check_out(out, Path(settings.run.output_dir).expanduser())  # before any LM call
    from memento.programs.registry import method_info, require_method_extras

    require_method_extras(method)  # a missing extra is one line before the memory directory is created or locked
    info = method_info(method)
    location = parse_location(memory) if memory is not None else None  # a bad location: one line, before any LM call
    if info is not None and info.writes and no_wait:
        # a run appends cases/trajectories in short transactions (many runs at once); --no-wait still refuses to
        # start while another process holds the memory's writer lock (a training run), naming it
        part = (location or settings.memory.dir) / ("cbr" if method == "cbr" else "jitmem")
        with memory_lock(part, no_wait=True):
            pass
    pred, program = _run_program(method, task_spec, settings, roles, location, task_inputs, cutoff=cutoff, trace=trace)
    trajectory: Trajectory = pred.trajectory
    trajectory.method = trajectory.method or method
    trajectory.provenance = provenance(settings, started_at=started_at)
    question = question if question is not None else json.dumps(task_inputs, ensure_ascii=False, default=str)
    _report_run(pred, trajectory, task_spec, settings, question, out_dir, out_name, as_json=as_json)


def _is_tree(program: Any) -> bool:
    """Whether ``program`` is an Adaptive Exploration Tree (its module is not imported to find out: a closed-book
    run never loads it)."""
    module = sys.modules.get("memento.programs.adaptive_exploration_tree")
    return module is not None and isinstance(program, module.AdaptiveExplorationTree)


def _run_program(
    method: str,
    task_spec: Task,
    settings: Any,
    roles: Any,
    memory: Location | None,
    task_inputs: dict[str, Any],
    *,
    cutoff: str | None,
    trace: bool,
) -> tuple[Any, Any]:
    """Build the method's program and run it once on the task inputs (with the live status line or --trace)."""
    from memento.programs.registry import build_program, method_info, method_names

    program = build_program(method, task=task_spec, settings=settings, roles=roles, memory_dir=memory)
    tree = _is_tree(program)
    info = method_info(method)
    if memory is not None and info is not None and not info.memory:
        memory_methods = ", ".join(m for m in method_names() if (method_info(m) or info).memory)
        variant = f" (--method {method}_memory reads it)" if method_info(f"{method}_memory") is not None else ""
        err_console.print(
            f"memento: warning: method {method} reads no memory; --memory is ignored{variant} "
            f"(memory methods: {memory_methods})",
            highlight=False,
        )
    if trace:
        if tree:
            program.on_event = _trace_printer
        else:
            err_console.print(f"memento: --trace shows waves of the aet; method {method} has none", highlight=False)
    from memento.cli.progress import RunStatus

    status = RunStatus(f"run {method}")  # a live line on stderr: wave, stage, sub-questions, LM calls, elapsed
    if not trace and tree:
        program.on_event = status.on_tree_event
    with status:
        pred = program(**task_inputs, cutoff=cutoff)
        status.finish(pred.trajectory)
    return pred, program


def _report_run(
    pred: Any,
    trajectory: Trajectory,
    task_spec: Task,
    settings: Any,
    question: str,
    out_dir: Path,
    out_name: str | None,
    *,
    as_json: bool,
) -> None:
    """Save the trajectory and print the answer, the tree and the usage (or the JSON summary)."""
    if as_json:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        fallback = Path(settings.run.output_dir).expanduser()
        written = _save_trajectory(
            trajectory, out_dir / (out_name or f"run-{stamp}-{trajectory.task_id}.json"), fallback
        )
        outputs = {name: pred.get(name) for name in task_spec.output_fields}
        print_json(
            {
                "task": task_spec.name,
                "method": trajectory.method,
                "question": question,
                "outputs": outputs,
                "error": trajectory.error,
                "usage": trajectory.usage.model_dump(mode="json"),
                "sub_questions": max(0, len(trajectory.nodes) - 1),
                "seconds": trajectory.timings.get("total_s", 0.0),
                "trajectory": str(written),
                "report": report_hint(written, quiet=True),
            }
        )
        return
    console.print(render_tree_rich(trajectory))
    for name in task_spec.output_fields:
        value = pred.get(name)
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        console.print(f"[bold]{escape(name)}:[/bold] {escape(str(shown))}")
    usage = trajectory.usage
    cached = f" ({usage.cached_prompt_tokens} prompt tokens cached)" if usage.cached_prompt_tokens else ""
    console.print(
        f"[dim]{usage.lm_calls} LM calls, {usage.prompt_tokens + usage.completion_tokens} tokens{cached}, "
        f"{usage.searches} searches, {usage.fetches} fetches, {max(0, len(trajectory.nodes) - 1)} sub-questions, "
        f"{trajectory.timings.get('total_s', 0.0):.1f}s[/dim]"
    )
    if trajectory.error:
        err_console.print(f"memento: warning: the run recorded an error: {trajectory.error}", highlight=False)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = out_name or f"run-{stamp}-{trajectory.task_id}.json"
    written = _save_trajectory(trajectory, out_dir / name, Path(settings.run.output_dir).expanduser())
    console.print(f"trajectory written to {escape(str(written))}", soft_wrap=True)
    report_hint(written)


def register(app: typer.Typer) -> None:
    """Add `run` to the CLI."""
    app.command("run")(run)
