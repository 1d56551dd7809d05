"""Tell an LM that fails from a run that answers wrongly: count failed LM calls and the current failure streak.

Training must not commit a batch whose runs failed because the LM did (HTTP errors after retries), and must
stop after ``trainer.max_consecutive_lm_failures`` LM calls failed in a row. :class:`LMFailureWatch` is a DSPy
callback: installed with ``dspy.context`` it sees every LM call of the enclosed block, in every worker thread.

Example:
    >>> from memento.llm.lm_failures import LMFailureWatch
    >>> watch = LMFailureWatch(max_consecutive=3)
    >>> with watch:  # doctest: +SKIP
    ...     program(question="...")
    >>> watch.failed, watch.streak, watch.tripped  # doctest: +SKIP
    (0, 0, False)
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from dspy.utils.callback import BaseCallback

__all__ = ["LMFailureWatch"]


class LMFailureWatch(BaseCallback):
    """Counts LM calls that raised (``failed``), those that returned (``ok``) and the current streak of failures.

    Args:
        max_consecutive: ``tripped`` becomes true once this many calls failed in a row.
    """

    def __init__(self, *, max_consecutive: int = 3) -> None:
        self.max_consecutive = max_consecutive
        self.failed = 0
        self.ok = 0
        self.streak = 0
        self.tripped = False
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._ctx: contextlib.ExitStack | None = None

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        text = str(exception).splitlines()[0] if str(exception) else ""
        self._end(None if exception is None else f"{type(exception).__name__}: {text}")

    def _end(self, error: str | None) -> None:
        with self._lock:
            if error is None:
                self.ok += 1
                self.streak = 0
                return
            self.failed += 1
            self.streak += 1
            self.last_error = error[:200]
            if self.streak >= self.max_consecutive:
                self.tripped = True

    def absorb_remote(self, outcome: Any) -> None:
        """Count the LM calls another process of the run made (a Ray worker's task), in the order they ended."""
        for error in outcome.call_errors:
            self._end(error)

    def __enter__(self) -> LMFailureWatch:
        import dspy

        self._ctx = contextlib.ExitStack()
        self._ctx.enter_context(dspy.context(callbacks=[*dspy.settings.get("callbacks", []), self]))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._ctx is not None
        self._ctx.close()
        self._ctx = None
