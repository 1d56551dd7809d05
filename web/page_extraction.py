"""A page's text, title and publication date from a fetched body (trafilatura for HTML, decoded plain text).

Binary bodies are refused (:class:`~memento.web.errors.UnsupportedContent`); plain text is decoded with the
charset its Content-Type names (UTF-8 otherwise); HTML goes through trafilatura (main text, title, publication
date), falling back on its whole-page text and the ``<title>`` element when the main-text pass finds nothing.

Example:
    >>> from memento.web.http_answer import RawAnswer
    >>> from memento.web.page_extraction import extract_page
    >>> answer = RawAnswer("http://127.0.0.1/a", 200, {"content-type": "text/plain"}, b"Hello")
    >>> extract_page("http://127.0.0.1/a", "http://127.0.0.1/a", answer).text
    'Hello'
"""

from __future__ import annotations

import re

from memento.utils.scrub import scrub_url
from memento.web.errors import UnsupportedContent
from memento.web.http_answer import RawAnswer
from memento.web.page import Page
from memento.web.search_result import parse_date

__all__ = ["extract_page", "charset_of"]

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def extract_page(url: str, final_url: str, raw: RawAnswer) -> Page:
    """The :class:`~memento.web.page.Page` of ``raw``, the answer ``final_url`` gave to a fetch of ``url``."""
    ctype = (raw.headers.get("content-type") or "").split(";")[0].strip().lower()
    body = raw.body
    if b"\x00" in body[:2048]:
        raise UnsupportedContent(f"{final_url}: binary content", url=url)
    if ctype == "text/plain" or (not ctype and not body.lstrip()[:1] == b"<"):
        charset = charset_of(raw.headers.get("content-type")) or "utf-8"
        text = body.decode(charset, errors="replace").strip()
        return Page(url=scrub_url(url), final_url=scrub_url(final_url), title="", text=text, status=raw.status)
    import trafilatura

    doc = trafilatura.bare_extraction(
        body,
        url=final_url,
        with_metadata=True,
        include_comments=False,
        date_extraction_params={"extensive_search": False, "original_date": True},
    )
    text = (getattr(doc, "text", None) or "") if doc is not None else ""
    title = (getattr(doc, "title", None) or "") if doc is not None else ""
    published = parse_date(getattr(doc, "date", None)) if doc is not None else None
    if not text:
        text = (trafilatura.html2txt(body) or "").strip()
    if not title:
        m = _TITLE.search(body[:200_000])
        if m:
            title = " ".join(m.group(1).decode("utf-8", errors="replace").split())
    return Page(
        url=scrub_url(url),
        final_url=scrub_url(final_url),
        title=title,
        text=text,
        published=published,
        status=raw.status,
    )


def charset_of(header: str | None) -> str | None:
    """The codec a Content-Type header names (``charset=...``), ``None`` when absent or unknown."""
    if not header:
        return None
    m = re.search(r"charset=([\w.-]+)", header, re.IGNORECASE)
    if not m:
        return None
    import codecs

    try:
        return codecs.lookup(m.group(1)).name
    except LookupError:
        return None
