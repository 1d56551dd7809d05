"""A process-wide cancel flag: SIGINT/SIGTERM ask a run to stop, and loops check the flag between LM calls.

The flag is a ``threading.Event`` shared by every thread of the process. The CLI installs signal handlers
(:func:`handle_signals`) that set it; the example loops, AET waves, ReAct steps and thread pools call
:func:`check_cancelled` between LM calls, which raises :class:`~memento.errors.Cancelled`. A second Ctrl-C
while the run is winding down raises ``KeyboardInterrupt`` at once.

Example:
    >>> from memento.cancel import cancel_requested, check_cancelled, request_cancel, reset_cancel
    >>> cancel_requested()
    False
    >>> request_cancel()
    >>> try:
    ...     check_cancelled()
    ... except BaseException as exc:
    ...     type(exc).__name__
    'Cancelled'
    >>> reset_cancel()
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from memento.errors import Cancelled

__all__ = [
    "Cancelled",
    "cancel_exit_code",
    "cancel_requested",
    "check_cancelled",
    "handle_signals",
    "request_cancel",
    "reset_cancel",
    "wait_cancelled",
]

_flag = threading.Event()
_signum: int | None = None


def request_cancel(signum: int | None = None) -> None:
    """Ask every loop of this process to stop at its next check (``signum``: the signal that asked, if any)."""
    global _signum
    if signum is not None and _signum is None:
        _signum = signum
    _flag.set()


def cancel_requested() -> bool:
    """Whether a cancel was requested."""
    return _flag.is_set()


def check_cancelled() -> None:
    """Raise :class:`~memento.errors.Cancelled` if a cancel was requested; call it between LM calls."""
    if _flag.is_set():
        raise Cancelled("cancelled" if _signum is None else f"cancelled by {signal.Signals(_signum).name}")


def wait_cancelled(seconds: float) -> bool:
    """Sleep up to ``seconds``, waking early on a cancel; returns whether a cancel was requested."""
    return _flag.wait(seconds)


def reset_cancel() -> None:
    """Clear the flag (a new run in the same process, tests)."""
    global _signum
    _signum = None
    _flag.clear()


def cancel_exit_code() -> int:
    """The conventional exit status of a cancelled run: 128 + signal number (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + (_signum if _signum is not None else signal.SIGINT)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM set the cancel flag instead of killing the process.

    A second SIGINT raises ``KeyboardInterrupt`` immediately. Outside the main thread this does nothing
    (Python only lets the main thread install handlers). The previous handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum: int, frame: object) -> None:
        if _flag.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        request_cancel(signum)

    previous = {sig: signal.signal(sig, _handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
