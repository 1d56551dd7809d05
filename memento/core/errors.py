"""The typed error hierarchy of memento. It imports nothing of memento: every layer imports it.

Every error a user can meet through the CLI or the Python API derives from :class:`MementoError`, whose
``str()`` is one line meant for a human. The hierarchy has two branches:

- :class:`FatalError`: the run cannot go on and the user must act (bad settings, an LM that is unreachable or
  refuses the key, malformed input data, a write to frozen memory). The CLI prints the line and exits non-zero;
  it never shows a traceback for a ``MementoError``.
- :class:`RecoverableError`: one step failed (a page could not be fetched, a search failed, an LM reply or a
  judge's verdict could not be parsed). The step is recorded as failed and the run goes on.

:func:`memento.core.error_policy.handle_error` is the one place that decides between the two, for memento's own
errors and for anything else a step can raise (DSPy/litellm LM errors, parse errors, cancellation).

Example:
    >>> from memento.core.errors import ConfigError, FatalError
    >>> isinstance(ConfigError("no model"), FatalError)
    True
"""

from __future__ import annotations

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
]


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
