"""HTML fragments to text through lxml: the same text as the former hand-written HTMLParser extractor."""

from __future__ import annotations

import csv
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from memento.tasks._text import html_to_text

JUSTICE = Path(__file__).resolve().parents[3] / "shared" / "data" / "justice" / "justice.csv"


class _FormerExtractor(HTMLParser):
    """The extractor memento used before lxml (reference for the comparison below)."""

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


def _former(html: str) -> str:
    extractor = _FormerExtractor()
    extractor.feed(html or "")
    extractor.close()
    text = "".join(extractor.parts).replace("\xa0", " ")
    return "\n\n".join(p for p in (" ".join(c.split()) for c in re.split(r"\n\s*\n", text)) if p)


CASES = [
    ("<p>A &amp; B</p><p>C  d</p>", "A & B\n\nC d"),
    ("plain text, no tags", "plain text, no tags"),
    ("<html><body><p>x</p></body></html>", "x"),
    ("a<br>b<br/>c", "a\n\nb\n\nc"),
    ("<!-- a comment --><p>x&nbsp;y&#8217;s</p>", "x y\u2019s"),
    ("<ul><li>one</li><li>two</li></ul>", "one\n\ntwo"),
    ("<p>unclosed <b>bold <i>and italic", "unclosed bold and italic"),
    ("<h2>Title</h2>text after<div>block</div>tail", "Title\n\ntext after\n\nblock\n\ntail"),
    ("a < b and c > d", "a < b and c > d"),
    ("", ""),
    ("  \n ", ""),
]


@pytest.mark.parametrize(("html", "expected"), CASES)
def test_fragments_read_as_before(html: str, expected: str) -> None:
    assert html_to_text(html) == expected
    assert _former(html) == expected


def test_scripts_and_styles_are_dropped_now() -> None:
    html = "<style>p {color: red}</style><p>kept</p><script>var x = 1;</script>after"
    assert html_to_text(html) == "kept\n\nafter"


def test_every_justice_case_reads_exactly_as_before() -> None:
    if not JUSTICE.exists():
        pytest.skip("shared data not present beside the clone")
    with JUSTICE.open(encoding="utf-8", newline="") as handle:
        facts = [row["facts"] for row in csv.DictReader(handle)]
    assert len(facts) > 3000
    assert [i for i, html in enumerate(facts) if html_to_text(html) != _former(html)] == []
