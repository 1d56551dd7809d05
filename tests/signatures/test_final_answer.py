"""The final-answer instructions agree with the outputs (issue 18, item 2): URLs are asked for only where the task's
signature has ``sources``, the closed-book prompt promises no findings and no URLs, and short answers built from
findings reason first (in the research programs' final predictor only)."""

from __future__ import annotations

import dspy
import pytest

from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.baselines import ClosedBook, FewShot
from memento.signatures.final_answer import answer_signature
from memento.tasks import get_task
from memento.web.search_result import SearchResult
from memento.web.web_tools import WebTools

TASKS = ("qa", "multihop", "legal", "sales", "opinion")


class _Backend:
    def search(self, query, k=10, before=None, undated="keep"):
        return [SearchResult(url="https://ex.org/a", title="A", snippet="a fact")]


def _prompt(sig: type[dspy.Signature]) -> str:
    values = {name: "x" for name in sig.input_fields}
    return "\n".join(str(m["content"]) for m in dspy.ChatAdapter().format(sig, demos=[], inputs=values))


@pytest.mark.parametrize("name", TASKS)
def test_urls_are_asked_for_only_where_the_signature_has_sources(name):
    task = get_task(name)
    has_sources = "sources" in task.signature.output_fields
    with_findings = _prompt(answer_signature(task, findings=True))
    assert ("cite the URLs" in with_findings) is has_sources
    closed = _prompt(answer_signature(task, findings=False))
    assert "URL" not in closed and "cite" not in closed
    assert "findings" not in closed.lower()  # a closed-book answer has no research findings to use
    react = _prompt(answer_signature(task, findings=False, suffix="ReAct"))
    assert ("URLs of the sources" in react) is has_sources  # a tool-using agent can cite what it read


def test_closed_book_qa_prompt_asks_for_no_sources_it_cannot_have():
    sig = answer_signature(get_task("qa"), findings=False)
    assert "leave empty" in sig.output_fields["sources"].json_schema_extra["desc"]
    assert "research findings" not in sig.instructions and "URL" not in sig.instructions


@pytest.mark.parametrize("name", TASKS)
def test_short_answers_reason_first_in_the_research_predictor_only(name):
    task = get_task(name)
    research = answer_signature(task, findings=True)
    closed = answer_signature(task, findings=False)
    if name in ("qa", "multihop"):
        assert list(research.output_fields)[0] == "reasoning"
        assert "reasoning" not in task.signature.output_fields  # the task signature keeps its shape
        assert list(closed.output_fields) == task.output_fields  # so do the baselines
    else:
        assert list(research.output_fields) == task.output_fields


def test_research_program_reasons_first_and_returns_only_the_task_outputs(engine, lm):
    engine.when(predicate=lambda c: "sub_questions" in c.output_fields, sub_questions=[])
    why = "Nolan was born in London"
    engine.when(predicate=lambda c: "research_findings" in c.inputs, reasoning=why, answer="London")
    aet = AdaptiveExplorationTree("multihop", web=lambda cutoff, undated: WebTools(_Backend(), cutoff=cutoff))
    assert list(aet.answer.signature.output_fields) == ["reasoning", "answer"]
    pred = aet(question="Which city was the director of Inception born in?")
    assert pred.answer == "London" and "reasoning" not in pred.keys()
    assert any(why in note for note in pred.trajectory.notes)


def test_baselines_keep_the_task_signature_shape():
    closed = ClosedBook("multihop").answer.signature
    assert list(closed.output_fields) == ["answer"]
    demo = dspy.Example(question="q", answers=["a"])
    few = FewShot("multihop", trainset=[demo], k=1).answer.signature
    assert list(few.output_fields) == ["answer"]
