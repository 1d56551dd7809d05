"""A polite, guarded, cached page fetcher.

Every outcome of :meth:`Fetcher.fetch` is a :class:`~memento.web.page.Page` or a typed
:class:`~memento.web.errors.FetchError`. :class:`Fetcher` is the pipeline (cache, guards, robots, redirects,
retries, cutoff); its parts live one per module: :mod:`~memento.web.address_policy` (the SSRF guard),
:mod:`~memento.web.robots_rules`, :mod:`~memento.web.request_deadline` (one deadline per request),
:mod:`~memento.web.http_answer` (retryable and permanent answers, content types) and
:mod:`~memento.web.page_extraction` (trafilatura). In short:

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
import logging
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from memento.utils.scrub import scrub_url
from memento.utils.text import error_line
from memento.web.address_policy import AddressPolicy, literal_ip
from memento.web.errors import (
    AfterCutoff,
    Blocked,
    FetchError,
    FetchFailed,
    NotCached,
    RobotsDisallowed,
    TooLarge,
    UndatedRefused,
    WebConfigError,
)
from memento.web.http_answer import (
    ALLOWED_CONTENT_TYPES,
    REDIRECTS,
    RawAnswer,
    Retryable,
    check_content_type,
    is_permanent,
    read_failure,
    requests_error,
    retry_after,
    too_slow,
)
from memento.web.limits import host_spacer, process_semaphore
from memento.web.page import Page, page_from_cache
from memento.web.page_extraction import extract_page
from memento.web.request_deadline import Deadline
from memento.web.robots_rules import RobotsRules, origin_of
from memento.web.search_result import UndatedPolicy, coerce_date, passes_cutoff
from memento.web.url_cache import URLCache, normalize_url

__all__ = ["Page", "Fetcher", "DEFAULT_USER_AGENT", "ALLOWED_CONTENT_TYPES"]

logger = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "memento-dspy/0.1 (research agent; +https://pypi.org/project/memento-dspy/)"


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
        self.address_policy = AddressPolicy(allow_private=allow_private, allowed_private_hosts=allowed_private_hosts)
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
            self._check_peer, pool_connections=16, pool_maxsize=max(16, max_concurrent), max_retries=0
        )
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self.robots = RobotsRules(self._download_robots, cache=self.cache, max_age=robots_max_age)
        self._failures: dict[str, FetchError] = {}  # normalised URL -> permanent failure (4xx, type, size)
        self._lock = threading.Lock()
        self._sleep = time.sleep  # tenacity's sleep between attempts (tests swap it to record the waits)
        self.requests_sent = 0  # HTTP requests actually sent (pages, robots, redirect hops, retries)

    def __deepcopy__(self, memo: dict[int, Any]) -> Fetcher:
        return self  # shared resource (cache, limits, session): deep copies of programs keep using it

    # ------------------------------------------------------------------------------------------- settings
    @property
    def allow_private(self) -> bool:
        """Private/loopback targets admitted (see :class:`~memento.web.address_policy.AddressPolicy`)."""
        return self.address_policy.allow_private

    @allow_private.setter
    def allow_private(self, value: bool) -> None:
        self.address_policy.allow_private = value

    @property
    def allowed_private_hosts(self) -> frozenset[str] | None:
        """The only private hosts/addresses admitted, in their canonical forms (``None``: no list)."""
        return self.address_policy.allowed_private_hosts

    def _check_peer(self, host: str, peer: str) -> None:
        """The guarded adapter's check of the address a connection reached (the policy as it is now)."""
        self.address_policy.check_peer(host, peer)

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
            if is_permanent(exc):
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
                page = page_from_cache(url, cached)
                self._remember(chain[:-1], page, private | set(cached["private_hosts"]))
                return page
            if self.offline:
                raise NotCached(f"{current} is not in the URL cache (offline mode)", url=url)
            if self.address_policy.check_target(current, original=url):
                private.add(_host(current))
            if self.obey_robots and not self.robots.allows(current, self.user_agent):
                raise RobotsDisallowed(f"robots.txt of {origin_of(current)} disallows {current}", url=url)
            raw = self._request(current, original=url)
            if raw.status in REDIRECTS:
                location = raw.headers.get("location")
                if not location:
                    raise FetchFailed(f"{current}: redirect without Location", url=url, status=raw.status)
                current = urljoin(current, location)
                continue
            if not 200 <= raw.status < 300:
                raise FetchFailed(f"{current}: HTTP {raw.status}", url=url, status=raw.status)
            page = extract_page(url, current, raw)
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
        refused = [h for h in row["private_hosts"] if not self.address_policy.admits_private(h, literal_ip(h))]
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
    def _download_robots(self, origin: str) -> tuple[int, str]:
        """``(status, body)`` of ``origin/robots.txt``; redirects followed with the SSRF guard at every hop.
        A network failure is reported as status 599 (unreachable: disallow all)."""
        current = origin + "/robots.txt"
        try:
            for _ in range(self.max_redirects + 1):
                self.address_policy.check_target(current, original=current)
                raw = self._request(current, original=current, limit=500_000, retries=1, check_type=False)
                if raw.status in REDIRECTS and raw.headers.get("location"):
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
    ) -> RawAnswer:
        from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt

        attempts = (self.retries if retries is None else retries) + 1
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            retry=retry_if_exception_type(Retryable),
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
            return max(0.0, min(float(retry_after), self.max_retry_wait))
        return min(self.backoff * 2.0 ** (int(retry_state.attempt_number) - 1), self.max_retry_wait)

    def _attempt(self, url: str, *, original: str, limit: int, check_type: bool) -> RawAnswer:
        """One request within one deadline of ``2 × timeout`` from sending it to the body's last byte."""
        from memento.web.guarded_adapter import watch_sockets

        host = urlsplit(url).netloc.lower()
        # wait for this host's turn before taking a slot: a sleeping request must not hold up other hosts
        self._spacer.wait(host, max(self.host_interval, self.robots.crawl_delay(host)))
        with self._semaphore:
            with self._lock:
                self.requests_sent += 1
            deadline = Deadline(max(self.timeout, 0.5) * 2)
            with deadline, watch_sockets(deadline.watch):
                resp = self._send(url, original=original, deadline=deadline)
                deadline.watch_response(resp)
                try:
                    headers = {k.lower(): v for k, v in resp.headers.items()}
                    status = resp.status_code
                    if status == 429 or status >= 500:
                        raise Retryable(
                            f"HTTP {status}", status=status, retry_after=retry_after(headers.get("retry-after"))
                        )
                    if status in REDIRECTS or not 200 <= status < 300:
                        return RawAnswer(url, status, headers, b"")
                    if check_type:
                        check_content_type(url, original, headers.get("content-type"))
                    body = self._read_body(resp, url=url, original=original, headers=headers, limit=limit)
                    if deadline.expired:  # the shut-down socket looked like the end of a body without Content-Length
                        raise too_slow(url, original, deadline)
                    return RawAnswer(url, status, headers, body)
                except requests_error() as exc:
                    if deadline.expired:
                        raise too_slow(url, original, deadline) from None
                    raise read_failure(exc, url, original) from None
                finally:
                    resp.close()

    def _send(self, url: str, *, original: str, deadline: Deadline) -> Any:
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
                raise too_slow(url, original, deadline) from None
            if isinstance(exc, requests.exceptions.ConnectionError):
                raise Retryable(f"connection error: {error_line(exc, with_type=False, limit=200)}") from None
            if isinstance(exc, requests.exceptions.Timeout):
                raise FetchFailed(
                    f"{url}: timed out ({error_line(exc, with_type=False, limit=200)})", url=original
                ) from None
            raise FetchFailed(f"{url}: {error_line(exc, with_type=False, limit=200)}", url=original) from None

    def _read_body(self, resp: Any, *, url: str, original: str, headers: dict[str, str], limit: int) -> bytes:
        """The body, within the size cap (the request's deadline, :class:`Deadline`, bounds its time)."""
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


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()
