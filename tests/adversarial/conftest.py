"""Fixtures of the adversarial suite: a hostile local web site and a file grep for leaked secrets."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from memento.testing import LocalSite, respond

PAGE = (
    "<html><head><title>Harbour history</title></head><body><article><p>"
    + "The harbour of the old town was rebuilt after the great storm and its people returned. " * 8
    + "</p></article></body></html>"
).encode()


class HostileSite(LocalSite):
    """A local site with a dripping page, redirects to URLs carrying credentials, and ordinary pages.

    Routes: ``/page`` (html), ``/drip`` (one byte every 0.25 s, Content-Length announced), ``/drip-open`` (the same
    without Content-Length), ``/drip-headers`` (the status line and headers one byte every 0.25 s), ``/to-creds``
    (redirects to ``/page`` with ``user:<password>@`` in the URL),
    ``/to-private`` (redirects to 10.0.0.1), ``/to-metadata`` (to 169.254.169.254), ``/to-v6loop`` (to ``[::1]``),
    ``/missing`` (404).
    """

    password = "Hunter2-redirect-pw"

    def __init__(self) -> None:
        self.stop = threading.Event()
        super().__init__()

    def route(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?")[0]

        send = functools.partial(respond, h)

        redirects = {
            "/to-creds": f"http://user:{self.password}@127.0.0.1:{self.port}/page",
            "/to-private": "http://10.0.0.1/admin",
            "/to-metadata": "http://169.254.169.254/latest/meta-data/",
            "/to-v6loop": f"http://[::1]:{self.port}/page",
        }
        if path == "/robots.txt":
            send(200, b"User-agent: *\nAllow: /\n", "text/plain")
        elif path == "/page":
            send(200, PAGE)
        elif path in ("/drip", "/drip-open"):
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            if path == "/drip":
                h.send_header("Content-Length", "100000")
            h.end_headers()
            try:
                for _ in range(400):  # 100 s of drip at most
                    if self.stop.is_set():
                        break
                    h.wfile.write(b"<")
                    h.wfile.flush()
                    time.sleep(0.25)
            except OSError:
                pass
            h.close_connection = True
        elif path == "/drip-headers":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + b"X-Padding: " + b"p" * 400 + b"\r\n\r\n"
            try:
                for byte in head + PAGE:  # 100 s of drip at most
                    if self.stop.is_set():
                        break
                    h.wfile.write(bytes([byte]))
                    h.wfile.flush()
                    time.sleep(0.25)
            except OSError:
                pass
            h.close_connection = True
        elif path in redirects:
            send(302, b"", Location=redirects[path])
        else:
            send(404, b"nope", "text/plain")

    def close(self) -> None:
        self.stop.set()
        super().close()


@pytest.fixture
def hostile_site() -> Iterator[HostileSite]:
    site = HostileSite()
    yield site
    site.close()


def files_containing(root: Path, needles: list[str]) -> list[str]:
    """Every file under ``root`` whose bytes contain one of ``needles`` (``"path: needle"``)."""
    hits: list[str] = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits.extend(f"{path}: {n}" for n in needles if n.encode() in data)
    return hits


@pytest.fixture
def leaked_in() -> Callable[[Path, list[str]], list[str]]:
    """``leaked_in(directory, secrets)``: the files under a directory that contain a secret (empty: none)."""
    return files_containing
