"""An LLM verdict judge as a DSPy metric: is the prediction the same answer as the reference?

Example:
    >>> import dspy
    >>> from memento.metrics.verdict_judge import VerdictJudge
    >>> judge = VerdictJudge(question_of=lambda ex: ex.question, reference_of=lambda ex: ex.answers)  # doctest: +SKIP
    >>> judge(dspy.Example(question="Capital of France?", answers=["Paris"]),
    ...       dspy.Prediction(answer="It is Paris.")).score  # doctest: +SKIP
    1.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from memento.core.untrusted import quote_data
from memento.metrics.judge import JudgeError, LLMJudge
from memento.signatures.judge_verdict import JudgeVerdict

__all__ = ["VerdictJudge"]


def _default_question(example: Any) -> str:
    return str(example.get("question", "")) if hasattr(example, "get") else ""


def _default_reference(example: Any) -> Any:
    return example.get("answers", example.get("answer", "")) if hasattr(example, "get") else ""


def _default_answer(pred: Any) -> str:
    return str(getattr(pred, "answer", "") or "")


class VerdictJudge(LLMJudge):
    """Binary correctness judged by the ``judge_lm`` against the reference answer(s).

    Args:
        question_of: the question text of an example (default ``example.question``).
        reference_of: the reference answer(s) of an example: a string or a list of accepted answers
            (default ``example.answers``).
        answer_of: the answer text of a prediction (default ``pred.answer``).
        roles, lm, memoize: see :class:`memento.metrics.judge.LLMJudge`.

    The score is 1.0 for ``correct``, 0.0 for ``incorrect`` and 0.0 (with a recorded judge error) when the reply
    is unusable.
    """

    signature = JudgeVerdict

    def __init__(
        self,
        *,
        question_of: Callable[[Any], str] = _default_question,
        reference_of: Callable[[Any], Any] = _default_reference,
        answer_of: Callable[[Any], str] = _default_answer,
        roles: Any | None = None,
        lm: dspy.LM | None = None,
        memoize: bool = True,
    ) -> None:
        super().__init__(roles=roles, lm=lm, memoize=memoize)
        self.question_of = question_of
        self.reference_of = reference_of
        self.answer_of = answer_of

    def validate(self, reply: dspy.Prediction) -> None:
        verdict = str(getattr(reply, "verdict", "")).strip().lower()
        if verdict not in ("correct", "incorrect"):
            raise JudgeError(f"verdict {verdict!r} is neither 'correct' nor 'incorrect'")

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        reference = self.reference_of(example)
        if isinstance(reference, list | tuple):
            reference = " | ".join(str(r) for r in reference)
        answer = self.answer_of(pred)
        if not answer.strip():
            return dspy.Prediction(score=0.0, feedback=f"No answer was given; expected {reference!r}.")
        reply = self.judge(
            question=self.question_of(example), reference_answer=str(reference), predicted_answer=quote_data(answer)
        )
        if reply is None:
            return dspy.Prediction(
                score=0.0, feedback=f"judge error: {self.errors[-1] if self.errors else 'unusable reply'}"
            )
        correct = str(reply.verdict).strip().lower() == "correct"
        verdict = "correct" if correct else f"incorrect (expected {reference!r})"
        return dspy.Prediction(
            score=float(correct), feedback=f"The judge found the answer {verdict}: {reply.rationale}"
        )
