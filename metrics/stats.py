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

from memento.core.errors import DataError

__all__ = ["bootstrap_ci", "paired_bootstrap", "judge_agreement", "cohen_kappa", "pearson"]


def _as_array(scores: Sequence[float] | np.ndarray, name: str = "scores") -> np.ndarray:
    try:
        values = np.asarray([float(s) for s in scores], dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be numbers ({exc})") from None
    if values.size and not np.all(np.isfinite(values)):
        raise DataError(f"{name} contain NaN or infinity")
    return values


def _percentile_bootstrap(
    data: tuple[np.ndarray, ...], statistic: Any, *, n: int, seed: int, confidence: float, paired: bool = False
) -> tuple[float, float]:
    """``scipy.stats.bootstrap`` with the percentile method (the interval memento has always reported)."""
    from scipy import stats

    result = stats.bootstrap(
        data,
        statistic,
        n_resamples=n,
        paired=paired,
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def bootstrap_ci(
    scores: Sequence[float] | np.ndarray, n: int = 1000, seed: int = 0, *, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean of ``scores`` with a percentile bootstrap interval (``scipy.stats.bootstrap``, ``method="percentile"``).

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
    lo, hi = _percentile_bootstrap((values,), np.mean, n=n, seed=seed, confidence=confidence)
    return (mean, lo, hi)


def _mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.mean(a - b, axis=axis))


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n: int = 1000,
    seed: int = 0,
    *,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Mean difference ``a - b`` over paired examples with a percentile bootstrap interval (``scipy.stats.bootstrap``
    with ``paired=True``: examples are resampled jointly).

    An interval that excludes 0 means the two methods differ on this sample at that confidence.

    Raises:
        DataError: the two lists differ in length.
    """
    left, right = _as_array(a, "a"), _as_array(b, "b")
    if left.size != right.size:
        raise DataError(f"paired scores differ in length: {left.size} vs {right.size}")
    if left.size == 0:
        return (math.nan, math.nan, math.nan)
    diff = float((left - right).mean())
    if left.size == 1:
        return (diff, diff, diff)
    lo, hi = _percentile_bootstrap((left, right), _mean_difference, n=n, seed=seed, confidence=confidence, paired=True)
    return (diff, lo, hi)


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels (1 = perfect agreement, 0 = chance level).

    Kept here (a dozen lines over a contingency table) rather than taken from scikit-learn, whose 60 MB would be
    installed for this one function; ``tests/metrics/test_stats.py`` checks it equals
    ``sklearn.metrics.cohen_kappa_score`` (scikit-learn is in the ``dev`` extra).
    """
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
    """Pearson correlation of two score lists (``scipy.stats.pearsonr``; ``nan`` when either is constant)."""
    from scipy import stats

    left, right = _as_array(a, "a"), _as_array(b, "b")
    if left.size != right.size:
        raise DataError(f"score lists differ in length: {left.size} vs {right.size}")
    if left.size < 2 or left.std() == 0 or right.std() == 0:
        return math.nan
    return float(stats.pearsonr(left, right).statistic)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def judge_agreement(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Agreement of two judges on the same items: Cohen's kappa for labels, Pearson's r for numeric scores.

    Booleans and strings are labels; ints and floats are scores (a 0-5 rubric is treated as a score).
    """
    if a and b and all(_is_number(x) for x in a) and all(_is_number(y) for y in b):
        return pearson(a, b)
    return cohen_kappa(a, b)
