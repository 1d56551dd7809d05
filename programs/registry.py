"""The method registry: a name (``aet``, ``react``, ``closed_book``...) to a builder of a ready program.

A builder is ``fn(*, task, settings, roles, trainset=None, memory_dir=None) -> dspy.Module``; register one with
:func:`register_method`. :func:`build_program` imports the modules that register memento's methods on first use, so
``build_program("aet", ...)`` works without importing anything else.

One builder per method serves ``run``, ``eval``, ``train`` and ``compare`` alike: every knob comes from the
:class:`~memento.core.config.Settings`; ``frozen`` picks test time (memory read-only) or training (memory written), and
objects a caller injects (``embedder``, ``web``, ``reward_fn``) reach the builders that take them. What a method is
(:class:`MethodInfo`: whether it keeps memory, whose memory it reads, whether a run writes it) is declared when it
is registered, so the commands and the compare harness need no list of methods of their own.

Example:
    >>> from memento.core.config import load_settings
    >>> from memento.programs.registry import build_program
    >>> program = build_program("closed_book", task="qa", settings=load_settings())
    >>> type(program).__name__
    'ClosedBook'
"""

from __future__ import annotations

import importlib
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memento.core.errors import ConfigError
from memento.memory.location import LocationLike, parse_location
from memento.tasks.task import Task, get_task

if TYPE_CHECKING:
    import dspy

    from memento.core.config import Settings
    from memento.llm.lm import Roles

__all__ = [
    "MethodInfo",
    "register_method",
    "build_program",
    "apply_dating",
    "method_names",
    "method_info",
    "require_method_extras",
    "METHOD_MODULES",
    "METHOD_HOMES",
    "INJECTED",
]

logger = logging.getLogger(__name__)

Builder = Callable[..., "dspy.Module"]

#: Modules whose import registers methods; a module that does not exist (yet) is skipped.
METHOD_MODULES: tuple[str, ...] = (
    "memento.programs.baselines",
    "memento.programs.react_agent",
    "memento.programs.adaptive_exploration_tree",
    "memento.programs.memento_program",
    "memento.programs.case_based_agent",
    "memento.programs.case_memory",
    "memento.programs.jitmem_agent",
)

#: The module that registers each built-in method: building one imports that module alone (a closed-book run never
#: loads the web layer, the case bank or numpy). A method not listed here (one a user registers) is looked up by
#: importing every module of :data:`METHOD_MODULES`. ``tests/programs/test_registry.py`` keeps the table true.
METHOD_HOMES: dict[str, str] = {
    "closed_book": "memento.programs.baselines",
    "few_shot": "memento.programs.baselines",
    "closed_book_memory": "memento.programs.baselines",
    "few_shot_memory": "memento.programs.baselines",
    "react": "memento.programs.react_agent",
    "react_rewrite": "memento.programs.react_agent",
    "react_rerank": "memento.programs.react_agent",
    "react_rewrite_rerank": "memento.programs.react_agent",
    "react_memory": "memento.programs.react_agent",
    "aet": "memento.programs.adaptive_exploration_tree",
    "memento": "memento.programs.memento_program",
    "cbr": "memento.programs.case_based_agent",
    "closed_book_cases": "memento.programs.case_memory",
    "few_shot_cases": "memento.programs.case_memory",
    "jitmem": "memento.programs.jitmem_agent",
}

#: Objects a caller may hand to a builder (not knobs: a shared embedder, a counting web factory, a reward metric);
#: each reaches only the builders that take it.
INJECTED: tuple[str, ...] = ("embedder", "web", "reward_fn")


@dataclass(frozen=True)
class MethodInfo:
    """What a registered method is.

    Attributes:
        name: the method's name.
        extras: optional extras it cannot run without.
        memory: it keeps a memory directory (``memento``, ``cbr``, ``jitmem`` ...); an optimiser cannot compile it.
        reads: the method whose trained memory it reads (``react_memory`` reads ``memento``'s), or ``None``.
        writes: a run that is not frozen adds to its memory (``cbr`` retains cases, ``jitmem`` trajectories), so
            ``memento run`` holds the directory's write lock around it.
    """

    name: str
    extras: tuple[str, ...] = ()
    memory: bool = False
    reads: str | None = None
    writes: bool = False


_BUILDERS: dict[str, Builder] = {}
_INFO: dict[str, MethodInfo] = {}
_IMPORT_ERRORS: dict[str, str] = {}
_loaded = False
_load_lock = threading.Lock()


def register_method(
    name: str,
    *,
    extras: tuple[str, ...] = (),
    memory: bool = False,
    reads: str | None = None,
    writes: bool = False,
) -> Callable[[Builder], Builder]:
    """Register a program builder under ``name`` (a decorator).

    The builder is called as ``fn(*, task, settings, roles, trainset=None, memory_dir=None)``, plus ``frozen`` and
    the :data:`INJECTED` objects when it takes them. ``extras`` names the optional extras (:mod:`memento.utils.extras`)
    the method cannot run without: building it without them is one line naming the extra to install. ``memory``,
    ``reads`` and ``writes`` describe the method (:class:`MethodInfo`).
    """
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"invalid method name {name!r}")

    def decorate(fn: Builder) -> Builder:
        if name in _BUILDERS and _BUILDERS[name] is not fn:
            logger.info("method %s re-registered by %s", name, getattr(fn, "__module__", fn))
        _BUILDERS[name] = fn
        _INFO[name] = MethodInfo(name, tuple(extras), memory=memory or reads is not None, reads=reads, writes=writes)
        return fn

    return decorate


