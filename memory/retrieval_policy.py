"""How the case bank picks ``k`` of its candidates: ``cosine``, greedy ``q``, ``softmax`` sampling, or ``kernel``.

``cosine`` keeps FAISS's top-k. ``q`` ranks the prefiltered candidates by the gate's ``Q = p(useful | query, case)``.
``softmax`` draws k candidates without replacement with probabilities ``softmax(Q / alpha)`` (Memento's Eq. 7,
``softmax_over="q"``) or ``softmax(logit(Q) / alpha)`` (``softmax_over="logit"``: alpha a temperature over the gate's
logits); Gumbel top-k, i.e. sequential draws: the first draw follows that softmax exactly; alpha -> 0 is greedy Q, a
large alpha is uniform. Before the gate ranks (``min_pairs`` logged pairs), the scores are the cosine similarities and
``softmax`` samples from ``softmax(cosine / alpha)``. ``kernel`` ranks greedily by the kernel-based episodic Q of
Eq. 9 (:mod:`memento.memory.q_kernel`).

Example:
    >>> import numpy as np
    >>> pick("q", np.array([0.2, 0.9, 0.5]), 2, alpha=1.0, logits=True, rng=np.random.default_rng(0)).tolist()
    [1, 2]
    >>> sample_softmax(np.array([0.2, 0.9, 0.5]), 1, alpha=1e-9, rng=np.random.default_rng(0)).tolist()
    [1]
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["RetrievalPolicy", "SoftmaxOver", "POLICIES", "check_policy", "pick", "q_logits", "sample_softmax"]

RetrievalPolicy = Literal["cosine", "q", "softmax", "kernel"]
#: what ``softmax`` samples over: the gate's Q (Memento's Eq. 7) or its logits
SoftmaxOver = Literal["q", "logit"]
POLICIES: tuple[str, ...] = ("cosine", "q", "softmax", "kernel")


def check_policy(policy: str, alpha: float) -> None:
    """Raise :class:`~memento.memory.case_store.CaseBankError` for an unknown policy or a non-positive alpha."""
    from memento.memory.case_store import CaseBankError

    if policy not in POLICIES:
        raise CaseBankError(f"unknown retrieval policy {policy!r}: use cosine, q, softmax or kernel")
    if alpha <= 0:
        raise CaseBankError(f"softmax alpha must be > 0, got {alpha}")


def sample_softmax(scores: np.ndarray, k: int, *, alpha: float = 1.0, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``k`` items drawn without replacement, each draw with probability ``softmax(scores / alpha)``
    over the items not yet drawn (Gumbel top-k: exact, one vectorised pass).

    ``alpha`` is a temperature: as it goes to 0 the draw is the greedy top-k of ``scores`` (ties in index order);
    a large ``alpha`` draws nearly uniformly.
    """
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if alpha < 1e-6:  # the limit alpha -> 0: greedy (dividing by ~0 would overflow the Gumbel perturbation)
        return np.argsort(-scores, kind="stable")[: max(0, k)]
    logits = scores / alpha
    return np.argsort(-(logits + rng.gumbel(size=len(logits))), kind="stable")[: max(0, k)]


def q_logits(q: np.ndarray) -> np.ndarray:
    """``logit(Q) = log(Q / (1 - Q))`` of gate probabilities (clipped away from 0 and 1)."""
    p = np.clip(np.asarray(q, dtype=np.float64), 1e-6, 1.0 - 1e-6)
    return np.log(p) - np.log1p(-p)


def pick(
    policy: RetrievalPolicy,
    scores: np.ndarray,
    k: int,
    *,
    alpha: float,
    logits: bool,
    rng: np.random.Generator,
    softmax_over: SoftmaxOver = "logit",
) -> np.ndarray:
    """Indices of the ``k`` candidates ``policy`` keeps, given their scores.

    ``scores`` are gate probabilities Q when ``logits`` (softmax then samples over ``logit(Q) / alpha``, or over
    ``Q / alpha`` with ``softmax_over="q"``), otherwise cosine similarities (softmax samples over ``cosine / alpha``).
    ``cosine``, ``q`` and ``kernel`` rank greedily (ties keep the candidates' order).
    """
    if policy == "softmax":
        over = q_logits(scores) if logits and softmax_over == "logit" else np.asarray(scores, dtype=np.float64)
        return sample_softmax(over, k, alpha=alpha, rng=rng)
    return np.argsort(-np.asarray(scores), kind="stable")[:k]
