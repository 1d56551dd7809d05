"""The leak check: party names left in a processed text, found without the anonymizer's parsing.

:func:`find_leaks` checks a processed text without :func:`~memento.tasks.party_parser.parse_party` or the
replacement patterns, so it does not share their blind spots: it looks for the full party string (abbreviations
may be written out) and for every capitalised word of the party string outside its own small stoplist
(:data:`LEAK_STOPWORDS`), in any case but all-lowercase, outside court names. It is deliberately suspicious: a first
name that a party shares with another person counts as a leak.

Example:
    >>> from memento.tasks.party_leaks import find_leaks
    >>> [(leak.kind, leak.name) for leak in find_leaks("Then KIDD appealed.", "Abdullah al-Kidd", "Ashcroft")]
    [('name', 'Kidd')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from memento.tasks.court_names import court_spans, inside

__all__ = ["LEAK_STOPWORDS", "Leak", "find_leaks", "leak_terms"]

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
        if not inside((match.start(), match.end()), courts):
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
