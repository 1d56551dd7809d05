"""What the fetcher makes of one HTTP answer: the raw answer, which answers are retried and after how long, which
content types are read, and which failures are permanent.

* 429, 5xx and connection errors are :class:`Retryable` (honouring ``Retry-After``: :func:`retry_after`);
* a redirect or another non-2xx status comes back as a :class:`RawAnswer` without a body;
* only html, xhtml and plain text are read (:func:`check_content_type`);
* 4xx other than 408/429, a wrong content type and a body over the cap are permanent (:func:`is_permanent`): the
  fetcher remembers them and sends no second request.

Example:
    >>> from memento.web.http_answer import retry_after
    >>> retry_after("120")
    120.0
"""

from __future__ import annotations

import datetime as dt
import email.utils

from memento.utils.text import error_line
from memento.web.errors import FetchError, FetchFailed, TooLarge, UnsupportedContent
from memento.web.request_deadline import Deadline

__all__ = [
    "ALLOWED_CONTENT_TYPES",
    "REDIRECTS",
    "RawAnswer",
    "Retryable",
    "check_content_type",
    "is_permanent",
    "read_failure",
    "requests_error",
    "retry_after",
    "too_slow",
]

ALLOWED_CONTENT_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain"})
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class Retryable(Exception):
    """A 429/5xx answer or a connection error worth another attempt."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class RawAnswer:
    """The parts of an HTTP answer the fetcher uses."""

    __slots__ = ("status", "headers", "body", "url")

    def __init__(self, url: str, status: int, headers: dict[str, str], body: bytes) -> None:
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body


def requests_error() -> type[Exception]:
    """The base class of the errors ``requests`` raises while a body streams."""
    import requests

    return requests.exceptions.RequestException


def too_slow(url: str, original: str, deadline: Deadline) -> FetchFailed:
    """The error of a response that did not arrive within its deadline."""
    return FetchFailed(f"{url}: the download took longer than {deadline.seconds:g}s", url=original)


def read_failure(exc: Exception, url: str, original: str) -> Exception:
    """A body read that failed before the deadline: a read timeout, else a retryable connection error."""
    import requests

    if isinstance(exc, requests.exceptions.ConnectionError):
        if "Read timed out" in str(exc):
            return FetchFailed(f"{url}: timed out while reading", url=original)
        return Retryable(f"connection error while reading: {error_line(exc, with_type=False, limit=200)}")
    return FetchFailed(f"{url}: {error_line(exc, with_type=False, limit=200)}", url=original)


def is_permanent(exc: FetchError) -> bool:
    """Failures that another request would only repeat: 4xx other than 408/429, wrong type, too large."""
    if isinstance(exc, TooLarge | UnsupportedContent):
        return True
    status = getattr(exc, "status", None)
    return isinstance(exc, FetchFailed) and status is not None and 400 <= status < 500 and status not in (408, 429)


def check_content_type(url: str, original: str, header: str | None) -> None:
    """Refuse a declared content type other than html, xhtml or plain text (:class:`UnsupportedContent`)."""
    if not header:
        return  # sniffed later (binary bodies are refused there)
    ctype = header.split(";")[0].strip().lower()
    if ctype not in ALLOWED_CONTENT_TYPES:
        raise UnsupportedContent(f"{url}: content type {ctype} is not html, xhtml or plain text", url=original)


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())
