"""A damaged trainer checkpoint: one warning line, then a fresh start of that batch (never a traceback, never a batch
counted twice)."""

from __future__ import annotations

import logging
import sqlite3
import sys
from pathlib import Path

import dspy
import pytest

import memento.tasks.multihop  # noqa: F401  (registers the task)
from memento.core.config import Budgets, load_settings
from memento.memory.canonicalizer import Canonicalizer
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.optimize.memento_trainer import MementoTrainer
from memento.programs.memento_program import Memento
from memento.tasks.task import get_task
from memento.testing import OpenAICompatServer, scripted_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402

KEY = "trainer/batch/{:05d}"


def _trainer(tmp_path: Path, name: str):
    corpus, questions = write_data(tmp_path / "data")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    from memento.web.factory import web_tools_factory

    task = get_task("multihop")
    memory = MementoMemory(tmp_path / name, embedder=HashingEmbedder())
    program = Memento(
        task,
        memory=memory,
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=2, total_questions=3, steps_per_question=3),
        threads=1,
    )
    canonicalizer = Canonicalizer(memory.db, embedder=HashingEmbedder(), threshold=0.8)
    trainer = MementoTrainer(program, task.metric, memory, batch_size=3, threads=1, canonicalizer=canonicalizer)
    return trainer, memory, task.load(questions)


def _summary(memory: MementoMemory) -> dict:
    stats = memory.stats()
    return {
        "versions": [(v["version"], v["batch"], v["status"]) for v in memory.versions()],
        "m2": (stats["decomposition"]["rules"], stats["decomposition"]["total_support"]),
        "m3": (stats["web_action"]["rules"], stats["web_action"]["total_support"]),
        "facts": sorted((f.text, f.support) for f in memory.facts.all()),
        "craft": sorted((e.text, e.support) for e in memory.craft.all()),
    }


def _truncate(db: Path, batch: int) -> None:
    conn = sqlite3.connect(db)
    with conn:
        cur = conn.execute("UPDATE checkpoints SET value = substr(value, 1, 40) WHERE key = ?", (KEY.format(batch),))
        assert cur.rowcount == 1
    conn.close()


def test_a_truncated_checkpoint_restarts_its_batch_and_counts_nothing_twice(tmp_path, caplog, monkeypatch):
    engine = make_engine()
    dspy.configure(lm=scripted_lm(engine))
    reference, ref_memory, trainset = _trainer(tmp_path, "ref")
    reference.fit(trainset)
    expected = _summary(ref_memory)
    assert [v[:2] for v in expected["versions"]] == [(1, 1), (2, 2)] and expected["craft"]

    victim, memory, _ = _trainer(tmp_path, "victim")
    real_score = MementoTrainer._score

    def crash_in_batch_two(self, example, run):
        if run.id in {ex.id for ex in trainset[3:]}:
            raise RuntimeError("killed while scoring")
        return real_score(self, example, run)

    monkeypatch.setattr(MementoTrainer, "_score", crash_in_batch_two)
    with pytest.raises(RuntimeError, match="killed while scoring"):
        victim.fit(trainset)
    monkeypatch.setattr(MementoTrainer, "_score", real_score)
    assert memory.db.checkpoint(KEY.format(2))["phase"] == "consolidated"  # batch 2's M1/M3/M4 writes are in
    _truncate(memory.directory / "memory.db", 2)

    caplog.set_level(logging.WARNING, logger="memento.optimize.memento_trainer")
    reports = victim.fit(trainset)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "batch 2: the checkpoint" in warnings[0], warnings
    assert "unreadable (JSONDecodeError" in warnings[0] and "starting the batch afresh" in warnings[0]
    assert "0 uncommitted changes" not in warnings[0]  # the half-applied consolidation was undone first
    assert [r.version for r in reports] == [1, 2]
    assert _summary(memory) == expected  # nothing of batch 2 counted twice

    # the checkpoint of a committed batch: the batch is not run again, and the row is repaired
    _truncate(memory.directory / "memory.db", 1)
    caplog.clear()
    calls = len(engine.calls)
    reports = victim.fit(trainset)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "committed as version 1, so it is not run again" in warnings[0], warnings
    assert len(engine.calls) == calls and [r.version for r in reports] == [1, 2]
    assert _summary(memory) == expected
    caplog.clear()
    victim.fit(trainset)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_train_over_a_truncated_checkpoint_is_one_line_not_a_traceback(tmp_path):
    import subprocess

    from commands.test_train_resume import _command, _env

    corpus, data = write_data(tmp_path / "data")
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:3]))  # one batch
    with OpenAICompatServer(make_engine()) as server:
        args = _command(data, corpus, tmp_path / "mem", server)
        first = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-2000:]
        _truncate(tmp_path / "mem" / "memory.db", 1)
        sent = server.chat_requests
        again = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert server.chat_requests == sent  # the committed batch is not run again
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Traceback" not in again.stderr + again.stdout
    damaged = [line for line in again.stderr.splitlines() if "unreadable" in line]
    assert len(damaged) == 1 and "JSONDecodeError" in damaged[0] and "not run again" in damaged[0], again.stderr
