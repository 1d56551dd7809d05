"""The coverage judge of value-proposition tasks (MEMENTO, Appendix G and Table 9).

For each ground-truth value proposition ``g`` the ``judge_lm`` reads the whole predicted pitch and scores 0-5 how well
it covers ``g`` (0 miss, 1 marketing fluff, 2 topic match, 3 soft match, 4 strong, 5 bullseye; the rubric of
:class:`memento.signatures.judge_coverage.JudgeCoverage`): the example's score is ``sum_g s(g) / (5 * |G|)``, at a
cost of ``|G|`` judge calls per example (memoised).

Padding cannot pay, by a fixed, stated cap: the judge reads only the pitch's first ``max_propositions`` propositions
(5), each clipped to ``proposition_chars`` characters (600). What lies beyond is never shown, so a longer list earns
nothing, and the most a pitch can put before the judge is bounded whatever it contains. The feedback says when the
cap was applied. A reply that cannot be parsed or lies outside 0-5 is a recorded judge error (that item scores 0).

Example:
    >>> from memento.metrics.coverage_judge import CoverageJudge
    >>> judge = CoverageJudge()  # doctest: +SKIP
    >>> judge(example, pred).score  # doctest: +SKIP
    0.6
"""

from __future__ import annotations

from typing import Any

import dspy

from memento.core.untrusted import quote_data
from memento.metrics.judge import JudgeError, LLMJudge
from memento.signatures.judge_coverage import JudgeCoverage

__all__ = [
    "CoverageJudge",
    "format_value_proposition",
    "render_pitch",
    "MAX_SCORE",
    "MAX_PROPOSITIONS",
    "PROPOSITION_CHARS",
]

MAX_SCORE = 5
#: the anti-padding cap: propositions of a pitch the judge reads, and characters of each
MAX_PROPOSITIONS = 5
PROPOSITION_CHARS = 600


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


def render_pitch(
    predicted: list[Any], *, max_propositions: int = MAX_PROPOSITIONS, proposition_chars: int = PROPOSITION_CHARS
) -> str:
    """The pitch as the judge reads it: its first ``max_propositions`` propositions, numbered, each clipped to
    ``proposition_chars`` characters (the anti-padding cap)."""
    blocks = []
    for index, item in enumerate(predicted[:max_propositions], 1):
        text = format_value_proposition(item)
        if len(text) > proposition_chars:
            text = text[: max(0, proposition_chars - 3)].rstrip() + "..."
        blocks.append(f"Proposition {index}:\n{text}")
    return "\n\n".join(blocks)


class CoverageJudge(LLMJudge):
    """Coverage of the ground-truth value propositions by the predicted pitch, judged once per ground-truth item.

    Args:
        predicted_field: the prediction's list field (default ``value_propositions``).
        reference_field: the example's ground-truth list field (default ``value_propositions``).
        customer_field: the example field naming the customer (context for the judge).
        max_propositions: the pitch's propositions the judge reads (the first ones; more earn nothing).
        proposition_chars: characters of each proposition the judge reads.
        roles, lm, memoize: see :class:`memento.metrics.judge.LLMJudge`.
    """

    signature = JudgeCoverage

    def __init__(
        self,
        *,
        predicted_field: str = "value_propositions",
        reference_field: str = "value_propositions",
        customer_field: str = "customer",
        max_propositions: int = MAX_PROPOSITIONS,
        proposition_chars: int = PROPOSITION_CHARS,
        roles: Any | None = None,
        lm: dspy.LM | None = None,
        memoize: bool = True,
    ) -> None:
        super().__init__(roles=roles, lm=lm, memoize=memoize)
        if max_propositions < 1 or proposition_chars < 40:
            raise ValueError("the coverage judge reads at least one proposition of at least 40 characters")
        self.predicted_field = predicted_field
        self.reference_field = reference_field
        self.customer_field = customer_field
        self.max_propositions = max_propositions
        self.proposition_chars = proposition_chars

    def validate(self, reply: dspy.Prediction) -> None:
        score = getattr(reply, "score", None)
        if isinstance(score, bool) or not isinstance(score, int | float) or score != int(score):
            raise JudgeError(f"coverage score {score!r} is not an integer")
        if not 0 <= score <= MAX_SCORE:
            raise JudgeError(f"coverage score {score!r} is outside 0-{MAX_SCORE}")

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        ground_truth = list(example.get(self.reference_field) or [])
        predicted = list(getattr(pred, self.predicted_field, None) or [])
        if not ground_truth:
            return dspy.Prediction(score=0.0, feedback="No ground-truth value propositions to cover.", judge_errors=0)
        customer = str(example.get(self.customer_field, "") or "")
        pitch = render_pitch(
            predicted, max_propositions=self.max_propositions, proposition_chars=self.proposition_chars
        )
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
            reply = self.judge(customer=customer, ground_truth=gold_text, pitch=quote_data(pitch))
            if reply is None:
                errors += 1
                scores.append(0)
                lines.append(f"GT{i}: judge error ({self.errors[-1] if self.errors else 'unusable reply'}); scored 0.")
                continue
            scores.append(int(reply.score))
            lines.append(f"GT{i} ({int(reply.score)}/5) {label}: {reply.rationale or ''}")
        total = sum(scores) / (MAX_SCORE * len(ground_truth))
        read = min(len(predicted), self.max_propositions)
        header = (
            f"Coverage {sum(scores)}/{MAX_SCORE * len(ground_truth)} over {len(ground_truth)} reference propositions "
            f"(each judged against the whole pitch; the judge reads the first {self.max_propositions} propositions, "
            f"{self.proposition_chars} characters each: more earn nothing)"
        )
        if len(predicted) > read:
            header += f"; {read} of {len(predicted)} propositions read"
        if errors:
            header += f"; {errors} judge error(s)"
        feedback = header + ".\n" + "\n".join(lines)
        return dspy.Prediction(score=total, feedback=feedback, judge_errors=errors, item_scores=scores)
