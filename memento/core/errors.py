"""The typed error hierarchy of memento and its one error policy.

Every error a user can meet through the CLI or the Python API derives from :class:`MementoError`, whose
``str()`` is one line meant for a human. The hierarchy has two branches:

- :class:`FatalError`: the run cannot go on and the user must act (bad settings, an LM that is unreachable or
  refuses the key, malformed input data, a write to frozen memory). The CLI prints the line and exits non-zero;
  it never shows a traceback for a ``MementoError``.
- :class:`RecoverableError`: one step failed (a page could not be fetched, a search failed, an LM reply or a
  judge's verdict could not be parsed). The step is recorded as failed and the run goes on.

:func:`handle_error` is the one place that decides between the two, for memento's own errors and for anything
else a step can raise (DSPy/litellm LM errors, parse errors, cancellation).

Example:
    >>> from memento.core.errors import handle_error, RecoverableError
    >>> notes = []
    >>> failure = handle_error(RecoverableError("page gone"), where="scrape", record=notes.append)
    >>> notes
    ['scrape failed (RecoverableError: page gone)']
    >>> failure.kind
    'RecoverableError'
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "MementoError",
    "FatalError",
    "RecoverableError",
    "ConfigError",
    "DataError",
    "LMNotConfiguredError",
    "LMUnavailableError",
    "LMDeadlineExceeded",
    "MemoryFrozenError",
    "NotAvailableYetError",
    "BudgetExceededError",
    "MemoryLockedError",
    "Cancelled",
    "ParseError",
    "Failure",
    "handle_error",
    "is_fatal",
]

logger = logging.getLogger(__name__)


class MementoError(Exception):
    """Base class of every memento error; the message is one human-readable line."""


class FatalError(MementoError):
    """The run cannot go on: the user must fix something (settings, the LM, the input data)."""


class RecoverableError(MementoError):
    """One step failed; the failure is recorded and the run goes on (fetch, search, parse, judge errors)."""


class ConfigError(FatalError):
    """Invalid settings: a bad TOML file, an unknown key, a value out of range."""


class DataError(FatalError):
    """Malformed input data (a corpus line, a task file row) that cannot be used."""


class LMNotConfiguredError(ConfigError):
    """A command needs an LM and none is configured."""

    def __init__(self, role: str = "lm") -> None:
        flag = "--lm" if role == "lm" else f"--{role.replace('_', '-')}"
        env = "MEMENTO_" + role.upper()
        super().__init__(
            f"no language model configured for role '{role}': pass {flag} MODEL or set {env} "
            "(e.g. --lm openai/gpt-4o-mini, or --lm openai/NAME --api-base http://localhost:8000/v1)"
        )
        self.role = role


class LMUnavailableError(FatalError):
    """The LM could not be used: server unreachable, key refused, model unknown."""


class LMDeadlineExceeded(LMUnavailableError):
    """An LM call did not end within its role's deadline (retries included): the provider is not answering."""


class MemoryFrozenError(FatalError):
    """A write was attempted on a frozen (read-only) memory."""


class NotAvailableYetError(FatalError):
    """A capability that has not landed yet."""


class BudgetExceededError(FatalError):
    """A hard budget (questions, steps, searches) would be exceeded."""


class MemoryLockedError(FatalError):
    """Another process holds the memory directory's write lock (and the caller asked not to wait)."""


class Cancelled(BaseException):
    """The run was cancelled (SIGINT/SIGTERM or :func:`memento.core.cancel.request_cancel`).

    A ``BaseException`` like ``KeyboardInterrupt``, so the ``except Exception`` handlers that record a failed
    example and go on let it through: a cancelled run stops instead of recording every queued example as failed.
    """


class ParseError(RecoverableError):
    """An LM reply (or a tool's answer) that cannot be parsed into the fields a step needs."""


@dataclass(frozen=True)
class Failure:
    """A recoverable failure as recorded: where it happened, the exception's class and its message's first line.

    ``str(failure)`` is the one line written to notes and logs: ``"scrape failed (FetchFailed: 404)"``.
    """

    where: str
    kind: str
    message: str

    @property
    def reason(self) -> str:
        """``"Kind: message"`` (``"Kind"`` when the exception had no message)."""
        return f"{self.kind}: {self.message}" if self.message else self.kind

    def __str__(self) -> str:
        return f"{self.where} failed ({self.reason})"


def is_fatal(exc: BaseException) -> bool:
    """Whether :func:`handle_error` would stop the run on ``exc``.

    Fatal: a :class:`FatalError` (or a :class:`MementoError` outside both branches), an LM error that means the
    LM cannot be used at all (see :func:`memento.llm.lm.explain_lm_error`), and anything that is not an
    ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, task cancellation). Everything else is recoverable.
    """
    if not isinstance(exc, Exception):
        return True
    if isinstance(exc, RecoverableError):
        return False
    if isinstance(exc, MementoError):
        return True
    from memento.llm.lm import explain_lm_error

    return explain_lm_error(exc) is not None


def handle_error(
    exc: BaseException,
    *,
    where: str,
    record: Callable[[str], object] | None = None,
    log: logging.Logger | None = None,
) -> Failure:
    """Apply memento's one error policy to an exception caught while doing ``where``.

    Every step that may fail without losing the run catches ``Exception`` and calls this helper:

    - a fatal error is raised again: a :class:`FatalError` as it is, a fatal LM error (unreachable server,
      refused key, unknown model) as :class:`LMUnavailableError` with one explaining line, ``KeyboardInterrupt``
      and cancellation unchanged;
    - anything else is recoverable: it is logged as a warning (the record carries it as ``memento_failure``),
      ``record(str(failure))`` is called (e.g. a
      trajectory's ``note``) and the :class:`Failure` (its message scrubbed of secrets and URL passwords, one
      line) is returned so the caller can mark the step failed and go on.

    Args:
        exc: the exception caught.
        where: what was being done, in a few words (``"decompose"``, ``"scrape of https://x.org"``).
        record: called with the failure's one line (``"decompose failed (ValueError: ...)"``).
        log: the caller's logger (default: this module's).

    Raises:
        FatalError: ``exc`` itself, or :class:`LMUnavailableError` from it.
        BaseException: ``exc`` itself when it is not an ``Exception``.

    Example:
        >>> handle_error(LMUnavailableError("LM server unreachable"), where="solve")
        Traceback (most recent call last):
        ...
        memento.core.errors.LMUnavailableError: LM server unreachable
    """
    if not isinstance(exc, Exception):
        raise exc
    if isinstance(exc, MementoError) and not isinstance(exc, RecoverableError):
        raise exc
    if not isinstance(exc, MementoError):
        from memento.llm.lm import explain_lm_error

        message = explain_lm_error(exc)
        if message is not None:
            raise LMUnavailableError(message) from exc
    from memento.utils.scrub import scrub
    from memento.utils.text import one_line

    lines = scrub(str(exc)).strip().splitlines()  # no secret or URL password reaches a note, a log or a record
    message = one_line(lines[0], 300) if lines else ""  # the first line: the summary (details follow it)
    failure = Failure(where=where, kind=type(exc).__name__, message=message)
    (log or logger).warning("%s", failure, extra={"memento_failure": failure})
    if record is not None:
        record(str(failure))
    return failure
