"""Web layer hardening: URL clean-up, credential redaction, offline setting, spacing outside the fetch slot."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from memento.core.config import load_settings
from memento.utils.scrub import scrub_url
from memento.web.factory import make_fetcher, make_web_tools
from memento.web.search_result import SearchResult, UndatedPolicy
from memento.web.url_cache import normalize_url
from memento.web.web_tools import WebTools, clean_url


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("corpus://abc.", "corpus://abc"),
        ("<https://x.org/a>", "https://x.org/a"),
        ("[https://x.org/a]", "https://x.org/a"),
        ("(https://x.org/a).", "https://x.org/a"),
        ("https://en.wikipedia.org/wiki/Dune_(novel)", "https://en.wikipedia.org/wiki/Dune_(novel)"),
        ("https://en.wikipedia.org/wiki/Dune_(novel)),", "https://en.wikipedia.org/wiki/Dune_(novel)"),
        (" 'https://x.org/?q=1' ", "https://x.org/?q=1"),
    ],
)
def test_clean_url(raw: str, clean: str) -> None:
    assert clean_url(raw) == clean


def test_passwords_never_stored_or_recorded() -> None:
    url = "https://user:hunter2@example.org/page"
    assert "hunter2" not in scrub_url(url) and scrub_url(url).startswith("https://***:***@example.org")
    key = normalize_url(url)
    assert "hunter2" not in key
    assert key != normalize_url("https://user:other@example.org/page")

    class Backend:
        def search(
            self, query: str, k: int = 10, before: dt.date | None = None, *, undated: UndatedPolicy = "keep"
        ) -> list[SearchResult]:
            return []

    class Fetcher:
        def fetch(self, url, before=None, *, undated=None):
            raise RuntimeError("boom")

    tools = WebTools(Backend(), Fetcher())
    tools.scrape(url)
    assert all("hunter2" not in str(call.model_dump()) for call in tools.tool_calls)


def test_offline_and_undated_come_from_settings(tmp_path) -> None:
    settings = load_settings(flags={"web": {"offline": True, "undated": "drop", "cache_dir": str(tmp_path)}})
    assert make_fetcher(settings).offline is True
    assert make_fetcher(settings, offline=False).offline is False
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"doc_id": "d1", "title": "T", "text": "hello world"}\n')
    settings = load_settings(flags={"web": {"corpus": str(corpus), "undated": "drop", "cache_dir": str(tmp_path)}})
    assert make_web_tools(settings).undated == "drop"
    assert make_web_tools(settings, undated="keep").undated == "keep"


def test_host_spacing_does_not_hold_a_fetch_slot(tmp_path) -> None:
    """With one fetch slot, a request waiting for its host's turn must not block a request to another host."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from memento.web.fetcher import Fetcher

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            body = b"plain text page"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    fetcher = Fetcher(
        cache_dir=None, max_concurrent=1, host_interval=0.6, allow_private=True, obey_robots=False, retries=0
    )
    try:
        fetcher.fetch(f"http://127.0.0.1:{port}/a1")  # host 1 now has to wait 0.6 s
        started = time.monotonic()
        done: dict[str, float] = {}

        def get(name: str, url: str) -> None:
            fetcher.fetch(url)
            done[name] = time.monotonic() - started

        slow = threading.Thread(target=get, args=("same-host", f"http://127.0.0.1:{port}/a2"))
        slow.start()
        time.sleep(0.1)
        other = threading.Thread(target=get, args=("other-host", f"http://localhost:{port}/b1"))
        other.start()
        slow.join()
        other.join()
    finally:
        server.shutdown()
        server.server_close()
    assert done["other-host"] < done["same-host"]


def test_dns_rebinding_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host resolves to a public address for the check and to loopback for the connection: refused, unsent."""
    import socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from memento.web.errors import Blocked
    from memento.web.fetcher import Fetcher

    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            received.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    real = socket.getaddrinfo
    answers = iter(["93.184.216.34"])  # the first lookup (the fetcher's check) sees a public address

    def rebinding(host, *args, **kwargs):
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        ip = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ip, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    fetcher = Fetcher(cache_dir=None, obey_robots=False, retries=0, host_interval=0)
    try:
        with pytest.raises(Blocked, match="non-public address 127.0.0.1"):
            fetcher.fetch(f"http://rebind.test:{port}/secret")
    finally:
        server.shutdown()
        server.server_close()
    assert received == []
