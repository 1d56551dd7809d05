"""Party strings parsed into named segments: persons and organisations.

A party string lists people ("Albert Krull, George Lucas, Salvatore Mucerino": three persons), titles and
institutions ("Joan Wagnon, Secretary, Kansas Department of Revenue"), aliases ("X, aka Y"), estates and
representatives ("executor of the estate of Thea Spyer"), and carries "et al." and "In re" that are no names.
:func:`parse_party` splits it into :class:`PartySegment` s, each a person or an organisation.

Example:
    >>> from memento.tasks.party_parser import parse_party
    >>> [(s.text, s.kind) for s in parse_party("Albert Krull, George Lucas et al.").segments]
    [('Albert Krull', 'person'), ('George Lucas', 'person')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from memento.tasks.party_vocabulary import (
    GENERIC_TOKENS,
    LEGAL_FORMS_BARE,
    ORG_TOKENS,
    PARTICLES,
    SUFFIXES,
    TITLE_WORDS,
    bare,
    is_initial,
    is_name,
    undotted,
)

__all__ = ["Party", "PartySegment", "parse_party"]

_TOKEN = re.compile(r"[^\W\d_][\w'’\-]*\.?|\d[\w\-]*")
_ET_AL = re.compile(r",?\s*\b(?:et\.?\s*(?:al|ux|uxor|vir)|etc)\b\.?,?", re.IGNORECASE)
_MATTER_OF = re.compile(r"^(?:in\s+re|ex\s+parte|in\s+the\s+matter\s+of)\s+", re.IGNORECASE)
_SPLIT = re.compile(
    r"\s*;\s*|\s+and\s+|\s*,?\s+\b(?:aka|a/k/a|fka|f/k/a|formerly|dba|d/b/a|by|ex\s+rel\.?|v\.?|vs\.?|on\s+behalf\s+of)\s+"
    r"|\s*[()]\s*"
    r"|\s+(?:the\s+)?estates?\s+of\s+(?:the\s+late\s+)?"  # "executor of the estate of Thea Spyer": Thea Spyer
    r"|\s+(?:representative|guardian|next\s+friend|parent|administrat(?:or|rix)|executo(?:r|rix))\s+(?:of|for)\s+",
    re.IGNORECASE,
)


@dataclass
class PartySegment:
    """One named entity inside a party string ("John Giglio", "Quality Manufacturing Company")."""

    text: str
    tokens: list[str]
    kind: Literal["person", "organisation"]

    @property
    def name_tokens(self) -> list[str]:
        """Tokens that are names: no initials, titles, suffixes (persons) or generic words (organisations)."""
        out = []
        for token in self.tokens:
            core = bare(token)
            if not core or is_initial(token) or core in SUFFIXES or not is_name(core):
                continue
            if self.kind == "organisation" and (core in GENERIC_TOKENS or len(core) < 2 or core.isdigit()):
                continue
            out.append(core)
        return out

    @property
    def surname(self) -> str | None:
        """A person's last name (``None`` for organisations)."""
        if self.kind != "person":
            return None
        names = self.name_tokens
        return names[-1] if names else None


@dataclass
class Party:
    """A party string parsed into its named segments."""

    raw: str
    full: str
    segments: list[PartySegment] = field(default_factory=list)

    @property
    def surnames(self) -> list[str]:
        return [s.surname for s in self.segments if s.surname]


def _classify(tokens: list[str]) -> Literal["person", "organisation"]:
    cores = [undotted(t) for t in tokens]
    words = [c for c in cores if not is_initial(c) and c not in SUFFIXES]
    if not words or len(words) > 5:
        return "organisation"
    if any(c in ORG_TOKENS for c in cores) or any(not is_name(c) and c.lower() not in PARTICLES for c in words):
        return "organisation"
    if all(c in GENERIC_TOKENS for c in words):  # "Illinois", "New York", "District of Columbia"
        return "organisation"
    return "person"


def _clean(raw: str) -> str:
    text = " ".join((raw or "").split())
    text = _ET_AL.sub("", text)
    text = _MATTER_OF.sub("", text)
    return text.strip(" ,;.")


def _leading_person(tokens: list[str]) -> list[str]:
    """The person named at the start of a comma part ("Gary Faulk" in "Gary Faulk on their own behalf"), or []
    when the part is a title ("Warden", "State Attorney for ...") or an institution."""
    run: list[str] = []
    for token in tokens:
        core = undotted(token)
        if not (is_name(core) or core.lower() in PARTICLES):
            break
        run.append(token)
    names = [t for t in run if not is_initial(t) and undotted(t) not in SUFFIXES and is_name(undotted(t))]
    if len(names) < 2 or _classify(run) != "person":
        return []
    if any(undotted(t) in TITLE_WORDS for t in run):
        return []
    return run


def _is_surname_only(token: str) -> bool:
    """A lone capitalised word that is neither a title, a suffix nor a generic word ("Rini", not "Warden")."""
    core = bare(token)
    generic = core in GENERIC_TOKENS or core in ORG_TOKENS or core in SUFFIXES or core in TITLE_WORDS
    return len(core) > 2 and core[:1].isupper() and not core.isupper() and core.isalpha() and not generic


def parse_party(raw: str) -> Party:
    """Split a party string into person and organisation segments.

    Example:
        >>> [(s.text, s.kind) for s in parse_party("Joan Wagnon, Secretary, Kansas Department of Revenue").segments]
        [('Joan Wagnon', 'person'), ('Kansas Department of Revenue', 'organisation')]
    """
    full = _clean(raw)
    segments: list[PartySegment] = []
    for chunk in _SPLIT.split(full):
        parts = [p.strip(" .,") for p in chunk.split(",")]
        parts = [p for p in parts if p]
        if not parts:
            continue
        main_tokens = _TOKEN.findall(parts[0])
        if not main_tokens:
            continue
        kind = _classify(main_tokens)
        rest = parts[1:]
        if rest and all(part.replace(".", "").replace(" ", "").lower() in LEGAL_FORMS_BARE for part in rest):
            kind = "organisation"  # "Costa Crociere, S.p.A.", "Smith, Inc."
        if kind == "person":
            segments.append(PartySegment(parts[0], main_tokens, "person"))
            # later comma parts are more people ("A Krull, G Lucas"), titles ("Warden", "Secretary") or institutions
            for part in rest:
                tokens = _TOKEN.findall(part)
                person = _leading_person(tokens)
                if person:
                    text = " ".join(person)
                    segments.append(PartySegment(text, person, "person"))
                elif len(tokens) == 1 and _is_surname_only(tokens[0]):  # "Carlisle, McNellie, Rini, Kramer"
                    segments.append(PartySegment(part, tokens, "person"))
                elif tokens and len(tokens) > 1 and any(undotted(t) in ORG_TOKENS for t in tokens):
                    segments.append(PartySegment(part, tokens, "organisation"))
        else:
            suffix_only = all(
                all(undotted(t) in ORG_TOKENS or undotted(t) in SUFFIXES for t in _TOKEN.findall(p)) for p in rest
            )
            if rest and suffix_only:
                segments.append(PartySegment(", ".join(parts), _TOKEN.findall(", ".join(parts)), "organisation"))
            else:
                segments.append(PartySegment(parts[0], main_tokens, "organisation"))
                for part in rest:
                    tokens = _TOKEN.findall(part)
                    if tokens and not all(undotted(t) in SUFFIXES for t in tokens):
                        segments.append(PartySegment(part, tokens, _classify(tokens)))
    return Party(raw=raw, full=full, segments=segments)
