"""Party-name removal for case facts: parties become role placeholders before any model reads the facts.

The JUSTICE facts name the parties (``first_party`` is the petitioner, ``second_party`` the respondent), which lets
a model recall the case and its outcome. :class:`PartyAnonymizer` replaces, in one pass over the text:

* each party's full name and each of its segments ("Loren Tyler and Robert Tompkins", "X, aka Y", "A, B Inc.")
  case-insensitively;
* for a person: first + last name (middle names and initials optional), the surname alone (with an optional
  title such as "Mr." or "Justice"), and given names alone (when no other capitalised name follows);
* for an organisation: its distinctive words and runs of them ("Planned Parenthood"), never generic words from a
  stoplist ("United", "States", "Inc", "City", "of", "Department", state names...).

An organisation's name is replaced whole or not at all: a match of part of it grows over the neighbouring words
of the party's string ("Great Lakes Dredge" when "Lakes Dredge" matched, "Gas and Electric" for "Gas & Electric"),
never "Great the respondent". A party word misspelt by one letter ("Richmon" for "Richmond", "Edwart Whigham" for
"Edward L. Whigham") is the party unless the text also uses it as an ordinary lowercase word. A distinctive
organisation name is replaced inside its own court's name ("Navajo Nation Supreme Court"); a state's is kept.

A leading "the" and a possessive are kept grammatical ("the Stanleys'" -> "the petitioner's"); a placeholder that
starts a sentence is capitalised. A name both parties share ("the Reeds") becomes "the parties". A given name
written before a person-party's surname is the party itself when the party string gives no given name ("John
Stewart" for the party "Stewart"), and another person otherwise ("Joan Stanley" for "Peter Stanley" becomes
"Joan [the petitioner's surname]"). Organisation and
place names are left inside court names ("United States Court of Appeals for the Ninth Circuit", "Supreme Court of
California") because a party is often the United States or a state; a person's surname is replaced everywhere.

Party strings list people ("Albert Krull, George Lucas, Salvatore Mucerino": three persons), carry name particles
("Abdullah al-Kidd": the surname is "al-Kidd", also found as "Al-Kidd" or "Kidd") and abbreviations ("General
Motors Corp." is also "General Motors Corporation" and "General Motors"). A given name followed by a misspelling
of the surname ("Julian Vella" for "Julian Vell") is the party; so is a name defined in the text as the party's
short name ('the petitioner ("Northwest")').

:class:`PartyAnonymizer` (this module) builds the patterns and makes the one pass; its parts live one per module:
:mod:`~memento.tasks.party_vocabulary` (word lists and token tests), :mod:`~memento.tasks.party_parser`
(:func:`parse_party`: party strings into person and organisation segments), :mod:`~memento.tasks.name_patterns`
(the regexes of a name and the text around a match, whole organisation names),
:mod:`~memento.tasks.name_spelling` (variant and misspelt spellings) and :mod:`~memento.tasks.court_names`.

:func:`find_leaks` (:mod:`~memento.tasks.party_leaks`, re-exported here) checks a processed text for party names
left in it without the anonymizer's parsing or patterns, so it does not share their blind spots.

Example:
    >>> from memento.tasks.pii import PartyAnonymizer
    >>> anonymizer = PartyAnonymizer("Peter Stanley, Sr.", "Illinois")
    >>> anonymizer.anonymize("Peter Stanley sued Illinois. Stanley's appeal reached the Supreme Court of Illinois.")
    "The petitioner sued the respondent. The petitioner's appeal reached the Supreme Court of Illinois."
"""

from __future__ import annotations

import re
from typing import Any, Literal

from memento.tasks.court_names import court_spans, inside
from memento.tasks.name_patterns import (
    BEFORE_THE,
    BEFORE_TITLE,
    CORP_SUFFIX,
    SENTENCE_END,
    TAIL,
    WINDOW,
    NamePattern,
    any_case,
    compile_cached,
    flex,
    given_name_before,
    org_words,
    whole_name,
    without_legal_form,
)
from memento.tasks.name_spelling import MISSPELT_MIN, MISSPELT_WORD, is_misspelling, own_given, similar
from memento.tasks.party_leaks import LEAK_STOPWORDS, Leak, find_leaks, leak_terms
from memento.tasks.party_parser import Party, PartySegment, parse_party
from memento.tasks.party_vocabulary import (
    GENERIC_TOKENS,
    LEGAL_FORMS,
    ORG_ABBREVIATIONS,
    ORG_TOKENS,
    PARTICLE_NAME,
    PARTICLES,
    STATES,
    bare,
    is_name,
)

__all__ = [
    "PartySegment",
    "Party",
    "parse_party",
    "PartyAnonymizer",
    "Leak",
    "find_leaks",
    "court_spans",
    "leak_terms",
    "GENERIC_TOKENS",
    "LEAK_STOPWORDS",
    "ORG_TOKENS",
    "ORG_ABBREVIATIONS",
]


