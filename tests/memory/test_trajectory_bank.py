"""TrajectoryBank: lossless storage, policies, BM25 over task text only, batch buffering, persistence."""

from __future__ import annotations

import copy
import sqlite3
import threading
from typing import Any

import pytest

from memento.core.errors import ConfigError, DataError
from memento.core.types import Evidence, Node, ToolCall, Trajectory, Usage
from memento.memory.trajectory_bank import TrajectoryBank, TrajectoryBankError


def _traj(task_text: str, *, task_id: str | None = None, body: str = "") -> Trajectory:
    kwargs: dict[str, Any] = {"task_id": task_id} if task_id else {}
    return Trajectory(
        task_text=task_text,
        inputs={"question": task_text},
        method="react",
        nodes=[
            Node(
                id="n1",
                question=f"sub-question about {body or 'nothing'}",
                answer="an answer",
                status="answered",
                evidence=[Evidence(url="https://example.org/a", title="A")],
            )
        ],
        tool_calls=[ToolCall(kind="search_web", args={"query": body or "q"}, result="result text", node_id="n1")],
        notes=["a note"],
        prediction={"answer": "42", "sources": ["https://example.org/a"]},
        usage=Usage(lm_calls=3, prompt_tokens=100),
        **kwargs,
    )


def test_lossless_round_trip_and_task_text_only_retrieval(location):
    loc = location()
    bank = TrajectoryBank(loc)
    original = _traj("Who founded the city of Lyon in Roman Gaul?", body="volcano eruption Pompeii")
    bank.add(original, accepted=True)
    bank.add(_traj("What is the boiling point of water at sea level?"), accepted=True)

    hits = bank.retrieve("Lyon founder Roman", k=3)
    assert [h[0].task_text for h in hits] == [original.task_text]
    stored, label, score = hits[0]
    assert stored.model_dump() == original.model_dump()  # nodes, tool calls, usage, timestamps: all kept
    assert label is None and score > 0
    # the body mentions Pompeii, but BM25 indexes task descriptions only
    assert bank.retrieve("volcano eruption Pompeii", k=3) == []


def test_success_only_drops_rejected_trajectories(location):
    loc = location()
    bank = TrajectoryBank(loc)
    assert bank.add(_traj("Capital of Australia?", task_id="bad"), accepted=False) is False
    assert bank.add(_traj("Capital of Austria?", task_id="good"), accepted=True) is True
    assert len(bank) == 1
    assert bank.get("bad") == []
    assert [t.task_id for t, _, _ in bank.retrieve("capital of Australia", k=5)] == ["good"]
    stats = bank.stats()
    assert (stats.stored, stats.dropped, stats.rejected_stored) == (1, 1, 0)


def test_all_with_labels_keeps_rejected_with_label(location):
    loc = location()
    bank = TrajectoryBank(loc, policy="all_with_labels")
    bank.add(_traj("Capital of Australia?", task_id="bad"), accepted=False)
    bank.add(_traj("Capital of Australia and its population?", task_id="good"), accepted=True)
    labels = {t.task_id: label for t, label, _ in bank.retrieve("capital Australia", k=5)}
    assert labels == {"bad": False, "good": True}
    assert bank.stats().rejected_stored == 1


