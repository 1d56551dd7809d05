"""CBR training (:func:`fit_cases`): a retaining case-based agent run over a task set in batches, ``passes`` times,
the bank growing; every call is the one ``memento run --method cbr`` makes, this only orders them.
:class:`PassResult` is one pass: its batches, rewards and retrieval policies.

Example:
    >>> results = fit_cases(agent, trainset, batch_size=10, passes=3)  # doctest: +SKIP
    >>> [round(r.score, 2) for r in results]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memento.core.errors import ConfigError
from memento.core.types import new_id
from memento.execution.threads import run_parallel

if TYPE_CHECKING:
    from memento.programs.case_based_agent import CaseBasedAgent


__all__ = ["PassResult", "fit_cases"]


@dataclass
class PassResult:
    """One pass of :meth:`CaseBasedAgent.fit` over the task set: its batches and mean reward."""

    index: int
    rewards: list[float | None] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    policies: dict[str, int] = field(default_factory=dict)  # retrieval policy of each call (with cases to read)

    @property
    def score(self) -> float | None:
        """Mean reward of the pass's scored tasks (``None`` when none was scored)."""
        scored = [r for r in self.rewards if r is not None]
        return sum(scored) / len(scored) if scored else None


def fit_cases(
    agent: CaseBasedAgent,
    examples: list[Any],
    *,
    batch_size: int = 10,
    threads: int = 1,
    passes: int = 1,
    own_cases: bool = False,
    task_id: Callable[[Any], str] | None = None,
    on_batch: Callable[[int, int, list[float | None]], None] | None = None,
) -> list[PassResult]:
    """CBR training: run ``agent`` (retaining) over ``examples`` in batches, ``passes`` times, the bank growing.

    Every call is the same one ``memento run --method cbr`` makes (retrieve by the agent's policy, plan, execute,
    answer, retain with the agent's reward and update the Q-gate); this only orders the calls. Labels ride along in
    the keyword arguments, so an agent with a ``reward_fn`` scores with them. ``passes > 1`` is Memento's iteration
    table: the same task set again, reading the cases of earlier passes. A task never reads a case written by a run
    with its own task id, unless ``own_cases=True`` (the explicit switch of the multi-pass runner; the paper's
    iterations may retrieve a task's own earlier case).

    Returns one :class:`PassResult` per pass (``batches``: ``{"batch", "score", "n", "cases"}`` after each batch).
    """
    if passes < 1:
        raise ConfigError(f"passes must be >= 1, got {passes}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if not agent.retain_cases:
        raise ConfigError("fit_cases needs an agent that retains cases (retain=True, a writable bank)")
    ident = task_id or (lambda ex: str(ex.get("id", None) or new_id("t-")))
    ids = [ident(ex) for ex in examples]
    previous = agent.own_cases
    agent.own_cases = own_cases
    results: list[PassResult] = []
    try:
        for index in range(1, passes + 1):
            result = PassResult(index=index)

            def run_one(pos: int) -> tuple[float | None, str | None]:
                example = examples[pos]
                data = dict(example.items()) if hasattr(example, "items") else dict(example)
                pred = agent(**data, task_id=ids[pos])
                return pred.cbr.get("reward"), pred.cbr.get("policy") if pred.cbr.get("retrieved") else None

            for batch, start in enumerate(range(0, len(examples), batch_size), 1):
                positions = list(range(start, min(start + batch_size, len(examples))))
                outcomes = run_parallel(run_one, positions, threads=threads)
                rewards = [reward for reward, _ in outcomes]
                for _, policy in outcomes:
                    if policy is not None:
                        result.policies[policy] = result.policies.get(policy, 0) + 1
                result.rewards.extend(rewards)
                scored = [r for r in rewards if r is not None]
                result.batches.append(
                    {
                        "batch": batch,
                        "score": sum(scored) / len(scored) if scored else None,
                        "n": len(rewards),
                        "cases": agent.bank.count(),
                    }
                )
                if on_batch is not None:
                    on_batch(index, batch, rewards)
            results.append(result)
    finally:
        agent.own_cases = previous
    agent.bank.save()
    return results
