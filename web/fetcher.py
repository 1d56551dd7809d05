"""A polite, guarded, cached page fetcher.

Every outcome of :meth:`Fetcher.fetch` is a :class:`Page` or a typed :class:`~memento.web.errors.FetchError`:

* **robots.txt** (protego) is obeyed, fetched once per origin through the same guarded path, cached in memory
  and in the URL cache for a day; ``Crawl-delay`` widens the per-host spacing. Missing robots (4xx) allows all,
  an unreachable one (5xx, network error) disallows all, as RFC 9309 says.
* An **honest User-Agent** (from settings).
* **Concurrency**: at most ``max_concurrent`` requests in flight across all threads and all Fetchers of the
  process (a process-wide semaphore), and requests to one host spaced by ``host_interval`` seconds.
* **Timeouts** (connect, read, and one total deadline of ``2 × timeout`` from sending the request to the body's
  last byte: a server that drips its headers or its body a byte at a time is cut off), a **size cap** checked on
  Content-Length and while streaming, a **content-type allowlist** (html, xhtml, plain text).
* **Redirects** are followed by hand, repeating the cache, SSRF and robots checks at every hop.
* **SSRF guard**: non-http(s) schemes and hosts resolving to private, loopback, link-local, reserved or
  multicast addresses are refused before any connection: every range of IANA's IPv4 and IPv6 special-purpose
  registries that is not globally reachable (whatever this Python's :mod:`ipaddress` knows), the deprecated
  site-local ``fec0::/10`` and 6to4-relay ``192.88.99.0/24``, and IPv6 forms that embed such an IPv4 address
  (``::a.b.c.d``, ``::ffff:a.b.c.d``, the IPv4-translated ``::ffff:0:a.b.c.d``, NAT64, 6to4, Teredo, ISATAP).
  ``allowed_private_hosts`` admits the listed hosts or addresses, each in its own forms only (``127.0.0.1``
  admits ``127.0.0.1`` and a name resolving to it, never ``::127.0.0.1`` or ``::ffff:127.0.0.1``);
  ``allow_private=True`` without a list admits all private space except link-local (cloud metadata). A cached
  page fetched from a private host is served only while the policy admits it.
* **Retries** with exponential backoff (tenacity) only on 429, 5xx and connection errors, honouring
  ``Retry-After`` (capped by ``max_retry_wait``).
* **Extraction** with trafilatura: main text, title, publication date. A page dated on or after the cutoff is
  :class:`AfterCutoff`; an undated one follows the undated policy.
* Permanent failures (4xx, wrong content type, too large) are remembered for the fetcher's lifetime and not
  requested again.
* A persistent **URL cache** (:class:`~memento.web.url_cache.URLCache`): a page fetched once is served from disk
  afterwards, in this run or a later one, without a request; ``offline=True`` serves only cached pages.

Example:
    >>> from memento.web.fetcher import Fetcher
    >>> fetcher = Fetcher(cache_dir="~/.cache/memento/web")
    >>> page = fetcher.fetch("https://en.wikipedia.org/wiki/DSPy", before=datetime.date(2025, 1, 1))  # doctest: +SKIP
    >>> page.title, page.published, page.from_cache  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import email.utils
import ipaddress
import logging
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from pydantic import BaseModel, ConfigDict

from memento.scrub import scrub_url
from memento.text import error_line
from memento.web.errors import (
    AfterCutoff,
    Blocked,
    FetchError,
    FetchFailed,
    NotCached,
    RobotsDisallowed,
    TooLarge,
    UndatedRefused,
    UnsupportedContent,
    WebConfigError,
)
from memento.web.limits import host_spacer, process_semaphore
from memento.web.search_result import UndatedPolicy, coerce_date, parse_date, passes_cutoff
from memento.web.url_cache import URLCache, normalize_url

__all__ = ["Page", "Fetcher", "DEFAULT_USER_AGENT", "ALLOWED_CONTENT_TYPES"]

logger = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "memento-dspy/0.1 (research agent; +https://pypi.org/project/memento-dspy/)"
ALLOWED_CONTENT_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


class Page(BaseModel):
    """A fetched (or corpus-served) page: the URL asked for, the URL that answered, extracted text and metadata."""

    model_config = ConfigDict(extra="forbid")

    url: str
    final_url: str
    title: str = ""
    text: str = ""
    published: dt.date | None = None
    status: int = 200
    from_cache: bool = False


class _Retryable(Exception):
    """A 429/5xx answer or a connection error worth another attempt."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class _Raw:
    """The parts of an HTTP answer the fetcher uses."""

    __slots__ = ("status", "headers", "body", "url")

    def __init__(self, url: str, status: int, headers: dict[str, str], body: bytes) -> None:
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body


