"""What a memory directory holds, as normalised item records, and the difference of two memories by content.

A memory directory holds up to three stores: MEMENTO's M1-M4 (``memory.db``), the CBR case bank with the Q-gate's
logged pairs (``cbr/cases.db``) and JitMem's trajectory bank (``jitmem/trajectories.sqlite3``). Each store lists its
items with ``content_items()`` as :class:`ItemRecord` s: the store's name and the item as canonical JSON, without
what differs between two runs that did the same work — ids (random per run, also where an item names another item or
a run), timestamps and durations. Two memories are compared as multisets of records per store (:func:`diff_items`),
so a replayed run (``--replay-lm``) can be checked against the logged one, and a memory against its copy on another
storage backend: a backend only has to list the same records (``memento memory diff --against OTHER``).

Example:
    >>> import tempfile
    >>> from memento.memory.memento_memory import MementoMemory
    >>> a, b = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> for directory in (a, b):
    ...     with MementoMemory(directory) as memory, memory.transaction(batch=1) as tx:
    ...         _ = memory.web_action.add("Search the exact title in quotes.", batch=1, tx=tx)
    >>> diff_items(memory_items(a), memory_items(b)).empty  # the two rules have different ids
    True
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memento.memory.location import Location
from memento.memory.item_record import ItemRecord, normalise, sorted_list

__all__ = [
    "ItemRecord",
    "StoreDiff",
    "ContentDiff",
    "memory_items",
    "diff_items",
    "normalise",
    "sorted_list",
    "STORE_ORDER",
]

#: The stores a memory directory may hold, in the order they are reported.
STORE_ORDER: tuple[str, ...] = ("M1", "M2", "M3", "M4", "cases", "gate_pairs", "trajectories")


@dataclass
class StoreDiff:
    """One store of two memories: items in each and the records only one of them holds (with multiplicity)."""

    store: str
    this: int = 0
    other: int = 0
    only_this: list[ItemRecord] = field(default_factory=list)
    only_other: list[ItemRecord] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.only_this and not self.only_other


@dataclass
class ContentDiff:
    """The difference of two memories by content, per store (stores neither holds are left out)."""

    stores: dict[str, StoreDiff] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether the two memories hold the same items."""
        return all(d.empty for d in self.stores.values())

    def as_json(self) -> dict[str, Any]:
        """The diff as JSON data (``memento memory diff --against --json``)."""
        return {
            "same": self.empty,
            "stores": {
                name: {
                    "this": d.this,
                    "other": d.other,
                    "only_this": [json.loads(r.content) for r in d.only_this],
                    "only_other": [json.loads(r.content) for r in d.only_other],
                }
                for name, d in self.stores.items()
            },
        }


def diff_items(this: Iterable[ItemRecord], other: Iterable[ItemRecord]) -> ContentDiff:
    """Compare two memories' records per store, as multisets (an item held twice on one side counts twice)."""
    a, b = Counter(this), Counter(other)
    stores = sorted({r.store for r in (*a, *b)}, key=lambda s: (STORE_ORDER.index(s) if s in STORE_ORDER else 99, s))
    diff = ContentDiff()
    for store in stores:
        mine = Counter({r: n for r, n in a.items() if r.store == store})
        theirs = Counter({r: n for r, n in b.items() if r.store == store})
        diff.stores[store] = StoreDiff(
            store,
            this=sum(mine.values()),
            other=sum(theirs.values()),
            only_this=sorted((mine - theirs).elements()),
            only_other=sorted((theirs - mine).elements()),
        )
    return diff


def memory_items(directory: str | Path | Location) -> list[ItemRecord]:
    """Every item of the memory at ``directory`` (a directory or a PostgreSQL location; each store that exists
    there), read-only.

    Raises:
        DataError: the location holds no memory store at all.
    """
    from memento.core.errors import DataError
    from memento.memory.location import parse_location

    root = parse_location(directory)
    items: list[ItemRecord] = []
    found = False
    for reader in (_memento_items, _case_items, _trajectory_items):
        records = reader(root)
        if records is not None:
            found = True
            items.extend(records)
    if not found:
        raise DataError(f"no memory at {root}: neither memory.db, cbr/cases.db nor jitmem/trajectories.sqlite3")
    return items


def _memento_items(root: Location) -> list[ItemRecord] | None:
    from memento.memory.memento_memory import MementoMemory
    from memento.memory.sqlite_store import memory_exists

    if not memory_exists(root):
        return None
    with MementoMemory(root, read_only=True) as memory:
        return list(memory.content_items())


def _case_items(root: Location) -> list[ItemRecord] | None:
    from memento.memory.case_store import bank_exists, content_items

    bank = root / "cbr"
    return list(content_items(bank)) if bank_exists(bank) else None


def _trajectory_items(root: Location) -> list[ItemRecord] | None:
    from memento.memory.trajectory_bank import TrajectoryBank, bank_exists

    bank = root / "jitmem"
    if not bank_exists(bank):
        return None
    reader = TrajectoryBank.open_read_only(bank)
    try:
        return list(reader.content_items())
    finally:
        reader.close()
