"""JitMem's trajectory bank: complete trajectories stored losslessly, retrieved by BM25 over task descriptions.

Just-in-time memory keeps raw experience and decides what matters only at read time, when the task is known.
:class:`TrajectoryBank` is therefore a plain store: nothing is summarised or clipped at write time. Each accepted
:class:`memento.types.Trajectory` is kept whole in one SQLite file (WAL, one transaction per write): its record as
JSON (every tool call with every search hit, every agent step with its thought), and the full text of every page it
read in a ``pages`` table keyed by the text's sha256, so a page read by many trajectories is stored once. The
record carries each page's hash and length (:class:`memento.types.PageResult` excludes its text from JSON); pages
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

Example:
    >>> from memento.memory.trajectory_bank import TrajectoryBank
    >>> from memento.types import Trajectory
    >>> bank = TrajectoryBank("/tmp/jitmem-bank")  # doctest: +SKIP
    >>> bank.add(Trajectory(task_text="Who founded the city of Lyon?"), accepted=True)  # doctest: +SKIP
    >>> [(t.task_text, label) for t, label, _ in bank.retrieve("When was Lyon founded?", k=3)]  # doctest: +SKIP
    [('Who founded the city of Lyon?', None)]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from memento.bm25 import BM25Engine, RankBM25Scorer, check_engine
from memento.dating import DateFilter, iso, parse_iso, trajectory_evidence
from memento.errors import ConfigError, DataError, MemoryFrozenError
from memento.memory.database import Database, DatabaseError, open_database, part_exists
from memento.memory.location import DirectoryLocation, LocationLike, PostgresLocation, parse_location
from memento.scrub import scrub
from memento.types import EvidenceRecord, Trajectory, utcnow

__all__ = [
    "TrajectoryBank",
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

BankPolicy = Literal["success_only", "all_with_labels"]
RetrievedTrajectory = tuple[Trajectory, bool | None, float]

_DB_NAME = "trajectories.sqlite3"
_INDEX_DIR = "bm25_index"
_WATERMARK = "watermark.json"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
    seq {serial},
    task_id TEXT NOT NULL,
    task_text TEXT NOT NULL,
    label INTEGER NOT NULL,
    stored_at TEXT NOT NULL DEFAULT {now}
);
CREATE INDEX IF NOT EXISTS trajectories_task_id ON trajectories(task_id);
CREATE TABLE IF NOT EXISTS records (
    seq BIGINT PRIMARY KEY REFERENCES trajectories(seq),
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS applied_batches (key TEXT PRIMARY KEY, version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
    sha256 TEXT PRIMARY KEY,
    chars BIGINT NOT NULL,
    text {page_text} NOT NULL
);
CREATE TABLE IF NOT EXISTS evidence (
    seq BIGINT PRIMARY KEY REFERENCES trajectories(seq),
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    id {serial},
    at TEXT NOT NULL DEFAULT {now},
    op TEXT NOT NULL,
    seq BIGINT NOT NULL,
    task_id TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT ''
);
"""
#: SQLite keeps page texts as TEXT; PostgreSQL as UTF-8 bytes (its TEXT cannot hold a NUL character, a page can)
_PAGE_TEXT = {"sqlite": "TEXT", "postgres": "BYTEA"}
#: the layout this code writes: 2 adds the ``pages`` table (content-addressed page texts); 3 dates trajectories
#: (``trajectories.dated``, the ``evidence`` table: the pages each holds and its run) and tombstones them
#: (``trajectories.forgotten_at``, the ``changes`` log)
SCHEMA_VERSION = 3
_ADDED_COLUMNS: tuple[tuple[str, str], ...] = (("dated", "TEXT"), ("forgotten_at", "TEXT"))
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


def _tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bank_exists(location: LocationLike) -> bool:
    """Whether a trajectory bank is stored at ``location`` (nothing is created)."""
    return _bank_exists(parse_location(location))


