"""DSPy's prompt optimisers behind one call, with fixed budgets: GEPA, MIPROv2 and BootstrapFewShot.

:func:`optimize_program` compiles a base program (``react``, ``aet``, ``closed_book`` ...) with one optimiser under a
:class:`memento.optimize.budgets.CompareBudget`, the same LM roles as every other compared method, and the task's
metric:

- **GEPA** gets the metric wrapped in :class:`memento.metrics.predictor_feedback.PredictorFeedback` (same score;
  the feedback is written for the predictor GEPA rewrites: uncovered targets for planners, the node's outcome and
  sources for the solver, format versus content errors for the answer) and the ``reflection_lm`` role. GEPA
  matches captured traces to predictors by signature, so every
  predictor of the program must have a distinct signature: :func:`check_distinct_signatures` refuses a program
  where two are equal instead of letting GEPA mix their traces silently.
- **MIPROv2** and **BootstrapFewShot** get the metric as a float (a Prediction is always truthy). MIPROv2 proposes
  with the ``reflection_lm`` role and runs the task with ``lm``; its ``minibatch_size`` is clamped to the valset.

The optimisers hold out ``val_fraction`` of the training set (seeded) as their validation set.

Example:
    >>> from memento.optimize.optimizers import optimize_program  # doctest: +SKIP
    >>> result = optimize_program("gepa", program, trainset=train, metric=task.metric, roles=roles,
    ...                           budget=resolve_budget("tiny"))  # doctest: +SKIP
    >>> result.program.save("program.json")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from memento.core.errors import ConfigError
from memento.optimize.budgets import CompareBudget
from memento.utils.extras import require

__all__ = [
    "OPTIMIZERS",
    "OptimizeResult",
    "DuplicateSignatureError",
    "check_distinct_signatures",
    "holdout_split",
    "optimize_program",
    "optimizer_output",
]

logger = logging.getLogger(__name__)

OPTIMIZERS: tuple[str, ...] = ("gepa", "miprov2", "bootstrap")


class DuplicateSignatureError(ConfigError):
    """Two predictors of a program share a signature, so GEPA cannot tell their traces apart."""


@dataclass
class OptimizeResult:
    """A compiled program and the budget it was given.

    Attributes:
        program: the compiled program (a new module; the student is left untouched).
        budget: the optimiser's settings as applied (after clamping), for the report.
        info: what the optimiser reported (validation sizes, candidates explored, best validation score).
    """

    program: dspy.Module
    budget: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def check_distinct_signatures(program: dspy.Module) -> None:
    """Raise :class:`DuplicateSignatureError` when two predictors of ``program`` have equal signatures.

    Equality is DSPy's ``Signature.equals`` (same instructions and fields), which is how GEPA's adapter assigns
    trace entries to predictors.
    """
    predictors = list(program.named_predictors())
    for i, (name_a, pred_a) in enumerate(predictors):
        for name_b, pred_b in predictors[i + 1 :]:
            if pred_a.signature.equals(pred_b.signature):
                raise DuplicateSignatureError(
                    f"predictors {name_a!r} and {name_b!r} share the signature {pred_a.signature.__name__}; GEPA "
                    "matches traces to predictors by signature, so give each stage its own Signature class"
                )


def holdout_split(
    trainset: list[dspy.Example], budget: CompareBudget, *, seed: int
) -> tuple[list[dspy.Example], list[dspy.Example]]:
    """A seeded ``(train, val)`` split of the training set by ``budget.val_fraction``."""
    n_train, n_val = budget.split_sizes(len(trainset))
    order = list(range(len(trainset)))
    random.Random(seed).shuffle(order)
    val_idx = set(order[:n_val])
    train = [ex for i, ex in enumerate(trainset) if i not in val_idx]
    val = [ex for i, ex in enumerate(trainset) if i in val_idx]
    return train, val


def _float_metric(metric: Any) -> Any:
    from memento.metrics.as_float import as_float

    return as_float(metric)


@dataclass(frozen=True)
class _CompileJob:
    """What every optimiser is compiled with: the student, the split, the metric, the roles and the budget."""

    student: dspy.Module
    trainset: list[dspy.Example]
    valset: list[dspy.Example]
    metric: Any
    roles: Any
    budget: CompareBudget
    threads: int
    seed: int
    log_dir: Path | None


def _compile_gepa(job: _CompileJob) -> OptimizeResult:
    check_distinct_signatures(job.student)
    reflection_lm = getattr(job.roles, "reflection_lm", None) if job.roles is not None else None
    if reflection_lm is None:
        reflection_lm = dspy.settings.lm
    if reflection_lm is None:
        raise ConfigError("GEPA needs a reflection_lm (or an lm to fall back on); none is configured")
    applied = {
        "max_metric_calls": job.budget.gepa_max_metric_calls,
        "reflection_minibatch_size": min(job.budget.gepa_reflection_minibatch_size, len(job.trainset)),
        "val_fraction": job.budget.val_fraction,
        "train_size": len(job.trainset),
        "val_size": len(job.valset),
        "reflection_lm": str(getattr(reflection_lm, "model", "")),
    }
    from memento.metrics.predictor_feedback import PredictorFeedback

    gepa = dspy.GEPA(
        metric=PredictorFeedback(job.metric, lm=reflection_lm),  # feedback written for the predictor being rewritten
        max_metric_calls=job.budget.gepa_max_metric_calls,
        reflection_minibatch_size=applied["reflection_minibatch_size"],
        reflection_lm=reflection_lm,
        num_threads=job.threads,
        seed=job.seed,
        track_stats=True,
        log_dir=str(job.log_dir) if job.log_dir is not None else None,
    )
    compiled = gepa.compile(job.student, trainset=job.trainset, valset=job.valset)
    info: dict[str, Any] = {}
    details = getattr(compiled, "detailed_results", None)
    if details is not None:
        info["candidates"] = len(getattr(details, "candidates", []) or [])
        scores = list(getattr(details, "val_aggregate_scores", []) or [])
        best = getattr(details, "best_idx", None)
        if scores and best is not None:
            info["best_val_score"] = float(scores[best])
            info["seed_val_score"] = float(scores[0])
        info["total_metric_calls"] = getattr(details, "total_metric_calls", None)
        del compiled.detailed_results  # not part of the program's state; keeps deep copies light
    return OptimizeResult(compiled, applied, info)


def _compile_miprov2(job: _CompileJob) -> OptimizeResult:
    task_lm = getattr(job.roles, "lm", None) if job.roles is not None else None
    prompt_lm = getattr(job.roles, "reflection_lm", None) if job.roles is not None else None
    minibatch_size = min(job.budget.mipro_minibatch_size, len(job.valset))
    minibatch = len(job.valset) > minibatch_size
    applied = {
        "num_candidates": job.budget.mipro_num_candidates,
        "num_trials": job.budget.mipro_num_trials,
        "minibatch_size": minibatch_size,
        "minibatch": minibatch,
        "max_bootstrapped_demos": job.budget.mipro_max_bootstrapped_demos,
        "max_labeled_demos": job.budget.mipro_max_labeled_demos,
        "val_fraction": job.budget.val_fraction,
        "train_size": len(job.trainset),
        "val_size": len(job.valset),
        "prompt_lm": str(getattr(prompt_lm, "model", "")) if prompt_lm is not None else None,
    }
    mipro = dspy.MIPROv2(
        metric=_float_metric(job.metric),
        prompt_model=prompt_lm,
        task_model=task_lm,
        auto=None,
        num_candidates=job.budget.mipro_num_candidates,
        max_bootstrapped_demos=job.budget.mipro_max_bootstrapped_demos,
        max_labeled_demos=job.budget.mipro_max_labeled_demos,
        num_threads=job.threads,
        seed=job.seed,
        verbose=False,
        log_dir=str(job.log_dir) if job.log_dir is not None else None,
    )
    compiled = mipro.compile(
        job.student,
        trainset=job.trainset,
        valset=job.valset,
        num_trials=job.budget.mipro_num_trials,
        minibatch=minibatch,
        minibatch_size=minibatch_size,
        seed=job.seed,
    )
    info: dict[str, Any] = {}
    score = getattr(compiled, "score", None)
    if score is not None:
        info["best_val_score"] = float(score)
    trials = getattr(compiled, "trial_logs", None)
    if trials:
        info["trials_logged"] = len(trials)
    for attr in ("trial_logs", "candidate_programs", "mb_candidate_programs", "prompt_model_total_calls",
                 "total_calls", "score"):  # fmt: skip
        if attr in compiled.__dict__:
            del compiled.__dict__[attr]
    return OptimizeResult(compiled, applied, info)


def _compile_bootstrap(job: _CompileJob) -> OptimizeResult:
    applied = {
        "max_bootstrapped_demos": job.budget.bootstrap_max_bootstrapped_demos,
        "max_labeled_demos": job.budget.bootstrap_max_labeled_demos,
        "max_rounds": job.budget.bootstrap_max_rounds,
        "train_size": len(job.trainset),
    }
    optimizer = dspy.BootstrapFewShot(
        metric=_float_metric(job.metric),
        max_bootstrapped_demos=job.budget.bootstrap_max_bootstrapped_demos,
        max_labeled_demos=job.budget.bootstrap_max_labeled_demos,
        max_rounds=job.budget.bootstrap_max_rounds,
    )
    compiled = optimizer.compile(job.student, trainset=job.trainset)
    demos = sum(len(getattr(p, "demos", []) or []) for _, p in compiled.named_predictors())
    return OptimizeResult(compiled, applied, {"demos": demos})


_COMPILERS = {"gepa": _compile_gepa, "miprov2": _compile_miprov2, "bootstrap": _compile_bootstrap}
_OPTIMIZER_EXTRAS = {"miprov2": "miprov2"}  # MIPROv2 searches with optuna


def require_optimizer_extras(optimizer: str) -> None:
    """One line naming the extra when ``optimizer`` needs one that is not installed (MIPROv2: ``miprov2``)."""
    if optimizer in _OPTIMIZER_EXTRAS:
        require(_OPTIMIZER_EXTRAS[optimizer], "MIPROv2" if optimizer == "miprov2" else optimizer)


def optimize_program(
    optimizer: str,
    student: dspy.Module,
    *,
    trainset: list[dspy.Example],
    metric: Any,
    roles: Any = None,
    budget: CompareBudget,
    threads: int = 1,
    seed: int = 42,
    log_dir: Path | None = None,
) -> OptimizeResult:
    """Compile ``student`` with one optimiser under a fixed budget.

    Args:
        optimizer: ``gepa``, ``miprov2`` or ``bootstrap``.
        student: the base program (not modified).
        trainset: labelled examples; GEPA and MIPROv2 hold out ``budget.val_fraction`` of them (seeded) as valset,
            BootstrapFewShot uses them all.
        metric: the task's metric ``(example, pred, trace, pred_name, pred_trace) -> Prediction(score, feedback)``.
        roles: the LM roles (:class:`memento.llm.lm.Roles`); ``reflection_lm`` proposes for GEPA and MIPROv2.
        budget: the comparison's budget.
        threads: evaluation threads inside the optimiser.
        seed: seed of the hold-out split and of the optimiser.
        log_dir: where the optimiser may keep its own logs (GEPA resumes from it).

    Raises:
        ConfigError: unknown optimiser, too few examples, or (GEPA) predictors sharing a signature.
    """
    if optimizer not in _COMPILERS:
        raise ConfigError(f"unknown optimiser {optimizer!r}; expected one of {', '.join(OPTIMIZERS)}")
    require_optimizer_extras(optimizer)
    val: list[Any]
    if optimizer == "bootstrap":
        if not trainset:
            raise ConfigError("BootstrapFewShot needs a non-empty training set")
        train, val = list(trainset), []
    else:
        train, val = holdout_split(trainset, budget, seed=seed)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    logger.info("compiling with %s: %d train / %d val examples", optimizer, len(train), len(val))
    job = _CompileJob(student, train, val, metric, roles, budget, threads, seed, log_dir)
    with optimizer_output():
        return _COMPILERS[optimizer](job)


@contextlib.contextmanager
def optimizer_output() -> Iterator[None]:
    """While a DSPy optimiser compiles: what it prints on stdout (its evaluation bars, "Average Metric: ...") goes to
    stderr when INFO is on (``-v``) and nowhere otherwise, so stdout holds only results (memento's own progress is on
    stderr). Redirects the process's stdout for the block (the optimiser's worker threads print there too)."""
    if logger.isEnabledFor(logging.INFO):
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        yield
