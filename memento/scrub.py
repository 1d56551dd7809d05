"""One scrubber for secrets and URL credentials: everything memento prints, logs, stores or sends to an LM.

memento knows its own secrets (the API keys of its LM roles, registered when the roles are built) and removes them,
together with anything shaped like a provider key or a bearer token, and the password (and user name) of every URL
inside a text. Apply :func:`scrub` to free text and :func:`scrub_url` to one URL; :class:`ScrubFilter` scrubs log
records; :func:`scrub_data` walks dicts and lists (results files, trajectories).

Example:
    >>> from memento.scrub import register_secret, scrub, scrub_url
    >>> register_secret("sk-test-0123456789abcdef")
    >>> scrub("Incorrect API key provided: sk-test-0123456789abcdef")
    'Incorrect API key provided: ****'
    >>> scrub_url("http://user:pw@example.org/a?b=1")
    'http://***:***@example.org/a?b=1'
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "MASK",
    "register_secret",
    "known_secrets",
    "scrub",
    "scrub_url",
    "scrub_data",
    "ScrubFilter",
    "MessageFilter",
]

MASK = "****"
_MIN_SECRET = 6  # shorter values are not treated as secrets (they would mask ordinary words)

_lock = threading.Lock()
_secrets: set[str] = set()

# credentials inside any URL: scheme://user:password@host or scheme://token@host
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^\s/?#@'\"<>]+)@")
# provider-shaped keys and tokens, even when memento was not told about them
_KEY_SHAPES = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}"  # OpenAI-style (sk-..., sk-proj-..., sk-ant-...)
    r"|\bBearer\s+[A-Za-z0-9._\-+/=]{12,}"
    r"|\b(?:api[_-]?key|access[_-]?token|secret)=[A-Za-z0-9._\-+/]{8,}",
    re.IGNORECASE,
)


def register_secret(value: str | None) -> None:
    """Remember a secret so that :func:`scrub` removes it from every text (API keys of LM roles)."""
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            _secrets.add(value)


def known_secrets() -> frozenset[str]:
    """The registered secrets (for tests that grep written files)."""
    with _lock:
        return frozenset(_secrets)


def scrub_url(url: str) -> str:
    """``url`` with its user name and password replaced by ``***`` (unchanged when it has none)."""
    if not url or "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_USERINFO.sub(lambda m: m.group("scheme") + "***:***@", url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = "***:***@" + host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def scrub(text: Any) -> Any:
    """``text`` with registered secrets, key-shaped tokens and URL credentials masked (non-strings as they are)."""
    if not isinstance(text, str) or not text:
        return text
    out = text
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in out:
            out = out.replace(secret, MASK)
    if "@" in out:
        out = _URL_USERINFO.sub(lambda m: m.group("scheme") + "***:***@", out)
    out = _KEY_SHAPES.sub(MASK, out)
    return out


def scrub_data(data: Any) -> Any:
    """A copy of ``data`` (dicts, lists, tuples, strings) with every string scrubbed."""
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, dict):
        return {scrub_data(k): scrub_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(scrub_data(v) for v in data)
    return data


class MessageFilter(logging.Filter):
    """A logging filter that rewrites the formatted message of every record with :meth:`clean` (never drops one)."""

    def clean(self, message: str) -> str:
        return message

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is left to the handler
            return True
        clean = self.clean(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class ScrubFilter(MessageFilter):
    """A logging filter that scrubs the formatted message of every record (install it on handlers)."""

    def clean(self, message: str) -> str:
        return scrub(message)
