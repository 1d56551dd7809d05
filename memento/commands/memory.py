"""The `memento memory` command."""

from __future__ import annotations

import typer

from memento.commands._common import APIBaseOpt, ConfigOpt, JudgeLMOpt, LMOpt, cli_errors, not_available

__all__ = ["register"]


@cli_errors
def memory(
    ctx: typer.Context,
    config: ConfigOpt = None,
    lm: LMOpt = None,
    api_base: APIBaseOpt = None,
    judge_lm: JudgeLMOpt = None,
) -> None:
    """Not available yet."""
    not_available("memory")


def register(app: typer.Typer) -> None:
    """Add `memory` to the CLI."""
    app.command("memory", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(memory)
