"""JitMem stream checkpoints: every batch's trajectories are stored exactly once across crashes; a checkpoint
belongs to one task list."""

from __future__ import annotations

import json
from collections import Counter

import dspy
import pytest

import memento.optimize.jitmem_stream as jitmem_stream
from memento.core.errors import ConfigError
from memento.memory.trajectory_bank import TrajectoryBank
from memento.optimize.jitmem_stream import stream
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.testing import ScriptedEngine

CURATOR = "You are a memory curator"
JUDGE = "You are judging whether an agent"


class Crash(Exception):
    """Stands for the process dying at a given point."""


@pytest.fixture
def scripted(engine: ScriptedEngine, lm):
    engine.when(CURATOR, payload="PAYLOAD")
    engine.when(JUDGE, success=True, reasoning="supported")
    return engine


def _agent(tmp_path) -> JitMemAgent:
    """A fresh agent and bank handle on the same directory (what a restarted process builds)."""
    return JitMemAgent(ClosedBook("qa"), TrajectoryBank(tmp_path / "bank"), JitMemCurator())


def _examples(n: int = 6, topic: str = "Roman town") -> list[dspy.Example]:
    return [dspy.Example(question=f"Who founded the {topic} number {i}?", id=f"q{i}") for i in range(n)]


def _asked(engine: ScriptedEngine, start: int) -> set[str]:
    return {c.inputs["question"] for c in engine.calls[start:] if "question" in c.inputs and CURATOR not in c.prompt}


def _stored(tmp_path) -> Counter:
    return Counter(t.task_id for t, _ in TrajectoryBank(tmp_path / "bank").iter_all())


def _batches(order: list[str], size: int) -> list[set[str]]:
    return [set(order[i : i + size]) for i in range(0, len(order), size)]


def _order(tmp_path, examples) -> list[str]:
    probe = stream(_agent(tmp_path / "probe"), examples, batch_size=3, seed=0)
    return [item.task_id for item in probe.in_stream_order()]


def test_crash_after_checkpoint_before_bank_apply_is_repaired_not_rerun(tmp_path, scripted, monkeypatch):
    examples, checkpoint = _examples(), tmp_path / "stream.jsonl"
    first, second = _batches(_order(tmp_path, examples), 3)
    agent = _agent(tmp_path)
    real_apply = TrajectoryBank._apply

    def dies_on_second_batch(self, rows, *, key=None, **kwargs):
        if key is not None and key.endswith(":1"):
            raise Crash("killed between the checkpoint line and the bank write")
        return real_apply(self, rows, key=key, **kwargs)

    monkeypatch.setattr(TrajectoryBank, "_apply", dies_on_second_batch)
    with pytest.raises(Crash):
        stream(agent, examples, batch_size=3, seed=0, checkpoint=checkpoint)
    monkeypatch.setattr(TrajectoryBank, "_apply", real_apply)
    assert len(checkpoint.read_text().splitlines()) == 2  # the second batch was checkpointed...
    assert set(_stored(tmp_path)) == first  # ...but not applied

    start = len(scripted.calls)
    result = stream(_agent(tmp_path), examples, batch_size=3, seed=0, checkpoint=checkpoint)
    assert not _asked(scripted, start) & {ex.question for ex in examples if ex.id in second}  # not rerun
    assert _stored(tmp_path) == Counter({f"q{i}": 1 for i in range(6)})  # repaired from the checkpoint, once
    assert all(item.stored for item in result.items)
    # a further rerun changes nothing
    stream(_agent(tmp_path), examples, batch_size=3, seed=0, checkpoint=checkpoint)
    assert _stored(tmp_path) == Counter({f"q{i}": 1 for i in range(6)})


def test_crash_before_the_checkpoint_line_reruns_the_batch_once(tmp_path, scripted, monkeypatch):
    examples, checkpoint = _examples(), tmp_path / "stream.jsonl"
    second = _batches(_order(tmp_path, examples), 3)[1]
    real_append = jitmem_stream.append_batch

    def dies_on_second_line(path, meta, items, rows):
        if meta["batch"] == 1:
            raise Crash("killed before the checkpoint line was written")
        return real_append(path, meta, items, rows)

    monkeypatch.setattr(jitmem_stream, "append_batch", dies_on_second_line)
    with pytest.raises(Crash):
        stream(_agent(tmp_path), examples, batch_size=3, seed=0, checkpoint=checkpoint)
    monkeypatch.setattr(jitmem_stream, "append_batch", real_append)
    assert len(checkpoint.read_text().splitlines()) == 1 and sum(_stored(tmp_path).values()) == 3

    start = len(scripted.calls)
    stream(_agent(tmp_path), examples, batch_size=3, seed=0, checkpoint=checkpoint)
    assert {ex.question for ex in examples if ex.id in second} <= _asked(scripted, start)  # the batch ran again
    assert _stored(tmp_path) == Counter({f"q{i}": 1 for i in range(6)})


def test_crash_after_the_bank_applied_the_batch_stores_nothing_twice(tmp_path, scripted):
    examples, checkpoint = _examples(), tmp_path / "stream.jsonl"

    def dies_after_first_batch(batch, items):
        raise Crash("killed after the bank applied the batch")

    with pytest.raises(Crash):
        stream(_agent(tmp_path), examples, batch_size=3, seed=0, checkpoint=checkpoint, on_batch=dies_after_first_batch)
    assert sum(_stored(tmp_path).values()) == 3
    stream(_agent(tmp_path), examples, batch_size=3, seed=0, checkpoint=checkpoint)
    assert _stored(tmp_path) == Counter({f"q{i}": 1 for i in range(6)})


def test_a_checkpoint_refuses_another_task_list_of_the_same_length(tmp_path, scripted):
    checkpoint = tmp_path / "stream.jsonl"
    stream(_agent(tmp_path), _examples(), batch_size=3, seed=0, checkpoint=checkpoint)
    header = json.loads(checkpoint.read_text().splitlines()[0])
    assert len(header["tasks_sha256"]) == 64
    with pytest.raises(ConfigError, match="another stream .*tasks_sha256"):
        stream(_agent(tmp_path), _examples(topic="Greek city"), batch_size=3, seed=0, checkpoint=checkpoint)
    reordered = list(reversed(_examples()))  # same tasks, another order: another stream too
    with pytest.raises(ConfigError, match="tasks_sha256"):
        stream(_agent(tmp_path), reordered, batch_size=3, seed=0, checkpoint=checkpoint)
    assert _stored(tmp_path) == Counter({f"q{i}": 1 for i in range(6)})  # refused before running anything
