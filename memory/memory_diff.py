"""What changed in a memory between two versions, per store: items added, removed and modified, and characters as
in MEMENTO Tables 15-16 (retired rules and superseded facts count as gone).

Example:
    >>> from memento.memory.memory_diff import changed_chars
    >>> changed_chars("search the title", "search the exact title")
    6
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["StoreDiff", "MemoryDiff", "visible_text", "changed_chars"]


class StoreDiff(BaseModel):
    """What changed in one store between two versions (characters as in MEMENTO Tables 15-16).

    ``modified`` lists every item whose record changed (text, support, contradiction, status...);
    ``chars_modified`` counts only the changed characters of their text.
    """

    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    chars_after: int = 0
    chars_added: int = 0
    chars_deleted: int = 0
    chars_modified: int = 0


class MemoryDiff(BaseModel):
    """The per-store differences between version ``a`` and version ``b``."""

    a: int
    b: int
    stores: dict[str, StoreDiff]

    def summary(self) -> str:
        """One line per store: ``+added -removed ~modified``."""
        return "\n".join(
            f"{name}: +{d.added.__len__()} -{d.removed.__len__()} ~{d.modified.__len__()} "
            f"(chars +{d.chars_added} -{d.chars_deleted} ~{d.chars_modified}, after {d.chars_after})"
            for name, d in self.stores.items()
        )


def visible_text(store: str, data: dict[str, Any]) -> str:
    """The text that counts as a store's content (retired rules and superseded facts excluded)."""
    if store in ("decomposition", "web_action") and data.get("status") == "retired":
        return ""
    if store == "facts":
        if data.get("superseded_by"):
            return ""
        return f"{data.get('entity', '')}: {data.get('text', '')}"
    return str(data.get("text", ""))


def changed_chars(old: str, new: str) -> int:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")
