"""optimize_curator: GEPA and MIPROv2 tune the curator's instructions only, on the executor's task reward."""

from __future__ import annotations

import dspy
import pytest

from memento.core.errors import ConfigError
from memento.core.types import Trajectory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.optimize.curator_optimizer import CuratorUnderTraining, feedback_metric, optimize_curator
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator

BETTER = "ALWAYS CITE the founding date found in past runs"


def _script(engine) -> None:
    # the curator writes useful guidance only under the improved instructions; the executor answers right only then
    engine.when(predicate=lambda c: "payload" in c.output_fields and BETTER in c.system, payload="good guidance")
    engine.when(predicate=lambda c: "payload" in c.output_fields, payload="bad guidance")
    engine.when(predicate=lambda c: "good guidance" in c.inputs.get("context", ""), answer="right", sources=[])
    engine.when(predicate=lambda c: "answer" in c.output_fields, answer="wrong", sources=[])
    engine.overrides.update({"new_instruction": BETTER, "proposed_instruction": BETTER})


calls: list[str] = []


def _metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    calls.append(example.question)
    ok = pred.answer == "right"
    return dspy.Prediction(score=float(ok), feedback="correct" if ok else "the payload did not give the founding date")


@pytest.fixture
def agent(tmp_path, engine, lm):
    _script(engine)
    bank = TrajectoryBank(tmp_path / "bank")
    for i, city in enumerate(["Lyon", "Paris", "Marseille", "Nice"]):
        bank.add(
            Trajectory(task_id=f"past-{i}", task_text=f"When was {city} founded?", prediction={"answer": "long ago"}),
            accepted=True,
        )
    executor = ClosedBook("qa")
    agent = JitMemAgent(executor, bank, JitMemCurator(), judge=False)
    agent.executor_instructions = executor.answer.signature.instructions
    return agent


def _trainset() -> list[dspy.Example]:
    cities = ["Lyon", "Paris", "Marseille", "Nice"]
    return [dspy.Example(question=f"In which year was {c} founded?", id=f"train-{i}") for i, c in enumerate(cities)]


def test_only_the_curator_is_trainable(agent):
    student = CuratorUnderTraining(agent)
    assert [name for name, _ in student.named_predictors()] == ["curator.curate"]
    copy = student.deepcopy()
    assert copy.agent is agent and copy.agent.bank is agent.bank and copy.curator is not student.curator


def test_gepa_improves_curator_instructions_within_budget(agent, engine):
    calls.clear()
    before = len(agent.bank)
    old = agent.curator
    curator = optimize_curator(agent, _trainset(), _metric, optimizer="gepa", budget=16, reflection_lm=None)
    assert BETTER in curator.curate.signature.instructions
    assert agent.curator is curator and old.curate.signature.instructions != curator.curate.signature.instructions
    assert agent.executor.answer.signature.instructions == agent.executor_instructions  # the executor is frozen
    assert 0 < len(calls) <= 16 + 4  # GEPA may finish the minibatch it started
    assert len(agent.bank) == before  # nothing stored while optimising
    assert engine.calls_matching("new_instruction")  # the reflection LM was asked
    pred = agent(question="In which year was Lyon founded?")
    assert pred.answer == "right"


def test_miprov2_proposes_instructions_only(agent, engine):
    calls.clear()
    curator = optimize_curator(agent, _trainset(), _metric, optimizer="miprov2", budget=3, num_candidates=2)
    assert curator.curate.demos == []
    assert BETTER in curator.curate.signature.instructions
    assert agent.curator is curator
    assert agent.executor.answer.signature.instructions == agent.executor_instructions


def test_bad_arguments(agent):
    with pytest.raises(ConfigError, match="unknown curator optimizer"):
        optimize_curator(agent, _trainset(), _metric, optimizer="sgd")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="non-empty trainset"):
        optimize_curator(agent, [], _metric)
    with pytest.raises(ConfigError, match="budget"):
        optimize_curator(agent, _trainset(), _metric, budget=0)


def test_feedback_metric_adapts_plain_metrics():
    wrapped = feedback_metric(lambda ex, pred, trace=None: 1.0)
    result = wrapped(dspy.Example(), dspy.Prediction(), None, "curator.curate", None)
    assert result.score == 1.0 and result.feedback == ""
