"""MEMENTO in a comparison: the ``memento`` builder's training form learns M1-M4 in batches with the trainer, the
test phase reads the memory frozen; ``react_memory``, ``closed_book_memory`` and ``few_shot_memory`` read the memory
``memento`` trained.

Example:
    >>> outcome = MementoRunner().train(ctx, parse_methods("memento")[0], out / "memento")  # doctest: +SKIP
    >>> [point["batch"] for point in outcome.curve], outcome.info["memory_version"]  # doctest: +SKIP
    ([1, 2, 3], 3)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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
from memento.optimize.method_spec import MethodSpec, reads_memory_of
from memento.optimize.web_tally import CountingWeb

__all__ = ["MementoRunner"]

logger = logging.getLogger(__name__)


class MementoRunner:
    """MEMENTO: train M1-M4 with :class:`memento.optimize.memento_trainer.MementoTrainer` in batches, then test
    with the memory frozen. ``react_memory``, ``closed_book_memory`` and ``few_shot_memory`` test a ReAct agent, the
    plain LLM and the few-shot LLM reading the memory ``memento`` trained in the same comparison (or train their own
    when ``memento`` is not compared)."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        source = reads_memory_of(spec.name)
        if source is not None:
            shared = ctx.out_dir / source
            if (shared / "done").exists() and (shared / MEMORY_DIR).is_dir():
                return reused_memory(source)
        from memento.optimize.memento_trainer import MementoTrainer
        from memento.web.factory import web_tools_factory

        web = CountingWeb(web_tools_factory(ctx.settings))
        # the memento builder's training form: writable memory, the learner, [trainer] exploration per sample
        program = ctx.build("memento", memory_dir=method_dir / MEMORY_DIR, frozen=False, web=web)
        store = program.memory
        trainset = ctx.memory_trainset()
        trainer = MementoTrainer.for_program(
            program, ctx.metric, ctx.settings, batch_size=ctx.budget.memory_batch_size, threads=ctx.threads
        )
        remote_web = [0, 0]  # --executor ray: the forward runs search on the workers; their trajectories count it
        if ctx.executor is not None:
            forward = ctx.executor.forward_runs(
                lambda: ctx.executor.spec(
                    **ctx.worker,
                    method="memento",
                    memory=method_dir / MEMORY_DIR,
                    frozen="forward",
                    memory_version=store.version,
                )
            )

            def remote_forward(jobs: list[Any], on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
                runs: list[Any] = forward(jobs, on_result=on_result)
                for run in runs:
                    remote_web[0] += run.trajectory.usage.searches
                    remote_web[1] += run.trajectory.usage.fetches
                return runs

            trainer.remote_forward = remote_forward
        reports = trainer.fit(trainset)  # resumes a half-finished batch after a crash; never applies one twice
        searches, fetches = web.totals()
        searches, fetches = searches + remote_web[0], fetches + remote_web[1]
        curve, growth = [], []
        for rep in reports:
            curve.append({"batch": rep.batch, "score": rep.mean_score, "n": rep.examples, "valid": rep.valid_runs})
            rules = sum(counts.rules for counts in rep.rules.values())
            growth.append(
                {
                    "batch": rep.batch,
                    "size": rules + rep.facts + rep.craft_entries,
                    "unit": "rules + facts + craft entries",
                    "rules": rules,
                    "facts": rep.facts,
                    "craft_entries": rep.craft_entries,
                    "chars": sum(c.after for c in rep.chars.values()),
                }
            )
        return ctx.memory_outcome(
            trainset,
            info={"batches": len(reports), "memory_version": store.version},
            curve=curve,
            growth=growth,
            searches=searches,
            fetches=fetches,
        )

    @staticmethod
    def _memory_dir(ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> Path:
        memory_dir = method_dir / MEMORY_DIR
        source = reads_memory_of(spec.name)
        if source is not None and not memory_dir.is_dir():
            memory_dir = ctx.out_dir / source / MEMORY_DIR
        return memory_dir

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        return ctx.build(spec.name, memory_dir=self._memory_dir(ctx, spec, method_dir), frozen=True)

    def remote(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
        return frozen_memory_fields(spec.name, self._memory_dir(ctx, spec, method_dir))
