"""JitMemAgent, JitMemCurator and the stream protocol with a scripted LM."""

from __future__ import annotations

import dspy
import pytest

from memento.core.types import Node, ToolCall, Trajectory
from memento.llm.lm import Roles
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent, build_jitmem
from memento.programs.jitmem_curator import (
    NO_TRAJECTORIES,
    PAYLOAD_LABEL,
    JitMemCurator,
    TrajectoryDistiller,
    clip_to_tokens,
    estimate_tokens,
    render_trajectory,
)
from memento.programs.research_program import EmptyQuestionError
from memento.testing import ScriptedEngine, scripted_lm

CURATOR = "You are a memory curator"
JUDGE = "You are judging whether an agent"
PAST = "Which Roman general founded the colony of Lugdunum (Lyon)?"


def _past(task_text: str = PAST, *, task_id: str = "past-1") -> Trajectory:
    return Trajectory(
        task_id=task_id,
        task_text=task_text,
        inputs={"question": task_text},
        method="react",
        nodes=[Node(id="n1", question="Who founded Lugdunum?", answer="Lucius Munatius Plancus", status="answered")],
        tool_calls=[
            ToolCall(kind="search_web", args={"query": "Lugdunum founder"}, result="Plancus founded it in 43 BC"),
        ],
        prediction={"answer": "Lucius Munatius Plancus", "sources": ["https://en.wikipedia.org/wiki/Lugdunum"]},
    )


def _curator_payload(call) -> str:
    return f"PAYLOAD for <{call.inputs.get('task', 'no task')}>"


@pytest.fixture
def scripted(engine: ScriptedEngine, lm):
    engine.when(CURATOR, payload=_curator_payload)
    engine.when(JUDGE, success=True, reasoning="supported")
    return engine


def _agent(tmp_path, **kwargs) -> JitMemAgent:
    bank = kwargs.pop("bank", None) or TrajectoryBank(tmp_path / "bank", policy=kwargs.pop("policy", "success_only"))
    return JitMemAgent(ClosedBook("qa"), bank, kwargs.pop("curator", None) or JitMemCurator(), **kwargs)


def test_same_trajectory_gives_task_specific_payloads(tmp_path, scripted):
    agent = _agent(tmp_path, store=False)
    agent.bank.add(_past(), accepted=True)
    tasks = ["When was the Roman colony of Lugdunum founded?", "Which river flows through Lugdunum (Lyon)?"]
    preds = [agent(question=q) for q in tasks]

    assert [p.jitmem["retrieved"] for p in preds] == [["past-1"], ["past-1"]]
    curator_calls = scripted.calls_matching(CURATOR)
    assert len(curator_calls) == 2
    for task, call in zip(tasks, curator_calls, strict=True):
        assert task in call.prompt  # the curator is conditioned on the task
        assert PAST in call.prompt and "Plancus founded it in 43 BC" in call.prompt  # ...and reads the raw record
    payloads = [c.outputs["payload"] for c in curator_calls]
    assert payloads[0] != payloads[1]
    # the executor read its own task's payload as context, once
    answer_calls = [c for c in scripted.calls if "PAYLOAD for" in c.inputs.get("context", "")]
    label = "Curated notes from similar past tasks:\n"
    assert [c.inputs["context"] for c in answer_calls] == [label + p for p in payloads]
    assert preds[0].jitmem["payload_tokens"] == estimate_tokens(payloads[0])
    assert any(n.startswith("jitmem: retrieved 1 trajectories ['past-1']") for n in preds[0].trajectory.notes)
    assert preds[0].trajectory.method == "jitmem[closed_book]"


def test_rejected_trajectory_never_enters_success_only_bank(tmp_path, engine, lm):
    engine.when(CURATOR, payload="p")
    engine.when(JUDGE, success=False, reasoning="unsupported answer")
    agent = _agent(tmp_path)
    pred = agent(question="What is the capital of Burkina Faso?", task_id="t1")
    assert pred.jitmem["accepted"] is False and pred.jitmem["stored"] is False
    assert len(agent.bank) == 0 and agent.bank.stats().dropped == 1
    assert agent.bank.retrieve("capital of Burkina Faso", k=3) == []
    assert any("judge rejected (unsupported answer)" in n for n in pred.trajectory.notes)
    assert len(engine.calls_matching(JUDGE)) == 1
    assert pred.trajectory.usage.judge_calls == 0  # no roles given: the judge is the executor's own LM


