"""Every LM call ends by its deadline, and a cancel stops the wait for calls in flight after a grace period.

A role's ``deadline`` (seconds, ``[lm] deadline``, default :data:`DEFAULT_DEADLINE`) bounds one LM call from its
first request to its last retry. :func:`call_with_deadline` runs the call in a daemon worker thread and waits for
it in the caller's thread; the wait ends when the call returns, when the deadline passes
(:class:`~memento.core.errors.LMDeadlineExceeded`, fatal: a provider that does not answer in that time stops the run in
one line) or :func:`memento.core.cancel.cancel_grace` seconds after a cancel (:class:`~memento.core.errors.Cancelled`).
An abandoned call's thread is left to its engine (its socket times out on its own) and never keeps the process alive.

Retries happen inside DSPy; :func:`wait_before_retry` (called from the retry hook of :mod:`memento.records.lm_log`)
waits out DSPy's back-off itself so that a cancel during the wait sends no further request, and refuses a retry that
would start after the deadline.

Engines that run in this process (a local model) call :func:`check_deadline` between steps (tokens): inside an LM
call it raises once the call's deadline has passed or a cancel's grace period is over, so the engine stops working
for a caller that no longer waits. :func:`call_deadline` gives the deadline itself (``time.monotonic()`` seconds).

Example:
    >>> from memento.llm.lm_deadline import call_with_deadline, call_deadline
    >>> call_with_deadline(lambda: call_deadline() is not None, seconds=5.0, what="a test call")
    True
    >>> call_deadline() is None  # outside an LM call
    True
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from memento.core.cancel import cancel_age, cancel_grace, cancel_requested, check_cancelled, wait_cancelled
from memento.core.errors import Cancelled, LMDeadlineExceeded

__all__ = [
    "DEFAULT_DEADLINE",
    "call_deadline",
    "calling_thread",
    "call_with_deadline",
    "check_deadline",
    "in_flight",
    "wait_before_retry",
]

R = TypeVar("R")

#: Seconds one LM call may take, retries included, when its role sets no ``deadline``.
DEFAULT_DEADLINE = 600.0
_POLL_SECONDS = 0.1

_deadline: contextvars.ContextVar[tuple[float, float, str, int] | None] = contextvars.ContextVar(
    "memento_lm_deadline", default=None
)  # (monotonic end, seconds, what, the caller's thread ident) of the LM call this context runs
_in_flight = {"calls": 0}
_count_lock = threading.Lock()


def call_deadline() -> float | None:
    """The ``time.monotonic()`` time by which the LM call running in this context must end (``None``: no call)."""
    current = _deadline.get()
    return None if current is None else current[0]


def calling_thread() -> int:
    """The thread an LM call was made from: in the worker of :func:`call_with_deadline`, the caller's; elsewhere this
    thread's. DSPy callbacks run in the worker and the adapter's parse in the caller: a callback that pairs a reply
    with its parse keys it by this (:class:`memento.records.lm_log.LMCallLog`)."""
    current = _deadline.get()
    return threading.get_ident() if current is None else current[3]


def in_flight() -> int:
    """LM calls running now in worker threads (abandoned ones included until they end)."""
    return _in_flight["calls"]


def _grace_over() -> bool:
    age = cancel_age()
    return age is not None and age >= cancel_grace()


def _cancelled(what: str) -> Cancelled:
    try:
        check_cancelled()
    except Cancelled as exc:
        return Cancelled(f"{exc} (stopped waiting for {what} after the {cancel_grace():g} s grace period)")
    return Cancelled(f"cancelled (stopped waiting for {what})")


def _expired(what: str, seconds: float, *, retry: bool = False) -> LMDeadlineExceeded:
    when = "a retry would start after" if retry else "no answer within"
    return LMDeadlineExceeded(
        f"{what}: {when} its deadline of {seconds:g} s (retries included); the provider is not answering: check "
        "the server, or raise the role's deadline ([lm] deadline, MEMENTO_LM_DEADLINE)"
    )


def check_deadline() -> None:
    """Raise if the LM call running in this context should stop: its deadline passed, or a cancel's grace is over.

    For engines that work in this process (a local model): call it between tokens. Outside an LM call it only
    checks for a cancel.

    Raises:
        LMDeadlineExceeded: the call's deadline has passed.
        Cancelled: a cancel was requested and its grace period is over (or there is no call and a cancel was
            requested).
    """
    current = _deadline.get()
    if current is None:
        check_cancelled()
        return
    end, seconds, what, _ = current
    if cancel_requested() and _grace_over():
        raise _cancelled(what)
    if time.monotonic() >= end:
        raise _expired(what, seconds)


def wait_before_retry(seconds: float) -> float:
    """Wait out a retry's back-off here; returns the seconds still to sleep (0).

    Raises:
        Cancelled: a cancel came before or during the wait: no further request is sent.
        LMDeadlineExceeded: the retry would start after the call's deadline.
    """
    check_cancelled()
    current = _deadline.get()
    if current is not None and time.monotonic() + seconds >= current[0]:
        raise _expired(current[2], current[1], retry=True)
    if seconds > 0 and wait_cancelled(seconds):
        check_cancelled()
    return 0.0


def _own_stop(error: BaseException) -> BaseException | None:
    """The deadline or cancel this module raised inside the call (an in-process engine's :func:`check_deadline`),
    when the client wrapped it (DSPy turns an engine's exception into ``LMUnexpectedError``): it is what ended the
    call, and callers treat it as fatal / as a cancel."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, LMDeadlineExceeded | Cancelled):
            return None if current is error else current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def call_with_deadline(fn: Callable[[], R], *, seconds: float | None, what: str) -> R:
    """Run ``fn()`` (one LM call with its retries) and return its result, waiting at most ``seconds``.

    ``fn`` runs in a daemon thread, in a copy of the caller's ``contextvars`` context (DSPy settings, callbacks,
    usage meters reach it), with :func:`call_deadline` set.

    Args:
        fn: the call.
        seconds: the deadline (``None``: :data:`DEFAULT_DEADLINE`).
        what: the call in a few words, for the error (``"openai/x at http://... (role lm)"``).

    Raises:
        LMDeadlineExceeded: ``fn`` did not return within ``seconds``.
        Cancelled: a cancel was requested and ``fn`` did not return within the grace period.
        BaseException: whatever ``fn`` raised.
    """
    seconds = DEFAULT_DEADLINE if seconds is None else float(seconds)
    check_cancelled()
    end = time.monotonic() + seconds
    context = contextvars.copy_context()
    context.run(_deadline.set, (end, seconds, what, threading.get_ident()))
    outcome: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        with _count_lock:
            _in_flight["calls"] += 1
        try:
            outcome["value"] = context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome["error"] = exc
        finally:
            with _count_lock:
                _in_flight["calls"] -= 1
            done.set()

    threading.Thread(target=work, name="memento-lm-call", daemon=True).start()
    while not done.wait(min(_POLL_SECONDS, max(0.0, end - time.monotonic()))):
        if cancel_requested() and _grace_over():
            raise _cancelled(what)
        if time.monotonic() >= end:
            raise _expired(what, seconds)
    if "error" in outcome:
        error = outcome["error"]
        assert isinstance(error, BaseException)  # stored by the worker
        raise _own_stop(error) or error
    return outcome["value"]  # type: ignore[return-value]  # set by the worker when no error was stored
