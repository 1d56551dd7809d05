"""The case bank's FAISS indexes: one per namespace, a per-process mirror of the database's live cases.

Each namespace has one :class:`~memento.memory.namespace_index.NamespaceIndex` (exact while small, HNSW past
``hnsw_threshold`` live cases) that reflects one write generation of the database. It follows the table
incrementally: this process's own inserts and evictions are applied as they commit, and another process's are read
back as the rows of the generations after the index's (:meth:`~memento.memory.case_store.CaseStore.changes_since`),
so a query never reloads the bank. A directory bank also saves the indexes (``index/<namespace>.faiss`` + ``.json``,
written atomically by :meth:`CaseIndex.save`) so that reopening it is fast; a PostgreSQL bank builds its mirror from
the stored embeddings when first used. A missing or unreadable index is rebuilt. Nothing is ever re-embedded.

Example:
    >>> import tempfile, threading
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from memento.memory.case_store import CaseStore
    >>> from memento.core.types import Case
    >>> lock, d = threading.RLock(), Path(tempfile.mkdtemp())
    >>> store = CaseStore(d, embedder_name="demo", dim=2, lock=lock, frozen=False)
    >>> _ = store.insert([Case(task_text="Who founded Acme?", plan="search", reward=1.0)], np.array([[1.0, 0.0]]), [{}])
    >>> indexes = CaseIndex(d, store, lock=lock)
    >>> [score for _, score in indexes.get("default").search(np.array([1.0, 0.0]), 1)]
    [1.0]
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from pathlib import Path

import numpy as np

from memento.core.dating import DateFilter
from memento.core.types import Case
from memento.memory.case_store import CaseStore
from memento.memory.namespace_index import NamespaceIndex
from memento.utils.files import atomic_write_bytes

__all__ = ["CaseIndex"]

logger = logging.getLogger(__name__)


def _ns_file(namespace: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", namespace)[:40]
    return f"{safe}-{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"


class CaseIndex:
    """Per-namespace FAISS indexes over a :class:`~memento.memory.case_store.CaseStore`'s live cases.

    Args:
        dir: The bank directory (indexes saved in ``dir/index``), or None: nothing saved (a PostgreSQL bank).
        store: The bank's store (source of truth: generations, live rowids, stored embeddings).
        lock: The bank's re-entrant lock.
        hnsw_threshold: Live-case count from which a namespace index switches from exact to HNSW, if the HNSW graph
            reaches ``recall_target`` (its efSearch calibrated on held-out cases; else exact search stays, and is
            tried again once the namespace doubled).
        hnsw_m / ef_search / ef_construction: HNSW graph degree, the efSearch of a saved index without calibration,
            and build breadth.
        recall_target: The recall@4 against exact search an approximate index must reach.

    Example:
        >>> import tempfile, threading
        >>> from pathlib import Path
        >>> from memento.memory.case_store import CaseStore
        >>> lock, d = threading.RLock(), Path(tempfile.mkdtemp())
        >>> store = CaseStore(d, embedder_name="demo", dim=2, lock=lock, frozen=False)
        >>> CaseIndex(d, store, lock=lock).get("default").live
        0
    """

    def __init__(
        self,
        dir: Path | None,
        store: CaseStore,
        *,
        lock: threading.RLock,
        hnsw_threshold: int = 50_000,
        hnsw_m: int = 32,
        ef_search: int = 128,
        ef_construction: int = 64,
        recall_target: float = 0.95,
    ) -> None:
        self.dir = dir
        self.store = store
        self.lock = lock
        self.dim = store.dim
        self.hnsw_threshold = int(hnsw_threshold)
        self.hnsw_m = int(hnsw_m)
        self.ef_search = int(ef_search)
        self.ef_construction = int(ef_construction)
        self.recall_target = float(recall_target)
        self.loaded: dict[str, NamespaceIndex] = {}
        self._refused: dict[str, int] = {}  # namespace -> live cases when HNSW missed the recall target

    def paths(self, namespace: str) -> tuple[Path, Path]:
        """The index file and its JSON sidecar for ``namespace`` (a directory bank)."""
        assert self.dir is not None, "a PostgreSQL bank saves no index files"
        base = self.dir / "index" / _ns_file(namespace)
        return base.with_suffix(".faiss"), base.with_suffix(".json")

    def _new(self, hnsw: bool) -> NamespaceIndex:
        return NamespaceIndex(
            self.dim, hnsw=hnsw, hnsw_m=self.hnsw_m, ef_search=self.ef_search, ef_construction=self.ef_construction
        )

    def get(self, namespace: str) -> NamespaceIndex:
        """The in-memory index of a namespace, loaded from disk or rebuilt, caught up with the database."""
        with self.lock:
            index = self.loaded.get(namespace)
            if index is None:
                index = self._load(namespace)
                self.loaded[namespace] = index
            if index.generation != self.store.generation(namespace):
                self._catch_up(namespace, index)
            return self.loaded[namespace]

    def current(self, namespace: str) -> NamespaceIndex:
        """The namespace's in-memory index as it is, without asking the database for its generation (a retrieval
        checks that afterwards, in the statement that reads the ranked cases); loaded or built on first use."""
        with self.lock:
            index = self.loaded.get(namespace)
            return index if index is not None else self.get(namespace)

    def _load(self, namespace: str) -> NamespaceIndex:
        import faiss

        if self.dir is None:  # a mirror only: built from the database at first use
            index = self._new(False)
            index.generation = -1
            return index
        fpath, jpath = self.paths(namespace)
        if fpath.exists() and jpath.exists():
            try:
                info = json.loads(jpath.read_text())
                index = self._new(bool(info["hnsw"]))
                loaded = faiss.read_index(str(fpath))
                if loaded.d != self.dim:
                    raise ValueError(f"index dim {loaded.d} != {self.dim}")
                if not isinstance(loaded, faiss.IndexIDMap2):
                    raise ValueError(f"unexpected index type {type(loaded).__name__}")
                index.index = loaded  # keep this owning proxy: a downcast copy would not keep the index alive
                if index.hnsw:  # the efSearch and recall calibrated when it was built
                    index.set_ef_search(int(info.get("ef_search", self.ef_search)))
                    index.recall = float(info.get("recall", float("nan")))
                    index.calibrated_at = int(info.get("calibrated_at", info.get("count", 0)))
                held = np.asarray(info.get("held_out", []), dtype=np.int64)
                if index.hnsw and len(held):  # the held-out vectors: read back from the database, not saved twice
                    index.hold_out(held, self.store.stored_embeddings(held))
                index.tombstones = {int(t) for t in info.get("tombstones", [])}
                index.generation = int(info["generation"])
                index.saved_generation = index.generation
                return index
            except Exception as exc:  # noqa: BLE001 - a bad index file is a cache miss, not an error
                logger.warning("case bank index %s unreadable (%s); rebuilding from stored embeddings", fpath, exc)
        index = self._new(False)
        index.generation = -1
        return index

    def _catch_up(self, namespace: str, index: NamespaceIndex) -> None:
        """Bring ``index`` to the database's generation: add the rows inserted and drop the rows evicted since its
        generation (read from the database, nothing else), or rebuild it when it has none or too many tombstones."""
        if index.generation < 0 or index.generation > self.store.generation(namespace):
            self.rebuild(namespace)
            return
        gen, added, embs, removed = self.store.changes_since(namespace, index.generation)
        if index.hnsw and len(index.tombstones) + len(removed) > 0.1 * max(1, index.live + len(added)):
            self.rebuild(namespace)
            return
        index.remove(removed)
        index.add(added, embs)
        index.generation = gen
        self._maybe_upgrade(namespace)
        if removed or len(added):
            logger.info("case bank %s/%s index caught up: +%d -%d", self.dir, namespace, len(added), len(removed))

    def rebuild(self, namespace: str, live: np.ndarray | None = None) -> None:
        """Rebuild a namespace's index from the stored embeddings of its live cases (approximate past the
        threshold when its calibrated recall reaches the target, else exact)."""
        with self.lock:
            gen = self.store.generation(namespace)  # first: the rows read next are at least this generation's
            live = self.store.live_rids(namespace, max_generation=gen) if live is None else live
            vectors = self.store.stored_embeddings(live)
            index = (
                self._approximate(namespace, live, vectors) if self._wants_approximate(namespace, len(live)) else None
            )
            if index is None:
                index = self._new(False)
                index.add(live, vectors)
            index.generation = gen
            self.loaded[namespace] = index
        logger.info("case bank %s/%s index rebuilt (%d cases, hnsw=%s)", self.dir, namespace, len(live), index.hnsw)

    def _wants_approximate(self, namespace: str, live: int) -> bool:
        # an index whose approximate form missed the recall target is tried again only once the namespace doubled
        return live >= max(self.hnsw_threshold, 2 * self._refused.get(namespace, 0))

    def _approximate(self, namespace: str, ids: np.ndarray, vectors: np.ndarray) -> NamespaceIndex | None:
        """An HNSW index over ``vectors`` calibrated to the recall target, or None (with the reason logged) when no
        efSearch reaches it: exact search stays."""
        index = self._new(True)
        index.add(ids, vectors)
        recall = index.calibrate(target=self.recall_target, k=4)
        if recall >= self.recall_target:
            logger.info(
                "case bank %s/%s: HNSW at %d cases, efSearch %d, recall@4 %.3f",
                self.dir, namespace, len(ids), index.ef_search, recall,
            )  # fmt: skip
            return index
        self._refused[namespace] = len(ids)
        logger.warning(
            "case bank %s/%s: HNSW reaches recall@4 %.3f < %.2f at %d cases (vectors without neighbourhood "
            "structure); exact search kept",
            self.dir, namespace, recall, self.recall_target, len(ids),
        )  # fmt: skip
        return None

    def _maybe_upgrade(self, namespace: str) -> None:
        """Past the threshold an exact index becomes HNSW (if calibrated to the target); an HNSW index that doubled
        since its calibration is calibrated again, and becomes exact if no efSearch reaches the target any more."""
        index = self.loaded.get(namespace)
        if index is None:
            return
        if not index.hnsw and self._wants_approximate(namespace, index.live):
            ids, vecs = index.all_vectors()
            new = self._approximate(namespace, ids, vecs)
            if new is not None:
                new.generation = index.generation
                self.loaded[namespace] = new
        elif index.hnsw and index.live >= 2 * max(1, index.calibrated_at):
            before = index.ef_search
            recall = index.calibrate(target=self.recall_target, k=4)
            if recall >= self.recall_target:
                logger.info(
                    "case bank %s/%s: HNSW at %d cases recalibrated, efSearch %d -> %d, recall@4 %.3f",
                    self.dir, namespace, index.live, before, index.ef_search, recall,
                )  # fmt: skip
                return
            self._refused[namespace] = index.live
            logger.warning(
                "case bank %s/%s: HNSW reaches recall@4 %.3f < %.2f at %d cases; exact search from now on",
                self.dir, namespace, recall, self.recall_target, index.live,
            )  # fmt: skip
            ids, vecs = index.all_vectors()
            exact = self._new(False)
            exact.add(ids, vecs)
            exact.generation = index.generation
            self.loaded[namespace] = exact

    def added(self, namespace: str, index: NamespaceIndex, rids: list[int], embs: np.ndarray, gen: int) -> None:
        """Apply this writer's own insert (committed at generation ``gen``) to the namespace's caught-up ``index``."""
        if index.generation == gen - 1:
            index.add(np.asarray(rids, dtype=np.int64), embs)
            index.generation = gen
            self._maybe_upgrade(namespace)

    def removed(self, namespace: str, rids: list[int], gen: int) -> None:
        """Apply this writer's own eviction (committed at generation ``gen``) to the namespace's loaded index."""
        index = self.loaded.get(namespace)
        if index is not None and index.generation == gen - 1:
            index.remove(rids)
            index.generation = gen
            if index.hnsw and len(index.tombstones) > 0.1 * max(1, index.live):
                self.rebuild(namespace)

    def save(self) -> None:
        """Write every loaded namespace index that changed, atomically."""
        import faiss

        if self.dir is None:
            return
        with self.lock:
            for namespace, index in list(self.loaded.items()):
                fpath, jpath = self.paths(namespace)
                if index.saved_generation == index.generation and fpath.exists() and jpath.exists():
                    continue  # unchanged since it was loaded or saved
                data = faiss.serialize_index(index.index).tobytes()
                atomic_write_bytes(fpath, data)
                info = {
                    "namespace": namespace,
                    "generation": index.generation,
                    "hnsw": index.hnsw,
                    "ef_search": index.ef_search,
                    "recall": index.recall,
                    "calibrated_at": index.calibrated_at,
                    "tombstones": sorted(index.tombstones),
                    "held_out": sorted(index.held_ids),
                    "count": index.live,
                }
                atomic_write_bytes(jpath, json.dumps(info).encode())
                index.saved_generation = index.generation

    def search(
        self, spaces: list[str], qv: np.ndarray, n: int, *, dates: DateFilter | None, reads: dict[str, bool]
    ) -> tuple[dict[str, NamespaceIndex], list[tuple[int, float, str]], dict[int, Case], int | None, int | None]:
        """The ``n`` nearest eligible cases of each namespace, best first, ranked on indexes that reflect the
        committed rows: ``(indexes, hits (row id, cosine, namespace), cases by row id, gate version, pairs)``.

        The indexes as this process holds them are searched, then one read gets the namespaces' generations (do the
        indexes reflect them?), the ranked cases and what ``reads`` asks of the gate's state; an index behind another
        writer's commits catches up and the search runs again (at most twice: then what is committed is ranked)."""
        for attempt in range(3):
            indexes = {ns: self.current(ns) for ns in spaces}
            hits: list[tuple[int, float, str]] = []
            for ns, index in indexes.items():
                allowed, _hidden, _dropped = self.store.eligible(ns, dates, generation=index.generation)
                hits.extend((rid, s, ns) for rid, s in index.search(qv, n, allowed=allowed))
            hits.sort(key=lambda h: -h[1])
            gens, by_rid, gate_version, pairs = self.store.rank_rows(spaces, [h[0] for h in hits], **reads)
            stale = [ns for ns in spaces if gens[ns] != indexes[ns].generation]
            if not stale or attempt == 2:  # still moving after two catch-ups: rank what is committed now
                break
            for ns in stale:
                self.get(ns)
        return indexes, hits, by_rid, gate_version, pairs

    def forget(self, ids: list[str], *, reason: str) -> list[str]:
        """Tombstone cases in the store and drop them from the indexes (caught up first with other writers' rows, so
        the change applies to them directly); returns the ids forgotten now. Call under the bank's writer lock."""
        for ns in self.store.namespaces():
            self.get(ns)
        forgotten, removed = self.store.forget(ids, reason=reason)
        for ns, (rids, gen) in removed.items():
            self.removed(ns, rids, gen)
        return forgotten
