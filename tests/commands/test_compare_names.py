"""`memento compare` prints method names literally: ``gepa:closed_book:`` is not an emoji code, brackets not markup."""

from __future__ import annotations

import io

from rich.console import Console

import memento.cli.commands.compare as compare_command


def test_progress_lines_are_printed_literally(monkeypatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(compare_command, "err_console", Console(file=buffer, width=200, color_system=None))
    compare_command._progress("gepa:closed_book: training")
    compare_command._progress("bootstrap:react: done ([red] in an error [/red] :smile:)")
    assert buffer.getvalue().splitlines() == [
        "compare gepa:closed_book: training",
        "compare bootstrap:react: done ([red] in an error [/red] :smile:)",
    ]
