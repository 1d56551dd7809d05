"""Statistics for evaluation reports: bootstrap confidence intervals, paired differences, judge agreement.

Example:
    >>> from memento.metrics.stats import bootstrap_ci, paired_bootstrap
    >>> mean, lo, hi = bootstrap_ci([1, 0, 1, 1], n=200, seed=0)
    >>> round(mean, 2), lo <= mean <= hi
    (0.75, True)
    >>> diff, lo, hi = paired_bootstrap([1, 1, 1, 0], [0, 1, 0, 0], n=200)
    >>> round(diff, 2)
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memento.errors import DataError

__all__ = ["bootstrap_ci", "paired_bootstrap", "judge_agreement", "cohen_kappa", "pearson"]


def _as_array(scores: Sequence[float], name: str = "scores") -> np.ndarray:
    try:
        values = np.asarray([float(s) for s in scores], dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be numbers ({exc})") from None
    if values.size and not np.all(np.isfinite(values)):
        raise DataError(f"{name} contain NaN or infinity")
    return values


def bootstrap_ci(
    scores: Sequence[float], n: int = 1000, seed: int = 0, *, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean of ``scores`` with a percentile bootstrap interval.

    Args:
        scores: per-example scores.
        n: bootstrap resamples.
        seed: RNG seed (the interval is reproducible).
        confidence: interval mass (0.95 gives the 2.5th and 97.5th percentiles).

    Returns:
        ``(mean, low, high)``; ``(nan, nan, nan)`` for no scores, ``(x, x, x)`` for one score.
    """
    values = _as_array(scores)
    if values.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(values.mean())
    if values.size == 1:
        return (mean, mean, mean)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(n, values.size))
    means = values[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (mean, float(lo), float(hi))


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], n: int = 1000, seed: int = 0, *, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean difference ``a - b`` over paired examples with a bootstrap interval (resampling examples jointly).

    An interval that excludes 0 means the two methods differ on this sample at that confidence.

    Raises:
        DataError: the two lists differ in length.
    """
    left, right = _as_array(a, "a"), _as_array(b, "b")
    if left.size != right.size:
        raise DataError(f"paired scores differ in length: {left.size} vs {right.size}")
    return bootstrap_ci(left - right, n=n, seed=seed, confidence=confidence)


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels (1 = perfect agreement, 0 = chance level)."""
    if len(a) != len(b):
        raise DataError(f"label lists differ in length: {len(a)} vs {len(b)}")
    if not a:
        return math.nan
    labels = sorted({*map(str, a), *map(str, b)})
    index = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)))
    for x, y in zip(a, b, strict=True):
        table[index[str(x)], index[str(y)]] += 1
    total = table.sum()
    observed = np.trace(table) / total
    expected = float((table.sum(axis=0) * table.sum(axis=1)).sum() / total**2)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return float((observed - expected) / (1.0 - expected))


def pearson(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson correlation of two score lists (``nan`` when either is constant)."""
    left, right = _as_array(a, "a"), _as_array(b, "b")
    if left.size != right.size:
        raise DataError(f"score lists differ in length: {left.size} vs {right.size}")
    if left.size < 2 or left.std() == 0 or right.std() == 0:
        return math.nan
    return float(np.corrcoef(left, right)[0, 1])


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def judge_agreement(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Agreement of two judges on the same items: Cohen's kappa for labels, Pearson's r for numeric scores.

    Booleans and strings are labels; ints and floats are scores (a 0-5 rubric is treated as a score).
    """
    if a and b and all(_is_number(x) for x in a) and all(_is_number(y) for y in b):
        return pearson(a, b)
    return cohen_kappa(a, b)
