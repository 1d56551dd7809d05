"""The task goal reaches every research stage, and ``task_text`` carries every model-visible input (issue 18, item 1).

Each research program runs under a scripted LM (DSPy's ChatAdapter renders the prompts); every prompt of every
research stage must contain the task goal (derived from the task's signature) and every input of the instance.
"""

from __future__ import annotations

import dspy
import pytest

from memento.core.config import Budgets
from memento.core.types import Trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.case_based_agent import CaseBasedAgent
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.signatures import (
    CurateMemory,
    Decompose,
    JudgeSuccess,
    JudgeTaskReward,
    PlanFromCases,
    Reflect,
    SolveSubQuestion,
    SynthesizeNode,
)
from memento.tasks import get_task
from memento.web.search_result import SearchResult
from memento.web.web_tools import WebTools

INPUTS: dict[str, dict] = {
    "multihop": {"question": "Which city was the director of Inception born in?"},
    "qa": {"question": "Who wrote the novel Dune?"},
    "legal": {"facts": "The petitioner, a state prisoner, challenged the respondent's parole rules in 1971."},
    "sales": {
        "seller": "Acme Analytics, a data-platform vendor",
        "products": "- Acme Stream: real-time ingestion\n- Acme Vault: governed storage\n- Acme Lens: dashboards",
        "customer": "Globex, a logistics company expanding into cold-chain shipping",
    },
    "opinion": {
        "question": "Are we spending too much on space exploration?",
        "options": ["Too little", "About right", "Too much"],
        "subgroup": "Political ideology: Liberal",
    },
}

#: the research stages' signatures (each takes ``task`` and ``task_goal``)
RESEARCH_SIGNATURES = (
    Decompose,
    Reflect,
    SolveSubQuestion,
    SynthesizeNode,
    PlanFromCases,
    CurateMemory,
    JudgeSuccess,
    JudgeTaskReward,
)


def _flat(text: str) -> str:
    return " ".join(str(text).split())


def _input_texts(name: str) -> list[str]:
    """Every model-visible input value of the task instance (list items one by one)."""
    out: list[str] = []
    for value in INPUTS[name].values():
        if isinstance(value, list):
            out.extend(str(v) for v in value)
        else:
            out.extend(line.lstrip("- ") for line in str(value).splitlines())
    return out


class Backend:
    def search(self, query, k=10, before=None, undated="keep"):
        return [SearchResult(url="https://ex.org/a", title=f"A about {query}", snippet="a fact")]


def web_factory(cutoff, undated):
    return WebTools(Backend(), cutoff=cutoff)


def _stage_of(call) -> str | None:
    fields = set(call.output_fields)
    if "sub_questions" in fields:
        return "decompose"
    if "new_questions" in fields:
        return "reflect"
    if "next_tool_name" in fields:
        return "solve"
    if "sub_tasks" in fields:
        return "plan"
    if "payload" in fields:
        return "curate"
    if "success" in fields:
        return "judge_success"
    if "reward" in fields:
        return "judge_reward"
    if "findings" in call.inputs and "question" in call.inputs and fields == {"answer"}:
        return "synthesize"
    return None


def _assert_goal_and_inputs(calls, task_name: str, stages: set[str]) -> None:
    task = get_task(task_name)
    goal = _flat(task.task_goal())
    seen: set[str] = set()
    for call in calls:
        stage = _stage_of(call)
        if stage is None:
            continue
        seen.add(stage)
        prompt = _flat(call.prompt)
        assert goal in prompt, f"{task_name}/{stage}: the task goal is missing from the prompt"
        for text in _input_texts(task_name):
            assert _flat(text) in prompt, f"{task_name}/{stage}: input {text!r} is missing from the prompt"
    assert stages <= seen, f"{task_name}: stages never called: {stages - seen}"


def test_task_goal_is_derived_from_the_signature():
    for name in INPUTS:
        task = get_task(name)
        goal = task.task_goal()
        assert _flat(task.signature.instructions) in _flat(goal)
        for field, info in task.signature.output_fields.items():
            assert f"- {field}" in goal
            desc = info.json_schema_extra.get("desc", "")
            if desc and desc != f"${{{field}}}":
                assert desc in goal
    legal = _flat(get_task("legal").task_goal())
    assert "which party the Court ruled for" in legal and "disposition" in legal
    assert "Do not try to identify the case" in legal
    sales = get_task("sales").task_goal()
    assert "pain_point" in sales and "mechanism" in sales and "evidence" in sales


def test_sales_task_text_carries_every_product_and_the_retrieval_key_does_not_change():
    task = get_task("sales")
    text = task.task_text(INPUTS["sales"])
    for product in ("Acme Stream", "Acme Vault", "Acme Lens"):
        assert product in text
    assert "Globex" in text and "Acme Analytics" in text
    # the key banks were built with stays what task_text used to be
    assert task.retrieval_key(INPUTS["sales"]) == (
        "Value propositions of Acme Analytics, a data-platform vendor for the customer "
        "Globex, a logistics company expanding into cold-chain shipping"
    )
    qa = get_task("qa")
    assert qa.retrieval_key(INPUTS["qa"]) == qa.task_text(INPUTS["qa"]) == INPUTS["qa"]["question"]


