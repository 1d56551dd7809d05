"""The kernel-based episodic Q of Memento (Eq. 9) over a case bank's stored episodes.

Example:
    >>> bank.retrieve("founder of Acme", k=2, policy="kernel")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch stays unimported until the kernel is needed
    from memento.memory.case_bank import CaseBank
    from memento.memory.q_kernel import EpisodicKernel


__all__ = ["CaseKernel"]


class CaseKernel:
    """The kernel-based episodic Q of Memento's Eq. 9 over one case bank (retrieval policy ``kernel``): each case's
    episodes (its own task and reward, its logged uses and their rewards) averaged with a learned kernel's weights
    (:class:`~memento.memory.q_kernel.EpisodicKernel`, refitted when new pairs were logged).

    Args:
        bank: the bank whose cases and logged pairs are the episodes.
    """

    def __init__(self, bank: CaseBank) -> None:
        self.bank = bank
        self.kernel: EpisodicKernel | None = None  # the episodic kernel (memory.q_kernel), built on first use

    def q(self, query: str | np.ndarray, case_ids: Sequence[str]) -> np.ndarray:
        """The kernel-based episodic Q of Eq. 9 for stored cases: each case's episodes (its own task and reward, its
        logged uses and their rewards) averaged with the learned kernel's weights (:mod:`memento.memory.q_kernel`;
        refitted when new pairs were logged)."""
        qv = self.bank._query_vec(query)
        rows = self.bank._store.episodes(list(case_ids))
        by_case: dict[str, tuple[list[np.ndarray], list[float]]] = {cid: ([], []) for cid in case_ids}
        for cid, blob, reward, _use in rows:
            if cid in by_case:
                by_case[cid][0].append(np.frombuffer(blob, dtype=np.float32))
                by_case[cid][1].append(reward)
        episodes = [
            (np.stack(embs) if embs else np.zeros((0, self.bank.dim), np.float32), np.asarray(rews, np.float32))
            for embs, rews in (by_case[cid] for cid in case_ids)
        ]
        return self.fitted().q(qv, episodes)

    def fitted(self) -> EpisodicKernel:
        """The episodic kernel, refitted on every logged pair when pairs were logged since its last fit."""
        with self.bank._lock:
            if self.kernel is None:
                from memento.memory.q_kernel import EpisodicKernel

                self.kernel = EpisodicKernel(dim=self.bank.dim, seed=self.bank.seed)
            logged = self.bank.pairs_logged()
            if self.kernel.fitted_on != logged:
                rows = self.bank._store.episodes(None)
                if rows:
                    ids = {cid: i for i, cid in enumerate(dict.fromkeys(r[0] for r in rows))}
                    self.kernel.fit(
                        np.asarray([ids[r[0]] for r in rows]),
                        np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]),
                        np.asarray([r[2] for r in rows], dtype=np.float32),
                        np.asarray([r[3] for r in rows], dtype=bool),
                    )
                self.kernel.fitted_on = logged
            return self.kernel
