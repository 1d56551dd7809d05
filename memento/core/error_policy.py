"""memento's one error policy: which exceptions stop a run and which mark one step failed (:func:`handle_error`).

The hierarchy it applies is :mod:`memento.core.errors`, re-exported here (the errors module's old flat path serves
this module: memento/_moved.py). An exception that is not memento's is judged by what it means for the LM
(:func:`memento.llm.lm_errors.explain_lm_error`): an unreachable server or a refused key stops the run in one line.

Example:
    >>> from memento.core.error_policy import handle_error
    >>> from memento.core.errors import RecoverableError
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

from memento.core.errors import (
    BudgetExceededError,
    Cancelled,
    ConfigError,
    DataError,
    Failure,
    FatalError,
    LMDeadlineExceeded,
    LMNotConfiguredError,
    LMUnavailableError,
    MementoError,
    MemoryFrozenError,
    MemoryLockedError,
    NotAvailableYetError,
    ParseError,
    RecoverableError,
)
from memento.llm.lm_errors import explain_lm_error
from memento.utils.scrub import scrub
from memento.utils.text import one_line

# fmt: off
__all__ = [
    "handle_error", "is_fatal", "MementoError", "FatalError", "RecoverableError", "ConfigError", "DataError",
    "LMNotConfiguredError", "LMUnavailableError", "LMDeadlineExceeded", "MemoryFrozenError", "NotAvailableYetError",
    "BudgetExceededError", "MemoryLockedError", "Cancelled", "ParseError", "Failure",
]
# fmt: on

logger = logging.getLogger(__name__)


def is_fatal(exc: BaseException) -> bool:
    """Whether :func:`handle_error` would stop the run on ``exc``.

    Fatal: a :class:`FatalError` (or a :class:`MementoError` outside both branches), an LM error that means the
    LM cannot be used at all (see :func:`memento.llm.lm_errors.explain_lm_error`), and anything that is not an
    ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, task cancellation). Everything else is recoverable.
    """
    if not isinstance(exc, Exception):
        return True
    if isinstance(exc, RecoverableError):
        return False
    if isinstance(exc, MementoError):
        return True
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
        message = explain_lm_error(exc)
        if message is not None:
            raise LMUnavailableError(message) from exc

    lines = scrub(str(exc)).strip().splitlines()  # no secret or URL password reaches a note, a log or a record
    message = one_line(lines[0], 300) if lines else ""  # the first line: the summary (details follow it)
    failure = Failure(where=where, kind=type(exc).__name__, message=message)
    (log or logger).warning("%s", failure, extra={"memento_failure": failure})
    if record is not None:
        record(str(failure))
    return failure
