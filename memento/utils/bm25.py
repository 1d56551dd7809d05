"""BM25 engines: ``bm25s`` (the fast default: a sparse index, persisted and memory-mapped) and ``rank_bm25`` (the
reference implementation, BM25Okapi over token lists in pure Python: exact scores for small corpora and checks).

Both score the same token lists with the same ``k1 = 1.5`` and ``b = 0.75``; they differ in the IDF variant
(``bm25s`` defaults to Lucene's ``log(1 + (N - n + 0.5) / (n + 0.5))``, ``rank_bm25`` to Robertson's with a floor of
a quarter of the mean IDF for very common terms), so scores differ and rankings mostly agree
(``tests/core/test_bm25.py`` compares them on the shipped corpus). ``rank_bm25`` scores every document for every
query term in Python: use it up to a few tens of thousands of documents.

Chosen by a setting: ``web.bm25`` (the offline corpus) and ``jitmem.bm25`` (JitMem's trajectory bank).

Example:
    >>> from memento.utils.bm25 import RankBM25Scorer
    >>> scorer = RankBM25Scorer([["lyon", "founded", "romans"], ["paris", "capital"], ["rome", "empire"]])
    >>> [round(float(s), 3) for s in scorer.get_scores(["lyon", "romans"])]
    [0.905, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from memento.core.errors import ConfigError

__all__ = ["BM25Engine", "ENGINES", "RankBM25Scorer", "check_engine"]

BM25Engine = Literal["bm25s", "rank_bm25"]
ENGINES: tuple[str, ...] = ("bm25s", "rank_bm25")


def check_engine(engine: str) -> BM25Engine:
    """``engine`` when it names a BM25 engine, else a one-line :class:`ConfigError`."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown BM25 engine {engine!r}: use {' or '.join(ENGINES)}")
    return engine  # type: ignore[return-value]


class RankBM25Scorer:
    """``rank_bm25.BM25Okapi`` over tokenised documents, scoring a tokenised query against every document.

    Args:
        corpus: one token list per document (an empty list is a document without terms).
        k1: term-frequency saturation.
        b: length normalisation.

    Example:
        >>> RankBM25Scorer([["a", "b"], ["c"]]).get_scores(["zzz"]).tolist()
        [0.0, 0.0]
    """

    def __init__(self, corpus: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75) -> None:
        from rank_bm25 import BM25Okapi

        self.size = len(corpus)
        has_terms = any(len(doc) for doc in corpus)
        # BM25Okapi divides by the mean document length: a corpus without any term scores zero everywhere
        self._model = BM25Okapi([list(doc) for doc in corpus], k1=k1, b=b) if has_terms else None

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        """Scores of every document (``float32``, corpus order) for the distinct terms of ``query``."""
        if self._model is None:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores(list(dict.fromkeys(query))), dtype=np.float32)
