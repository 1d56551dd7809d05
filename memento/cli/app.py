"""The ``memento`` command line (typer + rich).

Commands: ``run``, ``train``, ``eval``, ``compare``, ``memory``, ``corpus``, ``data``, ``report``, ``config`` and
``--version``.
Every command takes ``--config``, ``--lm``, ``--api-base`` and ``--judge-lm``. A
:class:`memento.core.errors.MementoError` is printed as one line on stderr with a non-zero exit, never as a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Annotated, Any

import typer
from rich.table import Table

from memento import __version__
from memento.cli.commands._common import cli_errors, console, err_console
from memento.cli.commands._options import Flags, OptionalTaskOpt, with_flags
from memento.cli.terminal import install_log_filters

__all__ = ["app", "main"]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

app = typer.Typer(
    name="memento",
    help="Research agents that learn from the web across sessions, without touching model weights.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        console.print(f"memento {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="More logging (-v info, -vv debug).")] = 0,
) -> None:
    """Research agents that learn from the web across sessions, without touching model weights."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    install_log_filters(level=level)  # no secret, URL password, terminal escape or library DEBUG line
    # DSPy logs through a handler of its own at INFO (GEPA prints ~50 lines per compile): the same verbosity and the
    # same filters as memento's
    dspy_logger = logging.getLogger("dspy")
    dspy_logger.setLevel(level)
    install_log_filters(dspy_logger.handlers, level=level)


config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
@cli_errors
@with_flags("lm", "preset")
def config_show(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the settings as JSON on stdout ({key: {value, source}}).")
    ] = False,
    method: Annotated[
        str | None, typer.Option("--method", "-m", help="The method whose setup to show (with --preset).")
    ] = None,
    task: OptionalTaskOpt = None,
    *,
    flags: Flags,
) -> None:
    """Print the effective settings, secrets masked, with where each value came from, and the undated policy that
    applies (with --task: to that task) and why.

    An LM role's unset field shows what its LM uses (3 retries, the model's own temperature...), marked "built in".
    With ``--preset paper --method M [--task T]``, the values the preset sets for that method are marked ``preset
    paper``.
    """
    import json
    import sys

    from memento.core.config import ROLE_FIELD_DEFAULTS, ROLES
    from memento.core.dating import resolve_undated
    from memento.core.presets import apply_preset, family
    from memento.tasks import get_task

    settings = flags.settings()
    notes: list[str] = []
    if method is not None:
        settings = apply_preset(settings, method, task)
        if settings.run.preset != "none" and family(method) is None:
            notes.append(f"preset {settings.run.preset} sets nothing for method {method}")
    elif settings.run.preset != "none":
        notes.append(f"preset {settings.run.preset}: give --method (and --task) to see what it sets")
    for note in notes:
        (err_console if as_json else console).print(f"[dim]{note}[/dim]")
    choice = resolve_undated(settings.web.undated, get_task(task) if task else None)
    rows: list[dict[str, Any]] = []
    for key, value, source in settings.effective():
        section, _, field = key.partition(".")
        plain = value if value is None or isinstance(value, bool | int | float | str) else str(value)
        row: dict[str, Any] = {"key": key, "value": plain, "source": source}
        if value is None and section in ROLES and field in ROLE_FIELD_DEFAULTS:
            row["effective"] = ROLE_FIELD_DEFAULTS[field]  # what the role's LM uses when the field is unset
        if key == "web.undated":  # the one undated policy: the setting, else the task's declared default, else keep
            row["effective"], row["reason"] = choice.policy, choice.reason
        rows.append(row)
    if as_json:
        data = {row.pop("key"): row for row in rows}
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    table = Table(title="memento settings", show_lines=False)
    table.add_column("setting")
    table.add_column("value")
    table.add_column("source")
    for row in rows:
        if "reason" in row:
            value, source = row["effective"], f"{row['source']}: {row['reason']}"
        elif "effective" in row:
            value, source = row["effective"], f"{row['source']}, built in"
        else:
            value, source = row["value"], row["source"]
        table.add_row(row["key"], "" if value is None else str(value), source)
    console.print(table)
    where = f" ({settings.source_of('web.undated')})" if settings.web.undated is not None else ""
    console.print(
        f"undated policy: {choice.policy} — {choice.reason}{where}; it applies to undated pages, search results and "
        f"memory items under a cutoff. Memory date filter: {'on' if settings.memory.cutoff_filter else 'OFF'} "
        "(memory.cutoff_filter).",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _register_commands() -> None:
    from memento.cli.commands import compare, corpus, data, eval, memory, optimize_curator, report, run, train

    for module in (run, train, eval, compare, optimize_curator, memory, corpus, data, report):
        module.register(app)


_register_commands()


def hoist_verbose(argv: list[str]) -> list[str]:
    """Move ``-v``/``-vv``/``--verbose`` given after the subcommand to the front, where the root option is read.

    ``memento eval ... -v`` then logs like ``memento -v eval ...``; arguments after ``--`` are left alone.
    """
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [a for a in argv[:end] if a == "--verbose" or (a.startswith("-v") and set(a[1:]) == {"v"})]
    rest = [a for a in argv[:end] if a not in flags]
    return [*flags, *rest, *argv[end:]]


def main() -> None:
    """Console-script entry point.

    SIGTERM ends the command with exit status 143 in every phase; during a long command it first asks the run to
    stop (finished work is kept), and the process ends within seconds whatever is still running
    (:func:`memento.core.cancel.enable_exit_backstop`).
    """
    import sys

    from memento.core.cancel import cancel_requested, enable_exit_backstop

    enable_exit_backstop()
    try:
        app(args=hoist_verbose(sys.argv[1:]), prog_name="memento")
    except SystemExit as exc:
        if exc.code in (130, 143) and cancel_requested():
            # cancelled: what finished is on disk and the command's closers ran; skip the interpreter's teardown
            # (seconds for torch, DSPy and the threads of abandoned LM calls) so the process ends now
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(int(exc.code))
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
