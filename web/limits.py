"""Process-wide limits shared by every fetcher and search backend of a process.

``process_semaphore("fetch", 4)`` returns the same semaphore to every caller asking for that kind and limit, so
all :class:`~memento.web.fetcher.Fetcher` objects of a process together keep at most 4 requests in flight (and
all search backends at most ``max_concurrent_searches`` searches). :class:`HostSpacer` spaces requests to one
host by a minimum interval (politeness), also process-wide.

Example:
    >>> from memento.web.limits import process_semaphore
    >>> process_semaphore("fetch", 4) is process_semaphore("fetch", 4)
    True
"""

from __future__ import annotations

import threading
import time

__all__ = ["process_semaphore", "HostSpacer", "host_spacer"]

_lock = threading.Lock()
_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_spacers: dict[str, HostSpacer] = {}


def process_semaphore(kind: str, limit: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of ``kind`` (``"fetch"``, ``"search"``) with ``limit`` slots."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    with _lock:
        sem = _semaphores.get((kind, limit))
        if sem is None:
            sem = _semaphores[(kind, limit)] = threading.BoundedSemaphore(limit)
        return sem


class HostSpacer:
    """Reserve request start times per host so that two requests to one host start ``interval`` seconds apart.

    Example:
        >>> spacer = HostSpacer()
        >>> spacer.wait("example.org", 0.0)  # returns at once
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}

    def wait(self, host: str, interval: float) -> None:
        """Block until this host may be contacted again, then reserve the next slot."""
        if interval <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next.get(host, 0.0))
            self._next[host] = start + interval
        delay = start - now
        if delay > 0:
            time.sleep(delay)


def host_spacer(kind: str = "fetch") -> HostSpacer:
    """The process-wide :class:`HostSpacer` of ``kind``."""
    with _lock:
        spacer = _spacers.get(kind)
        if spacer is None:
            spacer = _spacers[kind] = HostSpacer()
        return spacer
