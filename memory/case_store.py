"""The SQLite side of the case bank: ``cases.db``, the source of truth for cases, embeddings and logged gate pairs.

``cases.db`` (WAL) holds every case with its embedding (a float32 blob, computed once at insert), the logged
(query, case, reward) pairs the Q-gate learns from, the embedder the bank was built with, and a per-namespace write
generation that tells a FAISS index (:mod:`memento.memory.case_index`) whether it lags the database. A frozen store
opens the file read-only (:func:`~memento.memory.sqlite_connect.connect_sqlite`) and never creates it.

Example:
    >>> import tempfile, threading
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from memento.types import Case
    >>> d = Path(tempfile.mkdtemp())
    >>> store = CaseStore(d, embedder_name="demo", dim=2, lock=threading.RLock(), frozen=False)
    >>> case = Case(task_text="Who founded Acme?", plan="search", reward=1.0)
    >>> rids, gen = store.insert([case], np.ones((1, 2)), [{}])
    >>> store.count("default"), gen
    (1, 1)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memento.dating import DateFilter, iso
from memento.errors import DataError
from memento.memory.sqlite_connect import connect_sqlite, read_meta
from memento.types import Case, EvidenceRecord, utcnow

__all__ = ["DB_NAME", "CaseBankError", "CaseStore", "content_items"]

DB_NAME = "cases.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    task_text TEXT NOT NULL,
    plan TEXT NOT NULL,
    reward REAL NOT NULL,
    created_at TEXT NOT NULL,
    trajectory_ref TEXT,
    meta TEXT NOT NULL DEFAULT '{}',
    evicted_at TEXT,
    emb BLOB NOT NULL,
    dated TEXT,
    evidence TEXT NOT NULL DEFAULT '{}',
    forgotten_at TEXT
);
CREATE INDEX IF NOT EXISTS cases_ns ON cases (namespace, evicted_at, rid);
CREATE INDEX IF NOT EXISTS cases_ref ON cases (trajectory_ref);
CREATE TABLE IF NOT EXISTS gate_pairs (
    pid INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    task_id TEXT,
    query TEXT NOT NULL,
    case_id TEXT NOT NULL,
    reward REAL NOT NULL,
    q_score REAL,
    cosine REAL NOT NULL,
    created_at TEXT NOT NULL,
    q_emb BLOB NOT NULL,
    c_emb BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    op TEXT NOT NULL,
    case_id TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    before TEXT
);
"""
#: columns added after the first layout (``cases.db`` written before them gains them on a writable open): the
#: ISO date of a case's evidence (NULL: undated), the evidence record (JSON), and the tombstone of a forgotten case
_ADDED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dated", "TEXT"),
    ("evidence", "TEXT NOT NULL DEFAULT '{}'"),
    ("forgotten_at", "TEXT"),
)

_CASE_COLS = "id, namespace, task_text, plan, reward, created_at, trajectory_ref, evidence"


class CaseBankError(DataError):
    """A case bank cannot be used as asked (embedder mismatch, unknown case, bad argument)."""


