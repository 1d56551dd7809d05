"""Typed hand-offs on the trajectory: CBR and JitMem details are typed fields (no ContextVar, no JSON in notes)."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import dspy

import memento.programs.case_based_agent as case_based_agent
from memento.core.types import CBRDetails, JitMemDetails, Plan, PlanStep, Trajectory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from programs.test_case_based_agent import make_agent, script  # noqa: E402


def _no_json_notes(trajectory: Trajectory) -> None:
    for note in trajectory.notes:
        for start in (i for i, ch in enumerate(note) if ch == "{"):
            try:
                json.loads(note[start:])
            except ValueError:
                continue
            raise AssertionError(f"JSON inside a trajectory note: {note}")


def test_cbr_details_are_a_typed_trajectory_field_without_a_contextvar(tmp_path, engine, lm):
    assert "ContextVar" not in inspect.getsource(case_based_agent)
    script(engine)
    example = dspy.Example(question="Who founded the city where the Louvre is?", answers=["Paris"])
    agent = make_agent(tmp_path, reward_fn=lambda ex, pred: float(pred.answer in ex.answers))
    pred = agent(question=example.question, answers=example.answers)  # labels reach the reward metric
    details = pred.trajectory.cbr
    assert isinstance(details, CBRDetails)
    assert details.reward == 1.0 and details.reward_source == "metric" and details.stored_case
    assert details.plan.startswith("1. [cycle 1]") and pred.cbr["stored_case"] == details.stored_case
    # the plan is a typed record; the text a case stores is its rendering
    assert details.plan_steps and all(isinstance(step, PlanStep) for step in details.plan_steps)
    assert [step.sub_task for step in details.plan_steps] == [n.question for n in pred.trajectory.nodes[1:]]
    assert {step.outcome for step in details.plan_steps} <= {"answered", "failed"}
    assert details.plan == Plan(steps=details.plan_steps).render()
    assert agent.bank.get(details.stored_case).plan == details.plan
    again = Trajectory.model_validate_json(pred.trajectory.model_dump_json())
    assert again.cbr == details
    _no_json_notes(pred.trajectory)
    second = agent(question="Who founded the city where the Louvre stands today?")
    assert second.trajectory.cbr.retrieved == [details.stored_case]


def test_jitmem_details_are_a_typed_trajectory_field(tmp_path, engine, lm):
    engine.when("You are a memory curator", payload="PAYLOAD")
    engine.when("You are judging whether an agent", success=True, reasoning="supported")
    agent = JitMemAgent(ClosedBook("qa"), TrajectoryBank(tmp_path / "bank"), JitMemCurator())
    first = agent(question="Who founded the Roman colony of Lyon?", task_id="a")
    second = agent(question="Who founded the Roman colony of Lyon in Gaul?", task_id="b")
    assert isinstance(first.trajectory.jitmem, JitMemDetails) and first.trajectory.jitmem.stored
    details = second.trajectory.jitmem
    assert details.retrieved == ["a"] and len(details.scores) == 1 and details.payload_chars > 0
    stored = dict((t.task_id, t) for t, _ in agent.bank.iter_all())["a"]
    assert stored.jitmem is not None and stored.jitmem.retrieved == []  # the bank keeps the typed field
    _no_json_notes(second.trajectory)
