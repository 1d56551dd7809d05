"""Package ``__init__`` files whose public names are imported on first use (PEP 562), so that importing one module
of a layer does not import the whole layer: a closed-book run starts without the web layer, the case bank or numpy.

Example:
    >>> import memento.web
    >>> memento.web.Fetcher.__module__  # imported now, on first use
    'memento.web.fetcher'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["homes_by_module", "lazy_exports"]


def lazy_exports(package: str, homes: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, serving each public name from its module.

    Args:
        package: the package's ``__name__``.
        homes: each public name and the submodule (relative to the package) that defines it.

    Use it in the package's ``__init__``: ``__getattr__, __dir__ = lazy_exports(__name__, _HOMES)``; list the
    names in ``__all__`` as usual and import them under ``if TYPE_CHECKING:`` for type checkers.
    """
    namespace = importlib.import_module(package).__dict__

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value  # later lookups are plain attribute reads
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *homes})

    return getattr_, dir_


def homes_by_module(modules: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """``{module: (name, ...)}``, a package's public names listed by module, as the ``{name: module}`` that
    :func:`lazy_exports` takes.

    Example:
        >>> homes_by_module({"config": ("Settings", "load_settings")})
        {'Settings': 'config', 'load_settings': 'config'}
    """
    return {name: module for module, names in modules.items() for name in names}
