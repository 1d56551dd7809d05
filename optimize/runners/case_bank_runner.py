"""Memento CBR in a comparison: the ``cbr`` builder's writing agent trained with ``fit_cases`` (softmax retrieval,
the Q-gate learning online), tested frozen with greedy Q.

Example:
    >>> info = CaseBankRunner().train(ctx, parse_methods("cbr")[0], out / "cbr").info  # doctest: +SKIP
    >>> info["policy"], info["test_policy"], info["cases"]  # doctest: +SKIP
    ('softmax', 'q', 12)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import dspy

from memento.optimize.compare_context import MEMORY_DIR, CompareContext, TrainOutcome, frozen_memory_fields
from memento.optimize.compare_data import example_id
from memento.optimize.method_spec import MethodSpec
from memento.optimize.web_tally import CountingWeb

__all__ = ["CaseBankRunner"]

logger = logging.getLogger(__name__)


class CaseBankRunner:
    """Memento CBR: the agent built by the ``cbr`` method's builder (the ``[cbr]`` settings) trains with
    :func:`memento.programs.case_based_agent.fit_cases` (the one CBR training loop) over the training set in batches,
    retaining (task, plan, reward) with the metric's score as reward and updating its Q-gate online. Training
    retrieval follows ``cbr.train_policy`` (softmax over the gate's logits: exploration), testing ``cbr.policy``
    (greedy Q); the gate ranks after ``cbr.min_pairs`` logged pairs. ``cbr.passes > 1`` runs the training set again
    with the bank growing (Memento's iteration table; ``cbr.own_cases`` lets a task read its own earlier case), the
    score of every pass in ``info["passes"]``. At test time the bank is frozen and nothing is retained. A crashed
    training phase starts over from an empty bank (cases are not batch-versioned)."""

    def _agent(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path, *, train: bool) -> tuple[Any, Any]:
        from memento.web.factory import web_tools_factory

        web = CountingWeb(web_tools_factory(ctx.settings))
        reward = ctx.metric if train else None
        agent = ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=not train, reward_fn=reward, web=web)
        return agent, web

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        from memento.programs.case_based_agent import fit_cases

        ctx.fresh_bank(method_dir)
        agent, web = self._agent(ctx, spec, method_dir, train=True)
        trainset = ctx.memory_trainset()
        cbr = ctx.settings.cbr
        passes = fit_cases(
            agent,
            list(trainset),
            batch_size=ctx.budget.memory_batch_size,
            threads=ctx.threads,
            passes=cbr.passes,
            own_cases=cbr.own_cases,
            task_id=lambda ex: example_id(ex, ctx.task),
        )
        curve: list[dict[str, Any]] = []
        growth: list[dict[str, Any]] = []
        for result in passes:
            for row in result.batches:
                batch = len(curve) + 1
                curve.append({"batch": batch, "score": row["score"], "n": row["n"], "pass": result.index})
                growth.append({"batch": batch, "size": row["cases"], "unit": "cases"})
        info = {
            "cases": agent.bank.count(),
            "gate_trained": bool(agent.bank.gate_trained),
            "gate_ready": bool(agent.bank.gate_ready),
            "pairs_logged": agent.bank.pairs_logged(),
            "policy": agent.policy,
            "test_policy": cbr.policy,
            "alpha": agent.alpha,
            "passes": [{"pass": r.index, "score": r.score, "n": len(r.rewards)} for r in passes],
            "train_retrievals": {
                p: sum(r.policies.get(p, 0) for r in passes) for p in {p for r in passes for p in r.policies}
            },
            "own_cases": cbr.own_cases,
        }
        agent.bank.close()
        searches, fetches = web.totals()
        return ctx.memory_outcome(
            trainset, info, curve=curve, growth=growth, searches=searches, fetches=fetches, k=agent.k
        )

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        agent, _ = self._agent(ctx, spec, method_dir, train=False)
        return agent

    def remote(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
        return frozen_memory_fields(spec.name, method_dir / MEMORY_DIR)
