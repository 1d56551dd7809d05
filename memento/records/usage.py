"""Thread-safe LM usage accounting.

``dspy.track_usage()`` records nothing when a program runs in worker threads. :class:`UsageMeter` is a DSPy
callback plus a usage sink installed through ``dspy.context``: every LM call is attributed, in the thread that
made it, to its role (by LM object identity, see :class:`memento.llm.lm.Roles`) and to its stage (the innermost
module carrying a ``usage_stage`` attribute, else the name of the calling predictor).

A predictor's name (:func:`predictor_name`, the ``predictor`` of ``--log-lm``) is its signature's class name, fixed
on the predictor when the module holding it is built (:class:`NamedPredictors`, :func:`name_predictors`): DSPy
rebuilds a signature as an anonymous ``StringSignature`` whenever it derives one (``dspy.ReAct``'s step and extract
signatures, ``ChainOfThought``, an optimiser's ``with_instructions``, ``load``), and a predictor whose signature has
no name of its own is named after the nearest named module above it and its attribute path
(``AnswerMultiHopQuestionReAct.react``).

Example:
    >>> from memento.records.usage import UsageMeter
    >>> with UsageMeter() as meter:  # doctest: +SKIP
    ...     program(question="...")
    >>> meter.usage().lm_calls  # doctest: +SKIP
    7
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any, Self

from dspy.primitives.module import ProgramMeta
from dspy.utils.callback import BaseCallback

from memento.core.types import StageUsage, Usage

__all__ = [
    "ActivatedCallback",
    "GENERIC_SIGNATURE",
    "ModuleStackCallback",
    "NamedPredictors",
    "UsageMeter",
    "cached_prompt_tokens",
    "current_stage",
    "name_predictors",
    "predictor_name",
    "JUDGE_ROLE",
]

JUDGE_ROLE = "judge_lm"

# The running-module stack is a context variable, so worker threads started with a copy of the parent's context
# (dspy's executors, memento.execution.threads.run_parallel) attribute their calls to the enclosing stages too.
_modules: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("memento_modules", default=())


def _stack() -> tuple[Any, ...]:
    return _modules.get()


#: the class name DSPy gives every signature it derives (``Signature(fields, instructions)``): not a name
GENERIC_SIGNATURE = "StringSignature"
#: the attribute a predictor's name is fixed in (an instance attribute: deep copies, pickles and ``load`` keep it)
NAME_ATTR = "predictor_name"


def _own_name(module: Any) -> str | None:
    """The name fixed on ``module``, else its signature's class name unless DSPy derived it (``None``)."""
    fixed = getattr(module, "__dict__", {}).get(NAME_ATTR)
    if fixed:
        return str(fixed)
    name = getattr(getattr(module, "signature", None), "__name__", None)
    return str(name) if name and name != GENERIC_SIGNATURE else None


def _attribute_of(parent: Any, child: Any) -> str | None:
    """The attribute (or ``attr[i]`` / ``attr[key]`` item) by which ``parent`` holds ``child``."""
    for key, value in getattr(parent, "__dict__", {}).items():
        if value is child:
            return str(key)
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                if item is child:
                    return f"{key}[{i}]"
        elif isinstance(value, dict):
            for k, item in value.items():
                if item is child:
                    return f"{key}[{k}]"
    return None


def predictor_name(module: Any, parents: tuple[Any, ...] = ()) -> str:
    """The name of a predictor: the name fixed on it, else its signature's class name; a signature DSPy derived
    (``StringSignature``) is named after the nearest named module among ``parents`` (outermost first) and the
    attribute path from it (``AnswerQAReAct.extract.predict``), else after the outermost module's class."""
    own = _own_name(module)
    if own is not None:
        return own
    path: list[str] = []
    child = module
    for parent in reversed(parents):
        if parent is child:  # a module entered twice (``Predict.__call__`` and its ``forward``)
            continue
        path.insert(0, _attribute_of(parent, child) or type(child).__name__)
        named = _own_name(parent)
        if named is not None:
            return ".".join([named, *path])
        child = parent
    return ".".join([type(child).__name__, *path]) if path else GENERIC_SIGNATURE


