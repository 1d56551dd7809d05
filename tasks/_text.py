"""Answer normalisation as in SQuAD/HotpotQA evaluation, and HTML fragments to plain text."""

from __future__ import annotations

import re
import string

__all__ = ["normalize_answer", "html_to_text"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


_BLOCKS = ("p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "tr")


def html_to_text(html: str) -> str:
    """Plain text of an HTML fragment (parsed by ``lxml.html``): tags, comments, scripts and styles dropped,
    entities decoded, one blank line between paragraphs (block elements: ``p``, ``li``, ``br``, headings, rows...).

    Example:
        >>> html_to_text("<p>A &amp; B</p><p>C  d</p>")
        'A & B\\n\\nC d'
    """
    import lxml.html
    from lxml import etree

    if not html or not html.strip():
        return ""
    try:
        root = lxml.html.fragment_fromstring(html, create_parent="div")
    except (etree.ParserError, ValueError):  # e.g. a whole document: parse it as one
        root = lxml.html.document_fromstring(html)
    for element in list(root.iter("script", "style")):
        element.drop_tree()  # code, not text (its tail stays)
    for element in root.iter(*_BLOCKS):
        element.text = "\n\n" + (element.text or "")
        element.tail = "\n\n" + (element.tail or "")
    text = root.text_content().replace("\xa0", " ")
    paragraphs = [" ".join(chunk.split()) for chunk in re.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paragraphs if p)
