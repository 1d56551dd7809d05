"""The legal task: JUSTICE loader, party-name removal, cutoffs, skipped rows, metric, LLM scrub."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import dspy
import pytest

from memento.core.errors import DataError
from memento.tasks import get_task
from memento.tasks.legal import LegalTask, normalize_party, term_cutoff
from memento.tasks.pii import PartyAnonymizer, court_spans, find_leaks, parse_party
from memento.testing import ScriptedEngine, scripted_lm

JUSTICE = Path(__file__).resolve().parents[3] / "shared" / "data" / "justice" / "justice.csv"
COLUMNS = (
    ",ID,name,href,docket,term,first_party,second_party,facts,facts_len,majority_vote,minority_vote,"
    "first_party_winner,decision_type,disposition,issue_area"
).split(",")

STANLEY_FACTS = (
    "<p>Joan Stanley had three children with Peter Stanley.  The Stanleys never married. When Joan died, the State "
    "of Illinois took the children. Under Illinois law, unwed fathers were presumed unfit.</p>"
    "<p>Stanley&#39;s appeal failed; the Supreme Court of Illinois rejected Mr. Stanley's claim.</p>"
)
GIGLIO_FACTS = (
    "<p>JOHN GIGLIO was convicted of passing forged money orders. While his appeal to the United States Court of "
    "Appeals for the Second Circuit was pending, Giglio's counsel found that the United States had promised a "
    "witness immunity. The united states denied it.</p>"
)


def _row(i: int, term: str, first: str, second: str, facts: str, winner: str) -> dict[str, str]:
    return {
        "": str(i), "ID": str(5000 + i), "name": f"{first} v. {second}", "href": "h", "docket": f"70-{i}",
        "term": term, "first_party": first, "second_party": second, "facts": facts, "facts_len": "1",
        "majority_vote": "5", "minority_vote": "4", "first_party_winner": winner, "decision_type": "majority opinion",
        "disposition": "reversed/remanded", "issue_area": "Civil Rights",
    }  # fmt: skip


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def justice_fixture(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "justice.csv",
        [
            _row(1, "1971", "Peter Stanley, Sr. ", "Illinois", STANLEY_FACTS, "True"),
            _row(2, "1971", "John Giglio ", "United States", GIGLIO_FACTS, "False"),
            _row(3, "1972", "Sally Reed", "Cecil Reed", "<p>Sally and Cecil Reed separated.</p>", ""),
            _row(4, "1789-1850", "Hudson et al.", "Goodwin", "<p>Hudson sued Goodwin over a cargo.</p>", "True"),
            _row(5, "1980", "A B", "C D", "   ", "True"),
            _row(6, "unknown", "Ann Smith", "Bob Jones", "<p>Smith sued Jones.</p>", "False"),
        ],
    )


def test_load_anonymises_and_reports_skipped_rows(justice_fixture: Path) -> None:
    task = get_task("legal")
    assert isinstance(task, LegalTask)
    examples = task.load(justice_fixture)
    report = task.last_load_report
    assert report is not None
    assert [e["id"] for e in examples] == ["5001", "5002", "5004"]
    assert report.rows == 6 and report.loaded == 3 and report.leaks == 0
    assert report.reasons == {
        "blank first_party_winner": 1,
        "no facts": 1,
        "no usable term (no search cutoff)": 1,
    }
    assert "skipped" in report.summary()
    stanley, giglio, hudson = examples
    assert stanley.facts == (
        "Joan [the petitioner's surname] had three children with the petitioner. The petitioner never married. "
        "When Joan died, "
        "the State of the respondent took the children. Under the respondent law, unwed fathers were presumed unfit."
        "\n\nThe petitioner's appeal failed; the Supreme Court of Illinois rejected the petitioner's claim."
    )
    assert "Giglio" not in giglio.facts and "GIGLIO" not in giglio.facts
    assert "United States Court of Appeals for the Second Circuit" in giglio.facts  # a court name is kept
    assert "found that the respondent had promised" in giglio.facts
    assert giglio.facts.endswith("The respondent denied it.")
    assert hudson.facts == "The petitioner sued the respondent over a cargo."
    assert (stanley.winning_party, giglio.winning_party) == ("petitioner", "respondent")


def test_cutoffs_and_model_visible_fields(justice_fixture: Path) -> None:
    examples = LegalTask().load(justice_fixture)
    assert [e.cutoff for e in examples] == ["1966-01-01", "1966-01-01", "1845-01-01"]
    for example in examples:
        assert set(example.inputs().keys()) == {"facts", "cutoff"}
        assert "disposition" not in example and "issue_area" not in example and "name" not in example
        assert "reversed" not in example.facts and "Civil Rights" not in example.facts
    assert get_task("legal").cutoff(examples[0]) == dt.date(1966, 1, 1)
    assert term_cutoff("1940-1955") == dt.date(1950, 1, 1) and term_cutoff("") is None


def test_limit_and_bad_file(justice_fixture: Path, tmp_path: Path) -> None:
    assert len(LegalTask().load(justice_fixture, limit=2)) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match="missing columns"):
        LegalTask().load(bad)


def test_the_model_never_sees_names_or_the_label(justice_fixture: Path, lm, engine: ScriptedEngine) -> None:
    from memento.programs.baselines import ClosedBook

    task = get_task("legal")
    examples = task.load(justice_fixture)
    program = ClosedBook(task)
    for example in examples:
        program(**example.inputs())
    assert len(engine.calls) == 3
    prompts = "\n".join(call.prompt for call in engine.calls)
    for name in ("Stanley", "Giglio", "GIGLIO", "Hudson", "Goodwin", "reversed/remanded", "Civil Rights"):
        assert name not in prompts
    assert "do not rely on any outcome you may remember" in engine.calls[0].system


def test_anonymizer_cases() -> None:
    reed = PartyAnonymizer("Sally Reed", "Cecil Reed")
    assert reed.anonymize("Sally and Cecil Reed disagreed; the Reeds split.") == (
        "The petitioner and the respondent disagreed; the parties split."
    )
    halo = PartyAnonymizer("Halo Electronics", "Pulse Electronics Inc., et al.")
    assert halo.anonymize("Halo Electronics, Inc. (Halo) sued Pulse.") == (
        "The petitioner (the petitioner) sued the respondent."
    )
    person_with_title = PartyAnonymizer("Joan Wagnon, Secretary, Kansas Department of Revenue", "Prairie Band")
    text = person_with_title.anonymize("Secretary Wagnon of the Kansas Department of Revenue taxed fuel.")
    assert text == "The petitioner of the petitioner taxed fuel."
    # "In re" cases name one party only; a party given by surname only absorbs the given name written before it
    winship = PartyAnonymizer("", "In Re Winship")
    assert winship.anonymize("Samuel Winship was arrested. When Winship's case") == (
        "The respondent was arrested. When the respondent's case"
    )
    # a word that merely starts like a name is kept
    assert PartyAnonymizer("Reed", "Ohio").anonymize("Reedy Creek, Ohio.") == "Reedy Creek, the respondent."


def test_parse_party_segments() -> None:
    party = parse_party("Marlon Howell, aka Marlon Cox")
    assert [(s.text, s.kind, s.surname) for s in party.segments] == [
        ("Marlon Howell", "person", "Howell"),
        ("Marlon Cox", "person", "Cox"),
    ]
    assert [s.kind for s in parse_party("United States").segments] == ["organisation"]
    assert [s.kind for s in parse_party("New York").segments] == ["organisation"]
    assert parse_party("Arthur L. Lewis, Jr., et al.").surnames == ["Lewis"]
    assert parse_party("Planned Parenthood Federation of America, Inc., et al.").segments[0].name_tokens == [
        "Planned",
        "Parenthood",
    ]


def test_court_spans_and_leak_finder() -> None:
    text = "He appealed to the U.S. Court of Appeals for the Ninth Circuit and the Supreme Court of California."
    spans = [text[a:b] for a, b in court_spans(text)]
    assert "U.S. Court of Appeals for the Ninth Circuit" in spans and "Supreme Court of California" in spans
    assert find_leaks("the Supreme Court of California ruled", "Smith", "California") == []
    leaks = find_leaks("California and Smiths", "Smith", "California")
    assert sorted(leak.kind for leak in leaks) == ["full_name", "name"]


def test_legal_metric_normalises_the_party() -> None:
    task = get_task("legal")
    example = dspy.Example(facts="f", winning_party="petitioner")
    assert task.metric(example, dspy.Prediction(winning_party="The Petitioner")).score == 1.0
    wrong = task.metric(example, dspy.Prediction(winning_party="respondent"))
    assert wrong.score == 0.0 and "ruled for the petitioner" in wrong.feedback
    assert task.metric(example, dspy.Prediction(winning_party="unclear")).score == 0.0
    assert normalize_party("appellee") == "respondent" and normalize_party("petitioner or respondent") is None


def test_llm_scrub_is_accepted_only_when_safe(justice_fixture: Path) -> None:
    engine = ScriptedEngine(
        overrides={
            "scrubbed_facts": lambda call: call.inputs["facts"].replace(
                "Joan [the petitioner's surname]", "his partner"
            )
        }
    )
    dspy.configure(lm=scripted_lm(engine))
    task = LegalTask(llm_scrub=True, threads=2)
    examples = task.load(justice_fixture)
    assert task.last_load_report is not None and task.last_load_report.scrubbed == 3
    assert examples[0].facts.startswith("his partner had three children")
    assert any("Peter Stanley" in c.inputs["party_names"] for c in engine.calls)
    short = ScriptedEngine(overrides={"scrubbed_facts": "facts"})
    dspy.configure(lm=scripted_lm(short))
    task = LegalTask(llm_scrub=True)
    kept = task.load(justice_fixture)
    assert task.last_load_report is not None and task.last_load_report.scrubbed == 0
    assert kept[0].facts.startswith("Joan [the petitioner's surname]")


#: rows of the real file where the leak check still fires, each for a reason that is not the party's own name
#: (see docs/benchmarks.md, "Legal task: party-name removal"); any other flagged row fails the test below
KNOWN_FLAGGED = {
    "51682": "a prison unit named in an official's title (Walls Unit)",
    "51713": "the maiden name of the respondent's mother (Ora Spitler McFarlin)",
    "61470": "the town in a mayor's title (Mayor of Tazewell)",
    "62578": "the city in a mayor's title (Mayor of Montgomery)",
    **{
        row: "another person who shares a party's given name (James Hereford, John Delaney, ...)"
        for row in ("53771", "55297", "55629", "55804", "56006", "59703", "60371", "61550", "62716",
                    "62936", "63331")
    },
}  # fmt: skip


def test_whole_justice_file_has_no_leaks_on_a_sample() -> None:
    """Every 6th row of the real file (the bench covers all rows): no party name left outside the documented
    rows, every row has a cutoff."""
    if not JUSTICE.exists():
        pytest.skip("shared data not present beside the clone")
    from memento.tasks._text import html_to_text

    with JUSTICE.open(encoding="utf-8", newline="") as handle:
        rows = [row for i, row in enumerate(csv.DictReader(handle)) if i % 6 == 0]
    flagged = []
    for row in rows:
        text = PartyAnonymizer(row["first_party"], row["second_party"]).anonymize(html_to_text(row["facts"]))
        if find_leaks(text, row["first_party"], row["second_party"]) and row["ID"] not in KNOWN_FLAGGED:
            flagged.append(row["name"])
        assert term_cutoff(row["term"]) is not None
    assert flagged == []
