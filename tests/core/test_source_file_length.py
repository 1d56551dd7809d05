"""No source file of the package is over 600 lines (issue 27 item 3): a long module is split by concept (one main
class or one concept per snake_case file), not cut at a line count. The layer folders are followed through their
symlinks in ``memento/``; tests and benches are not package source."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600


def _sources() -> list[Path]:
    files: list[Path] = []
    for folder, dirs, names in os.walk(ROOT / "memento", followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        files.extend(Path(folder) / name for name in sorted(names) if name.endswith(".py"))
    return files


def test_the_walk_follows_the_layer_symlinks() -> None:
    names = {p.relative_to(ROOT / "memento").as_posix() for p in _sources()}
    for layer in ("memory", "optimize", "programs", "web", "tasks", "metrics", "signatures"):
        assert f"{layer}/__init__.py" in names, layer
    assert "optimize/runners/__init__.py" in names


def test_no_source_file_is_over_600_lines() -> None:
    long = {
        p.relative_to(ROOT / "memento").as_posix(): n
        for p in _sources()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, "split by concept: " + ", ".join(f"memento/{name} ({n} lines)" for name, n in sorted(long.items()))
