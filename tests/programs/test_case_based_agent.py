"""CaseBasedAgent end to end on the multihop task with a scripted LM: plan from cases, execute, replan, answer,
retain (metric reward when training, judge reward when deployed), Q-gate pairs, executor-level bank, registry."""

from __future__ import annotations

import copy

import dspy
import pytest

from memento.core.config import Budgets, load_settings
from memento.core.errors import ConfigError
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.programs.case_based_agent import CaseBasedAgent, render_cases
from memento.tasks import get_task
from memento.testing import EchoSearchBackend, react_steps_done
from memento.web.web_tools import WebTools


def _is_planner(call) -> bool:
    return "sub_tasks" in call.output_fields


def script(engine, *, answer="Paris") -> None:
    """Planner: two sub-tasks, then one more after seeing progress, then done. Executor: search once, finish.
    Final answer: ``answer``. Judge: 0.5."""
    engine.when(
        predicate=lambda c: _is_planner(c) and not c.inputs.get("progress", "").strip(),
        sub_tasks=lambda c: [f"Find the bridge entity of: {c.inputs['task'][:40]}", "Find the capital city"],
        done=False,
    )
    engine.when(predicate=_is_planner, sub_tasks=["Confirm the capital city with a second source"], done=True)
    engine.when(
        predicate=lambda c: "next_tool_name" in c.output_fields and react_steps_done(c) == 0,
        next_tool_name="search_web",
        next_tool_args=lambda c: {"query": c.inputs["question"]},
    )
    engine.when(
        predicate=lambda c: "sources" in c.output_fields and "next_thought" not in c.output_fields,
        answer=lambda c: f"result for {c.inputs['question'][:30]}",
        sources=lambda c: ["https://ex.org/" + "-".join(c.inputs["question"].lower().split())[:40] + "/a"],
    )
    engine.when(predicate=lambda c: "research_findings" in c.inputs, answer=answer)
    engine.when(predicate=lambda c: "reward" in c.output_fields, reward=0.5, reasoning="half supported")


def make_agent(tmp_path, *, backend=None, **kwargs) -> CaseBasedAgent:
    backend = backend or EchoSearchBackend()
    bank = kwargs.pop("bank", None) or CaseBank(tmp_path / "cbr", HashingEmbedder(dim=128))
    return CaseBasedAgent(
        get_task("multihop"),
        bank=bank,
        web=lambda cutoff, undated: WebTools(backend, cutoff=cutoff),
        budgets=Budgets(initial_questions=3, total_questions=6, steps_per_question=3),
        threads=2,
        **kwargs,
    )


def test_end_to_end_training_writes_cases_with_metric_rewards(tmp_path, engine, lm):
    script(engine, answer="Paris")
    task = get_task("multihop")
    agent = make_agent(tmp_path, reward_fn=task.metric, k=4)
    good = dspy.Example(question="What is the capital of the country where the Eiffel Tower is?", answers=["Paris"])
    bad = dspy.Example(question="What is the capital of the country where the Colosseum is?", answers=["Rome"])

    p1 = agent(**good, task_id="t-good")
    assert p1.answer == "Paris"
    traj = p1.trajectory
    subs = [n for n in traj.nodes if n.id != "root"]
    assert [n.wave for n in subs] == [0, 0, 1]  # two planning cycles: 2 sub-tasks, then 1 more, then done
    assert all(n.status == "answered" and n.evidence for n in subs)
    assert traj.usage.searches == 3
    assert {"plan", "solve", "answer"} <= set(traj.usage.by_stage)
    assert "judge_reward" not in traj.usage.by_stage  # training: the metric gives the reward, no judge call
    assert p1.cbr["reward"] == 1.0 and p1.cbr["reward_source"] == "metric" and p1.cbr["retrieved"] == []
    case1 = agent.bank.get(p1.cbr["stored_case"])
    assert case1.reward == 1.0 and case1.trajectory_ref == "t-good"
    assert "Find the capital city" in case1.plan and "[cycle 2]" in case1.plan

    p2 = agent(**bad, task_id="t-bad")
    assert p2.cbr["reward"] == 0.0 and p2.cbr["retrieved"] == [case1.id]
    first_plan_call = next(c for c in engine.calls if _is_planner(c) and "Colosseum" in c.inputs["task"])
    assert "[SUCCESS, reward 1.00]" in first_plan_call.inputs["past_cases"]
    assert "Eiffel Tower" in first_plan_call.inputs["past_cases"]

    p3 = agent(question="Capital of the country of the Leaning Tower of Pisa?", answers=["Rome"], task_id="t3")
    assert set(p3.cbr["retrieved"]) == {case1.id, p2.cbr["stored_case"]}
    third = next(c for c in engine.calls if _is_planner(c) and "Pisa" in c.inputs["task"])
    assert "[FAILURE, reward 0.00]" in third.inputs["past_cases"]  # failures are shown, labelled
    # the Q-gate logged (query, retrieved case, reward) pairs and learned online from them
    pairs = agent.bank.logged_pairs()
    assert list(pairs["reward"]) == [0.0, 0.0, 0.0]  # call 2 (reward 0): 1 pair; call 3 (reward 0): 2 pairs
    assert agent.bank.gate.updates == 2
    assert [c.reward for c in agent.bank.cases()] == [1.0, 0.0, 0.0]

    # a bank reloaded from disk gives identical retrievals
    before = [(c.id, round(s, 6)) for c, s in agent.bank.retrieve(good.question, k=4)]
    before_q = [(c.id, round(s, 6)) for c, s in agent.bank.retrieve(good.question, k=4, policy="q")]
    agent.bank.close()
    reloaded = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=128))
    assert [(c.id, round(s, 6)) for c, s in reloaded.retrieve(good.question, k=4)] == before
    assert [(c.id, round(s, 6)) for c, s in reloaded.retrieve(good.question, k=4, policy="q")] == before_q


def test_deployed_reward_comes_from_the_judge_and_own_cases_are_never_retrieved(tmp_path, engine, lm):
    script(engine)
    agent = make_agent(tmp_path)
    p1 = agent(question="Which river flows through the capital of France?", task_id="same-task")
    assert p1.cbr["reward_source"] == "judge" and p1.cbr["reward"] == 0.5
    assert "judge_reward" in p1.trajectory.usage.by_stage
    judge_call = next(c for c in engine.calls if "reward" in c.output_fields)
    assert "Find the capital city" in judge_call.inputs["plan"] and "Sources:" in judge_call.inputs["findings"]
    assert agent.bank.get(p1.cbr["stored_case"]).reward == 0.5
    # the same task id again: its own earlier case is excluded
    p2 = agent(question="Which river flows through the capital of France?", task_id="same-task")
    assert p2.cbr["retrieved"] == []
    p3 = agent(question="Which river flows through the capital of France?", task_id="other-task")
    assert len(p3.cbr["retrieved"]) == 2


def test_retain_false_then_explicit_retain_and_frozen_style_runs(tmp_path, engine, lm):
    script(engine)
    agent = make_agent(tmp_path, retain=False)
    example = dspy.Example(question="Who founded the city where the Louvre is?", answers=["Parisii"]).with_inputs(
        "question"
    )
    pred = agent(**example.inputs())
    assert len(agent.bank) == 0 and "reward" not in pred.cbr
    assert not any("reward" in c.output_fields for c in engine.calls)  # no judge when not retaining
    case = agent.retain(example, pred, 0.25)
    assert agent.bank.get(case.id).reward == 0.25 and pred.cbr["stored_case"] == case.id
    with pytest.raises(ConfigError, match="CaseBasedAgent"):
        agent.retain(example, dspy.Prediction(answer="x"), 1.0)


def test_planner_failure_falls_back_to_the_task_itself(tmp_path, engine, lm):
    engine.when(predicate=_is_planner, raw="this is not a parseable reply")  # first matching rule wins
    script(engine)
    pred = make_agent(tmp_path)(question="What year was the Louvre pyramid finished?")
    subs = [n for n in pred.trajectory.nodes if n.id != "root"]
    assert [n.question for n in subs] == ["What year was the Louvre pyramid finished?"]
    assert any("planner failed" in note for note in pred.trajectory.notes)
    assert pred.cbr["stored_case"] is not None


def test_executor_level_bank_shows_past_tool_use(tmp_path, engine, lm):
    script(engine)
    tools = CaseBank(tmp_path / "tools", HashingEmbedder(dim=128))
    agent = make_agent(tmp_path, executor_bank=tools, executor_k=2)
    agent(question="What is the capital of the country where the Eiffel Tower is?")
    assert len(tools) == 3
    stored = tools.cases()[0]
    assert stored.reward == 1.0 and stored.plan.startswith("search_web(query=")
    n_before = len(engine.calls)
    agent(question="What is the capital of the country where the Colosseum is?")
    executor_calls = [c for c in engine.calls[n_before:] if "next_tool_name" in c.output_fields]
    assert executor_calls and all("Tool use on similar past sub-tasks" in c.inputs["context"] for c in executor_calls)
    assert len(tools) == 6


def test_executor_bank_labels_follow_the_configured_success_threshold(tmp_path, engine, lm):
    """A stored tool case is labelled answered only when its reward is strictly above ``success_threshold``."""
    script(engine)
    tools = CaseBank(tmp_path / "tools", HashingEmbedder(dim=128))
    tools.add("Find the capital city", "search_web(query='capital') -> 2 urls", reward=0.6)
    agent = make_agent(tmp_path, executor_bank=tools, executor_k=1, success_threshold=0.7, retain=False)
    agent(question="What is the capital of the country where the Eiffel Tower is?")
    shown = [c.inputs["context"] for c in engine.calls if "next_tool_name" in c.output_fields]
    assert any("Sub-task: Find the capital city\nOutcome: failed" in text for text in shown)
    assert not any("Outcome: answered" in text for text in shown)


def test_render_cases_labels_and_deepcopy_shares_the_bank(tmp_path):
    bank = CaseBank(tmp_path, HashingEmbedder(dim=32))
    ok = bank.add("task a", "1. step", reward=1.0)
    bad = bank.add("task b", "1. other", reward=0.0)
    text = render_cases([(ok, 0.9), (bad, 0.8)])
    assert "Case 1 [SUCCESS, reward 1.00]" in text and "Case 2 [FAILURE, reward 0.00]" in text
    agent = CaseBasedAgent("multihop", bank=bank, web=lambda c, u: None)
    clone = copy.deepcopy(agent)
    assert clone.bank is bank and clone.planner is not agent.planner
    with pytest.raises(ConfigError, match="policy"):
        CaseBasedAgent("multihop", bank=bank, web=lambda c, u: None, policy="best")  # type: ignore[arg-type]


def test_registry_builds_cbr_with_a_bank_under_memory_dir(tmp_path):
    from memento.programs.registry import build_program

    settings = load_settings(flags={"memory": {"dir": str(tmp_path)}, "web": {"backend": "offline"}})
    agent = build_program("cbr", task="multihop", settings=settings)
    assert isinstance(agent, CaseBasedAgent)
    assert agent.bank.dir == tmp_path / "cbr" and agent.k == 4 and agent.policy == "softmax"  # training explores


def test_frozen_bank_needs_retain_false(tmp_path, engine, lm):
    script(engine)
    CaseBank(tmp_path / "cbr", HashingEmbedder(dim=128)).add("Capital of France?", "1. search", reward=1.0)
    frozen = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=128), frozen=True)
    with pytest.raises(ConfigError, match="retain=False"):
        make_agent(tmp_path, bank=frozen)
    pred = make_agent(tmp_path, bank=frozen, retain=False)(question="What is the capital of France?")
    assert len(pred.cbr["retrieved"]) == 1 and len(frozen) == 1


