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

:func:`find_leaks` checks a processed text without :func:`parse_party` or the replacement patterns, so it does
not share their blind spots: it looks for the full party string (abbreviations may be written out) and for every
capitalised word of the party string outside its own small stoplist (:data:`LEAK_STOPWORDS`), in any case but
all-lowercase, outside court names. It is deliberately suspicious: a first name that a party shares with another
person counts as a leak.

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
from typing import Any, Literal, TypeGuard

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
    Shareholders Stockholders Creditors Committee Commissioners Supervisors Regents Trustees Directors
    Univ Coop Mfg Bros Natl Intl Comm Commn Ry Brig AG SA GmbH NV BV S.p.A SpA Plan Plans Academy Acad""".split()
)

#: abbreviations of organisation words: a party written "General Motors Corp." is also found as "... Corporation"
ORG_ABBREVIATIONS = {
    "corp": ("Corp", "Corporation"),
    "corporation": ("Corp", "Corporation"),
    "co": ("Co", "Company"),
    "company": ("Co", "Company"),
    "inc": ("Inc", "Incorporated"),
    "incorporated": ("Inc", "Incorporated"),
    "univ": ("Univ", "University"),
    "university": ("Univ", "University"),
    "coop": ("Coop", "Co-op", "Cooperative"),
    "co-op": ("Coop", "Co-op", "Cooperative"),
    "cooperative": ("Coop", "Co-op", "Cooperative"),
    "assn": ("Assn", "Ass'n", "Association"),
    "ass'n": ("Assn", "Ass'n", "Association"),
    "association": ("Assn", "Ass'n", "Association"),
    "dept": ("Dept", "Department"),
    "department": ("Dept", "Department"),
    "mfg": ("Mfg", "Manufacturing"),
    "manufacturing": ("Mfg", "Manufacturing"),
    "bros": ("Bros", "Brothers"),
    "brothers": ("Bros", "Brothers"),
    "natl": ("Natl", "Nat'l", "National"),
    "nat'l": ("Natl", "Nat'l", "National"),
    "intl": ("Intl", "Int'l", "International"),
    "int'l": ("Intl", "Int'l", "International"),
    "comm'n": ("Comm'n", "Commn", "Commission"),
    "commn": ("Comm'n", "Commn", "Commission"),
    "ry": ("Ry", "Railway"),
    "ltd": ("Ltd", "Limited"),
    "acad": ("Acad", "Academy"),
    "academy": ("Acad", "Academy"),
}
#: legal-form words that may be dropped from an organisation's name ("General Motors" for "General Motors Corp.")
_LEGAL_FORMS = frozenset(
    "inc incorporated corp corporation co company llc llp lp ltd limited plc n.a na l.l.c ag sa s.a s.p.a gmbh nv "
    "bv".split()
)
_LEGAL_FORMS_BARE = frozenset(form.replace(".", "") for form in _LEGAL_FORMS)
#: lowercase name particles that belong to a person's surname ("al-Kidd", "de Gaulle", "van Buren")
_PARTICLES = frozenset(
    "al el ad ar as ash at az ben bin ibn abu d de del della der den di da dos du la le van von y".split()
)
_PARTICLE_NAME = re.compile(r"^(?:" + "|".join(sorted(_PARTICLES, key=len, reverse=True)) + r")[-'’][^\W\d_]", re.I)

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
    r"|\s*[()]\s*"
    r"|\s+(?:the\s+)?estates?\s+of\s+(?:the\s+late\s+)?"  # "executor of the estate of Thea Spyer": Thea Spyer
    r"|\s+(?:representative|guardian|next\s+friend|parent|administrat(?:or|rix)|executo(?:r|rix))\s+(?:of|for)\s+",
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


def _bare(token: str) -> str:
    """A token without dots, quotes or a possessive ("Barclay's" -> "Barclay", "Buyers'" -> "Buyers")."""
    return re.sub(r"['’]s?$", "", token.rstrip(".").strip("'’\"“”"))


def _is_initial(token: str) -> bool:
    core = _core(token)
    return len(core) == 1 and core.isalpha()


def _is_name(core: str) -> bool:
    """A capitalised word or a particle-joined one ("al-Kidd", "d'Alembert")."""
    return core[:1].isupper() or bool(_PARTICLE_NAME.match(core))


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
            core = _bare(token)
            if not core or _is_initial(token) or core in _SUFFIXES or not _is_name(core):
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
    if any(c in ORG_TOKENS for c in cores) or any(not _is_name(c) and c.lower() not in _PARTICLES for c in words):
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
        core = _core(token)
        if not (_is_name(core) or core.lower() in _PARTICLES):
            break
        run.append(token)
    names = [t for t in run if not _is_initial(t) and _core(t) not in _SUFFIXES and _is_name(_core(t))]
    if len(names) < 2 or _classify(run) != "person":
        return []
    if any(_core(t) in _TITLE_WORDS for t in run):
        return []
    return run


def _is_surname_only(token: str) -> bool:
    """A lone capitalised word that is neither a title, a suffix nor a generic word ("Rini", not "Warden")."""
    core = _bare(token)
    generic = core in GENERIC_TOKENS or core in ORG_TOKENS or core in _SUFFIXES or core in _TITLE_WORDS
    return len(core) > 2 and core[:1].isupper() and not core.isupper() and core.isalpha() and not generic


_TITLE_WORDS = frozenset(_TITLES.replace("Attorney General", "Attorney").split("|")) | {"State", "Attorney"}


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
        if rest and all(part.replace(".", "").replace(" ", "").lower() in _LEGAL_FORMS_BARE for part in rest):
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
                elif tokens and len(tokens) > 1 and any(_core(t) in ORG_TOKENS for t in tokens):
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


def _without_legal_form(text: str) -> str:
    """An organisation's name without its trailing legal form ("General Motors" for "General Motors Corp"), or ""
    when nothing distinctive would be left."""
    tokens = text.replace(",", " ").split()
    while tokens and tokens[-1].rstrip(".").lower() in _LEGAL_FORMS:
        tokens.pop()
    if not tokens or len(tokens) == len(text.replace(",", " ").split()):
        return ""
    if len(tokens) == 1 and (tokens[0].rstrip(".") in _STATES or len(tokens[0]) < 3):
        return ""
    return " ".join(tokens)


def _word(core: str) -> str:
    """A name in any case ("DuPont", "Dupont", "DUPONT"); all-lowercase matches are dropped by the caller."""
    return f"(?i:{re.escape(core)})"


_CORP = r"(?:,?\s+(?:Inc|Corp|Co|Ltd|LLC|L\.L\.C|N\.A|Corporation|Company|Incorporated)\b\.?)?"
# What may surround a name: "the" and a title before it, a possessive or plural after it.
_BEFORE_THE = re.compile(r"(?<![\w'’])[Tt]he\s+$")
_ABBREVIATED_TITLES = "Mr|Mrs|Ms|Dr|Gov|Sen|Rep|Sgt|Lt|Capt|Prof|Rev|Gen|Det|Insp|Cpl|Col|Maj|Hon"
# a title before a name; a period only after an abbreviation ("Justice. Martin argued" is two sentences)
_BEFORE_TITLE = re.compile(rf"(?<![\w'’])(?:(?<![\w'’])[Tt]he\s+)?(?:(?:{_ABBREVIATED_TITLES})\.?|(?:{_TITLES}))\s+$")
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
    given: frozenset[str] = frozenset()  # the person's given names (surname patterns)
    fuzzy: tuple[str, ...] = ()  # group "last" must be spelled like one of these ("Vella" for the party "Julian Vell")
    skip_lower: bool = False  # an all-lowercase match is an ordinary word ("cannabis"), not the name
    org: frozenset[str] = frozenset()  # an organisation's words (lowercase): a match grows to the whole name
    in_courts: bool = False  # replaced inside court names too (a distinctive name: "Navajo Nation Supreme Court")
    misspelt: str = ""  # group "last" must be a misspelling of this name ("Richmon" for "Richmond")


def _similar(word: str, surname: str) -> bool:
    """Whether ``word`` is a variant spelling of ``surname`` ("Scarpelli"/"Scarpello", "DeBacker"/"De Backer")."""
    import difflib

    a, b = word.lower().replace(" ", ""), surname.lower().replace(" ", "")
    if a == b or (len(a) >= 3 and sorted(a) == sorted(b)):  # "Liu" for "Lui"
        return True
    return min(len(a), len(b)) >= 4 and difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _given_name_before(window: str) -> str:
    """The given name(s) written right before a surname ("Joan " in "Joan Stanley"), or ""."""
    match = _GIVEN_BEFORE.search(window)
    if match is None:
        return ""
    words = [w.rstrip(".") for w in match.group(1).split()]
    if words[0] in _NOT_GIVEN or any(w in GENERIC_TOKENS or w in _NOT_GIVEN for w in words):
        return ""
    return match.group(1)


_MISSPELT_MIN = 5  # names at least this long are also found misspelt by one letter
_MISSPELT_WORD = r"(?P<last>[A-Z][a-z][A-Za-z]{2,})"
_WORD_BEFORE = re.compile(r"([A-Za-z][\w'’.]*|&)(?:\s+|-)$")  # the word before, across a blank or a hyphen
_WORD_AFTER = re.compile(r"(?:['’]s|s['’]|['’]|s)?(?:\s+|-)([A-Za-z][\w'’.]*|&)")  # "Veterans' Affairs"
_CONNECTORS = frozenset({"of", "and", "&", "the", "for", "on"})


def _org_words(text: str) -> frozenset[str]:
    """The words of an organisation's name, lowercase and bare, with the spellings of its abbreviations."""
    words: set[str] = set()
    for token in re.findall(r"[\w'’.\-]+|&", text):
        core = _bare(token).lower()
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
    word = _bare(match.group(1)).lower()
    abbreviation = len(word) == 1 or word in ORG_ABBREVIATIONS or word in _LEGAL_FORMS
    if backward and match.group(1).endswith(".") and not abbreviation:
        return False
    return word in words


