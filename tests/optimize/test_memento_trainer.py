"""MEMENTO learning loop: two batches of three multi-hop questions with a scripted LM, memory versions, rollback; each
test runs on both backends (a memory directory, a PostgreSQL database: the ``location`` fixture)."""

from __future__ import annotations

import copy
import filecmp
import sys
from pathlib import Path
from typing import Any

import dspy
import pytest

import memento.tasks.multihop  # noqa: F401  (registers the task)
from memento.core.config import Budgets, load_settings
from memento.core.errors import ConfigError, DataError, MemoryFrozenError
from memento.memory.canonicalizer import Canonicalizer
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.optimize.memento_trainer import MementoTrainer
from memento.programs.memento_program import Memento, injected_items
from memento.tasks.task import get_task
from memento.testing import scripted_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402


def _setup(tmp_path: Path, location, *, exploration: int = 0):
    corpus, questions = write_data(tmp_path / "data")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    from memento.web.factory import web_tools_factory

    task = get_task("multihop")
    memory = MementoMemory(location("mem"), embedder=HashingEmbedder())
    program = Memento(
        task,
        memory=memory,
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=2, total_questions=3, steps_per_question=3, exploration=exploration),
        threads=2,
    )
    return task, memory, program, task.load(questions)


def _trainer(program, task, memory):
    return MementoTrainer(
        program,
        task.metric,
        memory,
        batch_size=3,
        threads=2,
        canonicalizer=Canonicalizer(memory.db, embedder=HashingEmbedder(), threshold=0.8),
    )


def _tree(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def test_two_batches_fill_every_store_and_version_rollback_freeze_copy(tmp_path, location):
    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    assert len(trainset) == 6
    reports = _trainer(program, task, memory).fit(trainset)

    assert [r.version for r in reports] == [1, 2] and memory.version == 2
    stats = memory.stats()
    assert stats["craft"]["entries"] == 2
    assert stats["decomposition"]["rules"] == 1 and stats["web_action"]["rules"] == 1
    assert stats["facts"]["facts"] == 1
    # batch 1 adds; batch 2 merges the repeated proposals (counts summed) and reinforces rule 1
    m3 = memory.web_action.all()[0]
    assert m3.support >= 2 and m3.created_batch == 1 and m3.updated_batch == 2
    fact = memory.facts.all()[0]
    assert fact.support == 6 and set(fact.provenance) == {f"q{i}" for i in range(1, 7)}
    # the report carries Tables 15-16 and the behaviour figures
    r1, r2 = reports
    assert r1.examples == 3 and r1.valid_runs == 3 and r1.mean_score is not None
    assert r1.chars["craft"].added > 0 and r1.chars["web_action"].after > 0 and r2.chars["craft"].added == 0
    assert r1.rules["decomposition"].rules == 1 and r2.rules["web_action"].total_support == m3.support
    assert r1.questions_per_sample == 2.0 and r1.searches == 6 and r1.lm_calls > 0 and r1.train_lm_calls > 0
    assert r1.steps_per_question == 2.0
    # batch 2 runs read batch 1's memory (never their own), and credit the injected M2 rule
    rule = memory.decomposition.all()[0]
    assert rule.support + rule.contradiction >= 3
    decompose_prompts = [c for c in engine.calls if "sub_questions" in c.output_fields]
    assert any("each person's office" in c.prompt for c in decompose_prompts[3:])
    assert all("each person's office" not in c.prompt for c in decompose_prompts[:3])

    # rollback to version 1 gives an export identical to version 1's
    memory.export(tmp_path / "v1", version=1)
    memory.rollback(1)
    memory.export(tmp_path / "v1_after")
    assert _tree(tmp_path / "v1", tmp_path / "v1_after")
    assert memory.db.integrity_check() == "ok"

    # a deep copy of the program shares the memory: a write through the copy is visible in the original
    clone = copy.deepcopy(program)
    assert clone.memory is memory and clone.decompose is not program.decompose
    clone.memory.facts.add("Ed Wood", "Ed Wood was born in Poughkeepsie.")
    assert "Poughkeepsie" in memory.known_facts("Where was Ed Wood born?")

    # after freeze() writes raise, including through the trainer
    memory.freeze()
    with pytest.raises(MemoryFrozenError):
        memory.web_action.add("A new rule after freezing.")
    with pytest.raises(ConfigError, match="frozen"):
        _trainer(program, task, memory)


def test_resume_skips_done_batches_and_refuses_other_data(tmp_path, location):
    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    trainer = _trainer(program, task, memory)
    trainer.fit(trainset[:3])
    calls = len(engine.calls)
    again = trainer.fit(trainset[:3])
    assert len(engine.calls) == calls and again[0].version == 1 and memory.version == 1
    with pytest.raises(DataError, match="different examples"):
        trainer.fit(list(reversed(trainset[:3])))


def test_trajectory_notes_injected_items_and_own_memory_is_hidden(tmp_path, location):
    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    own = memory.decomposition.add("When asked about q1, add a sub-question about q1.", provenance=["q1"], support=3)
    other = memory.decomposition.add("When a county is named, add a sub-question for its state.", provenance=["q9"])
    pred = program(question=trainset[0].question, task_id="q1")
    items = injected_items(pred.trajectory)
    assert other.id in items["decomposition"] and own.id not in items["decomposition"]
    assert pred.trajectory.memory_version == 0
    pred = program(question=trainset[0].question, task_id="q2")
    assert own.id in injected_items(pred.trajectory)["decomposition"]


def test_exploration_runs_when_nothing_relevant_and_joins_the_batch_plan(tmp_path, location):
    # M1 holds an entry, but the relevance check finds nothing applicable: that is a cold start too (Appendix D.1)
    nothing = {"relevant": True}  # while set, the relevance check finds no applicable entry
    engine = make_engine(
        first=[{"predicate": lambda c: nothing["relevant"] and "relevant" in c.output_fields, "relevant": []}]
    )
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location, exploration=2)
    with memory.transaction(batch=0) as tx:
        memory.craft.add("For films, check the studio's release notes.", provenance=["old"], tx=tx)
    pred = program(question=trainset[0].question, task_id="q1")
    [cold] = pred.trajectory.explorations
    assert cold.when == "cold_start" and cold.steps == 2 and len(cold.insights) == 2
    # the exploration's tool calls and steps are part of the trajectory (lossless), tagged as exploration
    explore_calls = [c for c in pred.trajectory.tool_calls if c.node_id == "explore:cold_start"]
    explore_steps = [s for s in pred.trajectory.steps if s.node_id == "explore:cold_start"]
    assert explore_calls and {c.kind for c in explore_calls} <= {"search_web", "scrape"}
    assert len(explore_steps) >= len(explore_calls) and all(s.thought for s in explore_steps)
    assert len(memory.craft) == 1  # nothing is written during the forward pass
    decompose = [c for c in engine.calls if "sub_questions" in c.output_fields][-1]
    assert "Open the encyclopedia page" in decompose.inputs["context"]  # the insights guide this call

    # a relevant entry: no cold start, the whole budget is spent at the end of the sample (training only)
    nothing["relevant"] = False
    pred = program(question=trainset[1].question, task_id="q2")
    assert [e.when for e in pred.trajectory.explorations] == ["end_of_sample"]
    assert pred.trajectory.explorations[0].steps == 2

    # training commits what exploration found with the batch, as M1 deltas backed by the runs
    nothing["relevant"] = True
    reports = _trainer(program, task, memory).fit(trainset[:3])
    texts = {e.text: e for e in memory.craft.all()}
    assert "For films, check the studio's release notes." in texts  # never rewritten away
    explored = texts["Open the encyclopedia page of the entity rather than trusting snippets."]
    assert set(explored.provenance) == {"q1", "q2", "q3"} and explored.support == 3
    assert reports[0].distillers["craft_insights"].seen == 3


