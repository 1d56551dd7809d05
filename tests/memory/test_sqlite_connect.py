"""One SQLite connect helper for the three stores: a read-only open refuses writes and leaves no side files."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from memento.core.types import Trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.sqlite_connect import connect_sqlite
from memento.memory.sqlite_store import SQLiteStore
from memento.memory.trajectory_bank import TrajectoryBank


def _files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.is_file()}


def _side_files(directory: Path) -> set[str]:
    return {name for name in _files(directory) if name.endswith(("-wal", "-shm", "-journal"))}


def test_mode_ro_leaves_side_files_that_connect_sqlite_does_not(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with contextlib.closing(connect_sqlite(db)) as conn:
        conn.executescript("PRAGMA journal_mode=WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    assert _files(tmp_path) == {"x.db"}
    # the old way: mode=ro in a writable directory cannot checkpoint, so -wal/-shm stay behind
    with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as ro:
        assert ro.execute("SELECT x FROM t").fetchall() == [(1,)]
    assert _side_files(tmp_path)
    for name in _side_files(tmp_path):
        (tmp_path / name).unlink()
    reader = connect_sqlite(db, read_only=True)
    assert reader.execute("SELECT x FROM t").fetchall() == [(1,)]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("INSERT INTO t VALUES (2)")
    reader.close()
    assert _files(tmp_path) == {"x.db"}


def test_read_only_open_never_creates_the_database(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError):
        connect_sqlite(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_reading_each_store_leaves_no_side_files(tmp_path: Path) -> None:
    cases, trajectories, memory = tmp_path / "cbr", tmp_path / "jitmem", tmp_path / "memory"
    with CaseBank(cases, HashingEmbedder(dim=16)) as bank:
        bank.add("Who founded Acme?", "1. search Acme founder", reward=1.0)
    writer = TrajectoryBank(trajectories)
    writer.add(Trajectory(task_text="Who founded Acme?", prediction={"answer": "Ada"}, score=1.0), True)
    writer.close()
    store = SQLiteStore(memory)
    with store.transaction(batch=1) as tx:
        tx.put("craft", "c-1", {"id": "c-1", "text": "Search official sources first."}, text="Search official")
    store.close()
    before = {d: _files(d) for d in (cases, trajectories, memory)}
    assert not any(_side_files(d) for d in before)

    with CaseBank(cases, HashingEmbedder(dim=16), frozen=True) as frozen:
        assert [c.task_text for c, _ in frozen.retrieve("Acme founder", k=1)] == ["Who founded Acme?"]
    reader = TrajectoryBank(trajectories, read_only=True)
    assert [t.task_text for t, _, _ in reader.retrieve("Acme founder", k=1)] == ["Who founded Acme?"]
    reader.close()
    reader_store = SQLiteStore(memory, read_only=True)
    assert reader_store.head_version == 0
    reader_store.close()

    assert {d: _files(d) for d in (cases, trajectories, memory)} == before
