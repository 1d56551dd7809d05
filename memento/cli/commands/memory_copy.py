"""``memento memory copy SRC DST``: move a memory between a directory and PostgreSQL (either way), losslessly.

Registered by :mod:`memento.cli.commands.memory`. Both locations go through the one location parser
(:func:`memento.memory.location.parse_location`); the copy itself is :func:`memento.memory.memory_copy.copy_memory`
(every version, the change log, cases with embeddings and gate pairs, the Q-gate, trajectories and pages; verified
table by table). The destination must hold no memory yet.

Example:
    memento memory copy runs/mem postgresql://alice@db.internal/team
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from memento.cli.commands._common import cli_errors, console

__all__ = ["memory_copy"]


@cli_errors
def memory_copy(
    source: Annotated[str, typer.Argument(help="The memory to copy: a directory or postgresql://user@host/db.")],
    destination: Annotated[str, typer.Argument(help="Where to copy it (empty): a directory or postgresql://...")],
) -> None:
    """Copy a memory (all its versions, change log, case bank, gate pairs, Q-gate, trajectories and pages)."""
    from memento.memory.location import parse_location
    from memento.memory.memory_copy import copy_memory

    src, dst = parse_location(source), parse_location(destination)  # a bad location: one line, nothing created
    report = copy_memory(src, dst)
    for part in report.parts:
        rows = ", ".join(f"{table} {count}" for table, count in part.rows.items())
        gate = " + Q-gate" if part.gate else ""
        console.print(f"{part.part}: {escape(rows)}{gate}", highlight=False, soft_wrap=True)
    console.print(f"copied {escape(str(src))} -> {escape(str(dst))} (every table verified identical)", soft_wrap=True)
