"""A case bank's database as rows: its layout (cases with their embeddings and evidence, logged gate pairs, write
generations, the gate's saved state, the change log), whether a bank exists at a location and which embedder
built it, a row read back as a :class:`~memento.core.types.Case`, every row as a normalised record (``memory diff``),
and the one-line error of a bank that cannot be used.

Example:
    >>> from memento.memory.case_rows import bank_exists
    >>> bank_exists("/nonexistent")
    False
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from memento.core.errors import DataError
from memento.core.types import Case, EvidenceRecord
from memento.memory.backends import open_database, part_exists
from memento.memory.database import DatabaseError
from memento.memory.location import LocationLike, parse_location

__all__ = [
    "DB_NAME",
    "SCHEMA",
    "CASE_COLS",
    "CaseBankError",
    "unusable",
    "bank_exists",
    "read_embedder_info",
    "recorded_embedder",
    "vectors",
    "row_to_case",
    "content_items",
]


DB_NAME = "cases.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (
    rid {serial},
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    task_text TEXT NOT NULL,
    plan TEXT NOT NULL,
    reward {real} NOT NULL,
    created_at TEXT NOT NULL,
    trajectory_ref TEXT,
    meta TEXT NOT NULL DEFAULT '{{}}',
    evicted_at TEXT,
    emb {blob} NOT NULL,
    dated TEXT,
    evidence TEXT NOT NULL DEFAULT '{{}}',
    forgotten_at TEXT
);
CREATE INDEX IF NOT EXISTS cases_ns ON cases (namespace, evicted_at, rid);
CREATE INDEX IF NOT EXISTS cases_ref ON cases (trajectory_ref);
CREATE TABLE IF NOT EXISTS gate_pairs (
    pid {serial},
    namespace TEXT NOT NULL,
    task_id TEXT,
    query TEXT NOT NULL,
    case_id TEXT NOT NULL,
    reward {real} NOT NULL,
    q_score {real},
    cosine {real} NOT NULL,
    created_at TEXT NOT NULL,
    q_emb {blob} NOT NULL,
    c_emb {blob} NOT NULL
);
CREATE TABLE IF NOT EXISTS gate_state (name TEXT PRIMARY KEY, version BIGINT NOT NULL, state {blob} NOT NULL);
CREATE TABLE IF NOT EXISTS changes (
    seq {serial},
    at TEXT NOT NULL,
    op TEXT NOT NULL,
    case_id TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    before TEXT
);
"""

CASE_COLS = "id, namespace, task_text, plan, reward, created_at, trajectory_ref, evidence"


class CaseBankError(DataError):
    """A case bank cannot be used as asked (embedder mismatch, unknown case, bad argument)."""


def unusable(path: object, exc: BaseException) -> CaseBankError:
    """The one-line error for a case bank database that cannot be read (not a database, corrupt, wrong schema)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CaseBankError(f"{path} is not a usable case bank ({reason})")


def bank_exists(location: LocationLike) -> bool:
    """Whether a case bank is stored at ``location`` (``cases.db`` in the directory, or its PostgreSQL schema with
    a ``cases`` table); nothing is created."""
    return part_exists(location, DB_NAME, "cases", what="case bank")


def read_embedder_info(dir: LocationLike) -> tuple[str, int]:
    """The ``(name, dim)`` of the embedder recorded in the bank at ``dir`` (read-only; nothing is created)."""
    loc = parse_location(dir)
    info = recorded_embedder(loc)
    if info is None:
        raise CaseBankError(f"case bank {loc.label} records no embedder")
    return info


def recorded_embedder(dir: LocationLike) -> tuple[str, int] | None:
    """The ``(name, dim)`` of the embedder recorded in the bank at ``dir``, or None while it records none: a bank
    another process is creating this moment (its SQLite file made, its tables or its embedder not yet written).

    Raises:
        CaseBankError: no bank at ``dir``, or one that cannot be read (not a database, an unreadable record).
    """
    loc = parse_location(dir)
    if not bank_exists(loc):
        raise CaseBankError(f"no case bank at {loc.label} (missing {DB_NAME})")
    try:
        with contextlib.closing(open_database(loc, DB_NAME, read_only=True, what="case bank")) as db:
            if not db.has_table("meta"):
                return None
            rows = db.query("SELECT value FROM meta WHERE key='embedder'")
    except DatabaseError as exc:
        raise unusable(loc.label, exc) from None
    if not rows:
        return None
    try:
        info = json.loads(rows[0][0])
        return str(info["name"]), int(info["dim"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CaseBankError(f"case bank {loc.label} records an unreadable embedder ({exc})") from None


def vectors(blobs: Sequence[bytes]) -> np.ndarray:
    return np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])


def row_to_case(row: Sequence[Any]) -> Case:
    cid, ns, task_text, plan, reward, created_at, traj, evidence = row[:8]
    return Case(
        id=cid,
        namespace=ns,
        task_text=task_text,
        plan=plan,
        reward=float(reward),
        created_at=dt.datetime.fromisoformat(created_at),
        trajectory_ref=traj,
        evidence=EvidenceRecord.model_validate_json(evidence or "{}"),
    )


def content_items(bank: LocationLike) -> Iterator[Any]:
    """Every case and logged gate pair of the bank at ``bank`` as normalised records (read-only; no embedder, index
    or torch needed), to compare two memories by content (:func:`memento.memory.memory_contents.diff_items`).

    A case is its namespace, task, plan, reward, the run it came from and whether it was evicted; a gate pair names
    its case by that case's task and plan (case ids are random per run).
    """
    from memento.memory.item_record import ItemRecord

    loc = parse_location(bank)
    try:
        with contextlib.closing(open_database(loc, DB_NAME, read_only=True, what="case bank")) as db:
            cases = db.query(
                "SELECT id, namespace, task_text, plan, reward, trajectory_ref, evicted_at FROM cases ORDER BY rid"
            )
            pairs = db.query(
                "SELECT namespace, task_id, query, case_id, reward, q_score, cosine FROM gate_pairs ORDER BY pid"
            )
    except DatabaseError as exc:
        raise unusable(loc.label, exc) from None
    named: dict[str, dict[str, str]] = {}
    for cid, namespace, task_text, plan, reward, ref, evicted_at in cases:
        named[cid] = {"task_text": task_text, "plan": plan}
        yield ItemRecord.of(
            "cases",
            {"namespace": namespace, "task_text": task_text, "plan": plan, "reward": float(reward),
             "trajectory_ref": ref, "evicted": evicted_at is not None},
        )  # fmt: skip
    for namespace, task_id, query, case_id, reward, q_score, cosine in pairs:
        yield ItemRecord.of(
            "gate_pairs",
            {"namespace": namespace, "task_id": task_id, "query": query, "case": named.get(case_id, case_id),
             "reward": float(reward), "q_score": q_score, "cosine": float(cosine)},
        )  # fmt: skip
