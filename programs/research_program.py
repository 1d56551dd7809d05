"""The base every research program shares: input plumbing, per-call web tools, usage metering, the trajectory.

A research program is a ``dspy.Module`` built as ``Program(task, *, web=None, budgets=None, threads=1, memory=None)``
and called as ``program(**example.inputs())``. :class:`ResearchProgram` implements ``forward``: it picks the task's
input fields out of the keyword arguments (extra keys such as labels are ignored), reads the control arguments
``cutoff`` (a date or an ISO string), ``task_id`` and ``context`` (extra guidance for the prompts), builds the
per-call :class:`memento.web.web_tools.WebTools` from the ``web`` factory, runs :meth:`ResearchProgram.research`
under a :class:`memento.records.usage.UsageMeter`, and returns ``dspy.Prediction(<task output fields>, trajectory=...)``
with the usage (LM calls and tokens per stage and role, plus the web counts) and timings filled in.

Example:
    >>> from memento.programs.baselines import ClosedBook
    >>> from memento.tasks import get_task
    >>> program = ClosedBook(get_task("qa"))
    >>> pred = program(question="Who wrote Dune?")  # doctest: +SKIP
    >>> pred.answer, pred.trajectory.usage.lm_calls  # doctest: +SKIP
    ('Frank Herbert', 1)
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, get_origin

import dspy

from memento.core.config import Budgets
from memento.core.dating import DateFilter, resolve_undated
from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError, RecoverableError
from memento.core.types import AgentStep, DatingRecord, ToolCall, Trajectory, Usage
from memento.core.untrusted import quote_data
from memento.records.usage import NamedPredictors, UsageMeter
from memento.tasks.task import Task, get_task

if TYPE_CHECKING:
    from memento.core.protocols import MemoryProvider
    from memento.llm.lm import Roles
    from memento.web.web_tools import WebTools

__all__ = [
    "ResearchProgram",
    "ResearchCall",
    "EmptyQuestionError",
    "WebFactory",
    "CONTROL_ARGS",
    "empty_outputs",
    "join_context",
]

logger = logging.getLogger(__name__)

WebFactory = Callable[[dt.date | None, str], "WebTools"]
CONTROL_ARGS: tuple[str, ...] = ("cutoff", "task_id", "context")


class EmptyQuestionError(RecoverableError):
    """A program was called without the text of its task (a missing or blank input field).

    Recoverable: in an evaluation or a stream that one task fails (recorded) and the others run.
    """


@dataclass
class ResearchCall:
    """The state of one program call: inputs, control arguments, per-call tools, and the trajectory being built.

    ``task_text`` carries every model-visible input (the prompts' ``task``), ``task_goal`` what the task asks for
    (derived from the task's signature, see :meth:`memento.tasks.task.Task.task_goal`), and ``retrieval_key`` the
    text memory retrieval matches (:meth:`memento.tasks.task.Task.retrieval_key`).

    Thread-safe where it matters: :meth:`add_tool_call` and :meth:`add_step` may be called from worker threads.
    """

    inputs: dict[str, Any]
    task_text: str
    cutoff: dt.date | None
    task_id: str
    context: str
    web: WebTools | None
    trajectory: Trajectory
    task_goal: str = ""
    retrieval_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # other keyword arguments (a training example's labels)
    dates: DateFilter = field(default_factory=DateFilter)  # what this task may see of memory (its cutoff)
    view: Any = None  # the memory as this call sees it (ResearchProgram.memory_view), made on first use
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_tool_call(self, call: ToolCall) -> None:
        """Append a tool call to the trajectory (thread-safe)."""
        with self._lock:
            self.trajectory.tool_calls.append(call)

    def add_step(self, step: AgentStep) -> None:
        """Append an agent step to the trajectory (thread-safe)."""
        with self._lock:
            self.trajectory.steps.append(step)

    def note(self, text: str) -> None:
        """Append a session note to the trajectory (thread-safe)."""
        with self._lock:
            self.trajectory.notes.append(text)


def _parse_cutoff(value: Any) -> dt.date | None:
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip()[:10])
    except ValueError:
        raise ConfigError(f"invalid cutoff {value!r}: expected a date or an ISO date string (YYYY-MM-DD)") from None


def empty_outputs(signature: type[dspy.Signature]) -> dict[str, Any]:
    """Neutral values for a signature's output fields ("" for text, [] for lists, None otherwise)."""
    out: dict[str, Any] = {}
    for name, info in signature.output_fields.items():
        annotation = info.annotation
        if annotation is str:
            out[name] = ""
        elif annotation in (list, dict) or get_origin(annotation) in (list, dict):
            out[name] = [] if (annotation is list or get_origin(annotation) is list) else {}
        else:
            out[name] = None
    return out


class ResearchProgram(dspy.Module, metaclass=NamedPredictors):
    """Shared forward plumbing of memento's research programs (subclasses implement :meth:`research`).

    Args:
        task: the task spec (or its registered name); its signature fixes the program's inputs and outputs.
        web: a factory ``f(cutoff, undated_policy) -> WebTools`` (see
            :func:`memento.web.factory.web_tools_factory`); required by programs that use tools.
        budgets: hard limits (questions, steps); defaults to :class:`memento.core.config.Budgets`.
        threads: how many sub-questions (or tasks) run in parallel inside one call.
        memory: attached persistent memory (MEMENTO's M1-M4), or ``None`` for empty memory inputs.
        roles: the LM role map, so usage is attributed to roles (``lm``, ``judge_lm``...).
        undated: the undated policy (``keep``/``drop``) of web results, pages and memory items; without one, the
            task's declared default, else ``keep`` (:func:`memento.core.dating.resolve_undated`; ``build_program`` sets
            the ``[web] undated`` setting, which wins).
        cutoff_filter: ``False`` switches the memory date filter off (``[memory] cutoff_filter``: to measure
            leakage; the audit then reports what was shown after the cutoff).

    Subclasses set ``method`` (the registry name), ``needs_web`` and implement ``research(call) -> dict`` returning
    the task's output fields; they fill ``call.trajectory`` (nodes, notes) as they go.
    """

    method: str = ""  # a class default; a program may set its own (few_shot_cases, react variants)
    needs_web: ClassVar[bool] = False
    # attributes shared (not copied) by ``copy.deepcopy``: optimizers deep-copy programs, memory must not fork
    _shared_attrs: ClassVar[tuple[str, ...]] = ("task", "web", "memory", "roles")

    def __init__(
        self,
        task: Task | str,
        *,
        web: WebFactory | None = None,
        budgets: Budgets | None = None,
        threads: int = 1,
        memory: MemoryProvider | None = None,
        roles: Roles | None = None,
        undated: str | None = None,
        cutoff_filter: bool = True,
    ) -> None:
        super().__init__()
        self.task = get_task(task) if isinstance(task, str) else task
        if self.needs_web and web is None:
            raise ConfigError(
                f"{type(self).__name__} searches the web and needs a `web` factory "
                "(memento.web.factory.web_tools_factory(settings))"
            )
        if threads < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        self.web = web
        self.budgets = budgets or Budgets()
        self.threads = threads
        self.memory = memory
        self.roles = roles
        self.undated = resolve_undated(undated, self.task).policy
        self.cutoff_filter = cutoff_filter

    def __deepcopy__(self, memo: dict[int, Any]) -> ResearchProgram:
        for name in self._shared_attrs:
            value = self.__dict__.get(name)
            if value is not None:
                memo[id(value)] = value
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = copy.deepcopy(value, memo)
        return new

    # -- the call --------------------------------------------------------------------------------------------
    def prepare(self, kwargs: dict[str, Any]) -> ResearchCall:
        """Validate the inputs and control arguments of a call and open its trajectory."""
        inputs: dict[str, Any] = {}
        for name in self.task.input_fields:
            value = kwargs.get(name)
            if value is None or (isinstance(value, str) and not value.strip()):
                raise EmptyQuestionError(
                    f"{type(self).__name__} needs a non-empty {name!r} (task {self.task.name!r}); got {value!r}"
                )
            inputs[name] = value
        cutoff = _parse_cutoff(kwargs.get("cutoff"))
        context = kwargs.get("context") or ""
        if not isinstance(context, str):
            raise ConfigError(f"context must be text, got {type(context).__name__}")
        task_text = self.task.task_text(inputs)
        key = self.task.retrieval_key(inputs)
        trajectory = Trajectory(
            task_text=task_text,
            retrieval_key=key if key != task_text else "",
            inputs=dict(inputs),
            method=self.method or type(self).__name__,
            cutoff=cutoff,
            dating=DatingRecord(cutoff=cutoff, undated=self.undated, filtered=self.cutoff_filter),
        )
        if kwargs.get("task_id"):
            trajectory.task_id = str(kwargs["task_id"])
        web = self.web(cutoff, self.undated) if (self.web is not None and self.needs_web) else None
        return ResearchCall(
            inputs=inputs,
            task_text=task_text,
            cutoff=cutoff,
            task_id=trajectory.task_id,
            context=context,
            web=web,
            trajectory=trajectory,
            task_goal=self.task.task_goal(),
            retrieval_key=key,
            extra={k: v for k, v in kwargs.items() if k not in inputs and k not in ("cutoff", "context")},
            dates=DateFilter.of(cutoff, self.undated, enabled=self.cutoff_filter),
        )

    def forward(self, **kwargs: Any) -> dspy.Prediction:
        """Run the program on the task's inputs (plus optional ``cutoff``, ``task_id``, ``context``).

        Returns:
            ``dspy.Prediction`` with the task's output fields and ``trajectory`` (a
            :class:`memento.core.types.Trajectory`).

        Raises:
            EmptyQuestionError: a task input is missing or blank.
            LMUnavailableError: the LM cannot be reached or refuses the key (other LM failures are recorded).
        """
        call = self.prepare(kwargs)
        trajectory = call.trajectory
        started = time.perf_counter()
        meter = UsageMeter(self.roles)
        outputs: dict[str, Any]
        with meter:
            try:
                outputs = self.research(call)
            except Exception as exc:
                failure = handle_error(exc, where=f"{type(self).__name__} on task {call.task_id}", log=logger)
                trajectory.error = failure.reason
                outputs = empty_outputs(self.task.signature)
        trajectory.timings["total_s"] = round(time.perf_counter() - started, 6)
        trajectory.usage = self._usage(meter.usage(), call)
        if call.web is not None and trajectory.dating is not None:
            trajectory.dating.pages_undated_dropped += int(call.web.counts().get("undated_dropped", 0))
        outputs = {name: outputs.get(name) for name in self.task.output_fields}
        trajectory.prediction = _jsonable(outputs)
        return dspy.Prediction(**outputs, trajectory=trajectory)

    def research(self, call: ResearchCall) -> dict[str, Any]:
        """Produce the task's output fields for one call, recording what happened in ``call.trajectory``."""
        raise NotImplementedError

    # -- helpers for subclasses ------------------------------------------------------------------------------
    def memory_view(self, call: ResearchCall, **options: Any) -> Any:
        """The attached memory as this call may see it (made once per call): a memory with views
        (:meth:`memento.memory.memento_memory.MementoMemory.view`) hides what the task's own run wrote and every
        item its cutoff forbids, and records what it shows in the trajectory's dating record; any other
        :class:`~memento.core.protocols.MemoryProvider` is used as it is. ``options`` (``relevance``) go to the view."""
        if call.view is None and self.memory is not None:
            make = getattr(self.memory, "view", None)
            call.view = (
                make(exclude_task_id=call.task_id, dates=call.dates, dating=call.trajectory.dating, **options)
                if callable(make)
                else self.memory
            )
        return call.view

    def memory_text(self, call: ResearchCall) -> dict[str, str]:
        """The memory-bearing inputs for this task (M1 craft knowledge, M2/M3 rules, M4 facts); "" without memory."""
        keys = ("craft_knowledge", "decomposition_rules", "web_action_rules", "known_facts")
        view = self.memory_view(call)
        if view is None:
            return dict.fromkeys(keys, "")
        out: dict[str, str] = {}
        for key in keys:
            try:
                out[key] = getattr(view, key)(call.retrieval_key or call.task_text) or ""
            except Exception as exc:  # a broken memory must not lose the run: record and continue without it
                handle_error(exc, where=f"memory {key}", record=call.note, log=logger)
                out[key] = ""
        return out

    @staticmethod
    def _usage(lm_usage: Usage, call: ResearchCall) -> Usage:
        usage = lm_usage
        if call.web is not None:
            counts = call.web.counts()
            for key in ("searches", "fetches", "fetch_cache_hits", "unique_urls", "repeated_urls"):
                setattr(usage, key, int(counts.get(key, 0)))
        return usage


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return str(value)


def join_context(context: str, memory: dict[str, str]) -> str:
    """The caller's context plus any attached memory (:meth:`ResearchProgram.memory_text`), as labelled
    prompt-ready text: learned rules and insights as guidance, known facts quoted as data."""
    parts = [context.strip()] if context and context.strip() else []
    labels = {
        "craft_knowledge": "Research strategy insights",
        "decomposition_rules": "Decomposition rules",
        "web_action_rules": "Web-action rules",
        "known_facts": "Known facts",
    }
    for key, label in labels.items():
        text = (memory.get(key) or "").strip()
        if text:  # rules and insights are learned guidance; facts are quoted data
            parts.append(f"{label}:\n{quote_data(text) if key == 'known_facts' else text}")
    return "\n\n".join(parts)
