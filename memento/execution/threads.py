"""Run work in a bounded thread pool with DSPy's context (LM, callbacks, usage sink) carried into the workers.

The pool stops on a cancel (:mod:`memento.core.cancel`, set by Ctrl-C): queued items never start, running ones stop
at their next LM call, and :class:`~memento.core.errors.Cancelled` is raised in the caller within a fraction of a
second, even when pools are nested.

Example:
    >>> from memento.execution.threads import run_parallel
    >>> run_parallel(lambda x: x * 2, [1, 2, 3], threads=2)
    [2, 4, 6]
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from memento.core.cancel import cancel_requested, check_cancelled

__all__ = ["run_parallel"]

T = TypeVar("T")
R = TypeVar("R")

_POLL_SECONDS = 0.2


def run_parallel(fn: Callable[[T], R], items: Iterable[T], *, threads: int) -> list[R]:
    """Apply ``fn`` to every item with at most ``threads`` workers; results keep the input order.

    Each task runs in a copy of the caller's ``contextvars`` context, so ``dspy.context(...)`` settings and
    :class:`memento.records.usage.UsageMeter` reach the workers. Exceptions propagate (the first one, in order); on the
    first exception or a cancel, items not started yet are dropped.

    Raises:
        Cancelled: a cancel was requested; the items that were running have stopped.
    """
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        results = []
        for item in items:
            check_cancelled()
            results.append(fn(item))
        return results

    def guarded(item: T) -> R:
        check_cancelled()
        return fn(item)

    pool = ThreadPoolExecutor(max_workers=min(threads, len(items)))
    futures: list[Future[R]] = []
    try:
        futures = [pool.submit(contextvars.copy_context().run, guarded, item) for item in items]
        pending = set(futures)
        while pending:  # poll, so that the caller's thread notices a cancel (the signal handler runs there)
            done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_EXCEPTION)
            if cancel_requested() or any(f.exception() is not None for f in done if not f.cancelled()):
                break
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    check_cancelled()
    return [future.result() for future in futures]
