"""The database side of the case bank: the source of truth for cases, embeddings and logged gate pairs.

``cases.db`` (SQLite, WAL) or the ``memento_cbr`` schema of a PostgreSQL memory (:mod:`memento.memory.database`)
holds every case with its embedding (a float32 blob, computed once at insert), the logged (query, case, reward)
pairs the Q-gate learns from, the Q-gate itself on PostgreSQL (a directory keeps ``qgate.pt``), the embedder the bank
was built with, and a per-namespace write generation. Each case records the generation that inserted it and the one
that evicted it, so a FAISS index (:mod:`memento.memory.case_index`) that reflects generation G catches up with the
rows of later generations only: another process's appends cost what they add. Inserts are short transactions (one
at a time per bank, in commit order), so many processes append at once and none is lost. A frozen store opens the
database read-only and never creates it.

The layout, rows and existence checks live in :mod:`~memento.memory.case_rows`.

Example:
    >>> import tempfile, threading
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from memento.core.types import Case
    >>> d = Path(tempfile.mkdtemp())
    >>> store = CaseStore(d, embedder_name="demo", dim=2, lock=threading.RLock(), frozen=False)
    >>> case = Case(task_text="Who founded Acme?", plan="search", reward=1.0)
    >>> rids, gen = store.insert([case], np.ones((1, 2)), [{}])
    >>> store.count("default"), gen
    (1, 1)
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memento.core.dating import DateFilter, iso
from memento.core.errors import DataError
from memento.core.types import Case, utcnow
from memento.memory.backends import open_database
from memento.memory.case_rows import (
    CASE_COLS,
    DB_NAME,
    SCHEMA,
    CaseBankError,
    bank_exists,
    content_items,
    read_embedder_info,
    row_to_case,
    unusable,
    vectors,
)
from memento.memory.database import Database, DatabaseError, IntegrityError
from memento.memory.location import LocationLike, PostgresLocation, parse_location
from memento.utils.scrub import scrub, scrub_data

__all__ = ["DB_NAME", "CaseBankError", "CaseStore", "bank_exists", "content_items", "read_embedder_info"]


#: columns added after the first layout (``cases.db`` written before them gains them on a writable open): the
#: ISO date of a case's evidence (NULL: undated), the evidence record (JSON), the tombstone of a forgotten case, and
#: the write generations that inserted and evicted each case (a bank from before them rebuilds its saved indexes once)
_ADDED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dated", "TEXT"),
    ("evidence", "TEXT NOT NULL DEFAULT '{{}}'"),
    ("forgotten_at", "TEXT"),
    ("gen", "BIGINT NOT NULL DEFAULT 0"),
    ("evicted_gen", "BIGINT"),
)


class CaseStore:
    """The case bank's database: cases, their embeddings, logged gate pairs and write generations.

    Args:
        dir: The bank's location: a directory (``cases.db`` inside; must exist unless ``frozen``, which also needs
            ``cases.db``) or a PostgreSQL location (its ``cbr`` part).
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

    def __init__(self, dir: LocationLike, *, embedder_name: str, dim: int, lock: threading.RLock, frozen: bool) -> None:
        self.location = parse_location(dir)
        #: the directory (SQLite) or the PostgreSQL location: what messages name
        self.dir: Path | PostgresLocation = (
            self.location if isinstance(self.location, PostgresLocation) else self.location.path
        )
        self.path = self.dir / DB_NAME
        self.dim = int(dim)
        self.frozen = frozen
        self.lock = lock
        self._eligible: dict[tuple[Any, ...], tuple[np.ndarray | None, int, int]] = {}
        try:
            self.conn: Database | None = open_database(self.location, DB_NAME, read_only=frozen, what="case bank")
        except DataError as exc:
            raise CaseBankError(str(exc)) from None
        except DatabaseError as exc:
            raise unusable(self.path, exc) from None
        try:
            if not frozen:  # a frozen bank opens read-only: no schema or meta write
                self._migrate()
            columns = self.conn.columns("cases")
            #: a read-only bank from before dated cases reads every case as undated, none forgotten
            self.dated = "dated" in columns
            self._cols = CASE_COLS if "evidence" in columns else CASE_COLS.replace("evidence", "'{}'")
            self._check_embedder(embedder_name)
            self.high_water: int | None = None  # a frozen store's pin: the last case row it shows
            if frozen:  # pinned: cases, rewards and evictions written from now on stay invisible to this handle
                self.conn.hold_snapshot()
                self.high_water = int(self.conn.execute("SELECT coalesce(max(rid), 0) FROM cases").fetchone()[0])
        except DatabaseError as exc:
            self.conn.close()
            raise unusable(self.path, exc) from None
        except BaseException:
            self.conn.close()
            raise

    def _migrate(self) -> None:
        db = self.db
        if db.backend == "sqlite" and db.has_table("cases") and "gen" not in db.columns("cases"):
            import shutil

            # a bank from before generations: its saved FAISS indexes are rebuilt once from the stored embeddings
            shutil.rmtree(self.location.path / "index", ignore_errors=True)  # type: ignore[union-attr]
        db.create_schema(SCHEMA)
        with self.tx():  # the columns of dated cases and of generations, for a bank written before them
            for column, definition in _ADDED_COLUMNS:
                db.add_column("cases", column, definition)
            db.execute("CREATE INDEX IF NOT EXISTS cases_dated ON cases (namespace, dated)")
            db.execute("CREATE INDEX IF NOT EXISTS cases_gen ON cases (namespace, gen)")
            db.execute("CREATE INDEX IF NOT EXISTS cases_evicted_gen ON cases (namespace, evicted_gen)")

    @property
    def db(self) -> Database:
        if self.conn is None:
            raise CaseBankError(f"case bank {self.dir} is closed")
        return self.conn

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        return self.db.backend

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.query(sql, params)

    # -- meta and generations --------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def _check_embedder(self, name: str) -> None:
        stored = self.meta("embedder")
        if stored is None:
            if self.frozen:
                raise CaseBankError(f"case bank {self.dir} records no embedder")
            with self.tx():
                self.db.execute(
                    "INSERT INTO meta(key, value) VALUES ('embedder', ?) ON CONFLICT (key) DO NOTHING",
                    (json.dumps({"name": name, "dim": self.dim}),),
                )
            stored = self.meta("embedder")  # another process may have recorded its embedder first
        info = json.loads(stored or "{}")
        if info.get("name") != name or int(info.get("dim", -1)) != self.dim:
            raise CaseBankError(
                f"case bank {self.dir} was built with embedder {info.get('name')} (dim {info.get('dim')}); "
                f"got {name} (dim {self.dim}): open it with the same embedder"
            )

    @contextlib.contextmanager
    def tx(self) -> Iterator[Database]:
        """One write transaction under the bank's lock (one at a time per bank across processes): committed on
        success, rolled back on error."""
        with self.lock, self.db.transaction() as db:
            yield db

    def generation(self, namespace: str) -> int:
        """The namespace's write generation (bumped by every insert or eviction)."""
        value = self.meta(f"gen:{namespace}")
        return int(value) if value is not None else 0

    def _bump_generation(self, namespace: str) -> int:
        gen = self.generation(namespace) + 1
        self._set_meta(f"gen:{namespace}", str(gen))
        return gen

    # -- writes ----------------------------------------------------------------------------------------------

    def insert(self, cases: Sequence[Case], embs: np.ndarray, metas: Sequence[dict[str, Any]]) -> tuple[list[int], int]:
        """Insert cases with their embeddings in one transaction; returns their rowids and the new generation
        (several namespaces: the highest of theirs)."""
        namespaces = sorted({c.namespace for c in cases})
        try:
            with self.tx() as db:
                gens = {ns: self._bump_generation(ns) for ns in namespaces}
                rids = db.insert_returning(  # one batch: one round trip on PostgreSQL, not one per case
                    "INSERT INTO cases (id, namespace, task_text, plan, reward, created_at, trajectory_ref, meta, emb,"
                    " dated, evidence, gen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING rid",
                    [
                        (
                            case.id,
                            case.namespace,
                            scrub(case.task_text),
                            scrub(case.plan),
                            case.reward,
                            case.created_at.isoformat(),
                            case.trajectory_ref,
                            json.dumps(scrub_data(meta or {})),
                            np.asarray(emb, dtype=np.float32).tobytes(),
                            iso(case.evidence.dated),
                            scrub(case.evidence.model_dump_json()),
                            gens[case.namespace],
                        )
                        for case, emb, meta in zip(cases, embs, metas, strict=True)
                    ],
                )
        except IntegrityError as exc:
            raise CaseBankError(f"case id {self._taken([c.id for c in cases])!r} already exists in {self.dir}") from exc
        return [int(r) for r in rids], max(gens.values())

    def _taken(self, ids: Sequence[str]) -> str:
        """The first of ``ids`` that repeats an earlier one or is stored already (after a failed insert)."""
        seen: set[str] = set()
        for cid in ids:
            if cid in seen:
                return cid
            seen.add(cid)
        marks = ",".join("?" * len(ids))
        stored = {r[0] for r in self._rows(f"SELECT id FROM cases WHERE id IN ({marks})", list(ids))}
        return next((cid for cid in ids if cid in stored), ids[0])

    def set_reward(self, case_id: str, reward: float) -> None:
        """Change a stored case's reward."""
        with self.tx() as db:
            cur = db.execute("UPDATE cases SET reward=? WHERE id=?", (float(reward), case_id))
            if cur.rowcount == 0:
                raise CaseBankError(f"no case {case_id!r} in {self.dir}")

    def mark_evicted(self, namespace: str, case_ids: Sequence[str]) -> tuple[list[int], int]:
        """Mark cases evicted (they stay stored); returns their rowids and the namespace's new generation."""
        now = utcnow().isoformat()
        with self.tx() as db:
            gen = self._bump_generation(namespace)
            db.executemany(
                "UPDATE cases SET evicted_at=?, evicted_gen=? WHERE id=? AND evicted_at IS NULL",
                [(now, gen, v) for v in case_ids],
            )
        marks = ",".join("?" * len(case_ids))
        rids = [int(r[0]) for r in self._rows(f"SELECT rid FROM cases WHERE id IN ({marks})", list(case_ids))]
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
                case = row_to_case(row[1:])
                conn.execute("UPDATE cases SET forgotten_at=?, evicted_at=coalesce(evicted_at, ?) WHERE id=?",
                             (now, now, case_id))  # fmt: skip
                conn.execute(
                    "INSERT INTO changes (at, op, case_id, reason, before) VALUES (?, 'forget', ?, ?, ?)",
                    (now, case_id, reason, case.model_dump_json()),
                )
                forgotten.append(case_id)
                if row[-1] is None:  # was live: its namespace's index drops it
                    touched.setdefault(case.namespace, []).append(int(row[0]))
            for namespace, rids in touched.items():
                gens[namespace] = self._bump_generation(namespace)
                marks = ",".join("?" * len(rids))  # an index that follows the table drops them at this generation
                conn.execute(f"UPDATE cases SET evicted_gen=? WHERE rid IN ({marks})", (gens[namespace], *rids))
        return forgotten, {ns: (rids, gens[ns]) for ns, rids in touched.items()}

    def changes(self) -> list[dict[str, Any]]:
        """The bank's change log (tombstones of forgotten cases), oldest first."""
        if not self.db.has_table("changes"):  # a read-only bank from before the change log
            return []
        rows = self._rows("SELECT seq, at, op, case_id, reason FROM changes ORDER BY seq")
        return [dict(zip(("seq", "at", "op", "case_id", "reason"), row, strict=True)) for row in rows]

    def log_pairs(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Append logged gate pairs: ``(namespace, task_id, query, case_id, reward, q_score, cosine, created_at,
        q_emb, c_emb)`` rows."""
        clean = [(row[0], row[1], scrub(row[2]), *row[3:]) for row in rows]  # the query text: scrubbed
        with self.tx() as db:
            db.executemany(
                "INSERT INTO gate_pairs (namespace, task_id, query, case_id, reward, q_score, cosine, created_at,"
                " q_emb, c_emb) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                clean,
            )

    # -- reads -----------------------------------------------------------------------------------------------

    def get(self, case_id: str) -> Case:
        rows = self._rows(f"SELECT {self._cols} FROM cases WHERE id=?", (case_id,))
        row = rows[0] if rows else None
        if row is None:
            raise CaseBankError(f"no case {case_id!r} in {self.dir}")
        return row_to_case(row)

    def namespaces(self) -> list[str]:
        rows = self._rows("SELECT DISTINCT namespace FROM cases WHERE evicted_at IS NULL ORDER BY 1")
        return [r[0] for r in rows]

    def all_namespaces(self) -> list[str]:
        """Every namespace that ever held a case (evicted and forgotten ones included)."""
        return [r[0] for r in self._rows("SELECT DISTINCT namespace FROM cases ORDER BY 1")]

    def count(self, namespace: str) -> int:
        rows = self._rows("SELECT COUNT(*) FROM cases WHERE namespace=? AND evicted_at IS NULL", (namespace,))
        return int(rows[0][0])

    def cases(self, namespace: str, *, include_evicted: bool = False) -> list[Case]:
        sql = f"SELECT {self._cols} FROM cases WHERE namespace=?"
        if not include_evicted:
            sql += " AND evicted_at IS NULL"
        return [row_to_case(r) for r in self._rows(sql + " ORDER BY rid", (namespace,))]

    def all_cases(self, *, include_evicted: bool = False) -> list[Case]:
        """The cases of every namespace, in insertion order per namespace."""
        return [case for ns in self.all_namespaces() for case in self.cases(ns, include_evicted=include_evicted)]

    def hidden_counts(self, namespaces: Sequence[str], dates: DateFilter | None) -> tuple[int, int]:
        """How many live cases of ``namespaces`` ``dates`` keeps away from a task: ``(dated on or after its cutoff,
        undated dropped)``."""
        hidden = dropped = 0
        for ns in namespaces:
            _allowed, h, d = self.eligible(ns, dates)
            hidden, dropped = hidden + h, dropped + d
        return hidden, dropped

    def case_ids_for_ref(self, trajectory_ref: str) -> list[str]:
        rows = self._rows("SELECT id FROM cases WHERE trajectory_ref=?", (trajectory_ref,))
        return [r[0] for r in rows]

    def embeddings(self, case_ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of cases (rows in the order of ``case_ids``)."""
        if not case_ids:
            return np.zeros((0, self.dim), dtype=np.float32)
        marks = ",".join("?" * len(case_ids))
        rows = {cid: emb for cid, emb in self._rows(f"SELECT id, emb FROM cases WHERE id IN ({marks})", list(case_ids))}
        missing = [c for c in case_ids if c not in rows]
        if missing:
            raise CaseBankError(f"no case {missing[0]!r} in {self.dir}")
        return vectors([rows[c] for c in case_ids])

    def rank_rows(
        self, namespaces: Sequence[str], rids: Sequence[int], *, gate_version: bool = False, pairs: bool = False
    ) -> tuple[dict[str, int], dict[int, Case], int | None, int | None]:
        """What a retrieval reads, in one statement (one round trip on PostgreSQL, one consistent state on both):
        the write generation of each namespace (to check that the index it searched reflects it), the live cases
        among ``rids``, and on request the stored Q-gate's version and the number of logged pairs.

        Returns ``(generations, live cases by rowid, gate version or None, pairs logged or None)``.
        """
        if not namespaces:
            raise CaseBankError("rank_rows needs a namespace")
        marks = ",".join("?" * len(rids)) if rids else "-1"
        gens = ", ".join(f"(SELECT value FROM meta WHERE key=?) AS g{i}" for i in range(len(namespaces)))
        gate = "(SELECT version FROM gate_state WHERE name='qgate')" if gate_version else "NULL"
        count = "(SELECT COUNT(*) FROM gate_pairs)" if pairs else "NULL"
        cols = ", ".join(c if c.startswith("'") else f"c.{c}" for c in (c.strip() for c in self._cols.split(",")))
        rows = self._rows(
            f"SELECT s.*, c.rid, c.evicted_at, {cols} FROM (SELECT {gens}, {gate} AS gv, {count} AS np) s "
            f"LEFT JOIN cases c ON c.rid IN ({marks})",
            [*(f"gen:{ns}" for ns in namespaces), *(int(r) for r in rids)],
        )
        n = len(namespaces)
        first = rows[0]
        generations = {ns: 0 if first[i] is None else int(first[i]) for i, ns in enumerate(namespaces)}
        version = None if first[n] is None else int(first[n])
        logged = None if first[n + 1] is None else int(first[n + 1])
        cases = {int(r[n + 2]): row_to_case(r[n + 4 :]) for r in rows if r[n + 2] is not None and r[n + 3] is None}
        return generations, cases, version, logged

    def episodes(self, case_ids: Sequence[str] | None = None) -> list[tuple[str, bytes, float, bool]]:
        """The episodes of cases (the kernel Q of :mod:`~memento.memory.q_kernel`): ``(case id, embedding, reward,
        is a logged use)`` for each case's own task and each logged use of it. ``None``: every case ever used."""
        if case_ids is None:
            uses = self._rows("SELECT case_id, q_emb, reward FROM gate_pairs ORDER BY pid")
            own = self._rows("SELECT id, emb, reward FROM cases WHERE id IN (SELECT DISTINCT case_id FROM gate_pairs)")
        elif case_ids:
            marks = ",".join("?" * len(case_ids))
            uses = self._rows(
                f"SELECT case_id, q_emb, reward FROM gate_pairs WHERE case_id IN ({marks}) ORDER BY pid", list(case_ids)
            )
            own = self._rows(f"SELECT id, emb, reward FROM cases WHERE id IN ({marks})", list(case_ids))
        else:
            return []
        return [(r[0], r[1], float(r[2]), False) for r in own] + [(r[0], r[1], float(r[2]), True) for r in uses]

    def cases_by_rid(self, rids: Sequence[int]) -> dict[int, Case]:
        if not rids:
            return {}
        marks = ",".join("?" * len(rids))
        rows = self._rows(f"SELECT rid, {self._cols} FROM cases WHERE rid IN ({marks})", [int(r) for r in rids])
        return {int(r[0]): row_to_case(r[1:]) for r in rows}

    def live_rids(
        self, namespace: str, *, dates: DateFilter | None = None, max_generation: int | None = None
    ) -> np.ndarray:
        """Rowids of the namespace's live cases, oldest first (only those ``dates`` lets a task see, and those
        inserted up to ``max_generation``)."""
        sql = "SELECT rid FROM cases WHERE namespace=? AND evicted_at IS NULL"
        params: list[Any] = [namespace]
        clause, args = dates.sql(self._dated_col) if dates is not None else ("", [])
        if clause:
            sql += f" AND {clause}"
            params.extend(args)
        if max_generation is not None:
            sql += " AND gen <= ?"
            params.append(max_generation)
        rows = self._rows(sql + " ORDER BY rid", params)
        return np.asarray([r[0] for r in rows], dtype=np.int64)

    @property
    def _dated_col(self) -> str:
        return "dated" if self.dated else "NULL"

    def eligible(
        self, namespace: str, dates: DateFilter | None, *, generation: int | None = None
    ) -> tuple[np.ndarray | None, int, int]:
        """What a task may retrieve from a namespace: ``(rowids of the live cases it may see, or None when it may
        see every one; cases hidden as dated on or after its cutoff; undated cases dropped)``. Kept per namespace
        generation and filter (tasks of one cutoff share it until the namespace changes); ``generation`` (that of
        an index about to be searched) saves reading the current one, and no case inserted after it is listed."""
        if dates is None or not dates.active:
            return None, 0, 0
        gen = self.generation(namespace) if generation is None else generation
        key = (namespace, gen, dates.cutoff, dates.undated)
        with self.lock:
            cached = self._eligible.get(key)
            if cached is not None:
                return cached
            after, undated = dates.hidden_sql(self._dated_col)
            base = "SELECT COUNT(*) FROM cases WHERE namespace=? AND evicted_at IS NULL AND "
            hidden = int(self._rows(base + after[0], [namespace, *after[1]])[0][0]) if after else 0
            dropped = int(self._rows(base + undated, [namespace])[0][0]) if undated else 0
            result = (None, 0, 0) if not hidden and not dropped else (
                self.live_rids(namespace, dates=dates, max_generation=gen), hidden, dropped)  # fmt: skip
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
            for rid, blob in self._rows(f"SELECT rid, emb FROM cases WHERE rid IN ({marks})", part):
                out[pos[int(rid)]] = np.frombuffer(blob, dtype=np.float32)
        return out

    def changes_since(self, namespace: str, generation: int) -> tuple[int, np.ndarray, np.ndarray, list[int]]:
        """What an index reflecting ``generation`` lacks: ``(current generation, rowids added since and still
        live, their embeddings, rowids evicted since that it holds)``. Reads only the rows of later generations."""
        with self.lock:
            current = self.generation(namespace)
            added = self._rows(
                "SELECT rid, emb FROM cases WHERE namespace=? AND gen > ? AND gen <= ? AND evicted_at IS NULL "
                "ORDER BY rid",
                (namespace, generation, current),
            )
            removed = self._rows(
                "SELECT rid FROM cases WHERE namespace=? AND evicted_gen > ? AND evicted_gen <= ? AND gen <= ?",
                (namespace, generation, current, generation),
            )
        rids = np.asarray([int(r[0]) for r in added], dtype=np.int64)
        embs = vectors([r[1] for r in added]) if added else np.zeros((0, self.dim), dtype=np.float32)
        return current, rids, embs, [int(r[0]) for r in removed]

    # -- the Q-gate's saved state (PostgreSQL banks; a directory keeps qgate.pt) ------------------------------------

    def gate_state(self) -> tuple[int, bytes] | None:
        """``(version, bytes)`` of the saved gate, or None."""
        rows = self._rows("SELECT version, state FROM gate_state WHERE name='qgate'")
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def gate_version(self) -> int | None:
        """The saved gate's version (bumped by every save), or None."""
        rows = self._rows("SELECT version FROM gate_state WHERE name='qgate'")
        return int(rows[0][0]) if rows else None

    def save_gate_state(self, state: bytes) -> int:
        """Store the gate's bytes; returns the new version."""
        with self.tx() as db:
            row = db.execute(
                "INSERT INTO gate_state (name, version, state) VALUES ('qgate', 1, ?) ON CONFLICT (name) "
                "DO UPDATE SET version = gate_state.version + 1, state = excluded.state RETURNING version",
                (state,),
            ).fetchone()
        return int(row[0])

    def live_rewards(self, namespace: str) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Ids, rewards and embeddings of the namespace's live cases, oldest first."""
        rows = self._rows(
            "SELECT id, reward, emb FROM cases WHERE namespace=? AND evicted_at IS NULL ORDER BY rid", (namespace,)
        )
        if not rows:
            return [], np.zeros((0,)), np.zeros((0, self.dim), dtype=np.float32)
        return [r[0] for r in rows], np.asarray([r[1] for r in rows], dtype=np.float64), vectors([r[2] for r in rows])

    def pairs_logged(self) -> int:
        """Logged pairs, every namespace."""
        return int(self._rows("SELECT COUNT(*) FROM gate_pairs")[0][0])

    def recent_pairs(self, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The ``limit`` most recent logged pairs, newest first, as ``(q, c, reward)`` arrays (None: no pairs)."""
        rows = self._rows("SELECT q_emb, c_emb, reward FROM gate_pairs ORDER BY pid DESC LIMIT ?", (limit,))
        if not rows:
            return None
        return vectors([r[0] for r in rows]), vectors([r[1] for r in rows]), np.asarray([r[2] for r in rows])

    def recent_queries(self, limit: int) -> list[np.ndarray]:
        """Embeddings of the ``limit`` most recent distinct logged queries."""
        rows = self._rows(
            "SELECT g.q_emb FROM gate_pairs g JOIN (SELECT MAX(pid) AS pid FROM gate_pairs GROUP BY query "
            "ORDER BY MAX(pid) DESC LIMIT ?) latest ON g.pid = latest.pid ORDER BY g.pid DESC",
            (limit,),
        )
        return [np.frombuffer(r[0], dtype=np.float32) for r in rows]

    def logged_pairs(self, namespace: str | None = None) -> dict[str, np.ndarray]:
        """All logged pairs in logging order (see :meth:`memento.memory.case_bank.CaseBank.logged_pairs`)."""
        sql = "SELECT q_emb, c_emb, reward, q_score, cosine FROM gate_pairs"
        args: tuple[str, ...] = ()
        if namespace is not None:
            sql, args = sql + " WHERE namespace=?", (namespace,)
        rows = self._rows(sql + " ORDER BY pid", args)
        if not rows:
            z = np.zeros((0, self.dim), dtype=np.float32)
            e = np.zeros((0,), dtype=np.float64)
            return {"q": z, "c": z.copy(), "reward": e, "q_score": e.copy(), "cosine": e.copy()}
        return {
            "q": vectors([r[0] for r in rows]),
            "c": vectors([r[1] for r in rows]),
            "reward": np.asarray([r[2] for r in rows], dtype=np.float64),
            "q_score": np.asarray([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64),
            "cosine": np.asarray([r[4] for r in rows], dtype=np.float64),
        }
