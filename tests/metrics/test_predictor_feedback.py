"""GEPA feedback per predictor (issue 18, item 5): planners learn which targets no sub-question covered, the solver
its node's outcome and sources, the answer predictor format versus content errors; the score stays the module's."""

from __future__ import annotations

from typing import Any

import dspy

from memento.core.types import Evidence, Node, Trajectory
from memento.metrics.predictor_feedback import PredictorFeedback, predictor_role
from memento.tasks import get_task

MULTIHOP = get_task("multihop")


def _run(nodes: list[Node], answer: str, *, error: str | None = None) -> dspy.Prediction:
    root = Node(id="root", parent_id=None, wave=-1, question="Where was the director of Inception born?")
    trajectory = Trajectory(task_text=root.question, nodes=[root, *nodes], prediction={"answer": answer}, error=error)
    return dspy.Prediction(answer=answer, trajectory=trajectory)


def _example(**extra) -> dspy.Example:
    return dspy.Example(question="Where was the director of Inception born?", answers=["London"], **extra).with_inputs(
        "question"
    )


DECOMPOSITION = [
    {"question": "Who directed Inception?", "answer": "Christopher Nolan"},
    {"question": "Where was Christopher Nolan born?", "answer": "London"},
]
Q1 = Node(
    id="q1",
    parent_id="root",
    wave=0,
    question="Who directed the film Inception?",
    answer="Christopher Nolan",
    status="answered",
    evidence=[Evidence(url="https://ex.org/inception")],
)
Q2 = Node(
    id="q2",
    parent_id="root",
    wave=0,
    question="What is the budget of Inception?",
    status="failed",
    error="ran out of steps (3) before finishing",
    evidence=[Evidence(url="https://ex.org/budget")],
)


def test_roles_from_predictor_names():
    assert [
        predictor_role(n)
        for n in ("decompose", "reflect", "planner", "solver.agent.react", "executor.agent.extract.predict", "answer")
    ] == ["planner", "planner", "planner", "solver", "solver", "answer"]
    assert predictor_role("synthesize") == predictor_role(None) == "other"


def test_planners_learn_which_gold_steps_no_sub_question_covered():
    metric = PredictorFeedback(MULTIHOP.metric, assess=False)
    pred = _run([Q1, Q2], "Paris")
    for name in ("decompose", "reflect"):
        out = metric(_example(decomposition=DECOMPOSITION), pred, None, name, None)
        assert out.score == MULTIHOP.metric(_example(), pred).score  # the module's score, unchanged
        assert "covered 1 of 2 steps of the gold decomposition" in out.feedback
        assert "Where was Christopher Nolan born? (answer: London)" in out.feedback
        assert "Who directed Inception?" not in out.feedback.split("Overall")[0]


def test_planners_without_gold_decomposition_use_the_coverage_assessment():
    seen: dict[str, Any] = {}

    def assess(task, expected, subs):
        seen.update(task=task, expected=expected, subs=subs)
        return [("the director", True, True), ("the birthplace", False, False), ("the country", True, False)]

    metric = PredictorFeedback(MULTIHOP.metric, assess=assess)
    out = metric(_example(), _run([Q1, Q2], "Paris"), None, "decompose", None)
    assert "covered 2 of 3 target elements" in out.feedback
    assert "No sub-question covered: the birthplace" in out.feedback
    assert "Covered but answered wrongly: the country" in out.feedback
    assert "London" in seen["expected"] and "Who directed the film Inception?" in seen["subs"]


def test_the_solver_gets_its_nodes_failure_and_cited_sources():
    metric = PredictorFeedback(MULTIHOP.metric, assess=False)
    pred = _run([Q1, Q2], "Paris")
    failed = metric(_example(), pred, None, "solver.agent.react", [(None, {"question": Q2.question}, {})])
    assert "failed: ran out of steps (3) before finishing" in failed.feedback
    assert "https://ex.org/budget" in failed.feedback
    answered = metric(_example(), pred, None, "solver.agent.extract.predict", [(None, {"question": Q1.question}, {})])
    assert "answered 'Christopher Nolan'" in answered.feedback and "https://ex.org/inception" in answered.feedback
    assert "budget" not in answered.feedback.split("Overall")[0]


def test_the_answer_predictor_tells_format_from_content_errors():
    metric = PredictorFeedback(MULTIHOP.metric, assess=False)
    buried = metric(_example(), _run([Q1], "He was born in London, England"), None, "answer", None)
    assert buried.feedback.startswith("Format error: the expected answer is inside a longer reply")
    empty = metric(_example(), _run([Q1], ""), None, "answer", None)
    assert empty.feedback.startswith("Format error: no value for answer")
    crashed = metric(_example(), _run([Q1], "", error="ValueError: boom"), None, "answer", None)
    assert crashed.feedback.startswith("Format error: the run failed")
    found = Node(id="q3", parent_id="root", wave=1, question="Birthplace of Nolan?", answer="London", status="answered")
    ignored = metric(_example(), _run([Q1, found], "Paris"), None, "answer", None)
    assert ignored.feedback.startswith("Content error: the findings contained the expected answer")
    wrong = metric(_example(), _run([Q1], "Paris"), None, "answer", None)
    assert wrong.feedback.startswith("Content error: the answer is well-formed but wrong")
    right = metric(_example(), _run([Q1], "London"), None, "answer", None)
    assert right.score == 1.0 and right.feedback.startswith("Correct")


def test_other_predictors_and_module_calls_get_the_task_feedback():
    metric = PredictorFeedback(MULTIHOP.metric, assess=False)
    pred = _run([Q1], "Paris")
    base = MULTIHOP.metric(_example(), pred)
    assert metric(_example(), pred).feedback == base.feedback
    assert metric(_example(), pred, None, "synthesize", None).feedback == base.feedback


def test_gepa_compiles_with_predictor_feedback(monkeypatch):
    from memento.optimize import optimizers

    captured = {}

    class FakeGEPA:
        def __init__(self, *, metric, **kwargs):
            captured["metric"] = metric

        def compile(self, student, trainset, valset):
            return student

    monkeypatch.setattr(optimizers.dspy, "GEPA", FakeGEPA)
    from memento.optimize.budgets import resolve_budget
    from memento.programs.baselines import ClosedBook

    lm = dspy.LM("openai/x", api_base="http://127.0.0.1:9/v1", api_key="k")
    examples = [_example() for _ in range(4)]
    optimizers.optimize_program(
        "gepa",
        ClosedBook("multihop"),
        trainset=examples,
        metric=MULTIHOP.metric,
        roles=type("R", (), {"reflection_lm": lm})(),
        budget=resolve_budget("tiny"),
    )
    assert isinstance(captured["metric"], PredictorFeedback) and captured["metric"].lm is lm
