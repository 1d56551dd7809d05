"""The ReAct-family baselines and the AET over a real offline corpus (web layer integration)."""

from __future__ import annotations

import pytest

from memento.core.config import Budgets, load_settings
from memento.core.errors import ConfigError
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.baselines import ReActAgent
from memento.programs.registry import build_program
from memento.testing import build_corpus, is_react_step
from memento.web.factory import web_tools_factory
from memento.web.search_result import SearchResult
from memento.web.web_tools import WebTools

DOCS = [
    {
        "url": "https://ex.org/dune",
        "title": "Dune (novel)",
        "text": "Dune is a 1965 science fiction novel by Frank Herbert.",
        "published": "2001-01-01",
    },
    {
        "url": "https://ex.org/herbert",
        "title": "Frank Herbert",
        "text": "Frank Herbert was an American author born in Tacoma, Washington.",
        "published": "2002-01-01",
    },
    {
        "url": "https://ex.org/tacoma",
        "title": "Tacoma",
        "text": "Tacoma is a city in Pierce County, Washington.",
        "published": "2003-01-01",
    },
    {
        "url": "https://ex.org/late",
        "title": "Dune retrospective",
        "text": "A 2021 essay on the novel Dune by Frank Herbert.",
        "published": "2021-06-01",
    },
]


@pytest.fixture
def corpus_dir(tmp_path):
    build_corpus(DOCS, tmp_path)
    return tmp_path / "index"


class Backend:
    def __init__(self, n: int = 3) -> None:
        self.queries: list[str] = []
        self.n = n

    def search(self, query, k=10, before=None, undated="keep"):
        self.queries.append(query)
        return [SearchResult(url=f"https://ex.org/r{i}", title=f"R{i}", snippet=f"snippet {i}") for i in range(self.n)]


def factory(backend):
    return lambda cutoff, undated: WebTools(backend, cutoff=cutoff)


def test_react_step_cap_and_trajectory(engine, lm):
    engine.when(predicate=is_react_step, next_tool_name="search_web", next_tool_args={"query": "dune"})
    engine.when(
        predicate=lambda c: "answer" in c.output_fields and "next_thought" not in c.output_fields,
        answer="Frank Herbert",
        sources=["https://ex.org/r0"],
    )
    backend = Backend()
    agent = ReActAgent("qa", web=factory(backend), budgets=Budgets(steps_per_question=4))
    pred = agent(question="Who wrote Dune?")
    node = pred.trajectory.nodes[0]
    assert pred.answer == "Frank Herbert" and node.steps == 4 and len(backend.queries) == 4
    assert node.status == "failed" and "ran out of steps (4)" in node.error
    assert [e.url for e in node.evidence] == ["https://ex.org/r0"]
    assert pred.trajectory.method == "react" and pred.trajectory.usage.searches == 4
    assert all(c.node_id == "root" for c in pred.trajectory.tool_calls)
    assert set(pred.trajectory.usage.by_stage) == {"solve"}


def test_query_rewriting_searches_the_rewritten_query(engine, lm):
    engine.when(
        predicate=lambda c: is_react_step(c, 0), next_tool_name="search_web", next_tool_args={"query": "who wrote dune"}
    )
    engine.when("rewritten_query", rewritten_query="Dune novel author")
    backend = Backend()
    agent = ReActAgent("qa", web=factory(backend), query_rewriting=True)
    pred = agent(question="Who wrote Dune?")
    assert backend.queries == ["Dune novel author"]
    call = pred.trajectory.tool_calls[0]
    assert call.args == {"query": "Dune novel author", "original_query": "who wrote dune"}
    assert pred.trajectory.method == "react_rewrite"
    assert pred.trajectory.usage.by_stage["rewrite"].lm_calls == 1
    step = next(c for c in engine.calls if is_react_step(c, 1))
    assert "(searched for: Dune novel author)" in step.prompt


def test_rerank_reorders_and_drops_results(engine, lm):
    engine.when(predicate=lambda c: is_react_step(c, 0), next_tool_name="search_web", next_tool_args={"query": "dune"})
    engine.when("ranking", ranking=[3, 1, 99, 3])
    agent = ReActAgent("qa", web=factory(Backend(n=3)), rerank=True)
    pred = agent(question="Who wrote Dune?")
    step = next(c for c in engine.calls if is_react_step(c, 1))
    observation = step.inputs["observation_0"]
    assert observation.index("https://ex.org/r2") < observation.index("https://ex.org/r0")
    assert "https://ex.org/r1" not in observation and "1 less relevant results omitted" in observation
    assert observation.startswith("<data>\n[1] R2")
    assert pred.trajectory.method == "react_rerank" and pred.trajectory.usage.by_stage["rerank"].lm_calls == 1


