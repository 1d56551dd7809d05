"""A fixed local "web": BM25-ranked search over a persistent index of local documents.

The index is built once (:meth:`OfflineCorpus.build`) into a directory holding the documents in SQLite and a
sparse BM25 matrix (``bm25s``, memory-mapped on load), so a 100,000-document corpus opens in about a second and
answers a query in a few milliseconds. Documents get a stable URL: their own ``url``, else ``corpus://<doc_id>``
(``doc_id`` given, else a hash of title and text); :meth:`OfflineCorpus.get` returns a document by URL, which is
how ``scrape`` reads corpus pages without HTTP.

Readers (by file suffix):

* ``.jsonl``: one JSON object per line, ``{doc_id?, url?, title?, text, published?}`` — the multihop
  ``corpus.jsonl`` (``doc_id, title, text``) and a generic ``{url, title, text, published}`` both fit;
  ``id``/``extract``/``content``/``date`` are accepted as aliases.
* ``.json``: the wiki_vital ``{key: {title, extract}}`` mapping, or a list of objects as above.

A malformed line (bad JSON, not an object, no text, a bad date) is reported with file and line and skipped and
counted, or fails the build with ``strict=True``. Never silently.

Example:
    >>> from memento.web.offline_corpus import OfflineCorpus
    >>> corpus = OfflineCorpus.build(["corpus.jsonl"], "corpus_index")  # doctest: +SKIP
    >>> [r.title for r in corpus.search("Paul Clyne district attorney", k=3)]  # doctest: +SKIP
    ['Paul Clyne', ...]
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memento.utils.bm25 import BM25Engine, RankBM25Scorer, check_engine
from memento.web.errors import AfterCutoff, CorpusError, CorpusFormatError, UndatedRefused
from memento.web.search_result import SearchResult, UndatedPolicy, coerce_date, parse_date, passes_cutoff

__all__ = ["OfflineCorpus", "CorpusDocument", "BuildReport", "INDEX_VERSION", "tokenize", "read_source"]

logger = logging.getLogger(__name__)

INDEX_VERSION = 1
_META = "meta.json"
_TOKEN = re.compile(r"\w+", re.UNICODE)
_TITLE_WEIGHT = 2  # the title is indexed this many times (a cheap field boost; measured in bench/bench_corpus.py)
_MAX_ERRORS_KEPT = 50
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


_STOP: frozenset[str] | None = None


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without English stopwords (the analyser of index and queries)."""
    global _STOP
    if _STOP is None:
        _STOP = _stopwords()
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP]


class CorpusDocument(BaseModel):
    """A document of the offline corpus."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    url: str
    title: str = ""
    text: str
    published: dt.date | None = None


class BuildReport(BaseModel):
    """What a build read: documents kept, malformed lines skipped (with the first messages), duplicates."""

    documents: int = 0
    skipped: int = 0
    duplicates: int = 0
    errors: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    sources: list[str] = Field(default_factory=list)


# ----------------------------------------------------------------------------------------------------- readers
def _doc_from_obj(obj: Any, where: str) -> CorpusDocument:
    if not isinstance(obj, dict):
        raise CorpusFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    text = obj.get("text", obj.get("extract", obj.get("content")))
    if not isinstance(text, str) or not text.strip():
        raise CorpusFormatError(f"{where}: missing or empty 'text'")
    title = obj.get("title") or ""
    if not isinstance(title, str):
        raise CorpusFormatError(f"{where}: 'title' must be a string")
    raw_date = obj.get("published", obj.get("date"))
    published = parse_date(raw_date)
    if raw_date not in (None, "") and published is None:
        raise CorpusFormatError(f"{where}: unreadable date {raw_date!r}")
    doc_id = obj.get("doc_id", obj.get("id"))
    if doc_id in (None, ""):
        doc_id = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]
    url = obj.get("url") or f"corpus://{doc_id}"
    if not isinstance(url, str):
        raise CorpusFormatError(f"{where}: 'url' must be a string")
    return CorpusDocument(doc_id=str(doc_id), url=url.strip(), title=title.strip(), text=text, published=published)


def read_source(
    path: str | Path, *, on_error: Callable[[CorpusFormatError], None] | None = None
) -> Iterator[CorpusDocument]:
    """Documents of one source file (see the module docstring for formats).

    Args:
        path: a ``.jsonl`` or ``.json`` file.
        on_error: called with each malformed entry's error; when ``None`` the error is raised.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise CorpusError(f"corpus source not found: {p}")

    def fail(err: CorpusFormatError) -> None:
        if on_error is None:
            raise err
        on_error(err)

    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CorpusFormatError(f"{p}: not valid JSON: {exc}") from None
        if isinstance(data, dict):
            items: Iterable[tuple[str, Any]] = ((f"{p}: entry {k!r}", v) for k, v in data.items())
        elif isinstance(data, list):
            items = ((f"{p}: item {i}", v) for i, v in enumerate(data))
        else:
            raise CorpusFormatError(f"{p}: expected a JSON object or list at the top level")
        for where, obj in items:
            try:
                yield _doc_from_obj(obj, where)
            except CorpusFormatError as err:
                fail(err)
        return
    with p.open("r", encoding="utf-8", errors="strict") as fh:
        lineno = 0
        while True:
            lineno += 1
            try:
                line = fh.readline()
            except UnicodeDecodeError as exc:
                fail(CorpusFormatError(f"{p}:{lineno}: not UTF-8 ({exc.reason})"))
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                fail(CorpusFormatError(f"{p}:{lineno}: invalid JSON ({exc.msg})"))
                continue
            try:
                yield _doc_from_obj(obj, f"{p}:{lineno}")
            except CorpusFormatError as err:
                fail(err)


