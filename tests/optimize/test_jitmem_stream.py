"""The JitMem stream protocol (shuffled batches sharing one bank state) and training-bank construction."""

from __future__ import annotations

import dspy
import pytest

from memento.memory.trajectory_bank import TrajectoryBank
from memento.optimize.jitmem_stream import build_training_bank, stream
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.testing import ScriptedEngine

CURATOR = "You are a memory curator"
JUDGE = "You are judging whether an agent"


@pytest.fixture
def scripted(engine: ScriptedEngine, lm):
    engine.when(CURATOR, payload=lambda call: f"PAYLOAD for <{call.inputs.get('task')}>")
    engine.when(JUDGE, success=True, reasoning="supported")
    return engine


def _agent(tmp_path, **kwargs) -> JitMemAgent:
    return JitMemAgent(ClosedBook("qa"), TrajectoryBank(tmp_path / "bank"), JitMemCurator(), **kwargs)


def test_stream_keeps_bank_fixed_within_batches(tmp_path, scripted):
    agent = _agent(tmp_path)
    questions = [f"Who founded the Roman colony number {i} in Gaul?" for i in range(7)]
    examples = [
        dspy.Example(question=q, id=f"q{i}", answers=["x"]).with_inputs("question") for i, q in enumerate(questions)
    ]

    def metric(ex, pred, trace=None):
        return float(ex.id in ("q0", "q1"))

    result = stream(agent, examples, batch_size=3, seed=1, metric=metric, threads=2)

    assert [item.position for item in result.items] == list(range(7))
    assert [item.task_id for item in result.items] == [f"q{i}" for i in range(7)]
    assert sorted(item.order for item in result.items) == list(range(7))
    by_batch: dict[int, list] = {}
    for item in result.in_stream_order():
        by_batch.setdefault(item.batch, []).append(item)
    assert [len(v) for _, v in sorted(by_batch.items())] == [3, 3, 1]
    assert [v[0].bank_size for _, v in sorted(by_batch.items())] == [0, 3, 6]
    seen: set[str] = set()
    for _, batch in sorted(by_batch.items()):
        for item in batch:
            retrieved = set(item.prediction.jitmem["retrieved"])
            assert retrieved <= seen  # only trajectories from earlier batches, never from the same batch
            assert item.bank_size == len(seen)
        seen |= {item.task_id for item in batch}
    assert result.scores == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert len(result.curve()) == 3 and result.mean() == pytest.approx(2 / 7)
    assert agent.bank.version == 3
    # same seed, same order
    again = stream(_agent(tmp_path / "b"), examples, batch_size=3, seed=1)
    assert [i.order for i in again.items] == [i.order for i in result.items]


def test_stream_records_task_failures(tmp_path, scripted):
    agent = _agent(tmp_path)
    examples = [dspy.Example(question="Valid question about Lyon?"), dspy.Example(question="")]
    result = stream(agent, examples, batch_size=10, seed=0)
    assert result.items[0].error is None and result.items[0].stored
    assert "EmptyQuestionError" in (result.items[1].error or "")


def test_build_training_bank_gates_on_the_metric(tmp_path, scripted):
    agent = _agent(tmp_path)
    examples = [
        dspy.Example(question="Capital of France?", id="good", answers=["scripted answer"]),
        dspy.Example(question="Capital of Spain?", id="bad", answers=["Madrid"]),
    ]

    def metric(ex, pred, trace=None):
        return dspy.Prediction(score=float(pred.answer in ex.answers), feedback="")

    result = build_training_bank(agent, examples, metric)
    assert [i.accepted for i in result.items] == [True, False]
    assert [t.task_id for t, _ in agent.bank.iter_all()] == ["good"]
    assert not scripted.calls_matching(JUDGE)  # ground truth gates here, not the judge


def test_ground_truth_gate_is_strictly_above_the_threshold(tmp_path, scripted):
    """One success rule everywhere: a score equal to the threshold is a failure (the gate used ``>=`` before)."""
    agent = _agent(tmp_path)
    scores = {"half": 0.5, "more": 0.75, "full": 1.0}
    examples = [dspy.Example(question=f"Question {name}?", id=name) for name in scores]

    def metric(ex, pred, trace=None):
        return scores[ex.id]

    result = build_training_bank(agent, examples, metric)  # the default threshold: 0.5, as [trainer]
    assert [i.accepted for i in result.items] == [False, True, True]
    result = build_training_bank(_agent(tmp_path / "strict"), examples, metric, threshold=0.75)
    assert [i.accepted for i in result.items] == [False, False, True]


def test_stream_resumes_from_its_checkpoint(tmp_path, scripted):
    from memento.core.errors import ConfigError, LMUnavailableError

    examples = [dspy.Example(question=f"Who founded the Roman town number {i}?", id=f"q{i}") for i in range(7)]
    checkpoint = tmp_path / "stream.jsonl"
    agent = _agent(tmp_path)
    probe = stream(_agent(tmp_path / "probe"), examples, batch_size=3, seed=0)
    order = [item.task_id for item in probe.in_stream_order()]
    crash_on = {"armed": True}

    def metric(ex, pred, trace=None):
        if ex.id == order[4] and crash_on["armed"]:  # the second task of the second batch
            raise LMUnavailableError("the LM server went away")
        return 1.0

    calls_before = len(scripted.calls)
    with pytest.raises(LMUnavailableError):
        stream(agent, examples, batch_size=3, seed=0, metric=metric, checkpoint=checkpoint)
    assert len(checkpoint.read_text().splitlines()) == 1  # only the first batch finished
    assert len(agent.bank) == 3  # the aborted batch stored nothing

    crash_on["armed"] = False
    checkpoint.write_text(checkpoint.read_text() + '{"torn": ')  # a crash mid-write leaves a torn line
    first_batch = set(order[:3])
    start = len(scripted.calls)
    result = stream(agent, examples, batch_size=3, seed=0, metric=metric, checkpoint=checkpoint)
    rerun_questions = {c.inputs.get("question") for c in scripted.calls[start:] if "question" in c.inputs}
    assert not rerun_questions & {examples[int(i[1:])].question for i in first_batch}  # restored, not re-run
    assert [item.task_id for item in result.items] == [f"q{i}" for i in range(7)]
    assert all(item.prediction is not None and item.prediction.trajectory.task_text for item in result.items)
    assert result.scores == [1.0] * 7 and len(agent.bank) == 7
    assert calls_before < start
    with pytest.raises(ConfigError, match="written by another stream"):
        stream(agent, examples, batch_size=4, seed=0, checkpoint=checkpoint)
