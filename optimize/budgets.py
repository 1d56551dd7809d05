"""Budgets of a comparison: one preset sets every optimiser's and every memory method's budget at once.

A comparison is only fair when every learner spends a fixed, reported budget. :class:`CompareBudget` holds them
all: GEPA's ``max_metric_calls``; MIPROv2's ``num_candidates``/``num_trials``/``minibatch_size`` (clamped to the
validation set, which MIPROv2 requires); BootstrapFewShot's demo counts; the memory methods' batch size and
training-set limit. :func:`resolve_budget` starts from a preset (``tiny``, ``light``, ``medium``) and applies
explicit overrides, which win.

Example:
    >>> from memento.optimize.budgets import resolve_budget
    >>> budget = resolve_budget("tiny", {"gepa_max_metric_calls": 30})
    >>> budget.preset, budget.gepa_max_metric_calls, budget.mipro_num_trials
    ('tiny', 30, 2)
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memento.errors import ConfigError

__all__ = ["BudgetPreset", "CompareBudget", "PRESETS", "resolve_budget"]

BudgetPreset = Literal["tiny", "light", "medium"]


class CompareBudget(BaseModel):
    """Every learner's budget in one comparison (all reported in ``results.json``).

    Attributes:
        preset: the preset the values started from.
        val_fraction: share of the training set the optimisers hold out as their validation set (GEPA's Pareto
            set, MIPROv2's valset); at least one example stays on each side.
        gepa_max_metric_calls: GEPA's total budget of metric calls (program runs scored).
        gepa_reflection_minibatch_size: examples GEPA reflects on per proposal.
        mipro_num_candidates: instruction and few-shot candidates MIPROv2 proposes.
        mipro_num_trials: Bayesian-optimisation trials of MIPROv2.
        mipro_minibatch_size: MIPROv2's minibatch (never larger than its valset; clamped at run time).
        mipro_max_bootstrapped_demos: bootstrapped demos per predictor MIPROv2 may use.
        mipro_max_labeled_demos: labelled demos per predictor MIPROv2 may use.
        bootstrap_max_bootstrapped_demos: BootstrapFewShot's bootstrapped demos per predictor.
        bootstrap_max_labeled_demos: BootstrapFewShot's labelled demos per predictor.
        memory_batch_size: training batch size of the memory methods (MEMENTO batches, JitMem stream batches,
            case-bank batches).
        memory_train_limit: at most this many training examples for the memory methods (``None``: all).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    preset: BudgetPreset = "light"
    val_fraction: float = Field(default=0.33, gt=0.0, lt=1.0)
    gepa_max_metric_calls: int = Field(default=150, ge=1)
    gepa_reflection_minibatch_size: int = Field(default=3, ge=1)
    mipro_num_candidates: int = Field(default=6, ge=1)
    mipro_num_trials: int = Field(default=10, ge=1)
    mipro_minibatch_size: int = Field(default=25, ge=1)
    mipro_max_bootstrapped_demos: int = Field(default=2, ge=0)
    mipro_max_labeled_demos: int = Field(default=2, ge=0)
    bootstrap_max_bootstrapped_demos: int = Field(default=4, ge=0)
    bootstrap_max_labeled_demos: int = Field(default=8, ge=0)
    memory_batch_size: int = Field(default=10, ge=1)
    memory_train_limit: int | None = Field(default=30, ge=1)

    def split_sizes(self, n_train: int) -> tuple[int, int]:
        """``(optimiser train size, optimiser validation size)`` for a training set of ``n_train`` examples."""
        if n_train < 2:
            raise ConfigError(f"an optimiser needs at least 2 training examples (got {n_train})")
        n_val = min(n_train - 1, max(1, math.ceil(n_train * self.val_fraction)))
        return n_train - n_val, n_val

    def for_method(self, kind: str) -> dict[str, Any]:
        """The budget values that apply to one kind of learner (``gepa``, ``miprov2``, ``bootstrap``, ``memory``)."""
        prefix = {"gepa": "gepa_", "miprov2": "mipro_", "bootstrap": "bootstrap_", "memory": "memory_"}.get(kind)
        if prefix is None:
            return {}
        values = {k: v for k, v in self.model_dump().items() if k.startswith(prefix)}
        if kind in ("gepa", "miprov2"):
            values["val_fraction"] = self.val_fraction
        return values


PRESETS: dict[str, dict[str, Any]] = {
    # A smoke run: minutes on a scripted LM, a handful of real LM calls per example.
    "tiny": {
        "val_fraction": 0.34,
        "gepa_max_metric_calls": 24,
        "gepa_reflection_minibatch_size": 2,
        "mipro_num_candidates": 2,
        "mipro_num_trials": 2,
        "mipro_minibatch_size": 4,
        "mipro_max_bootstrapped_demos": 1,
        "mipro_max_labeled_demos": 1,
        "bootstrap_max_bootstrapped_demos": 1,
        "bootstrap_max_labeled_demos": 2,
        "memory_batch_size": 4,
        "memory_train_limit": 12,
    },
    # Comparable to MIPROv2's and GEPA's own "light" settings on a small set.
    "light": {},
    # The paper's training scale for memory (60 samples in batches of 10) and a larger optimiser budget.
    "medium": {
        "val_fraction": 0.3,
        "gepa_max_metric_calls": 600,
        "gepa_reflection_minibatch_size": 3,
        "mipro_num_candidates": 12,
        "mipro_num_trials": 25,
        "mipro_minibatch_size": 35,
        "mipro_max_bootstrapped_demos": 4,
        "mipro_max_labeled_demos": 4,
        "bootstrap_max_bootstrapped_demos": 4,
        "bootstrap_max_labeled_demos": 16,
        "memory_batch_size": 10,
        "memory_train_limit": 60,
    },
}


def resolve_budget(preset: str = "light", overrides: dict[str, Any] | None = None) -> CompareBudget:
    """The budget of a preset with explicit overrides applied (``None`` values are ignored).

    Raises:
        ConfigError: an unknown preset, an unknown budget name or an invalid value.
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown budget preset {preset!r}; expected one of {', '.join(PRESETS)}")
    values: dict[str, Any] = {"preset": preset, **PRESETS[preset]}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in CompareBudget.model_fields or key == "preset":
            raise ConfigError(
                f"unknown budget {key!r}; expected one of {', '.join(list(CompareBudget.model_fields)[1:])}"
            )
        values[key] = value
    try:
        return CompareBudget(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"invalid budget {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