def _whole_name(text: str, start: int, end: int, words: frozenset[str]) -> tuple[int, int]:
    """Grow a match of part of an organisation's name over the neighbouring words of the same name, so the whole
    name is replaced ("Great Lakes Dredge" when "Lakes Dredge" matched); a connector ("of", "&") is crossed only
    when a name word lies beyond it."""
    while True:
        before = _WORD_BEFORE.search(text, max(0, start - 40), start)
        if _name_word(before, words, backward=True) and _bare(before.group(1)).lower() not in _CONNECTORS:
            start = before.start(1)
            continue
        if before is not None and before.group(1).lower() in _CONNECTORS and before.group(1).lower() in words:
            further = _WORD_BEFORE.search(text, max(0, before.start(1) - 40), before.start(1))
            if _name_word(further, words, backward=True) and _bare(further.group(1)).lower() not in _CONNECTORS:
                start = further.start(1)
                continue
        break
    while True:
        after = _WORD_AFTER.match(text, end)
        if _name_word(after, words) and _bare(after.group(1)).lower() not in _CONNECTORS:
            end = after.start(1) + len(after.group(1).rstrip(".,")) if after.group(1)[-1] in ",." else after.end(1)
            continue
        if after is not None and after.group(1).lower() in _CONNECTORS and after.group(1).lower() in words:
            further = _WORD_AFTER.match(text, after.end(1))
            if _name_word(further, words) and _bare(further.group(1)).lower() not in _CONNECTORS:
                end = further.end(1)
                continue
        break
    return start, end


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by exactly one letter added, dropped, changed or two swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        return len(diff) == 1 or swapped
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _own_given(word: str, given: frozenset[str]) -> bool:
    """Whether ``word`` is one of the party's given names, or one misspelt by a letter ("Edwart" for "Edward")."""
    return word in given or any(len(g) >= _MISSPELT_MIN and _one_edit(word.lower(), g.lower()) for g in given)


