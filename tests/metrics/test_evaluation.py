"""evaluate(): per-example records, failures kept, LM vs judge usage, order under threads, atomic results.json."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest

from memento.core.errors import LMUnavailableError
from memento.llm.lm import Roles
from memento.metrics.answer_match import AnswerMatch
from memento.metrics.evaluation import evaluate, write_results
from memento.metrics.verdict_judge import VerdictJudge
from memento.testing import ScriptedEngine, scripted_lm


class Echo(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.predict = dspy.Predict("question -> answer")

    def forward(self, question: str) -> dspy.Prediction:
        if question == "boom":
            raise ValueError("kaput\nsecond line")
        if question == "dead":
            raise LMUnavailableError("LM server unreachable")
        return self.predict(question=question)


def _examples(*questions: str) -> list[dspy.Example]:
    return [
        dspy.Example(question=q, answers=[q.upper()], id=f"e{i}").with_inputs("question")
        for i, q in enumerate(questions)
    ]


def _roles(agent: ScriptedEngine, judge: ScriptedEngine) -> Roles:
    a, j = scripted_lm(agent), scripted_lm(judge)
    dspy.configure(lm=a)
    return Roles(lm=a, judge_lm=j, reflection_lm=a, curator_lm=a)


def test_evaluate_records_failures_and_keeps_order() -> None:
    agent = ScriptedEngine(overrides={"answer": lambda call: call.inputs["question"].upper()})
    agent.when("q3", answer="wrong")
    roles = _roles(agent, ScriptedEngine())
    examples = _examples("q0", "q1", "boom", "q3", "q4", "q5")
    result = evaluate(Echo(), examples, AnswerMatch(score="em"), threads=3, roles=roles, task="t", method="m")
    assert [r.index for r in result.examples] == list(range(6))
    assert [r.score for r in result.examples] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    failed = result.examples[2]
    assert failed.error == "ValueError: kaput" and failed.prediction == {}
    assert result.errors == 1
    assert result.mean == pytest.approx(4 / 6)
    assert result.ci_low <= result.mean <= result.ci_high
    assert result.usage.lm_calls == 5 == len(agent.calls)
    assert result.usage.by_role["lm"].lm_calls == 5
    assert result.judge_usage.lm_calls == 0
    assert result.measures["em"] == pytest.approx(4 / 5)  # extra measures average over the scored examples
    assert result.examples[0].usage.lm_calls == 1 and result.examples[0].inputs == {"question": "q0"}


def test_judge_calls_are_counted_apart_from_program_calls() -> None:
    agent = ScriptedEngine(overrides={"answer": "x"})
    judge_engine = ScriptedEngine(overrides={"verdict": "incorrect"})
    roles = _roles(agent, judge_engine)
    result = evaluate(Echo(), _examples("a", "b", "c"), VerdictJudge(roles=roles), threads=2, roles=roles)
    assert result.usage.lm_calls == 3 and result.usage.judge_calls == 0
    assert result.judge_usage.lm_calls == 3 and result.judge_usage.judge_calls == 3
    assert len(judge_engine.calls) == 3
    assert result.mean == 0.0 and result.judge_errors == 0


def test_lm_unavailable_stops_the_evaluation(lm) -> None:
    with pytest.raises(LMUnavailableError):
        evaluate(Echo(), _examples("a", "dead", "b"), AnswerMatch(), threads=1)


def test_metric_failure_is_recorded(lm) -> None:
    def broken(example, pred, trace=None):
        raise KeyError("answers")

    result = evaluate(Echo(), _examples("a"), broken)
    assert (result.examples[0].error or "").startswith("metric: KeyError")
    assert result.examples[0].score == 0.0


def test_write_results_is_complete_json(tmp_path: Path, lm, engine: ScriptedEngine) -> None:
    from memento.programs.baselines import ClosedBook
    from memento.tasks import get_task

    engine.overrides["answer"] = "Q0"
    task = get_task("multihop")
    result = evaluate(ClosedBook(task), _examples("q0", "q1"), task.metric, task="multihop", method="closed_book")
    path = write_results(result, tmp_path / "out")
    data = json.loads(path.read_text())
    assert data["task"] == "multihop" and data["n"] == 2
    assert data["ci"] == [data["ci_low"], data["ci_high"]]
    assert [e["score"] for e in data["examples"]] == [1.0, 0.0]
    assert data["examples"][1]["feedback"].startswith("Expected 'Q1'")
    assert data["examples"][0]["prediction"] == {"answer": "Q0"}
    assert data["usage"]["lm_calls"] == 2
    assert "trajectory" not in data["examples"][0]
    lines = (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["score"] == 1.0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.json", "results.md", "trajectories.jsonl"]
    assert data["leakage"]["items_after_cutoff"] == 0 and data["examples"][0]["leakage"]["items_shown"] == 0
    assert "## Leakage audit" in (tmp_path / "out" / "results.md").read_text()