class PartyAnonymizer:
    """Replace two parties' names in a text by role placeholders.

    Args:
        first_party: the petitioner's name as in the data ("Peter Stanley, Sr.").
        second_party: the respondent's name.
        labels: the placeholders of the two parties.
        both: the placeholder of a name both parties share (the Reeds in *Reed v. Reed*).

    Example:
        >>> PartyAnonymizer("Sally Reed", "Cecil Reed").anonymize("Sally and Cecil Reed disagreed; the Reeds split.")
        'The petitioner and the respondent disagreed; the parties split.'
    """

    def __init__(
        self,
        first_party: str,
        second_party: str,
        *,
        labels: tuple[str, str] = ("the petitioner", "the respondent"),
        both: str = "the parties",
    ) -> None:
        self.parties = (parse_party(first_party), parse_party(second_party))
        self.labels = labels
        self.both = both
        self._nicknames: list[tuple[str, int]] = []  # organisation words that may be a defined short name
        self._patterns = self._build()

    def _build(self) -> list[NamePattern]:
        patterns: list[NamePattern] = []

        def add(
            body: str,
            party: int,
            person: bool,
            *,
            insensitive: bool = False,
            surname: Literal["", "alone", "named"] = "",
            given: frozenset[str] = frozenset(),
            fuzzy: tuple[str, ...] = (),
            misspelt: str = "",
        ) -> None:
            core = f"(?i:{body})" if insensitive else body
            if not person:  # "Halo Electronics, Inc." when the party is "Halo Electronics"
                core = f"(?:{core}){CORP_SUFFIX}"
            regex = compile_cached(rf"(?<![\w])(?:{core})")
            courts = False if person else context["courts"]
            patterns.append(
                NamePattern(
                    regex, party, person, surname, given, fuzzy, not insensitive, context["org"], courts, misspelt
                )
            )

        context: dict[str, Any] = {"org": frozenset(), "courts": False}
        for index, party in enumerate(self.parties):
            organisations = [seg for seg in party.segments if seg.kind == "organisation"]
            context["org"] = org_words(party.full)  # a match grows over any word of the party's string
            context["courts"] = any(seg.name_tokens for seg in organisations)
            if party.full:
                add(flex(party.full), index, False, insensitive=True)
            for segment in party.segments:
                person = segment.kind == "person"
                context["courts"] = bool(segment.name_tokens)
                add(flex(segment.text), index, person, insensitive=True)
                for name in segment.name_tokens:  # "Richmon" for "Richmond", "Scarpelli" for "Scarpello"
                    for part in re.split(r"[-'’]", name):
                        if len(part) >= MISSPELT_MIN and part.lower() not in PARTICLES:
                            add(MISSPELT_WORD, index, person, misspelt=part)
                short = "" if person else without_legal_form(segment.text)
                if short:  # "Northwest" for the party "Northwest, Inc.": as written, never a lowercase word
                    add(flex(short), index, False, insensitive=" " in short)
                names = segment.name_tokens
                if not names:
                    continue
                if person:
                    given, surname = names[:-1], names[-1]
                    if given:
                        middle = "".join(rf"(?:\s+(?:{any_case(n)}|{re.escape(n[0])}\.?))?" for n in given[1:])
                        suffix = r"(?:,?\s+(?:Jr|Sr|II|III|IV)\.?)?"
                        add(rf"{any_case(given[0])}{middle}(?:\s+[A-Z]\.)?\s+{any_case(surname)}{suffix}", index, True)
                        for name in given:  # a given name alone, unless another name follows it
                            add(rf"{any_case(name)}(?!\s+[A-Z][a-z])", index, True)
                        for first, second in zip(names, names[1:], strict=False):  # "Cedar Point", "Sanchez Valle"
                            add(rf"{any_case(first)}\s+{any_case(second)}", index, True)
                        for name in given:  # "Reeder-Simco": "Reeder"
                            for part in name.split("-") if "-" in name else []:
                                if len(part) > 2 and part.lower() not in PARTICLES and part not in GENERIC_TOKENS:
                                    add(any_case(part), index, True)
                        # the first name and a misspelt surname ("Julian Vella" for the party "Julian Vell")
                        spellings = (surname, *re.split(r"[-'’]", surname), *given[1:])
                        last = r"(?P<last>[A-Z][\w\-]*(?:['’](?!s\b)[\w\-]+)?)"
                        more = (
                            r"(?:\s+(?:" + "|".join(any_case(n) for n in names[1:]) + "))*"
                        )  # "Humberto Regalado Cuellar"
                        add(rf"{any_case(given[0])}{middle}\s+{last}{more}", index, True, fuzzy=spellings)
                    hyphenated = "-" in surname or PARTICLE_NAME.match(surname) is not None
                    # "al-Kidd" is also written "Al-Kidd" and "AL-KIDD"
                    surname_regex = f"(?i:{re.escape(surname)})" if hyphenated else any_case(surname)
                    add(surname_regex, index, True, surname="named" if given else "alone", given=frozenset(given))
                    for part in re.split(r"[-'’]", surname) if hyphenated else []:
                        if len(part) > 1 and part.lower() not in PARTICLES:
                            add(any_case(part), index, True)
                else:
                    tokens = [bare(t) for t in segment.tokens]
                    distinct = set(names)
                    for name in names:  # "Warner-Jenkinson": "Warner", "Jenkinson"
                        for part in name.split("-") if "-" in name else []:
                            if len(part) > 2 and part not in GENERIC_TOKENS and is_name(part):
                                add(any_case(part), index, False)
                    for i, start in enumerate(tokens):
                        if start not in distinct:
                            continue
                        for j in range(i + 1, len(tokens)):  # "Pacific Northwest", "Pacific Northwest Pipeline"
                            if tokens[j][:1].isupper():
                                add(r"\s+".join(any_case(t) for t in tokens[i : j + 1]), index, False)
                        add(any_case(start), index, False)
                    for token in tokens:  # a defined term: the petitioner ("Northwest"), see anonymize()
                        generic = token in STATES or token.lower() in LEGAL_FORMS or token in ("Court", "Act")
                        if len(token) > 2 and token[:1].isupper() and not generic:
                            self._nicknames.append((token, index))
        return patterns

    def _placeholder(self, parties: set[int]) -> str:
        """The label of a name that belongs to these parties."""
        return self.both if len(parties) > 1 else self.labels[next(iter(parties))]

    def anonymize(self, text: str) -> str:
        """The text with every party name replaced (one pass; longest names win)."""
        if not text:
            return text
        courts = court_spans(text)
        patterns = list(self._patterns)
        for word, party in self._nicknames:  # 'the petitioner ("Northwest")' makes "Northwest" a name of the party
            if re.search(rf"[\"“(]\s*{re.escape(word)}\s*[\"”)]", text):
                regex = compile_cached(rf"(?<![\w])(?:{re.escape(word)}|{re.escape(word.upper())})")
                patterns.append(NamePattern(regex, party, False))
        found: dict[tuple[int, int], tuple[set[int], str, bool]] = {}  # span -> parties, tail, namesake
        for pattern in patterns:
            for match in pattern.regex.finditer(text):
                begin, finish = match.start(), match.end()
                if pattern.misspelt and not is_misspelling(match.group("last"), pattern.misspelt, text):
                    continue
                if pattern.org:  # a whole organisation name or nothing: never "Great the respondent"
                    begin, finish = whole_name(text, begin, finish, pattern.org)
                tail = TAIL.match(text, finish)
                if tail is None or begin == finish:
                    continue  # the name continues ("Reed" in "Reedy")
                if pattern.fuzzy and not any(similar(match.group("last"), name) for name in pattern.fuzzy if name):
                    continue
                if pattern.skip_lower and match.group(0).islower():
                    continue
                if not pattern.person and not pattern.in_courts and inside((begin, finish), courts):
                    continue  # "Supreme Court of Illinois" stays when the party is Illinois
                window = text[max(0, begin - WINDOW) : begin]
                lead = (BEFORE_TITLE.search(window) if pattern.person else None) or BEFORE_THE.search(window)
                start = begin - (len(lead.group(0)) if lead else 0)
                namesake = False
                if pattern.surname and lead is None:
                    given = given_name_before(window)
                    own = pattern.given and any(own_given(w.rstrip("."), pattern.given) for w in given.split())
                    if given and (pattern.surname == "alone" or own):
                        # "John Stewart" when the party is "Stewart", "Richard Allen Moran" for "Richard Allan
                        # Moran": the party itself
                        start -= len(given)
                    elif given:
                        namesake = True  # "Joan Stanley" when the party is "Peter Stanley": another person
                span = (start, tail.end())
                entry = found.setdefault(span, (set(), tail.group("tail") or "", namesake))
                entry[0].add(pattern.party)
        taken: list[tuple[int, int]] = []
        chosen: list[tuple[int, int, set[int], str, bool]] = []
        for span, (parties, tail_text, namesake) in sorted(
            found.items(), key=lambda kv: (kv[0][0] - kv[0][1], kv[0][0])
        ):
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            taken.append(span)
            chosen.append((span[0], span[1], parties, tail_text, namesake))
        chosen.sort()
        out: list[str] = []
        last = 0
        for start, end, parties, tail_text, namesake in chosen:
            out.append(text[last:start])
            label = self._placeholder(parties)
            if namesake:
                label = f"[{label}'s surname]"
            if "'" in tail_text or "’" in tail_text:
                label += "'s"
            if not namesake and SENTENCE_END.search(text[:start]):
                label = label[0].upper() + label[1:]
            out.append(label)
            last = end
        out.append(text[last:])
        return "".join(out)
