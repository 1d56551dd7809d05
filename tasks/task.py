"""The task spec: name, output signature, loader, metric, per-example cutoff, preprocessing.

A task is a small object; programs read its signature (input and output fields) and metric. Register your own
with :func:`register_task` (a decorator) or by subclassing :class:`Task` and calling ``register_task(MyTask)``.

Example:
    >>> from memento.tasks import get_task
    >>> task = get_task("qa")
    >>> task.input_fields, task.output_fields
    (['question'], ['answer', 'sources'])
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any, ClassVar, Literal

import dspy

from memento.errors import ConfigError

__all__ = ["Task", "register_task", "get_task", "task_names"]

logger = logging.getLogger(__name__)

_REGISTRY: dict[str, type[Task]] = {}


class Task:
    """Base class of task specs.

    Subclasses set ``name`` and ``signature`` (the final-answer signature: the task's input fields to its output
    fields; its docstring is the final-answer prompt) and override :meth:`load` and :meth:`metric`.
    """

    name: ClassVar[str] = ""
    signature: ClassVar[type[dspy.Signature]]
    undated_policy: ClassVar[Literal["keep", "drop"]] = "keep"
    higher_is_better: ClassVar[bool] = True

    @property
    def input_fields(self) -> list[str]:
        return list(self.signature.input_fields)

    @property
    def output_fields(self) -> list[str]:
        return list(self.signature.output_fields)

    def load(self, path: str | Path, *, limit: int | None = None) -> list[dspy.Example]:
        """Read examples from a file; each has the input fields, the labels, and optionally ``cutoff``/``id``."""
        raise ConfigError(f"task {self.name!r} has no loader")

    def metric(
        self,
        example: dspy.Example,
        pred: dspy.Prediction,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> dspy.Prediction:
        """Score a prediction: ``dspy.Prediction(score=float, feedback=str)`` (GEPA-compatible)."""
        raise ConfigError(f"task {self.name!r} has no metric")

    def cutoff(self, example: dspy.Example | dict[str, Any]) -> dt.date | None:
        """The search date cutoff of an example (results published on/after it are dropped), if any."""
        value = example.get("cutoff") if hasattr(example, "get") else None
        if value in (None, ""):
            return None
        if isinstance(value, dt.date):
            return value
        return dt.date.fromisoformat(str(value)[:10])

    def task_text(self, inputs: dspy.Example | dict[str, Any]) -> str:
        """A one-paragraph description of the task instance (used for retrieval and as the tree's root)."""
        return "\n".join(
            f"{name}: {inputs[name]}" if len(self.input_fields) > 1 else str(inputs[name]) for name in self.input_fields
        )

    def preprocess(self, example: dspy.Example) -> dspy.Example:
        """Transform an example before any model sees it (PII removal etc.). Identity by default."""
        return example

    def inputs(self, example: dspy.Example | dict[str, Any]) -> dict[str, Any]:
        """The model-visible inputs of an example."""
        return {name: example[name] for name in self.input_fields}

    #: names accepted by :meth:`make_metric` besides ``"default"`` (subclasses extend it)
    metric_kinds: ClassVar[tuple[str, ...]] = ("default",)

    def make_metric(self, kind: str = "default", *, roles: Any | None = None) -> Any:
        """The metric of this task by name: ``"default"`` is :meth:`metric`; tasks add variants such as ``"judge"``
        (an LLM judge running under ``roles.judge_lm``).

        Raises:
            ConfigError: the task has no metric of that name.
        """
        if kind == "default":
            return self.metric
        raise ConfigError(f"task {self.name!r} has no metric {kind!r}; available: {', '.join(self.metric_kinds)}")


def register_task(cls: type[Task]) -> type[Task]:
    """Register a task class under its ``name`` (usable as a decorator)."""
    if not cls.name:
        raise ConfigError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def get_task(name: str) -> Task:
    """An instance of the registered task ``name``."""
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ConfigError(f"unknown task {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None


def task_names() -> list[str]:
    """Names of all registered tasks."""
    return sorted(_REGISTRY)
