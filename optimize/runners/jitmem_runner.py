"""JitMem in a comparison, under the frozen protocol (bank built on train, read-only at test) or the stream protocol
(the test set streamed over seeded orderings, its own test phase).

Example:
    >>> ctx.settings.jitmem.protocol, ctx.settings.jitmem.orderings  # doctest: +SKIP
    ('stream', 3)
    >>> JitMemRunner().test(ctx, spec, out / "jitmem", models)[-1]["std"]  # doctest: +SKIP
    0.12
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import dspy

from memento.optimize.compare_context import MEMORY_DIR, CompareContext, TrainOutcome, frozen_memory_fields, metered
from memento.optimize.costs import PhaseCost
from memento.optimize.method_spec import MethodSpec

__all__ = ["JitMemRunner"]

logger = logging.getLogger(__name__)


class JitMemRunner:
    """JitMem under one of the paper's protocols (``[jitmem] protocol``, ``--jitmem-protocol``).

    * ``frozen``: the training set runs as a seeded stream of batches
      (:func:`memento.optimize.jitmem_stream.stream`) and the judge gates which trajectories enter the bank after each
      batch (``train_gate = "ground_truth"``: the metric gates instead, :func:`build_training_bank`;
      ``train_executor = "base"``: the executor alone runs the training set, without retrieval or curator, and the
      metric gates, as the paper builds its training bank); at test time
      the bank is read-only.
    * ``stream`` (the paper's test protocol): the test set itself is the stream. Each of ``orderings`` seeded
      orderings starts from an empty bank (``warm``: a copy of the training bank built as above), runs the test tasks
      in batches of ``stream_batch`` that share one bank state, and lets the judge-accepted trajectories of a batch
      in only when it ends. An example's score is its mean over the orderings; ``info["stream"]`` holds each
      ordering's mean, their mean and standard deviation, and the cold-start curve (score per stream batch, mean and
      std over orderings, with the bank size each batch saw).
    """

    @staticmethod
    def _protocol(ctx: CompareContext) -> str:
        return ctx.settings.jitmem.protocol

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        jit = ctx.settings.jitmem
        if jit.protocol == "stream" and not jit.warm:
            return TrainOutcome(
                info={"protocol": "stream", "warm": False, "note": "cold start: the test stream starts empty"},
                budget={"stream_batch": jit.stream_batch, "orderings": jit.orderings},
            )
        from memento.optimize.jitmem_stream import _web_counts, build_training_bank, stream

        agent = ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=False)
        trainset = ctx.memory_trainset()
        if jit.train_gate == "ground_truth" or jit.train_executor == "base":
            # the metric gates; "base": the executor alone fills the bank (JitMem's training bank)
            threshold = ctx.settings.trainer.success_threshold
            result = build_training_bank(
                agent,
                trainset,
                ctx.metric,
                threshold=threshold,
                threads=ctx.threads,
                base=jit.train_executor == "base",
            )
        else:
            result = stream(
                agent,
                trainset,
                batch_size=ctx.budget.memory_batch_size,
                seed=ctx.seed,
                metric=ctx.metric,
                threads=ctx.threads,
                checkpoint=method_dir / "stream.jsonl",  # a crashed stream resumes after its last applied batch
                remote=ctx.remote_stream(spec.name, method_dir / MEMORY_DIR),  # --executor ray: batches on workers
            )
        # bank size after each batch: what the next batch saw, and the final size after the last one
        before = {item.batch: item.bank_size for item in result.items}
        batches = sorted(before)
        growth = [{"batch": b + 1, "size": before.get(b + 1, len(agent.bank)), "unit": "trajectories"} for b in batches]
        curve = [{"batch": i + 1, "score": s} for i, s in enumerate(result.curve())]
        searches, fetches = _web_counts(result.items)
        stored = sum(1 for item in result.items if item.stored)
        info = {
            "stored": stored,
            "bank_size": len(agent.bank),
            "train_mean": result.mean(),
            "protocol": jit.protocol,
            "train_gate": "ground_truth" if jit.train_executor == "base" else jit.train_gate,
            "train_executor": jit.train_executor,
        }
        if jit.protocol == "stream":
            info["warm"] = True
        return ctx.memory_outcome(trainset, info, curve=curve, growth=growth, searches=searches, fetches=fetches)

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        # frozen: the bank is opened read-only; test runs read it and never judge or write
        return ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=True)

    def remote(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
        return frozen_memory_fields(spec.name, method_dir / MEMORY_DIR)

    def test(
        self, ctx: CompareContext, spec: MethodSpec, method_dir: Path, models: dict[str, str]
    ) -> tuple[list[float], int, dict[str, float], PhaseCost, dict[str, Any], Any] | None:
        """The stream protocol's test phase (``None`` under ``frozen``: the harness evaluates the loaded program):
        scores, failures, measures, cost, the stream's summary and its leakage audit (written with the per-example
        results to ``test/``)."""
        if self._protocol(ctx) != "stream":
            return None
        from memento.optimize.jitmem_stream import run_orderings

        jit = ctx.settings.jitmem
        with metered(ctx.roles) as (meter, clock):
            result = run_orderings(
                lambda memory_dir: ctx.build(spec.name, memory_dir=memory_dir),
                ctx.testset,
                orderings=jit.orderings,
                batch_size=jit.stream_batch,
                seed=ctx.seed,
                metric=ctx.metric,
                threads=ctx.threads,
                out_dir=method_dir / "test",
                warm_bank=method_dir / MEMORY_DIR / "jitmem" if jit.warm else None,
                warm_size=jit.warm_size,
                remote_for=lambda memory_dir: ctx.remote_stream(spec.name, memory_dir),  # None under threads
            )
        cost = PhaseCost.from_usage(
            meter.usage(), wall_seconds=clock[1], searches=result.searches, fetches=result.fetches, models=models
        )
        from memento.metrics.evaluation import write_results

        evaluated = result.eval_result(ctx.testset, task=ctx.task, metric_name=str(ctx.task.name), seed=ctx.seed)
        write_results(evaluated, method_dir / "test")
        return result.scores, result.failed, {}, cost, result.summary, evaluated.leakage
