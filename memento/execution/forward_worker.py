"""The Ray executor's worker: one actor per node builds the run's program from its settings and runs forward passes.

A :class:`WorkerSpec` says what to build (method, task, metric, the memory's location and the version the run
pinned, a saved program state); nothing live is shipped. The actor opens memory read-only by its location and
checks it reads the version the driver pinned, runs each example in one of its threads (``run.threads`` per node),
and returns an :class:`Outcome`: the example's record (with its trajectory), the LM calls it made (for the
driver's ``--log-lm``) and their usage (for the driver's meters). It never writes memory: the driver writes what
runs return, distils and commits.

Example:
    >>> worker = ray.remote(ForwardWorker).remote()  # doctest: +SKIP
    >>> outcome = ray.get(worker.run_example.remote(spec_ref, 0, example))  # doctest: +SKIP
    >>> outcome.value.score  # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

from dspy.utils.callback import BaseCallback

from memento.core.types import Usage

__all__ = ["ForwardWorker", "Outcome", "WorkerSpec"]


@dataclass
class WorkerSpec:
    """What a worker builds. ``key`` names one build: a new key (a new batch's memory version) rebuilds.

    Attributes:
        settings: the run's :class:`memento.core.config.Settings`.
        method, task, metric: as the command was given them (``metric`` ``None``: no scoring, train's Phase A).
        memory: the memory's location (a directory or ``postgresql://...``), or ``None``.
        frozen: ``build_program``'s ``frozen`` (``"forward"``: the training form over a read-only memory).
        program_state: a saved program state (``program.save``'s JSON) loaded after building.
        trainset: labelled examples for methods that take them (few-shot demos).
        embedder: the ``--embedder`` name (``None``: the builder's default).
        memory_version: the MEMENTO memory version the driver pinned; a worker reading another one refuses.
        memory_pins: what the driver's program reads at test time (:func:`memento.memory.pins.memory_pins`: the
            memory's version and change-log entry, the banks' high-water marks, as results.json records them); a
            worker whose program reads another state refuses, so every example of a results file read one state.
        budget: the cluster's LM budget actor (:mod:`memento.execution.lm_budget`) and the roles it limits.
        log_lm: return each LM call's log record (the driver writes them to its ``--log-lm`` file).
    """

    key: str
    settings: Any
    method: str
    task: str
    metric: str | None = None
    memory: str | None = None
    frozen: Any = True
    program_state: dict[str, Any] | None = None
    trainset: list[Any] | None = None
    embedder: str | None = None
    memory_version: int | None = None
    memory_pins: dict[str, Any] | None = None
    budget: Any = None
    budget_roles: set[str] = field(default_factory=set)
    log_lm: bool = False


@dataclass
class Outcome:
    """What one task returns: its value or the exception that ended it, the node, and what the driver gathers."""

    value: Any = None
    error: BaseException | None = None
    node: str = ""
    usage: Usage = field(default_factory=Usage)
    log: list[dict[str, Any]] = field(default_factory=list)
    call_errors: list[str | None] = field(default_factory=list)  # per LM call in the order they ended: None if ok


class _CallErrors(BaseCallback):
    """A DSPy callback noting how each LM call of a task ended (the driver's failure watch reads them)."""

    def __init__(self) -> None:
        self.errors: list[str | None] = []
        self._lock = threading.Lock()

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        text = str(exception).splitlines()[0] if exception is not None and str(exception) else ""
        with self._lock:
            self.errors.append(None if exception is None else f"{type(exception).__name__}: {text}")


_embedders: dict[str, Any] = {}
_embedders_lock = threading.Lock()


def _embedder(name: str) -> Any:
    """The ``--embedder`` of that name, loaded once per worker process (a new batch rebuilds the program, not it)."""
    from memento.cli.commands._options import embedder_named

    with _embedders_lock:
        if name not in _embedders:
            _embedders[name] = embedder_named(name)
        return _embedders[name]


class _Built:
    def __init__(self, spec: WorkerSpec) -> None:
        import memento
        from memento.cli.commands.run import resolve_task
        from memento.execution.lm_budget import BudgetClient
        from memento.llm.lm import dspy_defaults
        from memento.llm.lm_limiter import set_limiter_source
        from memento.programs.registry import build_program

        settings = spec.settings
        if spec.budget is not None:
            set_limiter_source(BudgetClient(spec.budget, roles=spec.budget_roles).limiter)
        self.roles = memento.configure(settings, set_default=False)  # dspy.context per call: actor threads vary
        self.defaults = dspy_defaults(self.roles)
        self.task = resolve_task(spec.task, roles=self.roles, threads=settings.run.threads)
        self.metric = self.task.make_metric(spec.metric, roles=self.roles) if spec.metric is not None else None
        injected: dict[str, Any] = {}
        if spec.embedder is not None:
            injected["embedder"] = _embedder(spec.embedder)
        self.program = build_program(
            spec.method,
            task=self.task,
            settings=settings,
            roles=self.roles,
            trainset=spec.trainset,
            memory_dir=spec.memory,
            frozen=spec.frozen,
            **injected,
        )
        if spec.program_state is not None:
            with tempfile.TemporaryDirectory(prefix="memento-state") as tmp:
                path = os.path.join(tmp, "program.json")
                with open(path, "w", encoding="utf-8") as fh:
                    json.dump(spec.program_state, fh)
                self.program.load(path)
        if spec.memory_version is not None:  # a MEMENTO memory, or a JitMem agent's trajectory bank
            store = getattr(self.program, "memory", None) or getattr(self.program, "bank", None)
            version = getattr(store, "version", None)
            if version != spec.memory_version:
                from memento.core.errors import DataError

                raise DataError(
                    f"a Ray worker opened {spec.memory} at version {version}, not the version {spec.memory_version} "
                    "this run reads: another writer changed the memory"
                )
        if spec.memory_pins is not None:  # test time: the state the driver pinned and results.json records
            from memento.core.errors import DataError
            from memento.memory.pins import describe_pins, memory_pins

            pins = memory_pins(self.program)
            if pins != spec.memory_pins:
                raise DataError(
                    f"a Ray worker reads {spec.memory} as {describe_pins(pins)}, not {describe_pins(spec.memory_pins)} "
                    "as this run pinned it: another writer changed the memory after this run opened it"
                )


class ForwardWorker:
    """The worker actor's class (``ray.remote(ForwardWorker)``, one per node, ``run.threads`` calls at once)."""

    def __init__(self) -> None:
        import ray

        self.node = str(ray.get_runtime_context().get_node_id())
        self.address = ray.util.get_node_ip_address()
        self._lock = threading.Lock()
        self._key: str | None = None
        self._built: _Built | None = None

    def where(self) -> tuple[str, str]:
        """This actor's node id and address."""
        return self.node, self.address

    def _build(self, spec: WorkerSpec) -> _Built:
        with self._lock:  # the first call of a spec builds; the others wait for it
            if self._key != spec.key or self._built is None:
                self._built = None
                self._built = _Built(spec)
                self._key = spec.key
            return self._built

    def _run(self, spec: WorkerSpec, fn: Any) -> Outcome:
        import dspy

        from memento.records.lm_log import LMCallLog
        from memento.records.usage import UsageMeter

        outcome = Outcome(node=self.address)
        try:
            built = self._build(spec)
            meter = UsageMeter(built.roles)
            log = LMCallLog(None, roles=built.roles) if spec.log_lm else None
            ended = _CallErrors()
            callbacks = [*dspy.settings.get("callbacks", []), ended]
            with dspy.context(**built.defaults, callbacks=callbacks), meter:
                with log if log is not None else contextlib.nullcontext():
                    outcome.value = fn(built)
            outcome.usage = meter.usage()
            outcome.log = list(log.records) if log is not None else []
            outcome.call_errors = list(ended.errors)
        except BaseException as exc:  # noqa: BLE001 - a cancel or a fatal error goes back to the driver as a value
            outcome.error = exc
        return outcome

    def run_example(self, spec: WorkerSpec, index: int, example: Any) -> Outcome:
        """``score_example``: the program on one example, then the metric; the record names this node."""
        from memento.metrics.evaluation import score_example

        def one(built: _Built) -> Any:
            assert built.metric is not None, "run_example needs a spec with a metric"
            record = score_example(built.program, built.metric, example, index, roles=built.roles)
            record.node = self.address
            return record

        return self._run(spec, one)

    def forward(self, spec: WorkerSpec, inputs: dict[str, Any], cutoff: Any, task_id: str) -> Outcome:
        """Train's Phase A for one example: :func:`memento.optimize.memento_trainer.forward_run`."""
        from memento.optimize.memento_trainer import forward_run

        return self._run(spec, lambda built: forward_run(built.program, inputs, cutoff, task_id))

    def call(self, spec: WorkerSpec, fn: Any, *args: Any) -> Outcome:
        """``fn(program, *args)`` on the built program (compare's and JitMem's batches)."""
        return self._run(spec, lambda built: fn(built, *args))

    def cancel(self) -> None:
        """Stop this worker's running examples at their next LM call (as Ctrl-C does in one process)."""
        from memento.core.cancel import request_cancel

        request_cancel()
