"""The coverage judge of value-proposition tasks (MEMENTO, Appendix G).

For each ground-truth value proposition ``g`` the ``judge_lm`` scores 0-5 each predicted proposition ``p`` on its own
(0 miss, 1 marketing fluff, 2 topic match, 3 soft match, 4 strong argument, 5 bullseye; the rubric of
:class:`memento.signatures.judge_coverage.JudgeCoverage`) and ``g`` keeps its best match: the example's score is
``sum_g max_p s(g, p) / (5 * |G|)``. Extra predictions earn nothing, and since each call sees one prediction only,
padding the list cannot raise the score. A reply that cannot be parsed or lies outside 0-5 is a recorded judge
error (that pair scores nothing). Cost: ``|G| * |P|`` judge calls per example, memoised per pair.

Example:
    >>> from memento.metrics.coverage_judge import CoverageJudge
    >>> judge = CoverageJudge()  # doctest: +SKIP
    >>> judge(example, pred).score  # doctest: +SKIP
    0.6
"""

from __future__ import annotations

from typing import Any

import dspy

from memento.metrics.judge import JudgeError, LLMJudge
from memento.signatures.judge_coverage import JudgeCoverage
from memento.untrusted import quote_data

__all__ = ["CoverageJudge", "format_value_proposition", "MAX_SCORE"]

MAX_SCORE = 5


def _field(item: Any, name: str) -> str:
    if isinstance(item, dict):
        return str(item.get(name, "") or "")
    return str(getattr(item, name, "") or "")


def format_value_proposition(item: Any) -> str:
    """A value proposition (a pydantic model, a dict or a string) as ``pain point / mechanism / evidence`` text."""
    if isinstance(item, str):
        return item.strip()
    parts = [
        f"Pain point: {_field(item, 'pain_point')}",
        f"Mechanism: {_field(item, 'mechanism')}",
        f"Evidence: {_field(item, 'evidence')}",
    ]
    return "\n".join(p for p in parts if not p.endswith(": "))


class CoverageJudge(LLMJudge):
    """Coverage of the ground-truth value propositions by the predicted ones, judged per ground-truth item.

    Args:
        predicted_field: the prediction's list field (default ``value_propositions``).
        reference_field: the example's ground-truth list field (default ``value_propositions``).
        customer_field: the example field naming the customer (context for the judge).
        roles, lm, memoize: see :class:`memento.metrics.judge.LLMJudge`.
    """

    signature = JudgeCoverage

    def __init__(
        self,
        *,
        predicted_field: str = "value_propositions",
        reference_field: str = "value_propositions",
        customer_field: str = "customer",
        roles: Any | None = None,
        lm: dspy.LM | None = None,
        memoize: bool = True,
    ) -> None:
        super().__init__(roles=roles, lm=lm, memoize=memoize)
        self.predicted_field = predicted_field
        self.reference_field = reference_field
        self.customer_field = customer_field

    def validate(self, reply: dspy.Prediction) -> None:
        score = getattr(reply, "score", None)
        if isinstance(score, bool) or not isinstance(score, int | float) or score != int(score):
            raise JudgeError(f"coverage score {score!r} is not an integer")
        if not 0 <= score <= MAX_SCORE:
            raise JudgeError(f"coverage score {score!r} is outside 0-{MAX_SCORE}")

    def best_match(self, customer: str, gold_text: str, predicted: list[Any]) -> tuple[int, int | None, str, int]:
        """The best score of one ground-truth item over the predicted items, each judged on its own.

        Returns ``(score, index of the best prediction or None, its rationale, judge errors)``. Every pair is a
        separate (memoised) judge call that sees one prediction only, so adding predictions never changes the score
        of another pair: padding the list cannot raise a ground truth's score unless a new item truly matches it.
        """
        best, best_index, best_why, errors = 0, None, "", 0
        for index, item in enumerate(predicted, 1):
            reply = self.judge(
                customer=customer, ground_truth=gold_text, predicted=quote_data(format_value_proposition(item))
            )
            if reply is None:
                errors += 1
                continue
            if best_index is None or int(reply.score) > best:
                best, best_index, best_why = int(reply.score), index, str(reply.rationale or "")
        return best, best_index, best_why, errors

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        ground_truth = list(example.get(self.reference_field) or [])
        predicted = list(getattr(pred, self.predicted_field, None) or [])
        if not ground_truth:
            return dspy.Prediction(score=0.0, feedback="No ground-truth value propositions to cover.", judge_errors=0)
        customer = str(example.get(self.customer_field, "") or "")
        scores: list[int] = []
        lines: list[str] = []
        errors = 0
        for i, gold in enumerate(ground_truth, 1):
            gold_text = format_value_proposition(gold)
            label = _field(gold, "pain_point") or gold_text[:80]
            if not predicted:
                scores.append(0)
                lines.append(f"GT{i} (0/5) {label}: missed; no value propositions were predicted.")
                continue
            score, index, why, failed = self.best_match(customer, gold_text, predicted)
            errors += failed
            scores.append(score)
            if index is None:
                lines.append(f"GT{i}: judge error ({self.errors[-1] if self.errors else 'unusable reply'}); scored 0.")
            else:
                lines.append(f"GT{i} ({score}/5, best match: prediction {index}) {label}: {why}")
        total = sum(scores) / (MAX_SCORE * len(ground_truth))
        header = (
            f"Coverage {sum(scores)}/{MAX_SCORE * len(ground_truth)} over {len(ground_truth)} reference propositions "
            f"(each scored by its best-matching prediction; extra predictions earn nothing)"
        )
        if errors:
            header += f"; {errors} judge error(s)"
        feedback = header + ".\n" + "\n".join(lines)
        return dspy.Prediction(score=total, feedback=feedback, judge_errors=errors, item_scores=scores)
