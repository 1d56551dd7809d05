"""Fakes of the web for tests: :class:`LocalSite` (a web site on 127.0.0.1 whose routes a subclass writes),
:class:`EchoSearchBackend` (every query answered with two results naming it) and :func:`build_corpus` (an offline
corpus from a few documents).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["build_corpus", "EchoSearchBackend", "respond", "LocalSite"]


def build_corpus(docs: list[dict[str, Any]], directory: Any) -> Any:
    """An :class:`~memento.web.offline_corpus.OfflineCorpus` of ``docs`` (written to ``directory/docs.jsonl``,
    indexed in ``directory/index``)."""
    from pathlib import Path

    from memento.web.offline_corpus import OfflineCorpus

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in docs), encoding="utf-8")
    return OfflineCorpus.build([src], directory / "index")


class EchoSearchBackend:
    """A search backend answering every query with two results naming it; records the queries (thread-safe).

    Example:
        >>> [r.url for r in EchoSearchBackend().search("dune author")]
        ['https://ex.org/dune-author/a', 'https://ex.org/dune-author/b']
    """

    def __init__(self) -> None:
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 10, before: Any = None, undated: str = "keep") -> list[Any]:
        from memento.web.search_result import SearchResult

        with self._lock:
            self.queries.append(query)
        slug = "-".join(query.lower().split())[:40]
        return [
            SearchResult(url=f"https://ex.org/{slug}/a", title=f"A about {query}", snippet=f"fact about {query}"),
            SearchResult(url=f"https://ex.org/{slug}/b", title=f"B about {query}", snippet="less relevant"),
        ]


def respond(
    h: BaseHTTPRequestHandler, status: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8", **headers: str
) -> None:
    """Answer a request with ``body`` (``Retry_After="7"`` sends the header ``Retry-After: 7``)."""
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    for key, value in headers.items():
        h.send_header(key.replace("_", "-"), value)
    h.end_headers()
    h.wfile.write(body)


class LocalSite:
    """A web site on 127.0.0.1 (random port) for fetcher tests; subclasses answer GET requests in :meth:`route`.

    Every request path is recorded in ``paths`` (under ``lock``). The base site answers 404 to everything.

    Example:
        >>> import urllib.request
        >>> with LocalSite() as site:
        ...     try:
        ...         urllib.request.urlopen(site.base + "/x")
        ...     except Exception as exc:
        ...         print(exc.code, site.paths)
        404 ['/x']
    """

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802
                with site.lock:
                    site.paths.append(self.path)
                site.route(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def route(self, h: BaseHTTPRequestHandler) -> None:
        """Answer one GET request (``h.path``); see :func:`respond`."""
        respond(h, 404, b"nope", "text/plain")

    def hits(self, prefix: str) -> int:
        """Requests so far whose path starts with ``prefix``."""
        with self.lock:
            return sum(1 for p in self.paths if p.startswith(prefix))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> LocalSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