def test_bank_does_not_change_within_a_batch(location):
    loc = location()
    bank = TrajectoryBank(loc)
    bank.add(_traj("Tallest mountain in Europe?", task_id="old"), accepted=True)
    before = bank.retrieve("tallest mountain Europe Alps", k=3)
    version = bank.version
    with bank.batch():
        bank.add(_traj("Tallest mountain in the Alps?", task_id="new1"), accepted=True)
        threads = [
            threading.Thread(target=bank.add, args=(_traj(f"Tallest mountain number {i}?"), True)) for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert bank.pending == 5
        assert len(bank) == 1 and bank.version == version
        assert bank.retrieve("tallest mountain Europe Alps", k=3) == before
    assert bank.pending == 0
    assert len(bank) == 6 and bank.version == version + 1
    assert "new1" in [t.task_id for t, _, _ in bank.retrieve("tallest mountain Alps", k=3)]


def test_add_serialises_at_add_time(location):
    loc = location()
    bank = TrajectoryBank(loc)
    trajectory = _traj("Who painted the Mona Lisa?")
    with bank.batch():
        bank.add(trajectory, accepted=True)
        trajectory.notes.append("changed after add")
    assert bank.get(trajectory.task_id)[0].notes == ["a note"]


def test_index_persists_and_is_rebuilt_when_stale(tmp_path):
    bank = TrajectoryBank(tmp_path)
    bank.add_many([(_traj(f"Question about river {name}?"), True) for name in ("Nile", "Amazon", "Danube")])
    bank.close()  # indexes what was written since the last retrieval and persists it
    assert (tmp_path / "bm25_index" / "watermark.json").exists()

    reopened = TrajectoryBank(tmp_path)
    assert reopened.retrieve("river Danube", k=1)[0][0].task_text == "Question about river Danube?"
    # another process appended a row behind the index's back: the watermark no longer matches, so it is rebuilt
    with sqlite3.connect(tmp_path / "trajectories.sqlite3") as conn:
        extra = _traj("Question about river Volga?")
        seq = conn.execute(
            "INSERT INTO trajectories(task_id, task_text, label) VALUES (?, ?, 1)", (extra.task_id, extra.task_text)
        ).lastrowid
        conn.execute("INSERT INTO records(seq, record) VALUES (?, ?)", (seq, extra.model_dump_json()))
    third = TrajectoryBank(tmp_path)
    assert third.retrieve("river Volga", k=1)[0][0].task_id == extra.task_id
    assert len(third) == 4 and third.stats().accepted == 4


def test_exclude_own_task_and_k_and_deepcopy(location):
    loc = location()
    bank = TrajectoryBank(loc)
    bank.add(_traj("Population of Lyon?", task_id="self"), accepted=True)
    bank.add(_traj("Population of Lyon in 1900?", task_id="other"), accepted=True)
    assert [t.task_id for t, _, _ in bank.retrieve("Population of Lyon?", k=3, exclude_task_id="self")] == ["other"]
    assert len(bank.retrieve("Population of Lyon?", k=1)) == 1
    assert bank.retrieve("Population of Lyon?", k=0) == []
    assert copy.deepcopy(bank) is bank


def test_empty_bank_and_bad_inputs(location):
    loc = location()
    bank = TrajectoryBank(loc)
    assert bank.retrieve("anything at all", k=3) == []
    assert bank.retrieve("the of and", k=3) == []  # stopwords only
    with pytest.raises(DataError, match="expects a Trajectory"):
        bank.add({"task_text": "x"}, accepted=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown trajectory bank policy"):
        TrajectoryBank(location("b"), policy="everything")  # type: ignore[arg-type]


def test_policy_mismatch_and_corrupt_file(tmp_path):
    TrajectoryBank(tmp_path / "a", policy="success_only")
    with pytest.raises(TrajectoryBankError, match="created with policy 'success_only'"):
        TrajectoryBank(tmp_path / "a", policy="all_with_labels")
    broken = tmp_path / "c"
    broken.mkdir()
    (broken / "trajectories.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(TrajectoryBankError, match="is not a trajectory bank"):
        TrajectoryBank(broken)


def test_batch_is_all_or_nothing(location):
    loc = location()
    bank = TrajectoryBank(loc)
    bank.add(_traj("Earlier task about glaciers?", task_id="earlier"), accepted=True)
    with pytest.raises(RuntimeError, match="LM went away"):
        with bank.batch():
            bank.add(_traj("Finished task about glaciers?", task_id="done"), accepted=True)
            raise RuntimeError("LM went away")
    assert [t.task_id for t, _ in bank.iter_all()] == ["earlier"]
    assert bank.pending == 0 and bank.version == 1 and len(bank) == 1
