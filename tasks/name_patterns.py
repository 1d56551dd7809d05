"""The regular expressions the anonymizer finds party names with, and the text around a match.

* a name's regex: :func:`flex` (a literal name, flexible blanks and dots, abbreviations written out),
  :func:`any_case` (one word in any case; an all-lowercase match is dropped by the caller), :data:`CORP_SUFFIX`
  (a legal form after an organisation's name), :func:`without_legal_form`;
* :class:`NamePattern`: one compiled regex of one party and how a match of it is judged;
* around a match: "the" or a title before it (:data:`BEFORE_THE`, :data:`BEFORE_TITLE`), a possessive or plural
  after it (:data:`TAIL`), a sentence start (:data:`SENTENCE_END`), a given name before a surname
  (:func:`given_name_before`);
* an organisation's name is replaced whole or not at all: :func:`whole_name` grows a match of part of it over the
  neighbouring words of the party's string (:func:`org_words`).

Example:
    >>> import re
    >>> from memento.tasks.name_patterns import flex
    >>> bool(re.fullmatch(flex("General Motors Corp."), "General  Motors Corporation"))
    True
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal, TypeGuard

from memento.tasks.party_vocabulary import (
    GENERIC_TOKENS,
    LEGAL_FORMS,
    NOT_GIVEN,
    ORG_ABBREVIATIONS,
    STATES,
    TITLES,
    bare,
)

__all__ = [
    "BEFORE_THE",
    "BEFORE_TITLE",
    "CORP_SUFFIX",
    "NamePattern",
    "SENTENCE_END",
    "TAIL",
    "WINDOW",
    "any_case",
    "compile_cached",
    "flex",
    "given_name_before",
    "org_words",
    "whole_name",
    "without_legal_form",
]


def flex(text: str) -> str:
    """A regex for a literal name with flexible whitespace, optional dots and expanded abbreviations
    ("Corp." also matches "Corporation", "Univ." "University")."""
    parts = []
    for token in text.split():
        core = token.rstrip(".,")
        forms = ORG_ABBREVIATIONS.get(core.lower())
        if forms:
            comma = ",?" if token[len(core) :].endswith(",") else ""
            alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
            parts.append(rf"(?:{alternatives})\.?{comma}")
        else:
            parts.append(re.escape(token.rstrip(".")) + (r"\.?" if token.endswith(".") else ""))
    return r"\s+".join(parts)


def without_legal_form(text: str) -> str:
    """An organisation's name without its trailing legal form ("General Motors" for "General Motors Corp"), or ""
    when nothing distinctive would be left."""
    tokens = text.replace(",", " ").split()
    while tokens and tokens[-1].rstrip(".").lower() in LEGAL_FORMS:
        tokens.pop()
    if not tokens or len(tokens) == len(text.replace(",", " ").split()):
        return ""
    if len(tokens) == 1 and (tokens[0].rstrip(".") in STATES or len(tokens[0]) < 3):
        return ""
    return " ".join(tokens)


def any_case(core: str) -> str:
    """A name in any case ("DuPont", "Dupont", "DUPONT"); all-lowercase matches are dropped by the caller."""
    return f"(?i:{re.escape(core)})"


CORP_SUFFIX = r"(?:,?\s+(?:Inc|Corp|Co|Ltd|LLC|L\.L\.C|N\.A|Corporation|Company|Incorporated)\b\.?)?"
# What may surround a name: "the" and a title before it, a possessive or plural after it.
BEFORE_THE = re.compile(r"(?<![\w'’])[Tt]he\s+$")
_ABBREVIATED_TITLES = "Mr|Mrs|Ms|Dr|Gov|Sen|Rep|Sgt|Lt|Capt|Prof|Rev|Gen|Det|Insp|Cpl|Col|Maj|Hon"
# a title before a name; a period only after an abbreviation ("Justice. Martin argued" is two sentences)
BEFORE_TITLE = re.compile(rf"(?<![\w'’])(?:(?<![\w'’])[Tt]he\s+)?(?:(?:{_ABBREVIATED_TITLES})\.?|(?:{TITLES}))\s+$")
TAIL = re.compile(r"(?P<tail>s's|'s|’s|s'|s’|'|’|es|s)?(?![\w'’])")
SENTENCE_END = re.compile(r"(?:^|[.!?]\s*[\"'”’)]?|\n)\s*$")
WINDOW = 48  # characters before a name searched for "the" and a title


@functools.lru_cache(maxsize=8192)
def compile_cached(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_GIVEN_BEFORE = re.compile(r"(?<![\w'’.])((?:[A-Z][a-z]+\s+)(?:(?:[A-Z]\.|[A-Z][a-z]+)\s+)?)$")


@dataclass
class NamePattern:
    regex: re.Pattern[str]
    party: int
    person: bool
    surname: Literal["", "alone", "named"] = ""  # a surname pattern: the party string has no / a given name
    given: frozenset[str] = frozenset()  # the person's given names (surname patterns)
    fuzzy: tuple[str, ...] = ()  # group "last" must be spelled like one of these ("Vella" for the party "Julian Vell")
    skip_lower: bool = False  # an all-lowercase match is an ordinary word ("cannabis"), not the name
    org: frozenset[str] = frozenset()  # an organisation's words (lowercase): a match grows to the whole name
    in_courts: bool = False  # replaced inside court names too (a distinctive name: "Navajo Nation Supreme Court")
    misspelt: str = ""  # group "last" must be a misspelling of this name ("Richmon" for "Richmond")


def given_name_before(window: str) -> str:
    """The given name(s) written right before a surname ("Joan " in "Joan Stanley"), or ""."""
    match = _GIVEN_BEFORE.search(window)
    if match is None:
        return ""
    words = [w.rstrip(".") for w in match.group(1).split()]
    if words[0] in NOT_GIVEN or any(w in GENERIC_TOKENS or w in NOT_GIVEN for w in words):
        return ""
    return match.group(1)


_WORD_BEFORE = re.compile(r"([A-Za-z][\w'’.]*|&)(?:\s+|-)$")  # the word before, across a blank or a hyphen
_WORD_AFTER = re.compile(r"(?:['’]s|s['’]|['’]|s)?(?:\s+|-)([A-Za-z][\w'’.]*|&)")  # "Veterans' Affairs"
_CONNECTORS = frozenset({"of", "and", "&", "the", "for", "on"})


def org_words(text: str) -> frozenset[str]:
    """The words of an organisation's name, lowercase and bare, with the spellings of its abbreviations."""
    words: set[str] = set()
    for token in re.findall(r"[\w'’.\-]+|&", text):
        core = bare(token).lower()
        if core:
            words.add(core)
            words.update(form.lower() for form in ORG_ABBREVIATIONS.get(core, ()))
    if words & {"&", "and"}:  # "Gas & Electric" is also written "Gas and Electric"
        words |= {"&", "and"}
    return frozenset(words)


