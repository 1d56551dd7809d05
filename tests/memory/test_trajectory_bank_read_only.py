"""TrajectoryBank review fixes: read-only (frozen) opening, batch keys applied once, writable handles see each other's
rows, a read-only handle is pinned to the bank as it opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.core.errors import ConfigError, DataError, MemoryFrozenError
from memento.core.types import Trajectory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent, build_jitmem
from memento.programs.jitmem_curator import JitMemCurator
from memento.testing import OpenAICompatServer, ScriptedEngine


def _traj(text: str, task_id: str) -> Trajectory:
    return Trajectory(task_id=task_id, task_text=text, prediction={"answer": "x"})


def _files(directory: Path) -> dict[str, bytes]:
    """Every file's bytes, but SQLite's own WAL/shared-memory sidecars (a WAL reader may create them empty)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def test_read_only_bank_refuses_a_missing_bank_and_creates_nothing(tmp_path):
    missing = tmp_path / "typo" / "jitmem"
    with pytest.raises(DataError, match="no trajectory bank at .*trajectories.sqlite3 is missing"):
        TrajectoryBank(missing, read_only=True)
    assert not (tmp_path / "typo").exists()

    # the registered method at test time: a mistyped memory dir is a one-line DataError, not an empty bank
    task = ClosedBook("qa").task
    with pytest.raises(DataError) as info:
        build_jitmem(task=task, settings=load_settings(), roles=None, memory_dir=tmp_path / "typo", frozen=True)
    assert "\n" not in str(info.value) and str(tmp_path / "typo" / "jitmem") in str(info.value)
    assert not (tmp_path / "typo").exists()


def test_read_only_bank_reads_without_touching_its_files(tmp_path):
    writer = TrajectoryBank(tmp_path / "bank")
    writer.add(_traj("Who founded the city of Lyon?", "lyon"), accepted=True)
    writer.close()
    # a stale/missing index must be rebuilt in memory only
    for path in (tmp_path / "bank" / "bm25_index").rglob("*"):
        if path.is_file():
            path.unlink()
    before = _files(tmp_path / "bank")

    bank = TrajectoryBank(tmp_path / "bank", read_only=True)
    assert [t.task_id for t, _, _ in bank.retrieve("When was Lyon founded?", k=3)] == ["lyon"]
    assert len(bank) == 1 and bank.stats().stored == 1
    with pytest.raises(MemoryFrozenError, match="read-only"):
        bank.add(_traj("Another task about Paris", "paris"), accepted=True)
    with pytest.raises(MemoryFrozenError):
        bank.apply_rows([{"task_id": "p", "task_text": "Paris", "accepted": True, "record": "{}"}], key="k")
    bank.rebuild_index()
    assert [t.task_id for t, _, _ in bank.retrieve("Lyon", k=1)] == ["lyon"]
    bank.close()
    assert _files(tmp_path / "bank") == before  # no index written, no database change

    # a storing agent cannot be built on a frozen bank
    with pytest.raises(ConfigError, match="store=False"):
        JitMemAgent(ClosedBook("qa"), TrajectoryBank(tmp_path / "bank", read_only=True), JitMemCurator())


def test_eval_with_a_mistyped_memory_dir_fails_in_one_line(tmp_path):
    data = tmp_path / "questions.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "Which river flows through Ardenford?", "answers": ["Lune"]}))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "d1", "title": "Ardenford", "text": "Ardenford lies on the Lune."}))
    wrong = tmp_path / "memroy"
    engine = ScriptedEngine(overrides={"answer": "Lune"})
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval", "--task", "multihop", "--data", str(data), "--corpus", str(corpus), "--threads", "1",
                "--method", "jitmem", "--memory", str(wrong), "--lm", "openai/x", "--api-base", server.api_base,
                "--out", str(tmp_path / "out"),
            ],
            env={"COLUMNS": "200", "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")},
        )  # fmt: skip
    assert result.exit_code == 1
    assert "trajectories.sqlite3 is missing" in result.output
    assert not wrong.exists()
    assert server.chat_requests == 0


def test_batch_key_applies_once_and_before_apply_runs_first(location):
    loc = location()
    bank = TrajectoryBank(loc)
    staged: list[list[dict]] = []

    def keep(rows: list[dict]) -> None:
        assert len(bank) == 0  # called before the rows are applied
        staged.append(rows)

    with bank.batch(key="run:0", before_apply=keep):
        bank.add(_traj("Who founded Lyon?", "a"), accepted=True)
        bank.add(_traj("Who founded Paris?", "b"), accepted=False)  # dropped under success_only
    assert [r["task_id"] for r in staged[0]] == ["a"] and len(bank) == 1 and bank.applied("run:0")
    assert bank.apply_rows(staged[0], key="run:0") is False and len(bank) == 1  # already applied: no duplicate
    assert bank.apply_rows(staged[0], key="other:0") is True and len(bank) == 2

    def crash(rows: list[dict]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError), bank.batch(key="run:1", before_apply=crash):
        bank.add(_traj("Who founded Rome?", "c"), accepted=True)
    assert len(bank) == 2 and not bank.applied("run:1")  # nothing applied when the checkpoint could not be written
    with pytest.raises(ConfigError, match="nested"), bank.batch(), bank.batch(key="inner"):
        pass


def test_a_long_lived_handle_sees_rows_written_through_another(location):
    loc = location()
    reader = TrajectoryBank(loc)
    writer = TrajectoryBank(loc)
    writer.add(_traj("Who founded the city of Lyon?", "lyon"), accepted=True)
    assert [t.task_id for t, _, _ in reader.retrieve("Lyon founded", k=3)] == ["lyon"]  # index built now
    writer.add(_traj("Who founded the city of Lyon again in Gaul?", "lyon2"), accepted=True)
    assert {t.task_id for t, _, _ in reader.retrieve("Lyon founded", k=3)} == {"lyon", "lyon2"}  # stale: reloaded
    frozen = TrajectoryBank(loc, read_only=True)
    assert len(frozen.retrieve("Lyon", k=5)) == 2
    writer.add(_traj("Lyon and its founders in Gaul", "lyon3"), accepted=True)
    # a read-only (test-time) handle is pinned to the bank as it opened (issue 23): a later write stays invisible
    assert len(frozen.retrieve("Lyon", k=5)) == 2 and frozen.high_water == 2
    assert len(TrajectoryBank(loc, read_only=True).retrieve("Lyon", k=5)) == 3  # a new handle sees it
