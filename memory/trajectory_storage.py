"""How a trajectory bank lies in its database: the schema (trajectories, records, pages, evidence, change log,
applied batches), whether a bank exists at a location, its size on disk, and the rows a write stages.

Example:
    >>> from memento.memory.trajectory_storage import disk_usage
    >>> disk_usage("/nonexistent") is None
    True
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from memento.core.dating import trajectory_evidence
from memento.core.errors import DataError
from memento.core.types import EvidenceRecord, Trajectory
from memento.memory.backends import open_database, part_exists
from memento.memory.database import Database, DatabaseError
from memento.memory.location import DirectoryLocation, LocationLike, PostgresLocation, parse_location
from memento.memory.trajectory_index import INDEX_DIR
from memento.memory.trajectory_records import BankDiskUsage, StagedRow, TrajectoryBankError

__all__ = [
    "DB_NAME",
    "SCHEMA",
    "PAGE_TEXT",
    "SCHEMA_VERSION",
    "ADDED_COLUMNS",
    "bank_exists",
    "bank_exists_at",
    "disk_usage",
    "evidence_of",
    "staged_row",
    "tree_bytes",
]


DB_NAME = "trajectories.sqlite3"
SCHEMA = """
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
PAGE_TEXT = {"sqlite": "TEXT", "postgres": "BYTEA"}
#: the layout this code writes: 2 adds the ``pages`` table (content-addressed page texts); 3 dates trajectories
#: (``trajectories.dated``, the ``evidence`` table: the pages each holds and its run) and tombstones them
#: (``trajectories.forgotten_at``, the ``changes`` log)
SCHEMA_VERSION = 3
ADDED_COLUMNS: tuple[tuple[str, str], ...] = (("dated", "TEXT"), ("forgotten_at", "TEXT"))


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bank_exists(location: LocationLike) -> bool:
    """Whether a trajectory bank is stored at ``location`` (nothing is created)."""
    return bank_exists_at(parse_location(location))


def bank_exists_at(loc: DirectoryLocation | PostgresLocation) -> bool:
    return part_exists(loc, DB_NAME, "trajectories", what="trajectory bank")


def page_bytes_sql(db: Database) -> str:
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
    if not bank_exists_at(loc):
        return None
    pages = page_bytes = db_bytes = 0
    try:
        db = open_database(loc, DB_NAME, read_only=True, what="trajectory bank")
    except DataError as exc:
        raise TrajectoryBankError(str(exc)) from None
    except DatabaseError as exc:
        raise TrajectoryBankError(f"{loc.label} is not a trajectory bank: {exc}") from exc
    try:
        if db.has_table("pages"):  # a bank from before the page store has none
            pages, page_bytes = db.query(f"SELECT COUNT(*), COALESCE(SUM({page_bytes_sql(db)}), 0) FROM pages")[0]
        if isinstance(loc, PostgresLocation):
            db_bytes = db.size_bytes()
    except DatabaseError as exc:
        raise TrajectoryBankError(f"{loc.label} is not a trajectory bank: {exc}") from exc
    finally:
        db.close()
    if isinstance(loc, PostgresLocation):
        return BankDiskUsage(str(loc), int(db_bytes), int(page_bytes), int(pages), 0, int(db_bytes))
    db_bytes = sum(tree_bytes(loc.path / (DB_NAME + suffix)) for suffix in ("", "-wal", "-shm"))
    return BankDiskUsage(
        directory=str(loc.path),
        db_bytes=int(db_bytes),
        page_bytes=int(page_bytes),
        pages=int(pages),
        index_bytes=tree_bytes(loc.path / INDEX_DIR),
        total_bytes=tree_bytes(loc.path),
    )


def evidence_of(record: str) -> EvidenceRecord:
    """The evidence of a stored trajectory record (every page it holds, its run): what dates it."""
    try:
        return trajectory_evidence(Trajectory.model_validate_json(record))
    except ValidationError as exc:
        raise TrajectoryBankError(f"a trajectory to store is unreadable: {exc.errors()[0]['msg']}") from exc


def staged_row(row: tuple[str, str, bool, str]) -> StagedRow:
    task_id, task_text, accepted, record = row
    return {"task_id": task_id, "task_text": task_text, "accepted": accepted, "record": record}
