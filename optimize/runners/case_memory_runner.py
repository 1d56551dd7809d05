"""The case-memory baselines in a comparison (``closed_book_cases``, ``few_shot_cases``): they read the bank ``cbr``
trained in the same comparison, or fill their own from the training set.

Example:
    >>> CaseMemoryRunner().train(ctx, spec, out / "closed_book_cases").info["memory_from"]  # doctest: +SKIP
    'cbr'
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import dspy

from memento.optimize.compare_context import (
    MEMORY_DIR,
    CompareContext,
    TrainOutcome,
    frozen_memory_fields,
    reused_memory,
)
from memento.optimize.compare_data import example_id
from memento.optimize.method_spec import MethodSpec, reads_memory_of

__all__ = ["CaseMemoryRunner"]

logger = logging.getLogger(__name__)


class CaseMemoryRunner:
    """The case-memory baselines (``closed_book_cases``, ``few_shot_cases``): the plain LLM reading the case bank's
    top-K cases. They read the bank ``cbr`` trained in the same comparison when it is done (no training of their
    own); otherwise they fill their own bank by answering the training set in batches, each answer stored as a case
    with the metric's score as reward. At test time the bank is frozen."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        source = reads_memory_of(spec.name) or "cbr"
        shared = ctx.out_dir / source
        if (shared / "done").exists() and (shared / MEMORY_DIR / "cbr").is_dir():
            return reused_memory(source)
        from memento.execution.threads import run_parallel

        ctx.fresh_bank(method_dir)
        program = ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=False)
        trainset = ctx.memory_trainset()
        size = ctx.budget.memory_batch_size
        curve: list[dict[str, Any]] = []
        growth: list[dict[str, Any]] = []

        def run_one(example: dspy.Example) -> float:
            from memento.metrics.as_float import score_of

            inputs = {**ctx.task.inputs(example), "task_id": example_id(example, ctx.task)}
            pred = program(**inputs)
            reward = min(1.0, max(0.0, float(score_of(ctx.metric(example, pred)))))
            program.retain(pred, reward)
            return reward

        for batch, start in enumerate(range(0, len(trainset), size), 1):
            rewards = run_parallel(run_one, trainset[start : start + size], threads=ctx.threads)
            curve.append({"batch": batch, "score": sum(rewards) / len(rewards), "n": len(rewards)})
            growth.append({"batch": batch, "size": program.bank.count(), "unit": "cases"})
        info = {"cases": program.bank.count(), "policy": program.policy}
        program.bank.close()
        return ctx.memory_outcome(trainset, info, curve=curve, growth=growth, k=program.k)

    @staticmethod
    def _memory_dir(ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> Path:
        memory_dir = method_dir / MEMORY_DIR
        if not (memory_dir / "cbr").is_dir():
            memory_dir = ctx.out_dir / (reads_memory_of(spec.name) or "cbr") / MEMORY_DIR
        return memory_dir

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        return ctx.build(spec.name, memory_dir=self._memory_dir(ctx, spec, method_dir), frozen=True)

    def remote(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
        return frozen_memory_fields(spec.name, self._memory_dir(ctx, spec, method_dir))
