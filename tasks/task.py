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
import inspect
import logging
from pathlib import Path
from typing import Any, ClassVar, Literal

import dspy

from memento.core.errors import ConfigError

__all__ = ["Task", "register_task", "get_task", "task_names", "signature_goal"]

logger = logging.getLogger(__name__)

_REGISTRY: dict[str, type[Task]] = {}


class Task:
    """Base class of task specs.

    Subclasses set ``name`` and ``signature`` (the final-answer signature: the task's input fields to its output
    fields; its docstring is the final-answer prompt) and override :meth:`load` and :meth:`metric`.
    """

    name: ClassVar[str] = ""
    signature: ClassVar[type[dspy.Signature]]
    #: the task's default for undated pages and memory items, declared only where its paper states one (none of
    #: the shipped tasks does); ``[web] undated`` wins over it (:func:`memento.core.dating.resolve_undated`)
    undated_policy: ClassVar[Literal["keep", "drop"] | None] = None
    #: the task's answer is short (a span): the research programs' final predictor reasons over the findings first
    #: (a ``reasoning`` output added there, never to the task signature, so baselines and saved programs keep shape)
    reason_before_answer: ClassVar[bool] = False
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
        """The task instance as the research stages read it: every model-visible input (the tree's root question)."""
        return "\n".join(
            f"{name}: {inputs[name]}" if len(self.input_fields) > 1 else str(inputs[name]) for name in self.input_fields
        )

    def retrieval_key(self, inputs: dspy.Example | dict[str, Any]) -> str:
        """The text that memory retrieval matches for this instance (JitMem BM25, CBR embeddings, M1-M4 relevance).

        The default is :meth:`task_text`; a task whose prompts carry more than it wants retrieval to match (sales:
        the seller's product list) overrides it, so prompts can carry every input without making stored banks stale.
        """
        return self.task_text(inputs)

    def task_goal(self) -> str:
        """What the task asks for, derived from its signature: the instructions and every output field.

        Every research stage (decomposition, reflection, the sub-question agent, synthesis, the CBR planner, the
        JitMem curator, the reference-free judges) reads it, so none plans without knowing the final deliverable.

        Example:
            >>> from memento.tasks import get_task
            >>> print(get_task("multihop").task_goal().splitlines()[-1])
            - answer: the final answer only, a few words at most
        """
        return signature_goal(self.signature)

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


def _field_desc(name: str, info: Any) -> str:
    desc = str((info.json_schema_extra or {}).get("desc") or "")
    return "" if desc == f"${{{name}}}" else desc


def _item_fields(annotation: Any) -> str:
    """``(a: desc; b: desc)`` for a list of pydantic models, else ""."""
    from pydantic import BaseModel

    args: tuple[Any, ...] = getattr(annotation, "__args__", ()) or ()
    model = args[0] if len(args) == 1 else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ""
    parts = [f"{n}: {f.description}" if f.description else n for n, f in model.model_fields.items()]
    return " (each item gives " + "; ".join(parts) + ")"


def signature_goal(signature: type[dspy.Signature]) -> str:
    """A signature's task goal: its instructions, then ``The final answer gives:`` and one line per output field."""
    lines = [signature.instructions.strip(), "", "The final answer gives:"]
    for name, info in signature.output_fields.items():
        desc = _field_desc(name, info)
        lines.append(f"- {name}" + (f": {desc}" if desc else "") + _item_fields(info.annotation))
    return "\n".join(lines)


def register_task(cls: type[Task]) -> type[Task]:
    """Register a task class under its ``name`` (usable as a decorator)."""
    if not cls.name:
        raise ConfigError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


#: Options every command offers a task; a task whose constructor does not take one is built without it.
OFFERED_OPTIONS: tuple[str, ...] = ("roles", "threads")


def get_task(name: str, **options: Any) -> Task:
    """An instance of the registered task ``name``, its options given to its constructor (keyword-only).

    ``None`` values are left out (the task's default holds). ``roles`` and ``threads`` are offered: a task whose
    constructor does not take them is built without them. Any other option must be one the task takes.

    Example:
        >>> get_task("legal", llm_scrub=True, roles=None, threads=2).llm_scrub
        True

    Raises:
        ConfigError: the task is unknown, or it takes no such option (``--llm-scrub`` given for ``qa``).
    """
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown task {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None
    params = inspect.signature(cls).parameters
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        if key in params and params[key].kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[key] = value
        elif key not in OFFERED_OPTIONS:
            flag = "--" + key.replace("_", "-")
            raise ConfigError(f"task {name!r} takes no option {key!r} ({flag} applies to other tasks)")
    return cls(**kwargs)


def task_names() -> list[str]:
    """Names of all registered tasks."""
    return sorted(_REGISTRY)