def _import_module(module: str) -> None:
    """Import a module that registers methods; a broken one is remembered (and named later), never raised."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:  # not written (yet): its methods are simply absent
            logger.debug("method module %s not available", module)
            return
        _IMPORT_ERRORS[module] = f"{type(exc).__name__}: {exc}"
        logger.warning("method module %s failed to import: %s", module, exc)
    except ImportError as exc:
        # A broken method module must not take the others down; it is named when its method is asked for.
        _IMPORT_ERRORS[module] = f"{type(exc).__name__}: {exc}"
        logger.warning("method module %s failed to import: %s", module, exc)


def _load_methods(method: str | None = None) -> None:
    """Make ``method`` known (its home module alone when :data:`METHOD_HOMES` names it), or every method."""
    global _loaded
    with _load_lock:
        if _loaded or (method is not None and method in _BUILDERS):
            return
        home = METHOD_HOMES.get(method) if method is not None else None
        if home is not None:
            _import_module(home)
            if method in _BUILDERS:
                return
        for module in METHOD_MODULES:
            _import_module(module)
        _loaded = True


def method_names() -> list[str]:
    """The registered method names."""
    _load_methods()
    return sorted(_BUILDERS)


def method_info(method: str) -> MethodInfo | None:
    """What the registered ``method`` is (``None`` for an unknown one)."""
    _load_methods(method)
    return _INFO.get(method)


def require_method_extras(method: str) -> None:
    """Raise :class:`~memento.utils.extras.MissingExtraError` when a registered ``method`` needs an extra that is
    missing
    (nothing for an unknown method: :func:`build_program` reports that)."""
    from memento.utils.extras import require

    _load_methods(method)
    info = _INFO.get(method)
    for extra in info.extras if info is not None else ():
        require(extra, f"method {method!r}")


def build_program(
    method: str,
    *,
    task: Task | str,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: LocationLike | None = None,
    frozen: bool | Literal["forward"] | None = None,
    **injected: Any,
) -> dspy.Module:
    """Build the program of a registered method for a task, with budgets, threads and web tools from settings.

    ``frozen=True`` asks for test-time behaviour: methods with persistent memory (jitmem, cbr, memento) open it
    read-only and never write to it; ``frozen=False`` builds the training form (``memento``: a writable memory and
    the learning module, for :class:`~memento.optimize.memento_trainer.MementoTrainer`); ``None`` is the method's
    own default (``memento``: frozen; ``cbr``, ``jitmem``: writing, as ``memento run`` uses them). Builders without
    a ``frozen`` parameter hold no writable memory and ignore it. ``injected`` (``embedder``, ``web``,
    ``reward_fn``: :data:`INJECTED`) reaches the builders that take each.

    Raises:
        ConfigError: the method is unknown (the message lists the known ones) or its builder refuses the inputs.
        MissingExtraError: the method needs an optional extra that is not installed (the message names it).
    """
    _load_methods(method)
    try:
        builder = _BUILDERS[method]
    except KeyError:
        broken = "; ".join(f"{m} ({e})" for m, e in _IMPORT_ERRORS.items())
        hint = f"; modules that failed to import: {broken}" if broken else ""
        raise ConfigError(f"unknown method {method!r}; available: {', '.join(sorted(_BUILDERS))}{hint}") from None
    require_method_extras(method)
    unknown = sorted(set(injected) - set(INJECTED))
    if unknown:
        raise ConfigError(f"build_program takes no {', '.join(unknown)}; injected objects are {', '.join(INJECTED)}")
    task_obj = get_task(task) if isinstance(task, str) else task
    from memento.core.presets import apply_preset

    settings = apply_preset(settings, method, task_obj.name)  # [run] preset: the method's paper setup
    params = inspect.signature(builder).parameters
    extra = {key: value for key, value in injected.items() if value is not None and key in params}
    if frozen is not None and "frozen" in params:
        extra["frozen"] = frozen
    program = builder(
        task=task_obj,
        settings=settings,
        roles=roles,
        trainset=trainset,
        memory_dir=parse_location(memory_dir) if memory_dir is not None else None,
        **extra,
    )
    apply_dating(program, settings, task_obj)
    return program


def apply_dating(program: Any, settings: Settings, task: Task) -> None:
    """Give a built program (and every research program inside it: a JitMem executor) the one undated policy
    (``[web] undated`` wins over the task's default: :func:`memento.core.dating.resolve_undated`) and the memory date
    filter switch (``[memory] cutoff_filter``)."""
    from memento.core.dating import resolve_undated

    policy = resolve_undated(settings.web.undated, task).policy
    modules = [program]
    named = getattr(program, "named_sub_modules", None)
    if callable(named):
        modules += [module for _name, module in named()]
    for module in modules:
        if hasattr(module, "undated") and hasattr(module, "cutoff_filter"):
            module.undated = policy
            module.cutoff_filter = bool(settings.memory.cutoff_filter)