def _misspelt(word: str, name: str, text: str) -> bool:
    """Whether ``word`` in ``text`` is ``name`` misspelt by one letter ("Richmon", "Scarpelli" for "Scarpello"),
    not an ordinary word (also written in lowercase in the text, or a generic word) nor a place named after a
    demonym ("Korea" for "Korean")."""
    w, n = word.lower(), name.lower()
    if w == n or len(w) < 4 or w[0] != n[0] or word in GENERIC_TOKENS or word in _NOT_GIVEN:
        return False
    if n.endswith(("an", "ese")) and n.startswith(w):
        return False
    if re.search(rf"(?<![\w]){re.escape(w)}(?![\w])", text):
        return False
    return _one_edit(w, n)


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

    def _build(self) -> list[_Pattern]:
        patterns: list[_Pattern] = []

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
                core = f"(?:{core}){_CORP}"
            regex = _compile(rf"(?<![\w])(?:{core})")
            courts = False if person else context["courts"]
            patterns.append(
                _Pattern(regex, party, person, surname, given, fuzzy, not insensitive, context["org"], courts, misspelt)
            )

        context: dict[str, Any] = {"org": frozenset(), "courts": False}
        for index, party in enumerate(self.parties):
            organisations = [seg for seg in party.segments if seg.kind == "organisation"]
            context["org"] = _org_words(party.full)  # a match grows over any word of the party's string
            context["courts"] = any(seg.name_tokens for seg in organisations)
            if party.full:
                add(_flex(party.full), index, False, insensitive=True)
            for segment in party.segments:
                person = segment.kind == "person"
                context["courts"] = bool(segment.name_tokens)
                add(_flex(segment.text), index, person, insensitive=True)
                for name in segment.name_tokens:  # "Richmon" for "Richmond", "Scarpelli" for "Scarpello"
                    for part in re.split(r"[-'’]", name):
                        if len(part) >= _MISSPELT_MIN and part.lower() not in _PARTICLES:
                            add(_MISSPELT_WORD, index, person, misspelt=part)
                short = "" if person else _without_legal_form(segment.text)
                if short:  # "Northwest" for the party "Northwest, Inc.": as written, never a lowercase word
                    add(_flex(short), index, False, insensitive=" " in short)
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
                        for first, second in zip(names, names[1:], strict=False):  # "Cedar Point", "Sanchez Valle"
                            add(rf"{_word(first)}\s+{_word(second)}", index, True)
                        for name in given:  # "Reeder-Simco": "Reeder"
                            for part in name.split("-") if "-" in name else []:
                                if len(part) > 2 and part.lower() not in _PARTICLES and part not in GENERIC_TOKENS:
                                    add(_word(part), index, True)
                        # the first name and a misspelt surname ("Julian Vella" for the party "Julian Vell")
                        spellings = (surname, *re.split(r"[-'’]", surname), *given[1:])
                        last = r"(?P<last>[A-Z][\w\-]*(?:['’](?!s\b)[\w\-]+)?)"
                        more = (
                            r"(?:\s+(?:" + "|".join(_word(n) for n in names[1:]) + "))*"
                        )  # "Humberto Regalado Cuellar"
                        add(rf"{_word(given[0])}{middle}\s+{last}{more}", index, True, fuzzy=spellings)
                    hyphenated = "-" in surname or _PARTICLE_NAME.match(surname) is not None
                    # "al-Kidd" is also written "Al-Kidd" and "AL-KIDD"
                    surname_regex = f"(?i:{re.escape(surname)})" if hyphenated else _word(surname)
                    add(surname_regex, index, True, surname="named" if given else "alone", given=frozenset(given))
                    for part in re.split(r"[-'’]", surname) if hyphenated else []:
                        if len(part) > 1 and part.lower() not in _PARTICLES:
                            add(_word(part), index, True)
                else:
                    tokens = [_bare(t) for t in segment.tokens]
                    distinct = set(names)
                    for name in names:  # "Warner-Jenkinson": "Warner", "Jenkinson"
                        for part in name.split("-") if "-" in name else []:
                            if len(part) > 2 and part not in GENERIC_TOKENS and _is_name(part):
                                add(_word(part), index, False)
                    for i, start in enumerate(tokens):
                        if start not in distinct:
                            continue
                        for j in range(i + 1, len(tokens)):  # "Pacific Northwest", "Pacific Northwest Pipeline"
                            if tokens[j][:1].isupper():
                                add(r"\s+".join(_word(t) for t in tokens[i : j + 1]), index, False)
                        add(_word(start), index, False)
                    for token in tokens:  # a defined term: the petitioner ("Northwest"), see anonymize()
                        generic = token in _STATES or token.lower() in _LEGAL_FORMS or token in ("Court", "Act")
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
                regex = _compile(rf"(?<![\w])(?:{re.escape(word)}|{re.escape(word.upper())})")
                patterns.append(_Pattern(regex, party, False))
        found: dict[tuple[int, int], tuple[set[int], str, bool]] = {}  # span -> parties, tail, namesake
        for pattern in patterns:
            for match in pattern.regex.finditer(text):
                begin, finish = match.start(), match.end()
                if pattern.misspelt and not _misspelt(match.group("last"), pattern.misspelt, text):
                    continue
                if pattern.org:  # a whole organisation name or nothing: never "Great the respondent"
                    begin, finish = _whole_name(text, begin, finish, pattern.org)
                tail = _TAIL.match(text, finish)
                if tail is None or begin == finish:
                    continue  # the name continues ("Reed" in "Reedy")
                if pattern.fuzzy and not any(_similar(match.group("last"), name) for name in pattern.fuzzy if name):
                    continue
                if pattern.skip_lower and match.group(0).islower():
                    continue
                if not pattern.person and not pattern.in_courts and _inside((begin, finish), courts):
                    continue  # "Supreme Court of Illinois" stays when the party is Illinois
                window = text[max(0, begin - _WINDOW) : begin]
                lead = (_BEFORE_TITLE.search(window) if pattern.person else None) or _BEFORE_THE.search(window)
                start = begin - (len(lead.group(0)) if lead else 0)
                namesake = False
                if pattern.surname and lead is None:
                    given = _given_name_before(window)
                    own = pattern.given and any(_own_given(w.rstrip("."), pattern.given) for w in given.split())
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
            if not namesake and _SENTENCE_END.search(text[:start]):
                label = label[0].upper() + label[1:]
            out.append(label)
            last = end
        out.append(text[last:])
        return "".join(out)


