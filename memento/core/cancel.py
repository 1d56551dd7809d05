"""A process-wide cancel flag: SIGINT/SIGTERM ask a run to stop, and loops check the flag between LM calls.

The flag is a ``threading.Event`` shared by every thread of the process. The CLI installs signal handlers
(:func:`handle_signals`) that set it; the example loops, AET waves, ReAct steps and thread pools call
:func:`check_cancelled` between LM calls, which raises :class:`~memento.core.errors.Cancelled`. A second Ctrl-C
while the run is winding down raises ``KeyboardInterrupt`` at once.

LM calls in flight get :func:`cancel_grace` seconds (``run.cancel_grace``) to finish after a cancel, then their
callers stop waiting (:mod:`memento.llm.lm_deadline`). The ``memento`` command also enables an exit backstop
(:func:`enable_exit_backstop`): once a signal asked to stop, the process ends at most ``grace + EXIT_MARGIN``
seconds after a SIGTERM (``grace + INTERRUPT_MARGIN`` after a Ctrl-C) whatever is still blocking, and a second
SIGTERM ends it at once; finished work is already on disk (the evaluation journal, committed memory versions).

Example:
    >>> from memento.core.cancel import cancel_requested, check_cancelled, request_cancel, reset_cancel
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
import os
import signal
import threading
import time
from collections.abc import Iterator

from memento.core.errors import Cancelled

__all__ = [
    "Cancelled",
    "EXIT_MARGIN",
    "INTERRUPT_MARGIN",
    "cancel_age",
    "cancel_exit_code",
    "cancel_grace",
    "cancel_requested",
    "check_cancelled",
    "enable_exit_backstop",
    "handle_signals",
    "request_cancel",
    "reset_cancel",
    "set_cancel_grace",
    "wait_cancelled",
]

#: Seconds the exit backstop adds to the grace period before it ends the process: SIGTERM comes from supervisors
#: that kill for good soon after (``docker stop`` waits 10 s); after Ctrl-C a person can press it again.
EXIT_MARGIN = 5.0
INTERRUPT_MARGIN = 30.0

_flag = threading.Event()
_signum: int | None = None
_cancelled_at: float | None = None
_grace = 3.0
_backstop = {"enabled": False}
_timer: threading.Timer | None = None


def request_cancel(signum: int | None = None) -> None:
    """Ask every loop of this process to stop at its next check (``signum``: the signal that asked, if any)."""
    global _signum, _cancelled_at
    if signum is not None and _signum is None:
        _signum = signum
    if _cancelled_at is None:
        _cancelled_at = time.monotonic()
    _flag.set()


def cancel_age() -> float | None:
    """Seconds since the first cancel request (``None``: no cancel)."""
    at = _cancelled_at
    return None if at is None or not _flag.is_set() else time.monotonic() - at


def set_cancel_grace(seconds: float) -> None:
    """How long LM calls in flight may still finish after a cancel (``run.cancel_grace``)."""
    global _grace
    _grace = max(0.0, float(seconds))


def cancel_grace() -> float:
    """Seconds LM calls in flight may still finish after a cancel before their callers stop waiting."""
    return _grace


def cancel_requested() -> bool:
    """Whether a cancel was requested."""
    return _flag.is_set()


def check_cancelled() -> None:
    """Raise :class:`~memento.core.errors.Cancelled` if a cancel was requested; call it between LM calls."""
    if _flag.is_set():
        raise Cancelled("cancelled" if _signum is None else f"cancelled by {signal.Signals(_signum).name}")


def wait_cancelled(seconds: float) -> bool:
    """Sleep up to ``seconds``, waking early on a cancel; returns whether a cancel was requested."""
    return _flag.wait(seconds)


def reset_cancel() -> None:
    """Clear the flag (a new run in the same process, tests)."""
    global _signum, _cancelled_at, _timer
    _signum = None
    _cancelled_at = None
    if _timer is not None:
        _timer.cancel()
        _timer = None
    _flag.clear()


def cancel_exit_code() -> int:
    """The conventional exit status of a cancelled run: 128 + signal number (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + (_signum if _signum is not None else signal.SIGINT)


def enable_exit_backstop() -> None:
    """Let a signal end this process for sure (the ``memento`` command; never a library caller or a test).

    While :func:`handle_signals` is active, the first SIGINT/SIGTERM starts a timer that ends the process with
    ``128 + signal`` after ``cancel_grace() + EXIT_MARGIN`` seconds (``INTERRUPT_MARGIN`` for SIGINT) if it is
    still running, and a second SIGTERM ends it at once. Before and after that, SIGTERM exits with 143 through
    ``SystemExit`` (``finally`` blocks run).
    """
    _backstop["enabled"] = True
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _early_sigterm)


def _early_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _exit_now(signum: int, why: str) -> None:
    """End the process at once with ``128 + signum`` (the exit backstop), saying why on stderr."""
    name = signal.Signals(signum).name
    with contextlib.suppress(OSError):
        os.write(2, f"memento: cancelled by {name}: {why}; exiting now\n".encode())
    os._exit(128 + signum)


def _start_backstop(signum: int) -> None:
    global _timer
    if not _backstop["enabled"] or _timer is not None:
        return
    delay = _grace + (EXIT_MARGIN if signum == signal.SIGTERM else INTERRUPT_MARGIN)
    _timer = threading.Timer(delay, _exit_now, (signum, f"still running {delay:.0f} s after the signal"))
    _timer.daemon = True
    _timer.start()


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM set the cancel flag instead of killing the process.

    A second SIGINT raises ``KeyboardInterrupt`` immediately; with the exit backstop on
    (:func:`enable_exit_backstop`), a second SIGTERM ends the process at once and the first one ends it after the
    grace period plus :data:`EXIT_MARGIN` at the latest. Outside the main thread this does nothing (Python only
    lets the main thread install handlers). The previous handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum: int, frame: object) -> None:
        if _flag.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if _flag.is_set() and signum == signal.SIGTERM and _backstop["enabled"]:
            _exit_now(signum, "second signal")
        request_cancel(signum)
        _start_backstop(signum)

    previous = {sig: signal.signal(sig, _handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
