"""The page a fetch returns: the URL asked for, the URL that answered, extracted text and metadata.

Every outcome of :meth:`memento.web.fetcher.Fetcher.fetch` is a :class:`Page` or a typed
:class:`~memento.web.errors.FetchError`; the offline corpus serves its documents as pages too.

Example:
    >>> from memento.web.page import Page
    >>> Page(url="http://127.0.0.1:8080/a", final_url="http://127.0.0.1:8080/a", title="A").from_cache
    False
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict

from memento.utils.scrub import scrub_url
from memento.web.search_result import parse_date

__all__ = ["Page", "page_from_cache"]


class Page(BaseModel):
    """A fetched (or corpus-served) page: the URL asked for, the URL that answered, extracted text and metadata."""

    model_config = ConfigDict(extra="forbid")

    url: str
    final_url: str
    title: str = ""
    text: str = ""
    published: dt.date | None = None
    status: int = 200
    from_cache: bool = False


def page_from_cache(url: str, row: dict[str, Any]) -> Page:
    """The page of a URL cache entry (:meth:`memento.web.url_cache.URLCache.get_page`), asked for as ``url``."""
    return Page(
        url=scrub_url(url),
        final_url=row["final_url"],
        title=row["title"],
        text=row["text"],
        published=parse_date(row["published"]),
        status=row["status"],
        from_cache=True,
    )