#: words of a party string the leak check ignores: function words, titles and roles, legal forms, generic words of
#: institutions and places. Written apart from the anonymizer's lists on purpose (the check must not share its
#: blind spots); a word here is one whose presence says nothing about which case this is.
LEAK_STOPWORDS = frozenset(
    """a an the of for and or in on at to by with from as its his her their our own other others et al ux vir aka
    fka dba ex rel parte re matter behalf similarly situated individually capacity official next friend
    mr mrs ms miss dr hon sr jr ii iii iv esq st saint
    de del della der den di da dos du la le van von el bin ibn y
    inc incorporated corp corporation co company companies llc llp lp ltd limited plc na assn association
    associates group holdings partners partnership enterprises industries products services service systems
    united states state america american nation national federal government commonwealth republic people
    city county town township village borough parish district circuit court courts territory
    department dept board bureau commission committee council agency authority administration office division
    secretary director commissioner commissioners governor mayor sheriff warden superintendent chief acting deputy
    officer administrator trustee trustees judge justice president attorney general chairman chair member members
    petitioner petitioners respondent respondents appellant appellants appellee appellees plaintiff plaintiffs
    defendant defendants minor minors parent parents guardian estate heirs executor executrix representative
    university univ college school schools education public board regents
    new north south east west northern southern eastern western central great first second third
    union bank trust fund church tribe tribes band nations indian indians party labor relations health human
    social security insurance employees workers citizens housing home hospital medical commerce trade
    revenue tax taxation treasury corrections correctional prison police fire transportation environmental
    protection resources development affairs veterans defense immigration naturalization election elections
    energy power water oil gas electric railroad railway communications telephone television broadcasting
    tobacco steel coal motor motors airlines credit financial life mutual club league center institute
    foundation society alliance network international metropolitan commercial interior justice labor
    park river bay beach valley lake fort mount port navy army naval internal news herald times tribune daily
    journal gazette post press securities shipping transit republican democratic local unit inmates nursing
    realty native chapter coalition farmers management sales manufacturing construction municipal agriculture
    assistant casualty capital care healthcare legislature pharmaceuticals senator senate assembly cement freight
    term one blue cross baseball accountancy commuters entertainment media plan retirement benefits employment
    alabama alaska arizona arkansas california colorado connecticut delaware florida georgia hawaii idaho
    illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota mississippi
    missouri montana nebraska nevada hampshire jersey mexico york carolina dakota ohio oklahoma oregon
    pennsylvania rhode island tennessee texas utah vermont virginia washington wisconsin wyoming columbia
    puerto rico guam""".split()
)
_LEAK_SPLIT = re.compile(r"[\s,;:/()\[\]\"“”\-–—&]+")


