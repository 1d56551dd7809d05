"""Typed errors of the web layer: every fetch outcome is a :class:`~memento.web.fetcher.Page` or one of these."""

from __future__ import annotations

from memento.core.errors import ConfigError, DataError, RecoverableError
from memento.utils.scrub import scrub, scrub_url

__all__ = [
    "WebError",
    "SearchError",
    "FetchError",
    "RobotsDisallowed",
    "Blocked",
    "TooLarge",
    "UnsupportedContent",
    "FetchFailed",
    "AfterCutoff",
    "UndatedRefused",
    "NotCached",
    "NotInCorpus",
    "CorpusError",
    "CorpusFormatError",
    "WebConfigError",
]


class WebError(RecoverableError):
    """Base of the web layer's recoverable errors (a search or a page failed; the agent reads it and goes on)."""


class SearchError(WebError):
    """A search backend failed (provider unreachable, bad answer)."""


class FetchError(WebError):
    """A page could not be served. ``url`` is the URL asked for (message and URL without URL credentials)."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(scrub(message))
        self.url = scrub_url(url)


class RobotsDisallowed(FetchError):
    """robots.txt of the host disallows this path for our User-Agent (no request was sent for the page)."""


class Blocked(FetchError):
    """The SSRF guard refused the target: private/loopback/link-local/reserved address or a non-http(s) scheme."""


class TooLarge(FetchError):
    """The body exceeded the size cap (checked on Content-Length and while streaming)."""


class UnsupportedContent(FetchError):
    """The content type is not html, xhtml or plain text."""


class FetchFailed(FetchError):
    """HTTP error status, timeout, connection failure or too many redirects (after any retries)."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status = status


class AfterCutoff(FetchError):
    """The page is dated on or after the cutoff."""


class UndatedRefused(AfterCutoff):
    """The page has no date, a cutoff is set and the undated policy is ``drop``."""


class NotCached(FetchError):
    """Offline mode: the page is not in the URL cache."""


class NotInCorpus(FetchError):
    """A ``corpus://`` URL that the offline corpus does not hold."""


class CorpusError(DataError):
    """An offline corpus cannot be built or opened."""


class CorpusFormatError(CorpusError):
    """A malformed corpus source line (reported with file and line)."""


class WebConfigError(ConfigError):
    """Inconsistent web settings (no corpus for the offline backend, no SearXNG URL ...)."""
