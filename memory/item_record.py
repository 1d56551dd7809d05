"""One item of a memory as a normalised record (its store, kind, content with random ids and times left out),
so that two memories are compared by content: what each store's ``content_items()`` yields.

Example:
    >>> from memento.memory.item_record import normalise
    >>> normalise({"id": "r-0123456789ab", "text": "x", "created_at": 1})
    {'id': '<id>', 'text': 'x'}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

__all__ = ["normalise", "ItemRecord", "sorted_list"]


#: An id made by :func:`memento.core.types.new_id` (``t-3f2a9c1d0b7e``): random per run, so never compared.
_RANDOM_ID = re.compile(r"\b[a-z]+-[0-9a-f]{12}\b")


#: Keys whose values are times or durations of the run that wrote an item, never compared.
_VOLATILE = frozenset({"created_at", "updated_at", "timings", "ms", "latency_s", "seconds", "wall_seconds"})


def normalise(value: Any, *, drop: frozenset[str] = _VOLATILE) -> Any:
    """``value`` (JSON data) without the keys in ``drop`` and with every random id replaced by ``<id>``."""
    if isinstance(value, str):
        return _RANDOM_ID.sub("<id>", value)
    if isinstance(value, dict):
        return {str(k): normalise(v, drop=drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list | tuple):
        return [normalise(v, drop=drop) for v in value]
    if isinstance(value, float):
        return round(value, 6)  # a float recomputed in another process (a gate score) may differ in its last bits
    return value


@dataclass(frozen=True, order=True)
class ItemRecord:
    """One stored item: its store (``M1``-``M4``, ``cases``, ``gate_pairs``, ``trajectories``) and its normalised
    content as canonical JSON (sorted keys)."""

    store: str
    content: str

    @classmethod
    def of(cls, store: str, data: Any, *, drop: frozenset[str] = _VOLATILE) -> ItemRecord:
        """The record of ``data`` (JSON data) in ``store``, normalised (:func:`normalise`)."""
        text = json.dumps(normalise(data, drop=drop), ensure_ascii=False, sort_keys=True, default=str)
        return cls(store, text)

    def summary(self, width: int = 110) -> str:
        """A one-line summary: the item's text (or task) when it has one, else its JSON."""
        from memento.utils.text import one_line

        data = json.loads(self.content)
        text = next((data[k] for k in ("text", "task_text", "query") if isinstance(data.get(k), str)), self.content)
        return one_line(text, width)


def sorted_list(values: Iterable[Any]) -> list[Any]:
    """``values`` normalised and sorted (a set held as a list: provenance, sources)."""
    return sorted((normalise(v) for v in values), key=lambda v: json.dumps(v, sort_keys=True, default=str))
