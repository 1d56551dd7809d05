"""Variant and misspelt spellings of a party's names.

A party word misspelt by one letter ("Richmon" for "Richmond", "Edwart" for "Edward") is the party unless the text
also uses it as an ordinary lowercase word; a surname spelt another way ("Scarpelli" for "Scarpello", "DeBacker"
for "De Backer", "Liu" for "Lui") after the party's given name is the party too.

Example:
    >>> from memento.tasks.name_spelling import one_edit, similar
    >>> one_edit("richmon", "richmond"), similar("DeBacker", "De Backer"), similar("Smith", "Jones")
    (True, True, False)
"""

from __future__ import annotations

import re

from memento.tasks.party_vocabulary import GENERIC_TOKENS, NOT_GIVEN

__all__ = ["MISSPELT_MIN", "MISSPELT_WORD", "is_misspelling", "one_edit", "own_given", "similar"]

MISSPELT_MIN = 5  # names at least this long are also found misspelt by one letter
MISSPELT_WORD = r"(?P<last>[A-Z][a-z][A-Za-z]{2,})"


def similar(word: str, surname: str) -> bool:
    """Whether ``word`` is a variant spelling of ``surname`` ("Scarpelli"/"Scarpello", "DeBacker"/"De Backer")."""
    import difflib

    a, b = word.lower().replace(" ", ""), surname.lower().replace(" ", "")
    if a == b or (len(a) >= 3 and sorted(a) == sorted(b)):  # "Liu" for "Lui"
        return True
    return min(len(a), len(b)) >= 4 and difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by exactly one letter added, dropped, changed or two swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        return len(diff) == 1 or swapped
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def own_given(word: str, given: frozenset[str]) -> bool:
    """Whether ``word`` is one of the party's given names, or one misspelt by a letter ("Edwart" for "Edward")."""
    return word in given or any(len(g) >= MISSPELT_MIN and one_edit(word.lower(), g.lower()) for g in given)


def is_misspelling(word: str, name: str, text: str) -> bool:
    """Whether ``word`` in ``text`` is ``name`` misspelt by one letter ("Richmon", "Scarpelli" for "Scarpello"),
    not an ordinary word (also written in lowercase in the text, or a generic word) nor a place named after a
    demonym ("Korea" for "Korean")."""
    w, n = word.lower(), name.lower()
    if w == n or len(w) < 4 or w[0] != n[0] or word in GENERIC_TOKENS or word in NOT_GIVEN:
        return False
    if n.endswith(("an", "ese")) and n.startswith(w):
        return False
    if re.search(rf"(?<![\w]){re.escape(w)}(?![\w])", text):
        return False
    return one_edit(w, n)
