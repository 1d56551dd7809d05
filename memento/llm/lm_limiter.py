"""One LM concurrency limit per role for the whole process: in-flight requests and an optional requests/minute.

``eval --threads 4`` with a method that fans out (AET waves, nested pools) multiplies the requests in flight;
the limiter bounds them where the request is made (:class:`memento.llm.lm.MementoLM`), whichever thread makes it.
Waiting for a slot wakes up on a cancel (Ctrl-C), so a queued call never delays stopping.

Example:
    >>> from memento.llm.lm_limiter import LMLimiter
    >>> limiter = LMLimiter(max_concurrency=2)
    >>> with limiter.slot():
    ...     limiter.in_flight
    1
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from memento.core.cancel import check_cancelled, wait_cancelled

__all__ = ["LMLimiter", "limiter_for", "set_limiter_source", "set_role_limits"]

_POLL_SECONDS = 0.1


class LMLimiter:
    """At most ``max_concurrency`` requests in flight and ``requests_per_minute`` starts per sliding minute.

    Args:
        max_concurrency: requests in flight at once (``None``: unbounded).
        requests_per_minute: request starts in any 60-second window (``None``: unbounded).
    """

    def __init__(self, *, max_concurrency: int | None = None, requests_per_minute: float | None = None) -> None:
        self.max_concurrency = max_concurrency
        self.requests_per_minute = requests_per_minute
        self._cond = threading.Condition()
        self._starts: collections.deque[float] = collections.deque()
        self.in_flight = 0
        self.peak = 0
        self.granted = 0

    def _rate_wait(self, now: float) -> float:
        """Seconds to wait before the next start is allowed by the rate limit (0: now). Caller holds the lock."""
        if not self.requests_per_minute:
            return 0.0
        while self._starts and now - self._starts[0] >= 60.0:
            self._starts.popleft()
        if len(self._starts) < self.requests_per_minute:
            return 0.0
        return 60.0 - (now - self._starts[0])

    def acquire(self, *, timeout: float | None = None) -> bool:
        """Wait for a slot (checking for a cancel while waiting); ``False`` when ``timeout`` seconds passed first."""
        give_up = None if timeout is None else time.monotonic() + timeout
        while True:
            check_cancelled()
            with self._cond:
                full = self.max_concurrency is not None and self.in_flight >= self.max_concurrency
                delay = 0.0 if full else self._rate_wait(time.monotonic())
                if not full and delay <= 0:
                    self.in_flight += 1
                    self.granted += 1
                    self.peak = max(self.peak, self.in_flight)
                    if self.requests_per_minute:
                        self._starts.append(time.monotonic())
                    return True
                left = None if give_up is None else give_up - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if full:
                    self._cond.wait(_POLL_SECONDS if left is None else min(_POLL_SECONDS, left))
                    continue
            wait_cancelled(min(delay, _POLL_SECONDS * 10, *(() if left is None else (left,))))

    def release(self) -> None:
        """Give the slot back."""
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the enclosed request."""
        self.acquire()
        try:
            yield
        finally:
            self.release()


_limiters: dict[str, LMLimiter] = {}
_registry_lock = threading.Lock()
# Where limiters come from instead of this process's registry: the Ray executor's cluster-wide budget
# (memento.execution.lm_budget), so a role's limits hold across every process of a run.
_source: Callable[[str], Any] | None = None


def set_limiter_source(source: Callable[[str], Any] | None) -> None:
    """Take every role's limiter from ``source(role)`` (an object with ``slot()``, or ``None``: unbounded) instead
    of this process's limiters; ``None`` goes back to them."""
    global _source
    _source = source


def set_role_limits(role: str, *, max_concurrency: int | None, requests_per_minute: float | None) -> None:
    """Set the limits of a role (a new limiter when they change; the same one when they do not)."""
    with _registry_lock:
        current = _limiters.get(role)
        if current is not None and (current.max_concurrency, current.requests_per_minute) == (
            max_concurrency,
            requests_per_minute,
        ):
            return
        if max_concurrency is None and requests_per_minute is None:
            _limiters.pop(role, None)
        else:
            _limiters[role] = LMLimiter(max_concurrency=max_concurrency, requests_per_minute=requests_per_minute)


def limiter_for(role: str | None) -> Any:
    """The limiter of a role (an :class:`LMLimiter`, or the cluster's), or ``None`` when the role is unbounded."""
    if role is None:
        return None
    if _source is not None:
        return _source(role)
    with _registry_lock:
        return _limiters.get(role)