class _Deadline:
    """Shut a request's socket down when ``seconds`` have passed since it was sent, whether the server is still
    dripping its headers or its body (a socket's read timeout restarts with every byte); ``expired`` tells the
    reader why its read ended. The socket is the one the guarded adapter reports
    (:func:`memento.web.guarded_adapter.watch_sockets`), else the response's."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._resp: Any = None
        self.expired = False

    def __enter__(self) -> _Deadline:
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def watch(self, sock: Any) -> None:
        """The socket the request reads from (shut at once when the deadline has already passed)."""
        with self._lock:
            self._sock = sock if isinstance(sock, socket.socket) else None
            late = self.expired
        if late:
            self._shut()

    def watch_response(self, resp: Any) -> None:
        """The response whose socket is shut when no socket was reported."""
        with self._lock:
            self._resp = resp

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
        self._shut()

    def _shut(self) -> None:
        with self._lock:
            sock, resp = self._sock, self._resp
        if sock is None and resp is not None:
            sock = _socket_of(resp)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
            elif resp is not None:
                resp.close()
        except OSError:
            pass


def _socket_of(resp: Any) -> socket.socket | None:
    """The socket a streaming ``requests`` response reads from (the connection's, or the one behind the body's
    file object once http.client has detached it from a closing connection)."""
    raw = getattr(resp, "raw", None)
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is None:
        fileobj = getattr(getattr(raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fileobj, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


class Fetcher:
    """Fetch web pages politely and safely, with a persistent URL cache (see the module docstring).

    Args:
        cache_dir: the URL cache directory (``None``: no cache: every fetch hits the network).
        user_agent: the User-Agent sent and matched against robots.txt.
        timeout: read timeout in seconds; the whole response (status line, headers and body) must also arrive within
            ``2 × timeout`` of sending the request.
        connect_timeout: connect timeout (default ``min(timeout, 10)``).
        max_bytes: size cap of a body.
        max_concurrent: requests in flight across the whole process (shared by every Fetcher with this limit).
        host_interval: minimum seconds between two requests to one host (process-wide).
        allow_private: allow private/loopback targets (local test servers, intranets); link-local only if listed.
        allowed_private_hosts: these hosts/IPs may be private (``{"127.0.0.1"}``), and no other.
        undated: the default policy for undated pages under a cutoff (``"keep"`` | ``"drop"``).
        offline: serve only cached pages (:class:`NotCached` otherwise); no request is ever sent.
        retries: extra attempts on 429/5xx/connection errors.
        backoff: first backoff wait in seconds (doubled per attempt).
        max_retry_wait: cap of one wait, including a server's ``Retry-After``.
        max_redirects: redirect hops followed.
        obey_robots: check robots.txt (leave on for the public web).
        robots_max_age: seconds a cached robots.txt stays valid.

    Example:
        >>> fetcher = Fetcher(cache_dir=".cache/web", host_interval=1.0)  # doctest: +SKIP
        >>> fetcher.fetch("https://example.org/").text[:40]  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        cache_dir: str | Path | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        timeout: float = 20.0,
        connect_timeout: float | None = None,
        max_bytes: int = 5_000_000,
        max_concurrent: int = 4,
        host_interval: float = 0.5,
        allow_private: bool = False,
        allowed_private_hosts: set[str] | frozenset[str] | None = None,
        undated: UndatedPolicy = "keep",
        offline: bool = False,
        retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 30.0,
        max_redirects: int = 5,
        obey_robots: bool = True,
        robots_max_age: float = 86_400.0,
    ) -> None:
        import requests

        from memento.web.guarded_adapter import GuardedAdapter

        try:  # extraction needs it: a broken install fails here, once, not as an error on every page
            import trafilatura  # noqa: F401
        except ImportError as exc:
            raise WebConfigError(f"trafilatura cannot be imported ({exc}); reinstall memento-dspy") from exc
        self.cache = URLCache(cache_dir) if cache_dir is not None else None
        self.user_agent = user_agent
        self.timeout = timeout
        self.connect_timeout = connect_timeout if connect_timeout is not None else min(timeout, 10.0)
        self.max_bytes = max_bytes
        self.max_concurrent = max_concurrent
        self.host_interval = host_interval
        self.allow_private = allow_private
        self.allowed_private_hosts = frozenset(_host_form(h) for h in allowed_private_hosts or ()) or None
        self.undated: UndatedPolicy = undated
        self.offline = offline
        self.retries = retries
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self.max_redirects = max_redirects
        self.obey_robots = obey_robots
        self.robots_max_age = robots_max_age
        self._semaphore = process_semaphore("fetch", max_concurrent)
        self._spacer = host_spacer("fetch")
        self._session = requests.Session()
        adapter = GuardedAdapter(
            self._peer_guard, pool_connections=16, pool_maxsize=max(16, max_concurrent), max_retries=0
        )
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._robots: dict[str, Any] = {}  # origin -> Protego parser | True (allow all) | False (deny all)
        self._crawl_delay: dict[str, float] = {}
        self._robots_locks: dict[str, threading.Lock] = {}
        self._failures: dict[str, FetchError] = {}  # normalised URL -> permanent failure (4xx, type, size)
        self._lock = threading.Lock()
        self._sleep = time.sleep  # tenacity's sleep between attempts (tests swap it to record the waits)
        self.requests_sent = 0  # HTTP requests actually sent (pages, robots, redirect hops, retries)

    def __deepcopy__(self, memo: dict[int, Any]) -> Fetcher:
        return self  # shared resource (cache, limits, session): deep copies of programs keep using it

    # ----------------------------------------------------------------------------------------------- public
    def fetch(self, url: str, before: dt.date | str | None = None, *, undated: UndatedPolicy | None = None) -> Page:
        """Fetch ``url`` (from the cache when present) and return its extracted text.

        Args:
            url: an http(s) URL.
            before: the date cutoff; a page published on or after it is refused.
            undated: policy for undated pages under a cutoff (default: the fetcher's).

        Raises:
            RobotsDisallowed, Blocked, TooLarge, UnsupportedContent, FetchFailed, AfterCutoff, NotCached: every
            failure is one of these (all :class:`~memento.web.errors.FetchError`).
        """
        key = normalize_url(url)
        with self._lock:
            known = self._failures.get(key)
        if known is not None:
            raise known  # a permanent failure seen before in this process: no second request
        try:
            page = self._fetch(url)
        except FetchError as exc:
            if _permanent(exc):
                with self._lock:
                    self._failures[key] = exc
            raise
        except Exception as exc:  # anything unexpected still becomes a typed error
            logger.warning("unexpected error fetching %s: %r", scrub_url(url), exc)
            raise FetchFailed(f"{url}: {type(exc).__name__}: {exc}", url=url) from exc
        cutoff = coerce_date(before)
        policy = undated or self.undated
        if not passes_cutoff(page.published, cutoff, policy):
            if page.published is None:
                raise UndatedRefused(f"{url} has no date and undated pages are dropped (cutoff {cutoff})", url=url)
            raise AfterCutoff(f"{url} was published {page.published}, not before the cutoff {cutoff}", url=url)
        return page

    # --------------------------------------------------------------------------------------------- pipeline
    def _fetch(self, url: str) -> Page:
        current = url.strip()
        chain: list[str] = []
        private: set[str] = set()  # hosts of this chain that resolved to non-public addresses
        for _hop in range(self.max_redirects + 1):
            chain.append(current)
            cached = self._cached(current, original=url)
            if cached is not None:
                page = _page_from_cache(url, cached)
                self._remember(chain[:-1], page, private | set(cached["private_hosts"]))
                return page
            if self.offline:
                raise NotCached(f"{current} is not in the URL cache (offline mode)", url=url)
            if self._check_target(current, original=url):
                private.add(_host(current))
            if self.obey_robots and not self._robots_allow(current):
                raise RobotsDisallowed(f"robots.txt of {_origin(current)} disallows {current}", url=url)
            raw = self._request(current, original=url)
            if raw.status in _REDIRECTS:
                location = raw.headers.get("location")
                if not location:
                    raise FetchFailed(f"{current}: redirect without Location", url=url, status=raw.status)
                current = urljoin(current, location)
                continue
            if not 200 <= raw.status < 300:
                raise FetchFailed(f"{current}: HTTP {raw.status}", url=url, status=raw.status)
            page = self._extract(url, current, raw)
            self._remember(chain, page, private)
            return page
        raise FetchFailed(f"{url}: more than {self.max_redirects} redirects", url=url)

    def _cached(self, current: str, *, original: str) -> dict[str, Any] | None:
        """The cache entry of ``current`` when the current policy admits every private host it was fetched from.

        An entry fetched under a wider policy (``allow_private``) is not served to a stricter fetcher: it is
        fetched again through the guards (offline, where nothing may be fetched, it is :class:`Blocked`)."""
        if self.cache is None:
            return None
        row = self.cache.get_page(current)
        if row is None:
            return None
        refused = [h for h in row["private_hosts"] if not self._admits_private(h, _literal_ip(h))]
        if not refused:
            return row
        if self.offline:
            raise Blocked(f"refused {current}: cached from the non-public host {refused[0]}", url=original)
        return None

    def _remember(self, urls: list[str], page: Page, private: set[str]) -> None:
        if self.cache is None:
            return
        record = page.model_dump()
        record["private_hosts"] = sorted(private)
        for u in urls:
            self.cache.put_page(u, record)

    # --------------------------------------------------------------------------------------------- guards
    def _check_target(self, url: str, *, original: str) -> bool:
        """Refuse non-http(s) URLs and private targets, resolving the host without connecting to it.

        Returns:
            Whether the host resolved to a non-public address that the policy admits."""
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise Blocked(f"malformed URL {url!r}: {exc}", url=original) from None
        if parts.scheme.lower() not in ("http", "https"):
            raise Blocked(f"refused {url}: only http and https URLs are fetched", url=original)
        host = (parts.hostname or "").lower()
        if not host:
            raise Blocked(f"refused {url}: no host", url=original)
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError:
            raise Blocked(f"refused {url}: bad port", url=original) from None
        try:
            addresses = {ipaddress.ip_address(host)}
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
            except (socket.gaierror, UnicodeError) as exc:
                raise FetchFailed(f"cannot resolve {host}: {exc}", url=original) from None
            addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
        for ip in addresses:
            if not self._address_allowed(host, ip):
                raise Blocked(f"refused {url}: {host} resolves to the non-public address {ip}", url=original)
        return not all(_is_public(ip) for ip in addresses)

    def _address_allowed(self, host: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        """Public unicast addresses always (an IPv6 address only when every IPv4 address it embeds is public too);
        a non-public one when its host or address is in ``allowed_private_hosts``, or under ``allow_private``
        without a list (link-local, the cloud metadata range, only when listed)."""
        if _is_public(ip):
            return True
        return self._admits_private(host, ip)

    def _admits_private(self, host: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None) -> bool:
        """Whether the current policy lets ``host`` (resolving to the non-public ``ip``) be fetched."""
        if self.allowed_private_hosts is not None:  # the host's own forms: its name, or the address it names
            names = {_host_form(host)} | ({str(ip)} if ip is not None else set())  # never an embedded IPv4
            return bool(names & self.allowed_private_hosts)
        if not self.allow_private:
            return False
        return ip is None or not any(a.is_link_local for a in (ip, *_embedded_ipv4(ip)))

    def _peer_guard(self, host: str, peer: str) -> None:
        """Check the address a connection actually reached (the client resolves the name again: DNS rebinding)."""
        host = host.strip("[]").lower()
        if not self._address_allowed(host, ipaddress.ip_address(peer)):
            raise Blocked(f"refused {host}: the connection reached the non-public address {peer}", url=host)

    def _robots_allow(self, url: str) -> bool:
        origin = _origin(url)
        parser = self._robots_for(origin)
        if parser is True or parser is False:
            return parser
        return bool(parser.can_fetch(url, self.user_agent))

    def _robots_for(self, origin: str) -> Any:
        with self._lock:
            if origin in self._robots:
                return self._robots[origin]
            lock = self._robots_locks.setdefault(origin, threading.Lock())
        with lock:
            with self._lock:
                if origin in self._robots:
                    return self._robots[origin]
            stored = self.cache.get_robots(origin, max_age=self.robots_max_age) if self.cache is not None else None
            if stored is not None:
                status, body = stored
            else:
                status, body = self._download_robots(origin)
                if self.cache is not None and status < 500:
                    self.cache.put_robots(origin, status, body)
            parser = _robots_parser(status, body)
            if parser is not True and parser is not False:
                delay = parser.crawl_delay(self.user_agent)
                if delay:
                    self._crawl_delay[urlsplit(origin).netloc] = min(float(delay), 30.0)
            with self._lock:
                self._robots[origin] = parser
            return parser

    def _download_robots(self, origin: str) -> tuple[int, str]:
        """``(status, body)`` of ``origin/robots.txt``; redirects followed with the SSRF guard at every hop.
        A network failure is reported as status 599 (unreachable: disallow all)."""
        current = origin + "/robots.txt"
        try:
            for _ in range(self.max_redirects + 1):
                self._check_target(current, original=current)
                raw = self._request(current, original=current, limit=500_000, retries=1, check_type=False)
                if raw.status in _REDIRECTS and raw.headers.get("location"):
                    current = urljoin(current, raw.headers["location"])
                    continue
                if raw.status == 200:
                    return 200, raw.body.decode("utf-8", errors="replace")
                return raw.status, ""
        except (FetchFailed, TooLarge) as exc:
            logger.info("robots.txt of %s unreachable: %s", origin, exc)
            return 599, ""
        except Blocked:
            return 403, ""  # a robots redirect to a refused target: treat as missing (the page is checked itself)
        return 599, ""

    # -------------------------------------------------------------------------------------------- requests
    def _request(
        self,
        url: str,
        *,
        original: str,
        limit: int | None = None,
        retries: int | None = None,
        check_type: bool = True,
    ) -> _Raw:
        from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt

        attempts = (self.retries if retries is None else retries) + 1
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Retryable),
            sleep=self._sleep,
            reraise=False,
        )
        try:
            for attempt in retrying:
                with attempt:
                    raw = self._attempt(url, original=original, limit=limit or self.max_bytes, check_type=check_type)
            return raw
        except RetryError as exc:
            last = exc.last_attempt.exception()
            status = getattr(last, "status", None)
            raise FetchFailed(f"{url}: {last} (after {attempts} attempts)", url=original, status=status) from None

    def _wait(self, retry_state: Any) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_wait))
        return min(self.backoff * (2 ** (retry_state.attempt_number - 1)), self.max_retry_wait)

    def _attempt(self, url: str, *, original: str, limit: int, check_type: bool) -> _Raw:
        """One request within one deadline of ``2 × timeout`` from sending it to the body's last byte."""
        from memento.web.guarded_adapter import watch_sockets

        host = urlsplit(url).netloc.lower()
        # wait for this host's turn before taking a slot: a sleeping request must not hold up other hosts
        self._spacer.wait(host, max(self.host_interval, self._crawl_delay.get(host, 0.0)))
        with self._semaphore:
            with self._lock:
                self.requests_sent += 1
            deadline = _Deadline(max(self.timeout, 0.5) * 2)
            with deadline, watch_sockets(deadline.watch):
                resp = self._send(url, original=original, deadline=deadline)
                deadline.watch_response(resp)
                try:
                    headers = {k.lower(): v for k, v in resp.headers.items()}
                    status = resp.status_code
                    if status == 429 or status >= 500:
                        raise _Retryable(
                            f"HTTP {status}", status=status, retry_after=_retry_after(headers.get("retry-after"))
                        )
                    if status in _REDIRECTS or not 200 <= status < 300:
                        return _Raw(url, status, headers, b"")
                    if check_type:
                        _check_content_type(url, original, headers.get("content-type"))
                    body = self._read_body(resp, url=url, original=original, headers=headers, limit=limit)
                    if deadline.expired:  # the shut-down socket looked like the end of a body without Content-Length
                        raise _too_slow(url, original, deadline)
                    return _Raw(url, status, headers, body)
                except _requests_error() as exc:
                    if deadline.expired:
                        raise _too_slow(url, original, deadline) from None
                    raise _read_failure(exc, url, original) from None
                finally:
                    resp.close()

    def _send(self, url: str, *, original: str, deadline: _Deadline) -> Any:
        """Send the request and read its status line and headers (the deadline cuts off a dripping server)."""
        import requests

        try:
            return self._session.get(
                url,
                headers={"User-Agent": self.user_agent, "Accept": "text/html,application/xhtml+xml,text/plain"},
                stream=True,
                allow_redirects=False,
                timeout=(self.connect_timeout, self.timeout),
            )
        except requests.exceptions.RequestException as exc:
            if deadline.expired:
                raise _too_slow(url, original, deadline) from None
            if isinstance(exc, requests.exceptions.ConnectionError):
                raise _Retryable(f"connection error: {error_line(exc, with_type=False, limit=200)}") from None
            if isinstance(exc, requests.exceptions.Timeout):
                raise FetchFailed(
                    f"{url}: timed out ({error_line(exc, with_type=False, limit=200)})", url=original
                ) from None
            raise FetchFailed(f"{url}: {error_line(exc, with_type=False, limit=200)}", url=original) from None

    def _read_body(self, resp: Any, *, url: str, original: str, headers: dict[str, str], limit: int) -> bytes:
        """The body, within the size cap (the request's deadline, :class:`_Deadline`, bounds its time)."""
        length = headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise TooLarge(f"{url}: Content-Length {length} exceeds the {limit}-byte cap", url=original)
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_content(chunk_size=16_384):
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"{url}: body exceeds the {limit}-byte cap", url=original)
            chunks.append(chunk)
        return b"".join(chunks)

    # ------------------------------------------------------------------------------------------ extraction
    def _extract(self, url: str, final_url: str, raw: _Raw) -> Page:
        ctype = (raw.headers.get("content-type") or "").split(";")[0].strip().lower()
        body = raw.body
        if b"\x00" in body[:2048]:
            raise UnsupportedContent(f"{final_url}: binary content", url=url)
        if ctype == "text/plain" or (not ctype and not body.lstrip()[:1] == b"<"):
            charset = _charset(raw.headers.get("content-type")) or "utf-8"
            text = body.decode(charset, errors="replace").strip()
            return Page(url=scrub_url(url), final_url=scrub_url(final_url), title="", text=text, status=raw.status)
        import trafilatura

        doc = trafilatura.bare_extraction(
            body,
            url=final_url,
            with_metadata=True,
            include_comments=False,
            date_extraction_params={"extensive_search": False, "original_date": True},
        )
        text = (getattr(doc, "text", None) or "") if doc is not None else ""
        title = (getattr(doc, "title", None) or "") if doc is not None else ""
        published = parse_date(getattr(doc, "date", None)) if doc is not None else None
        if not text:
            text = (trafilatura.html2txt(body) or "").strip()
        if not title:
            m = _TITLE.search(body[:200_000])
            if m:
                title = " ".join(m.group(1).decode("utf-8", errors="replace").split())
        return Page(
            url=scrub_url(url),
            final_url=scrub_url(final_url),
            title=title,
            text=text,
            published=published,
            status=raw.status,
        )


