"""Answer normalisation as in SQuAD/HotpotQA evaluation."""

from __future__ import annotations

import re
import string
from html.parser import HTMLParser

__all__ = ["normalize_answer", "html_to_text"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


class _TextExtractor(HTMLParser):
    """Collects the text of an HTML fragment, with a paragraph break around block elements."""

    _BLOCKS = frozenset({"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "tr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_to_text(html: str) -> str:
    """Plain text of an HTML fragment: tags dropped, entities decoded, one blank line between paragraphs.

    Example:
        >>> html_to_text("<p>A &amp; B</p><p>C  d</p>")
        'A & B\\n\\nC d'
    """
    extractor = _TextExtractor()
    extractor.feed(html or "")
    extractor.close()
    text = "".join(extractor.parts).replace("\xa0", " ")
    paragraphs = [" ".join(chunk.split()) for chunk in re.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paragraphs if p)
