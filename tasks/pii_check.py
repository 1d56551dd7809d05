"""Checks of anonymised facts that do not use the anonymizer: garbled names and identifying fragments.

:func:`memento.tasks.party_leaks.find_leaks` finds party names left whole or word by word. Two failures escape it:

* **garbling**: part of a multi-word party name replaced and the rest left beside the placeholder ("Great the
  respondent" for "Great Lakes Dredge"): :func:`find_garbles` reports a word of the party's string (other than
  "the", "of", legal forms) written capitalised right before or after that party's placeholder;
* **identifying fragments**: a party word misspelt in the facts ("Richmon" for "Richmond") or inside a court's
  name ("Navajo Nation Supreme Court", which :func:`find_leaks` skips because a state's own courts are
  legitimately named): :func:`find_fragments`. A capitalised word is an ordinary word, not a misspelling, when
  the text (or ``vocabulary``, e.g. every lowercase word of a corpus) also has it in lowercase.

Example:
    >>> from memento.tasks.pii_check import find_garbles
    >>> [g.word for g in find_garbles("Great the respondent won.", "Smith", "Great Lakes Dredge & Dock Co.")]
    ['Great']
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from memento.tasks.court_names import court_spans
from memento.tasks.party_leaks import LEAK_STOPWORDS, leak_terms

__all__ = ["Finding", "find_garbles", "find_fragments"]

_PLACEHOLDER = re.compile(r"(?<![\w\[])[Tt]he (?:petitioner|respondent|parties)(?:['’]s)?(?![\w'’])")
_BEFORE = re.compile(r"([A-Za-z][\w'’&\-]*)\s+$")
_AFTER = re.compile(r"\s+([A-Za-z][\w'’&\-]*)")
_IGNORED = frozenset("the of and a an in on for to v vs et al inc corp co ltd llc".split())
_CAPITALISED = re.compile(r"(?<![\w])[A-Z][a-zA-Z]{3,}(?![\w])")


@dataclass
class Finding:
    """One garbled name or identifying fragment: what kind, which word, and the text around it."""

    kind: Literal["garbled", "court", "misspelt"]
    word: str
    context: str


def _party_words(raw: str) -> set[str]:
    words = [w.strip(".,'’()\"").lower() for w in re.split(r"[\s,;/()]+", raw or "")]
    words = [re.sub(r"['’]s?$", "", w) for w in words if len(w) >= 2]
    words = [w for w in words if w.isalpha()]
    return set(words) - _IGNORED if len(words) >= 2 else set()


def find_garbles(text: str, first_party: str, second_party: str) -> list[Finding]:
    """Words of a multi-word party name left right beside that party's placeholder."""
    words = (_party_words(first_party), _party_words(second_party))
    found: list[Finding] = []
    for match in _PLACEHOLDER.finditer(text):
        label = match.group(0).lower()
        parties = (0,) if "petitioner" in label else (1,) if "respondent" in label else (0, 1)
        own = set().union(*(words[i] for i in parties))
        neighbours = (
            _BEFORE.search(text, max(0, match.start() - 40), match.start()),
            _AFTER.match(text, match.end()),
        )
        for neighbour in neighbours:
            if neighbour is None or not neighbour.group(1)[:1].isupper():
                continue
            word = re.sub(r"['’]s?$", "", neighbour.group(1)).lower()
            if word in own:
                context = text[max(0, match.start() - 40) : match.end() + 40]
                found.append(Finding("garbled", neighbour.group(1), context))
    return found


def _one_edit(a: str, b: str) -> bool:
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def find_fragments(
    text: str, first_party: str, second_party: str, *, vocabulary: Collection[str] = ()
) -> list[Finding]:
    """Party words inside court names, and capitalised words one letter away from a party word (5+ letters)."""
    found: list[Finding] = []
    courts = court_spans(text)
    lowercase = set(re.findall(r"(?<![\w])[a-z]+(?![\w])", text)) | set(vocabulary)
    for raw in (first_party, second_party):
        for term in leak_terms(raw):
            pattern = rf"(?<![\w])(?i:{re.escape(term)})(?:s|['’]s)?(?![\w])"
            for match in re.finditer(pattern, text):
                inside = any(start <= match.start() and match.end() <= end for start, end in courts)
                if inside and not match.group(0).islower():
                    found.append(Finding("court", term, text[max(0, match.start() - 40) : match.end() + 20]))
            if len(term) < 5 or term.lower().endswith(("an", "ese")):  # "Korea" is not "Korean" misspelt
                continue
            for match in _CAPITALISED.finditer(text):
                word = match.group(0).lower()
                if word in LEAK_STOPWORDS or word in lowercase or word[0] != term[0].lower():
                    continue
                if _one_edit(word, term.lower()):
                    found.append(
                        Finding("misspelt", match.group(0), text[max(0, match.start() - 40) : match.end() + 20])
                    )
    return found
