"""The methods of a comparison: :class:`MethodSpec` (name, kind, base, optimiser) and :func:`parse_methods`.

A method's kind comes from the method registry (:func:`memento.programs.registry.method_info`): ``memory`` for a
method that keeps memory, ``optimizer`` for ``<optimiser>:<base>``, ``program`` for any other registered one.

Example:
    >>> from memento.optimize.method_spec import parse_methods
    >>> [(s.name, s.kind, s.base) for s in parse_methods("closed_book,gepa:react")]
    [('closed_book', 'program', 'closed_book'), ('gepa:react', 'optimizer', 'react')]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memento.core.errors import ConfigError
from memento.optimize.optimizers import OPTIMIZERS, require_optimizer_extras

__all__ = ["MethodSpec", "parse_methods", "reads_memory_of"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MethodSpec:
    """A method to compare: its name, kind (``program``, ``optimizer``, ``memory``), base program and optimiser."""

    name: str
    kind: str
    base: str
    optimizer: str | None = None

    @property
    def slug(self) -> str:
        """The method's directory name (``gepa:react`` -> ``gepa-react``)."""
        return self.name.replace(":", "-")


def _info(method: str) -> Any:
    """The registry's :class:`~memento.programs.registry.MethodInfo` of ``method`` (``None``: unknown)."""
    from memento.programs.registry import method_info

    return method_info(method)


def _is_memory(method: str) -> bool:
    info = _info(method)
    return bool(info is not None and info.memory)


def reads_memory_of(method: str) -> str | None:
    """The method whose trained memory ``method`` reads (run after it, reusing its artefact when it is done)."""
    info = _info(method)
    return info.reads if info is not None else None


def parse_methods(methods: str | Sequence[str]) -> list[MethodSpec]:
    """Parse ``"closed_book,aet,gepa:react"`` (or a list) into specs, in order, without duplicates.

    A method's kind comes from the method registry (:func:`memento.programs.registry.method_info`): a method that
    keeps memory is a ``memory`` method, any other registered one a ``program``.

    Raises:
        ConfigError: an empty list, an unknown optimiser, or an optimiser over a memory method.
        MissingExtraError: a method (``cbr``) or optimiser (``miprov2``) needs an extra that is not installed.
    """
    from memento.programs.registry import require_method_extras

    names = [m.strip() for m in (methods.split(",") if isinstance(methods, str) else methods)]
    names = [m for m in names if m]
    if not names:
        raise ConfigError("no methods to compare")
    specs: list[MethodSpec] = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        if ":" in name:
            optimizer, _, base = name.partition(":")
            if optimizer not in OPTIMIZERS:
                raise ConfigError(
                    f"unknown optimiser {optimizer!r} in {name!r}; expected one of {', '.join(OPTIMIZERS)}"
                )
            if not base or ":" in base:
                raise ConfigError(f"{name!r}: expected <optimiser>:<base method>, e.g. gepa:react")
            if _is_memory(base):
                raise ConfigError(
                    f"{name!r}: optimising a memory method's prompts is not supported; use a base program"
                )
            require_optimizer_extras(optimizer)
            require_method_extras(base)
            specs.append(MethodSpec(name, "optimizer", base, optimizer))
        elif _is_memory(name):
            require_method_extras(name)
            specs.append(MethodSpec(name, "memory", name))
        else:
            require_method_extras(name)
            specs.append(MethodSpec(name, "program", name))
    _check_known(specs)
    return specs


def _check_known(specs: list[MethodSpec]) -> None:
    """Refuse unknown methods (and unknown bases of optimisers) before any method runs."""
    from memento.programs.registry import method_names

    known = set(method_names())
    unknown = [s.name for s in specs if s.base not in known]
    if unknown:
        raise ConfigError(
            f"unknown method{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"available: {', '.join(sorted(known))} (and <optimiser>:<method> with {', '.join(OPTIMIZERS)})"
        )
