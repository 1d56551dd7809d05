"""A requests transport adapter that checks the address it actually connected to (DNS-rebinding defence).

:class:`memento.web.fetcher.Fetcher` resolves a URL's host and refuses non-public addresses before a request, but
the HTTP client resolves the name again when it connects: a hostile DNS server can answer a public address to the
check and a private one to the connection. This adapter checks the connected socket's peer address before a single
byte of the request is sent (before TLS too), so a rebinding target receives no request.

It also tells a caller which socket a request of its thread waits on (:func:`watch_sockets`), new or reused from
the pool, so a deadline can cut off a server that drips its status line and headers a byte at a time (a socket's
read timeout restarts with every byte, and ``requests`` returns only once the headers are complete).

Example:
    >>> import requests
    >>> from memento.web.guarded_adapter import GuardedAdapter
    >>> def guard(host: str, ip: str) -> None: ...
    >>> session = requests.Session()
    >>> session.mount("http://", GuardedAdapter(guard))
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["GuardedAdapter", "PeerGuard", "SocketWatcher", "watch_sockets"]

PeerGuard = Callable[[str, str], None]
"""``guard(host, peer_ip)``: raise to refuse the connection."""

SocketWatcher = Callable[[Any], None]
"""``watcher(sock)``: told the socket a request of this thread is about to read its response from."""

_local = threading.local()


@contextlib.contextmanager
def watch_sockets(watcher: SocketWatcher) -> Iterator[None]:
    """Within the block, every response a guarded connection of this thread reads first reports its socket."""
    previous = getattr(_local, "watcher", None)
    _local.watcher = watcher
    try:
        yield
    finally:
        _local.watcher = previous


def _report_socket(conn: Any) -> None:
    watcher = getattr(_local, "watcher", None)
    if watcher is not None and getattr(conn, "sock", None) is not None:
        watcher(conn.sock)


def _guarded_pools(guard: PeerGuard) -> dict[str, type]:
    def new_conn(conn: Any, parent: type[HTTPConnection]) -> Any:
        sock = parent._new_conn(conn)
        try:
            peer = sock.getpeername()[0]
            guard(str(conn.host), str(peer).split("%")[0])
        except BaseException:
            sock.close()
            raise
        return sock

    class GuardedHTTPConnection(HTTPConnection):
        def _new_conn(self) -> Any:
            return new_conn(self, HTTPConnection)

        def getresponse(self) -> Any:
            _report_socket(self)
            return super().getresponse()

    class GuardedHTTPSConnection(HTTPSConnection):
        def _new_conn(self) -> Any:
            return new_conn(self, HTTPSConnection)

        def getresponse(self) -> Any:
            _report_socket(self)
            return super().getresponse()

    class GuardedHTTPConnectionPool(HTTPConnectionPool):
        ConnectionCls = GuardedHTTPConnection

    class GuardedHTTPSConnectionPool(HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPSConnection

    return {"http": GuardedHTTPConnectionPool, "https": GuardedHTTPSConnectionPool}


class GuardedAdapter(HTTPAdapter):
    """An :class:`~requests.adapters.HTTPAdapter` whose connections call ``guard(host, peer_ip)`` once connected.

    Args:
        guard: raises (e.g. :class:`~memento.web.errors.Blocked`) to refuse the address; the socket is closed and
            the exception propagates out of ``session.get``.
        **kwargs: passed to :class:`~requests.adapters.HTTPAdapter` (pool sizes, retries).
    """

    def __init__(self, guard: PeerGuard, **kwargs: Any) -> None:
        self._guard = guard
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _guarded_pools(self._guard)
