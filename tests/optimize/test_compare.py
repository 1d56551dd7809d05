"""Units of the comparison harness: budgets, method parsing, the split, costs, the report, optimiser wrappers."""

from __future__ import annotations

import json

import dspy
import pytest

from memento.core.errors import ConfigError
from memento.core.types import StageUsage, Trajectory, Usage
from memento.optimize.budgets import CompareBudget, resolve_budget
from memento.optimize.compare import Tallied, WebTally, example_id, parse_methods, split_examples
from memento.optimize.costs import MethodCosts, PhaseCost, price_usage
from memento.optimize.optimizers import (
    DuplicateSignatureError,
    check_distinct_signatures,
    holdout_split,
    optimize_program,
)
from memento.optimize.report import BaselineDiff, CompareReport, MethodResult, render_markdown, write_report
from memento.records.usage import UsageMeter
from memento.tasks.task import get_task
from memento.testing import ScriptedEngine, scripted_lm


def _examples(n: int) -> list[dspy.Example]:
    return [dspy.Example(question=f"q{i}?", answers=[f"a{i}"], id=f"e{i}").with_inputs("question") for i in range(n)]


# -- budgets ------------------------------------------------------------------------------------------------------
def test_presets_scale_and_overrides_win() -> None:
    tiny, light, medium = (resolve_budget(p) for p in ("tiny", "light", "medium"))
    assert tiny.gepa_max_metric_calls < light.gepa_max_metric_calls < medium.gepa_max_metric_calls
    assert tiny.mipro_num_trials < light.mipro_num_trials < medium.mipro_num_trials
    assert medium.memory_batch_size == 10 and medium.memory_train_limit == 60  # the paper's 60 samples, batches of 10
    custom = resolve_budget("tiny", {"gepa_max_metric_calls": 31, "mipro_num_trials": None})
    assert custom.gepa_max_metric_calls == 31 and custom.mipro_num_trials == tiny.mipro_num_trials
    assert custom.preset == "tiny"
    assert custom.for_method("gepa")["gepa_max_metric_calls"] == 31
    assert "mipro_num_trials" not in custom.for_method("gepa")
    assert custom.for_method("memory") == {"memory_batch_size": 4, "memory_train_limit": 12}


@pytest.mark.parametrize(
    ("preset", "overrides", "message"),
    [
        ("huge", None, "unknown budget preset 'huge'"),
        ("tiny", {"gepa_calls": 3}, "unknown budget 'gepa_calls'"),
        ("tiny", {"gepa_max_metric_calls": 0}, "invalid budget gepa_max_metric_calls"),
    ],
)
def test_bad_budgets_are_refused(preset: str, overrides: dict | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_budget(preset, overrides)


def test_holdout_split_is_seeded_and_keeps_both_sides() -> None:
    budget = CompareBudget(val_fraction=0.34)
    train, val = holdout_split(_examples(12), budget, seed=3)
    assert (len(train), len(val)) == (7, 5)
    assert {e.id for e in train}.isdisjoint({e.id for e in val})
    assert [e.id for e in holdout_split(_examples(12), budget, seed=3)[1]] == [e.id for e in val]
    assert budget.split_sizes(2) == (1, 1)
    with pytest.raises(ConfigError, match="at least 2"):
        budget.split_sizes(1)


# -- methods and split ----------------------------------------------------------------------------------------------
def test_parse_methods_kinds_order_and_errors() -> None:
    specs = parse_methods("closed_book, gepa:react,memento,closed_book,miprov2:aet")
    assert [(s.name, s.kind, s.base, s.optimizer) for s in specs] == [
        ("closed_book", "program", "closed_book", None),
        ("gepa:react", "optimizer", "react", "gepa"),
        ("memento", "memory", "memento", None),
        ("miprov2:aet", "optimizer", "aet", "miprov2"),
    ]
    assert specs[1].slug == "gepa-react"
    with pytest.raises(ConfigError, match="unknown optimiser 'copro'"):
        parse_methods("copro:react")
    with pytest.raises(ConfigError, match="not supported"):
        parse_methods("gepa:memento")
    with pytest.raises(ConfigError, match="no methods"):
        parse_methods(" , ")


def test_split_is_seeded_disjoint_and_sized() -> None:
    data = _examples(20)
    train, test = split_examples(data, n_train=12, n_test=8, seed=42)
    assert (len(train), len(test)) == (12, 8)
    assert {e.id for e in train}.isdisjoint({e.id for e in test})
    again = split_examples(data, n_train=12, n_test=8, seed=42)
    assert [e.id for e in again[1]] == [e.id for e in test]
    assert [e.id for e in split_examples(data, n_train=12, n_test=8, seed=7)[1]] != [e.id for e in test]
    with pytest.raises(ConfigError, match="only 20"):
        split_examples(data, n_train=15, n_test=8, seed=42)


def test_example_id_prefers_the_id_field_else_hashes_inputs() -> None:
    task = get_task("qa")
    assert example_id(dspy.Example(question="x", id="abc").with_inputs("question"), task) == "abc"
    a = example_id(dspy.Example(question="x").with_inputs("question"), task)
    assert a.startswith("h-") and a == example_id(dspy.Example(question="x", answers=["z"]), task)
    assert a != example_id(dspy.Example(question="y").with_inputs("question"), task)


# -- costs --------------------------------------------------------------------------------------------------------
def test_dollars_when_the_price_is_known_else_tokens_only() -> None:
    usage = Usage(
        lm_calls=2,
        prompt_tokens=1000,
        completion_tokens=100,
        by_role={"lm": StageUsage(lm_calls=2, prompt_tokens=1000, completion_tokens=100)},
    )
    known = price_usage(usage, {"lm": "openai/gpt-4o-mini"})
    assert known is not None and known == pytest.approx(1000 * 0.15e-6 + 100 * 0.6e-6, rel=1e-6)
    assert price_usage(usage, {"lm": "openai/some-local-model"}) is None
    cost = PhaseCost.from_usage(usage, wall_seconds=2.0, searches=3, models={"lm": "openai/gpt-4o-mini"})
    assert (cost.lm_calls, cost.tokens, cost.searches, cost.dollars) == (2, 1100, 3, known)
    total = MethodCosts(train=cost, test=PhaseCost(lm_calls=1, dollars=None)).total
    assert total.lm_calls == 3 and total.dollars is None and total.by_role["lm"].lm_calls == 2


def test_usage_meter_counts_calls_inside_dspy_parallel_executor(engine: ScriptedEngine) -> None:
    # dspy's ParallelExecutor (Evaluate, GEPA, MIPROv2) deep-copies the usage tracker into each worker thread
    lm = scripted_lm(engine)
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm), UsageMeter() as meter:
        dspy.Evaluate(devset=_examples(6), metric=lambda e, p, t=None: 1.0, num_threads=3, max_errors=0)(predict)
    assert meter.usage().lm_calls == len(engine.calls) == 6


