"""A fixed-size replay buffer of (query embedding, case embedding, reward) pairs for the Q-gate's online updates.

Reservoir sampling keeps a uniform sample of every pair ever offered, so old lessons are not forgotten when new
tasks arrive. Pure numpy (no torch), thread-safe.

Example:
    >>> import numpy as np
    >>> buf = ReplayBuffer(capacity=3, dim=2, seed=0)
    >>> buf.add(np.ones((5, 2)), np.ones((5, 2)), np.array([1, 0, 1, 0, 1.0]))
    >>> len(buf), buf.seen
    (3, 5)
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["ReplayBuffer"]


class ReplayBuffer:
    """Reservoir-sampled buffer of ``(q, c, reward)`` rows.

    Args:
        capacity: Maximum number of pairs kept.
        dim: Embedding dimension.
        seed: Seed of the reservoir and minibatch sampling.
    """

    def __init__(self, capacity: int, dim: int, *, seed: int = 0) -> None:
        if capacity < 0:
            raise ValueError(f"replay capacity must be >= 0, got {capacity}")
        self.capacity = int(capacity)
        self.dim = int(dim)
        self.q = np.zeros((self.capacity, self.dim), dtype=np.float32)
        self.c = np.zeros((self.capacity, self.dim), dtype=np.float32)
        self.r = np.zeros((self.capacity,), dtype=np.float32)
        self.size = 0
        self.seen = 0
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.size

    def add(self, q: np.ndarray, c: np.ndarray, r: np.ndarray) -> None:
        """Offer pairs to the reservoir (each kept with probability ``capacity / seen``)."""
        q = np.asarray(q, dtype=np.float32).reshape(-1, self.dim)
        c = np.asarray(c, dtype=np.float32).reshape(-1, self.dim)
        r = np.asarray(r, dtype=np.float32).reshape(-1)
        with self._lock:
            for i in range(len(r)):
                self.seen += 1
                if self.capacity == 0:
                    continue
                if self.size < self.capacity:
                    slot = self.size
                    self.size += 1
                else:
                    slot = int(self._rng.integers(0, self.seen))
                    if slot >= self.capacity:
                        continue
                self.q[slot], self.c[slot], self.r[slot] = q[i], c[i], r[i]

    def sample(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Up to ``n`` pairs drawn uniformly without replacement."""
        with self._lock:
            n = min(int(n), self.size)
            if n <= 0:
                empty = np.zeros((0, self.dim), dtype=np.float32)
                return empty, empty.copy(), np.zeros((0,), dtype=np.float32)
            idx = self._rng.choice(self.size, size=n, replace=False)
            return self.q[idx].copy(), self.c[idx].copy(), self.r[idx].copy()

    def state(self) -> dict[str, Any]:
        """A picklable snapshot (only the filled rows)."""
        with self._lock:
            return {
                "capacity": self.capacity,
                "dim": self.dim,
                "q": self.q[: self.size].copy(),
                "c": self.c[: self.size].copy(),
                "r": self.r[: self.size].copy(),
                "seen": self.seen,
            }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a snapshot from :meth:`state` (rows beyond this buffer's capacity are dropped)."""
        q, c, r = (np.asarray(state[k], dtype=np.float32) for k in ("q", "c", "r"))
        if q.size and q.shape[1] != self.dim:
            raise ValueError(f"replay state has dim {q.shape[1]}, buffer has {self.dim}")
        n = min(len(r), self.capacity)
        with self._lock:
            self.q[:n], self.c[:n], self.r[:n] = q[:n], c[:n], r[:n]
            self.size = n
            self.seen = int(state.get("seen", n))
