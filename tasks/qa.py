"""The generic ``qa`` task: a free question to a concise answer with the URLs it rests on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy

from memento.tasks._jsonl import answer_list, jsonl_rows
from memento.tasks.task import Task, register_task

__all__ = ["AnswerQuestion", "QATask"]


class AnswerQuestion(dspy.Signature):
    """Answer the question concisely: give the shortest answer that is complete (a name, a date, a number or a
    short phrase)."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the concise final answer")
    sources: list[str] = dspy.OutputField(desc="URLs of the sources the answer rests on")


@register_task
class QATask(Task):
    """A free question -> a concise answer with its sources. Labels (``answers``) are optional."""

    name = "qa"
    signature = AnswerQuestion
    reason_before_answer = True

    def load(self, path: str | Path, *, limit: int | None = None) -> list[dspy.Example]:
        """JSONL rows ``{"question": ..., "answers": [...]?, "id"?, "cutoff"?}``."""
        examples: list[dspy.Example] = []
        for where, row in jsonl_rows(path, kind="question", required=("question",)):
            answers = answer_list(row.get("answers"), where=where, required=False)
            data: dict[str, Any] = {"question": row["question"], "answers": answers}
            for key in ("id", "cutoff"):
                if key in row:
                    data[key] = row[key]
            # a cutoff is a control argument every program receives (its web tools and memory honour it)
            examples.append(dspy.Example(**data).with_inputs("question", *(["cutoff"] if data.get("cutoff") else [])))
            if limit is not None and len(examples) >= limit:
                break
        return examples

    def metric(
        self,
        example: dspy.Example,
        pred: dspy.Prediction,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> dspy.Prediction:
        """Exact match against any accepted answer after normalisation (case, punctuation, articles)."""
        from memento.tasks._text import normalize_answer

        answers = [normalize_answer(a) for a in example.get("answers", []) or []]
        got = normalize_answer(str(getattr(pred, "answer", "") or ""))
        ok = bool(answers) and got in answers
        feedback = "correct" if ok else f"expected one of {example.get('answers')!r}, got {pred.answer!r}"
        return dspy.Prediction(score=float(ok), feedback=feedback)
