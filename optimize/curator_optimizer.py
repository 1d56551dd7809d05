"""Curator learning without weights: optimise the JitMem curator's instructions with GEPA or MIPROv2.

The JitMem paper trains its curator with GRPO on the immediate task reward (the executor's score on the task the
payload was written for). Our curator is a DSPy module, so :func:`optimize_curator` learns the same thing in prompt
space: it compiles a wrapper module whose *only* named predictor is the curator's ``CurateMemory`` predictor, while
the executor and the bank are held outside the module tree (not optimised, not deep-copied, never forked). Each
metric call runs retrieve -> curate (candidate instructions) -> execute, and scores the executor's prediction with
the task metric; nothing is written to the bank during optimisation.

- ``optimizer="gepa"``: ``dspy.GEPA(metric, max_metric_calls=budget, reflection_lm=...)``; the metric's textual
  feedback drives the reflection.
- ``optimizer="miprov2"``: ``dspy.MIPROv2(auto=None, num_candidates=..., max_*_demos=0)`` with ``num_trials=budget``
  and ``minibatch_size`` clamped to the validation set: instruction proposals only, no demonstrations.

Example:
    >>> from memento.optimize.curator_optimizer import optimize_curator
    >>> curator = optimize_curator(agent, trainset, task.metric, optimizer="gepa", budget=40,
    ...                            reflection_lm=roles.reflection_lm)  # doctest: +SKIP
    >>> agent.curator is curator  # installed into the agent  # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar

import dspy

from memento.core.errors import ConfigError
from memento.metrics.feedback_metric import feedback_metric
from memento.optimize.optimizers import optimizer_output
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.records.usage import NamedPredictors

__all__ = ["optimize_curator", "optimize_curator_staged", "CuratorUnderTraining", "feedback_metric"]

logger = logging.getLogger(__name__)


T = TypeVar("T")


class _Held(Generic[T]):
    """Hides an object from DSPy's parameter walk and shares it across deep copies (the executor and the bank)."""

    def __init__(self, obj: T) -> None:
        self.obj = obj

    def __deepcopy__(self, memo: dict[int, Any]) -> _Held[T]:
        return self


class CuratorUnderTraining(dspy.Module, metaclass=NamedPredictors):
    """The JitMem pipeline as seen by an optimizer: the curator is the only trainable part.

    ``forward(**example_inputs)`` retrieves from the agent's bank (excluding the example's own ``id``), curates with
    *this* module's curator and runs the agent's executor with the payload; it never judges or stores.

    Example:
        >>> student = CuratorUnderTraining(agent)  # doctest: +SKIP
        >>> [name for name, _ in student.named_predictors()]  # doctest: +SKIP
        ['curator.curate']
    """

    def __init__(self, agent: JitMemAgent, curator: JitMemCurator | None = None) -> None:
        super().__init__()
        self.curator = curator if curator is not None else agent.curator
        self._agent = _Held(agent)

    @property
    def agent(self) -> JitMemAgent:
        return self._agent.obj

    def forward(self, **kwargs: Any) -> dspy.Prediction:
        if "task_id" not in kwargs and kwargs.get("id"):
            kwargs = {**kwargs, "task_id": kwargs["id"]}
        return self.agent.run(kwargs, store=False, curator=self.curator)


def _float_metric(metric: Callable[..., Any]) -> Callable[..., float]:
    scored = feedback_metric(metric)

    def wrapped(gold: Any, pred: Any, trace: Any = None, *args: Any, **kwargs: Any) -> float:
        return float(scored(gold, pred, trace).score)

    wrapped.__name__ = getattr(metric, "__name__", "metric")
    return wrapped


def _with_inputs(examples: Sequence[Any], fields: list[str]) -> list[dspy.Example]:
    out: list[dspy.Example] = []
    for example in examples:
        ex = example if isinstance(example, dspy.Example) else dspy.Example(**dict(example))
        extra = [f for f in ("cutoff", "id") if ex.get(f) not in (None, "")]
        out.append(ex.with_inputs(*fields, *extra))
    return out


