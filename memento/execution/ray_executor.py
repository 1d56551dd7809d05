"""The Ray executor (``--executor ray``): a command's forward passes as Ray tasks over a cluster.

The driver (the command's process) starts or joins the cluster (:class:`memento.execution.ray_cluster.RayCluster`),
starts the run's LM budget actor (:mod:`memento.execution.lm_budget`: each role's ``max_concurrency`` and
``requests_per_minute`` held across every process) and one :class:`~memento.execution.forward_worker.ForwardWorker`
actor per node, then hands out work: each example is one actor task, at most ``run.threads`` in flight per node, the
next one going to the least busy node. Workers build the program from a
:class:`~memento.execution.forward_worker.WorkerSpec` (settings, method, the memory's location and pinned version, a
saved program state) and return records; the driver gathers what the threads executor gathers in one process: results in
input order, progress as each example finishes, the LM calls of every task into its meters, ``--log-lm`` file and
failure watch (``absorb_remote``). Memory writes, distillation and commits stay on the driver.

A cancel (Ctrl-C, SIGTERM) stops handing out work, tells every worker to stop at its next LM call, keeps what
finishes within ``run.cancel_grace`` seconds and raises :class:`~memento.core.errors.Cancelled`; a fatal error in one
task stops handing out work and is raised once the running tasks have returned, as with threads.

Example:
    >>> with RayExecutor(settings) as ex:  # doctest: +SKIP
    ...     result = evaluate(program, examples, metric, remote=ex.examples(ex.spec(method="aet", task="qa")))
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Self

from memento.core.cancel import cancel_requested, check_cancelled
from memento.core.errors import Cancelled, ConfigError, FatalError

__all__ = ["RayExecutor", "executor_for", "is_shared_location"]

logger = logging.getLogger(__name__)

_POLL_SECONDS = 0.2


def is_shared_location(location: Any) -> bool:
    """Whether a memory location can be read from every node (PostgreSQL), not only from one machine's disk."""
    from memento.memory.location import is_postgres

    return is_postgres(location)


