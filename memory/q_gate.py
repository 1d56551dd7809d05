"""The learned retrieval gate of Memento CBR: ``Q(query, case) = p(case is useful for query)``.

:class:`QGate` is a small torch MLP over ``[q, c, q*c, |q-c|]`` of frozen sentence embeddings, ending in a sigmoid.
:class:`QGateLearner` trains any gate with binary cross-entropy on (soft) task rewards: online after each task
(the new pairs plus a minibatch from a reservoir :class:`~memento.memory.replay_buffer.ReplayBuffer`) or offline
from logged pairs with :meth:`QGateLearner.fit`; it saves the state_dict, optimizer and replay buffer atomically.

This module imports torch; :mod:`memento.memory.case_bank` imports it lazily, only when a gate is needed.

Extension points (plain torch):
    * pass your own ``nn.Module`` as ``gate``: ``forward(q: Tensor[B, d], c: Tensor[B, d]) -> Tensor[B]`` returning
      probabilities in [0, 1] (optionally a ``logits(q, c)`` method, used for a numerically stable loss);
    * ``gate.register_forward_hook(fn)``: ``fn(module, (q, c), probs)`` sees every score the bank computes.

Example:
    >>> import numpy as np
    >>> learner = QGateLearner(QGate(dim=8), seed=0)
    >>> q, c = np.eye(8, dtype=np.float32)[:2], np.eye(8, dtype=np.float32)[2:4]
    >>> _ = learner.update(q, c, np.array([1.0, 0.0]))
    >>> learner.score(q, c).shape
    (2,)
"""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from memento.memory.embedder import apply_compute_threads
from memento.memory.replay_buffer import ReplayBuffer
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD
from memento.utils.files import atomic_path

__all__ = ["QGate", "QGateLearner", "roc_auc", "gate_report"]

logger = logging.getLogger(__name__)


def roc_auc(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    *,
    threshold: float = DEFAULT_SUCCESS_THRESHOLD,
) -> float:
    """Area under the ROC curve, labels strictly above ``threshold`` being positives (the success rule of
    :func:`memento.metrics.success.succeeded`): the Mann-Whitney U of the positives' scores against the negatives'
    (``scipy.stats.mannwhitneyu``, tied ranks averaged) over ``n_pos * n_neg``.

    Returns ``nan`` when only one class is present.
    """
    from scipy import stats

    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    pos = np.asarray(labels, dtype=np.float64).reshape(-1) > threshold
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    u = stats.mannwhitneyu(scores[pos], scores[~pos], alternative="two-sided", method="asymptotic").statistic
    return float(u / (n_pos * n_neg))


