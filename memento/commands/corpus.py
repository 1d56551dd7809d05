"""The `memento corpus` command."""

from __future__ import annotations

import typer

from memento.commands._common import APIBaseOpt, ConfigOpt, JudgeLMOpt, LMOpt, cli_errors, not_available

__all__ = ["register"]


@cli_errors
def corpus(
    ctx: typer.Context,
    config: ConfigOpt = None,
    lm: LMOpt = None,
    api_base: APIBaseOpt = None,
    judge_lm: JudgeLMOpt = None,
) -> None:
    """Not available yet."""
    not_available("corpus")


def register(app: typer.Typer) -> None:
    """Add `corpus` to the CLI."""
    app.command("corpus", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(corpus)