def optimize_curator(
    agent_or_curator: JitMemAgent | JitMemCurator,
    trainset: Sequence[Any],
    metric: Callable[..., Any],
    *,
    optimizer: Literal["gepa", "miprov2"] = "gepa",
    budget: int = 40,
    reflection_lm: dspy.LM | None = None,
    valset: Sequence[Any] | None = None,
    num_candidates: int = 3,
    seed: int = 0,
    threads: int = 1,
) -> JitMemCurator:
    """Optimise the curator's instructions on the immediate task reward within a fixed budget.

    Args:
        agent_or_curator: a :class:`JitMemAgent` (the reward is the task metric on the executor's prediction; the
            optimised curator is installed into the agent) or a bare :class:`JitMemCurator` (the metric scores its
            payload directly; examples carry ``task`` and ``trajectories``).
        trainset: examples with the task's input fields (and optionally ``id``, ``cutoff``) and labels.
        metric: the task metric (``metric(example, pred, trace=None, ...)`` -> number or ``Prediction(score,
            feedback)``).
        optimizer: ``"gepa"`` or ``"miprov2"``.
        budget: GEPA's ``max_metric_calls``; MIPROv2's ``num_trials``.
        reflection_lm: GEPA's reflection LM / MIPROv2's proposal model (default: the configured LM).
        valset: validation examples (default: the trainset).
        num_candidates: MIPROv2 instruction candidates.
        seed: optimizer seed.
        threads: evaluation threads.

    Returns:
        The optimised curator (a new module; under an agent it also replaces ``agent.curator``).

    Raises:
        ConfigError: an unknown optimizer, an empty trainset, a budget below 1, or no LM for the reflection.
    """
    if optimizer not in ("gepa", "miprov2"):
        raise ConfigError(f"unknown curator optimizer {optimizer!r}; use 'gepa' or 'miprov2'")
    if not trainset:
        raise ConfigError("optimize_curator needs a non-empty trainset")
    if budget < 1:
        raise ConfigError(f"budget must be >= 1, got {budget}")
    reflection = reflection_lm or dspy.settings.lm
    if reflection is None:
        raise ConfigError("optimize_curator needs an LM: pass reflection_lm= or configure one with memento.configure")

    if isinstance(agent_or_curator, JitMemAgent):
        agent: JitMemAgent | None = agent_or_curator
        student: dspy.Module = CuratorUnderTraining(agent_or_curator)
        fields = agent_or_curator.task.input_fields
    elif isinstance(agent_or_curator, JitMemCurator):
        agent = None
        student = agent_or_curator
        fields = ["task", "trajectories"] if agent_or_curator.task_conditioning else ["trajectories"]
    else:
        raise ConfigError(f"optimize_curator takes a JitMemAgent or a JitMemCurator, got {type(agent_or_curator)}")
    train = _with_inputs(trainset, fields)
    val = _with_inputs(valset, fields) if valset else None

    if optimizer == "gepa":
        teleprompter = dspy.GEPA(
            metric=feedback_metric(metric),
            max_metric_calls=budget,
            reflection_lm=reflection,
            num_threads=threads,
            seed=seed,
            track_stats=False,
        )
        with optimizer_output():
            compiled = teleprompter.compile(student, trainset=train, valset=val)
    else:
        val_for_mipro = val or train
        teleprompter = dspy.MIPROv2(
            metric=_float_metric(metric),
            prompt_model=reflection,
            auto=None,
            num_candidates=num_candidates,
            max_bootstrapped_demos=0,
            max_labeled_demos=0,
            num_threads=threads,
            seed=seed,
            verbose=False,
        )
        with optimizer_output():
            compiled = teleprompter.compile(
                student,
                trainset=train,
                valset=val_for_mipro,
                num_trials=budget,
                minibatch=len(val_for_mipro) > 1,
                minibatch_size=max(1, min(len(val_for_mipro), 35)),
                minibatch_full_eval_steps=max(1, min(5, budget)),
            )
    curator = compiled.curator if agent is not None else compiled
    if not isinstance(curator, JitMemCurator):
        raise ConfigError(f"the optimizer returned {type(curator).__name__}, not a JitMemCurator")
    if agent is not None:
        agent.curator = curator
    logger.info("curator optimised with %s: %s", optimizer, curator.curate.signature.instructions[:200])
    return curator


def optimize_curator_staged(
    agent: JitMemAgent,
    trainset: Sequence[Any],
    metric: Callable[..., Any],
    *,
    rebuild_dir: Any,
    budget: int = 40,
    threshold: float | None = None,
    **options: Any,
) -> tuple[JitMemCurator, dict[str, Any]]:
    """Curator learning with a staged bank refresh: half the budget on the agent's bank, then the training bank is
    rebuilt by rerunning the executor with the curator learned so far (each training example once, gated by the
    metric, into a new bank at ``rebuild_dir``), held fixed, and the rest of the budget is spent on it.

    The agent's own bank is only read (the first stage retrieves from it, the rebuild's runs read it too); afterwards
    the agent reads the rebuilt bank. ``options`` go to :func:`optimize_curator` (``optimizer``, ``reflection_lm``,
    ``seed``, ``threads``...). Returns the curator and ``{"stage_budgets", "rebuilt_bank", "bank_size", "stored"}``.
    """
    from pathlib import Path

    from memento.memory.trajectory_bank import TrajectoryBank
    from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD
    from memento.optimize.jitmem_stream import build_training_bank

    if budget < 2:
        raise ConfigError(f"a staged bank refresh needs a budget of at least 2 (one per stage), got {budget}")
    first = budget // 2
    optimize_curator(agent, trainset, metric, budget=first, **options)
    target = Path(rebuild_dir)
    if (target / "trajectories.sqlite3").exists():
        raise ConfigError(f"{target} already holds a trajectory bank: give the staged refresh a new directory")
    fresh = TrajectoryBank(target, policy=agent.bank.policy, bm25=agent.bank.bm25)
    result = build_training_bank(
        agent,
        list(trainset),
        metric,
        threshold=DEFAULT_SUCCESS_THRESHOLD if threshold is None else threshold,
        threads=int(options.get("threads", 1) or 1),
        into=fresh,
    )
    agent.bank = fresh  # held fixed: the second stage only reads it
    curator = optimize_curator(agent, trainset, metric, budget=budget - first, **options)
    info = {
        "stage_budgets": [first, budget - first],
        "rebuilt_bank": str(target),
        "bank_size": len(fresh),
        "stored": sum(1 for item in result.items if item.stored),
    }
    logger.info("staged bank refresh: %s", info)
    return curator, info