def _bank_exists(loc: DirectoryLocation | PostgresLocation) -> bool:
    return part_exists(loc, _DB_NAME, "trajectories", what="trajectory bank")


def _page_bytes_sql(db: Database) -> str:
    return "LENGTH(CAST(text AS BLOB))" if db.backend == "sqlite" else "octet_length(text)"


def disk_usage(directory: LocationLike) -> BankDiskUsage | None:
    """The size on disk of the trajectory bank in ``directory`` (``None`` when there is no bank there).

    Reads the database read-only (nothing is created or changed); a bank from before the page store counts
    no pages. A PostgreSQL bank counts its tables (indexes and TOAST included) and has no index files.

    Example:
        >>> disk_usage("/nonexistent") is None
        True
    """
    loc = parse_location(directory)
    if not _bank_exists(loc):
        return None
    pages = page_bytes = db_bytes = 0
    try:
        db = open_database(loc, _DB_NAME, read_only=True, what="trajectory bank")
    except DataError as exc:
        raise TrajectoryBankError(str(exc)) from None
    except DatabaseError as exc:
        raise TrajectoryBankError(f"{loc.label} is not a trajectory bank: {exc}") from exc
    try:
        if db.has_table("pages"):  # a bank from before the page store has none
            pages, page_bytes = db.query(f"SELECT COUNT(*), COALESCE(SUM({_page_bytes_sql(db)}), 0) FROM pages")[0]
        if isinstance(loc, PostgresLocation):
            db_bytes = db.size_bytes()
    except DatabaseError as exc:
        raise TrajectoryBankError(f"{loc.label} is not a trajectory bank: {exc}") from exc
    finally:
        db.close()
    if isinstance(loc, PostgresLocation):
        return BankDiskUsage(str(loc), int(db_bytes), int(page_bytes), int(pages), 0, int(db_bytes))
    db_bytes = sum(_tree_bytes(loc.path / (_DB_NAME + suffix)) for suffix in ("", "-wal", "-shm"))
    return BankDiskUsage(
        directory=str(loc.path),
        db_bytes=int(db_bytes),
        page_bytes=int(page_bytes),
        pages=int(pages),
        index_bytes=_tree_bytes(loc.path / _INDEX_DIR),
        total_bytes=_tree_bytes(loc.path),
    )


def _page_str(value: Any) -> str:
    """A stored page text (PostgreSQL keeps UTF-8 bytes)."""
    return bytes(value).decode() if isinstance(value, bytes | memoryview) else str(value)


def _pages_of(trajectory: Trajectory) -> dict[str, str]:
    """The page texts a trajectory holds in memory, by hash (pages read back without their text are skipped)."""
    return {page.sha256: page.text for page in trajectory.pages() if page.sha256 and page.text and page.text_loaded}


def _evidence_of(record: str) -> EvidenceRecord:
    """The evidence of a stored trajectory record (every page it holds, its run): what dates it."""
    try:
        return trajectory_evidence(Trajectory.model_validate_json(record))
    except ValidationError as exc:
        raise TrajectoryBankError(f"a trajectory to store is unreadable: {exc.errors()[0]['msg']}") from exc


def _staged(row: tuple[str, str, bool, str]) -> StagedRow:
    task_id, task_text, accepted, record = row
    return {"task_id": task_id, "task_text": task_text, "accepted": accepted, "record": record}


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


