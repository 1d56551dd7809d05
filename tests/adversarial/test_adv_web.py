"""The fetcher and web tools against a hostile local site: drips, URL credentials, embedded IPv4, private hosts."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from memento.core.config import load_settings
from memento.core.types import Trajectory
from memento.web.errors import Blocked, FetchFailed
from memento.web.factory import make_fetcher
from memento.web.fetcher import Fetcher
from memento.web.search_result import SearchResult, UndatedPolicy
from memento.web.web_tools import WebTools


class NoSearch:
    def search(
        self, query: str, k: int = 10, before: dt.date | None = None, *, undated: UndatedPolicy = "keep"
    ) -> list[SearchResult]:
        return []


def _fetcher(tmp_path, **kw) -> Fetcher:
    opts = dict(cache_dir=tmp_path / "web", allowed_private_hosts={"127.0.0.1"}, host_interval=0.0, retries=0)
    opts.update(kw)
    return Fetcher(**opts)


@pytest.mark.parametrize("path", ["/drip", "/drip-open", "/drip-headers"])
def test_a_dripping_page_fails_within_three_times_the_timeout(hostile_site, tmp_path, path):
    fetcher = _fetcher(tmp_path, timeout=1.0)
    start = time.monotonic()
    with pytest.raises(FetchFailed, match="took longer"):
        fetcher.fetch(hostile_site.base + path)
    assert time.monotonic() - start < 3 * 1.0
    assert fetcher.cache is not None and len(fetcher.cache) == 0  # nothing half-read was cached


def test_a_url_password_never_reaches_the_agent_the_records_or_the_cache(hostile_site, tmp_path, leaked_in):
    password = "S3cret-pw-in-url"
    fetcher = _fetcher(tmp_path)
    tools = WebTools(NoSearch(), fetcher)
    direct = tools.scrape(f"http://alice:{password}@127.0.0.1:{hostile_site.port}/page")
    redirected = tools.scrape(hostile_site.base + "/to-creds")  # the Location header carries a password
    failed = tools.scrape(f"http://alice:{password}@127.0.0.1:{hostile_site.port}/missing")
    assert "harbour" in direct.lower() and "harbour" in redirected.lower() and failed.startswith("<data>\nerror:")
    again = tools.scrape(f"http://alice:{password}@127.0.0.1:{hostile_site.port}/page")  # served from the cache
    assert tools.counts()["fetch_cache_hits"] == 1
    secrets = [password, hostile_site.password]
    for text in (direct, redirected, failed, again):
        assert not any(s in text for s in secrets), text
    trajectory = Trajectory(task_text="q", tool_calls=tools.tool_calls)
    assert len(trajectory.tool_calls) == 4
    assert not any(s in trajectory.model_dump_json() for s in secrets)
    assert fetcher.cache is not None
    fetcher.cache.close()
    written = sorted(p.name for p in (tmp_path / "web").iterdir())
    assert "urls.sqlite3" in written
    assert leaked_in(tmp_path / "web", secrets) == []  # database, -wal and -shm files alike


V6_FORMS = [
    "::127.0.0.1",  # IPv4-compatible
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "64:ff9b::7f00:1",  # NAT64
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::7f00:1",  # local-use NAT64
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    "fe80::5efe:7f00:1",  # ISATAP
]


@pytest.mark.parametrize("form", V6_FORMS)
def test_embedded_private_ipv4_in_ipv6_is_blocked_before_connecting(tmp_path, monkeypatch, form):
    import socket

    def no_connect(self, address):
        raise AssertionError(f"connection attempted to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", no_connect)
    fetcher = Fetcher(cache_dir=tmp_path / "web", obey_robots=True, retries=0)
    with pytest.raises(Blocked):
        fetcher.fetch(f"http://[{form}]:8080/x")
    assert fetcher.requests_sent == 0


SPECIAL_FORMS = [
    "fec0::1",  # site-local (deprecated, still routed inside sites)
    "::ffff:0:7f00:1",  # IPv4-translated 127.0.0.1 (::ffff:0:0:0/96)
    "::ffff:0:a9fe:a9fe",  # IPv4-translated 169.254.169.254
    "::ffff:0:808:808",  # IPv4-translated 8.8.8.8: the translated range is not routed on the internet either
    "100:0:0:1::1",  # dummy IPv6 prefix (RFC 9780)
    "3fff::1",  # documentation (RFC 9637)
    "5f00::1",  # segment-routing SIDs (RFC 9602)
    "2001:2::1",  # benchmarking
    "192.0.0.8",  # IPv4 dummy address (RFC 7600): global to Python 3.11.7's ipaddress
    "192.0.0.200",
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "100.64.0.1",  # shared address space
]


@pytest.mark.parametrize("form", SPECIAL_FORMS)
def test_special_purpose_ranges_are_private_and_never_connected(tmp_path, monkeypatch, form):
    import socket

    def no_connect(self, address):
        raise AssertionError(f"connection attempted to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", no_connect)
    fetcher = Fetcher(cache_dir=tmp_path / "web", retries=0)
    host = f"[{form}]" if ":" in form else form
    with pytest.raises(Blocked, match="non-public address"):
        fetcher.fetch(f"http://{host}:8080/x")
    assert fetcher.requests_sent == 0


@pytest.mark.parametrize("form", ["::127.0.0.1", "::ffff:127.0.0.1", "::ffff:0:7f00:1", "64:ff9b::7f00:1"])
def test_an_allowlisted_address_admits_only_its_own_forms(tmp_path, monkeypatch, form):
    """``allowed_private_hosts = ["127.0.0.1"]`` admits 127.0.0.1, not an IPv6 address that embeds it."""
    import socket

    def no_connect(self, address):
        raise AssertionError(f"connection attempted to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", no_connect)
    fetcher = _fetcher(tmp_path)
    with pytest.raises(Blocked, match="non-public address"):
        fetcher.fetch(f"http://[{form}]:8080/x")
    assert fetcher.requests_sent == 0
    v6 = Fetcher(cache_dir=None, allowed_private_hosts={"[::1]"}, retries=0)  # an address in any spelling of its own
    assert v6.address_policy.check_target("http://[0:0:0:0:0:0:0:1]:8080/x", original="x") is True
    with pytest.raises(Blocked):
        v6.address_policy.check_target("http://127.0.0.1:8080/x", original="x")


def test_a_public_embedded_ipv4_is_not_refused_by_the_embedded_check():
    import ipaddress

    from memento.web.address_policy import is_public

    assert is_public(ipaddress.ip_address("2002:808:808::1"))  # 6to4 of 8.8.8.8
    assert not is_public(ipaddress.ip_address("2002:7f00:1::"))


def test_allowed_private_hosts_from_settings_admit_one_host_only(hostile_site, tmp_path):
    settings = load_settings(
        flags={"web": {"allowed_private_hosts": ["127.0.0.1"], "cache_dir": str(tmp_path / "web")}}
    )
    fetcher = make_fetcher(settings)
    fetcher.host_interval, fetcher.retries = 0.0, 0
    assert "harbour" in fetcher.fetch(hostile_site.base + "/page").text.lower()
    for url in ("http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/", "http://[::1]:9/"):
        with pytest.raises(Blocked):
            fetcher.fetch(url)
    for path in ("/to-private", "/to-metadata", "/to-v6loop"):
        with pytest.raises(Blocked):
            fetcher.fetch(hostile_site.base + path)


def test_allow_private_without_a_list_still_refuses_link_local(tmp_path):
    fetcher = Fetcher(cache_dir=None, allow_private=True, retries=0)
    with pytest.raises(Blocked):
        fetcher.fetch("http://169.254.169.254/latest/meta-data/")


def test_a_page_cached_under_a_wider_policy_is_not_served_to_a_stricter_one(hostile_site, tmp_path):
    wide = _fetcher(tmp_path, allowed_private_hosts=None, allow_private=True)
    assert wide.fetch(hostile_site.base + "/page").text
    assert wide.cache is not None
    wide.cache.close()
    strict = Fetcher(cache_dir=tmp_path / "web", host_interval=0.0, retries=0)
    with pytest.raises(Blocked):
        strict.fetch(hostile_site.base + "/page")
    offline = Fetcher(cache_dir=tmp_path / "web", offline=True)
    with pytest.raises(Blocked):
        offline.fetch(hostile_site.base + "/page")
    same = _fetcher(tmp_path)  # a policy that admits the host is served from the cache
    assert same.fetch(hostile_site.base + "/page").from_cache
