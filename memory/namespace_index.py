"""One FAISS inner-product index over one namespace's live cases, keyed by the cases' SQLite rowids.

Exact (``IndexFlatIP``) or HNSW (``IndexHNSWFlat``, which cannot delete: removed ids become tombstones that
searches skip until the owner rebuilds the index). ``generation`` is the database write generation the index
reflects (-1: none yet). faiss is imported when an index is built.

Example:
    >>> import numpy as np
    >>> index = NamespaceIndex(2, hnsw=False, hnsw_m=32, ef_search=64, ef_construction=64)
    >>> index.add(np.array([7, 9]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> index.search(np.array([1.0, 0.1]), 1)
    [(7, 1.0)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from memento.memory.embedder import apply_compute_threads

__all__ = ["NamespaceIndex"]


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
            # faiss's Python wrapper takes an id array; its stub names only an IDSelector
            self.index.remove_ids(np.asarray(rids, dtype=np.int64))  # type: ignore[arg-type]

    def search(self, vec: np.ndarray, k: int, *, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest live cases ``(rowid, score)``; ``allowed`` (rowids) restricts the search to those cases
        inside FAISS (an ID selector), so k of them come back when the index holds k (the date filter)."""
        if self.index.ntotal == 0 or k <= 0:
            return []
        kk = min(int(self.index.ntotal), k + len(self.tombstones))
        if allowed is not None:
            import faiss

            if not len(allowed):
                return []
            selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
            # faiss's SWIG wrapper takes these keywords; its stubs list neither SearchParametersHNSW nor ``sel``
            if self.hnsw:  # HNSW parameters carry their own efSearch (default 16): keep the index's breadth
                params = faiss.SearchParametersHNSW(sel=selector, efSearch=self.ef_search)  # type: ignore[attr-defined]
            else:
                params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
            scores, ids = self.index.search(vec.reshape(1, -1).astype(np.float32), kk, params=params)
            out = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
            return [hit for hit in out if hit[0] not in self.tombstones][:k]
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
