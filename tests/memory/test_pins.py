"""Test-time readers are pinned: a read-only MEMENTO memory shows the version that was the head when it opened (a
writer's half-applied batch undone, its later commits invisible), a frozen case bank and a read-only trajectory bank
their rows up to a high-water mark; `memory_pins` reports what a program reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from memento.core.config import load_settings
from memento.core.types import Trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.dir_lock import DirectoryLock
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.memory.pins import memory_pins
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.registry import build_program
from memento.tasks.task import get_task

RULE_1 = "Search the exact title of the paper in quotes."
RULE_2 = "Check the ruling date against the court register."
RULE_3 = "Prefer the court's own website for its decisions."


def _rules(memory: MementoMemory) -> set[str]:
    return {row["data"]["text"] for row in memory.db.items("web_action")}


def _version_1(directory: Path) -> MementoMemory:
    writer = MementoMemory(directory)
    with writer.transaction(batch=1) as tx:
        writer.web_action.add(RULE_1, batch=1, tx=tx)
    writer.commit_version(batch=1)
    return writer


def test_a_reader_never_sees_a_half_applied_batch_nor_later_commits(tmp_path: Path) -> None:
    writer = _version_1(tmp_path / "mem")
    lock = DirectoryLock(tmp_path / "mem").acquire()  # a trainer at work holds the directory's lock
    with writer.transaction(batch=2) as tx:  # batch 2's first phase is written, its version not committed yet
        writer.web_action.add(RULE_2, batch=2, tx=tx)
    reader = MementoMemory(tmp_path / "mem", read_only=True)
    assert reader.version == 1 and _rules(reader) == {RULE_1}
    assert RULE_2 not in reader.web_action_rules("ruling date court register")
    assert reader.pin_info()["memento_memory"]["version"] == 1

    writer.commit_version(batch=2)  # the trainer finishes batch 2, then commits batch 3
    with writer.transaction(batch=3) as tx:
        writer.web_action.add(RULE_3, batch=3, tx=tx)
    writer.commit_version(batch=3)
    assert reader.version == 1 and _rules(reader) == {RULE_1}  # still version 1, for the reader's whole life
    assert reader.snapshot(1)["stores"]["web_action"][0]["text"] == RULE_1
    later = MementoMemory(tmp_path / "mem", read_only=True)
    assert later.version == 3 and _rules(later) == {RULE_1, RULE_2, RULE_3}
    assert writer.version == 3 and _rules(writer) == {RULE_1, RULE_2, RULE_3}  # nothing was undone on disk
    for memory in (reader, later, writer):
        memory.close()
    lock.release()


def test_items_written_without_a_version_and_no_writer_at_work_are_shown(tmp_path: Path) -> None:
    writer = _version_1(tmp_path / "mem")
    with writer.transaction(batch=2) as tx:  # written through the API, no version committed, no lock held
        writer.web_action.add(RULE_2, batch=2, tx=tx)
    writer.close()
    reader = MementoMemory(tmp_path / "mem", read_only=True)
    assert reader.version == 1 and _rules(reader) == {RULE_1, RULE_2}
    assert reader.pin_info()["memento_memory"]["end_seq"] == 2  # the pin says which changes it shows
    reader.close()


def test_a_clean_head_is_pinned_without_a_copy(tmp_path: Path) -> None:
    writer = _version_1(tmp_path / "mem")
    reader = MementoMemory(tmp_path / "mem", read_only=True)
    with writer.transaction(batch=2) as tx:
        writer.web_action.add(RULE_2, batch=2, tx=tx)
    writer.commit_version(batch=2)
    assert reader.db.conn.execute("PRAGMA database_list").fetchone()[2].endswith("memory.db")  # the file itself
    assert reader.version == 1 and _rules(reader) == {RULE_1}
    assert reader.pin_info()["memento_memory"] == {"version": 1, "end_seq": 1}
    reader.close()
    writer.close()


def test_a_frozen_trajectory_bank_and_case_bank_show_rows_up_to_their_high_water(tmp_path: Path) -> None:
    bank = TrajectoryBank(tmp_path / "jitmem")
    bank.add(Trajectory(task_id="t1", task_text="Who founded Lyon?", prediction={"answer": "x"}), accepted=True)
    frozen = TrajectoryBank(tmp_path / "jitmem", read_only=True)
    bank.add(Trajectory(task_id="t2", task_text="When was Lyon founded?", prediction={"answer": "y"}), accepted=True)
    assert [t.task_id for t, _, _ in frozen.retrieve("Lyon founded", k=5)] == ["t1"]
    assert [t.task_id for t, _ in frozen.iter_all()] == ["t1"]
    assert frozen.pin_info() == {"trajectory_bank": {"high_water": 1}}

    emb = HashingEmbedder(dim=32)
    cases = CaseBank(tmp_path / "cbr", emb)
    cases.add("Who founded Lyon?", "1. search the founder", reward=1.0)
    frozen_cases = CaseBank(tmp_path / "cbr", emb, frozen=True)
    cases.add("Who founded Lyon in Gaul?", "1. search Gaul", reward=1.0)
    assert [c.task_text for c, _ in frozen_cases.retrieve("founded Lyon", k=5)] == ["Who founded Lyon?"]
    assert frozen_cases.pin_info()["case_bank"]["high_water"] == 1
    assert len(CaseBank(tmp_path / "cbr", emb, frozen=True).retrieve("founded Lyon", k=5)) == 2


def test_memory_pins_reports_what_a_program_reads(tmp_path: Path) -> None:
    _version_1(tmp_path / "mem").close()
    settings = load_settings(flags={"lm": "openai/x"})
    task = get_task("qa")
    program = build_program("memento", task=task, settings=settings, memory_dir=tmp_path / "mem", frozen=True)
    assert memory_pins(program) == {"memento_memory": {"version": 1, "end_seq": 1}}
    assert memory_pins(build_program("closed_book", task=task, settings=settings)) is None


def test_a_ray_worker_reading_another_state_than_the_driver_pinned_refuses(tmp_path: Path) -> None:
    from memento.core.errors import DataError
    from memento.execution.forward_worker import WorkerSpec, _Built

    writer = _version_1(tmp_path / "mem")
    settings = load_settings(flags={"lm": "openai/x"})
    pinned = {"memento_memory": {"version": 1, "end_seq": 1}}  # what the driver recorded in results.json

    def spec(pins: dict) -> WorkerSpec:
        return WorkerSpec(key="k", settings=settings, method="memento", task="qa", memory=str(tmp_path / "mem"),
                          frozen=True, memory_version=1, memory_pins=pins)  # fmt: skip

    built = _Built(spec(pinned))  # the worker reads what the driver pinned: built
    assert memory_pins(built.program) == pinned
    built.program.memory.close()
    # an item written through the API without a version (no trainer at work): still version 1, one change more
    with writer.transaction(batch=None) as tx:
        writer.web_action.add(RULE_2, batch=1, tx=tx)
    with pytest.raises(DataError) as refused:
        _Built(spec(pinned))
    message = str(refused.value)
    assert "reads" in message and "memento_memory version 1 (change-log entry 2)" in message
    assert "not memento_memory version 1 (change-log entry 1) as this run pinned it" in message
    writer.close()
