"""JitMem around the real research programs: the registered ``jitmem`` method (ReAct executor) and the AET."""

from __future__ import annotations

import json

import pytest

from memento.core.config import Budgets, load_settings
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.baselines import ReActAgent
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.programs.registry import build_program
from memento.web.factory import web_tools_factory
from memento.web.offline_corpus import OfflineCorpus

DOCS = [
    {"url": "https://ex.org/dune", "title": "Dune (novel)", "text": "Dune is a 1965 novel by Frank Herbert."},
    {"url": "https://ex.org/herbert", "title": "Frank Herbert", "text": "Frank Herbert was born in Tacoma."},
]
CURATOR = "You are a memory curator"
JUDGE = "You are judging whether an agent"


@pytest.fixture
def settings(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in DOCS), encoding="utf-8")
    OfflineCorpus.build([src], tmp_path / "corpus")
    return load_settings(flags={"web": {"corpus": str(tmp_path / "corpus")}})


def _is_step(call, n: int) -> bool:
    return "next_tool_name" in call.output_fields and sum(k.startswith("observation_") for k in call.inputs) == n


@pytest.fixture
def scripted(engine, lm):
    engine.when(CURATOR, payload=lambda c: f"CURATED: reuse the query that worked for <{c.inputs['task']}>")
    engine.when(JUDGE, success=True, reasoning="supported by the scraped page")
    engine.when(
        predicate=lambda c: _is_step(c, 0), next_tool_name="search_web", next_tool_args={"query": "Dune novel author"}
    )
    engine.when("sub_questions", sub_questions=["Who wrote Dune?"])
    engine.when("new_questions", new_questions=[])
    return engine


def test_registered_jitmem_method_wraps_react_over_the_offline_corpus(tmp_path, settings, scripted):
    agent = build_program("jitmem", task="qa", settings=settings, memory_dir=tmp_path / "memory")
    assert isinstance(agent, JitMemAgent) and isinstance(agent.executor, ReActAgent)

    first = agent(question="Who wrote the novel Dune?", task_id="first")
    assert first.jitmem["retrieved"] == [] and first.jitmem["stored"] is True
    assert not scripted.calls_matching(CURATOR)  # cold start: nothing to curate
    stored = agent.bank.get("first")[0]
    search = next(c for c in stored.tool_calls if c.kind == "search_web")
    assert "https://ex.org/dune" in search.result_urls  # the raw record keeps what the tools returned

    second = agent(question="In which year was the novel Dune published?", task_id="second")
    assert second.jitmem["retrieved"] == ["first"]
    curate = scripted.calls_matching(CURATOR)[0]
    assert "Dune novel author" in curate.prompt and "Who wrote the novel Dune?" in curate.prompt
    payload = curate.outputs["payload"]
    react_steps = [c for c in scripted.calls if "next_tool_name" in c.output_fields and payload in c.prompt]
    assert react_steps  # the executor's agent read the payload
    assert second.trajectory.usage.searches == 1 and second.trajectory.usage.by_stage["curate"].lm_calls == 1
    assert (tmp_path / "memory" / "jitmem" / "trajectories.sqlite3").exists()


def test_aet_executor_reads_the_payload_in_decompose_and_solve(tmp_path, settings, scripted):
    aet = AdaptiveExplorationTree(
        "qa",
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=1, total_questions=1, steps_per_question=3),
    )
    agent = JitMemAgent(aet, TrajectoryBank(tmp_path / "bank"), JitMemCurator())
    agent(question="Who wrote Dune?", task_id="a1")
    pred = agent(question="Who is the author of Dune?", task_id="a2")
    assert pred.jitmem["retrieved"] == ["a1"]
    payload = scripted.calls_matching(CURATOR)[0].outputs["payload"]
    decompose = [c for c in scripted.calls if "sub_questions" in c.output_fields and payload in c.prompt]
    solve = [c for c in scripted.calls if "next_tool_name" in c.output_fields and payload in c.prompt]
    assert decompose and solve
    stored = agent.bank.get("a2")[0]
    assert stored.method == "jitmem[aet]" and any(n.question == "Who wrote Dune?" for n in stored.nodes)
    assert payload not in stored.model_dump_json()