class RayExecutor:
    """Forward passes on a Ray cluster for one command (a context manager: start, run, stop).

    Args:
        settings: the run's settings (``[run] threads``, ``ray_address``, ``ray_cpus``, ``cancel_grace``; the LM
            roles' limits; ``observe.log_lm``).
    """

    def __init__(self, settings: Any) -> None:
        from memento.execution.ray_cluster import RayCluster

        self.settings = settings
        self.threads = int(settings.run.threads)
        self.cluster = RayCluster(settings.run)
        self.nodes: list[Any] = []
        self.budget: Any = None
        self.workers: list[Any] = []
        self.addresses: list[str] = []
        self._budget_roles: set[str] = set()

    # -- start and stop ------------------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        self.cluster.__enter__()
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from memento.execution.forward_worker import ForwardWorker
        from memento.execution.lm_budget import BudgetClient, role_limits, start_budget
        from memento.llm.lm_limiter import set_limiter_source

        self.nodes = self.cluster.nodes()
        if not self.nodes:
            raise ConfigError("the Ray cluster has no alive node with CPUs")
        limits = role_limits(self.settings)
        if limits:  # one budget for every process of the run, the driver's own calls (distillers, judges) included
            self.budget = start_budget(limits, name=f"memento-lm-budget-{uuid.uuid4().hex[:12]}")
            self._budget_roles = set(limits)
            set_limiter_source(BudgetClient(self.budget, roles=self._budget_roles).limiter)
        actor = ray.remote(ForwardWorker)
        for node in self.nodes:
            strategy = NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False)
            self.workers.append(
                actor.options(num_cpus=1, max_concurrency=self.threads + 2, scheduling_strategy=strategy).remote()
            )
        self.addresses = [address for _node, address in ray.get([w.where.remote() for w in self.workers])]
        logger.info("Ray executor: %d nodes (%s), %d examples in flight per node", len(self.nodes),
                    ", ".join(self.addresses), self.threads)  # fmt: skip

    def __exit__(self, *exc: object) -> None:
        from memento.llm.lm_limiter import set_limiter_source

        set_limiter_source(None)
        try:
            import ray

            if ray.is_initialized():
                for handle in [*self.workers, *([self.budget] if self.budget is not None else [])]:
                    try:
                        ray.kill(handle)
                    except Exception as kill_exc:  # noqa: BLE001 - a dead actor is already stopped
                        logger.debug("ray.kill: %s", kill_exc)
        finally:
            self.workers, self.budget = [], None
            self.cluster.__exit__(None, None, None)

    # -- what the run records ------------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """The executor as provenance records it: kind, node count and addresses, the cluster address."""
        return {
            "executor": "ray",
            "nodes": len(self.nodes),
            "node_addresses": list(self.addresses),
            "ray_address": self.settings.run.ray_address or "local",
            "threads_per_node": self.threads,
        }

    def describe(self) -> str:
        """One line: the nodes, the examples in flight per node, the cluster-wide LM limits."""
        where = (
            "a local Ray cluster"
            if self.settings.run.ray_address is None
            else f"Ray at {self.settings.run.ray_address}"
        )
        limits = []
        for role in sorted(self._budget_roles):
            r = self.settings.role(role)
            parts = [
                f"{r.max_concurrency} in flight" if r.max_concurrency else "",
                f"{r.requests_per_minute:g}/min" if r.requests_per_minute else "",
            ]
            limits.append(f"{role} " + ", ".join(p for p in parts if p))
        budget = f"; LM limits held cluster-wide: {'; '.join(limits)}" if limits else ""
        return (
            f"forward passes on {where}: {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''} "
            f"({', '.join(self.addresses)}), {self.threads} examples in flight per node{budget}"
        )

    def budget_stats(self) -> dict[str, dict[str, Any]]:
        """The LM budget's per-role figures (peak in flight, permits granted); empty when no role is limited."""
        if self.budget is None:
            return {}
        from memento.execution.lm_budget import BudgetClient

        return BudgetClient(self.budget, roles=self._budget_roles).stats()

    def check_memory(self, location: Any) -> None:
        """Refuse (one line) a memory on one machine's disk when the cluster has several nodes."""
        if location is None or len(self.nodes) <= 1 or is_shared_location(location):
            return
        raise ConfigError(
            f"--executor ray: the memory {location} is a SQLite memory on this machine's disk and the Ray cluster has "
            f"{len(self.nodes)} nodes; use a PostgreSQL memory (postgresql://...) or a single-node cluster"
        )

    def spec(self, **fields: Any) -> Any:
        """A :class:`~memento.execution.forward_worker.WorkerSpec` for this run (settings, budget, --log-lm
        filled in)."""
        from memento.execution.forward_worker import WorkerSpec

        if fields.get("memory") is not None:  # by its location: a DSN, or a directory made absolute
            self.check_memory(fields["memory"])
            memory = fields["memory"]
            fields["memory"] = str(memory) if is_shared_location(memory) else os.path.abspath(os.fspath(memory))
        return WorkerSpec(
            key=uuid.uuid4().hex,
            settings=self.settings,
            budget=self.budget,
            budget_roles=set(self._budget_roles),
            log_lm=self.settings.observe.log_lm is not None,
            **fields,
        )

    # -- running -------------------------------------------------------------------------------------------------
    def map(
        self,
        method: str,
        spec: Any,
        calls: Sequence[tuple[Any, ...]],
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """Call the workers' ``method(spec, *args)`` for each ``args`` of ``calls``; the values in input order.

        ``on_result(i, value)`` is called in this thread as each task finishes. A fatal error stops handing out
        tasks and is raised once the running ones returned; a cancel stops them (see the module docstring).
        """
        import ray

        spec_ref = ray.put(spec)
        values: list[Any] = [None] * len(calls)
        queue = list(range(len(calls)))[::-1]  # popped from the end: input order
        running: dict[Any, tuple[int, int]] = {}  # task -> (worker, call index)
        load = [0] * len(self.workers)
        failure: BaseException | None = None
        cancelled: BaseException | None = None
        stop_at: float | None = None
        while True:
            if cancel_requested() and stop_at is None:
                stop_at = self._cancel_workers()
            while queue and failure is None and stop_at is None:
                worker = min(range(len(self.workers)), key=lambda w: (load[w], w))
                if load[worker] >= self.threads:
                    break
                i = queue.pop()
                ref = getattr(self.workers[worker], method).remote(spec_ref, *calls[i])
                running[ref] = (worker, i)
                load[worker] += 1
            if not running:
                break
            if stop_at is not None and time.monotonic() > stop_at:
                break  # the grace is over: what has not returned is abandoned (its worker is killed on exit)
            # the first task to finish frees its slot at once (waiting for all of them, or for the poll, left
            # each slot idle up to _POLL_SECONDS per task: ~200 ms per LM call in bench/bench_ray_executor.py)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=_POLL_SECONDS)
            for ref in ready:
                worker, i = running.pop(ref)
                load[worker] -= 1
                try:
                    outcome = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - the worker process died (killed, out of memory)
                    failure = failure or FatalError(
                        f"a Ray worker on {self.addresses[worker]} stopped: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}"
                    )
                    continue
                if outcome.error is not None:
                    if isinstance(outcome.error, Cancelled):
                        cancelled = cancelled or outcome.error
                    else:
                        failure = failure or outcome.error
                    self._absorb(outcome)
                    continue
                self._absorb(outcome)
                values[i] = outcome.value
                if on_result is not None:
                    on_result(i, outcome.value)
        if failure is not None:
            raise failure
        check_cancelled()
        if cancelled is not None:  # a worker was cancelled without a cancel here (another driver's): say so
            raise cancelled
        return values

    def _cancel_workers(self) -> float:
        """Tell every worker to stop; returns when the grace for finishing runs ends."""
        for worker in self.workers:
            worker.cancel.remote()
        grace = float(getattr(self.settings.run, "cancel_grace", 3.0))
        return time.monotonic() + grace

    @staticmethod
    def _absorb(outcome: Any) -> None:
        """Hand a task's LM calls to the callbacks active here that gather them (meters, --log-lm, watches)."""
        import dspy

        seen: set[int] = set()
        for callback in dspy.settings.get("callbacks", None) or []:
            absorb = getattr(callback, "absorb_remote", None)
            if absorb is not None and id(callback) not in seen:
                seen.add(id(callback))
                absorb(outcome)

    # -- what the commands use -----------------------------------------------------------------------------------
    def examples(self, spec: Any) -> Callable[[list[tuple[int, Any]], Callable[[Any], None]], None]:
        """``evaluate(remote=...)``: each ``(index, example)`` scored on the cluster, each record handed to ``done``."""

        def run(todo: list[tuple[int, Any]], done: Callable[[Any], None]) -> None:
            self.map("run_example", spec, [(index, example) for index, example in todo], lambda _i, rec: done(rec))

        return run

    def stream_runs(self, spec_for: Callable[[int], Any]) -> Callable[[list[tuple[Any, Any]], int], list[Any]]:
        """``jitmem_stream.stream(remote=...)``: a stream batch's tasks on the cluster over the bank at the batch's
        version (``spec_for(version)``); each returns its item and the trajectories it offered the bank."""
        from memento.optimize.jitmem_stream import remote_stream_task

        def run(jobs: list[tuple[Any, Any]], version: int) -> list[Any]:
            return self.map("call", spec_for(version), [(remote_stream_task, ex, item) for ex, item in jobs])

        return run

    def forward_runs(self, spec_for: Callable[[], Any]) -> Callable[..., list[Any]]:
        """``MementoTrainer.remote_forward``: Phase A's runs on the cluster; ``spec_for()`` is asked per batch (the
        memory's version changes between batches). ``on_result(j, run)`` is called here as run ``j`` returns (the
        trainer checkpoints it)."""

        def run(jobs: list[tuple[Any, Any, str]], on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
            return self.map("forward", spec_for(), list(jobs), on_result)

        return run


@contextlib.contextmanager
def executor_for(settings: Any) -> Iterator[RayExecutor | None]:
    """The Ray executor when ``run.executor`` is ``"ray"`` (started for the block), else ``None`` (threads)."""
    if settings.run.executor != "ray":
        yield None
        return
    with RayExecutor(settings) as executor:
        yield executor