def test_frozen_memory_explores_without_write_back(tmp_path, location):
    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location, exploration=1)
    memory.freeze()
    pred = program(question=trainset[0].question, task_id="q1")
    assert len(memory.craft) == 0
    assert [(e.when, e.steps) for e in pred.trajectory.explorations] == [("cold_start", 1)]
    decompose = [c for c in engine.calls if "sub_questions" in c.output_fields][-1]
    assert "Open the encyclopedia page" in decompose.inputs["context"]


def test_memento_method_opens_memory_frozen(tmp_path, location):
    from memento.core.errors import DataError as _DataError
    from memento.programs.registry import build_program

    corpus, _ = write_data(tmp_path / "data")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    with pytest.raises(_DataError, match="no trained memory"):
        build_program("memento", task="qa", settings=settings, memory_dir=location("none"))
    memory = MementoMemory(location("mem"))
    memory.web_action.add("Quote exact names.")
    memory.commit_version(batch=1)
    program = build_program("memento", task="qa", settings=settings, memory_dir=location("mem"))
    assert isinstance(program, Memento) and isinstance(program.memory, MementoMemory)
    assert program.memory.frozen and program.memory.version == 1
    with pytest.raises(MemoryFrozenError):
        program.memory.web_action.add("Another rule text.")
    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    pred = program(question="Which state is Albany County in?", task_id="x")
    solver = [c for c in engine.calls if "next_tool_name" in c.output_fields][0]
    assert "Quote exact names." in solver.prompt and pred.trajectory.memory_version == 1


