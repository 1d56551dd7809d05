"""LLM judges as DSPy metrics: judge_lm role, memoisation, judge errors, the coverage rubric."""

from __future__ import annotations

import dspy
import pytest

from memento.core.errors import LMUnavailableError
from memento.execution.threads import run_parallel
from memento.llm.lm import Roles
from memento.metrics.coverage_judge import CoverageJudge
from memento.metrics.verdict_judge import VerdictJudge
from memento.records.usage import UsageMeter
from memento.tasks import get_task
from memento.testing import ScriptedEngine, scripted_lm


def _roles(agent: dspy.LM, judge: dspy.LM) -> Roles:
    return Roles(lm=agent, judge_lm=judge, reflection_lm=agent, curator_lm=agent)


def test_verdict_judge_runs_under_judge_role_and_memoises() -> None:
    agent_engine, judge_engine = ScriptedEngine(), ScriptedEngine()
    judge_engine.when("Lyon", verdict="incorrect", rationale="different city")  # first match wins
    judge_engine.when("Paris", verdict="correct", rationale="same city")
    roles = _roles(scripted_lm(agent_engine), scripted_lm(judge_engine))
    dspy.configure(lm=roles.lm)
    judge = VerdictJudge(roles=roles)
    example = dspy.Example(question="Capital of France?", answers=["Paris", "Paris, France"])
    with UsageMeter(roles) as meter:
        good = judge(example, dspy.Prediction(answer="It is Paris"))
        again = judge(example, dspy.Prediction(answer="It is Paris"))
        bad = judge(example, dspy.Prediction(answer="Lyon"))
    assert (good.score, again.score, bad.score) == (1.0, 1.0, 0.0)
    assert "same city" in good.feedback and "expected 'Paris | Paris, France'" in bad.feedback
    assert len(judge_engine.calls) == 2 and len(agent_engine.calls) == 0
    assert judge.lm_calls == 2 and judge.judge_errors == 0
    assert meter.usage().judge_calls == 2
    assert "Paris | Paris, France" in judge_engine.calls[0].inputs["reference_answer"]


def test_verdict_judge_unparseable_reply_is_a_recorded_error(lm, engine: ScriptedEngine) -> None:
    engine.when("JudgeVerdict", raw="I cannot decide, sorry")
    engine.when("reference_answer", raw="I cannot decide, sorry")
    judge = VerdictJudge()
    result = judge(dspy.Example(question="q", answers=["a"]), dspy.Prediction(answer="b"))
    assert result.score == 0.0
    assert result.feedback.startswith("judge error")
    assert judge.judge_errors == 1
    # an empty answer is scored without a judge call
    calls = len(engine.calls)
    assert judge(dspy.Example(question="q", answers=["a"]), dspy.Prediction(answer=" ")).score == 0.0
    assert len(engine.calls) == calls


def test_judge_memo_is_thread_safe(lm, engine: ScriptedEngine) -> None:
    engine.delay = 0.02
    judge = VerdictJudge()
    example = dspy.Example(question="q", answers=["a"])
    scores = run_parallel(lambda _: judge(example, dspy.Prediction(answer="a")).score, range(8), threads=8)
    assert scores == [1.0] * 8  # the scripted verdict defaults to the first option, "correct"
    assert len(engine.calls) == 1


def test_judge_with_unreachable_server_raises_lm_unavailable() -> None:
    dead = dspy.LM("openai/x", api_base="http://127.0.0.1:9/v1", api_key="k", num_retries=0, cache=False)
    judge = VerdictJudge(lm=dead)
    with pytest.raises(LMUnavailableError):
        judge(dspy.Example(question="q", answers=["a"]), dspy.Prediction(answer="b"))


GROUND_TRUTH = [
    {"pain_point": "alpha churn", "mechanism": "m1", "evidence": "e1"},
    {"pain_point": "beta latency", "mechanism": "m2", "evidence": "e2"},
    {"pain_point": "gamma compliance", "mechanism": "m3", "evidence": "e3"},
]


def _sales_example() -> dspy.Example:
    return dspy.Example(seller="S", products="P", customer="Globex", value_propositions=GROUND_TRUTH).with_inputs(
        "seller", "products", "customer"
    )


def _pred() -> dspy.Prediction:
    return dspy.Prediction(value_propositions=[{"pain_point": "churn", "mechanism": "retention", "evidence": "x"}])


def test_coverage_score_is_normalised_sum(lm, engine: ScriptedEngine) -> None:
    engine.when("alpha churn", score=5, rationale="bullseye")
    engine.when("beta latency", score=2, rationale="topic")
    engine.when("gamma compliance", score=0, rationale="miss")
    judge = CoverageJudge()
    result = judge(_sales_example(), _pred())
    assert result.score == pytest.approx((5 + 2 + 0) / 15)
    assert result.item_scores == [5, 2, 0]
    assert result.judge_errors == 0 and judge.judge_errors == 0
    assert "Coverage 7/15" in result.feedback
    assert len(engine.calls) == 3
    assert all(call.inputs["customer"] == "Globex" for call in engine.calls)


def test_coverage_out_of_range_and_unparseable_are_judge_errors(lm, engine: ScriptedEngine) -> None:
    engine.when("alpha churn", score=4, rationale="strong")
    engine.when("beta latency", score=7, rationale="off the scale")
    engine.when("gamma compliance", raw="five-ish")
    judge = CoverageJudge()
    result = judge(_sales_example(), _pred())
    assert result.score == pytest.approx(4 / 15)
    assert result.judge_errors == 2 and judge.judge_errors == 2
    assert "2 judge error(s)" in result.feedback
    # 7 is outside the rubric's Literal[0..5]: the reply does not parse (or, parsed, is out of range)
    assert any("outside 0-5" in e or "literal[0,1,2,3,4,5]" in e for e in judge.errors)


def test_coverage_with_no_prediction_scores_zero_without_calls(lm, engine: ScriptedEngine) -> None:
    result = CoverageJudge()(_sales_example(), dspy.Prediction(value_propositions=[]))
    assert result.score == 0.0 and len(engine.calls) == 0


def test_sales_task_metric_uses_judge_role() -> None:
    agent_engine, judge_engine = ScriptedEngine(), ScriptedEngine(overrides={"score": 3})
    roles = _roles(scripted_lm(agent_engine), scripted_lm(judge_engine))
    metric = get_task("sales").make_metric("default", roles=roles)
    assert metric(_sales_example(), _pred()).score == pytest.approx(9 / 15)
    assert len(judge_engine.calls) == 3 and not agent_engine.calls


def test_legal_judge_metric_sees_no_disposition_label() -> None:
    judge_engine = ScriptedEngine(overrides={"verdict": "correct"})
    roles = _roles(scripted_lm(ScriptedEngine()), scripted_lm(judge_engine))
    metric = get_task("legal").make_metric("judge", roles=roles)
    example = dspy.Example(facts="f", winning_party="respondent", cutoff="2000-01-01").with_inputs("facts", "cutoff")
    result = metric(example, dspy.Prediction(winning_party="respondent", disposition="affirmed", reasoning="r"))
    assert result.score == 1.0
    assert "the respondent won" in judge_engine.calls[0].inputs["reference_answer"]
    assert "winning party: respondent" in judge_engine.calls[0].inputs["predicted_answer"]
