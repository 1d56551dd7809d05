"""The old import paths of the modules that issue 27 grouped into subpackages, kept for one release.

``import memento.config`` (or ``from memento.lm import configure``) still works: it gives the very module now at
the new path (``memento.core.config``), so attributes, identities and monkeypatching are those of the new module,
and raises one :class:`DeprecationWarning` naming the new path, attributed to the importing line. The list of the
old paths is ``tests/data/old_import_paths.txt``; :data:`MOVED` maps each (and the private modules) to its home.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     import memento.text as old
    >>> import memento.utils.text as new
    >>> old is new, [str(w.message) for w in caught]  # doctest: +SKIP
    (True, ['memento.text is deprecated and goes in the next release: import memento.utils.text'])
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

_COMMANDS = (
    "_common", "_observe", "_options", "compare", "corpus", "data", "eval", "memory", "memory_copy",
    "memory_qgate", "optimize_curator", "report", "run", "train",
)  # fmt: skip

#: each old module path and the module it now is
MOVED: dict[str, str] = {
    # the command line
    "memento.commands": "memento.cli.commands",
    **{f"memento.commands.{name}": f"memento.cli.commands.{name}" for name in _COMMANDS},
    "memento.progress": "memento.cli.progress",
    "memento.terminal": "memento.cli.terminal",
    "memento.terminal_table": "memento.cli.terminal_table",
    # the core every layer stands on
    "memento.cancel": "memento.core.cancel",
    "memento.config": "memento.core.config",
    "memento.dating": "memento.core.dating",
    "memento.errors": "memento.core.error_policy",  # the hierarchy alone: memento.core.errors
    "memento.paths": "memento.core.paths",
    "memento.presets": "memento.core.presets",
    "memento.protocols": "memento.core.protocols",
    "memento.types": "memento.core.types",
    "memento.untrusted": "memento.core.untrusted",
    # the LM client
    "memento.lm": "memento.llm.lm",
    "memento.lm_deadline": "memento.llm.lm_deadline",
    "memento.lm_failures": "memento.llm.lm_failures",
    "memento.lm_limiter": "memento.llm.lm_limiter",
    "memento.lm_replay": "memento.llm.lm_replay",
    "memento.local_lm": "memento.llm.local_lm",
    "memento.output_schema": "memento.llm.output_schema",
    "memento.structured_adapter": "memento.llm.structured_adapter",
    # what a run leaves behind
    "memento.html_report": "memento.records.html_report",
    "memento.leakage": "memento.records.leakage",
    "memento.lm_log": "memento.records.lm_log",
    "memento.provenance": "memento.records.provenance",
    "memento.tracking": "memento.records.tracking",
    "memento.usage": "memento.records.usage",
    # where work runs
    "memento.forward_worker": "memento.execution.forward_worker",
    "memento.lm_budget": "memento.execution.lm_budget",
    "memento.local_postgres": "memento.execution.local_postgres",
    "memento.ray_cluster": "memento.execution.ray_cluster",
    "memento.ray_executor": "memento.execution.ray_executor",
    "memento.threads": "memento.execution.threads",
    # small helpers
    "memento.bm25": "memento.utils.bm25",
    "memento.extras": "memento.utils.extras",
    "memento.files": "memento.utils.files",
    "memento.lazy_exports": "memento.utils.lazy_exports",
    "memento.scrub": "memento.utils.scrub",
    "memento.text": "memento.utils.text",
}


class _MovedLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (no second copy), warning once."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        if _importing_below(self.old):
            return module  # ``import memento.commands.eval``: the submodule's own warning names its new path
        # stacklevel 2: the frame past the import system's own (warnings skips importlib._bootstrap frames)
        message = f"{self.old} is deprecated and goes in the next release: import {self.new}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # module_from_spec gave the new module the old path's spec: give its own back


def _importing_below(package: str) -> bool:
    """Whether ``package`` is being imported as the parent of a submodule being imported (CPython's import system
    imports ``a.b`` first when asked for ``a.b.c``, in ``importlib._bootstrap._find_and_load_unlocked``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_find_and_load_unlocked" and str(frame.f_locals.get("name", "")).startswith(
            package + "."
        ):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader(fullname, new))


def install() -> None:
    """Put the finder of old paths first on ``sys.meta_path`` (once), ahead of the files at the new paths."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
