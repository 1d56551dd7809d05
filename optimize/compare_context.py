"""What the comparison harness and its runners share: :class:`CompareContext` (task, metric, split, settings,
roles, budget; builds every method through the registry), :class:`TrainOutcome`, the :class:`MethodRunner` and
:class:`CompareObserver` protocols, and the artefact names.

Example:
    >>> from memento.optimize.compare_context import TrainOutcome
    >>> TrainOutcome(artefacts={"program": "program.json"}).artefacts
    {'program': 'program.json'}
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import dspy

from memento.core.config import Settings
from memento.optimize.budgets import CompareBudget
from memento.optimize.method_spec import MethodSpec
from memento.optimize.optimizers import optimize_program
from memento.optimize.report import MethodResult
from memento.records.usage import UsageMeter
from memento.tasks.task import Task

__all__ = [
    "CompareContext",
    "CompareObserver",
    "TrainOutcome",
    "MethodRunner",
    "PROGRAM_FILE",
    "MEMORY_DIR",
    "metered",
    "reused_memory",
    "saved_program_fields",
    "frozen_memory_fields",
]

logger = logging.getLogger(__name__)


PROGRAM_FILE = "program.json"
MEMORY_DIR = "memory"


class CompareObserver(Protocol):
    """Follows a comparison as it runs (the CLI's progress bars, MLflow tracking). Called from worker threads."""

    def phase(self, method: str, phase: str, total: int | None) -> None:
        """A method's ``train`` or ``test`` phase starts (``total``: its examples, ``None`` when unknown)."""

    def example(self, method: str, phase: str, score: float, error: bool) -> None:
        """One example of a phase finished."""

    def method_done(self, result: MethodResult, method_dir: Path) -> None:
        """A method finished (``result.status`` says how); its files are in ``method_dir``."""


@dataclass
class CompareContext:
    """What every runner shares: the task, its metric, the split, the settings and LM roles, the budget."""

    task: Task
    settings: Settings
    roles: Any
    metric: Callable[..., Any]
    trainset: list[dspy.Example]
    budget: CompareBudget
    threads: int
    seed: int
    testset: list[dspy.Example]
    out_dir: Path
    embedder: Any = None
    observer: CompareObserver | None = None
    # --executor ray: the RayExecutor and what every worker spec of this comparison shares (task and metric names,
    # the training set, the embedder's name); None under threads
    executor: Any = None
    worker: dict[str, Any] = field(default_factory=dict)

    def remote(self, fields: dict[str, Any] | None) -> Any:
        """``evaluate(remote=...)`` for a program the workers build from ``fields`` (a runner's :meth:`remote`), or
        ``None``: threads of this process."""
        if self.executor is None or fields is None:
            return None
        return self.executor.examples(self.executor.spec(**self.worker, **fields))

    def remote_stream(self, method: str, memory_dir: Path) -> Any:
        """``jitmem_stream.stream(remote=...)`` over the bank in ``memory_dir`` on the Ray workers, or ``None``."""
        if self.executor is None:
            return None
        executor, worker = self.executor, self.worker
        return executor.stream_runs(
            lambda version: executor.spec(
                **worker, method=method, memory=memory_dir, frozen=True, memory_version=version
            )
        )

    def memory_trainset(self) -> list[dspy.Example]:
        """The training examples a memory method learns from (at most ``budget.memory_train_limit``)."""
        limit = self.budget.memory_train_limit
        return list(self.trainset[:limit] if limit is not None else self.trainset)

    def memory_outcome(self, trainset: list[dspy.Example], info: dict[str, Any], **fields: Any) -> TrainOutcome:
        """A memory method's :class:`TrainOutcome`: the memory budget, ``trainset``'s size, ``info`` and ``fields``
        (``curve``, ``growth``, ``searches``, ``fetches``; ``k`` joins the budget), the artefact in ``memory/``."""
        budget = self.budget.for_method("memory") | {"train_examples": len(trainset)}
        if "k" in fields:
            budget["k"] = fields.pop("k")
        return TrainOutcome(budget=budget, info=info, artefacts={"memory": MEMORY_DIR}, **fields)

    def fresh_bank(self, method_dir: Path) -> None:
        """Remove a case bank a crashed training left in ``method_dir`` (cases are not batch-versioned: training
        starts over)."""
        import shutil

        bank_dir = method_dir / MEMORY_DIR / "cbr"
        if bank_dir.exists():
            shutil.rmtree(bank_dir)

    def compile(self, optimizer: str, program: dspy.Module, log_dir: Path) -> Any:
        """Compile ``program`` with ``optimizer`` on this comparison's training set, metric, roles, budget, threads
        and seed (:func:`memento.optimize.optimizers.optimize_program`)."""
        shared = {"trainset": self.trainset, "metric": self.metric, "roles": self.roles, "budget": self.budget}
        return optimize_program(optimizer, program, threads=self.threads, seed=self.seed, log_dir=log_dir, **shared)

    def build(
        self, method: str, *, memory_dir: Path | None = None, frozen: bool | None = None, **injected: Any
    ) -> dspy.Module:
        """Build a method with its registered builder (:func:`memento.programs.registry.build_program`) for this
        comparison's task, settings, roles, training set and embedder (``frozen``: test time; ``False``: the
        training form; ``injected``: ``web``, ``reward_fn``). Every runner builds its programs here."""
        from memento.programs.registry import build_program

        return build_program(
            method,
            task=self.task,
            settings=self.settings,
            roles=self.roles,
            trainset=self.trainset,
            memory_dir=memory_dir,
            frozen=frozen,
            embedder=self.embedder,
            **injected,
        )


@dataclass
class TrainOutcome:
    """What a training phase produced besides its artefacts.

    Attributes:
        budget: the budget as applied (after clamping), reported per method.
        info: anything worth reporting (optimiser scores, candidates, memory version).
        curve: per-batch learning curve, ``[{"batch": 1, "score": 0.4, ...}, ...]`` (memory methods).
        growth: per-batch memory size, ``[{"batch": 1, "size": 12, "unit": "rules+facts"}, ...]``.
        searches: web searches made while training.
        fetches: page fetches made while training.
        artefacts: artefact paths relative to the method directory (``{"program": "program.json"}``).
    """

    budget: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    curve: list[dict[str, Any]] = field(default_factory=list)
    growth: list[dict[str, Any]] = field(default_factory=list)
    searches: int = 0
    fetches: int = 0
    artefacts: dict[str, str] = field(default_factory=dict)


class MethodRunner(Protocol):
    """A compared method: ``train`` leaves a frozen artefact in ``method_dir``; ``load`` rebuilds the test program.

    A runner with its own test protocol may also define ``test(ctx, spec, method_dir, models)`` returning
    ``(scores, failed, measures, PhaseCost, info)`` (or ``None`` to be evaluated the usual way); JitMem's test stream
    does. ``remote(ctx, spec, method_dir)`` gives the fields a Ray worker builds the loaded program from
    (:class:`memento.execution.forward_worker.WorkerSpec`: method, memory, frozen, program_state); every built-in runner
    has it.
    """

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome: ...

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module: ...


def reused_memory(source: str) -> TrainOutcome:
    """The training outcome of a method that reads the memory ``source`` trained in the same comparison."""
    return TrainOutcome(
        info={"memory_from": source, "note": f"reads the memory trained by `{source}` (its cost)"},
        artefacts={"memory": f"../{source}/{MEMORY_DIR}"},
    )


def saved_program_fields(spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
    """A worker's build of a saved program (``ProgramRunner``, ``OptimizerRunner``): the base method and the state
    the training phase saved, shipped as JSON (a node need not see this machine's disk)."""
    import json

    return {"method": spec.base, "program_state": json.loads((method_dir / PROGRAM_FILE).read_text(encoding="utf-8"))}


def frozen_memory_fields(method: str, memory_dir: Path) -> dict[str, Any]:
    """A worker's build of a memory method at test time: the memory opened read-only by its location."""
    return {"method": method, "memory": memory_dir, "frozen": True}


@contextlib.contextmanager
def metered(roles: Any) -> Iterator[tuple[UsageMeter, list[float]]]:
    """Meter LM use under ``roles`` and the wall time (``clock[1]``, seconds, set when the block ends)."""
    meter = UsageMeter(roles)
    clock = [time.perf_counter(), 0.0]
    with meter:
        try:
            yield meter, clock
        finally:
            clock[1] = time.perf_counter() - clock[0]