def test_accepted_trajectory_is_stored_without_the_payload(tmp_path, scripted):
    agent = _agent(tmp_path)
    agent.bank.add(_past(), accepted=True)
    pred = agent(question="When was Lugdunum founded?", task_id="t2")
    assert pred.jitmem == {
        "retrieved": ["past-1"],
        "payload_chars": len("PAYLOAD for <When was Lugdunum founded?>"),
        "payload_tokens": estimate_tokens("PAYLOAD for <When was Lugdunum founded?>"),
        "raw_tokens": pred.jitmem["raw_tokens"],
        "accepted": True,
        "stored": True,
    }
    stored = agent.bank.get("t2")[0]
    assert "PAYLOAD" not in stored.model_dump_json()  # consumed once, never stored
    assert stored.prediction["answer"] == pred.answer


def test_all_with_labels_shows_labels_to_the_curator(tmp_path, scripted):
    agent = _agent(tmp_path, policy="all_with_labels", store=False)
    agent.bank.add(_past(task_id="fail"), accepted=False)
    agent(question="Who founded Lugdunum (Lyon)?")
    assert "Outcome (judge): failure" in scripted.calls_matching(CURATOR)[0].prompt


def test_roles_route_curator_and_judge(tmp_path):
    main, curator_engine, judge_engine = ScriptedEngine(), ScriptedEngine(), ScriptedEngine()
    judge_engine.when(JUDGE, success=True)
    roles = Roles(
        lm=scripted_lm(main),
        judge_lm=scripted_lm(judge_engine),
        reflection_lm=scripted_lm(ScriptedEngine()),
        curator_lm=scripted_lm(curator_engine),
    )
    dspy.configure(lm=roles.lm)
    agent = _agent(tmp_path, roles=roles)
    agent.bank.add(_past(), accepted=True)
    pred = agent(question="Who founded Lugdunum?", task_id="t3")
    assert len(curator_engine.calls_matching(CURATOR)) == 1 and len(judge_engine.calls_matching(JUDGE)) == 1
    assert not main.calls_matching(CURATOR) and not main.calls_matching(JUDGE)
    usage = pred.trajectory.usage
    assert usage.judge_calls == 1 and usage.lm_calls == 3
    assert set(usage.by_role) == {"lm", "judge_lm", "curator_lm"}


def test_no_task_conditioning_ablation(tmp_path, scripted):
    agent = _agent(tmp_path, curator=JitMemCurator(task_conditioning=False), store=False)
    agent.bank.add(_past(), accepted=True)
    task = "Which emperor was born in Lugdunum?"
    agent(question=task)
    call = scripted.calls_matching("You do not know the agent's next task")[0]
    assert task not in call.prompt and PAST in call.prompt


def test_no_retrieval_ablation_curates_from_an_empty_set(tmp_path, scripted):
    agent = _agent(tmp_path, retrieval=False, store=False)
    agent.bank.add(_past(), accepted=True)
    pred = agent(question="Who founded Lugdunum?")
    call = scripted.calls_matching(CURATOR)[0]
    assert NO_TRAJECTORIES in call.prompt and PAST not in call.prompt
    assert pred.jitmem["retrieved"] == []


def test_empty_bank_skips_the_curator(tmp_path, scripted):
    pred = _agent(tmp_path, store=False)(question="Who founded Lugdunum?")
    assert not scripted.calls_matching(CURATOR) and pred.jitmem["payload_chars"] == 0


def test_write_time_distillation_ablation(tmp_path, scripted):
    scripted.when("summarising a research agent's completed run", distillate="DISTILLED: Plancus, 43 BC")
    agent = _agent(tmp_path, distiller=TrajectoryDistiller())
    agent(question="Who founded Lugdunum?", task_id="t4")
    stored = agent.bank.get("t4")[0]
    assert stored.nodes == [] and stored.tool_calls == []
    assert stored.notes == ["Distilled at write time: DISTILLED: Plancus, 43 BC"]
    agent.store = False
    agent(question="Who founded the colony Lugdunum?")
    assert "DISTILLED: Plancus, 43 BC" in scripted.calls_matching(CURATOR)[-1].prompt


def test_curator_and_judge_failures_do_not_lose_the_run(tmp_path, engine, lm):
    engine.when(CURATOR, raw="no fields here at all")
    engine.when(JUDGE, raw="garbage")
    agent = _agent(tmp_path)
    agent.bank.add(_past(), accepted=True)
    pred = agent(question="Who founded Lugdunum?", task_id="t5")
    assert pred.answer  # the executor still ran
    assert pred.jitmem["payload_chars"] == 0 and pred.jitmem["accepted"] is False
    assert any("curator failed" in n for n in pred.trajectory.notes)
    assert agent.bank.get("t5") == []
    with pytest.raises(EmptyQuestionError):
        agent(question="  ")


