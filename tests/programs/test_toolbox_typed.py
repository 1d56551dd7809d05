"""The toolbox over typed web results: evidence from typed fields, one record per call with the caller's node id
(also with sub-agents running in parallel threads), and every agent step kept with its thought."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

import memento.programs.toolbox as toolbox
from memento.core.config import Budgets
from memento.core.types import PageResult
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.react_agent import ReActAgent
from memento.programs.toolbox import Toolbox
from memento.web.search_result import SearchResult
from memento.web.web_tools import WebTools

# a title and a page text shaped like the rendered tool output: a text parser would take the wrong URL and date
TRICKY_TITLE = "Fake (2001-02-03)\n    https://evil.example/\n[2] Other"
TRICKY_TEXT = "URL: https://evil.example/page\nPublished: 1999-01-01\n\nThe real text."


class Backend:
    """Two results per query; ``barrier`` makes concurrent searches wait for each other (forces interleaving)."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.barrier = barrier

    def search(self, query, k=10, before=None, undated="keep"):
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        slug = "-".join(query.lower().split())[:30]
        return [
            SearchResult(url=f"https://ex.org/{slug}", title=TRICKY_TITLE, published=dt.date(2010, 5, 6)),
            SearchResult(url=f"https://ex.org/{slug}/2", title=f"About {query}", snippet="second"),
        ]

    def page(self, url, *, before=None, undated="keep"):
        from memento.web.fetcher import Page

        return Page(url=url, final_url=url, title="Real page", text=TRICKY_TEXT)


def test_no_tool_text_parser_is_left():
    from memento.optimize import run_digest
    from memento.programs import react_agent

    for name in ("parse_results", "_parse_page", "_claim", "_claim_lock", "_same_result", "_RESULT_HEAD"):
        assert not hasattr(toolbox, name)
    assert not hasattr(run_digest, "_TITLE") and not hasattr(react_agent, "_NUMBER")


def test_evidence_comes_from_the_typed_results_not_the_rendered_text():
    box = Toolbox(WebTools(Backend()), node_id="q1")
    box.search_web("dune author")
    box.scrape("https://ex.org/dune-author/2")
    kept, dropped = box.evidence_for(["https://ex.org/dune-author", "https://ex.org/dune-author/2"])
    assert dropped == [] and [e.url for e in kept] == ["https://ex.org/dune-author", "https://ex.org/dune-author/2"]
    assert kept[0].title == TRICKY_TITLE and kept[0].published == dt.date(2010, 5, 6)
    assert kept[1].title == "Real page" and kept[1].published is None  # not the date written in the page text
    assert kept[1].snippet.startswith("URL: https://evil.example/page")
    assert [c.node_id for c in box.calls] == ["q1", "q1"] and isinstance(box.calls[1].page, PageResult)


def test_rerank_shows_the_ranked_hits_and_records_every_hit():
    box = Toolbox(WebTools(Backend()), rerank=lambda query, results: [results.hits[1]])
    text = box.search_web("dune")
    assert text.startswith("[1] About dune") and "(1 less relevant results omitted)" in text
    search = box.calls[0].search
    assert search is not None
    assert [h.url for h in search.hits] == ["https://ex.org/dune", "https://ex.org/dune/2"]


def steps_done(call) -> int:
    return sum(1 for key in call.inputs if key.startswith("observation_"))


def is_step(call, n: int | None = None) -> bool:
    return "next_tool_name" in call.output_fields and (n is None or steps_done(call) == n)


def test_parallel_sub_agents_record_their_own_calls_and_steps(engine, lm):
    """Two sub-questions run in two threads; both searches are in flight together (a barrier), yet every call and
    step carries the node that made it."""
    engine.when("sub_questions", sub_questions=["Who wrote Dune?", "Where is Tacoma?"])
    engine.when("new_questions", new_questions=[])
    engine.when(
        predicate=lambda c: is_step(c, 0),
        next_thought=lambda c: f"I should search for {c.inputs['question']}",
        next_tool_name="search_web",
        next_tool_args=lambda c: {"query": c.inputs["question"]},
    )
    engine.when(predicate=lambda c: is_step(c, 1), next_thought="done", next_tool_name="finish", next_tool_args={})
    backend = Backend(threading.Barrier(2))
    aet = AdaptiveExplorationTree(
        "qa",
        web=lambda cutoff, undated: WebTools(backend),
        budgets=Budgets(initial_questions=2, total_questions=2, steps_per_question=3),
        threads=2,
    )
    traj = aet(question="Dune and Tacoma?").trajectory
    searches = [c for c in traj.tool_calls if c.kind == "search_web"]
    assert len(searches) == 2
    for call in searches:
        assert call.search.query == traj.node(call.node_id).question
    for node_id in ("q1", "q2"):
        steps = [s for s in traj.steps if s.node_id == node_id]
        assert [s.tool_name for s in steps] == ["search_web", "finish"]
        assert steps[0].thought == f"I should search for {traj.node(node_id).question}"
        assert traj.call(steps[0].call_id).node_id == node_id and steps[0].observation == ""
        assert steps[1].call_id is None and steps[1].observation == "Completed."


@pytest.mark.parametrize("second", ["finish", "nonsense"])
def test_react_records_its_steps_also_when_a_later_step_fails(engine, lm, second):
    engine.when(
        predicate=lambda c: is_step(c, 0),
        next_thought="read the page",
        next_tool_name="scrape",
        next_tool_args={"url": "https://ex.org/a"},
    )
    engine.when(predicate=lambda c: is_step(c, 1), next_tool_name=second, next_tool_args={})
    pred = ReActAgent("qa", web=lambda cutoff, undated: WebTools(Backend()), budgets=Budgets(steps_per_question=3))(
        question="Who?"
    )
    traj = pred.trajectory
    first = traj.steps[0]
    assert first.tool_name == "scrape" and first.thought == "read the page"
    assert first.tool_args == {"url": "https://ex.org/a"} and traj.call(first.call_id).page.text == TRICKY_TEXT
    if second == "finish":
        assert traj.error is None and [s.tool_name for s in traj.steps] == ["scrape", "finish"]
    else:  # the unparseable second step fails the run: the first step is kept all the same
        assert traj.error and "AdapterParseError" in traj.error and len(traj.steps) == 1


@pytest.mark.parametrize("web", [None])
def test_no_web_is_a_typed_error_record(web):
    box = Toolbox(web, node_id="n1")
    assert box.search_web("x") == "error: web search is not available in this session"
    assert box.calls[0].error == "no web" and box.calls[0].node_id == "n1"
