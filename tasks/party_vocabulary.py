"""The words of party names: institution words, legal forms and their abbreviations, name particles, titles,
suffixes, state names, and the token tests the party parser and the anonymizer share.

:data:`GENERIC_TOKENS` are words never replaced on their own (only as part of a full party name);
:data:`ORG_TOKENS` make a segment an organisation; :data:`ORG_ABBREVIATIONS` give the spellings of an abbreviated
organisation word ("Corp." is also "Corporation"). The leak check (:mod:`memento.tasks.party_leaks`) keeps its own
list on purpose and does not use these.

Example:
    >>> from memento.tasks.party_vocabulary import bare, is_name
    >>> bare("Buyers'"), is_name("al-Kidd"), is_name("court")
    ('Buyers', True, False)
"""

from __future__ import annotations

import re

__all__ = [
    "GENERIC_TOKENS",
    "LEGAL_FORMS",
    "LEGAL_FORMS_BARE",
    "NOT_GIVEN",
    "ORG_ABBREVIATIONS",
    "ORG_TOKENS",
    "PARTICLES",
    "PARTICLE_NAME",
    "STATES",
    "SUFFIXES",
    "TITLES",
    "TITLE_WORDS",
    "bare",
    "is_initial",
    "is_name",
    "undotted",
]

STATES = (
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
LEGAL_FORMS = frozenset(
    "inc incorporated corp corporation co company llc llp lp ltd limited plc n.a na l.l.c ag sa s.a s.p.a gmbh nv "
    "bv".split()
)
LEGAL_FORMS_BARE = frozenset(form.replace(".", "") for form in LEGAL_FORMS)
#: lowercase name particles that belong to a person's surname ("al-Kidd", "de Gaulle", "van Buren")
PARTICLES = frozenset(
    "al el ad ar as ash at az ben bin ibn abu d de del della der den di da dos du la le van von y".split()
)
PARTICLE_NAME = re.compile(r"^(?:" + "|".join(sorted(PARTICLES, key=len, reverse=True)) + r")[-'’][^\W\d_]", re.I)

#: words never replaced on their own (they are only removed as part of a full party name)
GENERIC_TOKENS = frozenset(
    {*ORG_TOKENS, *STATES}
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

TITLES = (
    "Mr|Mrs|Ms|Miss|Dr|Judge|Justice|Officer|Sheriff|Governor|Gov|Senator|Sen|Representative|Rep|President|"
    "Secretary|Warden|Detective|Sergeant|Sgt|Lieutenant|Lt|Captain|Capt|Chief|Attorney General|General|"
    "Commissioner|Director|Mayor|Agent|Trooper|Deputy|Professor|Prof|Reverend|Rev|Father|Sister|Brother|Dean|Coach"
)
SUFFIXES = frozenset({"Jr", "Sr", "II", "III", "IV", "V", "Esq", "MD", "PhD"})
#: the words of titles, and "State" ("State Attorney for ..."): a comma part holding one names no person
TITLE_WORDS = frozenset(TITLES.replace("Attorney General", "Attorney").split("|")) | {"State", "Attorney"}
#: capitalised words before a surname that are not given names
NOT_GIVEN = frozenset(
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


def undotted(token: str) -> str:
    """A token without its trailing dots ("Corp." -> "Corp")."""
    return token.rstrip(".")


def bare(token: str) -> str:
    """A token without dots, quotes or a possessive ("Barclay's" -> "Barclay", "Buyers'" -> "Buyers")."""
    return re.sub(r"['’]s?$", "", token.rstrip(".").strip("'’\"“”"))


def is_initial(token: str) -> bool:
    """A single letter, with or without a dot ("J.", "J")."""
    core = undotted(token)
    return len(core) == 1 and core.isalpha()


def is_name(core: str) -> bool:
    """A capitalised word or a particle-joined one ("al-Kidd", "d'Alembert")."""
    return core[:1].isupper() or bool(PARTICLE_NAME.match(core))