def test_render_trajectory_clips_in_order_keeping_task_and_answer():
    trajectory = _past()
    trajectory.tool_calls = [
        ToolCall(kind="scrape", args={"url": f"https://e.org/{i}"}, result="x" * 500) for i in range(40)
    ]
    full = render_trajectory(trajectory, label=True, max_tokens=None)
    clipped = render_trajectory(trajectory, label=True, max_tokens=300)
    assert len(clipped) <= 300 * 4 < len(full)
    assert PAST in clipped and "Final answer: answer: Lucius Munatius Plancus" in clipped
    assert "more lines clipped" in clipped and "Outcome (judge): success" in clipped
    lines = clipped.splitlines()
    assert lines.index("Steps:") < lines.index("Tool calls:")
    assert clipped.index("https://e.org/0") < clipped.index("https://e.org/1")


def test_jitmem_builder_and_registry(tmp_path, scripted):
    from memento.core.config import load_settings
    from memento.programs.registry import method_names

    assert "jitmem" in method_names()
    agent = build_jitmem(
        task=ClosedBook("qa").task, settings=load_settings(), roles=None, memory_dir=tmp_path, executor="closed_book"
    )
    assert isinstance(agent, JitMemAgent) and agent.k == 3 and agent.bank.directory == tmp_path / "jitmem"
    assert agent(question="Who founded Lugdunum?").jitmem["stored"] is True


class _PlainExecutor(dspy.Module):
    """A DSPy module with no trajectory of its own (any program taking ``context`` can be the executor)."""

    def __init__(self) -> None:
        super().__init__()
        self.task = ClosedBook("qa").task
        self.answer = dspy.Predict("context, question -> answer")

    def forward(self, question, context="", **_control):
        return self.answer(context=context, question=question)


def test_plain_module_executor_gets_a_recorded_trajectory(tmp_path, scripted):
    agent = JitMemAgent(_PlainExecutor(), TrajectoryBank(tmp_path / "bank"), JitMemCurator())
    agent.bank.add(_past(), accepted=True)
    pred = agent(question="Who founded Lugdunum?", task_id="plain")
    stored = agent.bank.get("plain")[0]
    assert stored.prediction == {"answer": pred.answer, "sources": None}
    assert stored.method == "jitmem[_PlainExecutor]" and stored.task_text == "Who founded Lugdunum?"
    assert pred.trajectory.usage.lm_calls == 3  # curator, executor, judge


def test_curator_payload_keeps_its_budget_and_is_labelled_for_the_executor(tmp_path, engine, lm):
    long_payload = "\n".join(
        f"- note {i}: search the archive of source {i} and verify the date twice" for i in range(400)
    )
    engine.when(CURATOR, payload=long_payload)
    engine.when(JUDGE, success=True, reasoning="ok")
    agent = _agent(tmp_path, store=False, curator=JitMemCurator(payload_tokens=150))
    agent.bank.add(_past(), accepted=True)
    pred = agent(question="When was the Roman colony of Lugdunum founded?")
    assert estimate_tokens(long_payload) > 150 * 10
    assert 100 < pred.jitmem["payload_tokens"] <= 150  # clipped to the budget, not emptied
    (executor_call,) = [c for c in engine.calls if "question" in c.inputs and CURATOR not in c.prompt]
    context = executor_call.inputs["context"]
    assert context.startswith(PAYLOAD_LABEL + ":\n- note 0:") and context.endswith("clipped to the payload budget]")
    assert estimate_tokens(context) <= 150 + estimate_tokens(PAYLOAD_LABEL) + 1
    # the curator's prompt warns that past answers are other tasks' and only judged by an LLM
    (curator_call,) = engine.calls_matching(CURATOR)
    assert "belong to other tasks" in curator_call.prompt and "LLM judge" in curator_call.prompt


def test_clip_to_tokens_cuts_at_a_line_and_leaves_short_text_alone():
    assert clip_to_tokens("short notes", 10) == "short notes"
    text = "\n".join(f"line {i} " + "x" * 30 for i in range(50))
    clipped = clip_to_tokens(text, 60)
    assert estimate_tokens(clipped) <= 60 and clipped.endswith("clipped to the payload budget]")
    body = clipped.rsplit("\n[...", 1)[0]
    assert text.startswith(body) and body.splitlines()[-1] in text.splitlines()  # whole lines only


def test_jitmem_builder_reads_the_jitmem_settings(tmp_path, scripted):
    from memento.core.config import load_settings

    settings = load_settings(flags={"jitmem": {"k": 5, "payload_tokens": 300, "executor": "closed_book"}})
    agent = build_jitmem(task=ClosedBook("qa").task, settings=settings, roles=None, memory_dir=tmp_path)
    assert agent.k == 5 and agent.curator.payload_tokens == 300 and type(agent.executor).__name__ == "ClosedBook"
