"""Shared CLI pieces: consoles, the common options, settings from flags, error handling."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from memento import __version__
from memento.cli.terminal import SafeConsole
from memento.core.cancel import cancel_exit_code, handle_signals
from memento.core.errors import Cancelled, MementoError, NotAvailableYetError

__all__ = [
    "console",
    "err_console",
    "cli_errors",
    "cancellable",
    "METHODS_HELP",
    "memory_lock",
    "not_available",
    "at_command_end",
    "command_exit_code",
]

logger = logging.getLogger(__name__)

console = SafeConsole()  # secrets scrubbed, control characters neutralised
err_console = SafeConsole(stderr=True, soft_wrap=True)  # an error stays one line at any terminal width
logger = logging.getLogger(__name__)

#: The built-in methods, for ``--method`` help (tests/core/test_cli.py checks it lists every registered method).
METHODS_HELP = (
    "aet, react, react_rewrite, react_rerank, react_rewrite_rerank, closed_book, few_shot, memento, react_memory, "
    "closed_book_memory, few_shot_memory, cbr, jitmem, closed_book_cases, few_shot_cases"
)

F = TypeVar("F", bound=Callable[..., Any])


_at_end: list[Callable[[], None]] = []


def at_command_end(fn: Callable[[], None]) -> None:
    """Run ``fn`` when the running command ends, normally or not (closes logs, trackers; latest first)."""
    _at_end.append(fn)


_outcome: dict[str, int | None] = {"exit_code": None}


def command_exit_code() -> int | None:
    """The exit code of the command that is ending (for closers registered with :func:`at_command_end`).

    ``0``: it succeeded; ``130``/``143``: it was cancelled; another code: it failed; ``None``: still running.
    """
    return _outcome["exit_code"]


def _run_at_end() -> None:
    while _at_end:
        try:
            _at_end.pop()()
        except Exception:  # a closer must not hide the command's own outcome
            logger.exception("cleanup at the end of the command failed")


def cli_errors(fn: F) -> F:
    """Turn memento errors and fatal LM errors into one line on stderr and exit code 1 (2: not available).

    A cancelled run (:class:`~memento.core.errors.Cancelled`) prints its one line and exits 130 (SIGINT) or 143
    (SIGTERM).
    """

    def guarded(*args: Any, **kwargs: Any) -> Any:
        from memento.llm.lm_errors import explain_lm_error

        try:
            return fn(*args, **kwargs)
        except Cancelled as exc:
            err_console.print(f"memento: {exc}", markup=False, highlight=False)
            raise typer.Exit(cancel_exit_code()) from None
        except KeyboardInterrupt:  # a second Ctrl-C while a cancelled run was winding down
            err_console.print("memento: interrupted", markup=False, highlight=False)
            raise typer.Exit(130) from None
        except NotAvailableYetError as exc:
            err_console.print(f"memento: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None
        except MementoError as exc:
            err_console.print(f"memento: error: {exc}", markup=False, highlight=False)
            raise typer.Exit(1) from None
        except Exception as exc:  # an LM failure that escaped a program: one line when we can explain it
            message = explain_lm_error(exc)
            if message is None:
                raise
            err_console.print(f"memento: error: {message}", markup=False, highlight=False)
            raise typer.Exit(1) from None

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _outcome["exit_code"] = None
        try:
            result = guarded(*args, **kwargs)
        except typer.Exit as exc:
            _outcome["exit_code"] = exc.exit_code
            raise
        except BaseException:
            _outcome["exit_code"] = 1
            raise
        else:
            _outcome["exit_code"] = 0
            return result
        finally:
            _run_at_end()  # what the command opened (LM call log, MLflow run) closes even when it fails

    return wrapper  # type: ignore[return-value]


def cancellable(fn: F) -> F:
    """Run a long command with SIGINT/SIGTERM setting the cancel flag (see :mod:`memento.core.cancel`).

    The command's loops stop at their next check; the command writes what finished and raises ``Cancelled``.
    Put it under :func:`cli_errors`: ``@cli_errors`` then ``@cancellable``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from memento.core.cancel import reset_cancel

        reset_cancel()
        with handle_signals():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def memory_lock(directory: Any, *, no_wait: bool = False) -> Any:
    """The writer lock of a memory (a directory's OS lock, or a PostgreSQL advisory lock:
    :func:`memento.memory.backends.writer_lock`) with the CLI's message.

    Waiting prints one line on stderr; with ``no_wait`` a held lock is a one-line error naming the holder.
    """
    from memento.memory.backends import writer_lock

    def _say(message: str) -> None:
        err_console.print(f"memento: {message}", markup=False, highlight=False)

    return writer_lock(directory, wait=not no_wait, on_wait=_say)


def not_available(name: str) -> None:
    """Exit 2 with "not available yet" for a capability that has not landed."""
    raise NotAvailableYetError(f"'{name}' is not available yet in memento {__version__}")
