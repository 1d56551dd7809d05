"""Feedback per predictor for GEPA: the module's score, with the text written for the predictor being optimised.

GEPA calls a metric with ``pred_name`` (the predictor it is about to rewrite) and ``pred_trace`` (that predictor's
inputs and outputs on one example). :class:`PredictorFeedback` wraps a task metric and keeps its score (GEPA needs the
module-level score) but writes the feedback each predictor can act on:

* **planners** (``decompose``, ``reflect``, the CBR ``planner``): which target elements no sub-question covered.
  Targets are a MuSiQue row's gold decomposition (each hop's answer) when present, checked against the sub-questions
  and their answers; otherwise an ``assess`` callable (the trainer's ``AssessCoverage`` signature by default, on the
  current LM) splits the expected answer into target elements and says which were covered.
* **the solver** (``solver.agent.*``, ``executor.agent.*``): its node's outcome (status, failure, answer) and the
  sources it cited.
* **the answer predictor** (``answer``): whether the error is one of format (a missing output, a run error, the right
  answer buried in a longer reply) or of content (a well-formed but wrong answer; whether the findings held the
  expected answer).

Any other predictor (``synthesize``...) gets the task metric's own feedback.

Example:
    >>> import dspy
    >>> from memento.metrics.predictor_feedback import PredictorFeedback
    >>> from memento.tasks import get_task
    >>> metric = PredictorFeedback(get_task("multihop").metric)
    >>> out = metric(dspy.Example(question="q", answers=["Paris"]), dspy.Prediction(answer="It is Paris, France"),
    ...              None, "answer", None)
    >>> out.feedback.splitlines()[0]
    'Format error: the expected answer is inside a longer reply; give only the answer span.'
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import dspy

from memento.core.error_policy import handle_error
from memento.metrics.as_float import score_of
from memento.tasks._text import normalize_answer

__all__ = ["PredictorFeedback", "predictor_role", "gold_decomposition_coverage", "assess_coverage"]

logger = logging.getLogger(__name__)

#: a coverage assessor: ``(task text, expected text, sub-questions text) -> [(target, covered, correct)]``
Assessor = Callable[[str, str, str], list[tuple[str, bool, bool]]]

_PLANNERS = ("decompose", "reflect", "planner")
_SOLVERS = ("solver", "executor")


def predictor_role(pred_name: str | None) -> str:
    """``planner``, ``solver``, ``answer`` or ``other`` for a predictor's dotted name (``solver.agent.react``...)."""
    if not pred_name:
        return "other"
    parts = pred_name.split(".")
    if parts[0] in _SOLVERS:
        return "solver"
    if parts[-1] in _PLANNERS or parts[0] in _PLANNERS:
        return "planner"
    if parts[0] == "answer":
        return "answer"
    return "other"


def _tokens(text: Any) -> set[str]:
    return set(normalize_answer(str(text or "")).split())


def _mentions(haystack: str, needle: str, *, recall: float = 0.6) -> bool:
    """Whether most content tokens of ``needle`` occur in ``haystack`` (normalised as in SQuAD)."""
    want = _tokens(needle)
    if not want:
        return False
    return len(want & _tokens(haystack)) / len(want) >= recall


def _nodes(pred: Any) -> list[Any]:
    trajectory = getattr(pred, "trajectory", None)
    return [n for n in getattr(trajectory, "nodes", []) or [] if n.parent_id is not None]


def gold_decomposition_coverage(example: Any, pred: Any) -> list[tuple[str, str, bool]] | None:
    """``(hop question, hop answer, covered)`` per hop of the example's gold decomposition, or ``None`` without one.

    A hop is covered when some sub-question of the run, or the answer it obtained, names the hop's answer.
    """
    steps = example.get("decomposition") if hasattr(example, "get") else None
    if not isinstance(steps, list) or not steps:
        return None
    texts = [f"{n.question} {n.answer or ''}" for n in _nodes(pred)]
    out = []
    for step in steps:
        if not isinstance(step, dict) or not step.get("answer"):
            continue
        answer = str(step["answer"])
        out.append((str(step.get("question", "")), answer, any(_mentions(t, answer) for t in texts)))
    return out or None


def assess_coverage(task: str, expected: str, sub_questions: str, *, lm: Any = None) -> list[tuple[str, bool, bool]]:
    """The trainer's coverage assessment (``AssessCoverage``) as ``[(target, covered, correct)]``, on ``lm``."""
    from memento.signatures import AssessCoverage

    reply = dspy.Predict(AssessCoverage)(task=task, expected=expected, sub_questions=sub_questions, lm=lm)
    out = []
    for item in reply.coverage or []:
        get = item.get if isinstance(item, dict) else lambda k, d=None, i=item: getattr(i, k, d)
        out.append((str(get("target", "")), bool(get("covered", False)), bool(get("correct", False))))
    return out


def _expected_text(example: Any, feedback: str) -> str:
    inputs = set(getattr(example, "_input_keys", None) or ())
    labels = {k: v for k, v in dict(example.items()).items() if k not in inputs}
    labels.pop("id", None)
    labels.pop("cutoff", None)
    return "; ".join(f"{k}: {v}" for k, v in labels.items()) + f"\nJudge's feedback: {feedback}"