def leak_terms(raw: str) -> list[str]:
    """The words of a party string the leak check looks for: every capitalised word (hyphenated words split,
    possessives and dots removed) that is not an initial and not in :data:`LEAK_STOPWORDS`.

    Example:
        >>> leak_terms("Abdullah al-Kidd"), leak_terms("Oakland Cannabis Buyers' Coop")
        (['Abdullah', 'Kidd'], ['Oakland', 'Cannabis', 'Buyers', 'Coop'])
    """
    terms: list[str] = []
    for piece in _LEAK_SPLIT.split(raw or ""):
        word = re.sub(r"(?:['’]s|['’])$", "", piece.strip(".'’"))
        if len(word) < 2 or not word[:1].isupper() or not word.replace("'", "").replace("’", "").isalpha():
            continue
        if word.lower() in LEAK_STOPWORDS or word in terms:
            continue
        terms.append(word)
    return terms


@dataclass
class Leak:
    """A party name found in a processed text."""

    kind: Literal["full_name", "name"]
    party: int
    name: str
    context: str


def _written_out(token: str) -> str:
    """A regex for one word of a party string as it may appear written out ("Univ." -> "University")."""
    core = token.rstrip(".")
    if len(core) <= 1:  # an initial
        return re.escape(core) + r"\.?"
    if token.endswith(".") or len(core) <= 4:
        return re.escape(core) + r"[\w'’\-]*\.?"
    return re.escape(core)


