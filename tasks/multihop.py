"""The ``multihop`` task: a multi-hop question -> a short answer (HotpotQA / MuSiQue style).

Data format (JSONL, one question per line), as in ``shared/data/multihop/questions.jsonl``::

    {"id": "...", "question": "...", "answers": ["accepted", "aliases"], "gold_titles": ["..."],
     "decomposition": [{"question": "...", "answer": "..."}],   # optional (MuSiQue rows)
     "docs": [...]}                                               # evidence paragraphs: never given to a model

Metric: token F1 (or exact match) after SQuAD/HotpotQA normalisation, the best over the accepted answers;
``make_metric("judge")`` gives an LLM verdict judge run under the ``judge_lm`` role.

Example:
    >>> from memento.tasks import get_task
    >>> task = get_task("multihop")
    >>> task.input_fields, task.output_fields
    (['question'], ['answer'])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import dspy

from memento.core.errors import ConfigError, DataError
from memento.tasks._jsonl import answer_list, jsonl_rows
from memento.tasks.task import Task, register_task

__all__ = ["AnswerMultiHopQuestion", "MultiHopTask"]

#: row keys copied onto examples (everything else, notably ``docs``, is dropped)
_KEEP = ("id", "gold_titles", "decomposition", "type", "level", "source", "cutoff")


class AnswerMultiHopQuestion(dspy.Signature):
    """Answer a question that needs several facts chained together (a bridge entity found first, then a fact
    about it, or a comparison of two entities). Work out each hop, then give the final answer
    only: the shortest span that answers the question exactly (a name, a date, a number, yes/no), without an
    explanation or a full sentence."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the final answer only, a few words at most")


@register_task
class MultiHopTask(Task):
    """Multi-hop question answering with accepted answers; F1 by default, EM or an LLM verdict judge on request.

    Args:
        score: ``"f1"`` (default) or ``"em"`` for the default metric's score.
    """

    name = "multihop"
    signature = AnswerMultiHopQuestion
    reason_before_answer = True
    metric_kinds = ("default", "f1", "em", "judge")

    def __init__(self, *, score: Literal["f1", "em"] = "f1") -> None:
        from memento.metrics.answer_match import AnswerMatch

        self._match = AnswerMatch(score=score)

    def load(self, path: str | Path, *, limit: int | None = None) -> list[dspy.Example]:
        """Read JSONL rows into examples with input ``question`` and labels ``answers`` (``docs`` is dropped).

        Raises:
            DataError: a line is not JSON or lacks ``question``/``answers``.
        """
        examples: list[dspy.Example] = []
        for where, row in jsonl_rows(path, kind="multi-hop", required=("question", "answers")):
            question = str(row["question"]).strip()
            if not question:
                raise DataError(f"{where}: a row needs a question and a non-empty answers list")
            data: dict[str, Any] = {"question": question, "answers": answer_list(row["answers"], where=where)}
            data.update({key: row[key] for key in _KEEP if key in row})
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
        """Token F1 (or EM) against the accepted answers; the feedback names the expected answer."""
        return self._match(example, pred, trace, pred_name, pred_trace)

    def make_metric(self, kind: str = "default", *, roles: Any | None = None) -> Any:
        """``default``/``f1``/``em``: answer match; ``judge``: an LLM verdict judge under ``roles.judge_lm``."""
        from memento.metrics.answer_match import AnswerMatch
        from memento.metrics.verdict_judge import VerdictJudge

        if kind == "default":
            return self.metric
        if kind in ("f1", "em"):
            return AnswerMatch(score="f1" if kind == "f1" else "em")
        if kind == "judge":
            return VerdictJudge(roles=roles)
        raise ConfigError(f"task {self.name!r} has no metric {kind!r}; available: {', '.join(self.metric_kinds)}")