def _name_word(
    match: re.Match[str] | None, words: frozenset[str], *, backward: bool = False
) -> TypeGuard[re.Match[str]]:
    """A capitalised word of the name; going back, one that ends a sentence ("Monterey. Monterey denied") is not."""
    if match is None or not match.group(1)[:1].isupper():
        return False
    word = bare(match.group(1)).lower()
    abbreviation = len(word) == 1 or word in ORG_ABBREVIATIONS or word in LEGAL_FORMS
    if backward and match.group(1).endswith(".") and not abbreviation:
        return False
    return word in words


def whole_name(text: str, start: int, end: int, words: frozenset[str]) -> tuple[int, int]:
    """Grow a match of part of an organisation's name over the neighbouring words of the same name, so the whole
    name is replaced ("Great Lakes Dredge" when "Lakes Dredge" matched); a connector ("of", "&") is crossed only
    when a name word lies beyond it."""
    while True:
        before = _WORD_BEFORE.search(text, max(0, start - 40), start)
        if _name_word(before, words, backward=True) and bare(before.group(1)).lower() not in _CONNECTORS:
            start = before.start(1)
            continue
        if before is not None and before.group(1).lower() in _CONNECTORS and before.group(1).lower() in words:
            further = _WORD_BEFORE.search(text, max(0, before.start(1) - 40), before.start(1))
            if _name_word(further, words, backward=True) and bare(further.group(1)).lower() not in _CONNECTORS:
                start = further.start(1)
                continue
        break
    while True:
        after = _WORD_AFTER.match(text, end)
        if _name_word(after, words) and bare(after.group(1)).lower() not in _CONNECTORS:
            end = after.start(1) + len(after.group(1).rstrip(".,")) if after.group(1)[-1] in ",." else after.end(1)
            continue
        if after is not None and after.group(1).lower() in _CONNECTORS and after.group(1).lower() in words:
            further = _WORD_AFTER.match(text, after.end(1))
            if _name_word(further, words) and bare(further.group(1)).lower() not in _CONNECTORS:
                end = further.end(1)
                continue
        break
    return start, end