class PredictorFeedback:
    """A task metric for GEPA whose feedback depends on ``pred_name`` (the score stays the module's).

    Args:
        metric: the task metric ``(example, pred, trace, pred_name, pred_trace) -> Prediction(score, feedback)``.
        assess: how planners learn which targets were covered when the example has no gold decomposition:
            ``True`` (default) runs the trainer's ``AssessCoverage`` signature on ``lm``, ``False`` turns that LLM
            call off, a callable ``(task, expected, sub_questions) -> [(target, covered, correct)]`` replaces it.
        lm: the LM of the coverage assessment (GEPA's ``reflection_lm``); ``None`` uses the current LM.

    Example:
        >>> metric = PredictorFeedback(task.metric)  # doctest: +SKIP
        >>> dspy.GEPA(metric=metric, ...)  # doctest: +SKIP
    """

    def __init__(self, metric: Callable[..., Any], *, assess: bool | Assessor = True, lm: Any = None) -> None:
        self.metric = metric
        self.lm = lm
        if assess is True:
            self.assess: Assessor | None = lambda task, expected, subs: assess_coverage(task, expected, subs, lm=lm)
        else:
            self.assess = assess or None
        self.__name__ = getattr(metric, "__name__", type(metric).__name__)

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        base = self.metric(example, pred, trace, pred_name, pred_trace)
        score = score_of(base)
        feedback = str(getattr(base, "feedback", "") or f"This run scored {score:.2f}.")
        role = predictor_role(pred_name)
        if role == "planner":
            text = self.planner_feedback(example, pred, feedback)
        elif role == "solver":
            text = self.solver_feedback(pred, pred_trace)
        elif role == "answer":
            text = self.answer_feedback(example, pred, score)
        else:
            return dspy.Prediction(score=score, feedback=feedback)
        return dspy.Prediction(score=score, feedback=f"{text}\nOverall ({score:.2f}): {feedback}")

    # -- per role ------------------------------------------------------------------------------------------------
    def planner_feedback(self, example: Any, pred: Any, feedback: str) -> str:
        """Which target elements no sub-question covered."""
        hops = gold_decomposition_coverage(example, pred)
        if hops is not None:
            missed = [(q, a) for q, a, covered in hops if not covered]
            head = f"Sub-questions covered {len(hops) - len(missed)} of {len(hops)} steps of the gold decomposition."
            if not missed:
                return head
            lines = [f"- {q or 'a step'} (answer: {a})" for q, a in missed]
            return head + " No sub-question covered:\n" + "\n".join(lines)
        if self.assess is None:
            return "No target coverage is available for this example."
        nodes = _nodes(pred)
        subs = "\n".join(f"- {n.question} -> {n.answer or '(' + n.status + ')'}" for n in nodes) or "(none)"
        task_text = str(getattr(getattr(pred, "trajectory", None), "task_text", "") or "")
        try:
            targets = self.assess(task_text, _expected_text(example, feedback), subs)
        except Exception as exc:  # a coverage assessment that fails leaves the module feedback only
            handle_error(exc, where="coverage assessment for GEPA feedback", log=logger)
            return "The coverage assessment failed; no target coverage is available."
        uncovered = [t for t, covered, _ in targets if not covered]
        wrong = [t for t, covered, correct in targets if covered and not correct]
        report = [f"Sub-questions covered {len(targets) - len(uncovered)} of {len(targets)} target elements."]
        if uncovered:
            report.append("No sub-question covered: " + "; ".join(uncovered))
        if wrong:
            report.append("Covered but answered wrongly: " + "; ".join(wrong))
        return "\n".join(report)

    def solver_feedback(self, pred: Any, pred_trace: Any) -> str:
        """The outcome of the node(s) this solver call served, with the sources cited."""
        questions = []
        for _predictor, inputs, _outputs in pred_trace or []:
            question = (inputs or {}).get("question") if isinstance(inputs, dict) else None
            if question and question not in questions:
                questions.append(str(question))
        nodes = _nodes(pred)
        lines = []
        for question in questions:
            node = next((n for n in nodes if n.question == question), None)
            if node is None:
                continue
            cited = ", ".join(e.url for e in node.evidence) or "no source"
            if node.status == "failed":
                lines.append(f"Sub-question {question!r} failed: {node.error or 'no answer'}. Cited: {cited}.")
            else:
                lines.append(f"Sub-question {question!r} was answered {node.answer!r}, citing: {cited}.")
        return "\n".join(lines) or "The sub-question this step served is not in the run's tree."

    def answer_feedback(self, example: Any, pred: Any, score: float) -> str:
        """Format errors (missing outputs, run errors, the answer buried in a longer reply) versus content errors."""
        trajectory = getattr(pred, "trajectory", None)
        if error := getattr(trajectory, "error", None):
            return f"Format error: the run failed before a usable answer ({error})."
        outputs = dict(getattr(trajectory, "prediction", {}) or {}) or {
            k: v for k, v in dict(pred.items()).items() if k != "trajectory"
        }
        empty = [k for k, v in outputs.items() if v in (None, "", [], {})]
        if empty:
            return f"Format error: no value for {', '.join(empty)}."
        if score >= 1.0:
            return "Correct answer in the expected format."
        answers = [str(a) for a in (example.get("answers") or [])] if hasattr(example, "get") else []
        given = str(outputs.get("answer", "") or "")
        if given and any(_mentions(given, a, recall=1.0) for a in answers):
            return "Format error: the expected answer is inside a longer reply; give only the answer span."
        in_findings = answers and any(
            _mentions(f"{n.question} {n.answer or ''}", a, recall=1.0) for n in _nodes(pred) for a in answers
        )
        if in_findings:
            return "Content error: the findings contained the expected answer, but the final answer did not use it."
        return "Content error: the answer is well-formed but wrong."
