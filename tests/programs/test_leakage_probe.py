"""The legal leakage agent: its own signature (the docstring is its prompt), web tools under the case's cutoff, and
a claim counted as a retrieval only when a page it read holds the quote."""

from __future__ import annotations

import sys
from pathlib import Path

import dspy
import pytest

from memento.core.config import load_settings
from memento.core.errors import ConfigError
from memento.core.types import Evidence, PageResult, SearchHit, SearchResults, ToolCall
from memento.programs.leakage_probe import LeakageProbe, outcome_leaked, quote_support
from memento.signatures.find_case_outcome import FindCaseOutcome
from memento.tasks.task import get_task
from memento.testing import OpenAICompatServer, scripted_lm
from memento.web.factory import web_tools_factory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from legal_protocol_fixture import MEMORY_QUOTE, make_engine, write_corpus, write_justice  # noqa: E402


@pytest.fixture
def cases(tmp_path):
    examples = get_task("legal").load(write_justice(tmp_path / "justice.csv"))
    return {str(ex.id): ex for ex in examples}


@pytest.fixture
def web(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    return web_tools_factory(settings)


def test_find_case_outcome_is_its_own_signature_whose_docstring_is_the_prompt(cases, web):
    from memento import signatures

    assert "FindCaseOutcome" in signatures.__all__
    others = [getattr(signatures, name) for name in signatures.__all__ if name not in ("FindCaseOutcome",)]
    assert all(other is not FindCaseOutcome for other in others)
    assert list(FindCaseOutcome.input_fields) == ["facts", "cutoff"]
    assert list(FindCaseOutcome.output_fields) == ["found", "winning_party", "disposition", "quote", "source"]
    engine = make_engine()
    with dspy.context(lm=scripted_lm(engine)):
        LeakageProbe(web=web)(facts=cases["106"].facts, cutoff=cases["106"].cutoff)
    first = (FindCaseOutcome.__doc__ or "").split(".")[0]
    assert engine.calls and all(first in call.system for call in engine.calls)
    assert "Do not answer from memory or by guessing" in engine.calls[-1].system


def test_a_page_before_the_cutoff_that_states_the_decision_is_a_retrieval(cases, web):
    engine = make_engine()
    case = cases["101"]
    with dspy.context(lm=scripted_lm(engine)):
        pred = LeakageProbe(web=web, max_steps=5)(facts=case.facts, cutoff=case.cutoff)
    assert pred.found and pred.winning_party == "petitioner" and pred.source == "corpus://harbour-ruling"
    assert pred.support is not None and pred.support.url == "corpus://harbour-ruling"
    assert str(pred.support.published) == "2008-05-01" and "ruled for the petitioner" in pred.support.snippet
    assert [c.kind for c in pred.tool_calls] == ["search_web", "scrape"] and pred.steps == 2
    assert outcome_leaked(pred, "petitioner") and not outcome_leaked(pred, "respondent")
    assert "Alder Shipping" not in engine.calls[0].prompt  # the agent sees the facts as methods do: anonymised


def test_a_report_published_after_the_cutoff_never_reaches_the_agent(cases, web):
    engine = make_engine()
    case = cases["102"]  # its only report is dated 2012-07-01; the cutoff is 2007-01-01
    with dspy.context(lm=scripted_lm(engine)):
        pred = LeakageProbe(web=web)(facts=case.facts, cutoff=case.cutoff)
    assert not pred.found and pred.support is None and not outcome_leaked(pred, "petitioner")
    assert pred.tool_calls[0].search is not None and pred.tool_calls[0].search.hits == []
    assert not any("struck down the quota" in call.prompt for call in engine.calls)
    assert all("2007-01-01" in call.prompt for call in engine.calls)  # the agent is told its cutoff


def test_a_claim_no_page_holds_and_a_wrong_winner_are_not_retrievals(cases, web):
    engine = make_engine()
    with dspy.context(lm=scripted_lm(engine)):
        memory = LeakageProbe(web=web)(facts=cases["104"].facts, cutoff=cases["104"].cutoff)
        lower = LeakageProbe(web=web)(facts=cases["103"].facts, cutoff=cases["103"].cutoff)
    assert memory.found and memory.winning_party == "respondent" and memory.quote == MEMORY_QUOTE
    assert memory.support is None and not outcome_leaked(memory, "respondent")  # the label matches, no page does
    assert lower.found and lower.winning_party == "respondent" and lower.support is not None
    assert not outcome_leaked(lower, cases["103"].winning_party)  # the petitioner won: a lower court's ruling


def test_quote_support_reads_pages_then_snippets_and_tolerates_a_slip():
    page = PageResult.of_text(
        url="https://x.org/a", title="A", text="Background. The Supreme Court ruled for the petitioner, 6-3, today."
    )
    hit = SearchHit(url="https://x.org/b", title="B", snippet="Justices ruled for the respondent in the mail case.")
    calls = [
        ToolCall(kind="search_web", search=SearchResults(query="q", hits=[hit])),
        ToolCall(kind="scrape", page=page),
    ]
    assert _url(quote_support("The Supreme Court ruled for the petitioner, 6-3, today.", calls)) == "https://x.org/a"
    assert _url(quote_support("the Supreme Court has ruled for the petitioner 6-3 today", calls)) == "https://x.org/a"
    assert _url(quote_support("Justices ruled for the respondent in the mail case", calls)) == "https://x.org/b"
    assert quote_support("The Supreme Court ruled for the respondent in a different case.", calls) is None
    assert quote_support("Reversed.", calls) is None  # too short to tie a page to the case
    assert quote_support("", calls) is None


def test_the_probe_runs_on_a_local_openai_compatible_server(cases, web, tmp_path):
    with OpenAICompatServer(make_engine()) as server:
        lm = dspy.LM("openai/scripted", api_base=server.api_base, api_key="test-key", cache=False)
        with dspy.context(lm=lm):
            pred = LeakageProbe(web=web)(facts=cases["109"].facts, cutoff=cases["109"].cutoff)
        assert server.chat_requests >= 2
    assert pred.found and pred.winning_party == "respondent" and pred.support.url == "corpus://tax-credit-note"
    assert outcome_leaked(pred, cases["109"].winning_party)


def test_a_probe_needs_a_step():
    with pytest.raises(ConfigError, match="at least one step"):
        LeakageProbe(web=lambda cutoff, undated: None, max_steps=0)


def _url(evidence: Evidence | None) -> str | None:
    return evidence.url if evidence is not None else None
