"""What the commands share to let users see a run: ``--log-lm``, ``--json``, ``--mlflow`` and the report hint.

Each command adds the options it takes and calls these helpers, so the per-command edits stay a few lines.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from memento.commands._common import at_command_end, console, err_console

__all__ = ["LogLMOpt", "JsonOpt", "MLflowOpt", "observe", "eval_payload", "print_json", "report_hint", "observe_flags"]

LogLMOpt = Annotated[
    Path | None,
    typer.Option("--log-lm", help="Append one JSON line per LM call (prompt, completion, tokens...) to FILE."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON only on stdout (progress stays on stderr).")
]
MLflowOpt = Annotated[
    str | None,
    typer.Option("--mlflow", help="Track in MLflow at this URI (file:/dir, sqlite:///x.db, http://host:5000)."),
]


def observe_flags(log_lm: Path | None = None, mlflow: str | None = None) -> dict[str, Any]:
    """The ``observe`` settings section given by flags (``None`` values leave lower layers in place)."""
    return {"log_lm": log_lm, "mlflow": mlflow}


def observe(settings: Any, roles: Any) -> Any:
    """Start what ``settings.observe`` asks for the rest of the command: the LM call log (``--log-lm``).

    The log is installed in DSPy's global settings (so every thread and every meter inside sees it) and removed,
    with a one-line summary on stderr, when the command ends (also on an error). Returns the log or ``None``.
    """
    path = settings.observe.log_lm
    if path is None:
        return None
    from memento.errors import ConfigError
    from memento.lm_log import LMCallLog

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
    return log


def eval_payload(path: Path) -> dict[str, Any]:
    """``results.json`` as ``--json`` prints it: without the trajectories, with its path and the report command."""
    payload = json.loads(path.read_text(encoding="utf-8"))
    for row in payload.get("examples", []):
        row.pop("trajectory", None)
    payload["path"] = str(path)
    payload["report"] = report_hint(path.parent, quiet=True)
    return payload


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def report_hint(path: Path, *, quiet: bool = False) -> str:
    """Print (unless ``quiet``) and return the command that writes the HTML report of ``path``."""
    command = f"memento report {shlex.quote(str(path))}"
    if not quiet:
        console.print(f"report: {command}", markup=False, highlight=False, soft_wrap=True)
    return command