# -------------------------------------------------------------------------------------------------- helpers
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use translation: never public
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 IPv4-translated (SIIT): ::ffff:0:a.b.c.d
_ISATAP_IDS = (0x00005EFE, 0x02005EFE)

#: Ranges that are not globally reachable but that some Python versions' ``ipaddress`` reports as global: IANA's
#: special-purpose registries (entries "Globally Reachable: False", and deprecated ones), checked whatever the
#: interpreter's own table holds (3.11 before 3.11.10 still took most of 192.0.0.0/24 for global).
_NOT_GLOBAL = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "192.0.0.0/29",  # IETF protocol assignments (192.0.0.0/24 but the anycast .9 and .10): IPv4 service
        "192.0.0.8/32",  # continuity, dummy address (RFC 7600)
        "192.0.0.11/32",
        "192.0.0.12/30",
        "192.0.0.16/28",
        "192.0.0.32/27",
        "192.0.0.64/26",
        "192.0.0.128/25",
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # deprecated 6to4 relay anycast (RFC 7526)
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::ffff:0:0/96",  # IPv4-mapped
        "::ffff:0:0:0/96",  # IPv4-translated (RFC 2765)
        "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation (RFC 8215)
        "100::/64",  # discard-only (RFC 6666)
        "100:0:0:1::/64",  # dummy IPv6 prefix (RFC 9780)
        "2001::/23",  # IETF protocol assignments (Teredo's embedded client is checked too)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment routing SIDs (RFC 9602)
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated by RFC 3879, still routed inside some sites)
    )
)


