"""The case bank of Memento CBR: past (task, plan, reward) cases, successes and failures alike, with learned retrieval.

:class:`CaseBank` is the facade; its parts live one per module:

* :mod:`~memento.memory.case_store` — the database (``cases.db``, or the ``cbr`` part of a PostgreSQL memory), the
  source of truth: every case with its embedding (computed once at insert), the logged (query, case, reward) pairs
  the Q-gate learned from, and a per-namespace write generation.
* :mod:`~memento.memory.case_index` — one FAISS inner-product index per namespace
  (:mod:`~memento.memory.namespace_index`), a per-process mirror of the table: exact while small, approximate past
  ``hnsw_threshold`` cases, caught up with the rows other processes added since its generation, rebuilt when
  missing (a directory bank saves it as ``index/<namespace>.faiss``). Nothing is ever re-embedded.
* :mod:`~memento.memory.retrieval_policy` — ``cosine`` (FAISS top-k), ``q`` (FAISS prefilter to ``prefilter``
  candidates, then rank by the gate's ``Q = p(useful | query, case)``), ``softmax`` (k draws without replacement
  from ``softmax(logit(Q) / alpha)``), ``kernel`` (Eq. 9: :mod:`~memento.memory.case_kernel`). The gate ranks only
  once ``min_pairs`` pairs are logged; before that ``Q`` is the cosine similarity.
* :mod:`~memento.memory.case_gate` — the Q-gate: ``qgate.pt`` (or the ``gate_state`` table of a PostgreSQL bank),
  reloaded when another writer saved it, learning online (:meth:`CaseBank.record`) and offline.
* :mod:`~memento.memory.case_eviction` — beyond the paper (flags): ``capacity`` + ``eviction=True`` keeps at most
  ``capacity`` live cases in the namespace, evicting the least useful first.

A bank opened with ``base_namespace`` searches that shared namespace alongside its own and merges by score.

Concurrent writers (several processes, on one machine or, with PostgreSQL, many): adding cases is a short
transaction (one at a time per bank, in commit order), so processes append at once and none is lost; each one's
index catches up with the others' rows when it next reads. A Q-gate update and an eviction take the bank's writer
lock (:meth:`memento.memory.database.Database.writer_lock`: the directory's OS lock or a PostgreSQL advisory lock),
under which a gate saved by another writer is reloaded before this one updates and saves it, so no update is lost
to a last-writer-wins save.

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
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memento.core.dating import DateFilter
from memento.core.errors import ConfigError, DataError, MemoryFrozenError
from memento.core.types import Case, EvidenceRecord, new_id
from memento.memory.case_eviction import EvictionPolicy
from memento.memory.case_gate import GATE_FILE, CaseGate
from memento.memory.case_index import CaseIndex
from memento.memory.case_kernel import CaseKernel
from memento.memory.case_rows import read_embedder_info, recorded_embedder
from memento.memory.case_store import DB_NAME, CaseBankError, CaseStore, bank_exists
from memento.memory.embedder import Embedder, default_embedder
from memento.memory.location import LocationLike, PostgresLocation, parse_location
from memento.memory.namespace_index import NamespaceIndex
from memento.memory.retrieval_policy import RetrievalPolicy, SoftmaxOver, check_policy, pick, q_logits, sample_softmax
from memento.memory.stored_embedder import StoredEmbedder
from memento.utils.extras import require

if TYPE_CHECKING:  # torch stays unimported until a gate is needed
    from memento.memory.q_gate import QGateLearner

__all__ = [
    "CaseBank",
    "CaseBankError",
    "open_case_bank",
    "RetrievalPolicy",
    "StoredEmbedder",
    "sample_softmax",
    "q_logits",
    "DB_NAME",
    "GATE_FILE",
]

logger = logging.getLogger(__name__)


class CaseBank:
    """Persistent, namespaced store of (task, plan, reward) cases with cosine / learned-Q / softmax retrieval.

    Thread-safe (one lock per bank); ``copy.copy`` and ``copy.deepcopy`` return the same bank, so DSPy optimizers
    that deep-copy programs never fork the memory. One writer process per directory.

    Args:
        dir: Bank location: a directory (created if missing, unless ``frozen``) or a PostgreSQL location.
        embedder: Text embedder (default :func:`~memento.memory.embedder.default_embedder`). The bank records the
            embedder's ``name``/``dim`` and refuses another one (stored vectors would be meaningless).
        namespace: Namespace this bank writes to and reads from (e.g. one per client).
        base_namespace: A shared namespace searched alongside ``namespace`` (read-only from this bank).
        capacity: Maximum live cases in ``namespace`` (used with ``eviction=True``).
        eviction: Evict least-useful cases (by Q-score) when ``capacity`` is exceeded.
        gate: A custom torch ``nn.Module`` gate (``forward(q, c) -> probs``); default :class:`QGate`.
        gate_options: Keyword options of :class:`~memento.memory.q_gate.QGateLearner` (lr, steps_per_update, ...).
        prefilter: Default number of FAISS candidates re-scored by the gate for ``q``/``softmax``/``kernel``; 0 scores
            the whole bank (every live case of the namespaces searched).
        min_pairs: Logged (query, case, reward) pairs before the gate replaces cosine in ranking (``[cbr]
            min_pairs``; 0: from the first update).
        hnsw_threshold / hnsw_m / ef_search / ef_construction / recall_target: the vector index's
            (:class:`~memento.memory.case_index.CaseIndex`): HNSW past ``hnsw_threshold`` live cases when the graph
            reaches ``recall_target`` (recall@4 against exact search, calibrated; see docs/benchmarks.md).
        eviction_slack: Fraction below ``capacity`` an eviction goes down to (amortises the Q-scoring of the bank).
        frozen: Read-only: the existing ``cases.db`` is opened read-only
            (:func:`~memento.memory.sqlite_connect.connect_sqlite`; a missing bank is a :class:`CaseBankError`,
            never created); writes raise :class:`~memento.core.errors.MemoryFrozenError` (retrieval still works).
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
        dir: LocationLike,
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
        hnsw_threshold: int = 50_000,
        hnsw_m: int = 32,
        ef_search: int = 128,
        ef_construction: int = 64,
        recall_target: float = 0.95,
        eviction_slack: float = 0.1,
        frozen: bool = False,
        seed: int = 0,
    ) -> None:
        require("cbr", "the case bank (method cbr)")
        if capacity is not None and capacity < 1:
            raise ConfigError(f"case bank capacity must be >= 1, got {capacity}")
        if eviction and capacity is None:
            raise ConfigError("case bank eviction=True needs a capacity")
        if min_pairs < 0:
            raise ConfigError(f"case bank min_pairs must be >= 0, got {min_pairs}")
        if base_namespace == namespace:
            base_namespace = None
        self.location = parse_location(dir)
        #: the bank's directory, or its PostgreSQL location
        self.dir: Path | PostgresLocation = (
            self.location if isinstance(self.location, PostgresLocation) else self.location.path
        )
        if frozen and not bank_exists(self.location):
            raise CaseBankError(f"no case bank at {self.dir} (missing {DB_NAME}); a frozen bank is never created")
        self.embedder = embedder if embedder is not None else default_embedder()
        self.namespace = namespace
        self.base_namespace = base_namespace
        self.capacity = capacity
        self.eviction = eviction
        if prefilter < 0:
            raise ConfigError(f"case bank prefilter must be >= 0 (0: the whole bank), got {prefilter}")
        self.prefilter = int(prefilter)
        self.min_pairs = int(min_pairs)
        self.eviction_slack = float(eviction_slack)
        self._eviction = EvictionPolicy(capacity, self.eviction_slack)
        self.frozen = frozen
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._gate = CaseGate(self, gate=gate, options=gate_options)
        self._kernel = CaseKernel(self)
        self._lock = threading.RLock()
        name = str(getattr(self.embedder, "name", type(self.embedder).__name__))
        self._store = CaseStore(self.location, embedder_name=name, dim=self.dim, lock=self._lock, frozen=frozen)
        self._indexes = CaseIndex(
            self.dir if isinstance(self.dir, Path) else None,
            self._store,
            lock=self._lock,
            hnsw_threshold=hnsw_threshold,
            hnsw_m=hnsw_m,
            ef_search=ef_search,
            ef_construction=ef_construction,
            recall_target=recall_target,
        )

    # -- basics --------------------------------------------------------------------------------------------------

    def __deepcopy__(self, memo: dict[int, Any]) -> CaseBank:
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

    @property
    def hnsw_threshold(self) -> int:
        """Live-case count from which a namespace index switches from exact to HNSW."""
        return self._indexes.hnsw_threshold

    @property
    def hnsw_m(self) -> int:
        return self._indexes.hnsw_m

    @property
    def ef_search(self) -> int:
        return self._indexes.ef_search

    @property
    def ef_construction(self) -> int:
        return self._indexes.ef_construction

    def index_info(self, namespace: str | None = None) -> dict[str, Any]:
        """The namespace's vector index: ``kind`` (``exact`` or ``hnsw``), ``live`` cases, ``ef_search`` and its
        ``recall@4`` against exact search (calibrated when the index was built; 1.0 for exact search)."""
        with self._lock:
            index = self._indexes.get(namespace or self.namespace)
            return {
                "kind": "hnsw" if index.hnsw else "exact",
                "live": index.live,
                "ef_search": index.ef_search if index.hnsw else None,
                "recall@4": index.recall,
            }

    def _check_writable(self) -> None:
        if self.frozen:
            raise MemoryFrozenError(f"case bank {self.dir} is frozen (read-only)")

    def _index(self, namespace: str) -> NamespaceIndex:
        """The namespace's FAISS index, caught up with the database."""
        return self._indexes.get(namespace)

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
        evidence: EvidenceRecord | None = None,
    ) -> Case:
        """Store one case (its text embedded once) and return it; a failure (low reward) is stored just the same.

        ``evidence``: the pages the run read and the run (its task id and cutoff); the case is dated by it
        (:class:`~memento.core.types.EvidenceRecord`), and a case without evidence is undated.
        """
        case = {
            "id": case_id or new_id("case-"),
            "task_text": task_text,
            "plan": plan,
            "reward": float(reward),
            "trajectory_ref": trajectory_ref,
            "evidence": evidence or EvidenceRecord(),
        }
        return self.add_many([case], metas=[meta or {}])[0]

    def add_many(
        self, cases: Sequence[Case | dict[str, Any]], *, metas: Sequence[dict[str, Any]] | None = None
    ) -> list[Case]:
        """Store many cases in one transaction (one batched embedding call); returns them with this namespace."""
        self._check_writable()
        recs: list[Case] = []
        for item in cases:
            data = dict(item) if not isinstance(item, Case) else {**item.model_dump(), "evidence": item.evidence}
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
        # an insert is one short transaction (processes append at once); the index catches up with other writers'
        # commits first, so this insert applies to it directly unless another one committed in between (then the
        # next read catches up with both)
        with self._lock:
            index = self._indexes.get(self.namespace)
            rids, gen = self._store.insert(recs, embs, metas)
            self._indexes.added(self.namespace, index, rids, embs, gen)
        if self.eviction and self.capacity is not None:
            with self._lock, self._writer():  # evictions are serial: two writers never evict for the same excess
                self._evict_if_needed()
        return recs

    def update_reward(self, case_id: str, reward: float) -> Case:
        """Change a stored case's reward (e.g. a delayed judgement)."""
        self._check_writable()
        if not 0.0 <= reward <= 1.0:
            raise CaseBankError(f"reward must be in [0, 1], got {reward}")
        self._store.set_reward(case_id, reward)
        return self.get(case_id)

    # -- reads ---------------------------------------------------------------------------------------------------

    def get(self, case_id: str) -> Case:
        """The case with this id (evicted ones included)."""
        return self._store.get(case_id)

    def namespaces(self) -> list[str]:
        """Every namespace holding live cases in this directory."""
        return self._store.namespaces()

    def pin_info(self) -> dict[str, Any]:
        """What a frozen bank is pinned to, for results files: ``{"case_bank": {"high_water": last case row}}``."""
        return {"case_bank": {"high_water": self._store.high_water}}

    def count(self, namespace: str | None = None) -> int:
        """Live (non-evicted) cases in a namespace (default: this bank's): the size of its index once this process
        has one (caught up with the database: one small read, where a count scans the namespace), else counted."""
        ns = namespace or self.namespace
        with self._lock:
            if ns in self._indexes.loaded:
                return self._indexes.get(ns).live
        return self._store.count(ns)

    def cases(self, namespace: str | None = None, *, include_evicted: bool = False) -> list[Case]:
        """All cases of a namespace in insertion order."""
        return self._store.cases(namespace or self.namespace, include_evicted=include_evicted)

    def case_ids_for_ref(self, trajectory_ref: str) -> list[str]:
        """Ids of the cases (any namespace) written by the run ``trajectory_ref`` (a task never retrieves them)."""
        return self._store.case_ids_for_ref(trajectory_ref)

    def embeddings(self, case_ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of cases (rows in the order of ``case_ids``)."""
        return self._store.embeddings(case_ids)

    # -- persistence ---------------------------------------------------------------------------------------------

    def save(self) -> None:
        """Write every loaded namespace index atomically (the database is always durable; this saves rebuilds)."""
        self._indexes.save()

    def close(self) -> None:
        """Save the indexes (unless frozen) and close the database."""
        with self._lock:
            if self._store.conn is None:
                return
            if not self.frozen:
                self.save()
            self._store.close()

    @contextlib.contextmanager
    def _writer(self) -> Iterator[None]:
        """The bank's writer lock (one writing process at a time; re-entrant within this process)."""
        with self._store.db.writer_lock():
            yield

    # -- the gate (:class:`~memento.memory.case_gate.CaseGate`) and the episodic kernel -------------------------
    @property
    def gate(self) -> QGateLearner:
        """The Q-gate learner (created on first use; torch is imported then). Its module is ``bank.gate.gate``."""
        return self._gate.learner

    @property
    def gate_trained(self) -> bool:
        """Whether the gate has learned from any pair (online or offline)."""
        return self._gate.trained

    @property
    def gate_ready(self) -> bool:
        """Whether the gate ranks: it has learned and at least ``min_pairs`` pairs are logged (else cosine)."""
        return self._gate.ready

    def record(
        self,
        query: str,
        cases: Sequence[Case | str],
        rewards: float | Sequence[float],
        *,
        task_id: str | None = None,
        learn: bool = True,
    ) -> float | None:
        """Log (query, case, reward) pairs and, with ``learn``, update the Q-gate online; returns the update's loss
        (:meth:`CaseGate.record <memento.memory.case_gate.CaseGate.record>`)."""
        return self._gate.record(query, cases, rewards, task_id=task_id, learn=learn)

    def fit_gate(self, *, epochs: int = 20, namespace: str | None = None) -> dict[str, Any]:
        """Offline training of the gate on every logged pair; saves the gate."""
        return self._gate.fit(epochs=epochs, namespace=namespace)

    def kernel_q(self, query: str | np.ndarray, case_ids: Sequence[str]) -> np.ndarray:
        """The kernel-based episodic Q of Eq. 9 for stored cases (:class:`~memento.memory.case_kernel.CaseKernel`)."""
        return self._kernel.q(query, case_ids)

    def pairs_logged(self) -> int:
        """Logged (query, case, reward) pairs, every namespace (the gate is shared by the directory)."""
        return self._store.pairs_logged()

    def q_scores(self, query: str | np.ndarray, case_ids: Sequence[str]) -> np.ndarray:
        """``Q(query, case)`` for stored cases (query text or an embedding row)."""
        qv = self._query_vec(query)
        return self.gate.score(qv, self.embeddings(case_ids))

    def _query_vec(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, np.ndarray):
            return query.astype(np.float32).reshape(-1)
        vector: np.ndarray = self.embedder.embed([query])[0]
        return vector

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
        dates: DateFilter | None = None,
        softmax_over: SoftmaxOver = "logit",
    ) -> list[tuple[Case, float]]:
        """The ``k`` cases to show a planner for ``query``, with their scores (cosine, or Q for ``q``/``softmax``).

        Args:
            query: Task text (embedded with the bank's embedder) or a precomputed embedding row.
            k: Number of cases.
            policy: ``cosine`` (FAISS top-k), ``q`` (prefilter, then top-k by the gate), ``softmax`` (prefilter,
                then k draws without replacement from ``softmax(Q / alpha)``, or ``softmax(logit(Q) / alpha)``:
                ``softmax_over``), ``kernel`` (prefilter, then top-k by the kernel-based episodic Q of Eq. 9,
                :mod:`memento.memory.q_kernel`). Until ``min_pairs`` pairs are logged (:attr:`gate_ready`), a
                barely trained network would only add noise: ``Q`` is then the cosine similarity, and ``softmax``
                samples from ``softmax(cosine / alpha)``.
            alpha: Softmax temperature (> 0; -> 0 is greedy, large is uniform).
            prefilter: FAISS candidates re-scored (default: the bank's ``prefilter``, at least ``k``; 0: the whole
                bank, every live case scored).
            rng / seed: Randomness of ``softmax`` (default: the bank's own seeded generator).
            exclude_ids: Case ids never returned (e.g. the task's own case).
            dates: The task's date filter: only cases dated strictly before its cutoff (undated ones per its
                policy) are searched, inside FAISS (an ID selector), so ``k`` come back when the bank holds ``k``;
                the gate's prefilter draws from the same eligible cases.
            softmax_over: ``logit`` (a temperature over the gate's logits) or ``q`` (Memento's Eq. 7).
        """
        check_policy(policy, alpha)
        if k <= 0:
            return []
        qv = self._query_vec(query)
        excluded = set(exclude_ids)
        width = self.prefilter if prefilter is None else int(prefilter)
        if width == 0:  # the whole bank: every live case of the namespaces searched
            width = sum(self.count(ns) for ns in filter(None, (self.namespace, self.base_namespace)))
        n_cand = k if policy == "cosine" else max(k, width)
        spaces = [ns for ns in (self.namespace, self.base_namespace) if ns]
        with self._lock:
            indexes, hits, by_rid, gate_version, pairs = self._indexes.search(
                spaces, qv, n_cand + len(excluded), dates=dates, reads=self._gate.reads(policy)
            )
            cands = [(by_rid[rid], s, rid, ns) for rid, s, ns in hits if rid in by_rid]
            cands = [c for c in cands if c[0].id not in excluded][:n_cand]
            if policy == "cosine" or not cands:
                return [(c, float(s)) for c, s, _, _ in cands[:k]]
            if policy == "kernel":
                q = self.kernel_q(qv, [c[0].id for c in cands])
                order = pick("kernel", q, k, alpha=alpha, logits=False, rng=self._rng)
                return [(cands[i][0], float(q[i])) for i in order]
            q, ready = self._gate.scores(qv, cands, indexes, gate_version, pairs)
        gen = rng if rng is not None else (np.random.default_rng(seed) if seed is not None else self._rng)
        order = pick(policy, q, k, alpha=alpha, logits=ready, rng=gen, softmax_over=softmax_over)
        return [(cands[i][0], float(q[i])) for i in order]

    def hidden_counts(self, dates: DateFilter | None) -> tuple[int, int]:
        """How many live cases of the namespaces this bank reads ``dates`` keeps away from a task: ``(dated on or
        after its cutoff, undated dropped)``."""
        with self._lock:
            return self._store.hidden_counts([ns for ns in (self.namespace, self.base_namespace) if ns], dates)

    def forget(self, case_ids: Iterable[str], *, reason: str) -> list[str]:
        """Tombstone cases (``memento memory forget``): never retrieved again, logged in the bank's change log
        (:meth:`changes`) with the record each had; returns the ids forgotten now (unknown ids are skipped)."""
        self._check_writable()
        ids = list(dict.fromkeys(case_ids))
        if not ids:
            return []
        with self._lock, self._writer():
            return self._indexes.forget(ids, reason=reason)

    def changes(self) -> list[dict[str, Any]]:
        """The bank's change log: one tombstone line per forgotten case (``seq``, ``at``, ``op``, ``case_id``,
        ``reason``), oldest first."""
        return self._store.changes()

    def all_cases(self, *, include_evicted: bool = False) -> list[Case]:
        """The cases of every namespace in this directory, in insertion order per namespace."""
        return self._store.all_cases(include_evicted=include_evicted)

    # -- learning ------------------------------------------------------------------------------------------------

    def logged_pairs(self, namespace: str | None = None) -> dict[str, np.ndarray]:
        """All logged pairs in logging order: ``q``, ``c`` embeddings, ``reward``, ``q_score`` (nan = untrained
        gate), ``cosine``. ``namespace=None`` returns every namespace's pairs."""
        return self._store.logged_pairs(namespace)

    # -- eviction ------------------------------------------------------------------------------------------------

    def usefulness(self, namespace: str | None = None, *, reference_queries: int = 16) -> dict[str, float]:
        """Per live case, its mean Q against the most recent distinct logged queries (the eviction score;
        :meth:`CaseGate.usefulness <memento.memory.case_gate.CaseGate.usefulness>`)."""
        return self._gate.usefulness(namespace or self.namespace, reference_queries=reference_queries)

    def _evict_if_needed(self) -> list[str]:
        excess = self._eviction.excess(self.count())
        return self.evict(excess) if excess else []

    def evict(self, n: int) -> list[str]:
        """Evict the ``n`` least useful live cases of this namespace (lowest usefulness, then oldest)."""
        self._check_writable()
        if n <= 0:
            return []
        with self._lock, self._writer():
            victims = self._eviction.victims(self.usefulness(), n)
            rids, gen = self._store.mark_evicted(self.namespace, victims)
            self._indexes.removed(self.namespace, rids, gen)
            logger.info("case bank %s/%s evicted %d cases", self.dir, self.namespace, len(victims))
            return victims


