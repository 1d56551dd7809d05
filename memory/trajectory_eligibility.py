"""Which stored trajectories a task may see: forgotten ones never, and those its date filter hides
(:class:`memento.core.dating.DateFilter`: dated on or after its cutoff, undated under ``drop``), masked before the
top ``k`` are taken.

Example:
    >>> rows = EligibleRows(db)  # doctest: +SKIP
    >>> rows.ineligible_rows(DateFilter.of("2020-01-01", "drop"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from memento.core.dating import DateFilter
from memento.memory.database import Database
from memento.memory.trajectory_index import TrajectoryIndex

__all__ = ["EligibleRows"]


class EligibleRows:
    """Which stored trajectories a task may be shown: none forgotten, none its date filter hides. The rows are
    kept per bank state (its last row and live count: a write or a forget changes one) and filter, so the tasks of
    one cutoff share them; at most 64 states are kept.

    Args:
        db: the bank's database.
        dated: ``False`` for a read-only bank written before schema 3 (every row undated, none forgotten).
    """

    def __init__(self, db: Database, *, dated: bool = True) -> None:
        self.db = db
        self.dated = dated
        self._masks: dict[tuple[Any, ...], np.ndarray | None] = {}  # rows a filter hides, per bank state and index
        self._hidden: dict[tuple[Any, ...], tuple[int, int]] = {}  # hidden counts, per bank state and filter

    @staticmethod
    def filter_key(dates: DateFilter | None) -> tuple[Any, ...]:
        """What a filter's result depends on besides the bank state."""
        return (dates.cutoff if dates else None, dates.undated if dates else None)

    def ineligible_mask(
        self, index: TrajectoryIndex, dates: DateFilter | None, state: tuple[Any, ...]
    ) -> np.ndarray | None:
        """A mask over the index's rows: those never retrieved for a task (forgotten, or hidden by its date filter);
        ``None`` when every row may be. Kept per bank state and filter, so tasks of one cutoff share it."""
        key = (*state, *self.filter_key(dates), id(index))
        if key not in self._masks:
            if len(self._masks) >= 64:
                self._masks.clear()
            rows = self.ineligible_rows(dates)
            self._masks[key] = np.isin(index.seqs, rows) if len(rows) else None
        return self._masks[key]

    def ineligible_rows(self, dates: DateFilter | None) -> np.ndarray:
        if not self.dated:
            if dates is not None and dates.active and dates.undated == "drop":  # an old bank: every row is undated
                return np.asarray([r[0] for r in self.db.query("SELECT seq FROM trajectories")], dtype=np.int64)
            return np.zeros(0, dtype=np.int64)
        clause, args = dates.sql("dated") if dates is not None else ("", [])
        sql = "SELECT seq FROM trajectories WHERE forgotten_at IS NOT NULL"
        if clause:
            sql += f" OR NOT {clause}"
        return np.asarray([r[0] for r in self.db.query(sql, args)], dtype=np.int64)

    def hidden_counts(self, dates: DateFilter, state: tuple[Any, ...], stored: Callable[[], int]) -> tuple[int, int]:
        """How many stored (not forgotten) trajectories an active filter ``dates`` keeps away from a task: ``(dated
        on or after its cutoff, undated dropped)``; ``stored`` counts the live rows (an old bank's are all undated)."""
        if not self.dated:
            return 0, (stored() if dates.undated == "drop" else 0)
        key = (*state, *self.filter_key(dates))
        if key not in self._hidden:
            if len(self._hidden) >= 64:
                self._hidden.clear()
            after, undated = dates.hidden_sql("dated")
            base = "SELECT COUNT(*) FROM trajectories WHERE forgotten_at IS NULL AND "
            hidden = int(self.db.query(base + after[0], after[1])[0][0]) if after else 0
            dropped = int(self.db.query(base + undated)[0][0]) if undated else 0
            self._hidden[key] = (hidden, dropped)
        return self._hidden[key]