def test_phase_c_credits_injected_rules_by_outcome_and_skips_failed_runs(tmp_path, location):
    engine = make_engine(
        first=[
            # no LLM rule operations: only the outcome credit of Phase C changes M2
            {"predicate": lambda c: "judged_run" in c.inputs, "operations": []},
            # q3's final answer is unparseable: its run fails and is excluded from Phase C
            {
                "predicate": lambda c: (
                    "research_findings" in c.inputs and "Arthur Penn" in c.inputs.get("question", "")
                ),
                "raw": "garbage without any field markers",
            },
        ]
    )
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    rule = memory.decomposition.add("When a place is named, add a sub-question for its state.", provenance=["old"])
    trainset = [trainset[0], trainset[1], trainset[2]]  # q1, q2 answered right; q3 fails
    [report] = _trainer(program, task, memory).fit(trainset)
    assert report.failed_runs == 1 and report.valid_runs == 2 and report.mean_score == 1.0
    after = memory.decomposition.get(rule.id)
    assert (after.support, after.contradiction) == (2, 0)
    assert after.provenance == ["old", "q1", "q2"] and after.updated_batch == 1
    coverage_calls = [c for c in engine.calls if "coverage" in c.output_fields]
    assert len(coverage_calls) == 2 and all("Arthur Penn" not in c.prompt for c in coverage_calls)


def test_phase_c_contradicts_rules_of_wrong_answers(tmp_path, location):
    engine = make_engine(first=[{"predicate": lambda c: "judged_run" in c.inputs, "operations": []}])
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    rule = memory.decomposition.add("When a person is named, add a sub-question for their birthplace.")
    [report] = _trainer(program, task, memory).fit([trainset[2], trainset[4], trainset[1]])  # q3, q5 wrong; q2 right
    assert report.mean_score == pytest.approx(1 / 3, abs=1e-3)
    after = memory.decomposition.get(rule.id)
    assert (after.support, after.contradiction, after.status) == (1, 2, "downweighted")


def test_trainer_refuses_mismatched_memory_and_bad_data(tmp_path, location):
    task, memory, program, trainset = _setup(tmp_path, location)
    other = MementoMemory(location("other"))
    with pytest.raises(ConfigError, match="another memory"):
        MementoTrainer(program, task.metric, other)
    trainer = _trainer(program, task, memory)
    with pytest.raises(DataError, match="empty"):
        trainer.fit([])
    with pytest.raises(DataError, match="distinct ids"):
        trainer.fit([trainset[0], trainset[0]])
    with pytest.raises(ConfigError, match="batch_size"):
        MementoTrainer(program, task.metric, memory, batch_size=0)


def test_runs_finished_before_an_interruption_are_not_run_again(tmp_path, location, monkeypatch):
    from memento.core.errors import Cancelled

    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    trainer = _trainer(program, task, memory)
    original = program.forward
    asked: list[str] = []

    def interrupted(**kwargs):
        asked.append(kwargs["question"])
        if kwargs["question"] == trainset[2].question:
            raise Cancelled("cancelled by SIGTERM")  # the signal arrives while the third run starts
        return original(**kwargs)

    monkeypatch.setattr(program, "forward", interrupted)
    with pytest.raises(Cancelled):
        trainer.fit(trainset[:3])
    assert memory.version == 0 and len(memory.db.checkpoints("trainer/batch/00001/run/")) == 2

    def forward(**kwargs: Any) -> Any:
        asked.append(kwargs["question"])
        return original(**kwargs)

    monkeypatch.setattr(program, "forward", forward)
    asked.clear()
    (report,) = trainer.fit(trainset[:3])
    assert asked == [trainset[2].question]  # only the run that had not finished
    assert report.version == 1 and memory.version == 1
    assert memory.db.checkpoints("trainer/batch/00001/run/") == {}  # the batch's checkpoint holds every run
    assert len(memory.db.checkpoint("trainer/batch/00001")["runs"]) == 3


def test_runs_a_remote_executor_returned_are_checkpointed_by_the_trainer(tmp_path, location):
    """As the Ray executor does (``RayExecutor.map``): each run comes back through ``on_result`` as its task returns,
    then a cancel stops the rest; a rerun asks the executor only for the runs that had not come back."""
    from memento.core.errors import Cancelled
    from memento.optimize.memento_trainer import forward_run

    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    task, memory, program, trainset = _setup(tmp_path, location)
    trainer = _trainer(program, task, memory)
    sent: list[list[str]] = []

    def remote_forward(jobs, on_result=None, *, stop_after=None):
        sent.append([task_id for _inputs, _cutoff, task_id in jobs])
        runs = []
        for j, job in enumerate(jobs):
            if stop_after is not None and j == stop_after:
                raise Cancelled("cancelled by SIGTERM")
            runs.append(forward_run(program, *job))
            if on_result is not None:
                on_result(j, runs[-1])
        return runs

    trainer.remote_forward = lambda jobs, on_result=None: remote_forward(jobs, on_result, stop_after=2)
    with pytest.raises(Cancelled):
        trainer.fit(trainset[:3])
    assert memory.version == 0 and len(memory.db.checkpoints("trainer/batch/00001/run/")) == 2
    trainer.remote_forward = remote_forward
    (report,) = trainer.fit(trainset[:3])
    assert len(sent) == 2 and len(sent[1]) == 1 and sent[1][0] == sent[0][2]  # only the run that had not returned
    assert report.version == 1 and memory.version == 1
    assert memory.db.checkpoints("trainer/batch/00001/run/") == {}
    assert len(memory.db.checkpoint("trainer/batch/00001")["runs"]) == 3
