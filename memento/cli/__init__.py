"""memento.cli: the ``memento`` command line (typer + rich).

:mod:`memento.cli.app` is the typer app and its entry point (``memento = "memento.cli:main"``); each command is a
module of :mod:`memento.cli.commands`, the flags they share are :mod:`memento.cli.flags`; what reaches the terminal
goes through :mod:`memento.cli.terminal` (scrubbed lines), :mod:`memento.cli.terminal_table` and
:mod:`memento.cli.progress`. The app is imported on first use: importing a module of the package does not build it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.cli.app import app, hoist_verbose, main

_HOMES: dict[str, str] = {"app": "app", "hoist_verbose": "app", "main": "app"}

__all__ = ["app", "hoist_verbose", "main"]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
