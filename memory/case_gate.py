"""The Q-gate of a case bank (Memento's learned retrieval, ``Q = p(useful | query, case)``): its lifecycle and its
learning. The gate's state is ``qgate.pt`` in a directory bank (state_dict and optimizer, written atomically after
each online update) or the same bytes in the ``gate_state`` table of a PostgreSQL bank; an update takes the bank's
writer lock, under which a gate another writer saved is reloaded first, so no update is lost. :meth:`CaseGate.record`
logs (query, case, reward) pairs with the gate's prequential score and learns online; :meth:`CaseGate.fit` trains
offline on every logged pair.

Example:
    >>> bank.record("founder of Acme", [case.id], 1.0)  # doctest: +SKIP
    >>> bank.gate_trained  # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memento.core.types import Case, utcnow
from memento.memory.case_eviction import usefulness
from memento.memory.case_store import CaseBankError
from memento.memory.namespace_index import NamespaceIndex
from memento.memory.retrieval_policy import RetrievalPolicy

if TYPE_CHECKING:  # torch stays unimported until a gate is needed
    from memento.memory.q_gate import QGateLearner

if TYPE_CHECKING:
    from memento.memory.case_bank import CaseBank


__all__ = ["CaseGate", "GATE_FILE", "file_stamp"]

logger = logging.getLogger(__name__)


GATE_FILE = "qgate.pt"


def file_stamp(path: Path) -> tuple[int, ...]:
    """What changes when a file is replaced or rewritten: inode (atomic renames), mtime and size."""
    st = path.stat()
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class CaseGate:
    """The Q-gate of one case bank: built on first use (torch is imported then), saved after each update and
    reloaded when another writer saved it, its replay buffer refilled from the logged pairs, and ranking only once it
    is ready (trained, ``min_pairs`` pairs logged).

    Args:
        bank: the bank whose cases the gate scores.
        gate: a custom torch ``nn.Module`` gate (``forward(q, c) -> probs``); default
            :class:`~memento.memory.q_gate.QGate`.
        options: keyword options of :class:`~memento.memory.q_gate.QGateLearner` (lr, steps_per_update, ...).
    """

    def __init__(self, bank: CaseBank, *, gate: Any = None, options: dict[str, Any] | None = None) -> None:
        self.bank = bank
        self.custom = gate
        self.options = dict(options or {})
        self.built: QGateLearner | None = None  # the learner, once built
        # what identifies the saved gate last loaded or saved: (inode, mtime_ns, size) of qgate.pt, or its version
        self.stamp: tuple[int, ...] | None = None
        self.seen_ready = False  # the gate was seen ready (trained, min_pairs logged): it stays so

    @property
    def learner(self) -> QGateLearner:
        """The Q-gate learner (created on first use; torch is imported then). Its module is ``bank.gate.gate``."""
        with self.bank._lock:
            if self.built is None:
                from memento.memory.q_gate import QGateLearner

                opts = {"seed": self.bank.seed, **self.options}
                # the default gate is built by the learner after seeding torch: identical weights in every process
                learner = QGateLearner(self.custom, dim=self.bank.dim, **opts)
                if self.saved_stamp() is not None:
                    self.load(learner)
                self.refill_replay(learner)
                self.built = learner
            return self.built

    def saved_stamp(self) -> tuple[int, ...] | None:
        """What identifies the saved gate now (None: none saved): qgate.pt's stamp, or the stored version."""
        if isinstance(self.bank.dir, Path):
            path = self.bank.dir / GATE_FILE
            return file_stamp(path) if path.exists() else None
        version = self.bank._store.gate_version()
        return None if version is None else (version,)

    def load(self, learner: QGateLearner) -> None:
        try:
            if isinstance(self.bank.dir, Path):
                path = self.bank.dir / GATE_FILE
                stamp: tuple[int, ...] | None = file_stamp(path)
                learner.load(path)
                source = str(path)
            else:
                saved = self.bank._store.gate_state()
                if saved is None:
                    return
                stamp, source = (saved[0],), f"the Q-gate stored in {self.bank.dir}"
                learner.loads(saved[1], source=source)
        except (RuntimeError, ValueError, KeyError) as exc:
            where = self.bank.dir / GATE_FILE if isinstance(self.bank.dir, Path) else f"Q-gate of {self.bank.dir}"
            raise CaseBankError(f"saved Q-gate {where} does not fit this gate: {exc}".splitlines()[0]) from exc
        self.stamp = stamp

    def reload_if_changed(self) -> None:
        """Reload the saved gate when another writer saved it after this bank last loaded or saved it."""
        if self.built is None:
            return
        stamp = self.saved_stamp()
        if stamp is not None and stamp != self.stamp:
            logger.info("case bank %s: Q-gate saved by another writer; reloading it before updating", self.bank.dir)
            self.load(self.built)

    def save(self) -> None:
        if isinstance(self.bank.dir, Path):
            path = self.bank.dir / GATE_FILE
            self.learner.save(path, include_replay=False)
            self.stamp = file_stamp(path)
        else:
            self.stamp = (self.bank._store.save_gate_state(self.learner.dumps(include_replay=False)),)

    def refill_replay(self, learner: QGateLearner) -> None:
        cap = learner.replay.capacity
        if cap <= 0 or len(learner.replay):
            return
        recent = self.bank._store.recent_pairs(cap)
        if recent is not None:
            q, c, rewards = recent
            learner.replay.add(q, c, rewards.astype(np.float32))

    @property
    def trained(self) -> bool:
        """Whether the gate has learned from any pair (online or offline)."""
        saved = self.saved_stamp() is not None
        return saved or (self.built is not None and self.built.pairs_trained > 0)

    @property
    def ready(self) -> bool:
        """Whether the gate ranks: it has learned and at least ``min_pairs`` pairs are logged (else cosine)."""
        if not self.seen_ready:
            self.seen_ready = self.trained and self.bank.pairs_logged() >= self.bank.min_pairs
        return self.seen_ready

    def reads(self, policy: RetrievalPolicy) -> dict[str, bool]:
        """What a retrieval must read of the gate's state along with its cases: nothing for cosine or once the gate
        is known ready (a saved gate and logged pairs are never removed, so readiness never goes back); else the
        pair count, and on PostgreSQL the stored gate's version (a directory's ``qgate.pt`` is checked on disk)."""
        if policy == "cosine" or self.seen_ready:
            return {}
        return {"gate_version": not isinstance(self.bank.dir, Path), "pairs": True}

    def ready_from(self, version: int | None, pairs: int | None) -> bool:
        """:attr:`gate_ready` from the state read with the ranked cases (remembered once true)."""
        if not self.seen_ready:
            if isinstance(self.bank.dir, Path):
                saved = (self.bank.dir / GATE_FILE).exists()
            else:
                saved = version is not None
            trained = saved or (self.built is not None and self.built.pairs_trained > 0)
            self.seen_ready = trained and (pairs or 0) >= self.bank.min_pairs
        return self.seen_ready

    def record(
        self,
        query: str,
        cases: Sequence[Case | str],
        rewards: float | Sequence[float],
        *,
        task_id: str | None = None,
        learn: bool = True,
    ) -> float | None:
        """Log (query, case, reward) pairs and, with ``learn``, update the Q-gate online; returns the update's loss.

        Each pair is logged with the gate's score *before* the update (an honest, prequential prediction that
        ``qgate-stats`` evaluates) and the cosine similarity (the non-parametric baseline). A single reward is
        applied to every case (the task's reward credits every case the planner saw).
        """
        self.bank._check_writable()
        ids = [c.id if isinstance(c, Case) else str(c) for c in cases]
        if not ids:
            return None
        scalar = np.isscalar(rewards)
        rs = np.full(len(ids), rewards, dtype=np.float64) if scalar else np.asarray(rewards, dtype=np.float64)
        if len(rs) != len(ids) or np.any((rs < 0) | (rs > 1)) or np.any(np.isnan(rs)):
            raise CaseBankError("record needs one reward in [0, 1] per case (or a single reward for all)")
        qv = self.bank.embedder.embed([query])[0]
        cv = self.bank.embeddings(ids)
        with self.bank._lock, self.bank._writer():
            self.reload_if_changed()  # another process's update is learned on, never overwritten
            before = self.learner.score(qv, cv) if self.trained else np.full(len(ids), np.nan)
            cos = cv @ qv
            now = utcnow().isoformat()
            self.bank._store.log_pairs(
                [
                    (
                        self.bank.namespace,
                        task_id,
                        query,
                        cid,
                        float(r),
                        None if np.isnan(b) else float(b),
                        float(s),
                        now,
                        qv.tobytes(),
                        vec.tobytes(),
                    )
                    for cid, r, b, s, vec in zip(ids, rs, before, cos, cv, strict=True)
                ]
            )
            if not learn:
                return None
            loss = self.learner.update(qv, cv, rs.astype(np.float32))
            self.save()
            return loss

    def fit(self, *, epochs: int = 20, namespace: str | None = None) -> dict[str, Any]:
        """Offline training of the gate on every logged pair; saves the gate."""
        self.bank._check_writable()
        pairs = self.bank.logged_pairs(namespace)
        if not len(pairs["reward"]):
            raise CaseBankError(f"no logged (query, case, reward) pairs in {self.bank.dir} to fit the Q-gate on")
        with self.bank._lock, self.bank._writer():
            self.reload_if_changed()
            report = self.learner.fit(pairs["q"], pairs["c"], pairs["reward"], epochs=epochs, add_to_replay=False)
            self.save()
        return report

    def scores(
        self,
        qv: np.ndarray,
        cands: list[tuple[Case, float, int, str]],
        indexes: dict[str, NamespaceIndex],
        version: int | None,
        pairs: int | None,
    ) -> tuple[np.ndarray, bool]:
        """The Q of each candidate ``(case, cosine, row id, namespace)`` and whether the gate ranked them (``version``
        and ``pairs``: the gate's state read with them): a gate that has seen fewer than ``min_pairs`` pairs is
        noise, so Q is the cosine similarity until then."""
        ready = self.ready_from(version, pairs)
        if not ready:
            return np.asarray([s for _, s, _, _ in cands], dtype=np.float32), False
        vecs = np.zeros((len(cands), self.bank.dim), dtype=np.float32)
        for ns in {c[3] for c in cands}:
            rows = [i for i, c in enumerate(cands) if c[3] == ns]
            vecs[rows] = indexes[ns].vectors([cands[i][2] for i in rows])
        return self.learner.score(qv, vecs), True

    def usefulness(self, namespace: str, *, reference_queries: int = 16) -> dict[str, float]:
        """Per live case, its mean Q against the most recent distinct logged queries (the eviction score).

        Before the gate has learned anything, the score is the case's own reward.
        """
        ids, rewards, vectors = self.bank._store.live_rewards(namespace)
        if not self.trained:  # the reward alone: the gate (and torch) is never built for it
            return usefulness(ids, rewards, vectors, None, lambda q, c: np.zeros(len(c)))
        queries = self.bank._store.recent_queries(reference_queries)
        return usefulness(ids, rewards, vectors, queries, self.learner.score)
