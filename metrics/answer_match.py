"""Exact match and token F1 against accepted answers, normalised as in the SQuAD/HotpotQA evaluation scripts.

Example:
    >>> from memento.metrics.answer_match import exact_match, token_f1
    >>> exact_match("The Eiffel Tower!", ["eiffel tower"])
    1.0
    >>> round(token_f1("Paris, France", ["Paris"]), 3)
    0.667
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

import dspy

from memento.tasks._text import normalize_answer

__all__ = ["exact_match", "token_f1", "AnswerMatch"]

_SPECIAL = {"yes", "no", "noanswer"}


def _f1_one(prediction: str, gold: str) -> float:
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    # HotpotQA: yes/no/noanswer only match themselves
    if (pred_norm in _SPECIAL or gold_norm in _SPECIAL) and pred_norm != gold_norm:
        return 0.0
    pred_tokens, gold_tokens = pred_norm.split(), gold_norm.split()
    if not pred_tokens or not gold_tokens:  # SQuAD v2: an answer that normalises to nothing matches only nothing
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised accepted answer, else 0.0."""
    if not (prediction or "").strip():
        return 0.0
    got = normalize_answer(prediction)
    return float(any(got == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """The best token-level F1 of the prediction against the accepted answers (0.0 when there are none)."""
    if not (prediction or "").strip():
        return 0.0
    return max((_f1_one(prediction, a) for a in answers), default=0.0)


class AnswerMatch:
    """A DSPy metric comparing ``pred.<answer_field>`` with ``example.<answers_field>`` (a list or a string).

    Args:
        score: ``"f1"`` (default) or ``"em"``: which measure is the score; both appear in the feedback.
        answer_field: the prediction's answer field.
        answers_field: the example's accepted answers.

    Example:
        >>> import dspy
        >>> metric = AnswerMatch(score="em")
        >>> metric(dspy.Example(answers=["New York"]), dspy.Prediction(answer="new york")).score
        1.0
    """

    def __init__(
        self,
        *,
        score: Literal["f1", "em"] = "f1",
        answer_field: str = "answer",
        answers_field: str = "answers",
    ) -> None:
        if score not in ("f1", "em"):
            raise ValueError(f"score must be 'f1' or 'em', not {score!r}")
        self.score = score
        self.answer_field = answer_field
        self.answers_field = answers_field
        self.__name__ = f"answer_{score}"

    def answers(self, example: Any) -> list[str]:
        value = example.get(self.answers_field) if hasattr(example, "get") else None
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value]

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        answers = self.answers(example)
        got = str(getattr(pred, self.answer_field, "") or "")
        em, f1 = exact_match(got, answers), token_f1(got, answers)
        value = em if self.score == "em" else f1
        if em == 1.0:
            feedback = f"Correct: {got!r} matches the expected answer."
        elif not got.strip():
            feedback = f"No answer was given; expected {' or '.join(map(repr, answers))}."
        else:
            feedback = (
                f"Expected {' or '.join(map(repr, answers))}, got {got!r} (exact match {em:.0f}, token F1 {f1:.2f}). "
                "Give only the answer itself: a name, date, number or short phrase."
            )
        return dspy.Prediction(score=value, feedback=feedback, em=em, f1=f1)
