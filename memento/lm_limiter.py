"""One LM concurrency limit per role for the whole process: in-flight requests and an optional requests/minute.

``eval --threads 4`` with a method that fans out (AET waves, nested pools) multiplies the requests in flight;
the limiter bounds them where the request is made (:class:`memento.lm.MementoLM`), whichever thread makes it.
Waiting for a slot wakes up on a cancel (Ctrl-C), so a queued call never delays stopping.

Example:
    >>> from memento.lm_limiter import LMLimiter
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
from collections.abc import Iterator

from memento.cancel import check_cancelled, wait_cancelled

__all__ = ["LMLimiter", "limiter_for", "set_role_limits"]

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

    def _rate_wait(self, now: float) -> float:
        """Seconds to wait before the next start is allowed by the rate limit (0: now). Caller holds the lock."""
        if not self.requests_per_minute:
            return 0.0
        while self._starts and now - self._starts[0] >= 60.0:
            self._starts.popleft()
        if len(self._starts) < self.requests_per_minute:
            return 0.0
        return 60.0 - (now - self._starts[0])

    def acquire(self) -> None:
        """Wait for a slot (checking for a cancel while waiting)."""
        while True:
            check_cancelled()
            with self._cond:
                full = self.max_concurrency is not None and self.in_flight >= self.max_concurrency
                delay = 0.0 if full else self._rate_wait(time.monotonic())
                if not full and delay <= 0:
                    self.in_flight += 1
                    self.peak = max(self.peak, self.in_flight)
                    if self.requests_per_minute:
                        self._starts.append(time.monotonic())
                    return
                if full:
                    self._cond.wait(_POLL_SECONDS)
                    continue
            wait_cancelled(min(delay, _POLL_SECONDS * 10))

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


def limiter_for(role: str | None) -> LMLimiter | None:
    """The limiter of a role, or ``None`` when the role is unbounded."""
    if role is None:
        return None
    with _registry_lock:
        return _limiters.get(role)