# -- optimiser wrappers ---------------------------------------------------------------------------------------------
class _TwoSame(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = dspy.Predict("question -> answer")
        self.second = dspy.Predict("question -> answer")


class _TwoDistinct(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = dspy.Predict("question -> answer")
        self.second = dspy.Predict("question, answer -> verdict")


def test_gepa_refuses_predictors_sharing_a_signature(lm) -> None:
    check_distinct_signatures(_TwoDistinct())
    with pytest.raises(DuplicateSignatureError, match="'first' and 'second'"):
        check_distinct_signatures(_TwoSame())
    with pytest.raises(DuplicateSignatureError):
        optimize_program(
            "gepa", _TwoSame(), trainset=_examples(4), metric=lambda *a: 0.0, budget=resolve_budget("tiny")
        )
    with pytest.raises(ConfigError, match="unknown optimiser"):
        optimize_program("copro", _TwoDistinct(), trainset=_examples(4), metric=None, budget=resolve_budget("tiny"))


def test_tallied_counts_web_use_and_survives_deep_copies() -> None:
    class Fake(dspy.Module):
        def forward(self, question: str) -> dspy.Prediction:
            traj = Trajectory(task_text=question, usage=Usage(searches=2, fetches=1))
            return dspy.Prediction(answer="x", trajectory=traj)

    tally = WebTally()
    wrapped = Tallied(Fake(), tally)
    copy = wrapped.deepcopy()
    wrapped(question="a")
    copy(question="b")
    assert copy.tally is tally
    assert (tally.runs, tally.searches, tally.fetches) == (2, 4, 2)


# -- report -------------------------------------------------------------------------------------------------------
def test_report_writes_json_markdown_and_plots(tmp_path) -> None:
    report = CompareReport(task="multihop", metric="f1", baseline="closed_book", split={"n_train": 12, "n_test": 3})
    report.methods["closed_book"] = MethodResult(
        method="closed_book", status="done", scores=[0.0, 1.0, 0.0], mean=0.333, ci_low=0.0, ci_high=1.0
    )
    report.methods["memento"] = MethodResult(
        method="memento",
        kind="memory",
        status="done",
        scores=[1.0, 1.0, 0.0],
        mean=0.667,
        ci_low=0.0,
        ci_high=1.0,
        vs_baseline=BaselineDiff(baseline="closed_book", diff=0.333, ci_low=-0.33, ci_high=1.0, n=3),
        costs=MethodCosts(train=PhaseCost(lm_calls=40, prompt_tokens=9000, completion_tokens=800)),
        curve=[{"batch": 1, "score": 0.2}, {"batch": 2, "score": 0.5}],
        growth=[{"batch": 1, "size": 5, "unit": "rules"}, {"batch": 2, "size": 9, "unit": "rules"}],
        budgets={"memory_batch_size": 4},
    )
    report.methods["gepa:react"] = MethodResult(method="gepa:react", status="error", error="train: boom")
    written = write_report(report, tmp_path)
    assert set(written) == {"json", "markdown", "score_vs_cost", "learning_curve", "memory_growth"}
    for key in ("score_vs_cost", "learning_curve", "memory_growth"):
        assert written[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    back = CompareReport.model_validate_json((tmp_path / "results.json").read_text())
    vs_baseline = back.methods["memento"].vs_baseline
    assert vs_baseline is not None and vs_baseline.diff == pytest.approx(0.333)
    assert json.loads((tmp_path / "results.json").read_text())["methods"]["gepa:react"]["status"] == "error"
    md = render_markdown(report)
    assert "| `memento` | done | 0.667 [0.000, 1.000] | 0/3 | +0.333 [-0.330, +1.000] | 40 (0) | 9,800 |" in md
    assert "(baseline)" in md and "error: train: boom" in md and "memory_batch_size=4" in md
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind
