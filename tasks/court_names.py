"""Court names in a text ("U.S. Court of Appeals for the Fifth Circuit", "Supreme Court of California").

Both the anonymizer and the leak check leave organisation and place names inside court names (a party is often the
United States or a state, whose courts are legitimately named): :func:`court_spans` finds them, :func:`inside`
tells whether a match lies within one.

Example:
    >>> from memento.tasks.court_names import court_spans
    >>> text = "The Supreme Court of Illinois agreed."
    >>> [text[a:b] for a, b in court_spans(text)]
    ['The Supreme Court of Illinois']
"""

from __future__ import annotations

import re

__all__ = ["court_spans", "inside"]

# A court's name: capitalised words (and of/for/the) around the word "Court".
_CAP = r"(?:(?:[A-Z]\.){1,3}[A-Z]?|(?:Dist|Ct|Cir|App|Cal|Tex|Fla|Mass|Pa|Va|Ga|N\.Y|Ill)\.|[A-Z][\w'’&\-]*)"
_COURT = re.compile(rf"(?:{_CAP}\s+(?:(?:of|for)\s+(?:the\s+)?)?)*Court\b(?:\s+(?:of|for|the|{_CAP}))*")
_TRAILING = re.compile(r"(?:\s+(?:of|for|the))+$")


def court_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every court name in the text ("U.S. Court of Appeals for the Fifth Circuit")."""
    spans = []
    for match in _COURT.finditer(text):
        chunk = _TRAILING.sub("", match.group(0))
        spans.append((match.start(), match.start() + len(chunk)))
    return spans


def inside(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    """Whether ``span`` lies within one of ``spans``."""
    return any(start <= span[0] and span[1] <= end for start, end in spans)
