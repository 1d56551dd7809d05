"""Party-name removal for case facts: parties become role placeholders before any model reads the facts.

The JUSTICE facts name the parties (``first_party`` is the petitioner, ``second_party`` the respondent), which lets
a model recall the case and its outcome. :class:`PartyAnonymizer` replaces, in one pass over the text:

* each party's full name and each of its segments ("Loren Tyler and Robert Tompkins", "X, aka Y", "A, B Inc.")
  case-insensitively;
* for a person: first + last name (middle names and initials optional), the surname alone (with an optional
  title such as "Mr." or "Justice"), and given names alone (when no other capitalised name follows);
* for an organisation: its distinctive words and runs of them ("Planned Parenthood"), never generic words from a
  stoplist ("United", "States", "Inc", "City", "of", "Department", state names...).

A leading "the" and a possessive are kept grammatical ("the Stanleys'" -> "the petitioner's"); a placeholder that
starts a sentence is capitalised. A name both parties share ("the Reeds") becomes "the parties". A given name
written before a person-party's surname is the party itself when the party string gives no given name ("John
Stewart" for the party "Stewart"), and another person otherwise ("Joan Stanley" for "Peter Stanley" becomes
"Joan [the petitioner's surname]"). Organisation and
place names are left inside court names ("United States Court of Appeals for the Ninth Circuit", "Supreme Court of
California") because a party is often the United States or a state; a person's surname is replaced everywhere.

:func:`find_leaks` checks a processed text independently of the replacement patterns: the full party name
(case-insensitive) outside court names, and any person-party surname.

Example:
    >>> from memento.tasks.pii import PartyAnonymizer
    >>> anonymizer = PartyAnonymizer("Peter Stanley, Sr.", "Illinois")
    >>> anonymizer.anonymize("Peter Stanley sued Illinois. Stanley's appeal reached the Supreme Court of Illinois.")
    "The petitioner sued the respondent. The petitioner's appeal reached the Supreme Court of Illinois."
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "PartySegment",
    "Party",
    "parse_party",
    "PartyAnonymizer",
    "Leak",
    "find_leaks",
    "court_spans",
    "GENERIC_TOKENS",
]

_STATES = (
    "Alabama Alaska Arizona Arkansas California Colorado Connecticut Delaware Florida Georgia Hawaii Idaho Illinois "
    "Indiana Iowa Kansas Kentucky Louisiana Maine Maryland Massachusetts Michigan Minnesota Mississippi Missouri "
    "Montana Nebraska Nevada New Hampshire Jersey Mexico York North Carolina Dakota Ohio Oklahoma Oregon "
    "Pennsylvania Rhode Island South Tennessee Texas Utah Vermont Virginia Washington West Wisconsin Wyoming "
    "District Columbia Puerto Rico Guam Virgin Islands Samoa Mariana America American"
).split()

#: words describing institutions: a segment containing one is an organisation, not a person
ORG_TOKENS = frozenset(
    """Inc Incorporated Corp Corporation Co Company Companies LLC LLP LP Ltd Limited PLC Association Assn Associates
    Bank Bancorp Board Bureau Commission Committee Council Department Dept Division Agency Authority Administration
    Service Services Office Trust Trustees Fund Foundation Federation Society Union University College School Schools
    District County City Town Township Village Borough Parish State States United Nation Nations National Federal
    International Group Holdings Industries Enterprises Partners Partnership Church Diocese Hospital Center Centre
    Institute Club League Party Tribe Tribes Band Railroad Railway Railways Airlines Airways Insurance Mutual Electric
    Energy Oil Gas Steel Motors Communications Telephone Telegraph Broadcasting Television Tobacco Products
    Manufacturing Mining Coal Cable Public Employees Workers Labor Education Revenue Taxation Treasury Correction
    Corrections Correctional Prison Police Court Tribunal Transportation Commerce Environmental Protection Resources
    Development Housing Affairs Veterans Defense Immigration Naturalization Elections Commonwealth Republic Kingdom
    Government Territory Municipal Utility Utilities Estate Inmates Citizens People Residents Voters Taxpayers Members
    Coalition Alliance Network Systems Technologies Technology Pharmaceuticals Laboratories Labs Media Press Times
    News Newspapers Publishing Publications Stores Market Markets Securities Capital Financial Finance Investment
    Investments Realty Properties Construction Contractors Co-op Cooperative Credit Hospitals Medical Healthcare
    Care Clinic Health Life Casualty Assurance Sales Motor Freight Lines Transit Express Shipping Gazette Journal
    Herald Tribune Post Daily Chronicle Project Program Legislature Senate Congress Assembly Nursing Home Homes Agents
    Shareholders Stockholders Creditors Committee Commissioners Supervisors Regents Trustees Directors""".split()
)

#: words never replaced on their own (they are only removed as part of a full party name)
GENERIC_TOKENS = frozenset(
    {*ORG_TOKENS, *_STATES}
    | set(
        """The A An Of For And In On At To By With From Et Al Ux Vir Aka Fka Dba Ex Rel Parte Re Matter Doe Roe
        New North South East West Northern Southern Eastern Western Central Great Saint St Fort Lake River Valley
        Mount Port Bay Beach Park Island Greater Metropolitan Northwest Northeast Southwest Southeast
        Mr Mrs Ms Miss Dr Hon Sr Jr II III IV Esq General Attorney Secretary Director Commissioner Governor Mayor
        Sheriff Warden Superintendent Chief Acting Deputy Officer Administrator Trustee Judge Justice President
        Minor Minors Parent Parents Next Friend Guardian Others Petitioner Petitioners Respondent Respondents
        Appellant Appellants Appellee Appellees Plaintiff Plaintiffs Defendant Defendants Individually Personal
        Representative Heirs One Two Three First Second Third Number Human Social Security Internal Justice Fire
        Natural Land Management Urban Homeland Trade Water Power Relations Motor Vehicles Election Republican
        Democratic Independent Indian Indians Native Nations Order Brotherhood Local""".split()
    )
)

_TITLES = (
    "Mr|Mrs|Ms|Miss|Dr|Judge|Justice|Officer|Sheriff|Governor|Gov|Senator|Sen|Representative|Rep|President|"
    "Secretary|Warden|Detective|Sergeant|Sgt|Lieutenant|Lt|Captain|Capt|Chief|Attorney General|General|"
    "Commissioner|Director|Mayor|Agent|Trooper|Deputy|Professor|Prof|Reverend|Rev|Father|Sister|Brother|Dean|Coach"
)
_SUFFIXES = frozenset({"Jr", "Sr", "II", "III", "IV", "V", "Esq", "MD", "PhD"})
_TOKEN = re.compile(r"[^\W\d_][\w'’\-]*\.?|\d[\w\-]*")
_ET_AL = re.compile(r",?\s*\b(?:et\.?\s*(?:al|ux|uxor|vir)|etc)\b\.?,?", re.IGNORECASE)
_MATTER_OF = re.compile(r"^(?:in\s+re|ex\s+parte|in\s+the\s+matter\s+of)\s+", re.IGNORECASE)
_SPLIT = re.compile(
    r"\s*;\s*|\s+and\s+|\s*,?\s+\b(?:aka|a/k/a|fka|f/k/a|formerly|dba|d/b/a|by|ex\s+rel\.?|v\.?|vs\.?|on\s+behalf\s+of)\s+"
    r"|\s*[()]\s*",
    re.IGNORECASE,
)

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


def _inside(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in spans)


def _core(token: str) -> str:
    return token.rstrip(".")


def _is_initial(token: str) -> bool:
    core = _core(token)
    return len(core) == 1 and core.isalpha()


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
            core = _core(token)
            if _is_initial(token) or core in _SUFFIXES or not core[:1].isupper():
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
    cores = [_core(t) for t in tokens]
    words = [c for c in cores if not _is_initial(c) and c not in _SUFFIXES]
    if not words or len(words) > 5:
        return "organisation"
    if any(c in ORG_TOKENS for c in cores) or any(not c[:1].isupper() for c in words):
        return "organisation"
    if all(c in GENERIC_TOKENS for c in words):  # "Illinois", "New York", "District of Columbia"
        return "organisation"
    return "person"


def _clean(raw: str) -> str:
    text = " ".join((raw or "").split())
    text = _ET_AL.sub("", text)
    text = _MATTER_OF.sub("", text)
    return text.strip(" ,;.")


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
        if kind == "person":
            segments.append(PartySegment(parts[0], main_tokens, "person"))
            # later comma parts are titles ("Warden", "Secretary") unless they name an institution
            for part in rest:
                tokens = _TOKEN.findall(part)
                if tokens and len(tokens) > 1 and any(_core(t) in ORG_TOKENS for t in tokens):
                    segments.append(PartySegment(part, tokens, "organisation"))
        else:
            suffix_only = all(
                all(_core(t) in ORG_TOKENS or _core(t) in _SUFFIXES for t in _TOKEN.findall(p)) for p in rest
            )
            if rest and suffix_only:
                segments.append(PartySegment(", ".join(parts), _TOKEN.findall(", ".join(parts)), "organisation"))
            else:
                segments.append(PartySegment(parts[0], main_tokens, "organisation"))
                for part in rest:
                    tokens = _TOKEN.findall(part)
                    if tokens and not all(_core(t) in _SUFFIXES for t in tokens):
                        segments.append(PartySegment(part, tokens, _classify(tokens)))
    return Party(raw=raw, full=full, segments=segments)


def _flex(text: str) -> str:
    """A regex for a literal name with flexible whitespace and optional dots."""
    tokens = text.split()
    return r"\s+".join(re.escape(t.rstrip(".")) + (r"\.?" if t.endswith(".") else "") for t in tokens)


def _word(core: str) -> str:
    variants = {re.escape(core), re.escape(core.upper())}
    return "(?:" + "|".join(sorted(variants, key=len, reverse=True)) + ")"


_CORP = r"(?:,?\s+(?:Inc|Corp|Co|Ltd|LLC|L\.L\.C|N\.A|Corporation|Company|Incorporated)\b\.?)?"
# What may surround a name: "the" and a title before it, a possessive or plural after it.
_BEFORE_THE = re.compile(r"(?<![\w'’])[Tt]he\s+$")
_BEFORE_TITLE = re.compile(rf"(?<![\w'’])(?:(?<![\w'’])[Tt]he\s+)?(?:{_TITLES})\.?\s+$")
_TAIL = re.compile(r"(?P<tail>s's|'s|’s|s'|s’|'|’|es|s)?(?![\w'’])")
_SENTENCE_END = re.compile(r"(?:^|[.!?]\s*[\"'”’)]?|\n)\s*$")
_WINDOW = 48  # characters before a name searched for "the" and a title


@functools.lru_cache(maxsize=8192)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Capitalised words before a surname that are not given names.
_NOT_GIVEN = frozenset(
    """When After Before While Since Although Though Because If As In On At By For From During Then But And Or Once
    Until Unlike Like Following Later Meanwhile Thereafter However Both Neither Either Also Only Even Here There This
    That These Those His Her Their Its Our So Yet Upon Under Over Against Between Among Without With Within Despite
    Through Eventually Finally Subsequently Initially Accordingly Thus Therefore Instead Whether Where Which Who Whom
    Whose What How Why Was Were Is Are Has Have Had Did Does Do Not No Nor Each Every Any Some All Most Many Such
    January February March April May June July August September October November December Monday Tuesday Wednesday
    Thursday Friday Saturday Sunday Inspector Agent Officer Trooper Deputy Detective Sergeant Corporal Private
    Lieutenant Captain Major Colonel Warden Sheriff Judge Justice Chief Governor Senator Mayor President Attorney
    Counsel Doctor Nurse Professor Reverend Father Sister Brother Uncle Aunt Mother Grandmother Grandfather""".split()
)
_GIVEN_BEFORE = re.compile(r"(?<![\w'’.])((?:[A-Z][a-z]+\s+)(?:(?:[A-Z]\.|[A-Z][a-z]+)\s+)?)$")


@dataclass
class _Pattern:
    regex: re.Pattern[str]
    party: int
    person: bool
    surname: Literal["", "alone", "named"] = ""  # a surname pattern: the party string has no / a given name


def _given_name_before(window: str) -> str:
    """The given name(s) written right before a surname ("Joan " in "Joan Stanley"), or ""."""
    match = _GIVEN_BEFORE.search(window)
    if match is None:
        return ""
    words = [w.rstrip(".") for w in match.group(1).split()]
    if words[0] in _NOT_GIVEN or any(w in GENERIC_TOKENS or w in _NOT_GIVEN for w in words):
        return ""
    return match.group(1)


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
        self._patterns = self._build()

    def _build(self) -> list[_Pattern]:
        patterns: list[_Pattern] = []

        def add(
            body: str,
            party: int,
            person: bool,
            *,
            insensitive: bool = False,
            surname: Literal["", "alone", "named"] = "",
        ) -> None:
            core = f"(?i:{body})" if insensitive else body
            if not person:  # "Halo Electronics, Inc." when the party is "Halo Electronics"
                core = f"(?:{core}){_CORP}"
            patterns.append(_Pattern(_compile(rf"(?<![\w])(?:{core})"), party, person, surname))

        for index, party in enumerate(self.parties):
            if party.full:
                add(_flex(party.full), index, False, insensitive=True)
            for segment in party.segments:
                person = segment.kind == "person"
                add(_flex(segment.text), index, person, insensitive=True)
                names = segment.name_tokens
                if not names:
                    continue
                if person:
                    given, surname = names[:-1], names[-1]
                    if given:
                        middle = "".join(rf"(?:\s+(?:{_word(n)}|{re.escape(n[0])}\.?))?" for n in given[1:])
                        suffix = r"(?:,?\s+(?:Jr|Sr|II|III|IV)\.?)?"
                        add(rf"{_word(given[0])}{middle}(?:\s+[A-Z]\.)?\s+{_word(surname)}{suffix}", index, True)
                        for name in given:  # a given name alone, unless another name follows it
                            add(rf"{_word(name)}(?!\s+[A-Z][a-z])", index, True)
                    add(_word(surname), index, True, surname="named" if given else "alone")
                    for part in surname.split("-") if "-" in surname else []:
                        if len(part) > 1:
                            add(_word(part), index, True)
                else:
                    tokens = [_core(t) for t in segment.tokens]
                    distinct = set(names)
                    for i, start in enumerate(tokens):
                        if start not in distinct:
                            continue
                        for j in range(len(tokens) - 1, i, -1):
                            if tokens[j] in distinct:
                                add(r"\s+".join(_word(t) for t in tokens[i : j + 1]), index, False)
                                break
                        add(_word(start), index, False)
        return patterns

    def _placeholder(self, parties: set[int]) -> str:
        """The label of a name that belongs to these parties."""
        return self.both if len(parties) > 1 else self.labels[next(iter(parties))]

    def anonymize(self, text: str) -> str:
        """The text with every party name replaced (one pass; longest names win)."""
        if not text:
            return text
        courts = court_spans(text)
        found: dict[tuple[int, int], tuple[set[int], str, bool]] = {}  # span -> parties, tail, namesake
        for pattern in self._patterns:
            for match in pattern.regex.finditer(text):
                tail = _TAIL.match(text, match.end())
                if tail is None or match.start() == match.end():
                    continue  # the name continues ("Reed" in "Reedy")
                if not pattern.person and _inside((match.start(), match.end()), courts):
                    continue
                window = text[max(0, match.start() - _WINDOW) : match.start()]
                lead = (_BEFORE_TITLE.search(window) if pattern.person else None) or _BEFORE_THE.search(window)
                start = match.start() - (len(lead.group(0)) if lead else 0)
                namesake = False
                if pattern.surname and lead is None:
                    given = _given_name_before(window)
                    if given and pattern.surname == "alone":
                        start -= len(given)  # "John Stewart" when the party is "Stewart": the party itself
                    elif given:
                        namesake = True  # "Joan Stanley" when the party is "Peter Stanley": another person
                span = (start, tail.end())
                entry = found.setdefault(span, (set(), tail.group("tail") or "", namesake))
                entry[0].add(pattern.party)
        taken: list[tuple[int, int]] = []
        chosen: list[tuple[int, int, set[int], str, bool]] = []
        for span, (parties, tail, namesake) in sorted(found.items(), key=lambda kv: (kv[0][0] - kv[0][1], kv[0][0])):
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            taken.append(span)
            chosen.append((span[0], span[1], parties, tail, namesake))
        chosen.sort()
        out: list[str] = []
        last = 0
        for start, end, parties, tail, namesake in chosen:
            out.append(text[last:start])
            label = self._placeholder(parties)
            if namesake:
                label = f"[{label}'s surname]"
            if "'" in tail or "’" in tail:
                label += "'s"
            if not namesake and _SENTENCE_END.search(text[:start]):
                label = label[0].upper() + label[1:]
            out.append(label)
            last = end
        out.append(text[last:])
        return "".join(out)


@dataclass
class Leak:
    """A party name found in a processed text."""

    kind: Literal["full_name", "surname"]
    party: int
    name: str
    context: str


def find_leaks(text: str, first_party: str, second_party: str) -> list[Leak]:
    """Party names left in ``text``: a full party name (case-insensitive) outside court names, or a person's
    surname anywhere (case-sensitive as written, or upper case; plurals and possessives included)."""
    leaks: list[Leak] = []
    courts = court_spans(text)
    for index, raw in enumerate((first_party, second_party)):
        party = parse_party(raw)
        if party.full:
            pattern = re.compile(rf"(?<![\w])(?i:{_flex(party.full)})(?![\w])")
            for match in pattern.finditer(text):
                if not _inside((match.start(), match.end()), courts):
                    ctx = text[max(0, match.start() - 40) : match.end() + 40]
                    leaks.append(Leak("full_name", index, party.full, ctx))
        for surname in party.surnames:
            pattern = re.compile(rf"(?<![\w])(?:{re.escape(surname)}|{re.escape(surname.upper())})(?:s|es)?(?![\w])")
            for match in pattern.finditer(text):
                ctx = text[max(0, match.start() - 40) : match.end() + 40]
                leaks.append(Leak("surname", index, surname, ctx))
    return leaks
