"""Adapt a feedback metric to optimisers that need a number.

GEPA takes metrics returning ``dspy.Prediction(score=..., feedback=...)``; BootstrapFewShot and MIPROv2 test the
return value for truth (a Prediction is always truthy) or average it, so they need the bare score.

Example:
    >>> import dspy
    >>> from memento.metrics.as_float import as_float
    >>> def exact(example, pred, trace=None):
    ...     return dspy.Prediction(score=float(example.answer == pred.answer), feedback="")
    >>> as_float(exact)(dspy.Example(answer="a"), dspy.Prediction(answer="b"))
    0.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["as_float", "score_of"]


def score_of(result: Any) -> float:
    """The numeric score of a metric's return value (a Prediction/dict with ``score``, a bool or a number)."""
    if result is None:
        return 0.0
    if isinstance(result, dict):
        return float(result.get("score", 0.0) or 0.0)
    score = getattr(result, "score", result)
    if score is None:
        return 0.0
    return float(score)


def as_float(metric: Callable[..., Any]) -> Callable[..., float]:
    """Wrap ``metric`` so it returns ``float(score)``; keeps its name, docstring and extra attributes.

    The wrapper accepts DSPy's metric call forms: ``(example, pred)``, ``(example, pred, trace)`` and GEPA's
    ``(example, pred, trace, pred_name, pred_trace)``.
    """

    @functools.wraps(metric)
    def wrapper(example: Any, pred: Any, trace: Any = None, *args: Any, **kwargs: Any) -> float:
        return score_of(metric(example, pred, trace, *args, **kwargs))

    wrapper.__name__ = getattr(metric, "__name__", type(metric).__name__)
    wrapper.wrapped_metric = metric  # type: ignore[attr-defined]
    return wrapper
