"""The case bank of Memento CBR: past (task, plan, reward) cases, successes and failures alike, with learned retrieval.

Storage (one directory):

* ``cases.db`` — SQLite (WAL) is the source of truth: every case with its embedding (float32 blob, computed once at
  insert), the logged (query, case, reward) pairs the Q-gate learned from, and a per-namespace write generation.
* ``index/<namespace>.faiss`` (+ ``.json``) — one FAISS inner-product index per namespace: exact ``IndexFlatIP``
  while small, ``IndexHNSWFlat`` past ``hnsw_threshold`` cases; updated incrementally on insert and written
  atomically (temp file + rename) by :meth:`CaseBank.save`. On open, an index whose generation lags the database is
  caught up from the stored embeddings (added / removed ids); a missing or unreadable index is rebuilt. Nothing is
  ever re-embedded.
* ``qgate.pt`` — the Q-gate's state_dict and optimizer (atomic write after each online update). The replay buffer is
  refilled from the logged pairs on open.

Retrieval (``retrieve``): ``cosine`` = FAISS top-k; ``q`` = FAISS prefilter to ``prefilter`` candidates, then rank by
the gate's ``Q = p(useful | query, case)``; ``softmax`` = sample k candidates without replacement with probabilities
``softmax(logit(Q) / alpha)``: ``alpha`` is a temperature over the gate's logits (Gumbel top-k, i.e. sequential
draws: the first draw follows that softmax exactly; alpha -> 0 is greedy Q, a large alpha is uniform). The gate
ranks only once ``min_pairs`` (query, case, reward) pairs are logged; before that ``Q`` is the cosine similarity
(and ``softmax`` samples from ``softmax(cosine / alpha)``), since a gate trained on a handful of pairs only adds
noise. It still learns online from the first pair.
A bank opened with ``base_namespace`` searches that shared namespace alongside its own and merges by score.

Beyond the paper (flags): ``capacity`` + ``eviction=True`` keeps at most ``capacity`` live cases in the namespace,
evicting the least useful first (lowest mean Q against recently logged queries; lowest reward, then oldest, before
the gate has learned anything). Evicted cases stay in the database, marked, and leave the index.

Concurrent writers (several processes on one directory): every write takes the directory lock
(:class:`memento.memory.dir_lock.DirectoryLock`); under it the namespace index catches up with the database and a
gate saved by another writer is reloaded before this one updates and saves it, so no update is lost to a
last-writer-wins save.

Example:
    >>> import tempfile
    >>> from memento.memory.embedder import HashingEmbedder
    >>> bank = CaseBank(tempfile.mkdtemp(), HashingEmbedder(dim=64))
    >>> _ = bank.add("Who founded Acme Corp?", "1. search Acme founder 2. confirm on the company site", reward=1.0)
    >>> _ = bank.add("Rainfall in Lima in 2019", "1. search the weather service archive", reward=0.0)
    >>> [c.task_text for c, _ in bank.retrieve("founder of Acme", k=1)]
    ['Who founded Acme Corp?']
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from memento.errors import ConfigError, DataError, MemoryFrozenError
from memento.extras import require
from memento.files import atomic_write_bytes
from memento.memory.embedder import Embedder, apply_compute_threads, default_embedder
from memento.types import Case, new_id, utcnow

if TYPE_CHECKING:  # torch stays unimported until a gate is needed
    from memento.memory.q_gate import QGateLearner

__all__ = [
    "CaseBank",
    "CaseBankError",
    "RetrievalPolicy",
    "StoredEmbedder",
    "sample_softmax",
    "q_logits",
    "DB_NAME",
    "GATE_FILE",
]

logger = logging.getLogger(__name__)

DB_NAME = "cases.db"
GATE_FILE = "qgate.pt"
RetrievalPolicy = Literal["cosine", "q", "softmax"]

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
    emb BLOB NOT NULL
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
"""


class CaseBankError(DataError):
    """A case bank cannot be used as asked (embedder mismatch, unknown case, bad argument)."""


def _ns_file(namespace: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", namespace)[:40]
    return f"{safe}-{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"


def _stamp(path: Path) -> tuple[int, int, int]:
    """What changes when a file is replaced or rewritten: inode (atomic renames), mtime and size."""
    st = path.stat()
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """A connection to ``cases.db``; ``read_only`` opens it with ``mode=ro`` (nothing created or written)."""
    if read_only:
        uri = f"{path.resolve().as_uri()}?mode=ro"
        return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30)
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)


def _unusable(path: Path, exc: BaseException) -> CaseBankError:
    """The one-line error for a ``cases.db`` SQLite cannot read (not a database, corrupt, wrong schema)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CaseBankError(f"{path} is not a usable case bank ({reason})")


def sample_softmax(scores: np.ndarray, k: int, *, alpha: float = 1.0, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``k`` items drawn without replacement, each draw with probability ``softmax(scores / alpha)``
    over the items not yet drawn (Gumbel top-k: exact, one vectorised pass).

    ``alpha`` is a temperature: as it goes to 0 the draw is the greedy top-k of ``scores`` (ties in index order);
    a large ``alpha`` draws nearly uniformly.
    """
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if alpha < 1e-6:  # the limit alpha -> 0: greedy (dividing by ~0 would overflow the Gumbel perturbation)
        return np.argsort(-scores, kind="stable")[: max(0, k)]
    logits = scores / alpha
    return np.argsort(-(logits + rng.gumbel(size=len(logits))), kind="stable")[: max(0, k)]