def unusable(path: Path, exc: BaseException) -> CaseBankError:
    """The one-line error for a ``cases.db`` SQLite cannot read (not a database, corrupt, wrong schema)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CaseBankError(f"{path} is not a usable case bank ({reason})")


def read_embedder_info(dir: Path) -> tuple[str, int]:
    """The ``(name, dim)`` of the embedder recorded in the bank at ``dir`` (read-only; nothing is created)."""
    path = dir / DB_NAME
    if not path.is_file():
        raise CaseBankError(f"no case bank at {dir} (missing {DB_NAME})")
    try:
        stored = read_meta(path, "embedder")
    except sqlite3.DatabaseError as exc:
        raise unusable(path, exc) from None
    if stored is None:
        raise CaseBankError(f"case bank {dir} records no embedder")
    try:
        info = json.loads(stored)
        return str(info["name"]), int(info["dim"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CaseBankError(f"case bank {dir} records an unreadable embedder ({exc})") from None


def _vectors(blobs: Sequence[bytes]) -> np.ndarray:
    return np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])


def _row_to_case(row: sqlite3.Row | tuple) -> Case:
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


class CaseStore:
    """``cases.db`` of one bank directory: cases, their embeddings, logged gate pairs and write generations.

    Args:
        dir: The bank directory (must exist unless ``frozen``, which also needs ``cases.db`` to exist).
        embedder_name / dim: Identity of the bank's embedder: recorded on first open, and every later open must match.
        lock: The bank's re-entrant lock (transactions run under it).
        frozen: Open read-only (nothing created, no schema or meta write).

    Example:
        >>> import tempfile, threading
        >>> from pathlib import Path
        >>> d = Path(tempfile.mkdtemp())
        >>> store = CaseStore(d, embedder_name="demo", dim=4, lock=threading.RLock(), frozen=False)
        >>> store.namespaces(), store.pairs_logged()
        ([], 0)
    """

    def __init__(self, dir: Path, *, embedder_name: str, dim: int, lock: threading.RLock, frozen: bool) -> None:
        self.dir = dir
        self.path = dir / DB_NAME
        self.dim = int(dim)
        self.frozen = frozen
        self.lock = lock
        self.conn: sqlite3.Connection | None = connect_sqlite(self.path, read_only=frozen)
        self._eligible: dict[tuple[Any, ...], tuple[np.ndarray | None, int, int]] = {}
        try:
            if not frozen:  # a frozen bank opens read-only: no schema or meta write
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.executescript(_SCHEMA)
                self._migrate()
            columns = {row[1] for row in self.conn.execute("PRAGMA table_info(cases)")}
            #: a read-only bank from before dated cases reads every case as undated, none forgotten
            self.dated = "dated" in columns
            self._cols = _CASE_COLS if "evidence" in columns else _CASE_COLS.replace("evidence", "'{}'")
            self._check_embedder(embedder_name)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise unusable(self.path, exc) from None
        except BaseException:
            self.conn.close()
            raise

    def _migrate(self) -> None:
        """Add the columns of dated cases to a bank written before them (its cases are undated)."""
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(cases)")}  # type: ignore[union-attr]
        for name, decl in _ADDED_COLUMNS:
            if name not in columns:
                self.conn.execute(f"ALTER TABLE cases ADD COLUMN {name} {decl}")  # type: ignore[union-attr]
        self.conn.execute("CREATE INDEX IF NOT EXISTS cases_dated ON cases (namespace, dated)")  # type: ignore[union-attr]

    @property
    def db(self) -> sqlite3.Connection:
        if self.conn is None:
            raise CaseBankError(f"case bank {self.dir} is closed")
        return self.conn

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

    # -- meta and generations --------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def _check_embedder(self, name: str) -> None:
        stored = self.meta("embedder")
        if stored is None:
            if self.frozen:
                raise CaseBankError(f"case bank {self.dir} records no embedder")
            with self.tx():
                self._set_meta("embedder", json.dumps({"name": name, "dim": self.dim}))
            return
        info = json.loads(stored)
        if info.get("name") != name or int(info.get("dim", -1)) != self.dim:
            raise CaseBankError(
                f"case bank {self.dir} was built with embedder {info.get('name')} (dim {info.get('dim')}); "
                f"got {name} (dim {self.dim}): open it with the same embedder"
            )

    @contextlib.contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction under the bank's lock: committed on success, rolled back on error."""
        with self.lock:
            conn = self.db
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def generation(self, namespace: str) -> int:
        """The namespace's write generation (bumped by every insert or eviction)."""
        value = self.meta(f"gen:{namespace}")
        return int(value) if value is not None else 0

    def _bump_generation(self, namespace: str) -> int:
        gen = self.generation(namespace) + 1
        self._set_meta(f"gen:{namespace}", str(gen))
        return gen

    # -- writes ----------------------------------------------------------------------------------------------

    def insert(self, cases: Sequence[Case], embs: np.ndarray, metas: Sequence[dict]) -> tuple[list[int], int]:
        """Insert cases with their embeddings in one transaction; returns their rowids and the new generation."""
        rids: list[int] = []
        namespaces = {c.namespace for c in cases}
        with self.tx() as conn:
            for case, emb, meta in zip(cases, embs, metas, strict=True):
                try:
                    cur = conn.execute(
                        "INSERT INTO cases (id, namespace, task_text, plan, reward, created_at, trajectory_ref,"
                        " meta, emb, dated, evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            case.id,
                            case.namespace,
                            case.task_text,
                            case.plan,
                            case.reward,
                            case.created_at.isoformat(),
                            case.trajectory_ref,
                            json.dumps(meta or {}),
                            np.asarray(emb, dtype=np.float32).tobytes(),
                            iso(case.evidence.dated),
                            case.evidence.model_dump_json(),
                        ),
                    )
                except sqlite3.IntegrityError as exc:
                    raise CaseBankError(f"case id {case.id!r} already exists in {self.dir}") from exc
                rids.append(int(cur.lastrowid or 0))
            gen = max(self._bump_generation(ns) for ns in namespaces)
        return rids, gen

    def set_reward(self, case_id: str, reward: float) -> None:
        """Change a stored case's reward."""
        with self.tx() as conn:
            cur = conn.execute("UPDATE cases SET reward=? WHERE id=?", (float(reward), case_id))
            if cur.rowcount == 0:
                raise CaseBankError(f"no case {case_id!r} in {self.dir}")

    def mark_evicted(self, namespace: str, case_ids: Sequence[str]) -> tuple[list[int], int]:
        """Mark cases evicted (they stay stored); returns their rowids and the namespace's new generation."""
        now = utcnow().isoformat()
        with self.tx() as conn:
            conn.executemany("UPDATE cases SET evicted_at=? WHERE id=?", [(now, v) for v in case_ids])
            gen = self._bump_generation(namespace)
        marks = ",".join("?" * len(case_ids))
        rids = [int(r[0]) for r in self.db.execute(f"SELECT rid FROM cases WHERE id IN ({marks})", list(case_ids))]
        return rids, gen

    def forget(self, case_ids: Sequence[str], *, reason: str) -> tuple[list[str], dict[str, tuple[list[int], int]]]:
        """Tombstone cases (``memento memory forget``): each is marked forgotten (and so never live again: not
        retrieved, not counted) and logged in ``changes`` with its record before. Returns the ids forgotten and, per
        namespace touched, the rowids its index drops with the namespace's new generation. Unknown or already
        forgotten ids are skipped."""
        now = utcnow().isoformat()
        forgotten: list[str] = []
        touched: dict[str, list[int]] = {}
        gens: dict[str, int] = {}
        with self.tx() as conn:
            for case_id in dict.fromkeys(case_ids):
                row = conn.execute(
                    f"SELECT rid, {self._cols}, evicted_at FROM cases WHERE id=? AND forgotten_at IS NULL", (case_id,)
                ).fetchone()
                if row is None:
                    continue
                case = _row_to_case(row[1:])
                conn.execute("UPDATE cases SET forgotten_at=?, evicted_at=coalesce(evicted_at, ?) WHERE id=?",
                             (now, now, case_id))  # fmt: skip
                conn.execute(
                    "INSERT INTO changes (at, op, case_id, reason, before) VALUES (?, 'forget', ?, ?, ?)",
                    (now, case_id, reason, case.model_dump_json()),
                )
                forgotten.append(case_id)
                if row[-1] is None:  # was live: its namespace's index drops it
                    touched.setdefault(case.namespace, []).append(int(row[0]))
            for namespace in touched:
                gens[namespace] = self._bump_generation(namespace)
        return forgotten, {ns: (rids, gens[ns]) for ns, rids in touched.items()}

    def changes(self) -> list[dict[str, Any]]:
        """The bank's change log (tombstones of forgotten cases), oldest first."""
        try:
            rows = self.db.execute("SELECT seq, at, op, case_id, reason FROM changes ORDER BY seq").fetchall()
        except sqlite3.OperationalError:  # a read-only bank from before the change log
            return []
        return [dict(zip(("seq", "at", "op", "case_id", "reason"), row, strict=True)) for row in rows]

    def log_pairs(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Append logged gate pairs: ``(namespace, task_id, query, case_id, reward, q_score, cosine, created_at,
        q_emb, c_emb)`` rows."""
        with self.tx() as conn:
            conn.executemany(
                "INSERT INTO gate_pairs (namespace, task_id, query, case_id, reward, q_score, cosine, created_at,"
                " q_emb, c_emb) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    # -- reads -----------------------------------------------------------------------------------------------

    def get(self, case_id: str) -> Case:
        row = self.db.execute(f"SELECT {self._cols} FROM cases WHERE id=?", (case_id,)).fetchone()
        if row is None:
            raise CaseBankError(f"no case {case_id!r} in {self.dir}")
        return _row_to_case(row)

    def namespaces(self) -> list[str]:
        rows = self.db.execute("SELECT DISTINCT namespace FROM cases WHERE evicted_at IS NULL ORDER BY 1")
        return [r[0] for r in rows.fetchall()]

    def all_namespaces(self) -> list[str]:
        """Every namespace that ever held a case (evicted and forgotten ones included)."""
        return [r[0] for r in self.db.execute("SELECT DISTINCT namespace FROM cases ORDER BY 1").fetchall()]

    def count(self, namespace: str) -> int:
        row = self.db.execute(
            "SELECT COUNT(*) FROM cases WHERE namespace=? AND evicted_at IS NULL", (namespace,)
        ).fetchone()
        return int(row[0])

    def cases(self, namespace: str, *, include_evicted: bool = False) -> list[Case]:
        sql = f"SELECT {self._cols} FROM cases WHERE namespace=?"
        if not include_evicted:
            sql += " AND evicted_at IS NULL"
        return [_row_to_case(r) for r in self.db.execute(sql + " ORDER BY rid", (namespace,)).fetchall()]

    def case_ids_for_ref(self, trajectory_ref: str) -> list[str]:
        rows = self.db.execute("SELECT id FROM cases WHERE trajectory_ref=?", (trajectory_ref,)).fetchall()
        return [r[0] for r in rows]

    def embeddings(self, case_ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of cases (rows in the order of ``case_ids``)."""
        if not case_ids:
            return np.zeros((0, self.dim), dtype=np.float32)
        marks = ",".join("?" * len(case_ids))
        rows = dict(self.db.execute(f"SELECT id, emb FROM cases WHERE id IN ({marks})", list(case_ids)).fetchall())
        missing = [c for c in case_ids if c not in rows]
        if missing:
            raise CaseBankError(f"no case {missing[0]!r} in {self.dir}")
        return _vectors([rows[c] for c in case_ids])

    def cases_by_rid(self, rids: Sequence[int]) -> dict[int, Case]:
        if not rids:
            return {}
        marks = ",".join("?" * len(rids))
        rows = self.db.execute(
            f"SELECT rid, {self._cols} FROM cases WHERE rid IN ({marks})", [int(r) for r in rids]
        ).fetchall()
        return {int(r[0]): _row_to_case(r[1:]) for r in rows}

    def live_rids(self, namespace: str, *, dates: DateFilter | None = None) -> np.ndarray:
        """Rowids of the namespace's live cases, oldest first (only those ``dates`` lets a task see)."""
        sql, params = "SELECT rid FROM cases WHERE namespace=? AND evicted_at IS NULL", [namespace]
        clause, args = dates.sql(self._dated_col) if dates is not None else ("", [])
        if clause:
            sql, params = f"{sql} AND {clause}", [*params, *args]
        rows = self.db.execute(sql + " ORDER BY rid", params).fetchall()
        return np.asarray([r[0] for r in rows], dtype=np.int64)

    @property
    def _dated_col(self) -> str:
        return "dated" if self.dated else "NULL"

    def eligible(self, namespace: str, dates: DateFilter | None) -> tuple[np.ndarray | None, int, int]:
        """What a task may retrieve from a namespace: ``(rowids of the live cases it may see, or None when it may
        see every one; cases hidden as dated on or after its cutoff; undated cases dropped)``. Kept per namespace
        generation and filter (tasks of one cutoff share it until the namespace changes)."""
        if dates is None or not dates.active:
            return None, 0, 0
        key = (namespace, self.generation(namespace), dates.cutoff, dates.undated)
        with self.lock:
            cached = self._eligible.get(key)
            if cached is not None:
                return cached
            after, undated = dates.hidden_sql(self._dated_col)
            base = "SELECT COUNT(*) FROM cases WHERE namespace=? AND evicted_at IS NULL AND "
            hidden = int(self.db.execute(base + after[0], [namespace, *after[1]]).fetchone()[0]) if after else 0
            dropped = int(self.db.execute(base + undated, [namespace]).fetchone()[0]) if undated else 0
            result = (None, 0, 0) if not hidden and not dropped else (self.live_rids(namespace, dates=dates), hidden,
                                                                      dropped)  # fmt: skip
            if len(self._eligible) >= 64:
                self._eligible.clear()
            self._eligible[key] = result
            return result

    def stored_embeddings(self, rids: np.ndarray) -> np.ndarray:
        """Stored embeddings by rowid (rows in the order of ``rids``)."""
        out = np.zeros((len(rids), self.dim), dtype=np.float32)
        pos = {int(r): i for i, r in enumerate(rids)}
        chunk = 900
        for start in range(0, len(rids), chunk):
            part = [int(r) for r in rids[start : start + chunk]]
            marks = ",".join("?" * len(part))
            for rid, blob in self.db.execute(f"SELECT rid, emb FROM cases WHERE rid IN ({marks})", part):
                out[pos[int(rid)]] = np.frombuffer(blob, dtype=np.float32)
        return out

    def live_rewards(self, namespace: str) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Ids, rewards and embeddings of the namespace's live cases, oldest first."""
        rows = self.db.execute(
            "SELECT id, reward, emb FROM cases WHERE namespace=? AND evicted_at IS NULL ORDER BY rid", (namespace,)
        ).fetchall()
        if not rows:
            return [], np.zeros((0,)), np.zeros((0, self.dim), dtype=np.float32)
        return [r[0] for r in rows], np.asarray([r[1] for r in rows], dtype=np.float64), _vectors([r[2] for r in rows])

    def pairs_logged(self) -> int:
        """Logged pairs, every namespace."""
        return int(self.db.execute("SELECT COUNT(*) FROM gate_pairs").fetchone()[0])

    def recent_pairs(self, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The ``limit`` most recent logged pairs, newest first, as ``(q, c, reward)`` arrays (None: no pairs)."""
        rows = self.db.execute(
            "SELECT q_emb, c_emb, reward FROM gate_pairs ORDER BY pid DESC LIMIT ?", (limit,)
        ).fetchall()
        if not rows:
            return None
        return _vectors([r[0] for r in rows]), _vectors([r[1] for r in rows]), np.asarray([r[2] for r in rows])

    def recent_queries(self, limit: int) -> list[np.ndarray]:
        """Embeddings of the ``limit`` most recent distinct logged queries."""
        rows = self.db.execute(
            "SELECT q_emb FROM gate_pairs GROUP BY query ORDER BY MAX(pid) DESC LIMIT ?", (limit,)
        ).fetchall()
        return [np.frombuffer(r[0], dtype=np.float32) for r in rows]

    def logged_pairs(self, namespace: str | None = None) -> dict[str, np.ndarray]:
        """All logged pairs in logging order (see :meth:`memento.memory.case_bank.CaseBank.logged_pairs`)."""
        sql = "SELECT q_emb, c_emb, reward, q_score, cosine FROM gate_pairs"
        args: tuple = ()
        if namespace is not None:
            sql, args = sql + " WHERE namespace=?", (namespace,)
        rows = self.db.execute(sql + " ORDER BY pid", args).fetchall()
        if not rows:
            z = np.zeros((0, self.dim), dtype=np.float32)
            e = np.zeros((0,), dtype=np.float64)
            return {"q": z, "c": z.copy(), "reward": e, "q_score": e.copy(), "cosine": e.copy()}
        return {
            "q": _vectors([r[0] for r in rows]),
            "c": _vectors([r[1] for r in rows]),
            "reward": np.asarray([r[2] for r in rows], dtype=np.float64),
            "q_score": np.asarray([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64),
            "cosine": np.asarray([r[4] for r in rows], dtype=np.float64),
        }


def content_items(bank: Path) -> Iterator[Any]:
    """Every case and logged gate pair of the bank at ``bank`` as normalised records (read-only; no embedder, index
    or torch needed), to compare two memories by content (:func:`memento.memory.memory_contents.diff_items`).

    A case is its namespace, task, plan, reward, the run it came from and whether it was evicted; a gate pair names
    its case by that case's task and plan (case ids are random per run).
    """
    from memento.memory.memory_contents import ItemRecord

    path = bank / DB_NAME
    try:
        with contextlib.closing(connect_sqlite(path, read_only=True)) as conn:
            cases = conn.execute(
                "SELECT id, namespace, task_text, plan, reward, trajectory_ref, evicted_at FROM cases ORDER BY rid"
            ).fetchall()
            pairs = conn.execute(
                "SELECT namespace, task_id, query, case_id, reward, q_score, cosine FROM gate_pairs ORDER BY pid"
            ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise unusable(path, exc) from None
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
