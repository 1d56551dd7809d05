"""The typed error hierarchy of memento.

Every error a user can meet through the CLI or the Python API derives from :class:`MementoError`, whose
``str()`` is one line meant for a human. The CLI prints that line and exits non-zero; it never shows a
traceback for a ``MementoError``.
"""

from __future__ import annotations

__all__ = [
    "MementoError",
    "ConfigError",
    "DataError",
    "LMNotConfiguredError",
    "LMUnavailableError",
    "MemoryFrozenError",
    "NotAvailableYetError",
    "BudgetExceededError",
    "MemoryLockedError",
    "Cancelled",
]


class MementoError(Exception):
    """Base class of every memento error; the message is one human-readable line."""


class ConfigError(MementoError):
    """Invalid settings: a bad TOML file, an unknown key, a value out of range."""


class DataError(MementoError):
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


class LMUnavailableError(MementoError):
    """The LM could not be used: server unreachable, key refused, model unknown."""


class MemoryFrozenError(MementoError):
    """A write was attempted on a frozen (read-only) memory."""


class NotAvailableYetError(MementoError):
    """A capability that has not landed yet."""


class BudgetExceededError(MementoError):
    """A hard budget (questions, steps, searches) would be exceeded."""


class MemoryLockedError(MementoError):
    """Another process holds the memory directory's write lock (and the caller asked not to wait)."""


class Cancelled(BaseException):
    """The run was cancelled (SIGINT/SIGTERM or :func:`memento.cancel.request_cancel`).

    A ``BaseException`` like ``KeyboardInterrupt``, so the ``except Exception`` handlers that record a failed
    example and go on let it through: a cancelled run stops instead of recording every queued example as failed.
    """