class QGate(nn.Module):
    """Two-layer MLP ``[q, c, q*c, |q-c|] -> hidden -> 1 -> sigmoid`` scoring a (query, case) pair.

    The element-wise product and absolute difference let the gate model interactions between the query and the
    case (which plain cosine similarity collapses to one number), so it can learn which cases helped which queries.

    Args:
        dim: Embedding dimension of queries and cases.
        hidden: Hidden width.
        dropout: Dropout after the hidden layer (training only).

    Example:
        >>> import torch
        >>> gate = QGate(dim=4)
        >>> probs = gate(torch.zeros(3, 4), torch.ones(3, 4))
        >>> tuple(probs.shape), bool(((probs >= 0) & (probs <= 1)).all())
        ((3,), True)
    """

    def __init__(self, dim: int, *, hidden: int = 256, dropout: float = 0.0) -> None:
        super().__init__()
        self.dim = int(dim)
        self.hidden = int(hidden)
        self.mlp = nn.Sequential(
            nn.Linear(4 * self.dim, self.hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(self.hidden, 1),
        )

    @staticmethod
    def features(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """``[q, c, q*c, |q-c|]`` along the last axis."""
        return torch.cat([q, c, q * c, (q - c).abs()], dim=-1)

    def logits(self, q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """Pre-sigmoid scores, shape ``(B,)``."""
        scores: torch.Tensor = self.mlp(self.features(q, c)).squeeze(-1)
        return scores

    def forward(self, q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """``p(useful | q, c)``, shape ``(B,)``."""
        return torch.sigmoid(self.logits(q, c))


def _as_tensor(x: np.ndarray, dim: int) -> torch.Tensor:
    return torch.from_numpy(np.array(x, dtype=np.float32, copy=True).reshape(-1, dim))


class QGateLearner:
    """Trains and serves a Q-gate: scoring, online updates with replay, offline fit, atomic save/load.

    Args:
        gate: The scoring module (default ``QGate(dim)``); any ``nn.Module`` with the same forward contract.
        dim: Embedding dimension (required when ``gate`` is None; else read from ``gate.dim`` if present).
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        batch_size: Minibatch size of online steps (new pairs + replayed pairs) and of :meth:`fit`.
        steps_per_update: Gradient steps per online update.
        replay_capacity: Reservoir size (0 disables replay).
        seed: Seed of initialisation and sampling.
        hidden: Hidden width of the default :class:`QGate` (ignored when ``gate`` is given).
        torch_threads: ``torch.set_num_threads`` value; by default
            :func:`~memento.memory.embedder.compute_threads` (1: the gate's batches are tiny, and more OpenMP threads
            only contend with FAISS and the agent's worker threads).

    Example:
        >>> import numpy as np
        >>> learner = QGateLearner(dim=4, seed=0)
        >>> learner.fit(np.ones((8, 4)), np.ones((8, 4)), np.ones(8), epochs=2)["pairs"]
        8
    """

    def __init__(
        self,
        gate: nn.Module | None = None,
        *,
        dim: int | None = None,
        lr: float = 1e-3,
        weight_decay: float = 1e-5,
        batch_size: int = 64,
        steps_per_update: int = 2,
        replay_capacity: int = 4096,
        seed: int = 0,
        torch_threads: int | None = None,
        hidden: int = 256,
    ) -> None:
        if torch_threads:
            torch.set_num_threads(int(torch_threads))
        else:
            apply_compute_threads("torch")
        torch.manual_seed(seed)
        if gate is None:
            if dim is None:
                raise ValueError("QGateLearner needs dim when no gate is given")
            gate = QGate(dim, hidden=hidden)
        dim = int(dim if dim is not None else getattr(gate, "dim", 0))
        if dim <= 0:
            raise ValueError("QGateLearner cannot tell the gate's input dim: pass dim=")
        self.gate = gate
        self.dim = dim
        self.lr = lr
        self.batch_size = int(batch_size)
        self.steps_per_update = int(steps_per_update)
        self.optimizer = torch.optim.Adam(self.gate.parameters(), lr=lr, weight_decay=weight_decay)
        self.replay = ReplayBuffer(replay_capacity, dim, seed=seed)
        self.updates = 0
        self.pairs_trained = 0
        self._gen = torch.Generator().manual_seed(seed)
        self._lock = threading.RLock()

    # -- scoring -------------------------------------------------------------------------------------------------

    def score(self, q: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Q-values for pairs; a single query row ``(d,)`` or ``(1, d)`` is broadcast against all case rows."""
        qt, ct = _as_tensor(q, self.dim), _as_tensor(c, self.dim)
        if qt.shape[0] == 1 and ct.shape[0] != 1:
            qt = qt.expand(ct.shape[0], -1)
        if ct.shape[0] == 0:
            return np.zeros((0,), dtype=np.float32)
        with self._lock, torch.no_grad():
            was_training = self.gate.training
            self.gate.eval()
            out: torch.Tensor = self.gate(qt, ct)
            if was_training:
                self.gate.train()
        return out.reshape(-1).float().numpy().copy()

    # -- training ------------------------------------------------------------------------------------------------

    def _loss(self, q: torch.Tensor, c: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        logits_fn = getattr(self.gate, "logits", None)
        if callable(logits_fn):
            return nn.functional.binary_cross_entropy_with_logits(logits_fn(q, c).reshape(-1), r)
        probs = self.gate(q, c).reshape(-1).clamp(1e-6, 1 - 1e-6)
        return nn.functional.binary_cross_entropy(probs, r)

    def _step(self, q: torch.Tensor, c: torch.Tensor, r: torch.Tensor) -> float:
        self.gate.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(q, c, r)
        loss.backward()
        self.optimizer.step()
        self.pairs_trained += int(r.shape[0])
        return float(loss.detach())

    def update(self, q: np.ndarray, c: np.ndarray, rewards: np.ndarray) -> float:
        """One online update from a task's (query, retrieved case, reward) pairs; returns the mean loss.

        ``q`` may be one row (broadcast to every case). Rewards in [0, 1] are soft BCE targets. Each of the
        ``steps_per_update`` steps trains on the new pairs plus a replayed minibatch; the pairs then join the
        reservoir.
        """
        ct = _as_tensor(c, self.dim)
        qt = _as_tensor(q, self.dim)
        if qt.shape[0] == 1 and ct.shape[0] != 1:
            qt = qt.expand(ct.shape[0], -1).contiguous()
        rt = torch.as_tensor(np.clip(np.asarray(rewards, dtype=np.float32).reshape(-1), 0.0, 1.0))
        if not (qt.shape[0] == ct.shape[0] == rt.shape[0]):
            raise ValueError(f"update got {qt.shape[0]} queries, {ct.shape[0]} cases, {rt.shape[0]} rewards")
        if rt.shape[0] == 0:
            return 0.0
        losses = []
        with self._lock:
            for _ in range(max(1, self.steps_per_update)):
                rq, rc, rr = self.replay.sample(max(0, self.batch_size - rt.shape[0]))
                bq = torch.cat([qt, torch.from_numpy(rq)])
                bc = torch.cat([ct, torch.from_numpy(rc)])
                br = torch.cat([rt, torch.from_numpy(rr)])
                losses.append(self._step(bq, bc, br))
            self.replay.add(qt.numpy(), ct.numpy(), rt.numpy())
            self.updates += 1
        return float(np.mean(losses))

    def fit(
        self,
        q: np.ndarray,
        c: np.ndarray,
        rewards: np.ndarray,
        *,
        epochs: int = 20,
        batch_size: int | None = None,
        add_to_replay: bool = True,
    ) -> dict[str, Any]:
        """Offline training on logged pairs (shuffled minibatches, ``epochs`` passes); returns a small report."""
        qt, ct = _as_tensor(q, self.dim), _as_tensor(c, self.dim)
        rt = torch.as_tensor(np.clip(np.asarray(rewards, dtype=np.float32).reshape(-1), 0.0, 1.0))
        n = int(rt.shape[0])
        if not (qt.shape[0] == ct.shape[0] == n):
            raise ValueError(f"fit got {qt.shape[0]} queries, {ct.shape[0]} cases, {n} rewards")
        bs = int(batch_size or max(self.batch_size, 128))
        last = float("nan")
        with self._lock:
            for _ in range(max(0, epochs)):
                perm = torch.randperm(n, generator=self._gen)
                epoch_losses = []
                for start in range(0, n, bs):
                    idx = perm[start : start + bs]
                    epoch_losses.append(self._step(qt[idx], ct[idx], rt[idx]))
                last = float(np.mean(epoch_losses)) if epoch_losses else last
            if add_to_replay:
                self.replay.add(qt.numpy(), ct.numpy(), rt.numpy())
            self.gate.eval()
        return {"pairs": n, "epochs": epochs, "final_loss": last}

    # -- persistence ---------------------------------------------------------------------------------------------

    def state(self, *, include_replay: bool = True) -> dict[str, Any]:
        """Everything needed to resume: gate and optimizer state_dicts, replay buffer (optional), counters."""
        with self._lock:
            rep = self.replay.state() if include_replay else ReplayBuffer(0, self.dim).state()
            return {
                "gate": self.gate.state_dict(),
                "gate_class": f"{type(self.gate).__module__}.{type(self.gate).__qualname__}",
                "optimizer": self.optimizer.state_dict(),
                "replay": {
                    "q": torch.from_numpy(rep["q"]),
                    "c": torch.from_numpy(rep["c"]),
                    "r": torch.from_numpy(rep["r"]),
                    "seen": rep["seen"],
                },
                "dim": self.dim,
                "updates": self.updates,
                "pairs_trained": self.pairs_trained,
            }

    def save(self, path: str | os.PathLike[str], *, include_replay: bool = True) -> Path:
        """Write :meth:`state` atomically (temp file in the same directory, then rename)."""
        path = Path(path)
        with atomic_path(path) as tmp:
            torch.save(self.state(include_replay=include_replay), tmp)
        return path

    def dumps(self, *, include_replay: bool = True) -> bytes:
        """:meth:`state` as bytes (what :meth:`save` writes; a database stores them as they are)."""
        buffer = io.BytesIO()
        torch.save(self.state(include_replay=include_replay), buffer)
        return buffer.getvalue()

    def load(self, path: str | os.PathLike[str]) -> None:
        """Restore from :meth:`save` output (the gate's architecture must match)."""
        self._restore(Path(path), str(path))

    def loads(self, data: bytes, *, source: str = "stored Q-gate") -> None:
        """Restore from :meth:`dumps` output; ``source`` names it in errors."""
        self._restore(io.BytesIO(data), source)

    def _restore(self, file: Any, source: str) -> None:
        path = source
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except Exception as exc:  # garbage bytes, a truncated file, another format: never a traceback
            raise ValueError(f"{path} is not a saved Q-gate ({type(exc).__name__}: {exc})".splitlines()[0]) from None
        if not isinstance(state, dict) or not {"dim", "gate", "optimizer", "replay"} <= state.keys():
            raise ValueError(f"{path} is not a saved Q-gate (unexpected content)")
        if int(state["dim"]) != self.dim:
            raise ValueError(f"saved Q-gate has dim {state['dim']}, this one has {self.dim}")
        with self._lock:
            self.gate.load_state_dict(state["gate"])
            try:
                self.optimizer.load_state_dict(state["optimizer"])
            except ValueError as exc:  # a different optimizer layout: keep the weights, restart Adam moments
                logger.warning("Q-gate optimizer state not restored (%s)", exc)
            rep = state["replay"]
            if len(rep["r"]):
                self.replay.load_state(
                    {"q": rep["q"].numpy(), "c": rep["c"].numpy(), "r": rep["r"].numpy(), "seen": int(rep["seen"])}
                )
            self.updates = int(state["updates"])
            self.pairs_trained = int(state["pairs_trained"])
            self.gate.eval()


def gate_report(
    pairs: dict[str, np.ndarray],
    *,
    holdout: float = 0.2,
    epochs: int = 30,
    seed: int = 0,
    hidden: int = 256,
    min_steps: int = 500,
    threshold: float = DEFAULT_SUCCESS_THRESHOLD,
) -> dict[str, Any]:
    """How well Q-gates predict the logged rewards, against the cosine baseline (what ``qgate-stats`` prints).

    ``pairs`` is :meth:`memento.memory.case_bank.CaseBank.logged_pairs` output (logging order). Reported:

    * ``prequential_auc`` — AUC of the scores the online gate gave each pair *before* learning from it (every pair
      is held out from the model that scored it), with ``prequential_pairs`` such pairs;
    * ``holdout_auc`` — a fresh :class:`QGate` fitted offline (``epochs``, at least ``min_steps`` minibatches of 64)
      on the first ``1 - holdout`` of the pairs (in time order), scored on the last ``holdout``;
      ``holdout_cosine_auc`` — cosine on the same held-out pairs;
    * ``cosine_auc`` — cosine similarity as the score over every pair.

    AUCs are ``nan`` when a split holds one class only. A reward strictly above ``threshold`` (``[trainer]
    success_threshold``: the one success rule, :func:`memento.metrics.success.succeeded`) counts as useful.
    """
    rewards = np.asarray(pairs["reward"], dtype=np.float64)
    n = len(rewards)
    out: dict[str, Any] = {
        "pairs": n,
        "threshold": threshold,
        "positive_rate": float((rewards > threshold).mean()) if n else float("nan"),
        "cosine_auc": roc_auc(pairs["cosine"], rewards, threshold=threshold) if n else float("nan"),
    }
    scored = ~np.isnan(np.asarray(pairs["q_score"], dtype=np.float64))
    out["prequential_pairs"] = int(scored.sum())
    out["prequential_auc"] = (
        roc_auc(pairs["q_score"][scored], rewards[scored], threshold=threshold) if scored.any() else float("nan")
    )
    n_test = int(round(n * holdout))
    out["holdout_pairs"] = n_test
    if n_test < 2 or n - n_test < 2:
        out["holdout_auc"] = out["holdout_cosine_auc"] = float("nan")
        return out
    dim = int(pairs["q"].shape[1])
    learner = QGateLearner(QGate(dim, hidden=hidden), dim=dim, seed=seed, replay_capacity=0)
    n_train = n - n_test
    batches = -(-n_train // 64)
    epochs = max(epochs, -(-min_steps // batches))  # small logs: enough gradient steps to fit at all
    learner.fit(pairs["q"][:n_train], pairs["c"][:n_train], rewards[:n_train], epochs=epochs, batch_size=64)
    test = slice(n - n_test, n)
    out["holdout_auc"] = roc_auc(learner.score(pairs["q"][test], pairs["c"][test]), rewards[test], threshold=threshold)
    out["holdout_cosine_auc"] = roc_auc(pairs["cosine"][test], rewards[test], threshold=threshold)
    return out
