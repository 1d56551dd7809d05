"""Which cases a full case bank evicts: the least useful first, by mean Q against recently logged queries.

Beyond the paper (``capacity`` + ``eviction=True``): a namespace keeps at most ``capacity`` live cases. Usefulness
is a case's mean Q against the most recent distinct logged queries; before the gate has learned anything it is the
case's own reward. Ties go oldest-first. An eviction goes down to ``capacity * (1 - slack)`` so the bank is not
Q-scored again after every insert. Evicted cases stay in the database, marked, and leave the index.

Example:
    >>> policy = EvictionPolicy(capacity=4, slack=0.5)
    >>> policy.excess(5), policy.excess(4)
    (3, 0)
    >>> policy.victims({"a": 0.9, "b": 0.1, "c": 0.1}, 2)
    ['b', 'c']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["EvictionPolicy", "usefulness"]


def usefulness(
    ids: Sequence[str],
    rewards: np.ndarray,
    vectors: np.ndarray,
    queries: Sequence[np.ndarray] | None,
    score: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> dict[str, float]:
    """Per case, its mean ``score(query, cases)`` over ``queries`` (the case vectors' mean when no query is logged);
    ``queries=None`` (an untrained gate) gives each case its own reward."""
    if not len(ids):
        return {}
    if queries is None:
        return {cid: float(r) for cid, r in zip(ids, rewards, strict=True)}
    queries = list(queries) or [vectors.mean(axis=0)]
    total = np.zeros(len(ids))
    for qv in queries:
        total += score(qv, vectors)
    total /= len(queries)
    return {cid: float(s) for cid, s in zip(ids, total, strict=True)}


@dataclass(frozen=True)
class EvictionPolicy:
    """A capacity cap with slack: how many cases to evict, and which.

    Args:
        capacity: Maximum live cases (None: no cap).
        slack: Fraction below ``capacity`` an eviction goes down to.

    Example:
        >>> EvictionPolicy(capacity=10, slack=0.1).excess(12)
        3
    """

    capacity: int | None
    slack: float = 0.1

    def excess(self, live: int) -> int:
        """How many of ``live`` cases to evict (0 while at or under capacity)."""
        if self.capacity is None or live <= self.capacity:
            return 0
        return live - max(1, int(self.capacity * (1.0 - self.slack)))

    @staticmethod
    def victims(scores: dict[str, float], n: int) -> list[str]:
        """The ``n`` least useful ids; ``scores`` in insertion order, so ties go oldest-first (stable sort)."""
        return sorted(scores, key=lambda cid: scores[cid])[: max(0, n)]