def find_leaks(text: str, first_party: str, second_party: str) -> list[Leak]:
    """Party names left in ``text``, found without the anonymizer's parsing (a simpler, more suspicious check).

    * ``full_name``: the whole party string (whitespace-normalised, a trailing "et al." dropped),
      case-insensitive, outside court names;
    * ``name``: any word of :func:`leak_terms` (every capitalised word of the party string outside a small
      stoplist), as a whole word in any case except all-lowercase ("Kidd", "KIDD", "Kidd's"), outside court
      names. An all-lowercase occurrence is an ordinary word ("cannabis" for "Oakland Cannabis Buyers' Coop").
    """
    leaks: list[Leak] = []
    courts = court_spans(text)

    def record(kind: Literal["full_name", "name"], index: int, name: str, match: re.Match[str]) -> None:
        if not _inside((match.start(), match.end()), courts):
            context = text[max(0, match.start() - 40) : match.end() + 40]
            leaks.append(Leak(kind, index, name, context))

    for index, raw in enumerate((first_party, second_party)):
        full = re.sub(r",?\s*\bet\.?\s*al\b\.?", "", " ".join((raw or "").split()), flags=re.IGNORECASE).strip(" ,.")
        if full:  # an abbreviated or short word may be written out: "Univ." -> "University", "Coop" -> "Cooperative"
            body = r"\s+".join(_written_out(t) for t in full.split())
            for match in re.finditer(rf"(?<![\w])(?i:{body})(?![\w])", text):
                record("full_name", index, full, match)
        for term in leak_terms(raw):
            pattern = rf"(?<![\w])(?i:{re.escape(term)})(?:s|es|['’]s|['’])?(?![\w])"
            for match in re.finditer(pattern, text):
                if not match.group(0).islower():
                    record("name", index, term, match)
    return leaks
