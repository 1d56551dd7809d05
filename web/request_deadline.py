"""One deadline per HTTP request, from sending it to the body's last byte.

A socket's read timeout restarts with every byte, so a server that drips its status line, its headers or its body
a byte at a time would hold a fetch for ever. :class:`Deadline` shuts the request's socket down when its time is
up; the reader sees its read end and ``expired`` tells it why. The socket is the one the guarded adapter reports
(:func:`memento.web.guarded_adapter.watch_sockets`), else the response's (:func:`socket_of`).

Example:
    >>> from memento.web.request_deadline import Deadline
    >>> with Deadline(40.0) as deadline:  # doctest: +SKIP
    ...     resp = session.get(url, stream=True)
    ...     deadline.watch_response(resp)
    ...     body = resp.content
    >>> deadline.expired  # doctest: +SKIP
    False
"""

from __future__ import annotations

import socket
import threading
from typing import Any

__all__ = ["Deadline", "socket_of"]


class Deadline:
    """Shut a request's socket down when ``seconds`` have passed since it was sent, whether the server is still
    dripping its headers or its body (a socket's read timeout restarts with every byte); ``expired`` tells the
    reader why its read ended. The socket is the one the guarded adapter reports
    (:func:`memento.web.guarded_adapter.watch_sockets`), else the response's.

    Args:
        seconds: the time the whole response (status line, headers and body) has to arrive.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._resp: Any = None
        self.expired = False

    def __enter__(self) -> Deadline:
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
            sock = socket_of(resp)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
            elif resp is not None:
                resp.close()
        except OSError:
            pass


def socket_of(resp: Any) -> socket.socket | None:
    """The socket a streaming ``requests`` response reads from (the connection's, or the one behind the body's
    file object once http.client has detached it from a closing connection)."""
    raw = getattr(resp, "raw", None)
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is None:
        fileobj = getattr(getattr(raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fileobj, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None
