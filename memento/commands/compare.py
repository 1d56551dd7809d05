"""The `memento compare` command."""

from __future__ import annotations

import typer

from memento.commands._common import APIBaseOpt, ConfigOpt, JudgeLMOpt, LMOpt, cli_errors, not_available

__all__ = ["register"]


@cli_errors
def compare(
    ctx: typer.Context,
    config: ConfigOpt = None,
    lm: LMOpt = None,
    api_base: APIBaseOpt = None,
    judge_lm: JudgeLMOpt = None,
) -> None:
    """Not available yet."""
    not_available("compare")


def register(app: typer.Typer) -> None:
    """Add `compare` to the CLI."""
    app.command("compare", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(compare)
