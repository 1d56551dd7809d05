"""A metric in GEPA's form: five arguments, a ``dspy.Prediction(score, feedback)`` back, whatever form the task's metric
has (three or five arguments; a number, a dict or a prediction).

Example:
    >>> from memento.metrics.feedback_metric import feedback_metric
    >>> feedback_metric(lambda gold, pred, trace=None: 1.0)(None, None).score
    1.0
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import dspy

__all__ = ["feedback_metric"]


def _accepts_five(metric: Callable[..., Any]) -> bool:
    try:
        inspect.signature(metric).bind(None, None, None, None, None)
        return True
    except (TypeError, ValueError):
        return False


def feedback_metric(metric: Callable[..., Any]) -> Callable[..., dspy.Prediction]:
    """``metric`` in GEPA's five-argument form returning ``dspy.Prediction(score, feedback)``."""
    five = _accepts_five(metric)

    def wrapped(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None) -> Any:
        result = metric(gold, pred, trace, pred_name, pred_trace) if five else metric(gold, pred, trace)
        if isinstance(result, dspy.Prediction) and "score" in result:
            return result
        if isinstance(result, dict):
            return dspy.Prediction(
                score=float(result.get("score", 0.0) or 0.0), feedback=str(result.get("feedback", ""))
            )
        return dspy.Prediction(score=float(result or 0.0), feedback="")

    wrapped.__name__ = getattr(metric, "__name__", "metric")
    return wrapped
