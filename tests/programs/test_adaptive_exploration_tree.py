"""The Adaptive Exploration Tree and the sub-question agent, with a scripted LM and in-process web tools."""

from __future__ import annotations

import copy
import json
import threading

import dspy
import pytest

from memento.core.config import Budgets
from memento.core.errors import LMUnavailableError
from memento.core.types import Evidence
from memento.core.untrusted import quote_data
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree, TreeEvent
from memento.programs.research_program import EmptyQuestionError
from memento.programs.session_memory import SessionMemory
from memento.programs.sub_question_agent import SubQuestionAgent
from memento.testing import EchoSearchBackend, ScriptedEngine, is_react_step, react_steps_done, scripted_lm
from memento.web.web_tools import WebTools


def is_extract(call) -> bool:
    """The ReAct extraction call (the outputs after the tool loop)."""
    return "sources" in call.output_fields and "next_thought" not in call.output_fields and "task" in call.inputs


def make_aet(
    budgets: Budgets, *, threads: int = 1, backend: EchoSearchBackend | None = None, **kwargs
) -> AdaptiveExplorationTree:
    backend = backend or EchoSearchBackend()
    return AdaptiveExplorationTree(
        "qa", web=lambda cutoff, undated: WebTools(backend, cutoff=cutoff), budgets=budgets, threads=threads, **kwargs
    )


def search_then_finish(engine: ScriptedEngine) -> None:
    """Every agent searches its own question once, then finishes, citing the first result."""
    engine.when(
        predicate=lambda c: is_react_step(c, 0),
        next_tool_name="search_web",
        next_tool_args=lambda c: {"query": c.inputs["question"]},
    )
    engine.when(
        predicate=lambda c: is_extract(c) and react_steps_done(c) >= 1,
        answer=lambda c: f"answer to {c.inputs['question']}",
        sources=lambda c: ["https://ex.org/" + "-".join(c.inputs["question"].lower().split())[:40] + "/a"],
    )


def test_budgets_waves_and_bottom_up_synthesis(engine, lm):
    search_then_finish(engine)
    engine.when("sub_questions", sub_questions=[f"Initial question {i}?" for i in range(8)])
    counter = iter(range(1000))

    def propose(call):  # always proposes three new questions, the first under q1 (a decomposed node)
        n = next(counter)
        return [
            {"question": f"Drill-down {n} into q1?", "parent_id": "q1"},
            {"question": f"Follow-up {n}a?", "parent_id": "root"},
            {"question": f"Follow-up {n}b?", "parent_id": "nonexistent"},
        ]

    engine.when("new_questions", new_questions=propose)
    budgets = Budgets(initial_questions=3, total_questions=7, steps_per_question=4)
    events: list[TreeEvent] = []
    pred = make_aet(budgets, threads=2, on_event=events.append)(question="What is the big question?")
    traj = pred.trajectory
    subs = [n for n in traj.nodes if n.id != "root"]
    assert len(subs) == 7  # never more than total_questions
    assert len([n for n in subs if n.wave == 0]) == 3  # wave 0 capped by initial_questions
    assert max(n.wave for n in subs) >= 1  # at least two waves
    assert any("budget" in note for note in traj.notes)
    # unknown parents hang under the root; q1 became decomposed and was answered after all its children
    q1 = traj.node("q1")
    assert q1.status == "decomposed"
    children = traj.children("q1")
    assert children and all(c.answered_seq is not None for c in children)
    assert q1.answered_seq > max(c.answered_seq for c in children)
    root = traj.node("root")
    assert root.answered_seq == max(n.answered_seq for n in traj.nodes if n.answered_seq)
    assert all(n.parent_id in {"root", "q1"} for n in subs)
    # the drill-down questions' evidence propagates up to q1
    assert {e.url for c in children for e in c.evidence} <= {e.url for e in q1.evidence}
    assert [e.kind for e in events][:3] == ["decompose", "wave", "reflect"] and events[-1].kind == "answer"
    assert set(traj.usage.by_stage) == {"decompose", "solve", "reflect", "synthesize", "answer"}
    assert traj.usage.searches == 7 and len([c for c in traj.tool_calls if c.kind == "search_web"]) == 7
    assert traj.usage.lm_calls == len(engine.calls)


def test_each_agent_stops_at_steps_per_question(engine, lm):
    engine.when("sub_questions", sub_questions=["Q one?", "Q two?"])
    engine.when("new_questions", new_questions=[])
    # the agent never finishes: it searches forever
    engine.when(predicate=is_react_step, next_tool_name="search_web", next_tool_args={"query": "again"})
    budgets = Budgets(initial_questions=2, total_questions=2, steps_per_question=3)
    pred = make_aet(budgets, threads=2)(question="Big question?")
    subs = [n for n in pred.trajectory.nodes if n.id != "root"]
    for node in subs:
        assert node.steps == 3
        assert node.status == "failed" and "ran out of steps (3)" in node.error
        assert len([c for c in pred.trajectory.tool_calls if c.node_id == node.id]) == 3
    steps = [c for c in engine.calls if is_react_step(c)]
    assert len(steps) == 2 * 3
    assert pred.answer  # the run went on to a final answer


def test_two_waves_when_reflection_proposes_and_none_when_it_stops(engine, lm):
    search_then_finish(engine)
    engine.when("sub_questions", sub_questions=["First?"])
    engine.when("new_questions", times=1, new_questions=[{"question": "Second?", "parent_id": "root"}])
    engine.when("new_questions", new_questions=[])
    pred = make_aet(Budgets(initial_questions=1, total_questions=10, steps_per_question=3))(question="Task?")
    waves = sorted({n.wave for n in pred.trajectory.nodes if n.id != "root"})
    assert waves == [0, 1]
    assert len(engine.calls_matching("new_questions")) == 2  # reflection ran after each wave, then stopped
    reflect_two = engine.calls_matching("new_questions")[1]
    assert "After wave 0: scripted reflection" in reflect_two.inputs["previous_reflections"]
    assert "answer to First?" in reflect_two.inputs["session_memory"]
    tree = reflect_two.inputs["research_tree"]
    assert "q1 [wave 0, answered] Q: First?" in tree and "q2 [wave 1, answered] Q: Second?" in tree


def test_repeated_questions_are_dropped(engine, lm):
    search_then_finish(engine)
    engine.when("sub_questions", sub_questions=["Who wrote Dune?", "who wrote  dune", "Who wrote Dune?"])
    engine.when("new_questions", new_questions=[{"question": "Who wrote Dune?", "parent_id": "q1"}])
    pred = make_aet(Budgets(initial_questions=5, total_questions=10, steps_per_question=3))(question="Task?")
    assert [n.id for n in pred.trajectory.nodes] == ["root", "q1"]
    assert pred.trajectory.node("q1").status == "answered"
    assert sum("repeated" in note for note in pred.trajectory.notes) == 3


def test_search_memory_answers_an_answered_question_without_the_web(engine, lm):
    engine.when("sub_questions", sub_questions=["Who wrote the novel Dune?"])
    engine.when("new_questions", times=1, new_questions=[{"question": "Which author wrote Dune?", "parent_id": "root"}])
    engine.when("new_questions", new_questions=[])
    # the wave-1 agent consults memory first and finishes from it, citing the memory entry's source
    paraphrase = "Which author wrote Dune?"
    engine.when(
        predicate=lambda c: is_react_step(c, 0) and c.inputs.get("question") == paraphrase,
        next_tool_name="search_memory",
        next_tool_args={"query": paraphrase},
    )
    engine.when(
        predicate=lambda c: is_react_step(c, 1) and c.inputs.get("question") == paraphrase, next_tool_name="finish"
    )
    engine.when(
        predicate=lambda c: is_extract(c) and c.inputs.get("question") == paraphrase,
        answer=lambda c: "Frank Herbert" if "answer to Who wrote the novel Dune?" in c.prompt else "?",
        sources=["https://ex.org/who-wrote-the-novel-dune?/a"],
    )
    search_then_finish(engine)  # q1 (and anything else) searches the web, after the q2-specific rules above
    backend = EchoSearchBackend()
    pred = make_aet(Budgets(initial_questions=1, total_questions=5, steps_per_question=4), backend=backend)(
        question="Tell me about Dune."
    )
    traj = pred.trajectory
    q2 = traj.node("q2")
    assert q2.question == paraphrase and q2.status == "answered" and q2.answer == "Frank Herbert"
    q2_calls = [c for c in traj.tool_calls if c.node_id == "q2"]
    assert [c.kind for c in q2_calls] == ["search_memory"]
    assert "answer to Who wrote the novel Dune?" in q2_calls[0].result
    assert backend.queries == ["Who wrote the novel Dune?"]  # one web search in the whole session: q1's
    assert [e.url for e in q2.evidence] == ["https://ex.org/who-wrote-the-novel-dune?/a"]


def test_unparseable_replies_fail_the_node_and_the_run_goes_on(engine, lm):
    search_then_finish(engine)
    engine.when("sub_questions", sub_questions=["Good question?", "Bad question?"])
    engine.when("new_questions", new_questions=[])
    engine.when(predicate=lambda c: c.inputs.get("question") == "Bad question?", raw="total garbage, no fields")
    pred = make_aet(Budgets(initial_questions=2, total_questions=2, steps_per_question=3), threads=2)(question="Task?")
    traj = pred.trajectory
    bad = next(n for n in traj.nodes if n.question == "Bad question?")
    good = next(n for n in traj.nodes if n.question == "Good question?")
    assert bad.status == "failed" and "AdapterParseError" in bad.error
    assert good.status == "answered"
    assert traj.node("root").answer and pred.answer and traj.error is None


def test_garbage_decomposition_falls_back_to_the_task_itself(engine, lm):
    search_then_finish(engine)
    engine.when("sub_questions", raw="garbage")
    engine.when("new_questions", new_questions=[])
    pred = make_aet(Budgets(initial_questions=3, total_questions=5, steps_per_question=3))(question="Who wrote Dune?")
    subs = [n for n in pred.trajectory.nodes if n.id != "root"]
    assert len(subs) == 1 and subs[0].question.startswith("Who wrote Dune?")
    assert any("decompose failed" in note for note in pred.trajectory.notes)


def test_threads_share_one_module_without_mixing_tool_calls(engine, lm):
    search_then_finish(engine)
    questions = [f"Parallel question number {i}?" for i in range(6)]
    engine.when("sub_questions", sub_questions=questions)
    engine.when("new_questions", new_questions=[])
    engine.delay = 0.01
    backend = EchoSearchBackend()
    aet = make_aet(Budgets(initial_questions=6, total_questions=6, steps_per_question=3), threads=4, backend=backend)
    results = {}

    def run(i):  # two whole samples in parallel on ONE module, each with parallel waves
        results[i] = aet(question=f"Sample {i}?")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for pred in results.values():
        traj = pred.trajectory
        for node in traj.nodes[1:]:
            calls = [c for c in traj.tool_calls if c.node_id == node.id]
            assert [c.args["query"] for c in calls] == [node.question]
            assert node.answer == f"answer to {node.question}"
            assert node.evidence[0].url.endswith("/a") and node.evidence[0].snippet.startswith("fact about")
        assert traj.usage.searches == 6
        assert traj.usage.by_stage["solve"].lm_calls == 6 * 3  # search, finish, extract per agent
    assert sorted(backend.queries) == sorted(questions * 2)


def test_memory_inputs_reach_their_stages(engine, lm):
    class Memory:
        def craft_knowledge(self, task_text):
            return "CRAFT: check primary sources"

        def decomposition_rules(self, task_text):
            return "RULE-D: add a question about dates"

        def web_action_rules(self, task_text):
            return "RULE-W: quote names in queries"

        def known_facts(self, task_text):
            return "FACT: Dune was published in 1965"

        def search(self, query, k=5):
            return [f"FACT-SEARCH for {query}"]

    engine.when("sub_questions", sub_questions=["When was Dune published?"])
    engine.when("new_questions", new_questions=[])
    engine.when(
        predicate=lambda c: is_react_step(c, 0), next_tool_name="search_memory", next_tool_args={"query": "Dune"}
    )
    pred = make_aet(Budgets(initial_questions=1, total_questions=1, steps_per_question=3), memory=Memory())(
        question="Dune?", context="GUIDE: prefer encyclopedias"
    )
    decompose = engine.calls_matching("sub_questions")[0]
    assert decompose.inputs["craft_knowledge"] == "CRAFT: check primary sources"
    assert decompose.inputs["decomposition_rules"] == "RULE-D: add a question about dates"
    step = next(c for c in engine.calls if is_react_step(c, 0))
    assert step.inputs["web_action_rules"] == "RULE-W: quote names in queries"
    assert step.inputs["known_facts"] == quote_data("FACT: Dune was published in 1965")  # facts are quoted data
    assert step.inputs["context"] == "GUIDE: prefer encyclopedias"  # the caller's task-level guidance only
    memory_call = next(c for c in pred.trajectory.tool_calls if c.kind == "search_memory")
    assert "FACT-SEARCH for Dune" in memory_call.result


def test_without_memory_every_memory_input_is_empty(engine, lm):
    search_then_finish(engine)
    engine.when("sub_questions", sub_questions=["Q?"])
    engine.when("new_questions", new_questions=[])
    make_aet(Budgets(initial_questions=1, total_questions=1, steps_per_question=3))(question="Task?")
    decompose = engine.calls_matching("sub_questions")[0]
    assert decompose.inputs["craft_knowledge"] == "" and decompose.inputs["decomposition_rules"] == ""
    step = next(c for c in engine.calls if is_react_step(c, 0))
    assert step.inputs["web_action_rules"] == "" and step.inputs["known_facts"] == "" and step.inputs["context"] == ""


def test_unreachable_lm_aborts_the_run_with_one_clear_error():
    dspy.configure(lm=dspy.LM("openai/x", api_base="http://127.0.0.1:9/v1", api_key="k", num_retries=0, cache=False))
    with pytest.raises(LMUnavailableError, match="unreachable"):
        make_aet(Budgets(initial_questions=1, total_questions=1, steps_per_question=2))(question="Task?")


def test_empty_question_is_refused(lm):
    with pytest.raises(EmptyQuestionError):
        make_aet(Budgets())(question="  ")


def test_predictors_have_distinct_signatures_and_state_round_trips(tmp_path, lm):
    aet = make_aet(Budgets())
    predictors = aet.named_predictors()
    names = [name for name, _ in predictors]
    assert names == [
        "decompose",
        "reflect",
        "solver.agent.react",
        "solver.agent.extract.predict",
        "synthesize",
        "answer",
    ]
    for i, (_, a) in enumerate(predictors):
        for _, b in predictors[i + 1 :]:
            assert not a.signature.equals(b.signature)
    aet.reflect.signature = aet.reflect.signature.with_instructions("Reflect harder.")
    path = tmp_path / "aet.json"
    aet.save(str(path))
    assert json.loads(path.read_text())["reflect"]["signature"]["instructions"] == "Reflect harder."
    fresh = make_aet(Budgets())
    fresh.load(str(path))
    assert fresh.reflect.signature.instructions == "Reflect harder."
    clone = copy.deepcopy(aet)
    assert clone.web is aet.web and clone.solver is not aet.solver


def test_sub_question_agent_standalone(engine, lm):
    search_then_finish(engine)
    web = WebTools(EchoSearchBackend())
    session = SessionMemory()
    session.add("n0", "Unrelated?", "nothing", [Evidence(url="https://ex.org/x")])
    out = SubQuestionAgent(max_steps=3)(question="Who wrote Dune?", web=web, session=session, node_id="n1")
    assert out.status == "answered" and out.answer == "answer to Who wrote Dune?"
    assert out.steps == 1 and [c.kind for c in out.tool_calls] == ["search_web"]
    assert out.tool_calls[0].node_id == "n1" and out.tool_calls[0].search.query == "Who wrote Dune?"
    assert web.tool_calls == []  # the web layer's own log holds only calls made through its text tools
    assert [e.url for e in out.evidence] == ["https://ex.org/who-wrote-dune?/a"]


def test_agent_drops_cited_urls_no_tool_returned(engine, lm):
    engine.when(predicate=lambda c: is_react_step(c, 0), next_tool_name="search_web", next_tool_args={"query": "dune"})
    engine.when(
        predicate=is_extract,
        answer="Frank Herbert",
        sources=["https://invented.example/page", "https://ex.org/dune/a"],
    )
    out = SubQuestionAgent(max_steps=3)(question="Who wrote Dune?", web=WebTools(EchoSearchBackend()))
    assert [e.url for e in out.evidence] == ["https://ex.org/dune/a"]
    assert "invented.example" in out.warnings[0]


def test_session_memory_search_and_render():
    memory = SessionMemory()
    memory.add("q1", "Who wrote Dune?", "Frank Herbert", [Evidence(url="https://ex.org/d", snippet="by Herbert")])
    memory.add("q2", "Where is Tacoma?", "Washington state")
    memory.add("q3", "Failed one?", "")
    assert [e.node_id for e in memory.search("the author of Dune")] == ["q1"]
    assert memory.search("the a of") == [] and memory.search("failed one") == []
    text = memory.render()
    assert "[q1] Q: Who wrote Dune?" in text and "by Herbert" in text and "Washington state" in text


def test_scripted_lm_on_own_engine_counts_calls():
    engine = ScriptedEngine()
    search_then_finish(engine)
    engine.when("sub_questions", sub_questions=["A?", "B?"])
    engine.when("new_questions", new_questions=[])
    with dspy.context(lm=scripted_lm(engine)):
        pred = make_aet(Budgets(initial_questions=2, total_questions=2, steps_per_question=2), threads=2)(
            question="Task?"
        )
    # decompose 1 + 2 agents x (2 steps + extract) + root synthesis 1 + answer 1; no reflection: budget spent
    assert pred.trajectory.usage.lm_calls == len(engine.calls) == 1 + 2 * 3 + 1 + 1
    assert engine.calls_matching("new_questions") == []
