"""The records of a trajectory bank: a retrieved hit, a stored entry as a memory item, counts and disk usage, the
bank's policy, and its errors.

Example:
    >>> from memento.memory.trajectory_records import item_id
    >>> item_id(7)
    'traj-7'
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from memento.core.errors import DataError, MemoryFrozenError
from memento.core.types import EvidenceRecord, Trajectory

__all__ = [
    "BankPolicy",
    "RetrievedTrajectory",
    "StagedRow",
    "item_id",
    "BankHit",
    "BankEntry",
    "BankStats",
    "BankDiskUsage",
    "TrajectoryBankError",
    "TrajectoryBankFrozenError",
]


BankPolicy = Literal["success_only", "all_with_labels"]
RetrievedTrajectory = tuple[Trajectory, bool | None, float]
#: A buffered write: ``{"task_id", "task_text", "accepted", "record"}`` (``record``: the trajectory's JSON).
StagedRow = dict[str, Any]


def item_id(seq: int) -> str:
    """The memory-item id of a stored trajectory (``traj-<seq>``: what ``memento memory forget`` and the leakage
    audit name)."""
    return f"traj-{seq}"


@dataclass(frozen=True)
class BankHit:
    """One retrieved trajectory: its item id and row, the trajectory, its stored label (``None`` under
    ``success_only``), its BM25 score and its date (``None``: undated)."""

    item_id: str
    seq: int
    trajectory: Trajectory
    label: bool | None
    score: float
    dated: dt.date | None

    def as_tuple(self) -> RetrievedTrajectory:
        return (self.trajectory, self.label, self.score)


@dataclass(frozen=True)
class BankEntry:
    """A stored trajectory as a memory item: its id (``traj-<seq>``), task, date, evidence and tombstone."""

    item_id: str
    seq: int
    task_id: str
    task_text: str
    dated: dt.date | None
    forgotten: bool
    evidence: EvidenceRecord


class TrajectoryBankError(DataError):
    """The bank's files are unreadable or were written under another policy."""


class TrajectoryBankFrozenError(MemoryFrozenError):
    """A write to a bank opened with ``read_only=True``."""


@dataclass(frozen=True)
class BankStats:
    """Counts of a bank: stored records, rejected (dropped) trajectories, buffered writes, applied batches, and the
    page store (distinct pages and their characters)."""

    stored: int
    accepted: int
    rejected_stored: int
    dropped: int
    pending: int
    version: int
    pages: int = 0
    page_chars: int = 0


@dataclass(frozen=True)
class BankDiskUsage:
    """A bank's size on disk: the SQLite files (records and the page store, with WAL side files), the page texts
    inside them, and the BM25 index directory; ``total_bytes`` is everything under the bank directory."""

    directory: str
    db_bytes: int
    page_bytes: int
    pages: int
    index_bytes: int
    total_bytes: int
