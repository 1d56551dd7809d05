"""Baselines with the same inputs and outputs as the Adaptive Exploration Tree.

* :class:`ClosedBook` answers from the model's own knowledge (no tools): one call of the task's final-answer signature.
* :class:`FewShot` is ClosedBook with ``k`` labelled demonstrations sampled from a training set (seeded
  ``random.Random``; an example missing some output fields still serves, those fields marked not supplied).
* :class:`memento.programs.react_agent.ReActAgent` (re-exported here) is a flat ``dspy.ReAct`` over ``search_web``
  and ``scrape`` with a step cap, optionally with memory text as context, LLM query rewriting and LLM reranking.

Registered methods: ``closed_book``, ``few_shot``, ``react``, ``react_memory``, ``react_rewrite``, ``react_rerank``,
``react_rewrite_rerank``, and MEMENTO's "LLM + Memento" and "5-shot + Memento" rows: ``closed_book_memory`` and
``few_shot_memory`` (the plain LLM with a trained memory's text as context, ``--memory DIR``).

Example:
    >>> from memento.programs.baselines import ClosedBook
    >>> from memento.tasks import get_task
    >>> program = ClosedBook(get_task("qa"))
    >>> program(question="Who wrote Dune?").answer  # doctest: +SKIP
    'Frank Herbert'
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.errors import ConfigError
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall, ResearchProgram, join_context
from memento.signatures.final_answer import answer_signature

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles
    from memento.memory.location import Location
    from memento.programs.react_agent import ReActAgent
    from memento.tasks.task import Task

__all__ = ["ClosedBook", "FewShot", "ReActAgent"]

logger = logging.getLogger(__name__)


class ClosedBook(ResearchProgram):
    """Answer from the model's parametric knowledge alone: no search, no memory tools.

    The only predictor is the task's final-answer signature extended with ``context`` (``<Signature>ClosedBook``).

    Example:
        >>> program = ClosedBook("qa")
        >>> pred = program(question="Who wrote Dune?")  # doctest: +SKIP
        >>> pred.trajectory.usage.lm_calls  # doctest: +SKIP
        1
    """

    method = "closed_book"
    needs_web = False

    def __init__(self, task: Task | str, **kwargs: Any) -> None:
        super().__init__(task, **kwargs)
        self.answer = dspy.Predict(answer_signature(self.task, findings=False))
        self.answer.usage_stage = "answer"

    def research(self, call: ResearchCall) -> dict[str, Any]:
        started = time.perf_counter()
        memory = self.memory_text(call)
        context = join_context(call.context, memory)
        pred = self.answer(context=context, **call.inputs)
        call.trajectory.timings["answer_s"] = round(time.perf_counter() - started, 6)
        return {name: pred.get(name) for name in self.task.output_fields}


class FewShot(ClosedBook):
    """ClosedBook with ``k`` labelled demonstrations drawn from a training set by a seeded ``random.Random``.

    Args:
        task: the task spec or its name.
        trainset: labelled examples (the task's inputs and outputs); required.
        k: how many demonstrations (5 by default).
        seed: sampling seed (``random.Random(seed).sample`` picks ``k`` of the usable training examples).

    Example:
        >>> program = FewShot("qa", trainset=examples, k=5)  # doctest: +SKIP
    """

    method = "few_shot"

    def __init__(self, task: Task | str, *, trainset: list[dspy.Example], k: int = 5, seed: int = 0, **kwargs: Any):
        super().__init__(task, **kwargs)
        if not trainset:
            raise ConfigError("FewShot needs a non-empty trainset (labelled examples) for its demonstrations")
        if k < 1:
            raise ConfigError(f"FewShot needs k >= 1, got {k}")
        demos = [_as_demo(ex, self.task) for ex in trainset]
        demos = [d for d in demos if d is not None]
        if not demos:
            raise ConfigError(
                f"FewShot: no training example carries the task's outputs {self.task.output_fields} as labels"
            )
        import random

        rng = random.Random(seed)
        self.k = k
        self.answer.demos = rng.sample(demos, min(k, len(demos)))


def _as_demo(example: dspy.Example, task: Task) -> dspy.Example | None:
    """A demonstration with the final-answer fields, or None when the example carries no output label at all.

    An output field the example lacks is left out of the demo (DSPy's adapter shows it as "not supplied"), so a
    legal row labelled only with ``winning_party`` still makes a demo for ``reasoning, winning_party, disposition``.
    """
    data = {name: example.get(name) for name in task.input_fields}
    labels = 0
    for name in task.output_fields:
        value = example.get(name)
        if value is None and name == "answer":  # qa-style rows carry a list of accepted answers
            answers = example.get("answers") or []
            value = answers[0] if answers else None
        if value is None:
            if name in ("sources",):
                data[name] = []
            continue
        data[name] = value
        labels += 1
    if not labels:
        return None
    data["context"] = ""
    return dspy.Example(**data).with_inputs("context", *task.input_fields)


# -- registry builders ----------------------------------------------------------------------------------------
@register_method("closed_book")
def _build_closed_book(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ClosedBook:
    return ClosedBook(task, roles=roles, threads=settings.run.threads)


@register_method("few_shot")
def _build_few_shot(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> FewShot:
    return _few_shot("few_shot", task, settings, roles, trainset)


def _few_shot(
    method: str, task: Task, settings: Settings, roles: Roles | None, trainset: Any, memory: Any = None
) -> FewShot:
    """The few-shot LLM (``baselines.few_shot_demos`` demonstrations drawn with ``run.seed``), with ``memory``."""
    if not trainset:
        raise ConfigError(
            f"method {method} needs a training set (labelled examples for its demonstrations; `memento eval --train`)"
        )
    program = FewShot(
        task,
        trainset=list(trainset),
        k=settings.baselines.few_shot_demos,
        seed=settings.run.seed,
        roles=roles,
        threads=settings.run.threads,
        memory=memory,
    )
    program.method = method
    return program


def _memento_memory(settings: Settings, memory_dir: Location | None, method: str) -> Any:
    """The trained MEMENTO memory a baseline reads (read-only), from ``--memory`` or ``[memory] dir``."""
    from memento.memory.memento_memory import open_memory
    from memento.memory.sqlite_store import memory_exists

    location = memory_dir if memory_dir is not None else settings.memory.dir
    if not memory_exists(location):
        raise ConfigError(
            f"method {method} reads a trained MEMENTO memory (--memory DIR); there is none at {location}: "
            f"train one with `memento train --memory {location}`"
        )
    return open_memory(settings.memory, location, read_only=True, context_tokens=settings.role("lm").context_tokens)


@register_method("closed_book_memory", reads="memento")
def _build_closed_book_memory(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> ClosedBook:
    """MEMENTO's "LLM + Memento" row: the closed-book LLM with the trained memory's text (M1-M4) as context."""
    memory = _memento_memory(settings, memory_dir, "closed_book_memory")
    program = ClosedBook(task, roles=roles, threads=settings.run.threads, memory=memory)
    program.method = "closed_book_memory"
    return program


@register_method("few_shot_memory", reads="memento")
def _build_few_shot_memory(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
) -> FewShot:
    """MEMENTO's "5-shot + Memento" row: the few-shot LLM (``baselines.few_shot_demos`` demonstrations) with the
    trained memory's text as context."""
    if not trainset:
        return _few_shot("few_shot_memory", task, settings, roles, trainset)  # refused in one line
    memory = _memento_memory(settings, memory_dir, "few_shot_memory")
    return _few_shot("few_shot_memory", task, settings, roles, trainset, memory)


def __getattr__(name: str) -> Any:
    """``ReActAgent`` stays importable from here; the ReAct family has its own module, imported on first use so that
    a closed-book run does not load the web tools."""
    if name == "ReActAgent":
        from memento.programs.react_agent import ReActAgent

        return ReActAgent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
