"""Run work in a bounded thread pool with DSPy's context (LM, callbacks, usage sink) carried into the workers.

Example:
    >>> from memento.threads import run_parallel
    >>> run_parallel(lambda x: x * 2, [1, 2, 3], threads=2)
    [2, 4, 6]
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["run_parallel"]

T = TypeVar("T")
R = TypeVar("R")


def run_parallel(fn: Callable[[T], R], items: Iterable[T], *, threads: int) -> list[R]:
    """Apply ``fn`` to every item with at most ``threads`` workers; results keep the input order.

    Each task runs in a copy of the caller's ``contextvars`` context, so ``dspy.context(...)`` settings and
    :class:`memento.usage.UsageMeter` reach the workers. Exceptions propagate (the first one, in order).
    """
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        return [future.result() for future in futures]