def open_case_bank(
    directory: LocationLike,
    settings: Any,
    *,
    frozen: bool,
    embedder: Embedder | None = None,
    missing: str,
) -> CaseBank:
    """The case bank at ``directory`` configured by the settings (``[cbr]`` prefilter, min_pairs, capacity (with
    eviction) and gate options; ``[run]`` seed).

    An existing bank opens with the embedder it was built with unless ``embedder`` is given; a new one gets the
    default embedder. ``frozen`` opens read-only, and a missing bank is then a one-line DataError ending with the
    hint ``missing`` (nothing is created).

    Example:
        >>> import tempfile
        >>> from memento.core.config import load_settings
        >>> from memento.memory.embedder import HashingEmbedder
        >>> bank = open_case_bank(tempfile.mkdtemp(), load_settings(), frozen=False, embedder=HashingEmbedder(dim=8),
        ...                       missing="")
        >>> bank.min_pairs, len(bank)
        (32, 0)
    """
    from memento.memory.embedder import embedder_for

    exists = bank_exists(directory)
    if frozen and not exists:
        raise DataError(f"no case bank at {directory}: {missing}")
    if embedder is None:
        # a bank another process is creating right now records no embedder yet: a writer then brings the default
        # one (the bank refuses it if the other recorded a different one first); a frozen reader needs the record
        stored = recorded_embedder(directory) if exists else None
        if stored is None and frozen:
            stored = read_embedder_info(directory)
        embedder = embedder_for(*stored) if stored is not None else default_embedder()
    capacity = getattr(settings.cbr, "capacity", None)
    return CaseBank(
        directory,
        embedder,
        seed=settings.run.seed,
        frozen=frozen,
        prefilter=settings.cbr.prefilter,
        min_pairs=settings.cbr.min_pairs,
        capacity=capacity,
        eviction=capacity is not None,
        gate_options={"lr": settings.cbr.qgate_lr, "hidden": settings.cbr.qgate_hidden},
    )
