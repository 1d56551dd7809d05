"""The method registry: a name (``aet``, ``react``, ``closed_book``...) to a builder of a ready program.

A builder is ``fn(*, task, settings, roles, trainset=None, memory_dir=None) -> dspy.Module``; register one with
:func:`register_method`. :func:`build_program` imports the modules that register memento's methods on first use, so
``build_program("aet", ...)`` works without importing anything else.

Example:
    >>> from memento.config import load_settings
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memento.errors import ConfigError
from memento.tasks.task import Task, get_task

if TYPE_CHECKING:
    import dspy

    from memento.config import Settings
    from memento.lm import Roles

__all__ = ["register_method", "build_program", "method_names", "require_method_extras", "METHOD_MODULES"]

logger = logging.getLogger(__name__)

Builder = Callable[..., "dspy.Module"]

#: Modules whose import registers methods; a module that does not exist (yet) is skipped.
METHOD_MODULES: tuple[str, ...] = (
    "memento.programs.baselines",
    "memento.programs.adaptive_exploration_tree",
    "memento.programs.memento_program",
    "memento.programs.case_based_agent",
    "memento.programs.case_memory",
    "memento.programs.jitmem_agent",
)

_BUILDERS: dict[str, Builder] = {}
_EXTRAS: dict[str, tuple[str, ...]] = {}
_IMPORT_ERRORS: dict[str, str] = {}
_loaded = False
_load_lock = threading.Lock()


def register_method(name: str, *, extras: tuple[str, ...] = ()) -> Callable[[Builder], Builder]:
    """Register a program builder under ``name`` (a decorator).

    The builder is called as ``fn(*, task, settings, roles, trainset=None, memory_dir=None)``. ``extras`` names the
    optional extras (:mod:`memento.extras`) the method cannot run without: building it without them is one line
    naming the extra to install.
    """
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"invalid method name {name!r}")

    def decorate(fn: Builder) -> Builder:
        if name in _BUILDERS and _BUILDERS[name] is not fn:
            logger.info("method %s re-registered by %s", name, getattr(fn, "__module__", fn))
        _BUILDERS[name] = fn
        _EXTRAS[name] = tuple(extras)
        return fn

    return decorate


def _load_methods() -> None:
    global _loaded
    with _load_lock:
        if _loaded:
            return
        for module in METHOD_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name == module:  # not written (yet): its methods are simply absent
                    logger.debug("method module %s not available", module)
                    continue
                _IMPORT_ERRORS[module] = f"{type(exc).__name__}: {exc}"
                logger.warning("method module %s failed to import: %s", module, exc)
            except ImportError as exc:
                # A broken method module must not take the others down; it is named when its method is asked for.
                _IMPORT_ERRORS[module] = f"{type(exc).__name__}: {exc}"
                logger.warning("method module %s failed to import: %s", module, exc)
        _loaded = True


def method_names() -> list[str]:
    """The registered method names."""
    _load_methods()
    return sorted(_BUILDERS)


def require_method_extras(method: str) -> None:
    """Raise :class:`~memento.extras.MissingExtraError` when a registered ``method`` needs an extra that is missing
    (nothing for an unknown method: :func:`build_program` reports that)."""
    from memento.extras import require

    _load_methods()
    for extra in _EXTRAS.get(method, ()):
        require(extra, f"method {method!r}")


def build_program(
    method: str,
    *,
    task: Task | str,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: str | Path | None = None,
    frozen: bool = False,
) -> dspy.Module:
    """Build the program of a registered method for a task, with budgets, threads and web tools from settings.

    ``frozen=True`` asks for test-time behaviour: methods with persistent memory (jitmem, cbr) open it read-only and
    never write to it; builders without a ``frozen`` parameter hold no writable memory and ignore it (``memento``
    always opens its memory frozen).

    Raises:
        ConfigError: the method is unknown (the message lists the known ones) or its builder refuses the inputs.
        MissingExtraError: the method needs an optional extra that is not installed (the message names it).
    """
    _load_methods()
    try:
        builder = _BUILDERS[method]
    except KeyError:
        broken = "; ".join(f"{m} ({e})" for m, e in _IMPORT_ERRORS.items())
        hint = f"; modules that failed to import: {broken}" if broken else ""
        raise ConfigError(f"unknown method {method!r}; available: {', '.join(sorted(_BUILDERS))}{hint}") from None
    require_method_extras(method)
    task_obj = get_task(task) if isinstance(task, str) else task
    extra: dict[str, Any] = {}
    if "frozen" in inspect.signature(builder).parameters:
        extra["frozen"] = frozen
    return builder(
        task=task_obj,
        settings=settings,
        roles=roles,
        trainset=trainset,
        memory_dir=Path(memory_dir) if memory_dir is not None else None,
        **extra,
    )
