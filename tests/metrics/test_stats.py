"""Bootstrap intervals, paired differences, judge agreement, as_float, answer matching."""

from __future__ import annotations

import math

import dspy
import numpy as np
import pytest

from memento.core.errors import DataError
from memento.metrics.answer_match import AnswerMatch, exact_match, token_f1
from memento.metrics.as_float import as_float
from memento.metrics.stats import bootstrap_ci, cohen_kappa, judge_agreement, paired_bootstrap, pearson


def test_bootstrap_ci_mean_and_interval_are_reproducible() -> None:
    scores = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]
    mean, lo, hi = bootstrap_ci(scores, n=2000, seed=3)
    assert mean == pytest.approx(0.7)
    assert 0.3 < lo < 0.7 < hi <= 1.0
    assert bootstrap_ci(scores, n=2000, seed=3) == (mean, lo, hi)
    # the normal approximation of the standard error is close to the bootstrap spread
    se = math.sqrt(0.7 * 0.3 / 10)
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.25)


def test_bootstrap_ci_edge_cases() -> None:
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert bootstrap_ci([0.4]) == (0.4, 0.4, 0.4)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    with pytest.raises(DataError):
        bootstrap_ci([1.0, float("nan")])


def test_paired_bootstrap_difference() -> None:
    a = [1, 1, 1, 1, 0, 1, 1, 1]
    b = [0, 1, 0, 0, 0, 1, 0, 0]
    diff, lo, hi = paired_bootstrap(a, b, n=2000)
    assert diff == pytest.approx(np.mean(a) - np.mean(b))
    assert 0 < lo <= diff <= hi
    same = paired_bootstrap(a, a)
    assert same == (0.0, 0.0, 0.0)
    with pytest.raises(DataError, match="differ in length"):
        paired_bootstrap([1, 0], [1])


def _numpy_percentile_bootstrap(values: np.ndarray, n: int, seed: int) -> tuple[float, float]:
    """The interval memento computed before it used scipy (numpy resampling, 2.5th/97.5th percentiles)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(n, values.size))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(lo), float(hi)


@pytest.mark.parametrize("kind", ["binary", "graded", "skewed"])
def test_scipy_percentile_interval_matches_the_previous_figures_within_noise(kind: str) -> None:
    rng = np.random.default_rng(11)
    values = {
        "binary": (rng.random(40) < 0.6).astype(float),
        "graded": rng.integers(0, 6, size=25) / 5.0,
        "skewed": rng.exponential(1.0, size=60),
    }[kind]
    mean, lo, hi = bootstrap_ci(values, n=4000, seed=5)
    old_lo, old_hi = _numpy_percentile_bootstrap(values, n=4000, seed=99)
    width = old_hi - old_lo
    assert mean == pytest.approx(values.mean())
    # Monte-Carlo noise of a 2.5% quantile over 4,000 resamples is about 3% of the interval's width
    assert lo == pytest.approx(old_lo, abs=0.1 * width) and hi == pytest.approx(old_hi, abs=0.1 * width)


def test_paired_interval_is_the_interval_of_the_differences() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.random(30), rng.random(30)
    diff, lo, hi = paired_bootstrap(a, b, n=4000, seed=1)
    old_lo, old_hi = _numpy_percentile_bootstrap(a - b, n=4000, seed=3)
    assert diff == pytest.approx(float(np.mean(a - b)))
    assert lo == pytest.approx(old_lo, abs=0.1 * (old_hi - old_lo))
    assert hi == pytest.approx(old_hi, abs=0.1 * (old_hi - old_lo))
    assert all(math.isnan(x) for x in paired_bootstrap([], []))
    assert paired_bootstrap([0.7], [0.2]) == pytest.approx((0.5, 0.5, 0.5))


def test_cohen_kappa_is_identical_to_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")  # in the dev extra; memento keeps its own dozen lines
    rng = np.random.default_rng(4)
    for labels in (["yes", "no"], ["a", "b", "c", "d"], [True, False]):
        a = list(rng.choice(labels, size=80))
        b = [x if rng.random() < 0.6 else rng.choice(labels) for x in a]
        assert cohen_kappa(a, b) == pytest.approx(metrics.cohen_kappa_score(a, b), abs=1e-12)


def test_cohen_kappa_hand_computed() -> None:
    # 2x2 table: both yes 20, a-yes b-no 5, a-no b-yes 10, both no 15 (Wikipedia's example): kappa = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert judge_agreement(a, b) == pytest.approx(0.4)
    assert judge_agreement([True, False, True], [True, False, True]) == pytest.approx(1.0)


def test_pearson_for_numeric_scores() -> None:
    assert judge_agreement([0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]) == pytest.approx(1.0)
    assert judge_agreement([0, 1, 2, 3], [3, 2, 1, 0]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [2, 1, 4]) == pytest.approx(np.corrcoef([1, 2, 3], [2, 1, 4])[0, 1])
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))


def test_as_float_keeps_name_and_extracts_score() -> None:
    def graded(example, pred, trace=None, pred_name=None, pred_trace=None):
        return dspy.Prediction(score=0.25, feedback="meh")

    wrapped = as_float(graded)
    assert wrapped.__name__ == "graded"
    assert wrapped(dspy.Example(), dspy.Prediction()) == 0.25
    assert wrapped(dspy.Example(), dspy.Prediction(), None, "p", None) == 0.25
    assert as_float(lambda e, p, t=None: True)(None, None) == 1.0
    metric = AnswerMatch(score="em")
    assert as_float(metric).__name__ == "answer_em"


def test_exact_match_and_token_f1_squad_normalisation() -> None:
    assert exact_match("The  Beatles.", ["beatles"]) == 1.0
    assert exact_match("Beatles band", ["beatles"]) == 0.0
    # precision 1/2, recall 1 -> F1 2/3
    assert token_f1("Paris France", ["Paris"]) == pytest.approx(2 / 3)
    assert token_f1("Paris France", ["Lyon", "France, Paris"]) == pytest.approx(1.0)
    assert token_f1("yes", ["no"]) == 0.0
    assert token_f1("no answer", ["no"]) == 0.0  # HotpotQA: yes/no only match themselves
    assert token_f1("anything", []) == 0.0
    assert token_f1("A", ["a"]) == 1.0 and exact_match("An", ["a"]) == 1.0  # answers that normalise to nothing
    assert token_f1("", ["a"]) == 0.0 and exact_match(" ", ["a"]) == 0.0  # an empty prediction never matches


def test_answer_match_metric_feedback() -> None:
    example = dspy.Example(question="q", answers=["New York City", "NYC"])
    f1 = AnswerMatch()(example, dspy.Prediction(answer="New York"))
    assert f1.score == pytest.approx(0.8) and f1.em == 0.0
    assert "'New York City'" in f1.feedback and "'New York'" in f1.feedback
    em = AnswerMatch(score="em")(example, dspy.Prediction(answer="nyc"))
    assert em.score == 1.0 and em.feedback.startswith("Correct")
    assert "No answer" in AnswerMatch()(example, dspy.Prediction(answer="")).feedback
    with pytest.raises(ValueError):
        AnswerMatch(score="bleu")  # type: ignore[arg-type]  # deliberately not a score kind