def test_executor_bank_never_shows_a_task_its_own_tool_cases(tmp_path, engine, lm):
    script(engine)
    tools = CaseBank(tmp_path / "tools", HashingEmbedder(dim=128))
    agent = make_agent(tmp_path, executor_bank=tools, executor_k=2)
    question = "What is the capital of the country where the Eiffel Tower is?"
    agent(question=question, task_id="t-eiffel")  # cycle 2's sub-task runs after cycle 1 stored 2 tool cases
    assert len(tools) == 3
    n_before = len(engine.calls)
    agent(question=question, task_id="t-eiffel")  # the same task again: all stored tool cases are its own
    executor_calls = [c for c in engine.calls if "next_tool_name" in c.output_fields]
    assert executor_calls and all(
        "Tool use on similar past sub-tasks" not in c.inputs["context"] for c in executor_calls
    )
    assert len(engine.calls) > n_before
    agent(question=question, task_id="t-other")  # another task does see them
    later = [c for c in engine.calls[n_before:] if "next_tool_name" in c.output_fields]
    assert any("Tool use on similar past sub-tasks" in c.inputs["context"] for c in later)


def test_fit_cases_runs_passes_over_the_same_tasks_and_own_cases_is_an_explicit_switch(tmp_path, engine, lm):
    from memento.programs.case_based_agent import fit_cases

    script(engine, answer="Paris")
    task = get_task("multihop")
    examples = [
        dspy.Example(
            question="What is the capital of the country where the Eiffel Tower is?", answers=["Paris"], id="a"
        ),
        dspy.Example(question="What is the capital of the country where the Colosseum is?", answers=["Rome"], id="b"),
    ]
    agent = make_agent(tmp_path, reward_fn=task.metric, k=4, policy="cosine")
    passes = fit_cases(agent, examples, batch_size=1, passes=2)
    assert [p.index for p in passes] == [1, 2] and [p.rewards for p in passes] == [[1.0, 0.0], [1.0, 0.0]]
    assert [p.score for p in passes] == [0.5, 0.5]
    assert [b["cases"] for b in passes[0].batches + passes[1].batches] == [1, 2, 3, 4]
    # off by default: the second pass of task "a" read only task "b"'s cases, never its own
    planner_calls = [
        c for c in engine.calls if _is_planner(c) and "Eiffel" in c.inputs["task"] and c.inputs["past_cases"]
    ]
    assert planner_calls and all("Eiffel" not in c.inputs["past_cases"] for c in planner_calls)
    assert agent.own_cases is False

    engine.calls.clear()
    fit_cases(agent, examples[:1], batch_size=1, passes=1, own_cases=True)
    first = next(c for c in engine.calls if _is_planner(c) and "Eiffel" in c.inputs["task"])
    assert "Eiffel" in first.inputs["past_cases"]  # with the switch on, its own earlier cases are readable
    assert agent.own_cases is False  # the switch does not outlive the runner


def test_planner_runs_on_its_own_role_when_one_is_configured(tmp_path, engine, lm):
    from memento.llm.lm import Roles
    from memento.testing import ScriptedEngine, scripted_lm

    script(engine, answer="Paris")
    planner_engine = ScriptedEngine()
    script(planner_engine, answer="Paris")
    roles = Roles(lm=lm, judge_lm=lm, reflection_lm=lm, curator_lm=lm, planner_lm=scripted_lm(planner_engine))
    agent = make_agent(tmp_path, reward_fn=get_task("multihop").metric, roles=roles)
    pred = agent(question="Capital of the country where the Eiffel Tower is?", answers=["Paris"], task_id="t1")
    assert [c for c in planner_engine.calls if _is_planner(c)] and not [c for c in engine.calls if _is_planner(c)]
    assert pred.trajectory.usage.by_role["planner_lm"].lm_calls == len(planner_engine.calls)
    assert "planner_lm" in pred.trajectory.usage.by_role and "lm" in pred.trajectory.usage.by_role
    # a role map without a planner (built by hand) plans on lm; configured settings default planner_lm to lm's model
    assert [name for name, _ in Roles(lm=lm, judge_lm=lm, reflection_lm=lm, curator_lm=lm).items()] == [
        "lm",
        "judge_lm",
        "reflection_lm",
        "curator_lm",
    ]
    settings = load_settings(flags={"lm": {"model": "openai/a"}})
    assert settings.role("planner_lm").model == "openai/a"
    assert load_settings(flags={"lm": {"model": "openai/a"}, "planner_lm": "openai/b"}).role("planner_lm").model == (
        "openai/b"
    )