def _embedded_ipv4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible
    (``::a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``), NAT64 (``64:ff9b::/96`` and the local-use
    ``64:ff9b:1::/48``), 6to4 (``2002::/16``), Teredo (``2001::/32``, server and client) and ISATAP interface
    identifiers."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    value = int(ip)
    low = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if value >> 32 == 0 and value > 1:  # ::a.b.c.d (deprecated IPv4-compatible form)
        found.append(low)
    if ip in _NAT64 or ip in _NAT64_LOCAL or ip in _TRANSLATED:
        found.append(low)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if (value >> 32) & 0xFFFFFFFF in _ISATAP_IDS:
        found.append(low)
    return found


def _is_global(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Globally reachable unicast: ``ipaddress`` says global, and no special-purpose range says otherwise."""
    if not ip.is_global or ip.is_multicast:
        return False
    plain = ip if isinstance(ip, ipaddress.IPv4Address) else ipaddress.IPv6Address(int(ip))  # without a scope id
    return not any(plain.version == net.version and plain in net for net in _NOT_GLOBAL)


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address whose embedded IPv4 addresses (if any) are global unicast too."""
    return _is_global(ip) and all(_is_global(v4) for v4 in _embedded_ipv4(ip))


def _host_form(host: str) -> str:
    """How a host is compared with ``allowed_private_hosts``: a name lower-cased without brackets or a final dot,
    an address in its canonical text (``0:0::1`` and ``[::1]`` are ``::1``; ``::127.0.0.1`` stays ``::7f00:1``,
    which is not ``127.0.0.1``)."""
    text = str(host).strip().lower().strip("[]").rstrip(".")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def _requests_error() -> type[Exception]:
    """The base class of the errors ``requests`` raises while a body streams."""
    import requests

    return requests.exceptions.RequestException


def _too_slow(url: str, original: str, deadline: _Deadline) -> FetchFailed:
    return FetchFailed(f"{url}: the download took longer than {deadline.seconds:g}s", url=original)


def _read_failure(exc: Exception, url: str, original: str) -> Exception:
    """A body read that failed before the deadline: a read timeout, else a retryable connection error."""
    import requests

    if isinstance(exc, requests.exceptions.ConnectionError):
        if "Read timed out" in str(exc):
            return FetchFailed(f"{url}: timed out while reading", url=original)
        return _Retryable(f"connection error while reading: {error_line(exc, with_type=False, limit=200)}")
    return FetchFailed(f"{url}: {error_line(exc, with_type=False, limit=200)}", url=original)


def _permanent(exc: FetchError) -> bool:
    """Failures that another request would only repeat: 4xx other than 408/429, wrong type, too large."""
    if isinstance(exc, TooLarge | UnsupportedContent):
        return True
    status = getattr(exc, "status", None)
    return isinstance(exc, FetchFailed) and status is not None and 400 <= status < 500 and status not in (408, 429)


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _literal_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _origin(url: str) -> str:
    parts = urlsplit(normalize_url(url))
    return f"{parts.scheme}://{parts.netloc}"


def _robots_parser(status: int, body: str) -> Any:
    if status >= 500:
        return False  # unreachable: complete disallow (RFC 9309 §2.3.1.4)
    if status >= 400 or not body.strip():
        return True  # unavailable or empty: allow all (RFC 9309 §2.3.1.3)
    from protego import Protego

    return Protego.parse(body)


def _check_content_type(url: str, original: str, header: str | None) -> None:
    if not header:
        return  # sniffed later (binary bodies are refused there)
    ctype = header.split(";")[0].strip().lower()
    if ctype not in ALLOWED_CONTENT_TYPES:
        raise UnsupportedContent(f"{url}: content type {ctype} is not html, xhtml or plain text", url=original)


def _charset(header: str | None) -> str | None:
    if not header:
        return None
    m = re.search(r"charset=([\w.-]+)", header, re.IGNORECASE)
    if not m:
        return None
    import codecs

    try:
        return codecs.lookup(m.group(1)).name
    except LookupError:
        return None


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def _page_from_cache(url: str, row: dict[str, Any]) -> Page:
    return Page(
        url=scrub_url(url),
        final_url=row["final_url"],
        title=row["title"],
        text=row["text"],
        published=parse_date(row["published"]),
        status=row["status"],
        from_cache=True,
    )