def test_empty_ranking_keeps_the_engine_order(engine, lm):
    engine.when(predicate=lambda c: is_react_step(c, 0), next_tool_name="search_web", next_tool_args={"query": "dune"})
    engine.when("ranking", ranking=[])
    ReActAgent("qa", web=factory(Backend(n=2)), rerank=True)(question="Who wrote Dune?")
    observation = next(c for c in engine.calls if is_react_step(c, 1)).inputs["observation_0"]
    assert observation.index("https://ex.org/r0") < observation.index("https://ex.org/r1")


def test_react_with_memory_gets_memory_text_as_context(engine, lm):
    class Memory:
        def craft_knowledge(self, t):
            return "insight one"

        def decomposition_rules(self, t):
            return ""

        def web_action_rules(self, t):
            return "rule two"

        def known_facts(self, t):
            return "fact three"

        def search(self, q, k=5):
            return []

    agent = ReActAgent("qa", web=factory(Backend()), memory=Memory())
    pred = agent(question="Who wrote Dune?", context="caller note")
    context = next(c for c in engine.calls if is_react_step(c, 0)).inputs["context"]
    for text in ("caller note", "insight one", "rule two", "fact three"):
        assert text in context
    assert pred.trajectory.method == "react_memory"
    assert "search_memory" not in engine.calls[0].system  # the flat agent has web tools only


def test_react_variants_are_registered_and_react_memory_needs_a_memory(lm, tmp_path, corpus_dir):
    settings = load_settings(flags={"web": {"corpus": str(corpus_dir)}})
    for method, rewrite, rerank in [
        ("react", False, False),
        ("react_rewrite", True, False),
        ("react_rerank", False, True),
        ("react_rewrite_rerank", True, True),
    ]:
        program = build_program(method, task="qa", settings=settings)
        assert isinstance(program, ReActAgent) and program.method == method
        assert (program.rewriter is not None, program.reranker is not None) == (rewrite, rerank)
    with pytest.raises(ConfigError, match="react_memory needs an existing memory directory"):
        build_program("react_memory", task="qa", settings=settings, memory_dir=tmp_path / "missing")
    assert isinstance(build_program("aet", task="qa", settings=settings), AdaptiveExplorationTree)


def test_aet_over_a_real_offline_corpus_with_cutoff(engine, lm, corpus_dir):
    engine.when("sub_questions", sub_questions=["Who wrote Dune?"])
    engine.when("new_questions", new_questions=[])
    engine.when(
        predicate=lambda c: is_react_step(c, 0),
        next_tool_name="search_web",
        next_tool_args={"query": "Dune novel Frank Herbert"},
    )
    engine.when(
        predicate=lambda c: is_react_step(c, 1), next_tool_name="scrape", next_tool_args={"url": "https://ex.org/dune"}
    )
    engine.when(
        predicate=lambda c: is_react_step(c, 2), next_tool_name="scrape", next_tool_args={"url": "https://ex.org/dune"}
    )
    engine.when(
        predicate=lambda c: (
            "sources" in c.output_fields and "task" in c.inputs and "next_thought" not in c.output_fields
        ),
        answer="Frank Herbert",
        sources=["https://ex.org/dune"],
    )
    settings = load_settings(flags={"web": {"corpus": str(corpus_dir)}})
    aet = AdaptiveExplorationTree(
        "qa",
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=1, total_questions=1, steps_per_question=5),
    )
    pred = aet(question="Who wrote Dune?", cutoff="2020-01-01")
    traj = pred.trajectory
    search = next(c for c in traj.tool_calls if c.kind == "search_web")
    assert "https://ex.org/dune" in search.result_urls
    assert "https://ex.org/late" not in search.result_urls  # published after the cutoff
    q1 = traj.node("q1")
    assert q1.answer == "Frank Herbert" and q1.steps == 3
    assert q1.evidence[0].url == "https://ex.org/dune" and "1965" in q1.evidence[0].snippet
    assert traj.usage.searches == 1 and traj.usage.fetches == 2
    assert traj.usage.unique_urls == 1 and traj.usage.repeated_urls == 1


def test_react_memory_builder_opens_the_memory_read_only(engine, lm, tmp_path, corpus_dir):
    from memento.memory.memento_memory import MementoMemory

    MementoMemory(tmp_path / "mem")  # creates an empty memory directory
    settings = load_settings(flags={"web": {"corpus": str(corpus_dir)}})
    program = build_program("react_memory", task="qa", settings=settings, memory_dir=tmp_path / "mem")
    assert isinstance(program, ReActAgent) and program.method == "react_memory"
    assert getattr(program.memory, "frozen", False)
    pred = program(question="Who wrote Dune?")
    assert pred.trajectory.method == "react_memory" and pred.trajectory.error is None