def q_logits(q: np.ndarray) -> np.ndarray:
    """``logit(Q) = log(Q / (1 - Q))`` of gate probabilities (clipped away from 0 and 1)."""
    p = np.clip(np.asarray(q, dtype=np.float64), 1e-6, 1.0 - 1e-6)
    return np.log(p) - np.log1p(-p)


class StoredEmbedder:
    """Stands in for the embedder a bank was built with, to open it without loading a model (statistics, export).

    ``embed`` raises: a bank opened this way can list cases, read logged pairs and score stored embeddings with the
    gate, but cannot embed new text.
    """

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = int(dim)

    @classmethod
    def of(cls, dir: str | os.PathLike) -> StoredEmbedder:
        """The embedder identity recorded in the bank at ``dir``."""
        path = Path(dir) / DB_NAME
        if not path.is_file():
            raise CaseBankError(f"no case bank at {dir} (missing {DB_NAME})")
        try:
            with contextlib.closing(_connect(path, read_only=True)) as conn:
                row = conn.execute("SELECT value FROM meta WHERE key='embedder'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise _unusable(path, exc) from None
        if row is None:
            raise CaseBankError(f"case bank {dir} records no embedder")
        try:
            info = json.loads(row[0])
            return cls(str(info["name"]), int(info["dim"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CaseBankError(f"case bank {dir} records an unreadable embedder ({exc})") from None

    def embed(self, texts: list[str]) -> np.ndarray:
        raise CaseBankError(
            f"this case bank was opened without its embedder ({self.name}); open it with that embedder to embed text"
        )


class _NamespaceIndex:
    """A FAISS inner-product index over one namespace's live cases, keyed by the cases' SQLite rowids."""

    def __init__(self, dim: int, *, hnsw: bool, hnsw_m: int, ef_search: int, ef_construction: int) -> None:
        import faiss

        apply_compute_threads("faiss")

        self.dim = dim
        self.hnsw = hnsw
        if hnsw:
            base = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            base.hnsw.efSearch = ef_search
            base.hnsw.efConstruction = ef_construction
        else:
            base = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIDMap2(base)
        self.tombstones: set[int] = set()
        self.generation = -1
        self.saved_generation: int | None = None  # generation of the copy on disk (None: none written/loaded)

    @property
    def live(self) -> int:
        return int(self.index.ntotal) - len(self.tombstones)

    def ids(self) -> np.ndarray:
        import faiss

        return faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def add(self, rids: np.ndarray, embs: np.ndarray) -> None:
        if len(rids):
            self.index.add_with_ids(np.ascontiguousarray(embs, dtype=np.float32), np.asarray(rids, dtype=np.int64))

    def remove(self, rids: Iterable[int]) -> None:
        rids = [int(r) for r in rids]
        if not rids:
            return
        if self.hnsw:  # HNSW cannot delete: tombstone, rebuilt away by the bank when they pile up
            self.tombstones.update(rids)
        else:
            self.index.remove_ids(np.asarray(rids, dtype=np.int64))

    def search(self, vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.index.ntotal == 0 or k <= 0:
            return []
        kk = min(int(self.index.ntotal), k + len(self.tombstones))
        scores, ids = self.index.search(vec.reshape(1, -1).astype(np.float32), kk)
        out = [
            (int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0 and i not in self.tombstones
        ]
        return out[:k]

    def vectors(self, rids: Sequence[int]) -> np.ndarray:
        if not rids:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.index.reconstruct_batch(np.asarray(rids, dtype=np.int64)).astype(np.float32)

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        ids = self.ids()
        if not len(ids):
            return ids, np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.index.index.reconstruct_n(0, int(self.index.ntotal))
        keep = np.array([i not in self.tombstones for i in ids], dtype=bool)
        return ids[keep], vecs[keep]


class CaseBank:
    """Persistent, namespaced store of (task, plan, reward) cases with cosine / learned-Q / softmax retrieval.

    Thread-safe (one lock per bank); ``copy.copy`` and ``copy.deepcopy`` return the same bank, so DSPy optimizers
    that deep-copy programs never fork the memory. One writer process per directory.

    Args:
        dir: Bank directory (created if missing, unless ``frozen``).
        embedder: Text embedder (default :func:`~memento.memory.embedder.default_embedder`). The bank records the
            embedder's ``name``/``dim`` and refuses another one (stored vectors would be meaningless).
        namespace: Namespace this bank writes to and reads from (e.g. one per client).
        base_namespace: A shared namespace searched alongside ``namespace`` (read-only from this bank).
        capacity: Maximum live cases in ``namespace`` (used with ``eviction=True``).
        eviction: Evict least-useful cases (by Q-score) when ``capacity`` is exceeded.
        gate: A custom torch ``nn.Module`` gate (``forward(q, c) -> probs``); default :class:`QGate`.
        gate_options: Keyword options of :class:`~memento.memory.q_gate.QGateLearner` (lr, steps_per_update, ...).
        prefilter: Default number of FAISS candidates re-scored by the gate for ``q``/``softmax``.
        min_pairs: Logged (query, case, reward) pairs before the gate replaces cosine in ranking (``[cbr]
            min_pairs``; 0: from the first update).
        hnsw_threshold: Live-case count from which a namespace index switches from exact to HNSW (exact search
            over 100k cases takes ~9 ms p95 on 2 cores, and HNSW recall on poorly clustered texts is low: see
            docs/benchmarks.md).
        hnsw_m / ef_search / ef_construction: HNSW graph degree and search / build breadth.
        eviction_slack: Fraction below ``capacity`` an eviction goes down to (amortises the Q-scoring of the bank).
        frozen: Read-only: the existing ``cases.db`` is opened with SQLite ``mode=ro`` (a missing bank is a
            :class:`CaseBankError`, never created); writes raise :class:`~memento.errors.MemoryFrozenError`
            (retrieval still works).
        seed: Seed for softmax sampling (when ``retrieve`` gets no ``rng``/``seed``) and the gate.

    Example:
        >>> import tempfile
        >>> from memento.memory.embedder import HashingEmbedder
        >>> bank = CaseBank(tempfile.mkdtemp(), HashingEmbedder(dim=32), namespace="client-a")
        >>> case = bank.add("Find the CEO of Initech", "search 'Initech CEO'", reward=0.0)
        >>> bank.get(case.id).reward, len(bank)
        (0.0, 1)
    """

    def __init__(
        self,
        dir: str | os.PathLike,
        embedder: Embedder | None = None,
        *,
        namespace: str = "default",
        base_namespace: str | None = None,
        capacity: int | None = None,
        eviction: bool = False,
        gate: Any = None,
        gate_options: dict[str, Any] | None = None,
        prefilter: int = 32,
        min_pairs: int = 32,
        hnsw_threshold: int = 200_000,
        hnsw_m: int = 32,
        ef_search: int = 128,
        ef_construction: int = 64,
        eviction_slack: float = 0.1,
        frozen: bool = False,
        seed: int = 0,
    ) -> None:
        require("cbr", "the case bank (method cbr)")
        if capacity is not None and capacity < 1:
            raise ConfigError(f"case bank capacity must be >= 1, got {capacity}")
        if eviction and capacity is None:
            raise ConfigError("case bank eviction=True needs a capacity")
        if base_namespace == namespace:
            base_namespace = None
        self.dir = Path(dir)
        if frozen and not (self.dir / DB_NAME).is_file():
            raise CaseBankError(f"no case bank at {self.dir} (missing {DB_NAME}); a frozen bank is never created")
        if not frozen:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder if embedder is not None else default_embedder()
        self.namespace = namespace
        self.base_namespace = base_namespace
        self.capacity = capacity
        self.eviction = eviction
        self.prefilter = int(prefilter)
        if min_pairs < 0:
            raise ConfigError(f"case bank min_pairs must be >= 0, got {min_pairs}")
        self.min_pairs = int(min_pairs)
        self.hnsw_threshold = int(hnsw_threshold)
        self.hnsw_m = int(hnsw_m)
        self.ef_search = int(ef_search)
        self.ef_construction = int(ef_construction)
        self.eviction_slack = float(eviction_slack)
        self.frozen = frozen
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._custom_gate = gate
        self._gate_options = dict(gate_options or {})
        self._learner: QGateLearner | None = None
        self._gate_stamp: tuple[int, int, int] | None = None  # (inode, mtime_ns, size) of the gate file last seen
        self._lock = threading.RLock()
        self._indexes: dict[str, _NamespaceIndex] = {}
        self._conn = _connect(self.dir / DB_NAME, read_only=frozen)
        try:
            if not frozen:  # a frozen bank opens read-only: no schema or meta write
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA)
            self._check_embedder()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise _unusable(self.dir / DB_NAME, exc) from None
        except BaseException:
            self._conn.close()
            raise

    # -- basics --------------------------------------------------------------------------------------------------

    def __deepcopy__(self, memo: dict) -> CaseBank:
        return self  # memory must not fork when DSPy optimizers deep-copy a program

    def __copy__(self) -> CaseBank:
        return self  # a shallow copy would be a second bank object over the same connection and indexes

    def __len__(self) -> int:
        return self.count()

    def __enter__(self) -> CaseBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CaseBank({str(self.dir)!r}, namespace={self.namespace!r}, cases={len(self)})"

    @property
    def dim(self) -> int:
        return int(self.embedder.dim)

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def _check_embedder(self) -> None:
        name = str(getattr(self.embedder, "name", type(self.embedder).__name__))
        stored = self._meta("embedder")
        if stored is None:
            if self.frozen:
                raise CaseBankError(f"case bank {self.dir} records no embedder")
            with self._tx():
                self._set_meta("embedder", json.dumps({"name": name, "dim": self.dim}))
            return
        info = json.loads(stored)
        if info.get("name") != name or int(info.get("dim", -1)) != self.dim:
            raise CaseBankError(
                f"case bank {self.dir} was built with embedder {info.get('name')} (dim {info.get('dim')}); "
                f"got {name} (dim {self.dim}): open it with the same embedder"
            )

    @contextlib.contextmanager
    def _tx(self):
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _check_writable(self) -> None:
        if self.frozen:
            raise MemoryFrozenError(f"case bank {self.dir} is frozen (read-only)")

    def _generation(self, namespace: str) -> int:
        value = self._meta(f"gen:{namespace}")
        return int(value) if value is not None else 0

    def _bump_generation(self, namespace: str) -> int:
        gen = self._generation(namespace) + 1
        self._set_meta(f"gen:{namespace}", str(gen))
        return gen

    @staticmethod
    def _row_to_case(row: sqlite3.Row | tuple) -> Case:
        cid, ns, task_text, plan, reward, created_at, traj = row[:7]
        return Case(
            id=cid,
            namespace=ns,
            task_text=task_text,
            plan=plan,
            reward=float(reward),
            created_at=dt.datetime.fromisoformat(created_at),
            trajectory_ref=traj,
        )

    _CASE_COLS = "id, namespace, task_text, plan, reward, created_at, trajectory_ref"

    # -- writes --------------------------------------------------------------------------------------------------

    def add(
        self,
        task_text: str,
        plan: str,
        reward: float,
        *,
        trajectory_ref: str | None = None,
        case_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Case:
        """Store one case (its text embedded once) and return it; a failure (low reward) is stored just the same."""
        case = {
            "id": case_id or new_id("case-"),
            "task_text": task_text,
            "plan": plan,
            "reward": float(reward),
            "trajectory_ref": trajectory_ref,
        }
        return self.add_many([case], metas=[meta or {}])[0]

    def add_many(self, cases: Sequence[Case | dict[str, Any]], *, metas: Sequence[dict] | None = None) -> list[Case]:
        """Store many cases in one transaction (one batched embedding call); returns them with this namespace."""
        self._check_writable()
        recs: list[Case] = []
        for item in cases:
            data = item.model_dump() if isinstance(item, Case) else dict(item)
            data["namespace"] = self.namespace
            if not str(data.get("task_text") or "").strip():
                raise CaseBankError("a case needs a non-empty task_text (it is what retrieval embeds and matches)")
            try:
                recs.append(Case(**data))
            except Exception as exc:  # pydantic validation -> one typed line
                raise CaseBankError(f"invalid case: {exc}".splitlines()[0]) from exc
        if not recs:
            return []
        embs = self.embedder.embed([c.task_text for c in recs]).astype(np.float32)
        metas = list(metas) if metas is not None else [{}] * len(recs)
        # one writer at a time (threads: the bank's lock; processes: the directory lock), and the index catches up
        # with other writers' commits before this one, so its update follows its own commit
        with self._lock, self._writer():
            index = self._index(self.namespace)
            rids = []
            with self._tx() as conn:
                for case, emb, meta in zip(recs, embs, metas, strict=True):
                    try:
                        cur = conn.execute(
                            "INSERT INTO cases (id, namespace, task_text, plan, reward, created_at, trajectory_ref,"
                            " meta, emb) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (
                                case.id,
                                case.namespace,
                                case.task_text,
                                case.plan,
                                case.reward,
                                case.created_at.isoformat(),
                                case.trajectory_ref,
                                json.dumps(meta or {}),
                                emb.tobytes(),
                            ),
                        )
                    except sqlite3.IntegrityError as exc:
                        raise CaseBankError(f"case id {case.id!r} already exists in {self.dir}") from exc
                    rids.append(cur.lastrowid)
                gen = self._bump_generation(self.namespace)
            if index.generation == gen - 1:
                index.add(np.asarray(rids, dtype=np.int64), embs)
                index.generation = gen
                self._maybe_upgrade(self.namespace)
            if self.eviction and self.capacity is not None:
                self._evict_if_needed()
        return recs

    def update_reward(self, case_id: str, reward: float) -> Case:
        """Change a stored case's reward (e.g. a delayed judgement)."""
        self._check_writable()
        if not 0.0 <= reward <= 1.0:
            raise CaseBankError(f"reward must be in [0, 1], got {reward}")
        with self._tx() as conn:
            cur = conn.execute("UPDATE cases SET reward=? WHERE id=?", (float(reward), case_id))
            if cur.rowcount == 0:
                raise CaseBankError(f"no case {case_id!r} in {self.dir}")
        return self.get(case_id)

    # -- reads ---------------------------------------------------------------------------------------------------

    def get(self, case_id: str) -> Case:
        """The case with this id (evicted ones included)."""
        row = self._conn.execute(f"SELECT {self._CASE_COLS} FROM cases WHERE id=?", (case_id,)).fetchone()
        if row is None:
            raise CaseBankError(f"no case {case_id!r} in {self.dir}")
        return self._row_to_case(row)

    def namespaces(self) -> list[str]:
        """Every namespace holding live cases in this directory."""
        rows = self._conn.execute("SELECT DISTINCT namespace FROM cases WHERE evicted_at IS NULL ORDER BY 1")
        return [r[0] for r in rows.fetchall()]

    def count(self, namespace: str | None = None) -> int:
        """Live (non-evicted) cases in a namespace (default: this bank's)."""
        row = self._conn.execute(
            "SELECT COUNT(*) FROM cases WHERE namespace=? AND evicted_at IS NULL", (namespace or self.namespace,)
        ).fetchone()
        return int(row[0])

    def cases(self, namespace: str | None = None, *, include_evicted: bool = False) -> list[Case]:
        """All cases of a namespace in insertion order."""
        sql = f"SELECT {self._CASE_COLS} FROM cases WHERE namespace=?"
        if not include_evicted:
            sql += " AND evicted_at IS NULL"
        rows = self._conn.execute(sql + " ORDER BY rid", (namespace or self.namespace,)).fetchall()
        return [self._row_to_case(r) for r in rows]

    def case_ids_for_ref(self, trajectory_ref: str) -> list[str]:
        """Ids of the cases (any namespace) written by the run ``trajectory_ref`` (a task never retrieves them)."""
        rows = self._conn.execute("SELECT id FROM cases WHERE trajectory_ref=?", (trajectory_ref,)).fetchall()
        return [r[0] for r in rows]

    def embeddings(self, case_ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of cases (rows in the order of ``case_ids``)."""
        if not case_ids:
            return np.zeros((0, self.dim), dtype=np.float32)
        marks = ",".join("?" * len(case_ids))
        rows = dict(self._conn.execute(f"SELECT id, emb FROM cases WHERE id IN ({marks})", list(case_ids)).fetchall())
        missing = [c for c in case_ids if c not in rows]
        if missing:
            raise CaseBankError(f"no case {missing[0]!r} in {self.dir}")
        return np.stack([np.frombuffer(rows[c], dtype=np.float32) for c in case_ids])

    def _cases_by_rid(self, rids: Sequence[int]) -> dict[int, Case]:
        if not rids:
            return {}
        marks = ",".join("?" * len(rids))
        rows = self._conn.execute(
            f"SELECT rid, {self._CASE_COLS} FROM cases WHERE rid IN ({marks})", [int(r) for r in rids]
        ).fetchall()
        return {int(r[0]): self._row_to_case(r[1:]) for r in rows}

    # -- indexes -------------------------------------------------------------------------------------------------

    def _index_paths(self, namespace: str) -> tuple[Path, Path]:
        base = self.dir / "index" / _ns_file(namespace)
        return base.with_suffix(".faiss"), base.with_suffix(".json")

    def _new_index(self, hnsw: bool) -> _NamespaceIndex:
        return _NamespaceIndex(
            self.dim, hnsw=hnsw, hnsw_m=self.hnsw_m, ef_search=self.ef_search, ef_construction=self.ef_construction
        )

    def _index(self, namespace: str) -> _NamespaceIndex:
        """The in-memory index of a namespace, loaded from disk or rebuilt, caught up with the database."""
        with self._lock:
            index = self._indexes.get(namespace)
            if index is None:
                index = self._load_index(namespace)
                self._indexes[namespace] = index
            if index.generation != self._generation(namespace):
                self._catch_up(namespace, index)
            return self._indexes[namespace]

    def _load_index(self, namespace: str) -> _NamespaceIndex:
        import faiss

        fpath, jpath = self._index_paths(namespace)
        if fpath.exists() and jpath.exists():
            try:
                info = json.loads(jpath.read_text())
                index = self._new_index(bool(info["hnsw"]))
                loaded = faiss.read_index(str(fpath))
                if loaded.d != self.dim:
                    raise ValueError(f"index dim {loaded.d} != {self.dim}")
                if not isinstance(loaded, faiss.IndexIDMap2):
                    raise ValueError(f"unexpected index type {type(loaded).__name__}")
                index.index = loaded  # keep this owning proxy: a downcast copy would not keep the index alive
                if index.hnsw:
                    faiss.downcast_index(index.index.index).hnsw.efSearch = self.ef_search
                index.tombstones = {int(t) for t in info.get("tombstones", [])}
                index.generation = int(info["generation"])
                index.saved_generation = index.generation
                return index
            except Exception as exc:  # noqa: BLE001 - a bad index file is a cache miss, not an error
                logger.warning("case bank index %s unreadable (%s); rebuilding from stored embeddings", fpath, exc)
        index = self._new_index(False)
        index.generation = -1
        return index

    def _live_rids(self, namespace: str) -> np.ndarray:
        rows = self._conn.execute(
            "SELECT rid FROM cases WHERE namespace=? AND evicted_at IS NULL ORDER BY rid", (namespace,)
        ).fetchall()
        return np.asarray([r[0] for r in rows], dtype=np.int64)

    def _stored_embeddings(self, rids: np.ndarray) -> np.ndarray:
        out = np.zeros((len(rids), self.dim), dtype=np.float32)
        pos = {int(r): i for i, r in enumerate(rids)}
        chunk = 900
        for start in range(0, len(rids), chunk):
            part = [int(r) for r in rids[start : start + chunk]]
            marks = ",".join("?" * len(part))
            for rid, blob in self._conn.execute(f"SELECT rid, emb FROM cases WHERE rid IN ({marks})", part):
                out[pos[int(rid)]] = np.frombuffer(blob, dtype=np.float32)
        return out

    def _catch_up(self, namespace: str, index: _NamespaceIndex) -> None:
        """Make ``index`` hold exactly the namespace's live cases (add missing, drop evicted) from stored vectors."""
        gen = self._generation(namespace)
        live = self._live_rids(namespace)
        have = set(index.ids().tolist()) - index.tombstones
        want = set(live.tolist())
        extra = have - want
        missing = np.asarray(sorted(want - have), dtype=np.int64)
        if index.hnsw and len(index.tombstones) + len(extra) > 0.1 * max(1, len(want)):
            self._rebuild(namespace, live)
            return
        index.remove(extra)
        if len(missing):
            index.add(missing, self._stored_embeddings(missing))
        index.generation = gen
        self._maybe_upgrade(namespace)
        if extra or len(missing):
            logger.info("case bank %s/%s index caught up: +%d -%d", self.dir, namespace, len(missing), len(extra))

    def _rebuild(self, namespace: str, live: np.ndarray | None = None) -> None:
        live = self._live_rids(namespace) if live is None else live
        index = self._new_index(len(live) >= self.hnsw_threshold)
        index.add(live, self._stored_embeddings(live))
        index.generation = self._generation(namespace)
        self._indexes[namespace] = index
        logger.info("case bank %s/%s index rebuilt (%d cases, hnsw=%s)", self.dir, namespace, len(live), index.hnsw)

    def _maybe_upgrade(self, namespace: str) -> None:
        index = self._indexes.get(namespace)
        if index is not None and not index.hnsw and index.live >= self.hnsw_threshold:
            ids, vecs = index.all_vectors()
            new = self._new_index(True)
            new.add(ids, vecs)
            new.generation = index.generation
            self._indexes[namespace] = new
            logger.info("case bank %s/%s switched to HNSW at %d cases", self.dir, namespace, len(ids))

    def save(self) -> None:
        """Write every loaded namespace index atomically (the database is always durable; this saves rebuilds)."""
        import faiss

        with self._lock:
            for namespace, index in list(self._indexes.items()):
                fpath, jpath = self._index_paths(namespace)
                if index.saved_generation == index.generation and fpath.exists() and jpath.exists():
                    continue  # unchanged since it was loaded or saved
                data = faiss.serialize_index(index.index).tobytes()
                atomic_write_bytes(fpath, data)
                info = {
                    "namespace": namespace,
                    "generation": index.generation,
                    "hnsw": index.hnsw,
                    "tombstones": sorted(index.tombstones),
                    "count": index.live,
                }
                atomic_write_bytes(jpath, json.dumps(info).encode())
                index.saved_generation = index.generation

    def close(self) -> None:
        """Save the indexes (unless frozen) and close the database."""
        with self._lock:
            if self._conn is None:
                return
            if not self.frozen:
                self.save()
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    # -- the gate ------------------------------------------------------------------------------------------------

    @property
    def gate(self) -> QGateLearner:
        """The Q-gate learner (created on first use; torch is imported then). Its module is ``bank.gate.gate``."""
        with self._lock:
            if self._learner is None:
                from memento.memory.q_gate import QGateLearner

                opts = {"seed": self.seed, **self._gate_options}
                # the default gate is built by the learner after seeding torch: identical weights in every process
                learner = QGateLearner(self._custom_gate, dim=self.dim, **opts)
                path = self.dir / GATE_FILE
                if path.exists():
                    self._load_gate(learner, path)
                self._refill_replay(learner)
                self._learner = learner
            return self._learner

    def _load_gate(self, learner: QGateLearner, path: Path) -> None:
        stamp = _stamp(path)
        try:
            learner.load(path)
        except (RuntimeError, ValueError, KeyError) as exc:
            raise CaseBankError(f"saved Q-gate {path} does not fit this gate: {exc}".splitlines()[0]) from exc
        self._gate_stamp = stamp

    def _reload_gate_if_changed(self) -> None:
        """Reload the saved gate when another writer saved it after this bank last loaded or saved it."""
        path = self.dir / GATE_FILE
        if self._learner is not None and path.exists() and _stamp(path) != self._gate_stamp:
            logger.info("case bank %s: Q-gate saved by another writer; reloading it before updating", self.dir)
            self._load_gate(self._learner, path)

    def _save_gate(self) -> None:
        path = self.dir / GATE_FILE
        self.gate.save(path, include_replay=False)
        self._gate_stamp = _stamp(path)

    @contextlib.contextmanager
    def _writer(self):
        """The directory lock (one writing process at a time; re-entrant within this process)."""
        from memento.memory.dir_lock import DirectoryLock

        with DirectoryLock(self.dir):
            yield

    def _refill_replay(self, learner: QGateLearner) -> None:
        cap = learner.replay.capacity
        if cap <= 0 or len(learner.replay):
            return
        rows = self._conn.execute(
            "SELECT q_emb, c_emb, reward FROM gate_pairs ORDER BY pid DESC LIMIT ?", (cap,)
        ).fetchall()
        if rows:
            q = np.stack([np.frombuffer(r[0], dtype=np.float32) for r in rows])
            c = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
            learner.replay.add(q, c, np.asarray([r[2] for r in rows], dtype=np.float32))

    @property
    def gate_trained(self) -> bool:
        """Whether the gate has learned from any pair (online or offline)."""
        return (self.dir / GATE_FILE).exists() or (self._learner is not None and self._learner.pairs_trained > 0)

    def pairs_logged(self) -> int:
        """Logged (query, case, reward) pairs, every namespace (the gate is shared by the directory)."""
        return int(self._conn.execute("SELECT COUNT(*) FROM gate_pairs").fetchone()[0])

    @property
    def gate_ready(self) -> bool:
        """Whether the gate ranks: it has learned and at least ``min_pairs`` pairs are logged (else cosine)."""
        return self.gate_trained and self.pairs_logged() >= self.min_pairs

    def q_scores(self, query: str | np.ndarray, case_ids: Sequence[str]) -> np.ndarray:
        """``Q(query, case)`` for stored cases (query text or an embedding row)."""
        qv = self._query_vec(query)
        return self.gate.score(qv, self.embeddings(case_ids))

    def _query_vec(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, np.ndarray):
            return query.astype(np.float32).reshape(-1)
        return self.embedder.embed([query])[0]

    # -- retrieval -----------------------------------------------------------------------------------------------

    def retrieve(
        self,
        query: str | np.ndarray,
        k: int = 4,
        *,
        policy: RetrievalPolicy = "cosine",
        alpha: float = 1.0,
        prefilter: int | None = None,
        rng: np.random.Generator | None = None,
        seed: int | None = None,
        exclude_ids: Iterable[str] = (),
    ) -> list[tuple[Case, float]]:
        """The ``k`` cases to show a planner for ``query``, with their scores (cosine, or Q for ``q``/``softmax``).

        Args:
            query: Task text (embedded with the bank's embedder) or a precomputed embedding row.
            k: Number of cases.
            policy: ``cosine`` (FAISS top-k), ``q`` (prefilter, then top-k by the gate), ``softmax`` (prefilter,
                then k draws without replacement from ``softmax(logit(Q) / alpha)``). Until ``min_pairs`` pairs
                are logged (:attr:`gate_ready`), a barely trained network would only add noise: ``Q`` is then the
                cosine similarity, and ``softmax`` samples from ``softmax(cosine / alpha)``.
            alpha: Softmax temperature over the gate's logits (> 0; -> 0 is greedy, large is uniform).
            prefilter: FAISS candidates re-scored by the gate (default: the bank's ``prefilter``, at least ``k``).
            rng / seed: Randomness of ``softmax`` (default: the bank's own seeded generator).
            exclude_ids: Case ids never returned (e.g. the task's own case).
        """
        if policy not in ("cosine", "q", "softmax"):
            raise CaseBankError(f"unknown retrieval policy {policy!r}: use cosine, q or softmax")
        if alpha <= 0:
            raise CaseBankError(f"softmax alpha must be > 0, got {alpha}")
        if k <= 0:
            return []
        qv = self._query_vec(query)
        excluded = set(exclude_ids)
        n_cand = k if policy == "cosine" else max(k, int(prefilter or self.prefilter))
        with self._lock:
            hits: list[tuple[int, float, str]] = []
            for ns in filter(None, (self.namespace, self.base_namespace)):
                index = self._index(ns)
                hits.extend((rid, s, ns) for rid, s in index.search(qv, n_cand + len(excluded)))
            hits.sort(key=lambda h: -h[1])
            by_rid = self._cases_by_rid([h[0] for h in hits])
            cands = [(by_rid[rid], s, rid, ns) for rid, s, ns in hits if rid in by_rid]
            cands = [c for c in cands if c[0].id not in excluded][:n_cand]
            if policy == "cosine" or not cands:
                return [(c, float(s)) for c, s, _, _ in cands[:k]]
            ready = self.gate_ready
            if not ready:  # a gate that has seen fewer than min_pairs pairs is noise: Q is cosine until then
                q = np.asarray([s for _, s, _, _ in cands], dtype=np.float32)
            else:
                vecs = np.zeros((len(cands), self.dim), dtype=np.float32)
                for ns in {c[3] for c in cands}:
                    rows = [i for i, c in enumerate(cands) if c[3] == ns]
                    vecs[rows] = self._indexes[ns].vectors([cands[i][2] for i in rows])
                q = self.gate.score(qv, vecs)
        if policy == "q":
            order = np.argsort(-q, kind="stable")[:k]
        else:
            gen = rng if rng is not None else (np.random.default_rng(seed) if seed is not None else self._rng)
            order = sample_softmax(q_logits(q) if ready else q, k, alpha=alpha, rng=gen)
        return [(cands[i][0], float(q[i])) for i in order]

    # -- learning ------------------------------------------------------------------------------------------------

    def record(
        self,
        query: str,
        cases: Sequence[Case | str],
        rewards: float | Sequence[float],
        *,
        task_id: str | None = None,
        learn: bool = True,
    ) -> float | None:
        """Log (query, case, reward) pairs and, with ``learn``, update the Q-gate online; returns the update's loss.

        Each pair is logged with the gate's score *before* the update (an honest, prequential prediction that
        ``qgate-stats`` evaluates) and the cosine similarity (the non-parametric baseline). A single reward is
        applied to every case (the task's reward credits every case the planner saw).
        """
        self._check_writable()
        ids = [c.id if isinstance(c, Case) else str(c) for c in cases]
        if not ids:
            return None
        rs = np.full(len(ids), float(rewards)) if np.isscalar(rewards) else np.asarray(rewards, dtype=np.float64)
        if len(rs) != len(ids) or np.any((rs < 0) | (rs > 1)) or np.any(np.isnan(rs)):
            raise CaseBankError("record needs one reward in [0, 1] per case (or a single reward for all)")
        qv = self.embedder.embed([query])[0]
        cv = self.embeddings(ids)
        with self._lock, self._writer():
            self._reload_gate_if_changed()  # another process's update is learned on, never overwritten
            before = self.gate.score(qv, cv) if self.gate_trained else np.full(len(ids), np.nan)
            cos = cv @ qv
            now = utcnow().isoformat()
            with self._tx() as conn:
                conn.executemany(
                    "INSERT INTO gate_pairs (namespace, task_id, query, case_id, reward, q_score, cosine, created_at,"
                    " q_emb, c_emb) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            self.namespace,
                            task_id,
                            query,
                            cid,
                            float(r),
                            None if np.isnan(b) else float(b),
                            float(s),
                            now,
                            qv.tobytes(),
                            vec.tobytes(),
                        )
                        for cid, r, b, s, vec in zip(ids, rs, before, cos, cv, strict=True)
                    ],
                )
            if not learn:
                return None
            loss = self.gate.update(qv, cv, rs.astype(np.float32))
            self._save_gate()
            return loss

    def logged_pairs(self, namespace: str | None = None) -> dict[str, np.ndarray]:
        """All logged pairs in logging order: ``q``, ``c`` embeddings, ``reward``, ``q_score`` (nan = untrained
        gate), ``cosine``. ``namespace=None`` returns every namespace's pairs."""
        sql = "SELECT q_emb, c_emb, reward, q_score, cosine FROM gate_pairs"
        args: tuple = ()
        if namespace is not None:
            sql, args = sql + " WHERE namespace=?", (namespace,)
        rows = self._conn.execute(sql + " ORDER BY pid", args).fetchall()
        if not rows:
            z = np.zeros((0, self.dim), dtype=np.float32)
            e = np.zeros((0,), dtype=np.float64)
            return {"q": z, "c": z.copy(), "reward": e, "q_score": e.copy(), "cosine": e.copy()}
        return {
            "q": np.stack([np.frombuffer(r[0], dtype=np.float32) for r in rows]),
            "c": np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]),
            "reward": np.asarray([r[2] for r in rows], dtype=np.float64),
            "q_score": np.asarray([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64),
            "cosine": np.asarray([r[4] for r in rows], dtype=np.float64),
        }

    def fit_gate(self, *, epochs: int = 20, namespace: str | None = None) -> dict:
        """Offline training of the gate on every logged pair; saves the gate."""
        self._check_writable()
        pairs = self.logged_pairs(namespace)
        if not len(pairs["reward"]):
            raise CaseBankError(f"no logged (query, case, reward) pairs in {self.dir} to fit the Q-gate on")
        with self._lock, self._writer():
            self._reload_gate_if_changed()
            report = self.gate.fit(pairs["q"], pairs["c"], pairs["reward"], epochs=epochs, add_to_replay=False)
            self._save_gate()
        return report

    # -- eviction ------------------------------------------------------------------------------------------------

    def usefulness(self, namespace: str | None = None, *, reference_queries: int = 16) -> dict[str, float]:
        """Per live case, its mean Q against the most recent distinct logged queries (the eviction score).

        Before the gate has learned anything, the score is the case's own reward.
        """
        ns = namespace or self.namespace
        rows = self._conn.execute(
            "SELECT id, reward, emb FROM cases WHERE namespace=? AND evicted_at IS NULL ORDER BY rid", (ns,)
        ).fetchall()
        if not rows:
            return {}
        if not self.gate_trained:
            return {r[0]: float(r[1]) for r in rows}
        qrows = self._conn.execute(
            "SELECT q_emb FROM gate_pairs GROUP BY query ORDER BY MAX(pid) DESC LIMIT ?", (reference_queries,)
        ).fetchall()
        cv = np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
        queries = [np.frombuffer(q[0], dtype=np.float32) for q in qrows] or [cv.mean(axis=0)]
        score = np.zeros(len(rows))
        for qv in queries:
            score += self.gate.score(qv, cv)
        score /= len(queries)
        return {r[0]: float(s) for r, s in zip(rows, score, strict=True)}

    def _evict_if_needed(self) -> list[str]:
        live = self.count()
        if self.capacity is None or live <= self.capacity:
            return []
        target = max(1, int(self.capacity * (1.0 - self.eviction_slack)))
        return self.evict(live - target)

    def evict(self, n: int) -> list[str]:
        """Evict the ``n`` least useful live cases of this namespace (lowest usefulness, then oldest)."""
        self._check_writable()
        if n <= 0:
            return []
        with self._lock, self._writer():
            scores = self.usefulness()
            order = list(scores)  # insertion order: ties broken oldest-first by the stable sort
            victims = sorted(order, key=lambda cid: scores[cid])[:n]
            now = utcnow().isoformat()
            with self._tx() as conn:
                conn.executemany("UPDATE cases SET evicted_at=? WHERE id=?", [(now, v) for v in victims])
                gen = self._bump_generation(self.namespace)
            index = self._indexes.get(self.namespace)
            if index is not None and index.generation == gen - 1:
                marks = ",".join("?" * len(victims))
                rids = [r[0] for r in self._conn.execute(f"SELECT rid FROM cases WHERE id IN ({marks})", victims)]
                index.remove(rids)
                index.generation = gen
                if index.hnsw and len(index.tombstones) > 0.1 * max(1, index.live):
                    self._rebuild(self.namespace)
            logger.info("case bank %s/%s evicted %d cases", self.dir, self.namespace, len(victims))
            return victims