@pytest.mark.parametrize("task_name", sorted(INPUTS))
@pytest.mark.parametrize("signature", RESEARCH_SIGNATURES, ids=lambda s: s.__name__)
def test_chat_adapter_renders_goal_and_every_input(task_name, signature):
    """Each research signature, rendered by ChatAdapter with the call's own task text and goal."""
    task = get_task(task_name)
    program = AdaptiveExplorationTree(task, web=web_factory)
    call = program.prepare(dict(INPUTS[task_name]))
    values: dict[str, object] = {name: "" for name in signature.input_fields}
    values.update(task=call.task_text, task_goal=call.task_goal)
    for name, info in signature.input_fields.items():
        if info.annotation is int:
            values[name] = 3
    messages = dspy.ChatAdapter().format(signature, demos=[], inputs=values)
    prompt = _flat("\n".join(str(m["content"]) for m in messages))
    assert _flat(task.task_goal()) in prompt
    for text in _input_texts(task_name):
        assert _flat(text) in prompt, f"{text!r} missing"


@pytest.mark.parametrize("task_name", sorted(INPUTS))
def test_every_aet_stage_sees_the_goal_and_every_input(task_name, engine, lm):
    engine.when(predicate=lambda c: "new_questions" in c.output_fields, new_questions=[], reflection="enough")
    engine.when(
        predicate=lambda c: "sub_questions" in c.output_fields,
        sub_questions=["first sub-question about it", "second sub-question about it"],
    )
    aet = AdaptiveExplorationTree(
        task_name,
        web=web_factory,
        budgets=Budgets(initial_questions=2, total_questions=4, steps_per_question=2),
    )
    aet(**INPUTS[task_name])
    _assert_goal_and_inputs(engine.calls, task_name, {"decompose", "reflect", "solve", "synthesize"})


def test_cbr_planner_executor_and_reward_judge_see_the_goal(tmp_path, engine, lm):
    engine.when(predicate=lambda c: "sub_tasks" in c.output_fields, sub_tasks=["find Globex's cold-chain plans"])
    engine.when(predicate=lambda c: "reward" in c.output_fields, reward=0.75, reasoning="partly supported")
    agent = CaseBasedAgent(
        "sales",
        bank=CaseBank(tmp_path / "cbr", HashingEmbedder(dim=64)),
        web=web_factory,
        budgets=Budgets(initial_questions=1, total_questions=1, steps_per_question=2),
        max_cycles=1,
    )
    pred = agent(**INPUTS["sales"], task_id="t-sales")
    _assert_goal_and_inputs(engine.calls, "sales", {"plan", "solve", "judge_reward"})
    # the case is stored under the retrieval key, so banks built before stay valid
    case = agent.bank.get(pred.cbr["stored_case"])
    assert case.task_text == get_task("sales").retrieval_key(INPUTS["sales"])


def test_jitmem_curator_and_success_judge_see_the_goal(tmp_path, engine, lm):
    task = get_task("sales")
    bank = TrajectoryBank(tmp_path / "bank")
    past_key = task.retrieval_key(INPUTS["sales"])
    bank.add(Trajectory(task_text="an older sales task", retrieval_key=past_key, task_id="past"), accepted=True)
    engine.when(predicate=lambda c: "payload" in c.output_fields, payload="look at cold-chain news")
    engine.when(predicate=lambda c: "success" in c.output_fields, success=True, reasoning="fine")
    executor = AdaptiveExplorationTree(
        task, web=web_factory, budgets=Budgets(initial_questions=1, total_questions=1, steps_per_question=2)
    )
    agent = JitMemAgent(executor, bank, JitMemCurator(), k=3, task=task)
    pred = agent(**INPUTS["sales"], task_id="t-new")
    assert pred.jitmem["retrieved"] == ["past"]  # matched on the retrieval key
    _assert_goal_and_inputs(engine.calls, "sales", {"curate", "judge_success", "decompose", "solve"})
    # the new trajectory is indexed under the retrieval key too
    hits = bank.retrieve(past_key, k=5)
    assert {t.task_id for t, _, _ in hits} == {"past", "t-new"}


@pytest.mark.parametrize("stop_early", [False, True])
def test_reflection_stopping_rule_follows_budgets_stop_early(stop_early, engine, lm, monkeypatch):
    from memento.core.config import load_settings
    from memento.signatures.reflect import EXPLORE_UNTIL_BUDGET, STOP_WHEN_ESTABLISHED

    engine.when(predicate=lambda c: "new_questions" in c.output_fields, new_questions=[], reflection="enough")
    engine.when(predicate=lambda c: "sub_questions" in c.output_fields, sub_questions=["one sub-question"])
    if stop_early:
        monkeypatch.setenv("MEMENTO_BUDGETS_STOP_EARLY", "true")
    budgets = load_settings().budgets.model_copy(update={"initial_questions": 1, "total_questions": 3})
    assert budgets.stop_early is stop_early  # default off; the environment (or TOML, or a flag) turns it on
    aet = AdaptiveExplorationTree("multihop", web=web_factory, budgets=budgets)
    aet(question="Which city was the director of Inception born in?")
    reflect_calls = [c for c in engine.calls if "new_questions" in c.output_fields]
    assert reflect_calls
    rule = _flat(reflect_calls[0].inputs["stopping_rule"])
    assert rule == _flat(STOP_WHEN_ESTABLISHED if stop_early else EXPLORE_UNTIL_BUDGET)
    assert ("Explore until the question budget is spent" in rule) is not stop_early
    notes = " ".join(aet(question="Where was the author of Dune born?").trajectory.notes)
    assert ("proposed no new sub-question with 2 of the budget left" in notes) is not stop_early
