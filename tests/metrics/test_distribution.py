"""TVD, KL and distribution repair, checked against hand-computed values."""

from __future__ import annotations

import math

import dspy
import pytest

from memento.core.errors import DataError
from memento.metrics.distribution import DistributionMetric, kl_divergence, repair_distribution, total_variation


def test_tvd_hand_computed() -> None:
    p = {"A": 0.5, "B": 0.3, "C": 0.2}
    q = {"A": 0.2, "B": 0.3, "C": 0.5}
    assert total_variation(p, q) == pytest.approx(0.3)  # (0.3 + 0 + 0.3) / 2
    assert total_variation(q, q) == 0.0
    assert total_variation({"A": 1.0}, {"B": 1.0}) == pytest.approx(1.0)


def test_kl_hand_computed() -> None:
    q = {"A": 0.5, "B": 0.5}  # truth
    p = {"A": 0.25, "B": 0.75}
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert kl_divergence(q, p, epsilon=0.0) == pytest.approx(expected)
    assert kl_divergence(q, p) == pytest.approx(expected, abs=1e-5)
    assert kl_divergence(q, q) == pytest.approx(0.0, abs=1e-12)
    # a zero prediction where the truth has mass: finite thanks to smoothing, and large
    one_hot = kl_divergence({"A": 1.0, "B": 0.0}, {"A": 0.0, "B": 1.0}, epsilon=1e-6)
    assert math.isfinite(one_hot) and one_hot == pytest.approx(math.log((1 + 1e-6) / 1e-6), rel=1e-3)


@pytest.mark.parametrize(
    "raw",
    [
        {"Yes": 0.7, "No": 0.2, "Unsure": 0.5},  # unknown option dropped
        {"yes": 3, " NO ": 1},  # case and spaces, weights not summing to 1
        {"Yes": -0.2, "No": 0.9},  # negative clipped
        {"Yes": "60%", "No": "40%"},  # percentages
        {"Yes": 1.0},  # missing option gets epsilon
        [0.1, 0.9],  # aligned list
        '{"Yes": 0.4, "No": 0.6}',  # JSON text
        "not json",  # garbage -> uniform
        None,
        {"Yes": float("nan"), "No": "x"},
    ],
)
def test_repaired_distribution_sums_to_one_over_exactly_the_options(raw) -> None:
    options = ["Yes", "No"]
    repaired = repair_distribution(raw, options)
    assert list(repaired) == options
    assert sum(repaired.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(v > 0 for v in repaired.values())


def test_repair_values() -> None:
    assert repair_distribution({"yes": 3, " NO ": 1}, ["Yes", "No"]) == {"Yes": 0.75, "No": 0.25}
    clipped = repair_distribution({"Yes": -0.2, "No": 0.9}, ["Yes", "No"], epsilon=1e-6)
    assert clipped["No"] == pytest.approx(1 / (1 + 1e-6)) and clipped["Yes"] == pytest.approx(1e-6, rel=1e-3)
    assert repair_distribution("not json", ["a", "b", "c", "d"]) == {k: 0.25 for k in "abcd"}
    with pytest.raises(DataError):
        repair_distribution({}, [])
    with pytest.raises(DataError):
        repair_distribution({}, ["a", "A"])


def test_distribution_metric_scores_one_minus_tvd() -> None:
    example = dspy.Example(options=["A", "B", "C"], distribution={"A": 0.2, "B": 0.3, "C": 0.5})
    pred = dspy.Prediction(distribution={"A": 0.5, "B": 0.3, "C": 0.2, "D": 0.4})
    result = DistributionMetric()(example, pred)
    assert result.tvd == pytest.approx(0.3, abs=1e-5)
    assert result.score == pytest.approx(0.7, abs=1e-5)
    expected_kl = 0.2 * math.log(0.2 / 0.5) + 0.5 * math.log(0.5 / 0.2)
    assert result.kl == pytest.approx(expected_kl, abs=1e-4)
    assert "TVD 0.300" in result.feedback and "KL" in result.feedback
    assert set(result.repaired) == {"A", "B", "C"}
