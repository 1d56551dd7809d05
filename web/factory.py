"""Build the web layer from settings: the search backend, the fetcher and per-task :class:`WebTools`.

The backend is the offline corpus when one is configured (``--corpus`` / ``web.corpus``: an index directory, or
a ``.jsonl``/``.json`` source whose index is built on first use under ``<cache_dir>/corpora/<hash>``), otherwise
``ddgs`` (the live web, no key needed); ``web.backend`` forces one.

Example:
    >>> from memento.core.config import load_settings
    >>> from memento.web.factory import web_tools_factory
    >>> make = web_tools_factory(load_settings(flags={"web": {"corpus": "examples/multihop/corpus.jsonl"}}))
    >>> tools = make(None, "keep")  # doctest: +SKIP
    >>> print(tools.search_web("Paul Clyne"))  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memento.core.config import Settings
from memento.web.errors import WebConfigError
from memento.web.search_result import SearchBackend, UndatedPolicy
from memento.web.web_tools import WebTools

if TYPE_CHECKING:
    from memento.web.offline_corpus import OfflineCorpus

__all__ = [
    "make_backend",
    "make_fetcher",
    "make_web_tools",
    "web_tools_factory",
    "open_corpus",
    "corpus_index_dir",
    "reset_live_web_notice",
]

LIVE_WEB_NOTICE = (
    "memento: no corpus configured: searching the live web (DuckDuckGo); pass --corpus FILE.jsonl (or set "
    "web.corpus) to search a local corpus instead"
)
_notice_lock = threading.Lock()
_notice_given = False


def reset_live_web_notice() -> None:
    """Let the next live-web search print the notice again (a new session in the same process, tests)."""
    global _notice_given
    with _notice_lock:
        _notice_given = False


def _with_live_web_notice(backend: Any) -> Any:
    """The backend, its ``search`` printing once per process that it searches the live web (no corpus configured)."""
    inner = backend.search

    def search(*args: Any, **kwargs: Any) -> Any:
        global _notice_given
        with _notice_lock:
            first, _notice_given = not _notice_given, True
        if first:
            import sys

            print(LIVE_WEB_NOTICE, file=sys.stderr, flush=True)
        return inner(*args, **kwargs)

    backend.search = search
    return backend


logger = logging.getLogger(__name__)

_open_lock = threading.Lock()
_opened: dict[str, OfflineCorpus] = {}  # "resolved index dir|engine" -> OfflineCorpus, shared by the whole process


def corpus_index_dir(source: str | Path, cache_dir: str | Path) -> Path:
    """Where the index of a corpus source file lives: ``<cache_dir>/corpora/<hash of path, size, mtime>``."""
    from memento.web.offline_corpus import INDEX_VERSION

    src = Path(source).expanduser().resolve()
    st = src.stat()
    digest = hashlib.sha256(f"{src}|{st.st_size}|{st.st_mtime_ns}|{INDEX_VERSION}".encode()).hexdigest()[:16]
    return Path(cache_dir).expanduser() / "corpora" / f"{src.stem}-{digest}"


def open_corpus(
    path: str | Path, *, cache_dir: str | Path, bm25: Literal["bm25s", "rank_bm25"] = "bm25s"
) -> OfflineCorpus:
    """Open an offline corpus: an index directory as is; a source file (``.jsonl``/``.json``) through its index
    under ``cache_dir``, built on first use and reused afterwards (rebuilt when the file changes). ``bm25`` names
    the scoring engine (``web.bm25``); one corpus is opened per index and engine in a process."""
    from memento.web.offline_corpus import OfflineCorpus

    p = Path(path).expanduser()
    if not p.exists():
        raise WebConfigError(f"corpus not found: {p}")
    with _open_lock:
        index = p.resolve() if p.is_dir() else corpus_index_dir(p, cache_dir).resolve()
        key = f"{index}|{bm25}"
        if key not in _opened:
            if p.is_dir() or OfflineCorpus.is_index(index):
                _opened[key] = OfflineCorpus(index, bm25=bm25)
            else:
                logger.info("building the offline corpus index of %s into %s", p, index)
                _opened[key] = OfflineCorpus.build([p], index, bm25=bm25)
        return _opened[key]


def make_backend(settings: Settings) -> SearchBackend:
    """The search backend the settings ask for (see the module docstring)."""
    web = settings.web
    kind = web.backend
    live_by_default = kind == "auto" and not web.corpus
    if kind == "auto":
        kind = "offline" if web.corpus else "ddgs"
    if kind == "offline":
        if not web.corpus:
            raise WebConfigError("web.backend is 'offline' but no corpus is configured: pass --corpus PATH")
        return open_corpus(web.corpus, cache_dir=web.cache_dir, bm25=web.bm25)
    if kind == "searxng":
        if not web.searxng_url:
            raise WebConfigError("web.backend is 'searxng' but web.searxng_url is not set")
        from memento.web.searxng_backend import SearXNGBackend

        return SearXNGBackend(
            web.searxng_url,
            timeout=web.timeout,
            user_agent=web.user_agent,
            max_concurrent=web.max_concurrent_searches,
        )
    from memento.web.ddgs_backend import DDGSBackend

    backend = DDGSBackend(timeout=web.timeout, max_concurrent=web.max_concurrent_searches)
    return _with_live_web_notice(backend) if live_by_default else backend


def make_fetcher(settings: Settings, *, offline: bool | None = None) -> Any:
    """A :class:`~memento.web.fetcher.Fetcher` configured from ``settings.web`` (``offline=None``: ``web.offline``)."""
    from memento.web.fetcher import Fetcher

    web = settings.web
    return Fetcher(
        cache_dir=web.cache_dir,
        user_agent=web.user_agent,
        timeout=web.timeout,
        max_bytes=web.max_bytes,
        max_concurrent=web.max_concurrent_fetches,
        allow_private=web.allow_private,
        allowed_private_hosts=set(web.allowed_private_hosts),
        undated=web.undated or "keep",
        offline=web.offline if offline is None else offline,
    )


def _uses_corpus(settings: Settings) -> bool:
    return settings.web.backend == "offline" or (settings.web.backend == "auto" and settings.web.corpus is not None)


def make_web_tools(
    settings: Settings, *, cutoff: dt.date | str | None = None, undated: UndatedPolicy | None = None, **options: Any
) -> WebTools:
    """One :class:`WebTools` for a task. With the offline corpus, ``scrape`` serves corpus documents only (runs
    stay reproducible and offline); with a live backend it fetches through a :class:`Fetcher`."""
    backend = make_backend(settings)
    fetcher = None if _uses_corpus(settings) else make_fetcher(settings)
    return WebTools(backend, fetcher, cutoff=cutoff, undated=undated or settings.web.undated or "keep", **options)


def web_tools_factory(settings: Settings, **options: Any) -> Callable[[dt.date | str | None, str | None], WebTools]:
    """A function ``f(cutoff, undated) -> WebTools`` whose tools all share ONE backend and ONE fetcher (hence
    their concurrency limits and URL cache). The backend is opened on the first call. ``undated`` is the program's
    policy (:func:`memento.core.dating.resolve_undated`; ``None``: ``settings.web.undated``, else ``keep``). Extra
    ``options`` (``k``, ``page_chars``) go to every :class:`WebTools`."""
    lock = threading.Lock()
    shared: dict[str, Any] = {}

    def make(cutoff: dt.date | str | None = None, undated: str | None = None) -> WebTools:
        with lock:
            if "backend" not in shared:
                shared["backend"] = make_backend(settings)
                shared["fetcher"] = None if _uses_corpus(settings) else make_fetcher(settings)
        policy = undated or settings.web.undated or "keep"
        return WebTools(shared["backend"], shared["fetcher"], cutoff=cutoff, undated=policy, **options)  # type: ignore[arg-type]

    return make
