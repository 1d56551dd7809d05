"""The evaluation journal: appended as examples finish, read back to resume, robust to a line cut short."""

from __future__ import annotations

import json

import dspy
import pytest

from memento.core.errors import ConfigError
from memento.core.types import Trajectory
from memento.metrics.eval_journal import EvalJournal
from memento.metrics.evaluation import ExampleResult, evaluate
from memento.utils.scrub import register_secret

KEY = {"task": "qa", "method": "closed_book"}


def test_records_are_read_back_with_their_trajectories(tmp_path) -> None:
    journal = EvalJournal.in_dir(tmp_path, run_key=KEY)
    journal.append(ExampleResult(index=1, id="b", score=0.5))
    record = ExampleResult(index=0, id="a", score=1.0)
    record.trajectory = Trajectory(task_text="question a")
    journal.append(record)
    journal.append(ExampleResult(index=1, id="b", score=0.75))  # a later record of the same example wins
    journal.close()
    again = EvalJournal.in_dir(tmp_path, run_key=KEY).finished()
    assert [(r.id, r.score) for r in again] == [("a", 1.0), ("b", 0.75)]
    assert again[0].trajectory is not None and again[0].trajectory.task_text == "question a"


def test_a_line_cut_short_by_a_crash_is_skipped_and_appending_goes_on(tmp_path) -> None:
    journal = EvalJournal.in_dir(tmp_path, run_key=KEY)
    journal.append(ExampleResult(index=0, id="a", score=1.0))
    journal.close()
    with journal.path.open("a", encoding="utf-8") as handle:
        handle.write('{"example": {"index": 1, "id": "b", "sco')  # SIGKILL in the middle of a write
    assert [r.id for r in journal.finished()] == ["a"]


def test_a_journal_of_another_run_is_refused_in_one_line(tmp_path) -> None:
    EvalJournal.in_dir(tmp_path, run_key=KEY).append(ExampleResult(index=0, id="a"))
    other = EvalJournal.in_dir(tmp_path, run_key={**KEY, "method": "aet"})
    with pytest.raises(ConfigError, match="another run .*method") as caught:
        other.finished()
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="another run"):
        other.append(ExampleResult(index=1, id="b"))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "journal.jsonl").write_text("not json\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not an evaluation journal"):
        EvalJournal.in_dir(tmp_path / "junk", run_key=KEY).append(ExampleResult(index=0))


def test_secrets_never_reach_the_journal(tmp_path) -> None:
    register_secret("journal-secret-0042")
    journal = EvalJournal.in_dir(tmp_path, run_key=KEY)
    journal.append(ExampleResult(index=0, prediction={"answer": "the key is journal-secret-0042"}))
    journal.close()
    assert b"journal-secret-0042" not in journal.path.read_bytes()


def test_evaluate_appends_each_example_before_reporting_it(tmp_path) -> None:
    journal = EvalJournal.in_dir(tmp_path, run_key=KEY)
    seen_on_disk: list[int] = []

    def progress(record: ExampleResult) -> None:
        seen_on_disk.append(len(journal.path.read_text(encoding="utf-8").splitlines()) - 1)

    examples = [dspy.Example(id=f"q{i}", question=f"q{i}").with_inputs("question") for i in range(3)]
    result = evaluate(
        lambda question: dspy.Prediction(answer=question.upper()),
        examples,
        lambda ex, pred: float(pred.answer == ex.question.upper()),
        journal=journal,
        progress=progress,
    )
    journal.close()
    assert result.mean == 1.0 and seen_on_disk == [1, 2, 3]
    lines = journal.path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["run_key"] == KEY
    assert [r.id for r in journal.finished()] == ["q0", "q1", "q2"]


def test_a_journal_that_cannot_be_written_is_one_line(tmp_path) -> None:
    from memento.core.errors import DataError

    (tmp_path / "file").write_text("not a directory", encoding="utf-8")
    journal = EvalJournal.in_dir(tmp_path / "file", run_key=KEY)
    with pytest.raises(DataError, match="cannot write the evaluation journal") as caught:
        journal.append(ExampleResult(index=0))
    assert "\n" not in str(caught.value)