def name_predictors(module: Any) -> Any:
    """Fix the name of every predictor in ``module`` (see :func:`predictor_name`) while its signatures are the
    classes it was built with; a predictor already named keeps its name. Returns ``module``."""
    parents: dict[int, tuple[Any, ...]] = {id(module): ()}
    queue = [module]
    while queue:  # breadth first: each module's shortest path from ``module``
        current = queue.pop(0)
        for child in _children(current):
            if id(child) not in parents:
                parents[id(child)] = (*parents[id(current)], current)
                queue.append(child)
    for _, predictor in module.named_predictors():
        if not getattr(predictor, "__dict__", {}).get(NAME_ATTR):
            setattr(predictor, NAME_ATTR, predictor_name(predictor, parents.get(id(predictor), ())))
    return module


def _children(module: Any) -> list[Any]:
    """The DSPy modules ``module`` holds as attributes or in a list, tuple or dict attribute."""
    out: list[Any] = []
    for value in getattr(module, "__dict__", {}).values():
        items = value if isinstance(value, list | tuple) else value.values() if isinstance(value, dict) else [value]
        out.extend(item for item in items if hasattr(item, "named_predictors") and not isinstance(item, type))
    return out


class NamedPredictors(ProgramMeta):
    """The metaclass of memento's DSPy modules: once a module is built, its predictors are named
    (:func:`name_predictors`), so ``--log-lm``, usage by stage and the reports name them alike before and after
    an optimiser rewrote their instructions or ``load`` restored them."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return name_predictors(super().__call__(*args, **kwargs))


def current_predictor() -> str | None:
    """The name of the innermost running predictor (:func:`predictor_name`; ``None`` outside any)."""
    stack = _stack()
    for i in range(len(stack) - 1, -1, -1):
        if getattr(stack[i], "signature", None) is not None:
            return predictor_name(stack[i], stack[:i])
    return None


def current_stage() -> str:
    """The stage name of the innermost running module in this thread (``"unknown"`` outside any module): its
    ``usage_stage``, else the name of the innermost running predictor."""
    for module in reversed(_stack()):
        stage = getattr(module, "usage_stage", None)
        if stage:
            return str(stage)
    return current_predictor() or "unknown"


def cached_prompt_tokens(usage_entry: dict[str, Any]) -> int:
    """The prompt tokens of a call that the provider's prompt cache served (OpenAI's
    ``prompt_tokens_details.cached_tokens``; a local model reports the tokens llama.cpp did not evaluate)."""
    details = usage_entry.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0


class _Call:
    __slots__ = ("role", "stage", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "billed")

    def __init__(self, role: str, stage: str) -> None:
        self.role = role
        self.stage = stage
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_prompt_tokens = 0
        self.billed = False


class _UsageSink:
    """Stands in for ``dspy.settings.usage_tracker``: DSPy hands it each non-cached response's usage."""

    def __init__(self, meter: UsageMeter) -> None:
        self.meter = meter
        self.parent: Any = None  # the tracker this sink replaced (an outer meter, dspy.track_usage): fed too

    def __deepcopy__(self, memo: dict[int, Any]) -> _UsageSink:
        # dspy's ParallelExecutor (Evaluate, GEPA, MIPROv2) deep-copies the usage tracker into every worker thread;
        # the sink is thread-safe and attributes calls per thread itself, so workers must share it, not a copy.
        return self

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)
        calls = getattr(self.meter._local, "calls", None)
        if not calls:
            return
        call = calls[-1]
        call.billed = True
        call.prompt_tokens += int(usage_entry.get("prompt_tokens") or usage_entry.get("input_tokens") or 0)
        call.completion_tokens += int(usage_entry.get("completion_tokens") or usage_entry.get("output_tokens") or 0)
        call.cached_prompt_tokens += cached_prompt_tokens(usage_entry)


class ModuleStackCallback(BaseCallback):
    """A DSPy callback that keeps the stack of running modules, which :func:`current_stage` reads.

    Every memento callback that attributes LM calls to stages (:class:`UsageMeter`,
    :class:`memento.records.lm_log.LMCallLog`, :class:`memento.cli.progress.LMCallCounter`) derives from it.
    """

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        _modules.set((*_modules.get(), instance))

    def on_module_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        stack = _modules.get()
        if stack:
            _modules.set(stack[:-1])


