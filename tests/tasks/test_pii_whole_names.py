"""Legal anonymisation: whole organisation names or nothing, misspelt names, a party's own court; the checkers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from memento.tasks.pii import PartyAnonymizer
from memento.tasks.pii_check import find_fragments, find_garbles

JUSTICE = Path(__file__).resolve().parents[3] / "shared" / "data" / "justice" / "justice.csv"


@pytest.mark.parametrize(
    ("first", "second", "text", "expected"),
    [
        (
            "Smith",
            "Great Lakes Dredge & Dock Co.",
            "Later, Lakes Dredge sued. The Great Lakes Dredge firm paid.",
            "Later, the respondent sued. The respondent firm paid.",
        ),
        (
            "Central Hudson Gas & Electric Corporation",
            "Public Service Commission of New York",
            "Central Hudson Gas and Electric challenged the rule.",
            "The petitioner challenged the rule.",
        ),
        (
            "Permanent Mission of India to the United Nations",
            "City of New York, New York",
            "a building in New York City was taxed",
            "a building in the respondent was taxed",
        ),
        (
            "Eric Shinseki, Secretary of Veteran Affairs",
            "Woodrow Sanders",
            'examinations by Veterans\' Affairs ("VA") optometrists',
            'examinations by the petitioner ("VA") optometrists',
        ),
        (
            "Sentilles",
            "Inter-Caribbean Shipping Corporation",
            "the owner, the Inter-Shipping Corporation, was sued",
            "the owner, the respondent, was sued",
        ),
    ],
)
def test_an_organisation_name_is_replaced_whole(first, second, text, expected):
    out = PartyAnonymizer(first, second).anonymize(text)
    assert out == expected
    assert find_garbles(out, first, second) == []


def test_a_misspelt_party_name_is_replaced_and_an_ordinary_word_is_not():
    anonymizer = PartyAnonymizer("City of Richmond", "J. A. Croson Company")
    out = anonymizer.anonymize("The Richmon council adopted a plan. Crosson bid. The river ran through town.")
    assert out == "The petitioner council adopted a plan. The respondent bid. The river ran through town."
    # a capitalised word that the text also uses in lowercase is a word, not a misspelling ("When" for "Whren")
    assert PartyAnonymizer("Whren", "United States").anonymize("When they stopped, Whren ran. Ask when.") == (
        "When they stopped, the petitioner ran. Ask when."
    )
    # "Korea" is a place, not "Korean" misspelt
    assert "South Korea" in PartyAnonymizer("Dooley", "Korean Air Lines Company").anonymize("over South Korea.")


def test_a_given_name_misspelt_before_the_surname_is_the_party():
    out = PartyAnonymizer("Lambdin P. Milligan", "United States").anonymize("Lambden Milligan was arrested.")
    assert out == "The petitioner was arrested."


def test_a_party_named_in_its_own_court_is_replaced_but_a_state_court_stays():
    out = PartyAnonymizer("Navajo Nation", "Smith").anonymize("The Navajo Nation Supreme Court ruled for Smith.")
    assert "Navajo" not in out and out.endswith("ruled for the respondent.")
    out = PartyAnonymizer("Illinois", "Smith").anonymize("The Supreme Court of Illinois ruled for Smith.")
    assert out == "The Supreme Court of Illinois ruled for the respondent."


def test_the_checkers_find_garbling_and_fragments():
    [garbled] = find_garbles("Later, Great the respondent paid.", "Smith", "Great Lakes Dredge & Dock Co.")
    assert garbled.word == "Great" and garbled.kind == "garbled"
    assert find_garbles("Later, the respondent paid.", "Smith", "Great Lakes Dredge & Dock Co.") == []
    kinds = {f.kind for f in find_fragments("The Navajo Supreme Court met in Richmon.", "Navajo Nation", "Richmond")}
    assert kinds == {"court", "misspelt"}


@pytest.mark.skipif(not JUSTICE.exists(), reason="the shared JUSTICE file is not beside the clone")
def test_no_fragment_of_a_multi_word_party_name_beside_a_placeholder_on_the_shared_file():
    from memento.tasks._text import html_to_text

    with JUSTICE.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if (r.get("first_party_winner") or "").strip()]
    garbled = []
    for row in rows:
        out = PartyAnonymizer(row["first_party"], row["second_party"]).anonymize(html_to_text(row["facts"]))
        garbled += [(row["ID"], g.context) for g in find_garbles(out, row["first_party"], row["second_party"])]
    assert len(rows) > 2900 and garbled == []
