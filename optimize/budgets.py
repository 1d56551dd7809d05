"""Budgets of a comparison: one preset sets every optimiser's and every memory method's budget at once.

A comparison is only fair when every learner spends a fixed, reported budget. :class:`CompareBudget` holds them
all: GEPA's ``max_metric_calls``; MIPROv2's ``num_candidates``/``num_trials``/``minibatch_size`` (clamped to the
validation set, which MIPROv2 requires); BootstrapFewShot's demo counts; the memory methods' batch size and
training-set limit. It is the ``[compare]`` settings section (:mod:`memento.core.config`: ``memento config show``,
``MEMENTO_COMPARE_<FIELD>``, a ``[compare]`` TOML table, ``memento compare --budget/--gepa-max-metric-calls ...``);
:func:`budget_from_settings` reads it. :func:`resolve_budget` starts from a preset (``tiny``, ``light``,
``medium``) and applies explicit overrides, which win.

Example:
    >>> from memento.optimize.budgets import resolve_budget
    >>> budget = resolve_budget("tiny", {"gepa_max_metric_calls": 30})
    >>> budget.preset, budget.gepa_max_metric_calls, budget.mipro_num_trials
    ('tiny', 30, 2)
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from memento.core.config import COMPARE_PRESETS, BudgetPreset, CompareBudget
from memento.core.errors import ConfigError

__all__ = ["BudgetPreset", "CompareBudget", "PRESETS", "resolve_budget", "budget_from_settings"]

#: The presets (``tiny``, ``light``, ``medium``); the ``[compare]`` settings section starts from one.
PRESETS = COMPARE_PRESETS


def resolve_budget(preset: str = "light", overrides: dict[str, Any] | None = None) -> CompareBudget:
    """The budget of a preset with explicit overrides applied (``None`` values are ignored).

    Raises:
        ConfigError: an unknown preset, an unknown budget name or an invalid value.
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown budget preset {preset!r}; expected one of {', '.join(PRESETS)}")
    values: dict[str, Any] = {"preset": preset}
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


def budget_from_settings(
    settings: Any, preset: str | None = None, overrides: dict[str, Any] | None = None
) -> CompareBudget:
    """The ``[compare]`` budget of ``settings``; ``preset`` replaces its preset (values set explicitly, by flag,
    environment or file, still win), then ``overrides`` apply.

    Example:
        >>> from memento.core.config import load_settings
        >>> budget_from_settings(load_settings(flags={"compare": {"preset": "tiny"}})).gepa_max_metric_calls
        24
    """
    section: CompareBudget = settings.compare
    explicit = {
        field: getattr(section, field)
        for field in CompareBudget.model_fields
        if field != "preset" and settings.source_of(f"compare.{field}") != "default"
    }
    return resolve_budget(preset or section.preset, {**explicit, **(overrides or {})})
