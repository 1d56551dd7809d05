"""What the commands share to let users see a run: ``--json``, the report hint, and starting what ``--log-lm``,
``--replay-lm`` and ``--mlflow`` (the ``[observe]`` settings flags of :mod:`memento.cli.commands._options`) ask for.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from memento.cli.commands._common import at_command_end, console, err_console

__all__ = [
    "JsonOpt",
    "Observation",
    "observe",
    "eval_payload",
    "print_json",
    "report_hint",
]

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON only on stdout (progress stays on stderr).")
]


class Observation:
    """What :func:`observe` started for a command: the LM call log and the MLflow tracker (each ``None`` when off)."""

    def __init__(self, log: Any = None, tracker: Any = None) -> None:
        self.log = log
        self.tracker = tracker

    def compare_tracking(self, name: str, settings: Any) -> Any:
        """A :class:`memento.records.tracking.CompareTracking` (parent run open until the command ends), or ``None``."""
        if self.tracker is None:
            return None
        from memento.records.tracking import CompareTracking

        tracking = CompareTracking(self.tracker, settings=settings, name=name).__enter__()
        at_command_end(lambda: tracking.__exit__(None, None, None))
        return tracking


def observe(settings: Any, roles: Any, *, run_name: str | None = None) -> Observation:
    """Start what ``settings.observe`` asks for the rest of the command: the LM call log (``--log-lm``) and MLflow
    tracking (``--mlflow``; with ``run_name`` an MLflow run is opened now, so DSPy traces land in it).

    The log is installed in DSPy's global settings (so every thread and every meter inside sees it); the log and
    the run are closed, with a one-line summary on stderr, when the command ends (also on an error).
    """
    seen = Observation()
    _announce_replay(settings, roles)
    path = settings.observe.log_lm
    if path is not None:
        from memento.core.errors import ConfigError
        from memento.records.lm_log import LMCallLog

        try:
            log = LMCallLog(path, roles=roles)
        except OSError as exc:
            raise ConfigError(f"--log-lm: cannot open {path}: {exc.strerror or exc}") from None
        log.install()

        def finish() -> None:
            log.uninstall()
            log.close()
            err_console.print(f"memento: {log.lines} LM calls logged to {path}", markup=False, highlight=False)

        at_command_end(finish)
        seen.log = log
    if settings.observe.mlflow:
        from memento.records.tracking import MLflowTracker

        tracker = MLflowTracker(settings.observe.mlflow, experiment=settings.observe.mlflow_experiment)
        seen.tracker = tracker
        if run_name is not None:
            run = tracker.run(run_name, settings=settings)
            active = run.__enter__()

            def end_run() -> None:
                from memento.cli.commands._common import command_exit_code

                code = command_exit_code()
                if code not in (0, None):  # a failed or cancelled command is not a FINISHED run
                    tracker.mlflow.end_run(status="KILLED" if code in (130, 143) else "FAILED")
                run.__exit__(None, None, None)
                tracker.close()
                err_console.print(
                    f"memento: MLflow run {active.info.run_id} in {tracker.uri} (experiment {tracker.experiment})",
                    markup=False,
                    highlight=False,
                )

            at_command_end(end_run)
    return seen


def _announce_replay(settings: Any, roles: Any) -> None:
    """Under ``--replay-lm``: say where the replies come from now, and at the end how many logged calls were served
    (a replay that served fewer than were logged made fewer calls than the logged run)."""
    book = getattr(getattr(roles, "lm", None), "memento_replay", None)
    if book is None:
        return
    err_console.print(
        f"memento: replaying LM calls from {book.path} ({book.recorded} logged calls; no model is called)",
        markup=False,
        highlight=False,
    )

    def summary() -> None:
        unused = book.unused()
        tail = f"; {unused} logged calls were not asked for" if unused else ""
        err_console.print(
            f"memento: {book.served} LM calls replayed from {book.path}{tail}", markup=False, highlight=False
        )

    at_command_end(summary)


def eval_payload(path: Path) -> dict[str, Any]:
    """``results.json`` as ``--json`` prints it: without the trajectories, with its path and the report command."""
    payload: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for row in payload.get("examples", []):
        row.pop("trajectory", None)
    payload["path"] = str(path)
    payload["report"] = report_hint(path.parent, quiet=True)
    return payload


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def report_hint(path: Path | str | Any, *, quiet: bool = False) -> str:
    """Print (unless ``quiet``) and return the command that writes the HTML report of ``path``."""
    command = f"memento report {shlex.quote(str(path))}"
    if not quiet:
        console.print(f"report: {command}", markup=False, highlight=False, soft_wrap=True)
    return command
