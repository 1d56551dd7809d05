"""The research-program base, the method registry and the closed-book / few-shot baselines."""

from __future__ import annotations

import copy
import datetime as dt

import dspy
import pytest

from memento.core.config import load_settings
from memento.core.errors import ConfigError, MementoError
from memento.core.types import Trajectory
from memento.programs.baselines import ClosedBook, FewShot
from memento.programs.registry import build_program, method_names, register_method
from memento.programs.research_program import EmptyQuestionError, ResearchProgram
from memento.tasks import get_task


def test_closed_book_returns_task_outputs_and_trajectory(engine, lm):
    engine.when("Who wrote Dune?", answer="Frank Herbert", sources=["https://example.org/dune"])
    program = ClosedBook(get_task("qa"))
    pred = program(question="Who wrote Dune?", answers=["Frank Herbert"], task_id="t-1", cutoff="2020-05-01")
    assert pred.answer == "Frank Herbert"
    assert pred.sources == ["https://example.org/dune"]
    traj = pred.trajectory
    assert isinstance(traj, Trajectory)
    assert traj.task_id == "t-1" and traj.method == "closed_book"
    assert traj.inputs == {"question": "Who wrote Dune?"}  # labels are not inputs
    assert traj.prediction == {"answer": "Frank Herbert", "sources": ["https://example.org/dune"]}
    assert traj.usage.lm_calls == 1 == len(engine.calls)
    assert traj.usage.by_stage["answer"].lm_calls == 1
    assert traj.usage.prompt_tokens > 0
    assert traj.timings["total_s"] >= traj.timings["answer_s"] > 0
    assert traj.usage.searches == 0


def test_context_reaches_the_prompt(engine, lm):
    ClosedBook("qa")(question="Q?", context="Prefer official sources.")
    assert "Prefer official sources." in engine.calls[0].inputs["context"]


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_empty_question_is_refused(lm, bad):
    with pytest.raises(EmptyQuestionError, match="non-empty 'question'") as info:
        ClosedBook("qa")(question=bad)
    assert isinstance(info.value, MementoError)


def test_bad_cutoff_is_refused(lm):
    with pytest.raises(ConfigError, match="invalid cutoff"):
        ClosedBook("qa")(question="Q?", cutoff="yesterday")


def test_unparseable_final_answer_is_recorded_not_raised(engine, lm):
    engine.when("Who wrote Dune?", raw="garbage without any field markers")
    pred = ClosedBook("qa")(question="Who wrote Dune?")
    assert pred.answer == "" and pred.sources == []
    assert pred.trajectory.error and "AdapterParseError" in pred.trajectory.error


def test_deepcopy_shares_task_memory_and_roles_but_copies_predictors(lm):
    memory = object()
    program = ClosedBook("qa", memory=memory)
    clone = copy.deepcopy(program)
    assert clone.memory is memory and clone.task is program.task
    assert clone.answer is not program.answer
    clone.answer.signature = clone.answer.signature.with_instructions("changed")
    assert program.answer.signature.instructions != "changed"
    assert [n for n, _ in clone.named_predictors()] == ["answer"]


def test_save_and_load_round_trip(tmp_path, lm):
    program = ClosedBook("qa")
    program.answer.signature = program.answer.signature.with_instructions("Answer tersely.")
    path = tmp_path / "program.json"
    program.save(str(path))
    fresh = ClosedBook("qa")
    fresh.load(str(path))
    assert fresh.answer.signature.instructions == "Answer tersely."


def test_few_shot_uses_k_demos_from_trainset(engine, lm):
    trainset = [dspy.Example(question=f"Q{i}?", answers=[f"A{i}"]).with_inputs("question") for i in range(8)]
    program = FewShot("qa", trainset=trainset, k=5)
    assert len(program.answer.demos) == 5
    program(question="New question?")
    prompt = engine.calls[0].prompt
    assert sum(f"Q{i}?" in prompt for i in range(8)) == 5


def test_few_shot_without_trainset_is_refused():
    with pytest.raises(ConfigError, match="trainset"):
        FewShot("qa", trainset=[])


def test_registry_builds_and_lists_methods(lm):
    settings = load_settings()
    assert {"closed_book", "few_shot"} <= set(method_names())
    program = build_program("closed_book", task="qa", settings=settings)
    assert isinstance(program, ClosedBook)
    with pytest.raises(ConfigError, match="unknown method 'nope'; available: .*closed_book"):
        build_program("nope", task="qa", settings=settings)
    with pytest.raises(ConfigError, match="few_shot needs a training set"):
        build_program("few_shot", task="qa", settings=settings)


def test_register_method_adds_a_builder(lm, monkeypatch):
    from memento.programs import registry

    # the registry is process-wide: the test's method must not outlive it (test_method_knobs reads every builder)
    monkeypatch.setattr(registry, "_BUILDERS", dict(registry._BUILDERS))
    monkeypatch.setattr(registry, "_INFO", dict(registry._INFO))

    class Echo(ResearchProgram):
        method = "echo_test"

        def research(self, call):
            return {"answer": call.inputs["question"].upper(), "sources": [str(call.cutoff)]}

    @register_method("echo_test")
    def _build(*, task, settings, roles=None, trainset=None, memory_dir=None):
        return Echo(task)

    program = build_program("echo_test", task="qa", settings=load_settings())
    pred = program(question="abc", cutoff=dt.date(2021, 3, 4))
    assert pred.answer == "ABC" and pred.sources == ["2021-03-04"]


def test_program_needing_web_without_factory_is_refused():
    class NeedsWeb(ResearchProgram):
        needs_web = True

    with pytest.raises(ConfigError, match="needs a `web` factory"):
        NeedsWeb("qa")
