"""The agents' tools with the URLs an LM really writes ("corpus://id.", "(url)", "[url]") and with a web layer
that raises: the run goes on, the page is read, the cited evidence is kept."""

from __future__ import annotations

import pytest

from memento.core.config import Budgets
from memento.core.types import ToolCall
from memento.core.untrusted import quote_data
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.react_agent import ReActAgent
from memento.programs.toolbox import Toolbox, clean_url
from memento.testing import build_corpus
from memento.web.web_tools import WebTools

DOCS = [
    {"url": "https://ex.org/dune", "title": "Dune (novel)", "text": "Dune is a 1965 novel by Frank Herbert."},
    {"doc_id": "herbert", "title": "Frank Herbert", "text": "Frank Herbert was born in Tacoma, Washington."},
]


@pytest.fixture
def web(tmp_path):
    corpus = build_corpus(DOCS, tmp_path)
    return lambda cutoff, undated: WebTools(corpus, cutoff=cutoff)


def steps_done(call) -> int:
    return sum(1 for key in call.inputs if key.startswith("observation_"))


def is_step(call, n: int) -> bool:
    return "next_tool_name" in call.output_fields and steps_done(call) == n


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("corpus://herbert.", "corpus://herbert"),
        ("https://ex.org/a).", "https://ex.org/a"),
        ("(https://ex.org/a)", "https://ex.org/a"),
        ("[https://ex.org/a]", "https://ex.org/a"),
        ("<https://ex.org/a>,", "https://ex.org/a"),
        ("'https://ex.org/a';", "https://ex.org/a"),
        ("[Frank Herbert](https://ex.org/a).", "https://ex.org/a"),
        ("https://en.wikipedia.org/wiki/Dune_(novel)", "https://en.wikipedia.org/wiki/Dune_(novel)"),
        ("(https://en.wikipedia.org/wiki/Dune_(novel)).", "https://en.wikipedia.org/wiki/Dune_(novel)"),
        ("https://ex.org/search?q=a&b=c", "https://ex.org/search?q=a&b=c"),
        ("  ", ""),
        (None, ""),
    ],
)
def test_clean_url(raw, clean):
    assert clean_url(raw) == clean


@pytest.mark.parametrize(
    "written", ["corpus://herbert.", "(corpus://herbert)", "[corpus://herbert]", "corpus://herbert)"]
)
def test_react_reads_a_page_whose_url_the_lm_wrote_with_punctuation(engine, lm, web, written):
    engine.when(predicate=lambda c: is_step(c, 0), next_tool_name="scrape", next_tool_args={"url": written})
    engine.when(
        predicate=lambda c: "sources" in c.output_fields and "next_thought" not in c.output_fields,
        answer="Tacoma",
        sources=[written],
    )
    pred = ReActAgent("qa", web=web, budgets=Budgets(steps_per_question=3))(question="Where was Herbert born?")
    traj = pred.trajectory
    assert pred.answer == "Tacoma" and traj.error is None
    [scrape] = [c for c in traj.tool_calls if c.kind == "scrape"]
    assert scrape.args == {"url": "corpus://herbert"} and scrape.error is None and scrape.node_id == "root"
    observation = next(c for c in engine.calls if is_step(c, 1)).inputs["observation_0"]
    assert "born in Tacoma" in observation
    assert [e.url for e in traj.nodes[0].evidence] == ["corpus://herbert"]  # the cited page is the evidence
    assert not any("cited URLs no tool returned" in n for n in traj.notes)
    assert traj.usage.fetches == 1


class RaisingWeb:
    """A web layer that breaks its promise never to raise."""

    def __init__(self) -> None:
        self.tool_calls: list[ToolCall] = []

    def search(self, query: str):
        raise RuntimeError("search backend exploded")

    def open(self, url: str):
        raise ValueError(f"Invalid IPv6 URL: {url}")

    def counts(self) -> dict[str, int]:
        return {"searches": 0, "fetches": 0, "fetch_cache_hits": 0, "unique_urls": 0, "repeated_urls": 0}


def test_a_raising_web_layer_is_an_observation_not_a_crash(engine, lm):
    engine.when(predicate=lambda c: is_step(c, 0), next_tool_name="scrape", next_tool_args={"url": "https://[x"})
    engine.when(predicate=lambda c: is_step(c, 1), next_tool_name="search_web", next_tool_args={"query": "dune"})
    engine.when(predicate=lambda c: "sources" in c.output_fields and "next_thought" not in c.output_fields, answer="?")
    pred = ReActAgent("qa", web=lambda cutoff, undated: RaisingWeb(), budgets=Budgets(steps_per_question=3))(
        question="Who wrote Dune?"
    )
    assert pred.trajectory.error is None and pred.answer == "?"
    step = next(c for c in engine.calls if is_step(c, 2))
    assert step.inputs["observation_0"].startswith("<data>\nerror: scrape failed (ValueError: Invalid IPv6 URL")
    assert step.inputs["observation_1"] == quote_data(
        "error: search_web failed (RuntimeError: search backend exploded)"
    )
    assert [(c.kind, c.error is not None) for c in pred.trajectory.tool_calls] == [
        ("scrape", True),
        ("search_web", True),
    ]


def test_aet_node_survives_a_raising_web_layer(engine, lm):
    engine.when("sub_questions", sub_questions=["Who wrote Dune?"])
    engine.when("new_questions", new_questions=[])
    engine.when(predicate=lambda c: is_step(c, 0), next_tool_name="scrape", next_tool_args={"url": "corpus://x."})
    aet = AdaptiveExplorationTree(
        "qa", web=lambda cutoff, undated: RaisingWeb(), budgets=Budgets(initial_questions=1, total_questions=1)
    )
    pred = aet(question="Dune?")
    node = pred.trajectory.node("q1")
    assert node.status == "answered" and node.error is None
    assert pred.trajectory.tool_calls[0].args == {"url": "corpus://x"}


def test_a_toolbox_call_is_recorded_once_by_the_toolbox_with_its_node(web):
    tools = web(None, "keep")
    box = Toolbox(tools, node_id="q7")
    text = box.scrape("corpus://herbert")
    [call] = box.calls
    assert call.node_id == "q7" and call.page is not None and call.page.text in text
    assert tools.tool_calls == []  # the web layer records only calls made through its own text tools


def test_the_toolbox_own_record_of_a_failed_scrape_hides_a_password(engine, lm):
    box = Toolbox(RaisingWeb(), node_id="q1")  # type: ignore[arg-type]  # a web whose every tool raises
    text = box.scrape("https://user:hunter2@ex.org/page.")
    assert text.startswith("error: scrape failed (ValueError")
    [call] = box.calls
    assert call.args == {"url": "https://***:***@ex.org/page"} and call.error
    assert "hunter2" not in call.model_dump_json()
