"""Distribution-prediction metrics: validation/repair, total variation distance, KL divergence.

``TVD(p, q) = 1/2 * sum |p_i - q_i|`` and ``KL(q || p) = sum q_i log(q_i / p_i)`` where ``q`` is the true
distribution and ``p`` the prediction, both smoothed with ``epsilon`` so an option predicted at zero gives a finite
penalty. Both are lower-is-better; optimisers receive ``1 - TVD`` as the score.

Example:
    >>> from memento.metrics.distribution import repair_distribution, total_variation
    >>> p = repair_distribution({"Yes": 3, "no": 1, "Maybe": 5}, ["Yes", "No"])
    >>> p
    {'Yes': 0.75, 'No': 0.25}
    >>> total_variation(p, {"Yes": 0.5, "No": 0.5})
    0.25
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from memento.core.errors import DataError

__all__ = ["repair_distribution", "total_variation", "kl_divergence", "DistributionMetric", "EPSILON"]

EPSILON = 1e-6


def _key(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip().rstrip("%")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def repair_distribution(prediction: Any, options: Sequence[str], *, epsilon: float = EPSILON) -> dict[str, float]:
    """A valid probability distribution over exactly ``options`` from whatever the model produced.

    Accepts a mapping option -> weight (keys matched ignoring case and spacing), a list of weights aligned with
    ``options``, or a JSON string of either. Unknown options are dropped, non-numbers ignored, negatives clipped
    to 0, options missing (or at zero) get ``epsilon``, and the result is renormalised to sum to 1. Percentages
    work too (they are renormalised). Nothing usable gives the uniform distribution.

    Raises:
        DataError: ``options`` is empty or has duplicates.
    """
    options = [str(o) for o in options]
    if not options:
        raise DataError("a distribution needs at least one option")
    if len({_key(o) for o in options}) != len(options):
        raise DataError(f"duplicate options: {options!r}")
    if isinstance(prediction, str):
        try:
            prediction = json.loads(prediction)
        except json.JSONDecodeError:
            prediction = None
    if hasattr(prediction, "model_dump"):
        prediction = prediction.model_dump()
    weights: dict[str, float] = {}
    by_key = {_key(o): o for o in options}
    if isinstance(prediction, Mapping):
        for raw_key, raw_value in prediction.items():
            option = by_key.get(_key(raw_key))
            number = _number(raw_value)
            if option is not None and number is not None:
                weights[option] = weights.get(option, 0.0) + max(number, 0.0)
    elif isinstance(prediction, Sequence) and len(prediction) == len(options):
        for option, raw_value in zip(options, prediction, strict=True):
            number = _number(raw_value)
            if number is not None:
                weights[option] = max(number, 0.0)
    total = sum(weights.values())
    if total <= 0:
        return {o: 1.0 / len(options) for o in options}
    values = {o: weights.get(o, 0.0) / total for o in options}
    values = {o: v if v > 0 else epsilon for o, v in values.items()}
    total = sum(values.values())
    return {o: v / total for o, v in values.items()}


def _aligned(p: Mapping[str, float], q: Mapping[str, float]) -> list[tuple[float, float]]:
    keys = list(dict.fromkeys([*q, *p]))
    return [(float(p.get(k, 0.0)), float(q.get(k, 0.0))) for k in keys]


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """``1/2 * sum |p_i - q_i|`` over the union of options (a missing option has probability 0)."""
    return 0.5 * sum(abs(a - b) for a, b in _aligned(p, q))


def kl_divergence(q: Mapping[str, float], p: Mapping[str, float], *, epsilon: float = EPSILON) -> float:
    """``KL(q || p)``: the truth ``q`` against the prediction ``p``, both smoothed (``x + eps``, renormalised)."""
    pairs = _aligned(p, q)
    n = len(pairs)
    p_total = sum(a for a, _ in pairs) + n * epsilon
    q_total = sum(b for _, b in pairs) + n * epsilon
    kl = 0.0
    for a, b in pairs:
        ps, qs = (a + epsilon) / p_total, (b + epsilon) / q_total
        kl += qs * math.log(qs / ps)
    return max(kl, 0.0)


class DistributionMetric:
    """``score = 1 - TVD`` between the repaired predicted distribution and the example's true one.

    The returned prediction also carries ``tvd`` and ``kl`` (lower is better) and the repaired distribution.

    Args:
        field: the distribution field of both the prediction and the example.
        options_field: the example field listing the options.
        epsilon: smoothing for repair and KL.
    """

    higher_is_better = True  # the score; tvd and kl are lower-is-better

    def __init__(
        self, *, field: str = "distribution", options_field: str = "options", epsilon: float = EPSILON
    ) -> None:
        self.field = field
        self.options_field = options_field
        self.epsilon = epsilon
        self.__name__ = "one_minus_tvd"

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        options = list(example[self.options_field])
        truth = repair_distribution(example[self.field], options, epsilon=0.0)
        predicted = repair_distribution(getattr(pred, self.field, None), options, epsilon=self.epsilon)
        tvd = total_variation(predicted, truth)
        kl = kl_divergence(truth, predicted, epsilon=self.epsilon)
        worst = max(options, key=lambda o: abs(predicted[o] - truth[o]))
        feedback = (
            f"TVD {tvd:.3f}, KL(true||predicted) {kl:.3f}. Largest error on {worst!r}: predicted "
            f"{predicted[worst]:.2f}, true {truth[worst]:.2f}. True distribution: "
            + ", ".join(f"{o}: {truth[o]:.2f}" for o in options)
        )
        return dspy.Prediction(score=1.0 - tvd, feedback=feedback, tvd=tvd, kl=kl, repaired=predicted)
