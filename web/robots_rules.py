"""robots.txt per origin: fetched once, parsed with protego, cached in memory and in the URL cache.

Missing robots (4xx) or an empty file allows all; an unreachable one (5xx, network error) disallows all, as RFC
9309 says. ``Crawl-delay`` widens the spacing of requests to the host (capped at 30 s). The file itself is
downloaded by the fetcher through its guarded path (:meth:`memento.web.fetcher.Fetcher.fetch` passes its own
download function), so the SSRF guard and the redirect checks apply to it too; one download per origin even when
several threads ask at once.

Example:
    >>> from memento.web.robots_rules import RobotsRules
    >>> rules = RobotsRules(lambda origin: (200, "User-agent: *\\nDisallow: /private/\\nCrawl-delay: 2"))
    >>> rules.allows("http://127.0.0.1:8080/private/a", "memento"), rules.allows("http://127.0.0.1:8080/a", "memento")
    (False, True)
    >>> rules.crawl_delay("127.0.0.1:8080")
    2.0
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memento.web.url_cache import normalize_url

if TYPE_CHECKING:
    from memento.web.url_cache import URLCache

__all__ = ["RobotsRules", "origin_of", "parse_robots"]

#: the longest ``Crawl-delay`` honoured, in seconds
MAX_CRAWL_DELAY = 30.0


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, normalised (the key robots.txt files are kept under)."""
    parts = urlsplit(normalize_url(url))
    return f"{parts.scheme}://{parts.netloc}"


def parse_robots(status: int, body: str) -> Any:
    """A protego parser of ``body``, or ``True`` (allow all) / ``False`` (disallow all) from the status alone."""
    if status >= 500:
        return False  # unreachable: complete disallow (RFC 9309 §2.3.1.4)
    if status >= 400 or not body.strip():
        return True  # unavailable or empty: allow all (RFC 9309 §2.3.1.3)
    from protego import Protego

    return Protego.parse(body)


class RobotsRules:
    """The robots.txt rules of every origin a fetcher has asked about.

    Args:
        download: ``origin -> (status, body)`` of ``origin/robots.txt`` (status 599 when unreachable).
        cache: the URL cache that keeps robots files across runs (``None``: memory only).
        max_age: seconds a cached robots.txt stays valid.
    """

    def __init__(
        self, download: Callable[[str], tuple[int, str]], *, cache: URLCache | None = None, max_age: float = 86_400.0
    ) -> None:
        self.download = download
        self.cache = cache
        self.max_age = max_age
        self._rules: dict[str, Any] = {}  # origin -> Protego parser | True (allow all) | False (deny all)
        self._crawl_delay: dict[str, float] = {}  # host[:port] -> seconds
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def allows(self, url: str, user_agent: str) -> bool:
        """Whether robots.txt of the URL's origin lets ``user_agent`` fetch it."""
        parser = self.rules_for(origin_of(url), user_agent)
        if parser is True or parser is False:
            return parser
        return bool(parser.can_fetch(url, user_agent))

    def crawl_delay(self, host: str) -> float:
        """The ``Crawl-delay`` of ``host`` (``netloc``: host and port) in seconds, 0 when none was read."""
        return self._crawl_delay.get(host, 0.0)

    def rules_for(self, origin: str, user_agent: str) -> Any:
        """The parsed rules of ``origin`` (downloaded once; the URL cache first)."""
        with self._lock:
            if origin in self._rules:
                return self._rules[origin]
            lock = self._locks.setdefault(origin, threading.Lock())
        with lock:
            with self._lock:
                if origin in self._rules:
                    return self._rules[origin]
            stored = self.cache.get_robots(origin, max_age=self.max_age) if self.cache is not None else None
            if stored is not None:
                status, body = stored
            else:
                status, body = self.download(origin)
                if self.cache is not None and status < 500:
                    self.cache.put_robots(origin, status, body)
            parser = parse_robots(status, body)
            if parser is not True and parser is not False:
                delay = parser.crawl_delay(user_agent)
                if delay:
                    self._crawl_delay[urlsplit(origin).netloc] = min(float(delay), MAX_CRAWL_DELAY)
            with self._lock:
                self._rules[origin] = parser
            return parser
