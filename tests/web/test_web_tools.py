"""WebTools (the agent's search_web/scrape), the factory, and the DDGS/SearXNG backends (offline fakes)."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from memento.core.config import load_settings
from memento.core.untrusted import quote_data
from memento.web.ddgs_backend import DDGSBackend
from memento.web.errors import SearchError, WebConfigError
from memento.web.factory import corpus_index_dir, make_backend, make_web_tools, web_tools_factory
from memento.web.offline_corpus import OfflineCorpus
from memento.web.searxng_backend import SearXNGBackend
from memento.web.web_tools import WebTools

ROWS = [
    {"doc_id": "clyne", "title": "Paul Clyne", "text": "Paul Clyne was District Attorney of Albany County. " * 40},
    {"doc_id": "soares", "title": "David Soares", "text": "David Soares is the Albany County District Attorney."},
    {
        "url": "https://news.example/late",
        "title": "Albany news",
        "text": "Albany County news of 2022.",
        "published": "2022-05-01",
    },
]


@pytest.fixture
def corpus_src(tmp_path):
    src = tmp_path / "corpus.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return src


@pytest.fixture
def corpus(corpus_src, tmp_path):
    return OfflineCorpus.build([corpus_src], tmp_path / "idx")


def test_search_web_and_scrape_render_compact_text_and_record_calls(corpus):
    tools = WebTools(corpus, cutoff="2020-01-01", k=5, page_chars=200)
    out = tools.search_web("Albany County District Attorney")
    assert out.startswith("<data>\n[1] ") and "corpus://clyne" in out and "corpus://soares" in out
    assert "news.example" not in out  # published after the cutoff
    page = tools.scrape("corpus://clyne")
    assert page.startswith("<data>\nTitle: Paul Clyne\nURL: corpus://clyne")
    assert "[... clipped:" in page and len(page) < 400
    late = tools.scrape("https://news.example/late")
    assert late.startswith("<data>\nerror:") and "cutoff" in late
    missing = tools.scrape("https://not-in-corpus.example/")
    assert missing.startswith("<data>\nerror:")
    tools.scrape("corpus://clyne")
    kinds = [c.kind for c in tools.tool_calls]
    assert kinds == ["search_web", "scrape", "scrape", "scrape", "scrape"]
    first = tools.tool_calls[0]
    assert first.args == {"query": "Albany County District Attorney"} and first.result_urls[:2] == [
        "corpus://clyne",
        "corpus://soares",
    ]
    assert tools.tool_calls[2].error and "AfterCutoff" in tools.tool_calls[2].error
    assert all(c.ms >= 0 for c in tools.tool_calls)
    assert tools.counts() == {
        "searches": 1,
        "fetches": 4,
        "fetch_cache_hits": 0,
        "unique_urls": 3,
        "repeated_urls": 1,
        "undated_dropped": 0,
    }


def test_minimal_backend_without_undated_parameter():
    from memento.web.search_result import SearchResult

    class Minimal:
        def search(self, query, k=10, before=None):
            return [
                SearchResult(url="https://u.example/"),
                SearchResult(url="https://d.example/", published=dt.date(2001, 1, 1)),
            ]

    # a backend written before the undated policy existed: WebTools still serves it
    out = WebTools(Minimal(), cutoff="2010-01-01", undated="drop").search_web("anything")  # type: ignore[arg-type]
    assert "d.example" in out and "u.example" not in out


def test_bad_cutoff_or_policy_is_a_typed_error(corpus):
    from memento.core.errors import DataError

    with pytest.raises(DataError, match="cutoff must be a date"):
        WebTools(corpus, cutoff="last spring")
    with pytest.raises(DataError, match="undated"):
        WebTools(corpus, undated="sometimes")  # type: ignore[arg-type]  # deliberately not a policy


def test_tools_never_raise(corpus):
    class Exploding:
        def search(self, query, k=10, before=None, *, undated="keep"):
            raise RuntimeError("provider down\nwith details")

    tools = WebTools(Exploding())
    # the first line of the message, as quoted data like every tool text
    assert tools.search_web("x") == quote_data("error: search failed: provider down")
    assert tools.search_web("  ") == quote_data("error: empty query")
    assert tools.scrape("") == quote_data("error: empty url")
    assert [c.error for c in tools.tool_calls] == ["RuntimeError: provider down", "empty query", "empty url"]
    assert "No results" in WebTools(corpus).search_web("zyzzyva")


def test_scrape_uses_fetcher_and_counts_cache_hits(tmp_path):
    from memento.web.fetcher import Page

    class FakeFetcher:
        def __init__(self):
            self.seen = set()

        def fetch(self, url, before=None, *, undated=None):
            from memento.web.url_cache import normalize_url

            cached = normalize_url(url) in self.seen
            self.seen.add(normalize_url(url))
            return Page(url=url, final_url=url, title="T", text="body", from_cache=cached)

    class NoHits:
        def search(self, query, k=10, before=None, *, undated="keep"):
            return []

    tools = WebTools(NoHits(), FakeFetcher())
    tools.scrape("https://a.example/x")
    tools.scrape("https://A.example/x#top")
    assert tools.counts()["fetch_cache_hits"] == 1 and tools.counts()["repeated_urls"] == 1
    assert tools.tool_calls[1].cached is True


def test_tools_are_thread_safe(corpus):
    tools = WebTools(corpus)
    threads = [threading.Thread(target=lambda: [tools.search_web("Albany") for _ in range(10)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tools.tool_calls) == 80 and tools.counts()["searches"] == 80


def test_tools_work_as_dspy_tools(corpus):
    import dspy

    tools = WebTools(corpus)
    search, scrape = (dspy.Tool(f) for f in tools.tools())
    assert search.name == "search_web" and list(search.args) == ["query"] and "Search the web" in search.desc
    assert scrape.name == "scrape" and list(scrape.args) == ["url"]
    assert "Paul Clyne" in search(query="Paul Clyne")


def test_factory_builds_corpus_index_once_and_shares_backend(corpus_src, tmp_path):
    settings = load_settings(flags={"web": {"corpus": str(corpus_src), "cache_dir": str(tmp_path / "cache")}})
    make = web_tools_factory(settings)
    a, b = make(None, "keep"), make(dt.date(2020, 1, 1), "drop")
    assert a.backend is b.backend and isinstance(a.backend, OfflineCorpus)
    assert a.fetcher is None and b.cutoff == dt.date(2020, 1, 1) and b.undated == "drop"
    index = corpus_index_dir(corpus_src, tmp_path / "cache")
    assert OfflineCorpus.is_index(index)
    stamp = (index / "meta.json").stat().st_mtime_ns
    tools = make_web_tools(settings, cutoff="2021-01-01")
    assert "Paul Clyne" in tools.search_web("Paul Clyne")
    assert (index / "meta.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert settings.web.undated is None and make(None, None).undated == "keep"  # not set: undated pages are kept


def test_factory_backend_selection_and_errors(tmp_path, corpus):
    assert isinstance(make_backend(load_settings(flags={"web": {"corpus": str(tmp_path / "idx")}})), OfflineCorpus)
    assert isinstance(make_backend(load_settings()), DDGSBackend)  # no corpus: the live web
    with pytest.raises(WebConfigError, match="no corpus"):
        make_backend(load_settings(flags={"web": {"backend": "offline"}}))
    with pytest.raises(WebConfigError, match="searxng_url"):
        make_backend(load_settings(flags={"web": {"backend": "searxng"}}))
    with pytest.raises(WebConfigError, match="not found"):
        make_backend(load_settings(flags={"web": {"corpus": str(tmp_path / "missing.jsonl")}}))
    sx = make_backend(load_settings(flags={"web": {"backend": "searxng", "searxng_url": "http://127.0.0.1:9"}}))
    assert isinstance(sx, SearXNGBackend)


# ----------------------------------------------------------------------------------------------------- DDGS
class FakeDDGS:
    def __init__(self, rows):
        self.rows = rows
        self.calls = []

    def text(self, query, **kwargs):
        self.calls.append((query, kwargs))
        return self.rows


def test_ddgs_maps_cutoff_and_filters_locally():
    rows = [
        {"title": "Old", "href": "https://a.example/old", "body": "Mar 3, 2015 — an old story"},
        {"title": "New", "href": "https://a.example/new", "body": "2021-06-01 · a new story"},
        {"title": "Undated", "href": "https://a.example/u", "body": "no date in this snippet"},
        {"title": "Dup", "href": "https://a.example/old", "body": "duplicate"},
    ]
    fake = FakeDDGS(rows)
    backend = DDGSBackend(client=fake)
    got = backend.search("story", k=5, before=dt.date(2020, 1, 1))
    assert [r.title for r in got] == ["Old", "Undated"]
    assert got[0].published == dt.date(2015, 3, 3) and got[0].source == "ddgs"
    query, kwargs = fake.calls[-1]
    assert query == "story" and kwargs["backend"] == "duckduckgo"
    assert kwargs["timelimit"] == "1990-01-01..2019-12-31" and kwargs["max_results"] == 10
    assert [r.title for r in backend.search("story", k=5, before=dt.date(2020, 1, 1), undated="drop")] == ["Old"]
    backend.search("story", k=3)
    assert "timelimit" not in fake.calls[-1][1] and fake.calls[-1][1]["backend"] == "auto"
    assert [r.title for r in backend.search("story", k=2)] == ["Old", "New"]
    future = dt.date.today() + dt.timedelta(days=30)
    assert backend.provider_args(future) == {}


def test_ddgs_errors_are_typed():
    class Down:
        def text(self, query, **kwargs):
            raise TimeoutError("timed out")

    class Empty:
        def text(self, query, **kwargs):
            raise RuntimeError("No results found.")

    with pytest.raises(SearchError, match="ddgs search failed"):
        DDGSBackend(client=Down()).search("x")
    assert DDGSBackend(client=Empty()).search("x") == []


# -------------------------------------------------------------------------------------------------- SearXNG
class SearxServer:
    def __init__(self, pages, status=200, delay=0.0):
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.active = self.peak = 0
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                q = parse_qs(urlsplit(self.path).query)
                with srv.lock:
                    srv.requests.append((urlsplit(self.path).path, q))
                    srv.active += 1
                    srv.peak = max(srv.peak, srv.active)
                time.sleep(delay)
                # leave the in-flight count before answering: once the client has its response it may send the
                # next request, which must not be counted together with this one
                with srv.lock:
                    srv.active -= 1
                page = int(q.get("pageno", ["1"])[0])
                body = json.dumps({"results": pages[page - 1] if page <= len(pages) else []}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_searxng_json_api_cutoff_and_paging():
    pages = [
        [
            {"url": "https://x.example/1", "title": "One", "content": "c1", "publishedDate": "2019-05-01T00:00:00"},
            {"url": "https://x.example/2", "title": "Two", "content": "c2", "publishedDate": "2021-05-01"},
            {"url": "https://x.example/3", "title": "Three", "content": "c3", "publishedDate": None},
        ],
        [{"url": "https://x.example/4", "title": "Four", "content": "c4", "publishedDate": "2018-01-01"}],
    ]
    server = SearxServer(pages)
    try:
        backend = SearXNGBackend(server.url + "/")
        got = backend.search("topic", k=2, before=dt.date(2020, 1, 1), undated="drop")
        assert [r.title for r in got] == ["One", "Four"] and got[0].published == dt.date(2019, 5, 1)
        path, q = server.requests[0]
        assert path == "/search" and q["q"] == ["topic"] and q["format"] == ["json"] and "time_range" not in q
        assert [int(q["pageno"][0]) for _, q in server.requests] == [1, 2]
        assert [r.title for r in backend.search("topic", k=3)] == ["One", "Two", "Three"]
    finally:
        server.close()


def test_searxng_errors_and_search_limit():
    server = SearxServer([], status=403)
    try:
        with pytest.raises(SearchError, match="format=json"):
            SearXNGBackend(server.url).search("x")
    finally:
        server.close()
    with pytest.raises(SearchError, match="unreachable"):
        SearXNGBackend("http://127.0.0.1:9", timeout=1).search("x")
    server = SearxServer([[{"url": "https://x.example/1", "title": "One"}]], delay=0.05)
    try:
        backend = SearXNGBackend(server.url, max_concurrent=2, max_pages=1)
        threads = [threading.Thread(target=backend.search, args=(f"q{i}",)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(server.requests) == 12 and server.peak <= 2
    finally:
        server.close()
