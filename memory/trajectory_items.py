"""The stored trajectories of a bank as memory items: listed with their ids, dates and evidence, matched by
their full text, forgotten (tombstoned: never retrieved, listed or copied again) with a change-log line each, and
compared by content between two memories.

Example:
    >>> bank.items.forget([3], reason="leaked the answer")  # doctest: +SKIP
    ['traj-3']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from memento.core.dating import parse_iso
from memento.core.types import EvidenceRecord, utcnow
from memento.memory.trajectory_records import BankEntry, item_id

if TYPE_CHECKING:
    from memento.memory.trajectory_bank import TrajectoryBank

__all__ = ["TrajectoryItems"]


class TrajectoryItems:
    """A trajectory bank's stored trajectories as memory items (what ``memento memory show``, ``diff`` and ``forget``
    read): entries with ids (``traj-<seq>``), dates and evidence, full texts, tombstones and the change log.

    Args:
        bank: the bank (its database, lock and counts).
    """

    def __init__(self, bank: TrajectoryBank) -> None:
        self.bank = bank

    def content_items(self) -> Iterator[Any]:
        """Every stored trajectory with its accept/reject label as a normalised record, to compare two memories by
        content (:func:`memento.memory.memory_contents.diff_items`): without ids, timestamps, timings and the
        provenance of the run (settings, paths, clock)."""
        from memento.memory.item_record import ItemRecord

        drop = frozenset({"created_at", "timings", "ms", "provenance"})
        for trajectory, accepted in self.bank.iter_all():
            data = trajectory.model_dump(mode="json")
            data["accepted"] = accepted
            yield ItemRecord.of("trajectories", data, drop=drop)

    def entries(self) -> list[BankEntry]:
        """Every stored trajectory as a memory item (id, task, date, evidence, whether forgotten), in storage order;
        the records themselves are not loaded."""
        with self.bank._lock:
            if not self.bank._dated:
                rows = self.bank._db.query(
                    "SELECT seq, task_id, task_text, NULL, NULL, NULL FROM trajectories ORDER BY seq"
                )
            else:
                rows = self.bank._db.query(
                    "SELECT t.seq, t.task_id, t.task_text, t.dated, t.forgotten_at, e.record FROM trajectories t "
                    "LEFT JOIN evidence e ON e.seq = t.seq ORDER BY t.seq"
                )
            return [
                BankEntry(
                    item_id=item_id(seq),
                    seq=int(seq),
                    task_id=task_id,
                    task_text=text,
                    dated=parse_iso(day),
                    forgotten=forgotten is not None,
                    evidence=EvidenceRecord.model_validate_json(record) if record else EvidenceRecord(),
                )
                for seq, task_id, text, day, forgotten, record in rows
            ]

    def full_text(self, seq: int) -> str:
        """Everything a stored trajectory holds as text: its task, its record (JSON) and the pages it read (a text
        match of ``memento memory forget`` searches it)."""
        rows = self.bank._db.query(
            "SELECT t.task_text, r.record FROM trajectories t JOIN records r ON r.seq = t.seq WHERE t.seq = ?", (seq,)
        )
        if not rows:
            return ""
        row = rows[0]
        trajectory = self.bank.pages.load(row[1])
        return "\n".join([row[0], row[1], *(page.text for page in trajectory.pages())])

    def forget(self, seqs: list[int], *, reason: str) -> list[str]:
        """Tombstone trajectories (``memento memory forget``): never retrieved, listed or copied again, each logged
        in the bank's change log (:meth:`changes`); returns the item ids forgotten now (unknown or already forgotten
        rows are skipped). The index keeps them; retrieval masks them."""
        self.bank._check_writable()
        done: list[str] = []
        with self.bank._lock, self.bank._db.transaction() as db:
            for seq in dict.fromkeys(int(s) for s in seqs):
                rows = db.query("SELECT task_id FROM trajectories WHERE seq = ? AND forgotten_at IS NULL", (seq,))
                if not rows:
                    continue
                db.execute("UPDATE trajectories SET forgotten_at = ? WHERE seq = ?", (utcnow().isoformat(), seq))
                db.execute(
                    "INSERT INTO changes(op, seq, task_id, reason) VALUES ('forget', ?, ?, ?)",
                    (seq, rows[0][0], reason),
                )
                done.append(item_id(seq))
            if done:
                stored, accepted = self.bank._counts()
                marks = ",".join("?" * len(done))
                labels = db.query(
                    f"SELECT COALESCE(SUM(CASE WHEN label = 1 THEN 1 ELSE 0 END), 0) FROM trajectories "
                    f"WHERE seq IN ({marks})",
                    [int(d.removeprefix("traj-")) for d in done],
                )[0][0]
                self.bank._set_meta("count", str(stored - len(done)))
                self.bank._set_meta("accepted", str(accepted - int(labels)))
        return done

    def changes(self) -> list[dict[str, Any]]:
        """The bank's change log: one tombstone line per forgotten trajectory (``at``, ``op``, ``item_id``,
        ``task_id``, ``reason``), oldest first."""
        if not self.bank._db.has_table("changes"):  # a read-only bank from before the change log
            return []
        rows = self.bank._db.query("SELECT at, op, seq, task_id, reason FROM changes ORDER BY id")
        return [
            {"at": at, "op": op, "item_id": item_id(seq), "task_id": task_id, "reason": reason}
            for at, op, seq, task_id, reason in rows
        ]
