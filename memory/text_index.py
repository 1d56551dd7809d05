"""Lexical retrieval for MEMENTO's stores: an in-process BM25 index that follows the ``items`` table, on any backend.

One ranking on SQLite and PostgreSQL (SQLite's FTS5 and PostgreSQL's ``ts_rank`` order results differently), so the
index lives in the process: :class:`TextIndex` tokenises item text and entity as FTS5's ``porter unicode61``
tokenizer does (Unicode words, lower-cased, diacritics removed, Porter-stemmed by ``snowballstemmer``) and scores
with FTS5's BM25 (``k1 = 1.2``, ``b = 0.75``, ``IDF = ln((N - n + 0.5) / (n + 0.5))`` floored at ``1e-6``; term
frequencies summed over the searched columns, document length over all of them). The memory database keeps it in
step with the table by replaying the change log since the last sequence number it applied (the stores' only write
path logs every change), so a search costs one ``max(seq)`` read when nothing changed, and another process's
commits are seen at the next search.

Example:
    >>> index = TextIndex()
    >>> index.put("craft", "c-1", 1, "For court cases, read the docket first.", "")
    >>> index.put("craft", "c-2", 2, "Search the weather archive.", "")
    >>> index.put("craft", "c-3", 3, "Quote the exact title.", "")
    >>> [(rowid, round(score, 3)) for rowid, score in index.search("craft", "Who won the court case?")]
    [(1, 0.878)]
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

__all__ = ["TextIndex", "tokens", "query_terms"]

_WORD = re.compile(r"\w+", re.UNICODE)
_K1 = 1.2
_B = 0.75
_STOP = frozenset(
    "a an and are as at be by for from has have how in is it its of on or that the this to was were what when "
    "where which who whom why will with does did do into than then there their they them about after before".split()
)


@functools.cache
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


@functools.lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokens(text: str) -> list[str]:
    """The index terms of ``text`` (every word, stemmed), as FTS5's ``porter unicode61`` would index it."""
    return [_stem(word) for word in _WORD.findall(_fold(text))]


def query_terms(text: str, *, max_terms: int = 32) -> list[str]:
    """The distinct stemmed content words of a query (at most ``max_terms``; stop words and 1-letter words out)."""
    seen: list[str] = []
    for word in _WORD.findall(_fold(text)):
        if len(word) < 2 or word in _STOP:
            continue
        term = _stem(word)
        if term not in seen:
            seen.append(term)
            if len(seen) >= max_terms:
                break
    return seen


class _Doc:
    __slots__ = ("rowid", "length", "text", "entity")

    def __init__(self, rowid: int, text: dict[str, int], entity: dict[str, int]) -> None:
        self.rowid = rowid
        self.text = text
        self.entity = entity
        self.length = sum(text.values()) + sum(entity.values())


def _counts(words: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for word in words:
        out[word] = out.get(word, 0) + 1
    return out


class _StoreIndex:
    def __init__(self) -> None:
        self.docs: dict[str, _Doc] = {}  # item id -> document
        self.postings: dict[str, set[str]] = {}  # term -> item ids (text or entity)
        self.total_length = 0

    def remove(self, item_id: str) -> None:
        doc = self.docs.pop(item_id, None)
        if doc is None:
            return
        self.total_length -= doc.length
        for term in set(doc.text) | set(doc.entity):
            ids = self.postings.get(term)
            if ids is not None:
                ids.discard(item_id)
                if not ids:
                    del self.postings[term]

    def put(self, item_id: str, rowid: int, text: str, entity: str) -> None:
        self.remove(item_id)
        doc = _Doc(rowid, _counts(tokens(text)), _counts(tokens(entity)))
        self.docs[item_id] = doc
        self.total_length += doc.length
        for term in set(doc.text) | set(doc.entity):
            self.postings.setdefault(term, set()).add(item_id)


class TextIndex:
    """BM25 over the text and entity of each store's items (see the module docstring). Not thread-safe: its owner
    (the memory database) calls it under its lock."""

    def __init__(self) -> None:
        self._stores: dict[str, _StoreIndex] = {}
        self.seq = 0  # the last change-log sequence number applied
        self.ready = False  # whether it was filled from the table (its owner sets it)

    def put(self, store: str, item_id: str, rowid: int, text: str, entity: str) -> None:
        """Index (or re-index) an item."""
        self._stores.setdefault(store, _StoreIndex()).put(item_id, rowid, text, entity)

    def remove(self, store: str, item_id: str) -> None:
        """Drop an item (nothing when it is not indexed)."""
        index = self._stores.get(store)
        if index is not None:
            index.remove(item_id)

    def clear(self) -> None:
        """Forget everything (a rebuild follows)."""
        self._stores.clear()
        self.seq = 0
        self.ready = False

    def size(self, store: str) -> int:
        """Items indexed for ``store``."""
        index = self._stores.get(store)
        return len(index.docs) if index else 0

    def search(self, store: str, text: str, *, columns: Iterable[str] = ("text", "entity")) -> list[tuple[int, float]]:
        """``(rowid, score)`` of every item of ``store`` sharing a term with ``text`` in ``columns``, best first
        (ties: lower rowid first). Scores are positive."""
        index = self._stores.get(store)
        terms = query_terms(text)
        if index is None or not terms or not index.docs:
            return []
        cols = tuple(columns)
        n_docs = len(index.docs)
        avgdl = index.total_length / n_docs if n_docs else 0.0
        scores: dict[str, float] = {}
        for term in terms:
            ids = index.postings.get(term)
            if not ids:
                continue
            matching = [(i, self._tf(index.docs[i], term, cols)) for i in ids]
            matching = [(i, tf) for i, tf in matching if tf]
            if not matching:
                continue
            n = len(matching)
            idf = max(math.log((n_docs - n + 0.5) / (n + 0.5)), 1e-6)
            for item_id, tf in matching:
                length = index.docs[item_id].length
                norm = _K1 * (1 - _B + _B * length / avgdl) if avgdl else _K1
                scores[item_id] = scores.get(item_id, 0.0) + idf * tf * (_K1 + 1) / (tf + norm)
        ranked = sorted(((index.docs[i].rowid, s) for i, s in scores.items()), key=lambda p: (-p[1], p[0]))
        return ranked

    @staticmethod
    def _tf(doc: _Doc, term: str, columns: tuple[str, ...]) -> int:
        tf = 0
        if "text" in columns:
            tf += doc.text.get(term, 0)
        if "entity" in columns:
            tf += doc.entity.get(term, 0)
        return tf
