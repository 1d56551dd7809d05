"""A persistent, thread-safe SQLite cache of fetched pages keyed by the normalised URL.

A page fetched once is never requested again: not in this run, not in a later one (the basis of replayable runs
with ``Fetcher(offline=True)``). robots.txt files are cached here too, per host, with their fetch time.

Example:
    >>> from memento.web.url_cache import normalize_url
    >>> normalize_url("HTTP://Example.COM:80/a?b=2&a=1#frag")
    'http://example.com/a?a=1&b=2'
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from memento.utils.scrub import scrub_url

__all__ = ["URLCache", "normalize_url"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_url(url: str) -> str:
    """The cache key of a URL: lowercase scheme and host, default port and fragment dropped, query sorted,
    empty path as ``/``. Non-http(s) URLs (``corpus://``) are only stripped of surrounding blanks."""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        return url
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    if parts.username:  # the password is never stored: a digest keeps different credentials apart
        secret = ":pw-" + hashlib.sha256(parts.password.encode()).hexdigest()[:12] if parts.password else ""
        netloc = f"{parts.username}{secret}@{netloc}"
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    key TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    final_url TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    published TEXT,
    status INTEGER NOT NULL,
    fetched_at REAL NOT NULL,
    private_hosts TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS robots (
    origin TEXT PRIMARY KEY,
    status INTEGER NOT NULL,
    body TEXT NOT NULL,
    fetched_at REAL NOT NULL
);
"""


class URLCache:
    """Pages and robots.txt files on disk (``<dir>/urls.sqlite3``, WAL); safe to share between threads and
    between processes.

    Args:
        directory: the cache directory (created when missing).

    Example:
        >>> cache = URLCache(tmp_dir)  # doctest: +SKIP
        >>> cache.put_page("https://a.org/x", {"final_url": "https://a.org/x", "title": "X", "text": "...",
        ...                "published": None, "status": 200})  # doctest: +SKIP
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "urls.sqlite3"
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(pages)")}
        if "private_hosts" not in columns:  # a cache written before the column existed
            self._conn.execute("ALTER TABLE pages ADD COLUMN private_hosts TEXT NOT NULL DEFAULT ''")

    def get_page(self, url: str) -> dict[str, Any] | None:
        """The cached page of ``url`` (any spelling that normalises to the same key), else ``None``.

        ``private_hosts`` lists the hosts of its redirect chain that resolved to non-public addresses (the
        fetcher serves the page only when its current policy admits them)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT url, final_url, title, text, published, status, private_hosts FROM pages WHERE key = ?",
                (normalize_url(url),),
            ).fetchone()
        if row is None:
            return None
        page = dict(zip(("url", "final_url", "title", "text", "published", "status"), row[:6], strict=True))
        page["private_hosts"] = [h for h in (row[6] or "").split(",") if h]
        return page

    def put_page(self, url: str, page: dict[str, Any]) -> None:
        """Store a page under the key of ``url`` (replacing an older copy). URL credentials are never stored:
        the key keeps a digest of a password, the stored URLs have it masked."""
        published: Any = page.get("published")  # a date, its ISO text or None
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO pages (key, url, final_url, title, text, published, status, fetched_at,"
                " private_hosts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    normalize_url(url),
                    scrub_url(url),
                    scrub_url(page.get("final_url") or url),
                    page.get("title") or "",
                    page.get("text") or "",
                    published.isoformat() if hasattr(published, "isoformat") else published,
                    int(page.get("status") or 200),
                    time.time(),
                    ",".join(sorted(page.get("private_hosts") or ())),
                ),
            )

    def get_robots(self, origin: str, *, max_age: float | None = None) -> tuple[int, str] | None:
        """The cached robots.txt ``(status, body)`` of an origin, unless older than ``max_age`` seconds."""
        with self._lock:
            row = self._conn.execute(
                "SELECT status, body, fetched_at FROM robots WHERE origin = ?", (origin,)
            ).fetchone()
        if row is None or (max_age is not None and time.time() - row[2] > max_age):
            return None
        return int(row[0]), row[1]

    def put_robots(self, origin: str, status: int, body: str) -> None:
        """Store the robots.txt answer of an origin."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO robots VALUES (?, ?, ?, ?)", (origin, int(status), body, time.time())
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def stats(self) -> dict[str, Any]:
        """Counts for display: pages and robots entries."""
        with self._lock:
            pages = self._conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
            robots = self._conn.execute("SELECT COUNT(*) FROM robots").fetchone()[0]
        return {"pages": int(pages), "robots": int(robots), "path": str(self.path)}