# ------------------------------------------------------------------------------------------------------ corpus
class OfflineCorpus:
    """BM25 search over a persistent local document index; a :class:`SearchBackend`.

    Args:
        directory: an index directory made by :meth:`build`.
        bm25: the scoring engine (setting ``web.bm25``): ``"bm25s"`` (default) scores with the persisted sparse
            index; ``"rank_bm25"`` re-tokenises every document at open time and scores with ``rank_bm25``'s
            BM25Okapi, the reference implementation (slow beyond a few tens of thousands of documents).

    Example:
        >>> corpus = OfflineCorpus.build(["docs.jsonl"], "idx", strict=True)  # doctest: +SKIP
        >>> corpus = OfflineCorpus("idx")  # later, in another process  # doctest: +SKIP
        >>> hits = corpus.search("treaty of Westphalia", k=5, before=datetime.date(2000, 1, 1))  # doctest: +SKIP
        >>> corpus.get(hits[0].url).text  # doctest: +SKIP
    """

    source_name = "offline"

    def __init__(self, directory: str | Path, *, bm25: BM25Engine = "bm25s") -> None:
        import bm25s
        import numpy as np

        self.bm25 = check_engine(bm25)
        self.directory = Path(directory).expanduser()
        if not self.is_index(self.directory):
            raise CorpusError(
                f"{self.directory} is not an offline corpus index (build one with `memento corpus build`)"
            )
        self.meta: dict[str, Any] = json.loads((self.directory / _META).read_text(encoding="utf-8"))
        if self.meta.get("version") != INDEX_VERSION:
            raise CorpusError(
                f"{self.directory}: index version {self.meta.get('version')} is not {INDEX_VERSION}; rebuild it"
            )
        self._retriever = bm25s.BM25.load(
            str(self.directory / "bm25"), mmap=True, load_vocab=False, show_progress=False
        )
        self._vocab: dict[str, int] = json.loads((self.directory / "vocab.json").read_text(encoding="utf-8"))
        self._published = np.load(self.directory / "published.npy")
        self._conn = sqlite3.connect(
            f"file:{self.directory / 'docs.sqlite3'}?mode=ro", uri=True, check_same_thread=False
        )
        self._lock = threading.Lock()
        self.report = BuildReport.model_validate(self.meta.get("report", {}))
        self._reference = self._reference_scorer() if self.bm25 == "rank_bm25" else None

    def _reference_scorer(self) -> RankBM25Scorer:
        """``rank_bm25`` over the documents tokenised exactly as :meth:`build` tokenised them."""
        weight = int(self.meta.get("title_weight", _TITLE_WEIGHT))
        with self._lock:
            rows = self._conn.execute("SELECT title, text FROM docs ORDER BY idx").fetchall()
        return RankBM25Scorer([tokenize(" ".join([title] * weight + [text])) for title, text in rows])

    def __len__(self) -> int:
        return int(self.meta["documents"])

    def __repr__(self) -> str:
        return f"OfflineCorpus({str(self.directory)!r}, documents={len(self)}, bm25={self.bm25!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> OfflineCorpus:
        return self  # a read-only shared resource: programs deep-copied by optimizers keep using it

    @staticmethod
    def is_index(directory: str | Path) -> bool:
        """Whether ``directory`` holds a built index."""
        d = Path(directory).expanduser()
        return (d / _META).is_file() and (d / "docs.sqlite3").is_file()

    # ---------------------------------------------------------------------------------------------- search
    def search(
        self, query: str, k: int = 10, before: dt.date | str | None = None, *, undated: UndatedPolicy = "keep"
    ) -> list[SearchResult]:
        """The ``k`` best BM25 matches of ``query`` published before ``before`` (undated per ``undated``)."""
        import numpy as np

        before = coerce_date(before)
        terms = tokenize(query)
        ids = list(dict.fromkeys(self._vocab[t] for t in terms if t in self._vocab))
        if not ids or k <= 0:
            return []
        if self._reference is not None:
            scores = self._reference.get_scores(terms)
        else:
            scores = np.asarray(self._retriever.get_scores(ids), dtype=np.float32)
        if before is not None:
            pub = self._published
            allowed = (pub > 0) & (pub < before.toordinal())
            if undated == "keep":
                allowed |= pub == 0
            scores = np.where(allowed, scores, 0.0)
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
        top = top[np.argsort(-scores[top], kind="stable")]
        ranked = [int(i) for i in top if scores[i] > 0]
        docs = self._rows(ranked)
        qset = set(terms)
        return [
            SearchResult(
                url=d.url, title=d.title, snippet=_snippet(d.text, qset), published=d.published, source="offline"
            )
            for d in docs
        ]

    def get(self, url: str) -> CorpusDocument | None:
        """The document whose URL is ``url`` (``corpus://<doc_id>`` or its own), else ``None``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT doc_id, url, title, text, published FROM docs WHERE url = ?", (url.strip(),)
            ).fetchone()
        return _doc(row) if row else None

    def page(self, url: str, *, before: dt.date | None = None, undated: UndatedPolicy = "keep") -> Any:
        """The document at ``url`` as a :class:`~memento.web.page.Page` (``None`` when not in the corpus);
        :class:`AfterCutoff` when it is dated on/after ``before`` (or undated under ``undated="drop"``)."""
        from memento.web.page import Page

        doc = self.get(url)
        if doc is None:
            return None
        if not passes_cutoff(doc.published, before, undated):
            if doc.published is None:
                raise UndatedRefused(f"{url} has no date and undated pages are dropped (cutoff {before})", url=url)
            raise AfterCutoff(f"{url} was published {doc.published}, not before the cutoff {before}", url=url)
        return Page(
            url=url,
            final_url=doc.url,
            title=doc.title,
            text=doc.text,
            published=doc.published,
            status=200,
            from_cache=False,
        )

    def _rows(self, idxs: list[int]) -> list[CorpusDocument]:
        if not idxs:
            return []
        marks = ",".join("?" * len(idxs))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT idx, doc_id, url, title, text, published FROM docs WHERE idx IN ({marks})", idxs
            ).fetchall()
        by_idx = {r[0]: _doc(r[1:]) for r in rows}
        return [by_idx[i] for i in idxs if i in by_idx]

    # ----------------------------------------------------------------------------------------------- build
    @classmethod
    def build(
        cls,
        sources: Iterable[str | Path],
        out_dir: str | Path,
        *,
        strict: bool = False,
        on_error: Callable[[CorpusFormatError], None] | None = None,
        bm25: BM25Engine = "bm25s",
    ) -> OfflineCorpus:
        """Read ``sources`` and write an index to ``out_dir`` atomically (built aside, then renamed into place).

        Args:
            sources: ``.jsonl``/``.json`` files.
            out_dir: the index directory; an existing index there is replaced, any other non-empty directory is
                refused.
            strict: fail on the first malformed entry instead of skipping it.
            on_error: also called with every skipped entry's error (the CLI prints them).
            bm25: the engine the returned corpus scores with (the index on disk is the same for both).

        Raises:
            CorpusFormatError: a malformed entry with ``strict=True``.
            CorpusError: no document could be read, or ``out_dir`` is not safe to replace.
        """
        import bm25s
        import numpy as np

        start = time.perf_counter()
        from memento.core.paths import writable_dir

        out = writable_dir(out_dir, what="corpus index directory", error=CorpusError)
        if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not cls.is_index(out))):
            raise CorpusError(f"{out} exists and is not an offline corpus index; refusing to replace it")
        sources = [Path(s).expanduser() for s in sources]
        if not sources:
            raise CorpusError("no corpus source given")
        report = BuildReport(sources=[str(s) for s in sources])

        def skipped(err: CorpusFormatError) -> None:
            report.skipped += 1
            if len(report.errors) < _MAX_ERRORS_KEPT:
                report.errors.append(str(err))
            if on_error is not None:
                on_error(err)
            else:
                logger.warning("skipped: %s", err)

        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
        try:
            conn = sqlite3.connect(tmp / "docs.sqlite3")
            conn.execute(
                "CREATE TABLE docs (idx INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, url TEXT NOT NULL UNIQUE, "
                "title TEXT NOT NULL, text TEXT NOT NULL, published TEXT)"
            )
            vocab: dict[str, int] = {"": 0}
            corpus_ids: list[list[int]] = []
            published: list[int] = []
            seen: set[str] = set()
            batch: list[tuple[Any, ...]] = []
            for src in sources:
                for doc in read_source(src, on_error=None if strict else skipped):
                    if doc.url in seen:
                        report.duplicates += 1
                        continue
                    seen.add(doc.url)
                    idx = len(corpus_ids)
                    tokens = tokenize(" ".join([doc.title] * _TITLE_WEIGHT + [doc.text]))
                    corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in tokens] or [0])
                    published.append(doc.published.toordinal() if doc.published else 0)
                    batch.append(
                        (
                            idx,
                            doc.doc_id,
                            doc.url,
                            doc.title,
                            doc.text,
                            doc.published.isoformat() if doc.published else None,
                        )
                    )
                    if len(batch) >= 5000:
                        conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?)", batch)
                        batch.clear()
            if batch:
                conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?)", batch)
            conn.commit()
            conn.close()
            if not corpus_ids:
                raise CorpusError(
                    f"no documents read from {', '.join(map(str, sources))} ({report.skipped} malformed entries)"
                )
            logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets itself to DEBUG on import
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenization.Tokenized(ids=corpus_ids, vocab=vocab), show_progress=False)
            retriever.save(str(tmp / "bm25"), show_progress=False)
            (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
            np.save(tmp / "published.npy", np.asarray(published, dtype=np.int32))
            report.documents = len(corpus_ids)
            report.seconds = round(time.perf_counter() - start, 3)
            meta = {
                "version": INDEX_VERSION,
                "documents": report.documents,
                "built_at": dt.datetime.now(dt.UTC).isoformat(),
                "title_weight": _TITLE_WEIGHT,
                "report": report.model_dump(mode="json"),
            }
            (tmp / _META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
            _swap_into_place(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        corpus = cls(out, bm25=bm25)
        corpus.report = report
        logger.info(
            "built %s: %d documents, %d skipped, %d duplicates in %.1fs",
            out,
            report.documents,
            report.skipped,
            report.duplicates,
            report.seconds,
        )
        return corpus


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` by ``tmp`` with renames only (readers never see a half-written index)."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}-{time.time_ns()}"
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _doc(row: tuple[Any, ...]) -> CorpusDocument:
    doc_id, url, title, text, published = row
    return CorpusDocument(
        doc_id=doc_id,
        url=url,
        title=title,
        text=text,
        published=dt.date.fromisoformat(published) if published else None,
    )


def _snippet(text: str, terms: set[str], limit: int = 300) -> str:
    """The sentence with the most query terms, plus what follows it, clipped to ``limit`` characters."""
    if len(text) <= limit:
        return text
    sentences = _SENTENCE.split(text)
    if len(sentences) <= 1:
        return text[:limit]
    best, best_score = 0, -1
    for i, s in enumerate(sentences):
        score = len(terms.intersection(_TOKEN.findall(s.lower())))
        if score > best_score:
            best, best_score = i, score
    snippet = " ".join(sentences[best:])
    return snippet[:limit]
