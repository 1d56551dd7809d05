"""One scrubber for secrets and URL credentials: everything memento prints, logs, stores or sends to an LM.

memento knows its own secrets (the API keys of its LM roles, registered when the roles are built, and the password of
an ``api_base``) and removes them, together with anything shaped like a provider key or a bearer token, and the
password (and user name) of every URL inside a text, with or without its scheme (``user:pw@host:port``). Apply
:func:`scrub` to free text and :func:`scrub_url` to one URL; :class:`ScrubFilter` scrubs log records;
:func:`scrub_data` walks dicts and lists (results files, trajectories).

Example:
    >>> from memento.utils.scrub import register_secret, scrub, scrub_url
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
from typing import Any, TypeVar, overload
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "MASK",
    "register_secret",
    "known_secrets",
    "contains_secret",
    "scrub",
    "scrub_url",
    "scrub_data",
    "scrub_span",
    "split_credentials",
    "ScrubFilter",
    "MessageFilter",
    "install_record_scrubber",
]

MASK = "****"
_MIN_SECRET = 6  # shorter values are not treated as secrets (they would mask ordinary words)

_lock = threading.Lock()
_secrets: set[str] = set()

# credentials inside any URL: scheme://user:password@host or scheme://token@host
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^\s/?#@'\"<>]+)@")
# the same without a scheme, as clients print an authority: user:password@host[:port] (an e-mail address, with no
# colon before its @, is left alone)
_BARE_USERINFO = re.compile(r"(?<![\w.~%!$&*+=/:@-])(?P<userinfo>[\w.~%!$&*+=-]+:[^\s/?#@'\"<>]*)@(?=[\w\[])")
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


T = TypeVar("T")


@overload
def scrub(text: str) -> str: ...
@overload
def scrub(text: T) -> T: ...
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
        out = _BARE_USERINFO.sub("***:***@", out)
    out = _KEY_SHAPES.sub(MASK, out)
    return out


def contains_secret(text: str) -> bool:
    """Whether ``text`` holds a registered secret (an API key, a URL password memento was told about)."""
    with _lock:
        secrets = list(_secrets)
    return any(secret in text for secret in secrets)


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without credentials, user, password)``: ``http://u:p@h:8000/v1`` -> ``("http://h:8000/v1", "u", "p")``.

    User and password are percent-decoded; a URL without credentials comes back unchanged with ``None, None``.
    Memento splits an ``api_base`` this way before any client sees it (the credentials travel as a Basic
    ``Authorization`` header), so no client ever resolves or logs ``user:password@host``.
    """
    from urllib.parse import unquote

    if "@" not in url:
        return url, None, None
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host + (f":{port}" if port else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return clean, user, password


def scrub_span(span: Any) -> None:
    """An MLflow span processor: scrub a span's inputs, outputs, attributes, events (exception messages and
    tracebacks) and status before it is exported (``mlflow.tracing.configure(span_processors=[scrub_span])``)."""
    for key, value in list(span.attributes.items()):
        clean = scrub_data(value)
        if clean != value:
            span.set_attribute(key, clean)
    otel = getattr(span, "_span", None)
    events = getattr(otel, "_events", None)
    if events:
        from opentelemetry.sdk.trace import Event

        slots = getattr(events, "_dq", events)  # OpenTelemetry's BoundedList keeps its items in a deque
        for index, event in enumerate(list(slots)):
            attributes = {k: scrub_data(v) for k, v in dict(event.attributes or {}).items()}
            if attributes != dict(event.attributes or {}):
                slots[index] = Event(scrub(event.name), attributes, event.timestamp)
    status = getattr(otel, "_status", None)
    description = getattr(status, "description", None)
    if otel is not None and status is not None and description and scrub(description) != description:
        from opentelemetry.trace import Status

        otel._status = Status(status.status_code, scrub(description))


@overload
def scrub_data(data: str) -> str: ...
@overload
def scrub_data(data: T) -> T: ...
def scrub_data(data: Any) -> Any:
    """A copy of ``data`` (dicts, lists, tuples, strings) with every string scrubbed."""
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, dict):
        return {scrub_data(k): scrub_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(scrub_data(v) for v in data)
    return data


def install_record_scrubber() -> None:
    """Scrub every log record when it is created, whichever logger and handler it goes to (idempotent).

    Libraries that log through handlers of their own (LiteLLM prints its DEBUG lines, with the provider's error
    bodies, through its own) never pass the filters memento adds to its handlers; a record factory sees them all.
    The message, a traceback (pre-formatted into ``exc_text``) and a stack are scrubbed.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_memento_scrub", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is left to the handler
            return record
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return record

    factory._memento_scrub = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


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
