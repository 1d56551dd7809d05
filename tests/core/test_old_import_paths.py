"""The old import paths (issue 27): each module path of the glue package before it was grouped into subpackages
(``tests/data/old_import_paths.txt``, generated from the tree before the move) still imports, for one release, as
the very module at its new path, with exactly one DeprecationWarning that names the new path and points at the
importing line; nothing of the project imports an old path.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memento._moved import MOVED

ROOT = Path(__file__).resolve().parents[2]
OLD_PATHS = (ROOT / "tests/data/old_import_paths.txt").read_text().split()

_PROBE = r"""
import importlib, json, sys, warnings
import memento._moved as moved
out = {}
for old in sys.argv[1:]:
    new = moved.MOVED.get(old)
    if new is not None:
        importlib.import_module(new)  # warnings of its own imports (third-party ones) are not the old path's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace = {}
        exec(compile(f"import {old}", "importer.py", "exec"), namespace)
    module = sys.modules[old]
    out[old] = {
        "same": new is not None and module is sys.modules[new],
        "name": module.__name__,
        "warnings": [[w.category.__name__, str(w.message), w.filename] for w in caught],
    }
print(json.dumps(out))
"""


def test_the_list_is_the_tree_before_the_move() -> None:
    assert len(OLD_PATHS) == len(set(OLD_PATHS)) >= 45
    assert {"memento.config", "memento.errors", "memento.lm", "memento.commands.eval", "memento.testing"} - {
        "memento.testing"
    } <= set(OLD_PATHS)
    assert set(OLD_PATHS) <= set(MOVED)  # every listed path is served


def test_every_old_path_is_its_new_module_with_one_warning_naming_it() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *OLD_PATHS], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    for old in OLD_PATHS:
        new = MOVED[old]
        got = seen[old]
        assert got["same"] and got["name"] == new, (old, got)
        assert got["warnings"] == [
            ["DeprecationWarning", f"{old} is deprecated and goes in the next release: import {new}", "importer.py"]
        ], old


def test_importing_a_submodule_of_an_old_package_warns_once() -> None:
    code = (
        "import warnings\nwarnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import memento.commands.eval\n"
        "import memento.cli.commands.eval as new\n"
        "assert memento.commands.eval is new, memento.commands.eval\n"
        "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(
        ["memento.commands.eval is deprecated and goes in the next release: import memento.cli.commands.eval"]
    )


def test_the_command_line_imports_no_old_path() -> None:
    for module in ("memento.cli", "memento.cli.app"):
        proc = subprocess.run(
            [sys.executable, "-W", "error::DeprecationWarning", "-c", f"import {module}"],
            capture_output=True, text=True, timeout=600, cwd=ROOT,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]


def _project_files() -> list[Path]:
    tops = ["memento", "memory", "metrics", "optimize", "programs", "signatures", "tasks", "web", "tests", "bench",
            "examples", "docs"]  # fmt: skip
    files = []
    for top in tops:
        for path in (ROOT / top).rglob("*.py"):
            if not any(part in {"memory", "metrics", "optimize", "programs", "signatures", "tasks", "web"}
                       for part in path.relative_to(ROOT).parts[1:2]) or top != "memento":  # fmt: skip
                files.append(path)
    return files


def test_no_project_file_imports_an_old_path() -> None:
    old = set(MOVED)
    found = []
    for path in _project_files():
        if path.name == Path(__file__).name or path.name == "_moved.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            hits = [name for name in names if name in old]
            if hits:
                found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}: {', '.join(hits)}")
    assert not found, "\n".join(found)


def test_names_moved_out_of_a_module_still_import_from_it_with_a_warning() -> None:
    """memory/database.py's backend functions moved to memory/backends.py (which imports database.py): the old
    ``from memento.memory.database import open_database`` still works for one release, warning with the new path."""
    import warnings

    import memento.memory.backends as backends
    import memento.memory.database as database

    for name in ("open_database", "part_exists", "writer_lock", "writer_lock_holder", "writer_active"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(database, name) is getattr(backends, name)
        assert [str(w.message) for w in caught] == [
            f"memento.memory.database.{name} moved to memento.memory.backends.{name}"
        ]
        assert caught[0].category is DeprecationWarning and caught[0].filename == __file__
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        database.nothing  # noqa: B018
