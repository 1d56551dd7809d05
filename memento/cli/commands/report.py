"""The ``memento report`` command: one self-contained HTML page for a trajectory, an eval, memory or compare dir.

Example:
    memento report runs/cmp            # writes runs/cmp/report.html (and one page per method's test trajectories)
    memento report run.json            # writes run.html beside it
    memento report runs/mem --diff 1 3
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memento.cli.commands._common import cli_errors, console
from memento.core.errors import ConfigError

__all__ = ["register", "report"]


@cli_errors
def report(
    path: Annotated[
        str,
        typer.Argument(help="A trajectory JSON file, an eval, compare or memory directory, or a postgresql:// memory."),
    ],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The HTML file to write.")] = None,
    diff: Annotated[
        tuple[int, int] | None,
        typer.Option("--diff", help="Memory directories: the two versions to compare (default: the last two)."),
    ] = None,
) -> None:
    """Write one self-contained HTML report (no network needed to open it) and print where it is."""
    from memento.records.html_report import report_kind, write_report

    kind = report_kind(path)
    if diff is not None and kind != "memory":
        raise ConfigError(f"--diff applies to memory directories, not to a {kind} report")
    written = write_report(path, out=out, diff=diff)
    console.print(f"{kind} report: {written}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"open: {written.resolve().as_uri()}", markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `report` to the CLI."""
    app.command("report")(report)
