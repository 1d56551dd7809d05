"""memento.web: search backends (offline corpus, ddgs, SearXNG), the polite cached fetcher, and the agent tools."""

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
from memento.web.fetcher import Fetcher, Page
from memento.web.offline_corpus import OfflineCorpus
from memento.web.search_result import SearchBackend, SearchResult
from memento.web.searxng_backend import SearXNGBackend
from memento.web.url_cache import URLCache
from memento.web.web_tools import WebTools

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
