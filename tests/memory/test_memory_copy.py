"""`memento memory copy`: a memory moves directory -> PostgreSQL -> directory losslessly (every version, the change
log, cases with embeddings and gate pairs, the Q-gate, trajectories and pages), and reads the same on both."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.errors import DataError
from memento.core.types import Node, PageResult, ToolCall, Trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.memory.memory_copy import copy_memory, gate_bytes, table_digests
from memento.memory.trajectory_bank import TrajectoryBank

PAGE = "Lugdunum was founded in 43 BC by Lucius Munatius Plancus.\x00 " * 50  # a NUL: PostgreSQL TEXT cannot hold it
ODD = "\x00 \uffff0 \uffff1 \uffff"  # a NUL and the escape PostgreSQL's text travels in, in texts of every store


def _fill(root) -> None:
    memory = MementoMemory(root)
    for batch in (1, 2):
        with memory.transaction(batch=batch) as tx:
            rule = memory.web_action.add(f"Search the name in quotes {batch}.", provenance=[f"t{batch}"], tx=tx)
            memory.web_action.reinforce(rule.id, support=2, task_ids=["t9"], batch=batch, tx=tx)
            memory.facts.add("Lyon", f"Lyon fact {batch}.{ODD}", sources=["https://lyon.test"], batch=batch, tx=tx)
            memory.craft.add(f"For cities, read the archive {batch}.", provenance=["t1"], batch=batch, tx=tx)
            tx.set_checkpoint(f"batch:{batch}", {"phase": "done"}, version=batch)
        memory.commit_version(batch=batch, note=f"batch {batch}")
    memory.rollback(1)  # a rolled-back version and its audited inverse changes travel too
    memory.close()
    bank = CaseBank(root / "cbr", HashingEmbedder(dim=32), min_pairs=0)
    cases = [bank.add(f"Who founded city {i}?{ODD}", f"plan {i}{ODD}", reward=float(i % 2)) for i in range(6)]
    bank.record(f"Who founded city 1?{ODD}", cases[:2], [1.0, 0.0])
    bank.evict(1)
    bank.close()
    jit = TrajectoryBank(root / "jitmem", policy="all_with_labels")
    page = PageResult.of_text(url="corpus://lyon", title="Lyon", text=PAGE)
    for i in range(3):
        traj = Trajectory(
            task_id=f"t{i}",
            task_text=f"Who founded Lyon {i}?{ODD}",
            nodes=[Node(id="root", question="q", answer="Plancus", status="answered")],
            tool_calls=[ToolCall(kind="scrape", args={"url": "corpus://lyon"}, page=page, node_id="root")],
        )
        with jit.batch(key=f"b{i}"):
            jit.add(traj, accepted=i != 1)
    jit.close()


def _reads(root) -> dict:
    memory = MementoMemory(root, read_only=True)
    bank = CaseBank(root / "cbr", HashingEmbedder(dim=32), frozen=True, min_pairs=0)
    jit = TrajectoryBank(root / "jitmem", policy="all_with_labels", read_only=True)
    out = {
        "versions": [(v["version"], v["status"], v["end_seq"]) for v in memory.versions()],
        "snapshot2": memory.snapshot(2)["stores"],
        "changes": [(c["seq"], c["op"], c["item_id"]) for c in memory.db.changes()],
        "rules": memory.web_action_rules("Search the name"),
        "cases": [(c.id, c.task_text, c.plan, s) for c, s in bank.retrieve("Who founded city 3?", k=3, policy="q")],
        "gate_updates": bank.gate.updates,
        "pairs": bank.logged_pairs()["reward"].tolist(),
        "trajectories": [
            (t.task_id, t.task_text, label, _text(t.tool_calls[0].page) == PAGE) for t, label, _ in jit.retrieve("Lyon")
        ],
    }
    memory.close()
    bank.close()
    jit.close()
    return out


@pytest.mark.usefixtures("postgres_server")
def test_copy_to_postgres_and_back_is_lossless(tmp_path, pg_location):
    source, back = tmp_path / "mem", tmp_path / "back"
    _fill(source)
    dsn = pg_location("copy")
    copy_memory(source, dsn)
    copy_memory(dsn, back)
    digests = table_digests(source)
    assert set(digests) == {"memory", "cbr", "jitmem"} and digests["jitmem"]["pages"][0] == 1
    assert table_digests(dsn) == digests and table_digests(back) == digests
    assert gate_bytes(dsn) == gate_bytes(back) == (source / "cbr" / "qgate.pt").read_bytes()
    runner = CliRunner()  # memento memory diff --against: the same contents, read through each backend
    for one, other in ((source, dsn), (dsn, back)):
        same = runner.invoke(app, ["memory", "diff", "--memory", str(one), "--against", str(other)])
        assert same.exit_code == 0 and "same contents" in same.output, same.output
    expected = _reads(source)
    assert _reads(dsn) == expected and _reads(back) == expected
    facts = [item["text"] for item in expected["snapshot2"]["facts"]]
    assert facts and all(text.endswith(ODD) for text in facts)
    assert all(case[1].endswith(ODD) for case in expected["cases"])
    assert all(traj[1].endswith(ODD) for traj in expected["trajectories"])
    # the copy keeps working as a memory: a new version continues the numbering, rows continue after the copied ones
    memory = MementoMemory(dsn)
    memory.facts.add("Paris", "Paris fact.")
    assert memory.commit_version(batch=3) == 3 and memory.db.changes()[-1]["seq"] == expected["changes"][-1][0] + 1


@pytest.mark.usefixtures("postgres_server")
def test_copy_to_postgres_refuses_a_non_empty_destination_and_a_missing_source(tmp_path, pg_location):
    source = tmp_path / "mem"
    MementoMemory(source).facts.add("Nile", "The Nile flows north.")
    dsn = pg_location("copy")
    runner = CliRunner()
    first = runner.invoke(app, ["memory", "copy", str(source), str(dsn)])
    assert first.exit_code == 0, first.output
    assert "memory: meta" in first.output and "verified identical" in first.output
    again = runner.invoke(app, ["memory", "copy", str(source), str(dsn)])
    assert again.exit_code == 1 and "already holds a memory part" in again.output
    with pytest.raises(DataError, match="no memory at"):
        copy_memory(tmp_path / "nothing", tmp_path / "dst")
    secret = runner.invoke(app, ["memory", "copy", str(source), "postgresql://u:hunter2@127.0.0.1/db"])
    assert secret.exit_code != 0 and "must not contain a password" in secret.output and "hunter2" not in secret.output


def _text(page: PageResult | None) -> str | None:
    return page.text if page is not None else None
