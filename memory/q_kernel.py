"""Kernel-based episodic Q of Memento (Eq. 9): a case's value for a task is the similarity-weighted average of the
rewards of its past uses.

``Q(s, c) = sum_i k(s, s_i) r_i / sum_i k(s, s_i)`` over the episodes ``(s_i, r_i)`` of case ``c``: the task the case
was written for (with the case's own reward) and every logged use of it (the query it was retrieved for, with that
task's reward). The kernel ``k(s, s') = exp(cos(W s, W s') / tau)`` is small and learned: a linear projection ``W``
of the frozen sentence embeddings (``dim x width``) and a temperature ``tau``, fitted with Adam to predict each
logged reward from the case's *other* episodes (leave-one-out mean squared error). It is refitted, deterministically,
whenever the number of logged pairs changed (:meth:`memento.memory.case_bank.CaseBank.retrieve` with ``policy=
"kernel"``), so nothing is saved and several processes never disagree about it. A case never used has its own
episode only: its Q is its own reward (the candidates come from the cosine prefilter, so relevance is kept).

This module imports torch; the case bank imports it only when the ``kernel`` policy is used.

Example:
    >>> import numpy as np
    >>> kernel = EpisodicKernel(dim=4, seed=0)
    >>> episodes = {"c1": (np.eye(4, dtype=np.float32)[:2], np.array([1.0, 0.0]))}
    >>> kernel.q(np.eye(4, dtype=np.float32)[0], [episodes["c1"]]).shape
    (1,)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from memento.memory.embedder import apply_compute_threads

__all__ = ["EpisodicKernel"]

logger = logging.getLogger(__name__)

Episodes = tuple[np.ndarray, np.ndarray]  # (embeddings (n, dim), rewards (n,)) of one case


class _Kernel(nn.Module):
    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, width, bias=False)
        nn.init.orthogonal_(self.proj.weight)
        self.log_tau = nn.Parameter(torch.tensor(float(np.log(0.1))))

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.proj(x), dim=-1)

    def logits(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``cos(W a, W b) / tau`` for every row pair, shape ``(len(a), len(b))``."""
        return self.project(a) @ self.project(b).T / self.log_tau.exp()


class EpisodicKernel:
    """The learned kernel and the episodic Q estimate over it.

    Args:
        dim: embedding dimension.
        width: projection width of the kernel.
        lr: Adam learning rate of a fit.
        steps: gradient steps of a fit.
        batch: logged pairs per step (targets; every episode is a neighbour).
        seed: initialisation and sampling seed (the same pairs give the same kernel).
    """

    def __init__(
        self, *, dim: int, width: int = 64, lr: float = 1e-2, steps: int = 60, batch: int = 256, seed: int = 0
    ) -> None:
        apply_compute_threads("torch")
        torch.manual_seed(seed)
        self.dim = int(dim)
        self.module = _Kernel(self.dim, min(width, self.dim))
        self.lr = lr
        self.steps = steps
        self.batch = batch
        self.seed = seed
        self.fitted_on = -1  # the number of logged pairs the kernel was last fitted on
        self.last_loss = float("nan")

    def fit(self, case_index: np.ndarray, embeddings: np.ndarray, rewards: np.ndarray, is_use: np.ndarray) -> float:
        """Fit the kernel afresh on episodes (one row each: the case it belongs to, its embedding, its reward, whether
        it is a logged use): each use's reward is predicted from the other episodes of its case. Returns the loss."""
        uses = np.flatnonzero(is_use)
        torch.manual_seed(self.seed)  # a fit starts afresh: the kernel depends on the logged pairs only
        self.module = _Kernel(self.dim, self.module.proj.out_features)
        if len(uses) == 0:
            return float("nan")
        emb = torch.from_numpy(np.asarray(embeddings, dtype=np.float32))
        rew = torch.from_numpy(np.asarray(rewards, dtype=np.float32))
        case = torch.from_numpy(np.asarray(case_index, dtype=np.int64))
        gen = torch.Generator().manual_seed(self.seed)
        optimizer = torch.optim.Adam(self.module.parameters(), lr=self.lr)
        loss_value = float("nan")
        self.module.train()
        for _ in range(self.steps):
            pick = torch.from_numpy(uses)[torch.randperm(len(uses), generator=gen)[: self.batch]]
            logits = self.module.logits(emb[pick], emb)
            same = case[pick].unsqueeze(1) == case.unsqueeze(0)
            same[torch.arange(len(pick)), pick] = False  # leave the target episode out
            has_other = same.any(dim=1)
            if not bool(has_other.any()):
                break
            logits = logits.masked_fill(~same, float("-inf"))[has_other]
            pred = torch.softmax(logits, dim=1) @ rew
            loss = nn.functional.mse_loss(pred, rew[pick][has_other])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_value = float(loss.detach())
        self.module.eval()
        self.last_loss = loss_value
        return loss_value

    def q(self, query: np.ndarray, episodes: Sequence[Episodes]) -> np.ndarray:
        """``Q(query, c)`` for each case's episodes (a case without episodes scores 0)."""
        out = np.zeros(len(episodes), dtype=np.float32)
        qv = torch.from_numpy(np.asarray(query, dtype=np.float32).reshape(1, -1))
        with torch.no_grad():
            for i, (embs, rews) in enumerate(episodes):
                if len(rews) == 0:
                    continue
                weights = torch.softmax(self.module.logits(qv, torch.from_numpy(np.asarray(embs, np.float32)))[0], 0)
                out[i] = float(weights @ torch.from_numpy(np.asarray(rews, dtype=np.float32)))
        return out
