"""The ``opinion`` task (SubPOP-style): a survey question, its options and a subgroup -> the subgroup's answer
distribution.

Data format (JSONL, one question-subgroup pair per line)::

    {"id": "natspac|POLIDEOLOGY=Liberal",                      # optional
     "question": "Are we spending too much, too little or about the right amount on space exploration?",
     "options": ["Too little", "About right", "Too much"],
     "subgroup": "Political ideology: Liberal",
     "distribution": {"Too little": 0.21, "About right": 0.48, "Too much": 0.31},
     "cutoff": "2022-01-01"}                                    # optional search cutoff

``distribution`` may also be a list aligned with ``options``; weights are renormalised (percentages work). The
upstream SubPOP distributions are gated, so no answer data ships with memento: build rows from your own survey
files (``shared/data/subpop`` holds the public question texts and options).

Predictions are validated and repaired before scoring (unknown options dropped, negatives clipped, missing options
given epsilon, renormalised). The task's measure is total variation distance (lower is better:
``higher_is_better = False``); its DSPy metric returns ``score = 1 - TVD`` for optimisers and reports TVD and
KL(true || predicted) in the feedback.

Example:
    >>> from memento.tasks import get_task
    >>> get_task("opinion").output_fields
    ['distribution']
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import dspy

from memento.core.errors import ConfigError, DataError
from memento.llm.output_schema import limit
from memento.tasks._jsonl import jsonl_rows
from memento.tasks.task import Task, register_task

__all__ = ["PredictOpinionDistribution", "OpinionTask"]


class PredictOpinionDistribution(dspy.Signature):
    """Predict how the members of a population subgroup answered a survey question: the share of the subgroup
    choosing each answer option. Reason from what is known about this subgroup's views on the topic (published
    polls, surveys and research on comparable questions), not from your own opinion and not from the population
    as a whole. Give a probability for every option, using exactly the option texts given; the probabilities
    must be between 0 and 1 and sum to 1."""

    question: str = dspy.InputField(desc="the survey question as asked")
    options: list[str] = dspy.InputField(desc="the answer options, verbatim")
    subgroup: str = dspy.InputField(desc="the population subgroup whose answers to predict")
    distribution: dict[str, float] = limit(
        dspy.OutputField(desc="option text -> share of the subgroup choosing it"), keys_from="options"
    )  # the JSON schema sent: one number per option of this question


def _truth(value: Any, options: list[str], where: str) -> dict[str, float]:
    if isinstance(value, list):
        if len(value) != len(options):
            raise DataError(f"{where}: distribution has {len(value)} values for {len(options)} options")
        value = dict(zip(options, value, strict=True))
    if not isinstance(value, dict):
        raise DataError(f"{where}: distribution must be an object or a list")
    unknown = [k for k in value if k not in options]
    if unknown:
        raise DataError(f"{where}: distribution names unknown options {unknown!r}")
    weights: dict[str, float] = {}
    for option in options:
        raw = value.get(option, 0.0)
        try:
            number = float(raw)
        except (TypeError, ValueError):
            raise DataError(f"{where}: {option!r} has a non-numeric share {raw!r}") from None
        if not math.isfinite(number) or number < 0:
            raise DataError(f"{where}: {option!r} has an invalid share {raw!r}")
        weights[option] = number
    total = sum(weights.values())
    if total <= 0:
        raise DataError(f"{where}: the distribution is all zeros")
    return {o: w / total for o, w in weights.items()}


@register_task
class OpinionTask(Task):
    """Subgroup opinion distributions; scored by ``1 - TVD`` (TVD and KL reported).

    Args:
        epsilon: smoothing used when repairing predictions and computing KL.
    """

    name = "opinion"
    signature = PredictOpinionDistribution
    higher_is_better = False  # the task's measure (TVD); the metric's score is 1 - TVD
    primary_measure = "tvd"
    metric_kinds = ("default",)

    def __init__(self, *, epsilon: float = 1e-6) -> None:
        from memento.metrics.distribution import DistributionMetric

        self._metric = DistributionMetric(epsilon=epsilon)

    def load(self, path: str | Path, *, limit: int | None = None) -> list[dspy.Example]:
        """Read JSONL rows (format in the module docstring) into examples with inputs question, options, subgroup.

        Raises:
            DataError: a malformed row (the message names file and line).
        """
        examples: list[dspy.Example] = []
        for where, row in jsonl_rows(
            path, kind="opinion", required=("question", "options", "subgroup", "distribution")
        ):
            question, options, subgroup = row["question"], row["options"], row["subgroup"]
            distribution = row["distribution"]
            if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options):
                raise DataError(f"{where}: options must be a list of at least two strings")
            if len(set(options)) != len(options):
                raise DataError(f"{where}: duplicate options")
            data: dict[str, Any] = {
                "question": str(question),
                "options": list(options),
                "subgroup": str(subgroup),
                "distribution": _truth(distribution, options, where),
            }
            for key in ("id", "cutoff"):
                if key in row:
                    data[key] = row[key]
            fields = ["question", "options", "subgroup", *(["cutoff"] if data.get("cutoff") else [])]
            examples.append(dspy.Example(**data).with_inputs(*fields))  # the cutoff reaches every program
            if limit is not None and len(examples) >= limit:
                break
        return examples

    def task_text(self, inputs: dspy.Example | dict[str, Any]) -> str:
        options = "; ".join(inputs["options"])
        return f"How did {inputs['subgroup']} answer: {inputs['question']} (options: {options})"

    def metric(
        self,
        example: dspy.Example,
        pred: dspy.Prediction,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> dspy.Prediction:
        """``score = 1 - TVD`` of the repaired prediction; the prediction also carries ``tvd`` and ``kl``."""
        return self._metric(example, pred, trace, pred_name, pred_trace)

    def make_metric(self, kind: str = "default", *, roles: Any | None = None) -> Any:
        if kind == "default":
            return self.metric
        raise ConfigError(f"task {self.name!r} has no metric {kind!r}; available: {', '.join(self.metric_kinds)}")
