"""JitMem's trajectory bank: complete trajectories stored losslessly, retrieved by BM25 over task descriptions.

Just-in-time memory keeps raw experience and decides what matters only at read time, when the task is known.
:class:`TrajectoryBank` is therefore a plain store: nothing is summarised or clipped at write time. Each accepted
:class:`memento.core.types.Trajectory` is kept whole in one SQLite file (WAL, one transaction per write): its record as
JSON (every tool call with every search hit, every agent step with its thought), and the full text of every page it
read in a ``pages`` table keyed by the text's sha256, so a page read by many trajectories is stored once. The
record carries each page's hash and length (:class:`memento.core.types.PageResult` excludes its text from JSON); pages
are written in the same transaction as the trajectory that read them, and the bank puts their text back into the
trajectories it returns, so the curator reads what the agent read. Banks written before pages were stored (tool
results clipped to 300 characters in ``ToolCall.result``) open and read as before; a writable open adds the
``pages`` table. A BM25 index over the *task descriptions only* (never the trajectory content) finds the ``k`` most
similar past tasks.

The index is a ``bm25s`` sparse index persisted next to the database with a watermark (the stored sequence numbers),
so reopening a bank loads it in milliseconds instead of re-indexing; it is rebuilt only when the stored set changed,
once per applied batch. Writes made inside :meth:`TrajectoryBank.batch` are buffered and applied when the batch ends,
so every task of a stream batch sees the same bank state. A batch applied under a ``key`` is applied at most once
(the key is recorded in the same transaction), which lets a resumed stream re-apply a batch safely.
``TrajectoryBank(dir, read_only=True)`` opens an existing bank for reading only (test time): nothing on disk changes,
and the handle is pinned to the bank as it was when it opened (a held read snapshot; :attr:`TrajectoryBank.high_water`
is the last stored sequence number it shows), so a writer's later batches never reach a test run.

:class:`TrajectoryBank` is the facade (policy, batches, retrieval); its parts live one per module:
:mod:`~memento.memory.trajectory_records` (hits, entries, counts, errors), :mod:`~memento.memory.trajectory_storage`
(schema, existence, disk usage), :mod:`~memento.memory.trajectory_index` (the BM25 index and its watermark),
:mod:`~memento.memory.page_store` (page texts by hash), :mod:`~memento.memory.trajectory_eligibility` (rows a task
may see) and :mod:`~memento.memory.trajectory_items` (memory items: entries, forget, change log).

Example:
    >>> from memento.memory.trajectory_bank import TrajectoryBank
    >>> from memento.core.types import Trajectory
    >>> bank = TrajectoryBank("/tmp/jitmem-bank")  # doctest: +SKIP
    >>> bank.add(Trajectory(task_text="Who founded the city of Lyon?"), accepted=True)  # doctest: +SKIP
    >>> [(t.task_text, label) for t, label, _ in bank.retrieve("When was Lyon founded?", k=3)]  # doctest: +SKIP
    [('Who founded the city of Lyon?', None)]
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from memento.core.dating import DateFilter, iso, parse_iso
from memento.core.errors import ConfigError, DataError
from memento.core.types import Trajectory
from memento.memory.backends import open_database
from memento.memory.database import DatabaseError
from memento.memory.location import LocationLike, PostgresLocation, parse_location
from memento.memory.page_store import PageStore, pages_of
from memento.memory.trajectory_eligibility import EligibleRows
from memento.memory.trajectory_index import BankIndex
from memento.memory.trajectory_items import TrajectoryItems
from memento.memory.trajectory_records import (
    BankDiskUsage,
    BankEntry,
    BankHit,
    BankPolicy,
    BankStats,
    RetrievedTrajectory,
    StagedRow,
    TrajectoryBankError,
    TrajectoryBankFrozenError,
    item_id,
)
from memento.memory.trajectory_storage import (
    ADDED_COLUMNS,
    DB_NAME,
    PAGE_TEXT,
    SCHEMA,
    SCHEMA_VERSION,
    bank_exists,
    bank_exists_at,
    disk_usage,
    evidence_of,
    staged_row,
)
from memento.utils.bm25 import BM25Engine, check_engine
from memento.utils.scrub import scrub

__all__ = [
    "TrajectoryBank",
    "TrajectoryBankError",
    "TrajectoryBankFrozenError",
    "BankPolicy",
    "BankStats",
    "BankDiskUsage",
    "RetrievedTrajectory",
    "BankHit",
    "BankEntry",
    "item_id",
    "StagedRow",
    "bank_exists",
    "disk_usage",
    "SCHEMA_VERSION",
]

logger = logging.getLogger(__name__)


class TrajectoryBank:
    """A lossless store of past trajectories with BM25 retrieval over task descriptions.

    Args:
        directory: where the bank lives: a directory (created if missing) holding ``trajectories.sqlite3`` and
            ``bm25_index/``, or a PostgreSQL location (the ``jitmem`` part of a memory; the index is then a
            per-process mirror, rebuilt when the stored set changed).
        policy: ``"success_only"`` (default, as in the paper: rejected trajectories are dropped) or
            ``"all_with_labels"`` (the paper's ablation: every trajectory is kept with its accept/reject label,
            which :meth:`retrieve` returns so the curator can see it).
        read_only: open an existing bank for reading only (test time): the database is opened read-only, no
            directory or index file is created, a stale index is rebuilt in memory only, and any write raises
            :class:`TrajectoryBankFrozenError`. A missing bank raises :class:`TrajectoryBankError`.
        bm25: the retrieval engine (setting ``jitmem.bm25``): ``"bm25s"`` (default; its index is persisted in
            ``bm25_index/``) or ``"rank_bm25"`` (the reference implementation, re-indexed in memory on open: for
            small banks and checks). The stored trajectories are the same for both.

    The bank is thread-safe and survives ``copy.deepcopy`` by reference (optimizers deep-copy programs; the memory
    must not fork). Use :meth:`batch` to buffer writes until a stream batch ends.

    Example:
        >>> bank = TrajectoryBank("runs/bank", policy="all_with_labels")  # doctest: +SKIP
        >>> with bank.batch():  # doctest: +SKIP
        ...     bank.add(trajectory, accepted=False)  # buffered; retrieval still sees the old state
        >>> bank.retrieve(trajectory.task_text, k=1)[0][1]  # doctest: +SKIP
        False
    """

    def __init__(
        self,
        directory: LocationLike,
        *,
        policy: BankPolicy = "success_only",
        read_only: bool = False,
        bm25: BM25Engine = "bm25s",
    ) -> None:
        self.bm25 = check_engine(bm25)
        if policy not in ("success_only", "all_with_labels"):
            raise ConfigError(f"unknown trajectory bank policy {policy!r}; use success_only or all_with_labels")
        self.location = parse_location(directory)
        #: the bank's directory, or its PostgreSQL location
        self.directory: Path | PostgresLocation = (
            self.location if isinstance(self.location, PostgresLocation) else self.location.path
        )
        self.read_only = bool(read_only)
        self.policy: BankPolicy = policy
        self._lock = threading.RLock()
        self._pending: list[tuple[str, str, bool, str]] | None = None
        self._pending_pages: dict[str, str] = {}
        self._has_pages = True  # False for a read-only bank written before the page store
        self._has_batches = True  # False for a read-only bank written before batch keys
        self._dated = True  # False for a read-only bank written before schema 3 (set once the file is open)
        self._dropped = 0
        self._indexer = BankIndex(self)
        if self.read_only and not bank_exists_at(self.location):
            raise TrajectoryBankError(f"no trajectory bank at {self.directory}: {DB_NAME} is missing")
        try:
            self._db = open_database(self.location, DB_NAME, read_only=self.read_only, what="trajectory bank")
        except DataError as exc:
            raise TrajectoryBankError(str(exc)) from None
        except DatabaseError as exc:
            raise TrajectoryBankError(f"{self._db_label} is not a trajectory bank: {exc}") from exc
        try:
            if self.read_only:
                self._db.query("SELECT seq, task_id, task_text, label FROM trajectories LIMIT 1")
                self._db.query("SELECT key, value FROM meta LIMIT 1")
                # written before the page store: its records carry no page hashes
                self._has_pages = self._db.has_table("pages")
                self._has_batches = self._db.has_table("applied_batches")
            else:
                # also the migration of an older bank: adds the pages table
                self._db.create_schema(SCHEMA.replace("{page_text}", PAGE_TEXT[self._db.backend]))
                for name, decl in ADDED_COLUMNS:  # schema 3: a bank written before it holds undated trajectories
                    self._db.add_column("trajectories", name, decl)
                if self._meta("schema") != str(SCHEMA_VERSION):
                    self._set_meta("schema", str(SCHEMA_VERSION))
            #: a read-only bank from before schema 3 reads every trajectory as undated and none as forgotten
            self._dated = "dated" in self._db.columns("trajectories")
            self.pages = PageStore(self._db, available=self._has_pages)
            self._eligible = EligibleRows(self._db, dated=self._dated)
            self.items = TrajectoryItems(self)
            self.high_water: int | None = None  # a read-only bank's pin: the last stored seq it shows
            if self.read_only:  # pinned: what another writer stores from now on stays invisible to this handle
                self._db.hold_snapshot()
                self.high_water = self._max_seq()
        except DatabaseError as exc:
            self._db.close()
            raise TrajectoryBankError(f"{self._db_label} is not a trajectory bank: {exc}") from exc
        stored_policy = self._meta("policy")
        if stored_policy is None:
            if not self.read_only:
                self._set_meta("policy", policy)
        elif stored_policy != policy:
            raise TrajectoryBankError(
                f"bank {self.directory} was created with policy {stored_policy!r}, not {policy!r}"
            )

    @classmethod
    def open_read_only(cls, directory: LocationLike) -> TrajectoryBank:
        """An existing bank opened read-only with the policy it was created with.

        Raises:
            TrajectoryBankError: there is no bank at ``directory``, or it cannot be read.
        """
        loc = parse_location(directory)
        if not bank_exists_at(loc):
            raise TrajectoryBankError(f"no trajectory bank at {loc.label}: {DB_NAME} is missing")
        try:
            with contextlib.closing(open_database(loc, DB_NAME, read_only=True, what="trajectory bank")) as db:
                rows = db.query("SELECT value FROM meta WHERE key = 'policy'")
        except (DataError, DatabaseError) as exc:
            raise TrajectoryBankError(f"{loc.label} is not a trajectory bank: {exc}") from exc
        policy: BankPolicy = "all_with_labels" if rows and rows[0][0] == "all_with_labels" else "success_only"
        return cls(loc, policy=policy, read_only=True)

    # -- copying: one bank per directory, never forked -------------------------------------------------------
    def __deepcopy__(self, memo: dict[int, Any]) -> TrajectoryBank:
        return self

    def __copy__(self) -> TrajectoryBank:
        return self

    def __repr__(self) -> str:
        ro = ", read_only=True" if self.read_only else ""
        return f"TrajectoryBank({str(self.directory)!r}, policy={self.policy!r}{ro}, stored={len(self)})"

    def _check_writable(self) -> None:
        if self.read_only:
            raise TrajectoryBankFrozenError(f"trajectory bank {self.directory} is read-only (frozen); nothing stored")

    # -- meta ----------------------------------------------------------------------------------------------------
    @property
    def _db_label(self) -> str:
        return str(self.directory / DB_NAME) if isinstance(self.directory, Path) else self.location.label

    def _meta(self, key: str) -> str | None:
        rows = self._db.query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    @property
    def version(self) -> int:
        """How many write batches have been applied (the bank state the next retrieval sees)."""
        with self._lock:
            return int(self._meta("version") or 0)

    def __len__(self) -> int:
        return self._counts()[0]

    def _counts(self) -> tuple[int, int]:
        """(stored, accepted), kept in ``meta`` by every write (a COUNT(*) scans gigabytes at 100,000 records)."""
        with self._lock:
            stored, accepted = self._meta("count"), self._meta("accepted")
            if stored is None or accepted is None:
                n, a = self._db.query(
                    "SELECT COUNT(*), COALESCE(SUM(CASE WHEN label = 1 THEN 1 ELSE 0 END), 0) "
                    f"FROM trajectories t WHERE {self._live()}"
                )[0]
                if not self.read_only:
                    self._set_meta("count", str(n))
                    self._set_meta("accepted", str(a))
                return int(n), int(a)
            return int(stored), int(accepted)

    def pin_info(self) -> dict[str, Any]:
        """What a read-only handle is pinned to, for results files: ``{"trajectory_bank": {"high_water": seq}}``."""
        return {"trajectory_bank": {"high_water": self.high_water}}

    def stats(self) -> BankStats:
        """Stored/accepted/rejected counts, trajectories dropped by ``success_only``, buffered writes, version, and
        the page store's distinct pages and characters."""
        with self._lock:
            stored, accepted = self._counts()
            pages, chars = 0, 0
            if self._has_pages:
                pages, chars = self._db.query("SELECT COUNT(*), COALESCE(SUM(chars), 0) FROM pages")[0]
            return BankStats(
                stored=int(stored),
                accepted=int(accepted),
                rejected_stored=int(stored) - int(accepted),
                dropped=self._dropped,
                pending=len(self._pending or []),
                version=int(self._meta("version") or 0),
                pages=int(pages),
                page_chars=int(chars),
            )

    def disk_usage(self) -> BankDiskUsage:
        """The bank's size on disk (see :func:`disk_usage`)."""
        usage = disk_usage(self.directory)
        assert usage is not None  # the bank's database exists while it is open
        return usage

    # -- writing -------------------------------------------------------------------------------------------------
    def add(self, trajectory: Trajectory, accepted: bool) -> bool:
        """Offer a trajectory with its acceptance verdict. Returns whether it will be stored.

        Under ``success_only`` a rejected trajectory is dropped. The record is serialised now (later changes to
        the object do not leak in) and written at once, or when the current :meth:`batch` ends.
        """
        if not isinstance(trajectory, Trajectory):
            raise DataError(f"TrajectoryBank.add expects a Trajectory, got {type(trajectory).__name__}")
        self._check_writable()
        accepted = bool(accepted)
        with self._lock:
            if not accepted and self.policy == "success_only":
                self._dropped += 1
                return False
            key = trajectory.retrieval_key or trajectory.task_text  # what BM25 matches (Task.retrieval_key)
            row = (trajectory.task_id, key, accepted, trajectory.model_dump_json())  # pages: hash + length only
            pages = pages_of(trajectory)
            if self._pending is not None:
                self._pending.append(row)
                self._pending_pages.update(pages)
            else:
                self._apply([row], pages=pages)
            return True

    def add_many(self, items: list[tuple[Trajectory, bool]]) -> int:
        """Add several ``(trajectory, accepted)`` pairs in one transaction and one index rebuild; returns stored."""
        with self.batch():
            return sum(self.add(trajectory, accepted) for trajectory, accepted in items)

    @contextlib.contextmanager
    def batch(
        self, *, key: str | None = None, before_apply: Callable[[list[StagedRow]], None] | None = None
    ) -> Iterator[TrajectoryBank]:
        """Buffer every :meth:`add` until the block exits, then apply them atomically (one transaction).

        Retrievals inside the block see the state from before it. Nested blocks join the outer one. The batch is
        all or nothing: if the block raises (a stream aborted by an unreachable LM, an interrupt), the buffered
        writes are discarded so that rerunning the batch does not store its trajectories twice.

        Args:
            key: apply the batch at most once: the key is recorded in the same transaction, and a batch whose key
                was already applied (see :meth:`apply_rows`) stores nothing.
            before_apply: called with the buffered rows (possibly none) after the block succeeded and before they
                are applied: a checkpoint written there can re-apply them with :meth:`apply_rows` after a crash. If
                it raises, nothing is applied.
        """
        with self._lock:
            outer = self._pending is None
            if not outer and (key is not None or before_apply is not None):
                raise ConfigError("a nested TrajectoryBank.batch cannot take a key or before_apply")
            if outer:
                self._pending, self._pending_pages = [], {}
        ok = False
        try:
            yield self
            ok = True
        finally:
            if outer:
                with self._lock:
                    rows, self._pending = self._pending or [], None
                    pages, self._pending_pages = self._pending_pages, {}
                    try:
                        if ok and before_apply is not None and rows:
                            # the staged rows (a checkpoint) carry page hashes only: their texts are stored first,
                            # so rows re-applied from the checkpoint after a crash find them
                            with self._db.transaction():
                                self.pages.store(pages)
                        if ok and before_apply is not None:
                            before_apply([staged_row(row) for row in rows])
                        if ok and rows:
                            self._apply(rows, key=key, pages=pages)
                    finally:
                        if rows and not ok:
                            logger.warning("batch aborted: %d buffered trajectories discarded (rerun it)", len(rows))

    def apply_rows(self, rows: list[StagedRow], *, key: str) -> bool:
        """Apply rows staged by a :meth:`batch` (e.g. read back from a checkpoint) unless ``key`` was applied.

        Returns whether they were applied now (``False``: that batch is already in the bank).
        """
        if not rows:
            return False
        self._check_writable()
        try:
            tuples = [(str(r["task_id"]), str(r["task_text"]), bool(r["accepted"]), str(r["record"])) for r in rows]
        except (KeyError, TypeError) as exc:
            raise DataError(f"malformed staged trajectory rows for batch {key!r}: {exc}") from exc
        return self._apply(tuples, key=key)

    def applied(self, key: str) -> bool:
        """Whether a batch with this key has been applied."""
        if not self._has_batches:  # a read-only bank written before batch keys existed
            return False
        return bool(self._db.query("SELECT 1 FROM applied_batches WHERE key = ?", (key,)))

    @property
    def pending(self) -> int:
        """Writes buffered by the current batch."""
        with self._lock:
            return len(self._pending or [])

    def _apply(
        self, rows: list[tuple[str, str, bool, str]], *, key: str | None = None, pages: dict[str, str] | None = None
    ) -> bool:
        self._check_writable()
        with self._lock:
            with self._db.transaction() as db:  # one writer at a time per bank: the counts read here stay true
                if key is not None and db.query("SELECT 1 FROM applied_batches WHERE key = ?", (key,)):
                    logger.info("batch %s is already in %s: not applied again", key, self.directory)
                    return False
                stored, accepted = self._counts()
                # task texts (what the index reads) and records (gigabytes at scale) live in separate tables, so
                # re-indexing scans only the narrow one; each table's rows go as one batch (one round trip on
                # PostgreSQL, not three per trajectory)
                evidence = [evidence_of(row[3]) for row in rows]
                # scrubbed: no secret or URL password reaches the database
                seqs = db.insert_returning(
                    "INSERT INTO trajectories(task_id, task_text, label, dated) VALUES (?, ?, ?, ?) RETURNING seq",
                    [
                        (scrub(tid), scrub(text), int(label), iso(ev.dated))
                        for (tid, text, label, _), ev in zip(rows, evidence, strict=True)
                    ],
                )
                db.executemany(
                    "INSERT INTO records(seq, record) VALUES (?, ?)",
                    [(int(seq), scrub(row[3])) for seq, row in zip(seqs, rows, strict=True)],
                )
                db.executemany(
                    "INSERT INTO evidence(seq, record) VALUES (?, ?)",
                    [(int(seq), scrub(ev.model_dump_json())) for seq, ev in zip(seqs, evidence, strict=True)],
                )
                if pages:  # in the same transaction as the trajectories that read them; each text stored once
                    self.pages.store(pages)
                version = int(self._meta("version") or 0) + 1
                self._set_meta("version", str(version))
                if key is not None:
                    db.execute("INSERT INTO applied_batches(key, version) VALUES (?, ?)", (key, version))
                self._set_meta("count", str(stored + len(rows)))
                self._set_meta("accepted", str(accepted + sum(1 for row in rows if row[2])))
            self._indexer.index = (
                None  # re-indexed at the next retrieval (several batches without reads cost one build)
            )
            return True

    # -- reading -------------------------------------------------------------------------------------------------
    def _max_seq(self) -> int:
        return int(self._db.query("SELECT COALESCE(MAX(seq), 0) FROM trajectories")[0][0])

    def rebuild_index(self) -> None:
        """Re-index every stored task text (normally automatic: only needed if the index files were damaged).

        A read-only bank rebuilds the index in memory and leaves its files alone.
        """
        self._indexer.rebuild()

    def retrieve(
        self, task_text: str, k: int = 3, *, exclude_task_id: str | None = None, dates: DateFilter | None = None
    ) -> list[RetrievedTrajectory]:
        """The ``k`` stored trajectories whose task description is most BM25-similar to ``task_text``.

        Returns ``(trajectory, label, score)`` best first; ``label`` is the stored accept/reject verdict under
        ``all_with_labels`` and ``None`` under ``success_only`` (everything stored there was accepted). Trajectories
        sharing no term with the task (score 0) are not returned. ``exclude_task_id`` hides a task's own records;
        ``dates`` (the task's date filter) hides trajectories it may not see before the top ``k`` are taken.
        Forgotten trajectories are never returned. :meth:`search` returns the same with item ids and dates.
        """
        return [hit.as_tuple() for hit in self.search(task_text, k, exclude_task_id=exclude_task_id, dates=dates)]

    def search(
        self, task_text: str, k: int = 3, *, exclude_task_id: str | None = None, dates: DateFilter | None = None
    ) -> list[BankHit]:
        """:meth:`retrieve` with each hit's item id (``traj-<seq>``) and date."""
        if k <= 0:
            return []
        with self._lock:
            index = self._indexer.current()
            scores = index.scores(task_text)
            if exclude_task_id is not None and len(scores):
                scores = np.where(index.same_task(exclude_task_id), np.float32(0.0), scores)
            mask = self._eligible.ineligible_mask(index, dates, self._state())
            if mask is not None and len(scores):
                scores = np.where(mask, np.float32(0.0), scores)
            positive = int(np.count_nonzero(scores > 0))
            if positive == 0:
                return []
            take = min(k, positive)
            top = np.argpartition(-scores, take - 1)[:take]
            top = top[np.argsort(-scores[top], kind="stable")]
            seqs = [int(index.seqs[i]) for i in top]
            placeholders = ",".join("?" * len(seqs))
            dated = "t.dated" if self._dated else "NULL"
            rows = {
                seq: (label, record, day)
                for seq, label, record, day in self._db.query(
                    f"SELECT t.seq, t.label, r.record, {dated} FROM trajectories t JOIN records r ON r.seq = t.seq "
                    f"WHERE t.seq IN ({placeholders})",
                    seqs,
                )
            }
        out: list[BankHit] = []
        for i, seq in zip(top, seqs, strict=True):
            label, record, day = rows[seq]
            try:
                trajectory = self.pages.load(record)
            except ValidationError as exc:
                raise TrajectoryBankError(f"stored trajectory #{seq} is unreadable: {exc.errors()[0]['msg']}") from exc
            shown = bool(label) if self.policy == "all_with_labels" else None
            out.append(BankHit(item_id(seq), seq, trajectory, shown, float(scores[i]), parse_iso(day)))
        return out

    def hidden_counts(self, dates: DateFilter | None) -> tuple[int, int]:
        """How many stored (not forgotten) trajectories ``dates`` keeps away from a task: ``(dated on or after its
        cutoff, undated dropped)``."""
        if dates is None or not dates.active:
            return 0, 0
        with self._lock:
            return self._eligible.hidden_counts(dates, self._state(), lambda: len(self))

    def page_text(self, sha256: str) -> str | None:
        """The stored text of a page by its content hash (``None`` when no such page is stored)."""
        return self.pages.text(sha256)

    def _state(self) -> tuple[Any, ...]:
        """The bank state a task's eligible rows depend on: its last row and live count."""
        return (self._max_seq(), self._meta("count"))

    def _live(self, alias: str = "t") -> str:
        """The SQL condition of rows not forgotten (every row of a bank from before tombstones)."""
        return f"{alias}.forgotten_at IS NULL" if self._dated else "1"

    def get(self, task_id: str) -> list[Trajectory]:
        """Every stored (not forgotten) trajectory of one task id, oldest first."""
        rows = self._db.query(
            "SELECT r.record FROM trajectories t JOIN records r ON r.seq = t.seq "
            f"WHERE t.task_id = ? AND {self._live()} ORDER BY t.seq",
            (task_id,),
        )
        return [self.pages.load(r[0]) for r in rows]

    def iter_all(self) -> Iterator[tuple[Trajectory, bool]]:
        """Every stored (not forgotten) ``(trajectory, accepted)`` pair, in storage order."""
        rows = self._db.query(
            "SELECT t.label, r.record FROM trajectories t JOIN records r ON r.seq = t.seq "
            f"WHERE {self._live()} ORDER BY t.seq"
        )
        for label, record in rows:
            yield self.pages.load(record), bool(label)

    # -- memory items (:class:`~memento.memory.trajectory_items.TrajectoryItems`) ------------------------------
    def content_items(self) -> Iterator[Any]:
        """Every stored trajectory with its label as a normalised record (:meth:`TrajectoryItems.content_items`)."""
        return self.items.content_items()

    def entries(self) -> list[BankEntry]:
        """Every stored trajectory as a memory item (:meth:`TrajectoryItems.entries`)."""
        return self.items.entries()

    def full_text(self, seq: int) -> str:
        """Everything a stored trajectory holds as text (:meth:`TrajectoryItems.full_text`)."""
        return self.items.full_text(seq)

    def forget(self, seqs: list[int], *, reason: str) -> list[str]:
        """Tombstone trajectories; returns the item ids forgotten now (:meth:`TrajectoryItems.forget`)."""
        return self.items.forget(seqs, reason=reason)

    def changes(self) -> list[dict[str, Any]]:
        """The bank's change log, oldest first (:meth:`TrajectoryItems.changes`)."""
        return self.items.changes()

    def close(self) -> None:
        """Close the bank: pending batch writes are applied and the BM25 index is brought up to date on disk.

        A read-only bank only closes its connection.
        """
        with self._lock:
            if self.read_only:
                self._db.close()
                return
            if self._pending:
                rows, self._pending = self._pending, None
                pages, self._pending_pages = self._pending_pages, {}
                self._apply(rows, pages=pages)
            self._indexer.current()
            self._db.close()
