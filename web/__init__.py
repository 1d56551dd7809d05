"""memento.web: search backends (offline corpus, ddgs, SearXNG), the polite cached fetcher, and the agent tools.

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of the package does
not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.web.ddgs_backend import DDGSBackend
    from memento.web.errors import (
        AfterCutoff,
        Blocked,
        FetchError,
        FetchFailed,
        NotCached,
        RobotsDisallowed,
        TooLarge,
        UnsupportedContent,
        WebError,
    )
    from memento.web.factory import make_backend, make_fetcher, make_web_tools, web_tools_factory
    from memento.web.fetcher import Fetcher
    from memento.web.offline_corpus import OfflineCorpus
    from memento.web.page import Page
    from memento.web.search_result import SearchBackend, SearchResult
    from memento.web.searxng_backend import SearXNGBackend
    from memento.web.url_cache import URLCache
    from memento.web.web_tools import WebTools

_HOMES: dict[str, str] = {
    "DDGSBackend": "ddgs_backend",
    "AfterCutoff": "errors",
    "Blocked": "errors",
    "FetchError": "errors",
    "FetchFailed": "errors",
    "NotCached": "errors",
    "RobotsDisallowed": "errors",
    "TooLarge": "errors",
    "UnsupportedContent": "errors",
    "WebError": "errors",
    "make_backend": "factory",
    "make_fetcher": "factory",
    "make_web_tools": "factory",
    "web_tools_factory": "factory",
    "Fetcher": "fetcher",
    "Page": "page",
    "OfflineCorpus": "offline_corpus",
    "SearchBackend": "search_result",
    "SearchResult": "search_result",
    "SearXNGBackend": "searxng_backend",
    "URLCache": "url_cache",
    "WebTools": "web_tools",
}

__all__ = [
    "AfterCutoff",
    "Blocked",
    "DDGSBackend",
    "FetchError",
    "FetchFailed",
    "Fetcher",
    "NotCached",
    "OfflineCorpus",
    "Page",
    "RobotsDisallowed",
    "SearXNGBackend",
    "SearchBackend",
    "SearchResult",
    "TooLarge",
    "URLCache",
    "UnsupportedContent",
    "WebError",
    "WebTools",
    "make_backend",
    "make_fetcher",
    "make_web_tools",
    "web_tools_factory",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