class _Index:
    """A BM25 index over task texts plus the sequence number and task id of each indexed row: a ``bm25s`` model
    (persisted) or a :class:`~memento.bm25.RankBM25Scorer` (the reference engine, rebuilt in memory)."""

    def __init__(self, model: Any, seqs: np.ndarray, task_ids: list[str]) -> None:
        self.model = model
        self.seqs = seqs
        self.task_ids = task_ids
        self._task_id_array = np.asarray(task_ids, dtype=object)

    @property
    def persistent(self) -> bool:
        """Whether the index is saved next to the database (``bm25s``) rather than rebuilt on open."""
        return not isinstance(self.model, RankBM25Scorer)

    @classmethod
    def build(cls, seqs: list[int], task_ids: list[str], texts: list[str], *, engine: BM25Engine = "bm25s") -> _Index:
        if engine == "rank_bm25":
            return cls(RankBM25Scorer(_tokenize(texts) if texts else []), np.asarray(seqs, np.int64), list(task_ids))
        import bm25s

        model = bm25s.BM25()
        if texts:
            # token ids + vocabulary index 1.6x faster than string tokens (1.7 s vs 2.8 s for 100,000 task texts)
            model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        return cls(model if texts else None, np.asarray(seqs, dtype=np.int64), list(task_ids))

    def scores(self, query: str) -> np.ndarray:
        if self.model is None or not len(self.seqs):
            return np.zeros(0, dtype=np.float32)
        tokens = _tokenize([query])[0]
        if not tokens:
            return np.zeros(len(self.seqs), dtype=np.float32)
        return np.asarray(self.model.get_scores(tokens), dtype=np.float32)

    def same_task(self, task_id: str) -> np.ndarray:
        return self._task_id_array == task_id

    def save(self, directory: Path) -> None:
        """Write the index to ``directory`` atomically (a temp dir renamed into place)."""
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".bm25-", dir=directory.parent))
        try:
            if self.model is not None:
                self.model.save(str(tmp / "model"), show_progress=False)
            np.save(tmp / "seqs.npy", self.seqs)
            (tmp / "task_ids.json").write_text(json.dumps(self.task_ids), encoding="utf-8")
            watermark = {"count": len(self.seqs), "max_seq": int(self.seqs.max()) if len(self.seqs) else 0}
            (tmp / _WATERMARK).write_text(json.dumps(watermark), encoding="utf-8")
            old = directory.with_name(directory.name + ".old")
            if directory.exists():
                shutil.rmtree(old, ignore_errors=True)
                os.replace(directory, old)
            os.replace(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, directory: Path, *, max_seq: int) -> _Index | None:
        """The saved index if its watermark (the last sequence number; the store is append-only) matches."""
        import bm25s

        try:
            watermark = json.loads((directory / _WATERMARK).read_text(encoding="utf-8"))
            if not isinstance(watermark, dict) or watermark.get("max_seq") != max_seq:
                return None
            count = int(watermark["count"])
            seqs = np.load(directory / "seqs.npy")
            task_ids = json.loads((directory / "task_ids.json").read_text(encoding="utf-8"))
            model = bm25s.BM25.load(str(directory / "model")) if count else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # damaged files: rebuild
            logger.info("rebuilding the BM25 index of %s: %s", directory.parent, exc)
            return None
        return cls(model, seqs, task_ids)


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
        self._masks: dict[tuple[Any, ...], np.ndarray | None] = {}  # rows a filter hides, per bank state and index
        self._hidden: dict[tuple[Any, ...], tuple[int, int]] = {}  # hidden counts, per bank state and filter
        self._dropped = 0
        self._index: _Index | None = None
        self._index_max_seq = 0
        if self.read_only and not _bank_exists(self.location):
            raise TrajectoryBankError(f"no trajectory bank at {self.directory}: {_DB_NAME} is missing")
        try:
            self._db = open_database(self.location, _DB_NAME, read_only=self.read_only, what="trajectory bank")
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
                self._db.create_schema(_SCHEMA.replace("{page_text}", _PAGE_TEXT[self._db.backend]))
                for name, decl in _ADDED_COLUMNS:  # schema 3: a bank written before it holds undated trajectories
                    self._db.add_column("trajectories", name, decl)
                if self._meta("schema") != str(SCHEMA_VERSION):
                    self._set_meta("schema", str(SCHEMA_VERSION))
            #: a read-only bank from before schema 3 reads every trajectory as undated and none as forgotten
            self._dated = "dated" in self._db.columns("trajectories")
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
        if not _bank_exists(loc):
            raise TrajectoryBankError(f"no trajectory bank at {loc.label}: {_DB_NAME} is missing")
        try:
            with contextlib.closing(open_database(loc, _DB_NAME, read_only=True, what="trajectory bank")) as db:
                rows = db.query("SELECT value FROM meta WHERE key = 'policy'")
        except (DataError, DatabaseError) as exc:
            raise TrajectoryBankError(f"{loc.label} is not a trajectory bank: {exc}") from exc
        policy: BankPolicy = "all_with_labels" if rows and rows[0][0] == "all_with_labels" else "success_only"
        return cls(loc, policy=policy, read_only=True)

    def content_items(self) -> Iterator[Any]:
        """Every stored trajectory with its accept/reject label as a normalised record, to compare two memories by
        content (:func:`memento.memory.memory_contents.diff_items`): without ids, timestamps, timings and the
        provenance of the run (settings, paths, clock)."""
        from memento.memory.memory_contents import ItemRecord

        drop = frozenset({"created_at", "timings", "ms", "provenance"})
        for trajectory, accepted in self.iter_all():
            data = trajectory.model_dump(mode="json")
            data["accepted"] = accepted
            yield ItemRecord.of("trajectories", data, drop=drop)

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
        return str(self.directory / _DB_NAME) if isinstance(self.directory, Path) else self.location.label

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

    # -- pages ---------------------------------------------------------------------------------------------------
    def page_text(self, sha256: str) -> str | None:
        """The stored text of a page by its content hash (``None`` when no such page is stored)."""
        if not self._has_pages:
            return None
        rows = self._db.query("SELECT text FROM pages WHERE sha256 = ?", (sha256,))
        return _page_str(rows[0][0]) if rows else None

    def _store_pages(self, pages: dict[str, str]) -> None:
        """Insert page texts not stored yet (inside the caller's transaction)."""
        as_bytes = self._db.backend != "sqlite"
        self._db.executemany(
            "INSERT INTO pages(sha256, chars, text) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
            [(sha, len(text), scrub(text).encode() if as_bytes else scrub(text)) for sha, text in pages.items()],
        )

    def _load(self, record: str) -> Trajectory:
        """A stored record as a trajectory with its pages' full text put back (from the page store)."""
        trajectory = Trajectory.model_validate_json(record)
        pages = [page for page in trajectory.pages() if page.sha256 and not page.text_loaded]
        if pages and self._has_pages:
            wanted = sorted({page.sha256 for page in pages})
            marks = ",".join("?" * len(wanted))
            rows = self._db.query(f"SELECT sha256, text FROM pages WHERE sha256 IN ({marks})", wanted)
            texts = {sha: _page_str(text) for sha, text in rows}
            for page in pages:
                if page.sha256 in texts:
                    page.text = texts[page.sha256]
        return trajectory

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
            pages = _pages_of(trajectory)
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
                                self._store_pages(pages)
                        if ok and before_apply is not None:
                            before_apply([_staged(row) for row in rows])
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
                evidence = [_evidence_of(row[3]) for row in rows]
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
                    self._store_pages(pages)
                version = int(self._meta("version") or 0) + 1
                self._set_meta("version", str(version))
                if key is not None:
                    db.execute("INSERT INTO applied_batches(key, version) VALUES (?, ?)", (key, version))
                self._set_meta("count", str(stored + len(rows)))
                self._set_meta("accepted", str(accepted + sum(1 for row in rows if row[2])))
            self._index = None  # re-indexed at the next retrieval (several batches without reads cost one build)
            return True

    # -- reading -------------------------------------------------------------------------------------------------
    def _max_seq(self) -> int:
        return int(self._db.query("SELECT COALESCE(MAX(seq), 0) FROM trajectories")[0][0])

    def _ensure_index(self) -> _Index:
        with self._lock:
            max_seq = self._max_seq()  # the watermark: another handle (or process) may have written since
            if self._index is not None and self._index_max_seq == max_seq:
                return self._index
            index_dir = self.directory / _INDEX_DIR if isinstance(self.directory, Path) else None
            index = _Index.load(index_dir, max_seq=max_seq) if self.bm25 == "bm25s" and index_dir else None
            if index is None:
                rows = self._db.query("SELECT seq, task_id, task_text FROM trajectories ORDER BY seq")
                index = _Index.build([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], engine=self.bm25)
                max_seq = int(index.seqs.max()) if len(index.seqs) else 0
                if not self.read_only:  # a read-only bank keeps the rebuilt index in memory
                    if index.persistent and index_dir is not None:  # PostgreSQL: a per-process mirror
                        index.save(index_dir)
                    live = self._db.query(f"SELECT COUNT(*) FROM trajectories t WHERE {self._live()}")[0][0]
                    if self._meta("count") != str(live):  # rows written behind the bank's back: recount
                        self._db.execute("DELETE FROM meta WHERE key IN ('count', 'accepted')")
            self._index, self._index_max_seq = index, max_seq
            return index

    def rebuild_index(self) -> None:
        """Re-index every stored task text (normally automatic: only needed if the index files were damaged).

        A read-only bank rebuilds the index in memory and leaves its files alone.
        """
        with self._lock:
            if not self.read_only and isinstance(self.directory, Path):
                shutil.rmtree(self.directory / _INDEX_DIR, ignore_errors=True)
            self._index = None
            if self.read_only:
                rows = self._db.query("SELECT seq, task_id, task_text FROM trajectories ORDER BY seq")
                index = _Index.build([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], engine=self.bm25)
                self._index, self._index_max_seq = index, int(index.seqs.max()) if len(index.seqs) else 0
                return
            self._ensure_index()

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
            index = self._ensure_index()
            scores = index.scores(task_text)
            if exclude_task_id is not None and len(scores):
                scores = np.where(index.same_task(exclude_task_id), np.float32(0.0), scores)
            mask = self._ineligible_mask(index, dates)
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
                trajectory = self._load(record)
            except ValidationError as exc:
                raise TrajectoryBankError(f"stored trajectory #{seq} is unreadable: {exc.errors()[0]['msg']}") from exc
            shown = bool(label) if self.policy == "all_with_labels" else None
            out.append(BankHit(item_id(seq), seq, trajectory, shown, float(scores[i]), parse_iso(day)))
        return out

    def _state_key(self, dates: DateFilter | None) -> tuple[Any, ...]:
        """What a filter's result depends on: the bank's last row and live count (a write or a forget changes one)
        and the filter."""
        return (self._max_seq(), self._meta("count"), dates.cutoff if dates else None, dates.undated if dates else None)

    def _ineligible_mask(self, index: _Index, dates: DateFilter | None) -> np.ndarray | None:
        """A mask over the index's rows: those never retrieved for a task (forgotten, or hidden by its date filter);
        ``None`` when every row may be. Kept per bank state and filter, so tasks of one cutoff share it."""
        key = (*self._state_key(dates), id(index))
        if key not in self._masks:
            if len(self._masks) >= 64:
                self._masks.clear()
            rows = self._ineligible_rows(dates)
            self._masks[key] = np.isin(index.seqs, rows) if len(rows) else None
        return self._masks[key]

    def _ineligible_rows(self, dates: DateFilter | None) -> np.ndarray:
        if not self._dated:
            if dates is not None and dates.active and dates.undated == "drop":  # an old bank: every row is undated
                return np.asarray([r[0] for r in self._db.query("SELECT seq FROM trajectories")], dtype=np.int64)
            return np.zeros(0, dtype=np.int64)
        clause, args = dates.sql("dated") if dates is not None else ("", [])
        sql = "SELECT seq FROM trajectories WHERE forgotten_at IS NOT NULL"
        if clause:
            sql += f" OR NOT {clause}"
        return np.asarray([r[0] for r in self._db.query(sql, args)], dtype=np.int64)

    def hidden_counts(self, dates: DateFilter | None) -> tuple[int, int]:
        """How many stored (not forgotten) trajectories ``dates`` keeps away from a task: ``(dated on or after its
        cutoff, undated dropped)``."""
        if dates is None or not dates.active:
            return 0, 0
        with self._lock:
            if not self._dated:
                return 0, (len(self) if dates.undated == "drop" else 0)
            key = self._state_key(dates)
            if key not in self._hidden:
                if len(self._hidden) >= 64:
                    self._hidden.clear()
                after, undated = dates.hidden_sql("dated")
                base = "SELECT COUNT(*) FROM trajectories WHERE forgotten_at IS NULL AND "
                hidden = int(self._db.query(base + after[0], after[1])[0][0]) if after else 0
                dropped = int(self._db.query(base + undated)[0][0]) if undated else 0
                self._hidden[key] = (hidden, dropped)
            return self._hidden[key]

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
        return [self._load(r[0]) for r in rows]

    def iter_all(self) -> Iterator[tuple[Trajectory, bool]]:
        """Every stored (not forgotten) ``(trajectory, accepted)`` pair, in storage order."""
        rows = self._db.query(
            "SELECT t.label, r.record FROM trajectories t JOIN records r ON r.seq = t.seq "
            f"WHERE {self._live()} ORDER BY t.seq"
        )
        for label, record in rows:
            yield self._load(record), bool(label)

    def entries(self) -> list[BankEntry]:
        """Every stored trajectory as a memory item (id, task, date, evidence, whether forgotten), in storage order;
        the records themselves are not loaded."""
        with self._lock:
            if not self._dated:
                rows = self._db.query("SELECT seq, task_id, task_text, NULL, NULL, NULL FROM trajectories ORDER BY seq")
            else:
                rows = self._db.query(
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
        rows = self._db.query(
            "SELECT t.task_text, r.record FROM trajectories t JOIN records r ON r.seq = t.seq WHERE t.seq = ?", (seq,)
        )
        if not rows:
            return ""
        row = rows[0]
        trajectory = self._load(row[1])
        return "\n".join([row[0], row[1], *(page.text for page in trajectory.pages())])

    def forget(self, seqs: list[int], *, reason: str) -> list[str]:
        """Tombstone trajectories (``memento memory forget``): never retrieved, listed or copied again, each logged
        in the bank's change log (:meth:`changes`); returns the item ids forgotten now (unknown or already forgotten
        rows are skipped). The index keeps them; retrieval masks them."""
        self._check_writable()
        done: list[str] = []
        with self._lock, self._db.transaction() as db:
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
                stored, accepted = self._counts()
                marks = ",".join("?" * len(done))
                labels = db.query(
                    f"SELECT COALESCE(SUM(CASE WHEN label = 1 THEN 1 ELSE 0 END), 0) FROM trajectories "
                    f"WHERE seq IN ({marks})",
                    [int(d.removeprefix("traj-")) for d in done],
                )[0][0]
                self._set_meta("count", str(stored - len(done)))
                self._set_meta("accepted", str(accepted - int(labels)))
        return done

    def changes(self) -> list[dict[str, Any]]:
        """The bank's change log: one tombstone line per forgotten trajectory (``at``, ``op``, ``item_id``,
        ``task_id``, ``reason``), oldest first."""
        if not self._db.has_table("changes"):  # a read-only bank from before the change log
            return []
        rows = self._db.query("SELECT at, op, seq, task_id, reason FROM changes ORDER BY id")
        return [
            {"at": at, "op": op, "item_id": item_id(seq), "task_id": task_id, "reason": reason}
            for at, op, seq, task_id, reason in rows
        ]

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
            self._ensure_index()
            self._db.close()
