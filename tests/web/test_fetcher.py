"""Fetcher behaviour against a local HTTP site (robots, cache, limits, retries, caps, SSRF, cutoffs)."""

from __future__ import annotations

import datetime as dt
import functools
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

import pytest

from memento.testing import LocalSite, respond
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
)
from memento.web.fetcher import Fetcher, Page

BODY = "<p>" + "The quick brown fox studies the history of the river valley and its people. " * 12 + "</p>"


def _html(title: str, date: str | None = None) -> bytes:
    meta = f'<meta property="article:published_time" content="{date}">' if date else ""
    return (
        f"<html><head><title>{title}</title>{meta}</head><body><article><h1>{title}</h1>{BODY}</article></body></html>"
    ).encode()


class Site(LocalSite):
    """A local site; records every request path and the peak number of concurrent ``/work`` requests."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.flaky_left = 1
        super().__init__()

    def route(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?")[0]

        send = functools.partial(respond, h)

        if path == "/robots.txt":
            send(200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
        elif path == "/old":
            send(200, _html("Old news", "2015-06-01"))
        elif path == "/new":
            send(200, _html("New news", "2023-02-01"))
        elif path == "/undated":
            send(200, _html("No date here"))
        elif path == "/plain":
            send(200, b"plain words only", "text/plain; charset=utf-8")
        elif path.startswith("/private/"):
            send(200, _html("secret"))
        elif path == "/flaky":
            with self.lock:
                first = self.flaky_left > 0
                self.flaky_left -= 1
            if first:
                send(429, b"slow down", "text/plain", Retry_After="7")
            else:
                send(200, _html("Flaky but fine", "2016-01-01"))
        elif path == "/broken":
            send(503, b"down", "text/plain")
        elif path == "/missing":
            send(404, b"nope", "text/plain")
        elif path == "/slow":
            time.sleep(1.5)
            send(200, _html("Slow"))
        elif path == "/work":
            # Counted in flight only while the server holds the request and before it answers, so the count
            # can never include a request whose client has already received its response.
            with self.lock:
                self.active += 1
                self.peak = max(self.peak, self.active)
            time.sleep(0.05)
            with self.lock:
                self.active -= 1
            send(200, _html("Work item", "2014-01-01"))
        elif path == "/big":  # no Content-Length: the cap must be enforced while streaming
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.end_headers()
            for _ in range(40):
                h.wfile.write(b"<p>" + b"x" * 5000 + b"</p>")
        elif path == "/big-declared":
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", str(10**9))
            h.end_headers()
        elif path == "/binary":
            send(200, b"\x89PNG\r\n\x1a\n\x00\x00" * 10, "image/png")
        elif path == "/sneaky-binary":
            send(200, b"\x00\x01\x02\x03" * 100, "text/html")
        elif path == "/to-old":
            send(302, b"", Location="/old")
        elif path == "/to-private-net":
            send(302, b"", Location="http://10.0.0.1/admin")
        elif path == "/to-metadata":
            send(301, b"", Location="http://169.254.169.254/latest/meta-data/")
        elif path == "/to-disallowed":
            send(302, b"", Location="/private/page")
        elif path == "/to-file":
            send(302, b"", Location="file:///etc/passwd")
        else:
            send(404, b"not found", "text/plain")


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


def make_fetcher(tmp_path, **kw) -> Fetcher:
    opts = dict(
        cache_dir=tmp_path / "web",
        allow_private=True,
        allowed_private_hosts={"127.0.0.1"},
        host_interval=0.0,
        backoff=0.01,
        max_retry_wait=0.05,
        timeout=5.0,
    )
    opts.update(kw)
    return Fetcher(**opts)


def test_extracts_text_title_and_date(site, tmp_path):
    page = make_fetcher(tmp_path).fetch(site.base + "/old")
    assert page.title == "Old news"
    assert "quick brown fox" in page.text
    assert page.published == dt.date(2015, 6, 1)
    assert page.status == 200 and not page.from_cache
    plain = make_fetcher(tmp_path).fetch(site.base + "/plain")
    assert plain.text == "plain words only"


def test_robots_disallowed_path_gets_zero_requests(site, tmp_path):
    fetcher = make_fetcher(tmp_path)
    with pytest.raises(RobotsDisallowed):
        fetcher.fetch(site.base + "/private/secret.html")
    with pytest.raises(RobotsDisallowed):  # also when reached through a redirect
        fetcher.fetch(site.base + "/to-disallowed")
    assert site.hits("/private/") == 0
    assert site.hits("/robots.txt") == 1  # fetched once per host, then cached
    fetcher.fetch(site.base + "/old")
    assert site.hits("/robots.txt") == 1


def test_user_agent_is_sent_and_matched(site, tmp_path):
    seen: list[str] = []
    original = site.route

    def spy(h):
        seen.append(h.headers.get("User-Agent"))
        original(h)

    site.route = spy
    make_fetcher(tmp_path, user_agent="memento-test/1.0 (+https://example.org)").fetch(site.base + "/old")
    assert seen and all(ua == "memento-test/1.0 (+https://example.org)" for ua in seen)


def test_cache_serves_second_fetch_without_request_also_in_new_fetcher(site, tmp_path):
    fetcher = make_fetcher(tmp_path)
    first = fetcher.fetch(site.base + "/old")
    again = fetcher.fetch(site.base.replace("http://", "HTTP://") + "/old#section")  # same normalised URL
    assert not first.from_cache and again.from_cache
    assert again.text == first.text and again.published == first.published
    later = make_fetcher(tmp_path)  # a later run on the same cache dir
    assert later.fetch(site.base + "/old").from_cache
    assert site.hits("/old") == 1
    assert later.requests_sent == 0


def test_redirect_chain_is_cached_under_every_hop(site, tmp_path):
    fetcher = make_fetcher(tmp_path)
    page = fetcher.fetch(site.base + "/to-old")
    assert page.final_url == site.base + "/old" and page.title == "Old news"
    assert fetcher.fetch(site.base + "/to-old").from_cache
    assert fetcher.fetch(site.base + "/old").from_cache
    assert site.hits("/to-old") == 1 and site.hits("/old") == 1


def test_offline_mode_serves_only_cached_pages(site, tmp_path):
    make_fetcher(tmp_path).fetch(site.base + "/old")
    before = len(site.paths)
    offline = make_fetcher(tmp_path, offline=True)
    assert offline.fetch(site.base + "/old").from_cache
    with pytest.raises(NotCached):
        offline.fetch(site.base + "/new")
    assert len(site.paths) == before and offline.requests_sent == 0


def test_cutoff_and_undated_policy(site, tmp_path):
    fetcher = make_fetcher(tmp_path)
    cutoff = dt.date(2020, 1, 1)
    assert fetcher.fetch(site.base + "/old", before=cutoff).published == dt.date(2015, 6, 1)
    with pytest.raises(AfterCutoff):
        fetcher.fetch(site.base + "/new", before=cutoff)
    with pytest.raises(AfterCutoff):  # on the cutoff day itself
        fetcher.fetch(site.base + "/new", before="2023-02-01")
    assert fetcher.fetch(site.base + "/new", before="2023-02-02").title == "New news"
    assert fetcher.fetch(site.base + "/undated", before=cutoff).title == "No date here"
    with pytest.raises(UndatedRefused):
        fetcher.fetch(site.base + "/undated", before=cutoff, undated="drop")
    with pytest.raises(AfterCutoff):  # cached pages obey the cutoff too
        make_fetcher(tmp_path).fetch(site.base + "/new", before=cutoff)


def test_retry_after_429_then_success(site, tmp_path):
    fetcher = make_fetcher(tmp_path, max_retry_wait=3.0)
    waits: list[float] = []
    fetcher._sleep = lambda seconds: waits.append(float(seconds))  # record instead of sleeping
    page = fetcher.fetch(site.base + "/flaky")
    assert page.title == "Flaky but fine"
    assert site.hits("/flaky") == 2
    assert waits == [3.0]  # Retry-After: 7 honoured, capped at max_retry_wait


def test_5xx_is_retried_then_fails_and_4xx_is_not_retried(site, tmp_path):
    fetcher = make_fetcher(tmp_path, retries=2)
    fetcher._sleep = lambda s: None
    with pytest.raises(FetchFailed) as info:
        fetcher.fetch(site.base + "/broken")
    assert info.value.status == 503 and site.hits("/broken") == 3
    with pytest.raises(FetchFailed) as info:
        fetcher.fetch(site.base + "/missing")
    assert info.value.status == 404 and site.hits("/missing") == 1
    with pytest.raises(FetchFailed):  # a permanent failure is remembered: no second request
        fetcher.fetch(site.base + "/missing#again")
    assert site.hits("/missing") == 1


def test_slow_url_times_out(site, tmp_path):
    with pytest.raises(FetchFailed, match="timed out"):
        make_fetcher(tmp_path, timeout=0.3).fetch(site.base + "/slow")
    assert site.hits("/slow") == 1  # a read timeout is not retried


def test_size_cap_streaming_and_declared(site, tmp_path):
    fetcher = make_fetcher(tmp_path, max_bytes=50_000)
    with pytest.raises(TooLarge):
        fetcher.fetch(site.base + "/big")
    with pytest.raises(TooLarge, match="Content-Length"):
        fetcher.fetch(site.base + "/big-declared")


def test_binary_content_is_refused(site, tmp_path):
    fetcher = make_fetcher(tmp_path)
    with pytest.raises(UnsupportedContent, match="image/png"):
        fetcher.fetch(site.base + "/binary")
    with pytest.raises(UnsupportedContent, match="binary"):
        fetcher.fetch(site.base + "/sneaky-binary")
    with pytest.raises(UnsupportedContent):
        fetcher.fetch(site.base + "/binary")
    assert site.hits("/binary") == 1


def test_ssrf_guard_refuses_private_targets_without_connecting(site, tmp_path):
    # Loopback without permission: refused before any request.
    strict = make_fetcher(tmp_path, allow_private=False, allowed_private_hosts=None)
    with pytest.raises(Blocked):
        strict.fetch(site.base + "/old")
    with pytest.raises(Blocked):
        strict.fetch("http://localhost:1/x")
    assert site.paths == [] and strict.requests_sent == 0
    # Loopback allowed for 127.0.0.1 only: redirects to other private targets are refused without connecting
    # (the test harness raises on any non-loopback connect, which would surface as FetchFailed, not Blocked).
    fetcher = make_fetcher(tmp_path)
    for path in ("/to-private-net", "/to-metadata", "/to-file"):
        with pytest.raises(Blocked):
            fetcher.fetch(site.base + path)
    for url in ("http://10.0.0.1/", "http://169.254.169.254/latest", "http://[::1]:9/", "ftp://127.0.0.1/x"):
        with pytest.raises(Blocked):
            fetcher.fetch(url)


def test_never_more_than_four_in_flight_from_eight_threads(site, tmp_path):
    fetcher = make_fetcher(tmp_path, max_concurrent=4)
    results: list[object] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        for j in range(4):
            try:
                page: Page | FetchError = fetcher.fetch(f"{site.base}/work?i={i}&j={j}")
            except FetchError as exc:  # pragma: no cover - would fail the assertion below
                page = exc
            with lock:
                results.append(page)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 32 and all(getattr(r, "title", None) == "Work item" for r in results)
    assert site.hits("/work") == 32 and site.hits("/robots.txt") == 1
    assert 2 <= site.peak <= 4


def test_limit_is_shared_by_all_fetchers_of_the_process(site, tmp_path):
    fetchers = [make_fetcher(tmp_path / str(i), max_concurrent=2) for i in range(4)]
    threads = [
        threading.Thread(target=lambda f=f, i=i: [f.fetch(f"{site.base}/work?f={i}&j={j}") for j in range(3)])
        for i, f in enumerate(fetchers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = Counter(p.split("?")[0] for p in site.paths)
    assert counts["/work"] == 12
    assert site.peak <= 2


def test_host_spacing_orders_requests(site, tmp_path):
    from memento.web.limits import HostSpacer

    spacer = HostSpacer()
    slept: list[float] = []
    import memento.web.limits as limits

    real = limits.time.sleep
    limits.time.sleep = lambda seconds: slept.append(float(seconds))  # record instead of sleeping
    try:
        spacer.wait("h", 0.2)
        spacer.wait("h", 0.2)
        spacer.wait("other", 0.2)
    finally:
        limits.time.sleep = real
    assert len(slept) == 1 and 0.1 < slept[0] <= 0.2


def _robots_route(site: Site, status: int, body: bytes = b"") -> None:
    original = site.route

    def route(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/robots.txt":
            h.send_response(status)
            h.send_header("Content-Type", "text/plain")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        else:
            original(h)

    site.route = route  # type: ignore[method-assign]  # this site answers one path its own way


def test_unreachable_robots_disallows_everything(site, tmp_path):
    _robots_route(site, 503)
    fetcher = make_fetcher(tmp_path)
    fetcher._sleep = lambda s: None
    with pytest.raises(RobotsDisallowed):
        fetcher.fetch(site.base + "/old")
    assert site.hits("/old") == 0


def test_missing_robots_allows_everything(site, tmp_path):
    _robots_route(site, 404)
    fetcher = make_fetcher(tmp_path)
    assert fetcher.fetch(site.base + "/private/x").title == "secret"
    assert make_fetcher(tmp_path).fetch(site.base + "/undated").title == "No date here"
    assert site.hits("/robots.txt") == 1  # the answer is cached on disk for later fetchers too


def test_crawl_delay_widens_host_spacing(site, tmp_path, monkeypatch):
    import memento.web.limits as limits

    _robots_route(site, 200, b"User-agent: *\nCrawl-delay: 2\n")
    slept: list[float] = []
    monkeypatch.setattr(limits.time, "sleep", slept.append)
    fetcher = make_fetcher(tmp_path)
    fetcher.fetch(site.base + "/old")
    fetcher.fetch(site.base + "/new")
    assert slept and max(slept) > 1.0  # the second page waited for the robots.txt crawl delay


def test_web_tools_scrape_through_fetcher_and_url_cache(site, tmp_path):
    from memento.web.web_tools import WebTools

    class NoSearch:
        def search(self, query, k=10, before=None, *, undated="keep"):
            return []

    fetcher = make_fetcher(tmp_path)
    first = WebTools(NoSearch(), fetcher, cutoff="2020-01-01")
    text = first.scrape(site.base + "/old")
    assert (
        text.startswith("<data>\nTitle: Old news\n") and "Published: 2015-06-01" in text and "quick brown fox" in text
    )
    refused = first.scrape(site.base + "/new")
    assert refused.startswith("<data>\nerror:") and "cutoff" in refused
    blocked = first.scrape("http://169.254.169.254/latest/meta-data/")
    assert blocked.startswith("<data>\nerror:") and (first.tool_calls[-1].error or "").startswith("Blocked")
    second = WebTools(NoSearch(), fetcher, cutoff="2020-01-01")  # another task sharing the fetcher
    second.scrape(site.base + "/old")
    assert second.tool_calls[0].cached and second.counts()["fetch_cache_hits"] == 1
    assert site.hits("/old") == 1


def test_make_fetcher_follows_settings(tmp_path):
    from memento.core.config import load_settings
    from memento.web.factory import make_fetcher as factory_fetcher

    settings = load_settings(
        flags={
            "web": {
                "cache_dir": str(tmp_path / "c"),
                "user_agent": "ua-x",
                "max_bytes": 1234,
                "max_concurrent_fetches": 3,
                "timeout": 7,
                "undated": "drop",
            }
        }
    )
    fetcher = factory_fetcher(settings, offline=True)
    assert (fetcher.user_agent, fetcher.max_bytes, fetcher.max_concurrent, fetcher.timeout) == ("ua-x", 1234, 3, 7)
    assert fetcher.undated == "drop" and fetcher.offline and not fetcher.allow_private
    assert (tmp_path / "c" / "urls.sqlite3").is_file()
