"""One FAISS inner-product index over one namespace's live cases, keyed by the cases' SQLite rowids.

Exact (``IndexFlatIP``) or HNSW (``IndexHNSWFlat``, which cannot delete: removed ids become tombstones that
searches skip until the owner rebuilds the index). An HNSW index is calibrated when built (:meth:`calibrate`): the
smallest ``efSearch`` whose recall@k against exact search reaches the target; ``recall`` reports it (1.0 for exact
search). The calibration queries are held out of the graph: one case in ``HOLD_OUT_STRIDE`` (by rowid) is kept in a
small exact index beside it, searched with it (so it is found like any other), and its vectors are the queries. A
vector that is in the graph is no fair query: the search walks to its own node, whose links are its neighbours, and
overstates recall (0.953 measured that way at 300,000 cases where held-out queries found 0.787). A query searches
on one thread: FAISS's OpenMP threads only slow a single query down (two threads 17 ms against 12 ms for an exact
100k scan here). ``generation`` is the database write generation the index reflects (-1: none yet). faiss is
imported when an index is built.

Example:
    >>> import numpy as np
    >>> index = NamespaceIndex(2, hnsw=False, hnsw_m=32, ef_search=64, ef_construction=64)
    >>> index.add(np.array([7, 9]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> index.search(np.array([1.0, 0.1]), 1)
    [(7, 1.0)]
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from memento.memory.embedder import apply_compute_threads

__all__ = ["NamespaceIndex", "EF_GRID", "HOLD_OUT_STRIDE"]

#: the efSearch values :meth:`NamespaceIndex.calibrate` tries, smallest first
EF_GRID: tuple[int, ...] = (32, 64, 128, 256, 512)

#: an HNSW index keeps the cases whose rowid is a multiple of this out of its graph, as calibration queries
HOLD_OUT_STRIDE = 256

#: fewer held-out vectors than this (a small index): calibrate on stored vectors of the graph instead
MIN_HELD_OUT = 50


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """FAISS on one OpenMP thread in this thread (OpenMP's setting is per calling thread), restored after."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class NamespaceIndex:
    """A FAISS inner-product index over one namespace's live cases, keyed by the cases' SQLite rowids.

    Args:
        dim: Vector dimension.
        hnsw: HNSW graph (approximate) instead of exact search.
        hnsw_m / ef_search / ef_construction: HNSW graph degree and search / build breadth.

    Example:
        >>> import numpy as np
        >>> index = NamespaceIndex(2, hnsw=False, hnsw_m=32, ef_search=64, ef_construction=64)
        >>> index.add(np.array([3]), np.array([[0.6, 0.8]]))
        >>> index.live, index.ids().tolist()
        (1, [3])
    """

    def __init__(self, dim: int, *, hnsw: bool, hnsw_m: int, ef_search: int, ef_construction: int) -> None:
        import faiss

        apply_compute_threads("faiss")

        self.dim = dim
        self.hnsw = hnsw
        self.ef_search = ef_search
        base: faiss.Index
        if hnsw:
            graph = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            graph.hnsw.efSearch = ef_search
            graph.hnsw.efConstruction = ef_construction
            base = graph
        else:
            base = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIDMap2(base)
        #: HNSW only: the held-out cases (rowid a multiple of HOLD_OUT_STRIDE), searched exactly beside the graph
        self.held = faiss.IndexIDMap2(faiss.IndexFlatIP(dim)) if hnsw else None
        self.held_ids: set[int] = set()
        self.tombstones: set[int] = set()
        self.recall = 1.0  # recall@k against exact search (calibrated for HNSW; exact search: 1.0)
        self.calibrated_at = 0  # live vectors when :meth:`calibrate` last ran (the owner recalibrates as it grows)
        self.generation = -1
        self.saved_generation: int | None = None  # generation of the copy on disk (None: none written/loaded)

    @property
    def live(self) -> int:
        return int(self.index.ntotal) + len(self.held_ids) - len(self.tombstones)

    def ids(self) -> np.ndarray:
        """Every id the index holds (tombstones included), the graph's then the held-out ones."""
        import faiss

        graph = faiss.vector_to_array(self.index.id_map).astype(np.int64)
        if self.held is None or not self.held_ids:
            return graph
        return np.concatenate([graph, faiss.vector_to_array(self.held.id_map).astype(np.int64)])

    def add(self, rids: np.ndarray, embs: np.ndarray) -> None:
        """Add vectors by rowid (an HNSW index holds out one rowid in ``HOLD_OUT_STRIDE``, see :meth:`hold_out`)."""
        if not len(rids):
            return
        rids = np.asarray(rids, dtype=np.int64)
        embs = np.ascontiguousarray(embs, dtype=np.float32)
        if self.held is not None:
            out = rids % HOLD_OUT_STRIDE == 0
            if out.any():
                self.hold_out(rids[out], embs[out])
                rids, embs = rids[~out], np.ascontiguousarray(embs[~out])
            if not len(rids):
                return
        self.index.add_with_ids(embs, rids)

    def hold_out(self, rids: np.ndarray, embs: np.ndarray) -> None:
        """Keep these vectors out of the HNSW graph, in the exact index beside it (calibration queries)."""
        assert self.held is not None, "only an HNSW index holds vectors out"
        self.held.add_with_ids(np.ascontiguousarray(embs, dtype=np.float32), np.asarray(rids, dtype=np.int64))
        self.held_ids.update(int(r) for r in rids)

    def remove(self, rids: Iterable[int]) -> None:
        rids = [int(r) for r in rids]
        if not rids:
            return
        if self.held is not None and self.held_ids.intersection(rids):  # the exact side deletes at once
            gone = [r for r in rids if r in self.held_ids]
            self.held.remove_ids(np.asarray(gone, dtype=np.int64))  # type: ignore[arg-type]
            self.held_ids.difference_update(gone)
            rids = [r for r in rids if r not in gone]
        if self.hnsw:  # HNSW cannot delete: tombstone, rebuilt away by the bank when they pile up
            self.tombstones.update(rids)
        else:
            # faiss's Python wrapper takes an id array; its stub names only an IDSelector
            self.index.remove_ids(np.asarray(rids, dtype=np.int64))  # type: ignore[arg-type]

    def search(self, vec: np.ndarray, k: int, *, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest live cases ``(rowid, score)``; ``allowed`` (rowids) restricts the search to those cases
        inside FAISS (an ID selector), so k of them come back when the index holds k (the date filter)."""
        hits = self._search(self.index, vec, k, allowed=allowed)
        if self.held is None or not self.held_ids:
            return hits
        held = self._search(self.held, vec, k, allowed=allowed)
        return sorted(hits + held, key=lambda hit: -hit[1])[:k]

    def _search(self, index: object, vec: np.ndarray, k: int, *, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        """:meth:`search` in one of the index's parts (the graph or the held-out vectors)."""
        if index.ntotal == 0 or k <= 0:  # type: ignore[attr-defined]
            return []
        hnsw = index is self.index and self.hnsw
        kk = min(int(index.ntotal), k + len(self.tombstones))  # type: ignore[attr-defined]
        if allowed is not None:
            import faiss

            if not len(allowed):
                return []
            selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
            # faiss's SWIG wrapper takes these keywords; its stubs list neither SearchParametersHNSW nor ``sel``
            if hnsw:  # HNSW parameters carry their own efSearch (default 16): keep the index's breadth
                params = faiss.SearchParametersHNSW(sel=selector, efSearch=self.ef_search)  # type: ignore[attr-defined]
            else:
                params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
            with one_thread():
                scores, ids = index.search(vec.reshape(1, -1).astype(np.float32), kk, params=params)  # type: ignore[attr-defined]
            out = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
            return [hit for hit in out if hit[0] not in self.tombstones][:k]
        with one_thread():
            scores, ids = index.search(vec.reshape(1, -1).astype(np.float32), kk)  # type: ignore[attr-defined]
        out = [
            (int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0 and i not in self.tombstones
        ]
        return out[:k]

    def vectors(self, rids: Sequence[int]) -> np.ndarray:
        if not rids:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.held is None or not self.held_ids.intersection(int(r) for r in rids):
            return self.index.reconstruct_batch(np.asarray(rids, dtype=np.int64)).astype(np.float32)
        out = np.zeros((len(rids), self.dim), dtype=np.float32)
        for row, rid in enumerate(rids):
            part = self.held if int(rid) in self.held_ids else self.index
            out[row] = part.reconstruct(int(rid))
        return out

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The live ids and their vectors (the held-out ones last)."""
        ids = self.ids()
        if not len(ids):
            return ids, np.zeros((0, self.dim), dtype=np.float32)
        parts = [self.index.index.reconstruct_n(0, int(self.index.ntotal))]
        if self.held is not None and self.held_ids:
            parts.append(self.held.index.reconstruct_n(0, int(self.held.ntotal)))
        vecs = np.concatenate(parts) if len(parts) > 1 else parts[0]
        keep = np.array([i not in self.tombstones for i in ids], dtype=bool)
        return ids[keep], vecs[keep]

    def held_out(self) -> tuple[np.ndarray, np.ndarray]:
        """The held-out ids and vectors (none for exact search)."""
        if self.held is None or not self.held_ids:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        import faiss

        ids = faiss.vector_to_array(self.held.id_map).astype(np.int64)
        return ids, self.held.index.reconstruct_n(0, int(self.held.ntotal))

    def set_ef_search(self, ef: int) -> None:
        """Set HNSW's search breadth (nothing for exact search)."""
        if self.hnsw:
            import faiss

            faiss.downcast_index(self.index.index).hnsw.efSearch = int(ef)  # type: ignore[attr-defined]
            self.ef_search = int(ef)

    def calibrate(
        self, *, target: float = 0.95, k: int = 4, sample: int = 200, seed: int = 0, grid: Sequence[int] = EF_GRID
    ) -> float:
        """Pick the smallest efSearch of ``grid`` whose recall@``k`` reaches ``target`` and return that recall.

        Queries are up to ``sample`` held-out vectors (not in the graph, as a new task's vector is not), or stored
        vectors of the graph while fewer than ``MIN_HELD_OUT`` are held out (a small index; this overstates recall);
        each one's exact neighbours (itself excluded) are computed by a full scan, and a result of :meth:`search`
        counts as found when it scores at least the k-th exact neighbour (ties are found too).
        When no efSearch reaches the target, the largest is kept and its recall returned: the owner then falls back
        to exact search. Exact indexes return 1.0. A graph's recall at one efSearch falls as it grows: the owner
        calibrates again when the index has doubled since (``calibrated_at``).
        """
        if not self.hnsw or self.live <= k + 1:
            self.recall = 1.0
            return 1.0
        self.calibrated_at = self.live
        ids, vecs = self.all_vectors()
        held_ids, _ = self.held_out()
        pool = np.nonzero(np.isin(ids, held_ids))[0] if len(held_ids) >= MIN_HELD_OUT else np.arange(len(ids))
        rng = np.random.default_rng(seed)
        picks = pool[rng.choice(len(pool), size=min(sample, len(pool)), replace=False)]
        queries = vecs[picks]
        best = np.full((len(picks), k + 1), -np.inf, dtype=np.float32)
        best_ids = np.zeros((len(picks), k + 1), dtype=np.int64)
        for start in range(0, len(ids), 100_000):  # the exact neighbours, a block of stored vectors at a time
            scores = queries @ vecs[start : start + 100_000].T
            block_ids = ids[start : start + 100_000]
            local = picks - start
            inside = (local >= 0) & (local < scores.shape[1])
            scores[np.nonzero(inside)[0], local[inside]] = -np.inf  # a query is not its own neighbour
            merged = np.concatenate([best, scores], axis=1)
            merged_ids = np.concatenate([best_ids, np.broadcast_to(block_ids, scores.shape)], axis=1)
            top = np.argpartition(-merged, k, axis=1)[:, : k + 1]
            best = np.take_along_axis(merged, top, axis=1)
            best_ids = np.take_along_axis(merged_ids, top, axis=1)
        kth = np.sort(best, axis=1)[:, -k]  # the k-th best exact score of each query (itself excluded)
        recall = 0.0
        for ef in grid:
            self.set_ef_search(ef)
            hits = 0
            for row in range(len(picks)):
                got = [s for i, s in self.search(queries[row], k + 1) if i != ids[picks[row]]][:k]
                hits += sum(s >= kth[row] - 1e-5 for s in got)  # ties with the k-th neighbour count as found
            recall = hits / (k * len(picks))
            if recall >= target:
                break
        self.recall = recall
        return recall