class ActivatedCallback(ModuleStackCallback):
    """A callback used as a context manager: ``with cb:`` holds ``cb.activate()`` open until the block ends.

    Subclasses define ``activate()``, a context manager that installs them (``dspy.context``).
    """

    _ctx: contextlib.ExitStack | None = None

    def activate(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._ctx = contextlib.ExitStack()
        self._ctx.enter_context(self.activate())
        return self

    def __exit__(self, *exc: object) -> None:
        ctx, self._ctx = self._ctx, None
        assert ctx is not None, f"{type(self).__name__} exited without being entered"
        ctx.close()


class UsageMeter(ActivatedCallback):
    """Counts LM calls and tokens per role and per stage; safe when the program runs in threads.

    Args:
        roles: the role map from :func:`memento.configure`, to attribute calls to ``lm``/``judge_lm``/...;
            calls of an LM that is not in the map count under its model string.

    Use it as a context manager (it installs itself with ``dspy.context``, which DSPy's parallel executors and
    :func:`memento.execution.threads.run_parallel` carry into worker threads), or add it to
    ``dspy.configure(callbacks=...)`` yourself together with ``usage_tracker=meter.sink``.
    """

    def __init__(self, roles: Any | None = None) -> None:
        self.roles = roles
        self.sink = _UsageSink(self)
        self._lock = threading.Lock()
        self._open: dict[str, _Call] = {}
        self._by_role: dict[str, StageUsage] = {}
        self._by_stage: dict[str, StageUsage] = {}
        self._local = threading.local()  # this meter's open LM calls in the current thread

    # -- DSPy callback hooks -------------------------------------------------------------------------------
    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        role = self.roles.role_of(instance) if self.roles is not None else None
        call = _Call(role if role is not None else getattr(instance, "model", "lm"), current_stage())
        calls = getattr(self._local, "calls", None)
        if calls is None:
            calls = self._local.calls = []
        calls.append(call)
        with self._lock:
            self._open[call_id] = call

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        with self._lock:
            call = self._open.pop(call_id, None)
        calls = getattr(self._local, "calls", None)
        if calls and call is not None and calls[-1] is call:
            calls.pop()
        if call is None:
            return
        if exception is not None and not call.billed:
            return
        with self._lock:
            for table, key in ((self._by_role, call.role), (self._by_stage, call.stage)):
                entry = table.setdefault(key, StageUsage())
                if call.billed:
                    entry.lm_calls += 1
                    entry.prompt_tokens += call.prompt_tokens
                    entry.completion_tokens += call.completion_tokens
                    entry.cached_prompt_tokens += call.cached_prompt_tokens
                else:
                    entry.cached_calls += 1

    # -- results -------------------------------------------------------------------------------------------
    def usage(self) -> Usage:
        """A snapshot: totals, ``by_role``, ``by_stage``; ``judge_calls`` are the calls of the ``judge_lm`` role."""
        with self._lock:
            by_role = {k: v.model_copy() for k, v in self._by_role.items()}
            by_stage = {k: v.model_copy() for k, v in self._by_stage.items()}
        return Usage(
            lm_calls=sum(v.lm_calls for v in by_role.values()),
            prompt_tokens=sum(v.prompt_tokens for v in by_role.values()),
            completion_tokens=sum(v.completion_tokens for v in by_role.values()),
            cached_prompt_tokens=sum(v.cached_prompt_tokens for v in by_role.values()),
            cached_lm_calls=sum(v.cached_calls for v in by_role.values()),
            judge_calls=by_role.get(JUDGE_ROLE, StageUsage()).lm_calls,
            by_role=by_role,
            by_stage=by_stage,
        )

    def absorb_remote(self, outcome: Any) -> None:
        """Count LM calls another process of the run made (a Ray worker's task, measured there), by role and stage."""
        usage: Usage = outcome.usage
        with self._lock:
            for table, source in ((self._by_role, usage.by_role), (self._by_stage, usage.by_stage)):
                for key, entry in source.items():
                    mine = table.setdefault(key, StageUsage())
                    mine.lm_calls += entry.lm_calls
                    mine.prompt_tokens += entry.prompt_tokens
                    mine.completion_tokens += entry.completion_tokens
                    mine.cached_prompt_tokens += entry.cached_prompt_tokens
                    mine.cached_calls += entry.cached_calls

    def reset(self) -> None:
        """Forget everything counted so far."""
        with self._lock:
            self._by_role.clear()
            self._by_stage.clear()

    @contextlib.contextmanager
    def activate(self) -> Iterator[UsageMeter]:
        """Install this meter for the enclosed block (current thread and the workers DSPy context reaches)."""
        import dspy

        callbacks = [*dspy.settings.get("callbacks", []), self]
        previous = dspy.settings.get("usage_tracker")
        self.sink.parent = previous if previous is not self.sink else None
        with dspy.context(callbacks=callbacks, usage_tracker=self.sink):
            yield self
